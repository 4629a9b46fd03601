// The keyring's admin routes (docs/security.md, "Secrets at rest", "Autolock"): what the keyring
// holds and who holds its keys, `shoal secret rotate-key` and `recovery-key`, `shoal cluster
// autolock` and `shoal unlock`. The keys themselves move between nodes only through
// secret-key-routes.ts.
//
//   GET  /v1/keyring               the keyring: keys, who holds them, rotation, autolock
//   POST /v1/keyring/rotate        start a rotation of the cluster key, or say how far it is (leader)
//   POST /v1/keyring/recovery-key  make a new recovery key, answered once (leader)
//   POST /v1/cluster/autolock      autolock on (a new unlock key, answered once) or off (leader)
//   POST /v1/unlock                unlock this node with the unlock key

import { randomBytes, type KeyObject } from 'node:crypto';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { encodeCommand, type CommandResult, type JsonObject } from '../../fsm/index.ts';
import { featureLevelSecretsAtRest } from '../base/feature-level.ts';
import { keyringKeyOf } from '../control/secret-keyring.ts';
import { ShoalError } from '../errors.ts';
import { clusterKeysCollection, keyringId, readHoldings, readKeyring, unlockKeyIdOf, type Keyring } from '../resources/cluster-keyring.ts';
import { secretsCollection } from '../resources/collections.ts';
import { newClusterKey } from '../resources/secret-crypto.ts';
import { newRecoveryKey } from '../node/secrets/pending-keyring.ts';
import { isSealed, secretRecordSchema } from '../resources/secrets.ts';
import { allDocs } from '../resources/state.ts';
import { keyText, newUnlockKey, parseKeyText, unlockKeyPrefix } from '../security/unlock-key.ts';
import type { ApiContext } from './context.ts';
import { readOnlyQuery } from './control-schemas.ts';
import { noQuery } from './request-schemas.ts';
import { unlockedLock, usableKeys } from './secret-key-routes.ts';
import { validate } from './validate.ts';
import { callerStamp, forwardIfFollower } from './write-path.ts';

export const emptyBody = z.object({}).strict();
export const autolockBody = z.object({ on: z.boolean(), newKey: z.boolean().optional() }).strict();
export const unlockBody = z.object({ unlockKey: z.string().min(1).max(256) }).strict();

function secretsByKey(ctx: ApiContext): Record<string, number> {
  const out: Record<string, number> = {};
  for (const d of allDocs(ctx.store, secretsCollection)) {
    const r = secretRecordSchema.safeParse(d.doc);
    if (!r.success) continue;
    const k = isSealed(r.data) ? r.data.sealed.key.keyId : 'plain';
    out[k] = (out[k] ?? 0) + 1;
  }
  return out;
}

/** The keyring as written by an admin's request: a compare-and-set on the revision read, at feature level 6. */
async function writeKeyring(ctx: ApiContext, req: FastifyRequest, doc: Keyring, rev: number): Promise<void> {
  const stamp = callerStamp(ctx, req);
  const cmd = { op: 'put' as const, collection: clusterKeysCollection, id: keyringId, doc: doc as unknown as JsonObject, expect: { rev } };
  const { result } = await ctx.node.propose(encodeCommand({ cmd, ts: Date.now(), ...stamp }), { featureLevel: featureLevelSecretsAtRest });
  const r = result as CommandResult;
  if (!r.ok) throw new ShoalError('revision_mismatch', `the keyring changed while this request changed it (${r.error.message}); nothing was written, run the command again`, { collection: clusterKeysCollection });
}

/** The keyring, read at the leader's commit index; refused when there is none yet. */
async function currentKeyring(ctx: ApiContext): Promise<{ keyring: Keyring; rev: number }> {
  await ctx.node.readBarrier();
  const found = readKeyring(ctx.store);
  if (found === undefined) throw new ShoalError('cluster_key_unavailable', 'the cluster has no keyring yet (it is made when the cluster reaches feature level 6); retry in a moment', { reason: 'no_keyring' });
  return found;
}

