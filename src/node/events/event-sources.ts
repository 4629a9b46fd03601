// What turns a node's state changes into events (src/node/events/event-log.ts). Every node follows the
// same state; only the leader records the cluster's facts, so each is recorded once:
//
//   leader.elected            cluster  the new leader, once per term it leads
//   member.added / .removed / .promoted   cluster  the leader, from the membership it applies
//   member.unreachable / .back   cluster (leader's view) and local (each node's view), after a
//                             peer's connection stayed down for unreachableAfterMs
//   feature_level.raised      cluster  the leader, when the raise applies
//   leader.changed            local    every node, when the leader it follows changes
//   snapshot.taken / .installed   local  this node took one, or received one from the leader
//   node.failed / .recovered  local    this node stopped serving (RaftNode.failure), or its disk recovered
//
// Membership, peers, snapshots and failure are polled (a few cheap getters): the node emits no
// event for each of them, and a poll cannot fall behind. A poll runs when something may have
// changed (within pollMs of an entry applied, which may carry a membership change; at once when
// a peer's connection closed, the node failed or the leader changed), every `pollMs` while something waits on time (a peer's
// connection down, a snapshot not yet explained), and otherwise every `sweepMs` (a snapshot taken
// or a disk recovered on an idle node is recorded by then): an idle healthy node wakes for it
// once in `sweepMs`, not every second (issue 45).

import type { RaftNode } from '../raft-node.ts';
import type { JsonObject } from '../../../fsm/index.ts';
import type { EventLog } from './event-log.ts';

export interface EventSourceOptions {
  /** The poll period while something waits on time (default 1 s). */
  pollMs?: number;
  /** The poll period otherwise (default 10 s). */
  sweepMs?: number;
  /** A peer's connection down this long makes it unreachable (a restart or a blip does not). */
  unreachableAfterMs?: number;
  /** false: the leader's cluster events go to its ring too, nothing is written to the store. */
  clusterEvents?: boolean;
}

const pollMsDefault = 1000;
const sweepMsDefault = 10_000;
const unreachableAfterMsDefault = 3000;

interface Member {
  name: string;
  role: 'voter' | 'learner';
}

/** Starts recording `node`'s events into `events`; returns the function that stops it. */
export function watchNodeEvents(node: RaftNode, events: EventLog, opts: EventSourceOptions = {}): () => void {
  const w = new NodeWatcher(node, events, opts.unreachableAfterMs ?? unreachableAfterMsDefault, opts.clusterEvents ?? true);
  const pollMs = opts.pollMs ?? pollMsDefault;
  let timer: NodeJS.Timeout | undefined;
  let dueAt = Number.POSITIVE_INFINITY;
  let queued = false;
  let stopped = false;
  const at = (ms: number): void => {
    clearTimeout(timer);
    dueAt = performance.now() + ms;
    timer = setTimeout(pollNow, ms);
    timer.unref();
  };
  function pollNow(): void {
    queued = false;
    if (stopped) return;
    w.poll();
    at(w.waitingOnTime() ? pollMs : opts.sweepMs ?? sweepMsDefault);
  }
  // Node events come from inside its loop: the poll runs after, once for a burst of them.
  const pollSoon = (): void => {
    if (queued || stopped) return;
    queued = true;
    void Promise.resolve().then(pollNow);
  };
  // Entries applied (a membership change among them): a poll within pollMs, as many as there are.
  const onApplied = (): void => {
    if (!stopped && dueAt - performance.now() > pollMs) at(pollMs);
  };
  const onLeader = (c: { leader: string; term: number; role: string }): void => { w.onLeaderChange(c); pollSoon(); };
  const onLevel = (level: number): void => w.onFeatureLevel(level);
  node.on('leaderChange', onLeader);
  node.on('featureLevel', onLevel);
  node.on('failed', pollSoon);
  node.on('applied', onApplied);
  node.on('peerDisconnected', pollSoon);
  at(pollMs);
  return () => {
    stopped = true;
    clearTimeout(timer);
    node.off('leaderChange', onLeader);
    node.off('featureLevel', onLevel);
    node.off('failed', pollSoon);
    node.off('applied', onApplied);
    node.off('peerDisconnected', pollSoon);
  };
}

class NodeWatcher {
  private leader = '';
  private electedTerm = 0;
  private level: number;
  private members: Map<string, Member> | undefined;
  /** Since when each peer's connection has been down (monotonic ms). */
  private readonly downSince = new Map<string, number>();
  /** Peers this node has said are unreachable (local), and in which term the leader said so (cluster). */
  private readonly unreachableLocal = new Set<string>();
  private readonly unreachableCluster = new Map<string, number>();
  private snapshotIndex: number;
  private snapshotsTaken: number;
  /** The snapshot index moved with no snapshot taken here, as of the previous poll. */
  private snapshotUnexplained = false;
  private failure: string | undefined;

  constructor(private readonly node: RaftNode, private readonly events: EventLog, private readonly unreachableAfterMs: number, private readonly clusterEvents: boolean) {
    this.level = node.featureLevel;
    this.snapshotIndex = node.latestSnapshotIndex;
    this.snapshotsTaken = node.snapshotDuration.count;
  }

