// The secrets-at-rest agents act on a change of the store at once, with no poll (issue 45: an idle
// node wakes only for work): fake timers, never advanced, so a pass that waited for a timer would
// not run. The purge (src/node/secrets/secret-purge.ts) on the keyring's scrubbedAt; the cluster
// key agent (src/node/secrets/cluster-key-agent.ts) on a key retired; the leader's keyring loop
// (src/control/secret-keyring.ts) on a rotation's holders' reports.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DocumentStore, encodeCommand, type JsonObject } from '../../fsm/index.ts';
import { featureLevelSecretsAtRest } from '../../src/base/feature-level.ts';
import { keyringKeyOf, SecretKeyring } from '../../src/control/secret-keyring.ts';
import { ClusterKeyAgent } from '../../src/node/secrets/cluster-key-agent.ts';
import { SecretPurge } from '../../src/node/secrets/secret-purge.ts';
import { clusterKeyHoldersCollection, clusterKeysCollection, keyringId, readKeyring, type Keyring } from '../../src/resources/cluster-keyring.ts';
import { newClusterKey } from '../../src/resources/secret-crypto.ts';
import type { Tls } from '../../src/base/tls-material.ts';

const quiet = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} } as never;
const settle = async (): Promise<void> => { for (let i = 0; i < 20; i++) await Promise.resolve(); };

function storeFeeder() {
  const store = new DocumentStore();
  let index = 0;
  const put = (collection: string, id: string, doc: unknown): void => {
    const r = store.apply({ index: ++index, term: 1, featureLevel: featureLevelSecretsAtRest, logTimeMs: 1_000,
      data: encodeCommand({ cmd: { op: 'put', collection, id, doc: doc as JsonObject }, ts: 1_000, principal: 'shoal' }) });
    expect(r.ok).toBe(true);
  };
  return { store, put, index: () => index };
}

function keyringOf(over: Partial<Keyring> = {}): { keyring: Keyring; active: ReturnType<typeof newClusterKey> } {
  const active = newClusterKey();
  return { active, keyring: { active: active.id, keys: [keyringKeyOf(active, null, 1)], recovery: null, retired: [], scrubbedAt: 0, rotation: null, autolock: null, ...over } };
}

describe('secrets-at-rest agents wake on the store, not on a poll', () => {
  let dir = '';
  beforeEach(() => {
    vi.useFakeTimers();
    dir = mkdtempSync(path.join(tmpdir(), 'shoal-wake-'));
  });
  afterEach(() => {
    vi.useRealTimers();
    rmSync(dir, { recursive: true, force: true });
  });

  it('the purge rewrites the log as soon as the keyring says from where the store is clean', async () => {
    const s = storeFeeder();
    const purged: number[] = [];
    const purge = new SecretPurge({
      dataDir: dir, backupsDir: path.join(dir, 'backups'), store: s.store, log: quiet,
      node: { get appliedIndex() { return s.index(); }, purgeLog: async (through) => { purged.push(through); return { snapshot: through, segments: [], snapshots: [] }; } },
    });
    purge.start();
    await settle();
    expect(purged).toEqual([]);
    s.put('filler', 'a', { v: 1 });
    s.put(clusterKeysCollection, keyringId, keyringOf({ scrubbedAt: 1 }).keyring);
    await settle();
    expect(purged).toEqual([1]);
    purge.close();
  });

  it('the cluster key agent deletes a key as soon as the keyring retires it', async () => {
    const s = storeFeeder();
    const old = newClusterKey();
    const held = new Map([[old.id, old.privateKey]]);
    const keys = {
      locked: false, heldIds: () => [...held.keys()], privateKey: (id: string) => held.get(id),
      add: (id: string, k: typeof old.privateKey) => { held.set(id, k); }, remove: (id: string) => { held.delete(id); },
    };
    const { keyring, active } = keyringOf();
    held.set(active.id, active.privateKey);
    const agent = new ClusterKeyAgent({
      nodeId: 'n1', store: s.store, keys: keys as never, tls: {} as Tls, log: quiet, peerUnlock: false,
      node: { featureLevel: featureLevelSecretsAtRest, confState: () => ({ voters: ['n1'], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false }) as never, propose: async () => ({ index: 1, result: { ok: true } }) as never },
      members: () => ({ list: [], leader: 'n1' }), call: async () => { throw new Error('no call expected'); },
    });
    agent.start();
    s.put(clusterKeysCollection, keyringId, keyring);
    await settle();
    expect([...held.keys()].sort()).toEqual([old.id, active.id].sort());
    s.put(clusterKeysCollection, keyringId, { ...keyring, retired: [old.id] });
    await settle();
    expect([...held.keys()]).toEqual([active.id]);
    agent.close();
  });

  it('the leader\'s keyring loop moves a rotation on as soon as the last voter reports the new key', async () => {
    const s = storeFeeder();
    const { keyring, active } = keyringOf();
    const next = newClusterKey();
    const rotating: Keyring = { ...keyring, keys: [...keyring.keys, keyringKeyOf(next, null, 2)], rotation: { id: '00000000000000aa', from: active.id, to: next.id, phase: 'adding', startedAt: 2, startedBy: 'test' } };
    s.put(clusterKeysCollection, keyringId, rotating);
    s.put(clusterKeyHoldersCollection, 'n1', { keys: [active.id, next.id], locked: false });
    const held = new Map([[active.id, active.privateKey], [next.id, next.privateKey]]);
    const node = {
      id: 'n1', isLeader: true, failure: undefined, featureLevel: featureLevelSecretsAtRest, currentTerm: 1, appliedTerm: 1,
      on: () => node, off: () => node, logTimeNow: () => 1_000, settleOwnProposals: async () => {},
      confState: () => ({ voters: ['n1', 'n2'], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false }),
      propose: async (data: Uint8Array) => ({ index: 0, result: s.store.apply({ index: 1_000 + s.index(), term: 1, featureLevel: featureLevelSecretsAtRest, logTimeMs: 1_000, data }) }),
    };
    const loop = new SecretKeyring({ node: node as never, store: s.store, log: quiet, keys: { locked: false, heldIds: () => [...held.keys()], privateKey: (id: string) => held.get(id), add: () => {}, remove: () => {} } as never });
    loop.start();
    await settle();
    expect(readKeyring(s.store)?.keyring.rotation?.phase).toBe('adding');
    s.put(clusterKeyHoldersCollection, 'n2', { keys: [active.id, next.id], locked: false });
    await settle();
    expect(readKeyring(s.store)?.keyring.active).toBe(next.id);
    await loop.close();
  });
});
