// GET /v1/cluster: who leads, the indexes, and each member's replication state. Per-member
// progress only exists on the leader, so a follower asks the leader's API and falls back to its
// own partial view (marked `view: "local"`) when the leader cannot be reached.

import type { FastifyPluginAsync } from 'fastify';
import { NONE } from '../raft/types.ts';
import type { ApiContext } from './app.ts';

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

export const clusterRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  app.get('/v1/cluster', async (req) => {
    const local = Object.prototype.hasOwnProperty.call(req.query ?? {}, 'local');
    const leader = ctx.node.leaderId;
    if (local || leader === NONE || leader === ctx.node.id) return clusterView(ctx);
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
};
