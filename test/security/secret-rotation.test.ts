// `shoal secret rotate-key` is resumable (docs/security.md, "Rotating the cluster key"): its
// progress is the keyring and the secrets in the store, so a leader loop cut short in the middle
// of re-wrapping (a crash, a change of leader) is finished by the next one, and the API answers a
// second request with the rotation under way rather than starting another. One voter, in memory.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeCommand, type JsonObject } from '../../fsm/index.ts';
import { featureLevelSecretsAtRest } from '../../src/base/feature-level.ts';
import { keyringBatchMax, SecretKeyring } from '../../src/control/secret-keyring.ts';
import { clusterKeyHoldersCollection, readKeyring } from '../../src/resources/cluster-keyring.ts';
import { secretsCollection } from '../../src/resources/collections.ts';
import { openSecretValue, unwrapDataKey } from '../../src/resources/secret-crypto.ts';
import { isSealed, secretRecordSchema } from '../../src/resources/secrets.ts';
import { singleNode, type SingleNode } from '../api/single-node.ts';

const quiet = { debug() {}, info() {}, warn() {}, error() {} };
const count = keyringBatchMax * 2 + 3;
let n: SingleNode;

/** Each secret's value, opened with the key its data key says it is wrapped by; and that key. */
function secrets(): { name: string; keyId: string; value: string }[] {
  return n.store.list(secretsCollection, { limit: 1000 }).items.map((d) => {
    const r = secretRecordSchema.parse(d.doc);
    if (!isSealed(r)) throw new Error(`${r.name} is in the clear`);
    const key = n.keys.privateKey(r.sealed.key.keyId);
    if (key === undefined) throw new Error(`no key ${r.sealed.key.keyId}`);
    return { name: r.name, keyId: r.sealed.key.keyId, value: openSecretValue(r.name, r.sealed, unwrapDataKey(r.sealed.key, r.name, key)).toString() };
  });
}

const rotate = async () => n.app.inject({ method: 'POST', url: '/v1/keyring/rotate', payload: {} });

/** The sole voter's holding report, as its cluster key agent writes it. */
async function report(keys: string[]): Promise<void> {
  const doc = { keys: [...keys].sort(), locked: false } as unknown as JsonObject;
  await n.node.propose(encodeCommand({ cmd: { op: 'put', collection: clusterKeyHoldersCollection, id: 'solo', doc }, ts: Date.now(), principal: 'shoal' }), { featureLevel: featureLevelSecretsAtRest });
}

beforeAll(async () => {
  n = await singleNode();
  for (let i = 0; i < count; i++) {
    const res = await n.app.inject({ method: 'PUT', url: `/v1/secrets/s${i}`, payload: { value: `value-${i}` } });
    expect(res.statusCode, res.body).toBe(200);
  }
  // The loop stops: the test plays the leader's passes one at a time.
  await n.keyring.close();
});

afterAll(async () => {
  await n.close();
});

describe('secret rotate-key', () => {
  it('a rotation cut short while re-wrapping is finished by the next leader loop, and a second request resumes it', async () => {
    const old = readKeyring(n.store)?.keyring.active as string;
    const started = await rotate();
    expect(started.statusCode, started.body).toBe(200);
    const { did, keyring } = started.json() as { did: string; keyring: { rotation: { id: string; to: string; phase: string } } };
    expect(did).toBe('started');
    expect(keyring.rotation.phase).toBe('adding');
    const { id, to } = keyring.rotation;
    expect(n.keys.heldIds()).toContain(to);

    // The voters' holding reports (the cluster key agent's): the sole voter holds the new key.
    await report([old, to]);

    // A first leader: makes the new key active, re-wraps one batch, and is gone.
    const first = new SecretKeyring({ node: n.node, store: n.store, keys: n.keys, log: quiet });
    expect(await first.pass()).toBe('done');
    expect(readKeyring(n.store)?.keyring).toMatchObject({ active: to, rotation: { id, phase: 'rewrapping' } });
    expect(await first.pass()).toBe('done');
    const half = secrets();
    expect(half.filter((s) => s.keyId === to)).toHaveLength(keyringBatchMax);
    expect(half.filter((s) => s.keyId === old)).toHaveLength(count - keyringBatchMax);

    // Asked again meanwhile: the same rotation, not a new one.
    const again = await rotate();
    expect(again.json()).toMatchObject({ did: 'nothing', keyring: { rotation: { id, phase: 'rewrapping' } } });
    // A secret written now is wrapped by the new key.
    expect((await n.app.inject({ method: 'PUT', url: '/v1/secrets/late', payload: { value: 'late-value' } })).statusCode).toBe(200);

    // The next leader finishes it: every data key wrapped by the new key, values unchanged, the old key retired.
    const next = new SecretKeyring({ node: n.node, store: n.store, keys: n.keys, log: quiet });
    await next.settle();
    const k = readKeyring(n.store)?.keyring;
    expect(k).toMatchObject({ active: to, rotation: null });
    expect(k?.keys.map((x) => x.id)).toEqual([to]);
    expect(k?.retired).toContain(old);
    const after = secrets();
    expect(after).toHaveLength(count + 1);
    expect(after.every((s) => s.keyId === to)).toBe(true);
    expect(after.find((s) => s.name === 'late')?.value).toBe('late-value');
    for (let i = 0; i < count; i++) expect(after.find((s) => s.name === `s${i}`)?.value).toBe(`value-${i}`);
    await next.close();
  });

  it('a rotation whose new key no voter holds (the leader that made it left) gets a new key from the next leader, and finishes', async () => {
    const old = readKeyring(n.store)?.keyring.active as string;
    const started = (await rotate()).json() as { keyring: { rotation: { id: string; to: string } } };
    const lost = started.keyring.rotation.to;
    // Its maker is gone with its disk; no voter reported holding it.
    n.keys.remove(lost);
    await report([old]);
    const next = new SecretKeyring({ node: n.node, store: n.store, keys: n.keys, log: quiet });
    expect(await next.pass()).toBe('done');
    const k = readKeyring(n.store)?.keyring;
    const to = k?.rotation?.to as string;
    expect(k?.rotation).toMatchObject({ id: started.keyring.rotation.id, phase: 'adding' });
    expect(to).not.toBe(lost);
    expect(k?.keys.map((x) => x.id).sort()).toEqual([old, to].sort());
    expect(k?.retired).toContain(lost);
    expect(n.keys.heldIds()).toContain(to);
    await report([old, to]);
    await next.settle();
    expect(readKeyring(n.store)?.keyring).toMatchObject({ active: to, rotation: null });
    expect(secrets().every((x) => x.keyId === to)).toBe(true);
    await next.close();
  });

  it('refuses a body it does not know, starting nothing', async () => {
    const bad = await n.app.inject({ method: 'POST', url: '/v1/keyring/rotate', payload: { force: true } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({ code: 'bad_request' });
    expect(readKeyring(n.store)?.keyring.rotation).toBeNull();
  });
});
