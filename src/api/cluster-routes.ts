// GET /v1/cluster: who leads, the indexes, and each member's replication state. Per-member
// progress only exists on the leader, so a follower asks the leader's API and falls back to its
// own partial view (marked `view: "local"`) when the leader cannot be reached.

import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { ShoalError } from '../errors.ts';
import { confChangeContext } from '../node/membership.ts';
import { NONE, type ConfChange } from '../raft/types.ts';
import type { ApiContext } from './app.ts';
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
  health: 'healthy' | 'lagging' | 'unreachable' | 'unknown';
}

export interface ClusterView {
  clusterId: string;
  view: 'leader' | 'local';
  node: string;
  leader: string | null;
  term: number;
  commitIndex: number;
  appliedIndex: number;
  lastIndex: number;
  members: MemberView[];
}

/** Lag past which a member counts as lagging rather than healthy. */
const laggingEntries = 1000;

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
    else if (pr) health = !pr.recentActive && !(peer?.connected ?? false) ? 'unreachable' : (lag ?? 0) > laggingEntries ? 'lagging' : 'healthy';
    else if (peer) health = peer.connected ? 'healthy' : 'unreachable';
    return {
      ...m, role: learners.has(m.id) ? 'learner' : 'voter', matchIndex: match, lag,
      rttMs: peer?.rttMs ?? null, softwareVersion: self ? ctx.softwareVersion : peer?.softwareVersion ?? null, health,
    };
  });
  return {
    clusterId: ctx.clusterId, view: st.role === 'leader' ? 'leader' : 'local', node: st.id, leader: st.leader || null,
    term: st.term, commitIndex: st.commit, appliedIndex: st.applied, lastIndex: st.lastIndex, members,
  };
}

const memberBody = z.object({
  id: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'a node id as printed by shoal init'),
  name: z.string().min(1).max(64),
  peerAddress: z.string().regex(/^[^\s:]+:\d{1,5}$/, 'expected host:port'),
  apiAddress: z.string().regex(/^[^\s:]+:\d{1,5}$/, 'expected host:port'),
}).strict();
const idParams = z.object({ id: z.string().min(1).max(64) }).strict();
const transferBody = z.object({ to: z.string().min(1).max(64).optional() }).strict();
const noQuery = z.object({}).strict();
const viewQuery = z.object({ local: z.string().optional() }).strict();

async function membershipChange(ctx: ApiContext, cc: ConfChange): Promise<ClusterView> {
  await ctx.node.changeMembership(cc);
  return clusterView(ctx);
}

function requireMember(ctx: ApiContext, id: string): void {
  if (ctx.node.membership.get(id) === undefined) throw new ShoalError('not_found', `no member ${id}; see GET /v1/cluster`, { id });
}

export const clusterRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  app.get('/v1/cluster', async (req) => {
    const v = validate({ query: [viewQuery, req.query] });
    const leader = ctx.node.leaderId;
    if (v.query.local !== undefined || leader === NONE || leader === ctx.node.id) return clusterView(ctx);
    const addr = ctx.node.membership.get(leader)?.apiAddress;
    if (addr === undefined) return clusterView(ctx);
    try {
      const res = await fetch(`http://${addr}/v1/cluster?local`, { signal: AbortSignal.timeout(1000) });
      if (res.ok) return (await res.json()) as ClusterView;
    } catch {
      // fall through to the local view
    }
    return clusterView(ctx);
  });

  app.post('/v1/cluster/members', async (req, reply) => {
    const v = validate({ query: [noQuery, req.query], body: [memberBody, req.body] });
    if (await forwardIfFollower(ctx, req, reply)) return reply;
    if (ctx.node.membership.get(v.body.id) !== undefined) {
      throw new ShoalError('already_exists', `${v.body.id} is already a member`, { id: v.body.id });
    }
    const view = await membershipChange(ctx, { changes: [{ type: 'addLearner', node: v.body.id }], context: confChangeContext([v.body]) });
    return reply.status(201).send(view);
  });

  app.post('/v1/cluster/members/:id/promote', async (req, reply) => {
    const v = validate({ params: [idParams, req.params], query: [noQuery, req.query] });
    if (await forwardIfFollower(ctx, req, reply)) return reply;
    requireMember(ctx, v.params.id);
    return membershipChange(ctx, { changes: [{ type: 'addVoter', node: v.params.id }] });
  });

  app.delete('/v1/cluster/members/:id', async (req, reply) => {
    const v = validate({ params: [idParams, req.params], query: [noQuery, req.query] });
    if (await forwardIfFollower(ctx, req, reply)) return reply;
    requireMember(ctx, v.params.id);
    if (v.params.id === ctx.node.id && ctx.node.confState().voters.some((id) => id !== ctx.node.id)) {
      // A leader that removes itself can leave the rest without one (docs/raft.md, seed 5035):
      // hand leadership away first, and let the new leader remove this node.
      await ctx.node.transferLeadership();
      if (await forwardIfFollower(ctx, req, reply)) return reply;
    }
    return membershipChange(ctx, { changes: [{ type: 'removeNode', node: v.params.id }] });
  });

  app.post('/v1/cluster/leader', async (req, reply) => {
    const v = validate({ query: [noQuery, req.query], body: [transferBody, req.body ?? {}] });
    if (await forwardIfFollower(ctx, req, reply)) return reply;
    if (v.body.to !== undefined) requireMember(ctx, v.body.to);
    const leader = await ctx.node.transferLeadership(v.body.to);
    return { leader, term: ctx.node.currentTerm };
  });
  // GET /v1/cluster/snapshot is served by snapshot-routes.ts (streamed and bounded).
};