/** Starts a rotation: a new key made on this leader, sealed to the recovery key, added beside the active one. */
async function startRotation(ctx: ApiContext, req: FastifyRequest, keyring: Keyring, rev: number): Promise<Keyring> {
  const keys = usableKeys(ctx);
  if (keys.privateKey(keyring.active) === undefined) {
    throw new ShoalError('cluster_key_unavailable', `this leader (${ctx.node.id}) does not hold the active cluster key ${keyring.active} yet; retry in a moment, or move leadership to a voter that does`, { reason: 'not_held' });
  }
  const key = newClusterKey();
  // On this leader's disk before the keyring names it: the other voters fetch it from here.
  keys.add(key.id, key.privateKey);
  const rotation = { id: randomBytes(8).toString('hex'), from: keyring.active, to: key.id, phase: 'adding' as const, startedAt: Date.now(), startedBy: req.caller.principal.slice(0, 256) };
  const next: Keyring = { ...keyring, keys: [...keyring.keys, keyringKeyOf(key, keyring.recovery, Date.now())], rotation };
  try {
    await writeKeyring(ctx, req, next, rev);
  } catch (err) {
    keys.remove(key.id);
    throw err;
  }
  ctx.node.log.info(`secret key rotation ${rotation.id} started by ${rotation.startedBy}: new cluster key ${key.id} replaces ${keyring.active}`);
  return next;
}

/** Seals every cluster key of the keyring to a new recovery key, made here; its text is answered once. */
async function makeRecoveryKey(ctx: ApiContext, req: FastifyRequest): Promise<{ recoveryKey: string; id: string }> {
  const { keyring, rev } = await currentKeyring(ctx);
  const keys = usableKeys(ctx);
  const missing = keyring.keys.filter((k) => keys.privateKey(k.id) === undefined).map((k) => k.id);
  if (missing.length > 0) throw new ShoalError('cluster_key_unavailable', `this leader does not hold cluster key ${missing.join(', ')} yet; retry in a moment`, { reason: 'not_held' });
  const { recovery, text } = newRecoveryKey();
  const next: Keyring = {
    ...keyring, recovery,
    keys: keyring.keys.map((k) => keyringKeyOf({ id: k.id, publicKey: k.publicKey, privateKey: keys.privateKey(k.id) as KeyObject }, recovery, k.createdAt)),
  };
  await writeKeyring(ctx, req, next, rev);
  ctx.node.log.info(`a new recovery key ${recovery.id} was made by ${req.caller.principal}; the cluster keys are sealed to it in the keyring (the key itself is not kept)`);
  return { recoveryKey: text, id: recovery.id };
}

/** Refuses a request that would change nothing, rather than answer as if it had (and, for on, replace the unlock key unasked). */
function refuseUnchanged(keyring: Keyring, on: boolean, newKey: boolean): void {
  const a = keyring.autolock;
  if (on && a !== null && !newKey) {
    throw new ShoalError('autolock_unchanged', `autolock is already on (unlock key ${a.unlockKeyId}, since ${new Date(a.since).toISOString()}); nothing was changed. To replace the unlock key: shoal cluster autolock on --new-key`, { autolock: true, unlockKeyId: a.unlockKeyId });
  }
  if (!on && a === null) throw new ShoalError('autolock_unchanged', 'autolock is already off; nothing was changed', { autolock: false });
}

async function setAutolock(ctx: ApiContext, req: FastifyRequest, on: boolean, newKey: boolean): Promise<{ autolock: boolean; unlockKey?: string; unlockKeyId?: string }> {
  const { keyring, rev } = await currentKeyring(ctx);
  refuseUnchanged(keyring, on, newKey);
  const lock = unlockedLock(ctx);
  if (!on) {
    lock.autolock(null);
    await writeKeyring(ctx, req, { ...keyring, autolock: null }, rev);
    ctx.node.log.info(`autolock turned off by ${req.caller.principal}: the voters keep their keys on disk in the clear again`);
    return { autolock: false };
  }
  const unlockKey = newUnlockKey();
  const unlockKeyId = unlockKeyIdOf(unlockKey);
  const before = keyring.autolock === null ? null : lock.heldUnlockKey() ?? null;
  // This leader seals its own keys first: it hands the unlock key to the other voters from memory.
  lock.autolock(unlockKey);
  try {
    await writeKeyring(ctx, req, { ...keyring, autolock: { unlockKeyId, since: Date.now() } }, rev);
  } catch (err) {
    lock.autolock(before);
    throw err;
  }
  ctx.node.log.info(`autolock turned on by ${req.caller.principal} (unlock key ${unlockKeyId}): every voter seals its keys with it`);
  return { autolock: true, unlockKey: keyText(unlockKeyPrefix, unlockKey), unlockKeyId };
}

export interface KeyringView {
  active: string;
  keys: { id: string; createdAt: number; recoverable: boolean }[];
  recovery: { id: string; createdAt: number } | null;
  rotation: Keyring['rotation'];
  autolock: boolean;
  scrubbedAt: number | null;
  holders: { id: string; name: string; voter: boolean; keys: string[]; locked: boolean }[];
  /** The secrets by the key their data key is wrapped by (`plain`: not encrypted yet). */
  secrets: Record<string, number>;
}

