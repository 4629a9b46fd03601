// The routes of secrets at rest (docs/security.md, "Secrets at rest"): the keys move between
// nodes only here, each answer sealed to the asking node's certificate, and only to a node that
// proves it is that node (its certificate over mTLS, and the answer opens only with its key).
//
//   POST /v1/keyring/cluster-key   a voter fetches a cluster key it lacks (voters only)
//   POST /v1/keyring/data-key      a node fetches the data key of one secret, for one task that
//                                  this node is to run and whose spec names the secret (or, for a
//                                  registry login's password, whose image is on that registry)
//   POST /v1/keyring/unlock-key    an unlocked voter hands the unlock key to a voter (autolock)
//
// The keyring's admin routes are in keyring-routes.ts.

import { X509Certificate } from 'node:crypto';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { ShoalError } from '../errors.ts';
import { readKeyring, unlockKeyIdOf } from '../resources/cluster-keyring.ts';
import { tasksCollection } from '../resources/collections.ts';
import { specForTask, taskRecordSchema } from '../resources/records.ts';
import { ownerOf } from '../resources/task-owner.ts';
import { rawPrivateKey, unwrapDataKey } from '../resources/secret-crypto.ts';
import { isSealed, secretInStore } from '../resources/secrets.ts';
import { isRegistrySecretName, registryHostFor, registrySecretName } from '../resources/registry-logins.ts';
import { sealForCert } from '../security/sealed-box.ts';
import type { ApiContext } from './context.ts';
import { memberCert } from './node-cert-routes.ts';
import { readLocal } from './control-views.ts';
import { noQuery } from './request-schemas.ts';
import { validate } from './validate.ts';

const pem = z.string().min(1).max(16 * 1024);
const keyId = z.string().regex(/^[0-9a-f]{16}$/, 'a cluster key id is 16 hex digits');
const nodeIdField = z.string().min(1).max(64);
export const clusterKeyBody = z.object({ nodeId: nodeIdField, certPem: pem, keyId }).strict();
export const unlockKeyBody = z.object({ nodeId: nodeIdField, certPem: pem }).strict();
export const dataKeyBody = z.object({
  nodeId: nodeIdField, certPem: pem, taskId: z.string().min(1).max(64), secret: z.string().min(1).max(63),
}).strict();

function refuse(reason: 'not_voter' | 'wrong_node' | 'not_assigned' | 'not_named', message: string): never {
  throw new ShoalError('certificate_refused', message, { reason });
}

/**
 * The caller is the node it says (`nodeId`), with a certificate of this cluster: over TLS the
 * client certificate names it; under api.insecureLoopback nothing can be checked here, and the
 * answer, sealed to the presented certificate, is what protects the key.
 */
export function callingNode(ctx: ApiContext, req: FastifyRequest, nodeId: string, certPem: string): X509Certificate {
  const caller = req.caller;
  if (caller.via !== 'insecure' && (caller.via !== 'node' || caller.principal !== `node:${nodeId}`)) {
    refuse('wrong_node', `only node ${nodeId} itself may ask, with its own certificate (the caller is ${caller.principal})`);
  }
  return memberCert(ctx, nodeId, certPem);
}

/** This node's autolock, unlocked; refused when it keeps its keys in memory only or is locked. */
export function unlockedLock(ctx: ApiContext): NonNullable<ApiContext['nodeLock']> {
  const lock = ctx.nodeLock;
  if (lock === undefined) throw new ShoalError('cluster_key_unavailable', `node ${ctx.node.id} keeps no keys on disk (it runs without a data directory)`, { reason: 'not_held' });
  if (lock.locked) throw new ShoalError('node_locked', `node ${ctx.node.id} is autolocked: unlock it first (shoal unlock --addr ${ctx.node.membership.get(ctx.node.id)?.apiAddress ?? 'NODE'})`);
  return lock;
}

/** Refuses unless this node may use its cluster keys now. */
export function usableKeys(ctx: ApiContext): NonNullable<ApiContext['clusterKeys']> {
  const keys = ctx.clusterKeys;
  if (keys === undefined) throw new ShoalError('cluster_key_unavailable', `node ${ctx.node.id} keeps no cluster keys`, { reason: 'not_held' });
  if (keys.locked) throw new ShoalError('node_locked', `node ${ctx.node.id} is autolocked: it cannot open its keys until it is unlocked (shoal unlock --addr ${ctx.node.membership.get(ctx.node.id)?.apiAddress ?? 'NODE'})`);
  return keys;
}

