// Joining a cluster with a token. GET /v1/join/ca (public) shows the CA certificate: the new
// machine checks its SHA-256 against the token before it sends anything secret. POST /v1/join
// (public: the token is the credential) redeems the token and signs the certificate request the
// machine made for a key it keeps: a node's certificate (and the node is added as a learner), or
// a client's (`shoal login`). The leader does it, as it holds the CA key and changes membership.
// Every redemption is a committed write (the token record gains it); every refusal is an event.

import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { AuthFailureLimiter } from './auth-rate-limit.ts';
import { ShoalError } from '../errors.ts';
import { hostPortSchema, splitHostPort } from '../base/host-port.ts';
import { confChangeContext, type MemberRecord } from '../resources/membership.ts';
import { nodeNameSchema } from '../node/identity.ts';
import { readRotation, withChain } from '../security/ca-rotation-authority.ts';
import { isValidId } from '../security/identity.ts';
import { isValidPrincipal, principalRule } from '../security/principal.ts';
import { parseToken, redeemRefusal, redemptionTxn, refusalText, type ParsedToken, type RefusalReason, type TokenRecord } from '../security/tokens.ts';
import type { ApiContext } from './context.ts';
import { proposeCommand, readToken, requireAuthority } from './token-routes.ts';
import { validate } from './validate.ts';
import { vipAddresses } from '../resources/vips.ts';
import { forwardIfFollower } from './write-path.ts';

/** A request is a few hundred bytes of PEM (src/security/csr.ts checks the same bound). */
const csrPemBytesMax = 8 * 1024;
const idSchema = z.string().refine(isValidId, 'an id is 1-64 of A-Z a-z 0-9 . _ -, starting with a letter or digit');
export const joinBody = z.discriminatedUnion('kind', [
  z.object({
    kind: z.literal('node'), token: z.string().max(200), csr: z.string().max(csrPemBytesMax),
    nodeId: idSchema, name: nodeNameSchema, peerAddress: hostPortSchema, apiAddress: hostPortSchema,
  }).strict(),
  z.object({ kind: z.literal('client'), token: z.string().max(200), csr: z.string().max(csrPemBytesMax), name: z.string().refine(isValidPrincipal, `a principal is ${principalRule}`) }).strict(),
]);
export type JoinBody = z.infer<typeof joinBody>;
const noQuery = z.object({}).strict();
/** The X.509 code loads only when a join comes: every node start would pay a tenth of a second otherwise. */
const csrCode = (): Promise<typeof import('../security/csr.ts')> => import('../security/csr.ts');

/** The answer to a node's join: what it writes into its data directory. */
export interface JoinAnswer {
  clusterId: string;
  caPem: string;
  certPem: string;
  role: 'voter' | 'learner' | 'client';
  clientRole?: string;
  members: MemberRecord[];
}

function refuse(ctx: ApiContext, reason: RefusalReason, tokenId: string, from: string): never {
  ctx.events?.recordEvent('token.refused', tokenId, { reason, from });
  throw new ShoalError('token_invalid', `join refused: ${refusalText[reason]}`, { reason, token: tokenId });
}

/** Refuses a node id or name already in use, or an id removed before (ids are never reused). */
function checkNewMember(ctx: ApiContext, b: Extract<JoinBody, { kind: 'node' }>): void {
  if (ctx.node.isRemoved(b.nodeId)) throw new ShoalError('removed', `node id ${b.nodeId} was removed from this cluster; a joining node makes a new id`, { member: b.nodeId });
  const members = ctx.node.membership.list();
  const same = members.find((m) => m.id === b.nodeId || m.name === b.name);
  if (same !== undefined) {
    throw new ShoalError('already_exists', `${same.id === b.nodeId ? `node ${b.nodeId}` : `the name '${b.name}'`} is already a member (${same.name}, ${same.id}); names are unique in a cluster`, { member: same.id, name: b.name });
  }
}

/** How long a join with the founding token waits for this node to write its record. */
const foundingWaitMs = 10_000;

