// GET /v1/cluster: who leads, the indexes, and each member's replication state. Per-member
// progress only exists on the leader, so a follower asks the leader's API and falls back to its
// own partial view (marked `view: "local"`) when the leader cannot be reached.
// The membership routes name a member by id or name, and check a change before making it: a node
// to add must answer as itself and of this cluster, a learner to promote must have caught up
// (member_not_ready otherwise; force=true overrides), as etcd does.

import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { ShoalError } from '../errors.ts';
import { caHolderWarning } from '../security/ca-holders.ts';
import { hostPortSchema } from '../base/host-port.ts';
import { nodeNameSchema } from '../node/identity.ts';
import { confChangeContext, type MemberRecord } from '../resources/membership.ts';
import { laggingEntriesMax, promoteRefusal } from '../resources/membership-refusals.ts';
import { NONE, type ConfChange } from '../raft/types.ts';
import type { ApiContext } from './context.ts';
import { nodeRefSchema } from './control-schemas.ts';
import { validate } from './validate.ts';
import { forwardIfFollower } from './write-path.ts';

export interface MemberView {
  id: string;
  name: string;
  peerAddress: string;
  apiAddress: string;
  role: 'voter' | 'learner';
  matchIndex: number | null;
  lag: number | null;
  rttMs: number | null;
  softwareVersion: string | null;
  /** The highest feature level the member's build supports, from its hello (null: not connected yet). */
  featureLevelMax: number | null;
  health: 'healthy' | 'lagging' | 'unreachable' | 'unknown';
}

export interface ClusterView {
  clusterId: string;
  view: 'leader' | 'local';
  /** The node whose view this is, and the software it runs. */
  node: string;
  softwareVersion: string;
  leader: string | null;
  term: number;
  commitIndex: number;
  appliedIndex: number;
  lastIndex: number;
  /** The committed cluster feature level; it rises once every member supports more (docs/architecture.md). */
  featureLevel: number;
  members: MemberView[];
}

/** Lag past which a member counts as lagging rather than healthy. */

export function clusterView(ctx: ApiContext): ClusterView {
  const st = ctx.node.status();
  const stats = new Map(ctx.node.peerStats().map((p) => [p.id, p]));
  const learners = new Set([...st.confState.learners, ...st.confState.learnersNext]);
  const members = st.membersInfo.map((m): MemberView => {
    const pr = st.progress?.[m.id];
    const self = m.id === st.id;
    const peer = stats.get(m.id);
    const match = self ? st.lastIndex : pr?.match ?? null;
    const lag = match === null ? null : Math.max(0, st.lastIndex - match);
    let health: MemberView['health'] = 'unknown';
    if (self) health = 'healthy';
    else if (pr) health = !pr.recentActive && !(peer?.connected ?? false) ? 'unreachable' : (lag ?? 0) > laggingEntriesMax ? 'lagging' : 'healthy';
    else if (peer) health = peer.connected ? 'healthy' : 'unreachable';
    return {
      ...m, role: learners.has(m.id) ? 'learner' : 'voter', matchIndex: match, lag,
      rttMs: peer?.rttMs ?? null, softwareVersion: self ? ctx.softwareVersion : peer?.softwareVersion ?? null,
      // A connected peer that announced no level runs the first release: level 1.
      featureLevelMax: self ? ctx.node.featureLevelSupported : peer?.featureLevelMax ?? (peer?.connected === true ? 1 : null), health,
    };
  });
  return {
    clusterId: ctx.clusterId, view: st.role === 'leader' ? 'leader' : 'local', node: st.id, softwareVersion: ctx.softwareVersion, leader: st.leader || null,
    term: st.term, commitIndex: st.commit, appliedIndex: st.applied, lastIndex: st.lastIndex, featureLevel: ctx.node.featureLevel, members,
  };
}

export const memberBody = z.object({
  id: nodeRefSchema,
  name: nodeNameSchema,
  peerAddress: hostPortSchema,
  apiAddress: hostPortSchema,
}).strict();
export const refParams = z.object({ id: nodeRefSchema }).strict();
export const transferBody = z.object({ to: nodeRefSchema.optional() }).strict();
const noQuery = z.object({}).strict();
const forceQuery = z.object({ force: z.enum(['true', 'false']).optional() }).strict();
const viewQuery = z.object({ local: z.string().optional() }).strict();
/** What a node about to be added must say about itself (GET /v1/cluster?local). */
const probeAnswer = z.object({ clusterId: z.string(), node: z.string() }).loose();