export const secretKeyRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  app.post('/v1/keyring/cluster-key', { config: { role: 'admin' } }, async (req) => {
    const v = validate({ query: [noQuery, req.query], body: [clusterKeyBody, req.body] });
    // A removal or revocation committed before the request is applied here first.
    await ctx.node.readBarrier();
    callingNode(ctx, req, v.body.nodeId, v.body.certPem);
    if (!ctx.node.confState().voters.includes(v.body.nodeId)) refuse('not_voter', `node ${v.body.nodeId} is not a voter; cluster keys go to voters only (a learner asks for the data key of each secret it needs)`);
    const key = usableKeys(ctx).privateKey(v.body.keyId);
    if (key === undefined) throw new ShoalError('cluster_key_unavailable', `node ${ctx.node.id} does not hold cluster key ${v.body.keyId}`, { reason: 'not_held', keyId: v.body.keyId });
    ctx.node.log.info(`sent cluster key ${v.body.keyId} to voter ${v.body.nodeId}, sealed to its certificate`);
    return { sealed: sealForCert(v.body.certPem, rawPrivateKey(key).toString('base64')) };
  });

  app.post('/v1/keyring/data-key', { config: { role: 'admin' } }, async (req) => {
    const v = validate({ query: [noQuery, req.query], body: [dataKeyBody, req.body] });
    // The task's assignment as the leader last committed it, not as this node lags.
    await ctx.node.readBarrier();
    callingNode(ctx, req, v.body.nodeId, v.body.certPem);
    const taskDoc = ctx.store.get(tasksCollection, v.body.taskId);
    const task = taskDoc === undefined ? undefined : taskRecordSchema.safeParse(taskDoc.doc).data;
    if (task === undefined || task.nodeId !== v.body.nodeId || task.desired !== 'running') {
      refuse('not_assigned', `task ${v.body.taskId} is not assigned to node ${v.body.nodeId} to run; a data key goes only to the node that runs a task needing it`);
    }
    // Its service's spec, or its job's (a job's attempt is a task named after the job).
    const owner = ownerOf(readLocal(ctx), task);
    const spec = owner === undefined ? null : specForTask(owner, task);
    // A registry login's password goes to the node that pulls the image of a task on that registry.
    const pullsWith = spec === null ? undefined : registrySecretName(registryHostFor(spec));
    if (spec === null || (!spec.secrets.some((r) => r.name === v.body.secret) && pullsWith !== v.body.secret)) {
      refuse('not_named', `the spec of task ${v.body.taskId} does not name secret ${v.body.secret}${isRegistrySecretName(v.body.secret) ? ' (its image is not on that login\'s registry)' : ''}`);
    }
    const record = secretInStore(ctx.store, v.body.secret);
    if (record === undefined) throw new ShoalError('not_found', `no secret named '${v.body.secret}'`, { secret: v.body.secret });
    if (!isSealed(record)) throw new ShoalError('cluster_key_unavailable', `secret ${v.body.secret} is not encrypted yet (the cluster is below feature level 6, or the leader is re-encrypting it); the node reads it from its own store`, { reason: 'no_keyring' });
    const keyId = record.sealed.key.keyId;
    const key = usableKeys(ctx).privateKey(keyId);
    if (key === undefined) throw new ShoalError('cluster_key_unavailable', `node ${ctx.node.id} does not hold cluster key ${keyId}, which secret ${v.body.secret} is wrapped by`, { reason: 'not_held', keyId });
    const dataKey = unwrapDataKey(record.sealed.key, record.name, key);
    try {
      ctx.node.log.debug(`sent the data key of secret ${record.name} (version ${record.version}) to node ${v.body.nodeId} for task ${v.body.taskId}`);
      return { sealed: sealForCert(v.body.certPem, dataKey.toString('base64')), version: record.version, keyId };
    } finally {
      dataKey.fill(0);
    }
  });

  app.post('/v1/keyring/unlock-key', { config: { role: 'admin' } }, async (req) => {
    const v = validate({ query: [noQuery, req.query], body: [unlockKeyBody, req.body] });
    await ctx.node.readBarrier();
    callingNode(ctx, req, v.body.nodeId, v.body.certPem);
    if (!ctx.node.confState().voters.includes(v.body.nodeId)) refuse('not_voter', `node ${v.body.nodeId} is not a voter; the unlock key goes to voters only`);
    const want = readKeyring(ctx.store)?.keyring.autolock?.unlockKeyId;
    const held = unlockedLock(ctx).heldUnlockKey();
    if (want === undefined || held === undefined || unlockKeyIdOf(held) !== want) {
      throw new ShoalError('cluster_key_unavailable', `node ${ctx.node.id} does not hold the cluster's unlock key${want === undefined ? ' (autolock is off)' : ''}`, { reason: 'not_held' });
    }
    ctx.node.log.info(`handed the unlock key to voter ${v.body.nodeId}, sealed to its certificate`);
    return { sealed: sealForCert(v.body.certPem, held.toString('base64')) };
  });
};