export function keyringView(ctx: ApiContext, keyring: Keyring): KeyringView {
  const holdings = readHoldings(ctx.store);
  const voters = new Set(ctx.node.confState().voters);
  return {
    active: keyring.active,
    keys: keyring.keys.map((k) => ({ id: k.id, createdAt: k.createdAt, recoverable: k.recovery !== null })),
    recovery: keyring.recovery === null ? null : { id: keyring.recovery.id, createdAt: keyring.recovery.createdAt },
    rotation: keyring.rotation, autolock: keyring.autolock !== null, scrubbedAt: keyring.scrubbedAt, secrets: secretsByKey(ctx),
    holders: ctx.node.membership.list().map((m) => {
      const h = holdings.get(m.id);
      return { id: m.id, name: m.name, voter: voters.has(m.id), keys: h?.keys ?? [], locked: h?.locked ?? false };
    }),
  };
}

export const keyringRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  app.post('/v1/keyring/rotate', { config: { role: 'admin' } }, async (req, reply) => {
    validate({ query: [noQuery, req.query], body: [emptyBody, req.body ?? {}] });
    if (await forwardIfFollower(ctx, req, reply)) return reply;
    const { keyring, rev } = await currentKeyring(ctx);
    if (keyring.rotation !== null) return { did: 'nothing', keyring: keyringView(ctx, keyring) };
    if (keyring.scrubbedAt === null || Object.keys(secretsByKey(ctx)).includes('plain')) {
      throw new ShoalError('cluster_key_unavailable', 'the leader is still encrypting the secrets written before feature level 6; retry in a moment', { reason: 'rotating' });
    }
    return { did: 'started', keyring: keyringView(ctx, await startRotation(ctx, req, keyring, rev)) };
  });

  app.post('/v1/keyring/recovery-key', { config: { role: 'admin' } }, async (req, reply) => {
    validate({ query: [noQuery, req.query], body: [emptyBody, req.body ?? {}] });
    if (await forwardIfFollower(ctx, req, reply)) return reply;
    return makeRecoveryKey(ctx, req);
  });

  app.post('/v1/cluster/autolock', { config: { role: 'admin' } }, async (req, reply) => {
    const v = validate({ query: [noQuery, req.query], body: [autolockBody, req.body] });
    if (await forwardIfFollower(ctx, req, reply)) return reply;
    return setAutolock(ctx, req, v.body.on, v.body.newKey === true);
  });

  app.post('/v1/unlock', { config: { role: 'admin' } }, async (req) => {
    const v = validate({ query: [noQuery, req.query], body: [unlockBody, req.body] });
    const lock = ctx.nodeLock;
    if (lock === undefined) throw new ShoalError('cluster_key_unavailable', `node ${ctx.node.id} keeps no keys on disk`, { reason: 'not_held' });
    const key = parseKeyText(unlockKeyPrefix, v.body.unlockKey);
    if (key === undefined) throw new ShoalError('unlock_key_invalid', `that is not an unlock key (it is ${unlockKeyPrefix} and 43 letters, digits, - and _, as 'shoal cluster autolock on' printed it)`, { reason: 'malformed' });
    if (!lock.locked) return { node: ctx.node.id, unlocked: true, already: true };
    const want = readKeyring(ctx.store)?.keyring.autolock?.unlockKeyId;
    if (want !== undefined && unlockKeyIdOf(key) !== want) {
      // The node's keys may be sealed with an older key (it was down when a new one was made): let the files decide.
      ctx.node.log.info(`unlock: the key given is not the keyring's current one (${want}); trying it on this node's keys`);
    }
    try {
      lock.unlock(key);
    } catch (err) {
      throw new ShoalError('unlock_key_invalid', `the unlock key does not open node ${ctx.node.id}'s keys: ${(err as Error).message}; nothing was changed`, { reason: 'does_not_open' });
    }
    ctx.node.log.info(`unlocked by ${req.caller.principal}: this node decrypts secrets and signs certificates again`);
    return { node: ctx.node.id, unlocked: true, already: false };
  });

  app.get('/v1/keyring', { config: { role: 'admin' } }, async (req) => {
    const v = validate({ query: [readOnlyQuery, req.query] });
    if (v.query.consistency !== 'stale') await ctx.node.readBarrier();
    const found = readKeyring(ctx.store);
    const keys = ctx.clusterKeys;
    return {
      keyring: found === undefined ? null : keyringView(ctx, found.keyring),
      node: { id: ctx.node.id, holds: keys?.heldIds() ?? [], locked: ctx.nodeLock?.locked ?? keys?.locked ?? false },
      rev: ctx.store.revision,
    };
  });
};