/** How long the leader waits for a new node's API to say who it is. */
const probeTimeoutMs = 1500;
const listHint = "list the members with: shoal cluster members";

/** "n3 (7cd79e0a3b1f2c4d)" */
export const labelOf = (m: { id: string; name: string }): string => (m.name === m.id ? m.id : `${m.name} (${m.id})`);

/**
 * The member a user means by `ref`: the member with that id, else the one member with that name.
 * A name several members share (possible in clusters older than the uniqueness rule) is refused
 * with the candidates; the caller must use an id.
 */
export function resolveMember(members: readonly MemberRecord[], ref: string): MemberRecord {
  const byId = members.find((m) => m.id === ref);
  if (byId !== undefined) return byId;
  const named = members.filter((m) => m.name === ref);
  if (named.length === 1 && named[0] !== undefined) return named[0];
  if (named.length > 1) {
    throw new ShoalError('ambiguous_name', `${named.length} members are named '${ref}': ${named.map(labelOf).join(', ')}; use the id`, {
      name: ref, candidates: named.map((m) => ({ id: m.id, name: m.name })),
    });
  }
  throw new ShoalError('not_found', `no member named '${ref}' or with that id; ${listHint}`, { member: ref });
}

/** Throws member_not_ready when `m` is a learner the leader should not promote yet. */
function checkPromotable(ctx: ApiContext, m: MemberRecord): void {
  const st = ctx.node.status();
  if (!st.confState.learners.includes(m.id) && !st.confState.learnersNext.includes(m.id)) return;
  const refusal = promoteRefusal(st, m);
  if (refusal === undefined) return;
  throw new ShoalError('member_not_ready', `not promoting ${labelOf(m)}: ${refusal.message}; wait, or force=true to promote it anyway`, {
    reason: refusal.reason, member: m.id, matchIndex: st.progress?.[m.id]?.match ?? null, lastIndex: st.lastIndex,
  });
}

/** Asks the node at `m.apiAddress` who it is; refuses a silent node, another node, another cluster. */
async function checkNewNode(ctx: ApiContext, m: MemberRecord): Promise<void> {
  const refuse = (reason: string, message: string, extra: Record<string, unknown> = {}): never => {
    throw new ShoalError('member_not_ready', `${message}; nothing was changed (force=true adds it anyway)`, { reason, member: m.id, apiAddress: m.apiAddress, ...extra });
  };
  let res: Response;
  try {
    res = await ctx.peer.fetch(m.apiAddress, '/v1/cluster?local', { signal: AbortSignal.timeout(probeTimeoutMs) });
  } catch (err) {
    const e = err as Error & { cause?: { code?: string } };
    const why = e.name === 'TimeoutError' ? `no answer in ${probeTimeoutMs} ms` : e.cause?.code ?? e.message;
    return refuse('unreachable', `cannot reach ${labelOf(m)}'s API at ${m.apiAddress} (${why}): start the node before adding it`);
  }
  if (!res.ok) return refuse('unreachable', `${labelOf(m)}'s API at ${m.apiAddress} answered HTTP ${res.status} to GET /v1/cluster?local`);
  let raw: unknown;
  try {
    raw = await res.json();
  } catch {
    raw = undefined;
  }
  const answer = probeAnswer.safeParse(raw);
  if (!answer.success) return refuse('unreachable', `${m.apiAddress} does not answer as a shoal node`);
  if (answer.data.clusterId !== ctx.clusterId) {
    refuse('cluster_mismatch', `${labelOf(m)} at ${m.apiAddress} belongs to cluster ${answer.data.clusterId}, not to this cluster ${ctx.clusterId} (another CA)`, { clusterId: answer.data.clusterId });
  }
  if (answer.data.node !== m.id) refuse('id_mismatch', `the node at ${m.apiAddress} is ${answer.data.node}, not ${m.id}`, { nodeId: answer.data.node });
}