  onLeaderChange(c: { leader: string; term: number; role: string }): void {
    if (c.leader !== this.leader) {
      this.events.recordLocal('leader.changed', c.leader || '(none)', { leader: c.leader || null, previous: this.leader || null, term: c.term });
      this.leader = c.leader;
    }
    if (c.role === 'leader' && c.term > this.electedTerm) {
      this.electedTerm = c.term;
      this.recordCluster('leader.elected', this.node.id, { term: c.term });
    }
  }

  onFeatureLevel(level: number): void {
    const from = this.level;
    this.level = level;
    if (this.node.isLeader) this.recordCluster('feature_level.raised', 'cluster', { level, from });
  }

  private recordCluster(type: string, subject: string, details: JsonObject): void {
    if (this.clusterEvents) this.events.recordEvent(type, subject, details);
    else this.events.recordLocal(type, subject, details);
  }

  /** Whether the next poll has something to see on time: a peer's connection down (unreachable, or back), a snapshot to explain. */
  waitingOnTime(): boolean {
    if (this.snapshotUnexplained || this.downSince.size > 0) return true;
    try {
      return this.node.peerStats().some((p) => !p.connected && this.members?.has(p.id) === true);
    } catch {
      return false;
    }
  }

  poll(): void {
    this.pollFailure();
    if (this.failure === 'node_failed' || this.failure === 'removed' || this.failure === 'upgrade_required') return;
    this.pollMembers();
    this.pollPeers();
    this.pollSnapshots();
  }

  private pollFailure(): void {
    const f = this.node.failure;
    if (f?.code === this.failure) return;
    if (f !== undefined) this.events.recordLocal('node.failed', this.node.id, { code: f.code, message: f.message });
    else if (this.failure !== undefined) this.events.recordLocal('node.recovered', this.node.id, { code: this.failure });
    this.failure = f?.code;
  }

  private pollMembers(): void {
    const now = currentMembers(this.node);
    const before = this.members;
    this.members = now;
    if (before === undefined || !this.node.isLeader) return;
    for (const [id, m] of now) {
      const was = before.get(id);
      if (was === undefined) this.recordCluster('member.added', id, { name: m.name, role: m.role });
      else if (was.role === 'learner' && m.role === 'voter') this.recordCluster('member.promoted', id, { name: m.name });
    }
    for (const [id, m] of before) if (!now.has(id)) this.recordCluster('member.removed', id, { name: m.name });
  }

  private pollPeers(): void {
    const at = performance.now();
    const connected = new Map(this.node.peerStats().map((p) => [p.id, p.connected]));
    const term = this.node.currentTerm;
    for (const [id, m] of this.members ?? []) {
      if (id === this.node.id) continue;
      if (connected.get(id) === true) {
        this.downSince.delete(id);
        this.markBack(id, m.name, term);
        continue;
      }
      const since = this.downSince.get(id) ?? at;
      this.downSince.set(id, since);
      if (at - since >= this.unreachableAfterMs) this.markUnreachable(id, m.name, term, Math.round(at - since));
    }
    for (const id of this.downSince.keys()) if (this.members?.has(id) !== true) this.downSince.delete(id);
  }

  private markUnreachable(id: string, name: string, term: number, downMs: number): void {
    if (!this.unreachableLocal.has(id)) {
      this.unreachableLocal.add(id);
      this.events.recordLocal('member.unreachable', id, { name, downMs });
    }
    if (this.node.isLeader && this.unreachableCluster.get(id) !== term) {
      this.unreachableCluster.set(id, term);
      this.recordCluster('member.unreachable', id, { name, downMs });
    }
  }

  private markBack(id: string, name: string, term: number): void {
    if (this.unreachableLocal.delete(id)) this.events.recordLocal('member.back', id, { name });
    const said = this.unreachableCluster.get(id);
    this.unreachableCluster.delete(id);
    if (said !== undefined && this.node.isLeader && said === term) this.recordCluster('member.back', id, { name });
  }

  private pollSnapshots(): void {
    const index = this.node.latestSnapshotIndex;
    const taken = this.node.snapshotDuration.count;
    if (taken > this.snapshotsTaken) {
      this.events.recordLocal('snapshot.taken', this.node.id, { index });
    } else if (index > this.snapshotIndex && !this.snapshotUnexplained) {
      // A snapshot this node took is counted once its log compaction is done too: give it a
      // poll before calling the new index one received from the leader.
      this.snapshotUnexplained = true;
      return;
    } else if (index > this.snapshotIndex) {
      this.events.recordLocal('snapshot.installed', this.node.id, { index });
    }
    this.snapshotUnexplained = false;
    this.snapshotIndex = index;
    this.snapshotsTaken = taken;
  }
}

function currentMembers(node: RaftNode): Map<string, Member> {
  const cs = node.confState();
  const learners = new Set([...cs.learners, ...cs.learnersNext]);
  const out = new Map<string, Member>();
  for (const m of node.membership.list()) out.set(m.id, { name: m.name, role: learners.has(m.id) ? 'learner' : 'voter' });
  return out;
}
