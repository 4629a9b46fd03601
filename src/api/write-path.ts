// The write path. Document writes are proposed on whichever node took the request: that node
// stamps the command (its clock, the principal, the idempotency key) and a follower's core
// forwards the proposal to the leader over the peer link; the request is answered when the
// entry is applied on that node. Membership and leadership requests, which act on the leader's
// own state, are forwarded over HTTP instead (forwardIfFollower). Forwarding happens once: a
// forwarded request that lands on a node that is not the leader either (leadership moved)
// fails with a retryable `leader_changed`.

import type { FastifyReply, FastifyRequest } from 'fastify';
import { encodeCommand, InvalidCommandError, type Command } from '../../fsm/index.ts';
import type { CommandResult } from '../../fsm/types.ts';
import { ShoalError } from '../errors.ts';
import { NONE } from '../raft/types.ts';
import { featureLevelAuditRole } from '../base/feature-level.ts';
import type { ClientRole } from '../security/roles.ts';
import type { ApiContext } from './context.ts';
import { badRequest, type CommandPathMap } from './validate.ts';
import { principalHeader, roleHeader, type Caller } from './auth.ts';

export const forwardedHeader = 'x-shoal-forwarded-by';
const forwardedRequestHeaders = ['content-type', 'if-match', 'if-none-match', 'idempotency-key'];
const relayedResponseHeaders = ['content-type', 'etag', 'retry-after', 'idempotent-replayed'];

/** Who sent the request, as its credential says (auth.ts): what the command and its audit record name. */
export function principalOf(req: FastifyRequest): string {
  // A request that never met the auth hook (a unit test's stand-in) is anonymous.
  return (req.caller as Caller | undefined)?.principal ?? 'anonymous';
}

/** Who sent a command, as it is stamped: the principal, and the role once the cluster takes it. */
export interface CallerStamp {
  principal: string;
  role?: ClientRole;
}

/**
 * The caller as a command names it. The role goes in only from feature level 5: a member of an
 * older release would refuse the command (its schema does not know the key), so below that level
 * commands stay as that release writes them (docs/architecture.md, feature levels).
 */
export function callerStamp(ctx: ApiContext, req: FastifyRequest): CallerStamp {
  const caller = req.caller as Caller | undefined;
  const principal = principalOf(req);
  if (caller === undefined || caller.via === 'none' || ctx.node.featureLevel < featureLevelAuditRole) return { principal };
  return { principal, role: caller.role };
}

/** The feature level a command stamped with `stamp` needs: level 5 if it names a role, else `base`. */
export function stampLevel(stamp: CallerStamp, base = 1): number {
  return stamp.role !== undefined ? Math.max(base, featureLevelAuditRole) : base;
}

/** The headers that name the original caller to the node a request is forwarded to (it trusts them only from a node). */
export function callerHeaders(req: FastifyRequest): Record<string, string> {
  return { [principalHeader]: req.caller.principal, [roleHeader]: req.caller.role };
}

/** Forwards the request to the leader if this node is not it. Returns true if it answered. */
export async function forwardIfFollower(ctx: ApiContext, req: FastifyRequest, reply: FastifyReply): Promise<boolean> {
  if (ctx.node.isLeader) return false;
  const leader = ctx.node.leaderId;
  if (leader === NONE) throw new ShoalError('no_leader', 'the cluster has no leader right now; retry shortly');
  if (req.headers[forwardedHeader] !== undefined) {
    throw new ShoalError('leader_changed', 'this node is no longer the leader; retry', { leader });
  }
  const addr = ctx.node.membership.get(leader)?.apiAddress;
  if (addr === undefined) throw new ShoalError('no_leader', `the leader ${leader} has no known API address yet; retry shortly`);
  const headers: Record<string, string> = { [forwardedHeader]: ctx.node.id, ...callerHeaders(req) };
  for (const h of forwardedRequestHeaders) {
    const v = req.headers[h];
    if (typeof v === 'string') headers[h] = v;
  }
  // fetch() is heavier than a kept-alive node:http request, but only membership and leadership
  // requests come this way (document writes go over the peer link), and they are rare.
  let res: Response;
  try {
    res = await ctx.peer.fetch(addr, req.url, {
      method: req.method, headers, signal: AbortSignal.timeout(ctx.proposalTimeoutMs + 1000),
      ...(req.body !== undefined ? { body: JSON.stringify(req.body) } : {}),
    });
  } catch (err) {
    throw new ShoalError('leader_changed', `could not reach the leader at ${addr}: ${(err as Error).message}; the outcome is unknown, retry`);
  }
  for (const h of relayedResponseHeaders) {
    const v = res.headers.get(h);
    if (v !== null) void reply.header(h, v);
  }
  await reply.status(res.status).send(Buffer.from(await res.arrayBuffer()));
  return true;
}

/**
 * Stamps and proposes a command on this node; resolves with the store's result once applied here.
 * A command the store refuses (encodeCommand checks what apply will) is a 400 in the request's
 * terms: `toRequestPath` names where each problem came from.
 */
export async function propose(ctx: ApiContext, req: FastifyRequest, cmd: Command, toRequestPath: CommandPathMap): Promise<CommandResult> {
  const key = req.headers['idempotency-key'];
  const stamp = callerStamp(ctx, req);
  let data: Uint8Array;
  try {
    data = encodeCommand({
      cmd, ts: Date.now(), ...stamp, ...(typeof key === 'string' && key !== '' ? { idempotencyKey: key } : {}),
    });
  } catch (err) {
    if (!(err instanceof InvalidCommandError)) throw err;
    throw badRequest(err.issues.map((i) => ({ path: toRequestPath(i.path), message: i.message })));
  }
  const { result } = await ctx.node.propose(data, { featureLevel: stampLevel(stamp) });
  return result as CommandResult;
}

/** Turns a command's error result into the typed API error. */
export function throwIfFailed(result: CommandResult): asserts result is Extract<CommandResult, { ok: true }> {
  if (!result.ok) throw new ShoalError(result.error.code, result.error.message, result.error.details as Record<string, unknown> | undefined);
}