async function membershipChange(ctx: ApiContext, cc: ConfChange): Promise<ClusterView> {
  await ctx.node.changeMembership(cc);
  return clusterView(ctx);
}

export const clusterRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  app.get('/v1/cluster', { config: { role: 'reader' } }, async (req) => {
    const v = validate({ query: [viewQuery, req.query] });
    const leader = ctx.node.leaderId;
    if (v.query.local !== undefined || leader === NONE || leader === ctx.node.id) return clusterView(ctx);
    const addr = ctx.node.membership.get(leader)?.apiAddress;
    if (addr === undefined) return clusterView(ctx);
    try {
      const res = await ctx.peer.fetch(addr, '/v1/cluster?local', { signal: AbortSignal.timeout(1000) });
      if (res.ok) return (await res.json()) as ClusterView;
    } catch {
      // fall through to the local view
    }
    return clusterView(ctx);
  });

  app.post('/v1/cluster/members', { config: { role: 'admin' } }, async (req, reply) => {
    const v = validate({ query: [forceQuery, req.query], body: [memberBody, req.body] });
    if (await forwardIfFollower(ctx, req, reply)) return reply;
    const members = ctx.node.membership.list();
    const sameId = members.find((m) => m.id === v.body.id);
    if (sameId !== undefined) throw new ShoalError('already_exists', `${labelOf(sameId)} is already a member`, { member: sameId.id });
    const sameName = members.find((m) => m.name === v.body.name);
    if (sameName !== undefined) {
      throw new ShoalError('already_exists', `the name '${v.body.name}' is taken by ${labelOf(sameName)}; names are unique in a cluster`, { member: sameName.id, name: v.body.name });
    }
    if (v.query.force !== 'true') await checkNewNode(ctx, v.body);
    const view = await membershipChange(ctx, { changes: [{ type: 'addLearner', node: v.body.id }], context: confChangeContext([v.body]) });
    return reply.status(201).send({ ...view, member: v.body });
  });

  app.post('/v1/cluster/members/:id/promote', { config: { role: 'admin' } }, async (req, reply) => {
    const v = validate({ params: [refParams, req.params], query: [forceQuery, req.query] });
    if (await forwardIfFollower(ctx, req, reply)) return reply;
    const m = resolveMember(ctx.node.membership.list(), v.params.id);
    if (v.query.force !== 'true') checkPromotable(ctx, m);
    return { ...(await membershipChange(ctx, { changes: [{ type: 'addVoter', node: m.id }] })), member: m };
  });

  app.delete('/v1/cluster/members/:id', { config: { role: 'admin' } }, async (req, reply) => {
    const v = validate({ params: [refParams, req.params], query: [noQuery, req.query] });
    if (await forwardIfFollower(ctx, req, reply)) return reply;
    const m = resolveMember(ctx.node.membership.list(), v.params.id);
    if (m.id === ctx.node.id && ctx.node.confState().voters.some((id) => id !== ctx.node.id)) {
      // A leader that removes itself can leave the rest without one (docs/raft.md, seed 5035):
      // hand leadership away first, and let the new leader remove this node.
      await ctx.node.transferLeadership();
      if (await forwardIfFollower(ctx, req, reply)) return reply;
    }
    const warning = caHolderWarning(ctx.store, m.id, m.name);
    return { ...(await membershipChange(ctx, { changes: [{ type: 'removeNode', node: m.id }] })), member: m, ...(warning !== undefined ? { warning } : {}) };
  });

  app.post('/v1/cluster/leader', { config: { role: 'admin' } }, async (req, reply) => {
    const v = validate({ query: [noQuery, req.query], body: [transferBody, req.body ?? {}] });
    if (await forwardIfFollower(ctx, req, reply)) return reply;
    const to = v.body.to !== undefined ? resolveMember(ctx.node.membership.list(), v.body.to).id : undefined;
    const leader = await ctx.node.transferLeadership(to);
    return { leader, term: ctx.node.currentTerm, name: ctx.node.membership.get(leader)?.name ?? null };
  });
  // GET /v1/cluster/snapshot is served by snapshot-routes.ts (streamed and bounded).
};