function waitFor(p: Promise<unknown>, ms: number): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<void>((r) => { timer = setTimeout(r, ms); })]).finally(() => clearTimeout(timer));
}

/** Read-decide-write rounds before a redemption that keeps losing its compare-and-set gives up. */
const redeemAttemptsMax = 5;

/**
 * Redeems the token once, as a compare-and-set on what was read: of two redemptions at once only
 * one applies; the other reads again, and is refused (used) or, with uses left, tries again.
 */
async function redeem(ctx: ApiContext, token: ParsedToken, subject: string, name: string, from: string, kind: JoinBody['kind']): Promise<TokenRecord> {
  for (let attempt = 1; attempt <= redeemAttemptsMax; attempt++) {
    await ctx.node.readBarrier();
    const found = readToken(ctx, token.id);
    if (found === undefined && ctx.foundingToken?.pendingId() === token.id) {
      // The token `shoal init` printed, used before this node has written its record: wait for it.
      await waitFor(ctx.foundingToken.written, foundingWaitMs);
      if (ctx.foundingToken.pendingId() !== token.id) continue;
      throw new ShoalError('no_leader', `the token shoal init printed is not written yet (this node writes it once it leads); nothing was changed, retry`, { token: token.id });
    }
    const now = Date.now();
    const refusal = redeemRefusal(found?.record, token, now);
    if (refusal !== undefined || found === undefined) return refuse(ctx, refusal ?? 'unknown', token.id, from);
    if ((found.record.role === 'client') !== (kind === 'client')) return refuse(ctx, 'wrong_role', token.id, from);
    const result = await proposeCommand(ctx, `join:${token.id}`, redemptionTxn(found.record, found.rev, { atMs: now, subject, name, from }));
    if (!result.ok) throw new ShoalError(result.error.code, result.error.message, result.error.details);
    if (result.kind === 'txn' && result.succeeded) return found.record;
  }
  throw new ShoalError('proposal_dropped', `the token ${token.id} kept changing while this join redeemed it (${redeemAttemptsMax} attempts); nothing was changed, retry`, { token: token.id });
}

/** Conf-change attempts while another membership change is pending (two joins at once). */
const addLearnerAttemptsMax = 20;
const addLearnerRetryMs = 250;

/** Adds the joined node as a learner; the token is spent, so a pending change is waited out, not refused. */
async function addLearner(ctx: ApiContext, member: MemberRecord): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await ctx.node.changeMembership({ changes: [{ type: 'addLearner', node: member.id }], context: confChangeContext([member]) });
      return;
    } catch (err) {
      if (!(err instanceof ShoalError) || err.code !== 'proposal_dropped' || attempt >= addLearnerAttemptsMax) throw err;
      await new Promise((r) => setTimeout(r, addLearnerRetryMs));
    }
  }
}

async function joinNode(ctx: ApiContext, b: Extract<JoinBody, { kind: 'node' }>, token: ParsedToken, from: string): Promise<JoinAnswer> {
  const authority = requireAuthority(ctx);
  const signer = authority.signer();
  if (signer === undefined) throw new ShoalError('ca_key_unavailable', `this leader (${ctx.node.id}) does not hold the cluster CA key; retry when a voter that holds it leads`);
  const { verifyCsr, signNodeCsr } = await csrCode();
  const csr = await verifyCsr(b.csr);
  if (csr.commonName !== b.nodeId) throw new ShoalError('bad_request', `the certificate request names ${csr.commonName}, not ${b.nodeId}`, { problems: [{ path: 'body.csr', message: 'CN must be body.nodeId' }] });
  checkNewMember(ctx, b);
  const record = await redeem(ctx, token, b.nodeId, b.name, from, 'node');
  // The cluster's virtual IPs too (issue 38): the API answers on a VIP under any node's certificate.
  const hosts = ['127.0.0.1', 'localhost', '::1', splitHostPort(b.peerAddress).host, splitHostPort(b.apiAddress).host, ...vipAddresses(ctx.store)];
  const signed = await signNodeCsr(signer, csr, b.nodeId, { hosts });
  const member: MemberRecord = { id: b.nodeId, name: b.name, peerAddress: b.peerAddress, apiAddress: b.apiAddress };
  await addLearner(ctx, member);
  ctx.events?.recordEvent('token.redeemed', token.id, { role: record.role, node: b.nodeId, name: b.name, from, serial: signed.serial });
  return { clusterId: ctx.clusterId, caPem: authority.caPem, certPem: withChain(signed.certPem, signer), role: record.role, members: ctx.node.membership.list() };
}

