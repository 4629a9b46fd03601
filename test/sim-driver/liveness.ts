// The liveness phase, after every fault is healed and every node restarted: within a bound of
// virtual time, one leader that every node follows, a new write through it applied, every node
// caught up to the leader's commit index, and a linearizable read of every key on every node
// (recorded in the history, so an acknowledged write lost shows as a stale read).

import { KvStateMachine } from '../node/kv-state-machine.ts';
import type { Clients } from './clients.ts';
import type { World } from './world.ts';

export interface LivenessResult {
  ok: boolean;
  /** What was still missing when the bound passed. */
  stuck?: string;
  /** Virtual ms from the heal until every node caught up. */
  ms: number;
}

export function livenessBoundMs(w: World): number {
  const s = w.scenario;
  return 40 * s.electionTimeoutTicks * s.tickMs + 3000;
}

export async function checkLiveness(w: World, clients: Clients): Promise<LivenessResult> {
  const started = performance.now();
  const deadline = started + livenessBoundMs(w);
  let stage = 'a leader every node follows';
  const pause = (): Promise<void> => new Promise((r) => setTimeout(r, w.scenario.tickMs));
  // A run the safety checkers already failed gains nothing from waiting for it to recover.
  const late = (): boolean => performance.now() > deadline || w.safety.violations.length > 0;
  let leaderId = '';
  while (!late()) {
    const up = w.up();
    const leaders = up.filter((m) => m.node.isLeader);
    const l = leaders[0];
    if (leaders.length === 1 && l !== undefined && up.every((m) => m.node.leaderId === l.id)) { leaderId = l.id; break; }
    await pause();
  }
  stage = `a new write through ${leaderId || 'the leader'}`;
  let index = 0;
  while (!late() && index === 0) {
    const node = w.members.get(leaderId)?.node;
    try {
      if (node === undefined) throw new Error('leader down');
      index = (await node.propose(KvStateMachine.encode({ op: 'put', key: 'live', value: 'after-heal' }))).index;
      w.log(`liveness: write applied at ${index} on ${leaderId}`);
    } catch (err) {
      w.log(`liveness: write failed: ${(err as Error).message}`);
      await pause();
    }
  }
  stage = 'every node caught up, and the clients done';
  while (!late() && index > 0) {
    const up = w.up();
    const commit = w.members.get(leaderId)?.node?.status().commit ?? Infinity;
    if (clients.idle && up.every((m) => m.node.appliedIndex >= Math.max(index, commit))) break;
    await pause();
  }
  stage = 'a read of every key on every node';
  while (!late() && index > 0) {
    if (await finalReads(w, clients)) return { ok: true, ms: performance.now() - started };
    await pause();
  }
  return { ok: false, stuck: stage, ms: performance.now() - started };
}

/** One read of every key on every node; false when one failed (tried again). */
async function finalReads(w: World, clients: Clients): Promise<boolean> {
  let process = 1_000_000;
  for (const m of w.up()) {
    for (let k = 0; k < w.scenario.keys; k++) {
      if (await clients.read(process++, m.id, `k${k}`) !== 'ok') return false;
    }
  }
  return true;
}