async function joinClient(ctx: ApiContext, b: Extract<JoinBody, { kind: 'client' }>, token: ParsedToken, from: string): Promise<JoinAnswer> {
  const authority = requireAuthority(ctx);
  const signer = authority.signer();
  if (signer === undefined) throw new ShoalError('ca_key_unavailable', `this leader (${ctx.node.id}) does not hold the cluster CA key; retry when a voter that holds it leads`);
  const { verifyCsr } = await csrCode();
  const csr = await verifyCsr(b.csr);
  const record = await redeem(ctx, token, b.name, b.name, from, 'client');
  const clientRole = record.clientRole ?? 'reader';
  // The same certificate `shoal credential` and `init` make (src/security/client-certs.ts), for the caller's own key.
  const { issueClientCert } = await import('../security/client-certs.ts');
  const signed = await issueClientCert(signer, { principal: b.name, role: clientRole, publicKey: csr.publicKey });
  ctx.events?.recordEvent('token.redeemed', token.id, { role: 'client', principal: b.name, clientRole, from, serial: signed.serial });
  return { clusterId: ctx.clusterId, caPem: authority.caPem, certPem: withChain(signed.certPem, signer), role: 'client', clientRole, members: [] };
}

/**
 * Refused joins an address may have: 10 at once, then one more every 6 s (10 a minute). Tokens
 * carry 256 random bits, so this is about log noise and load more than about guessing; it also
 * bounds the refusal events written to the store.
 */
const joinRefusalLimits = { burst: 10, refillPerSecond: 10 / 60, addressesMax: 10_000 };

export const joinRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  const limiter = new AuthFailureLimiter(joinRefusalLimits);
  app.get('/v1/join/ca', { config: { role: 'public' } }, async (req) => {
    validate({ query: [noQuery, req.query] });
    const authority = requireAuthority(ctx);
    const retiredFingerprints = readRotation(ctx.store)?.rotation.retiredFingerprints ?? [];
    return { clusterId: ctx.clusterId, caPem: authority.caPem, fingerprint: authority.fingerprint, retiredFingerprints };
  });

  app.post('/v1/join', { config: { role: 'public' } }, async (req, reply) => {
    const v = validate({ query: [noQuery, req.query], body: [joinBody, req.body] });
    const from = req.ip;
    const waitS = limiter.retryAfterSeconds(from);
    if (waitS > 0) {
      throw new ShoalError('too_many_requests', `too many refused joins from ${from}; retry in ${waitS} s`, { limit: 'joinRefusals', retryAfterMs: waitS * 1000 });
    }
    try {
      const token = parseToken(v.body.token);
      if (token === null) return refuse(ctx, 'malformed', 'malformed', from);
      if (token.caFingerprint !== requireAuthority(ctx).fingerprint) {
        // A token made before a CA rotation names the retired CA: say so rather than "another cluster".
        const retired = readRotation(ctx.store)?.rotation.retiredFingerprints.includes(token.caFingerprint) === true;
        return refuse(ctx, retired ? 'ca_rotated' : 'other_cluster', token.id, from);
      }
      if (await forwardIfFollower(ctx, req, reply)) return reply;
      const answer = v.body.kind === 'node' ? await joinNode(ctx, v.body, token, from) : await joinClient(ctx, v.body, token, from);
      return await reply.status(201).send(answer);
    } catch (err) {
      if (err instanceof ShoalError && err.code === 'token_invalid') limiter.fail(from);
      throw err;
    }
  });
};
