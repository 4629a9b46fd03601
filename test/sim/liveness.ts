// The liveness phase. With every fault healed (network whole, crashed members restarted, no more
// loss, duplication or slow links), the cluster must within a bound elect a leader, commit a new
// proposal, and bring every running member up to it.

import { Violation } from './checkers/events.ts';
import type { Clients } from './clients.ts';
import type { Nemesis } from './nemesis.ts';
import { perfectNetwork } from './network.ts';
import type { SimNode } from './sim-node.ts';
import { membersOf, type World } from './world.ts';

/** Ticks to wait for a liveness proposal before proposing another. */
const retryTicks = 20;

export function runLiveness(world: World, nemesis: Nemesis, clients: Clients): number {
  const s = world.scenario;
  world.network.faults = { ...perfectNetwork(), delayMaxSteps: s.network.delayMaxSteps };
  nemesis.healAll();
  world.settle();
  world.log('liveness: healed everything');
  let committed = -1;
  let proposedAt = -retryTicks;
  let attempt = 0;
  world.onAck = (_node, payload, index) => {
    if (committed < 0 && payload.startsWith('live')) committed = index;
  };
  const start = world.tick;
  const bound = livenessBound(world);
  for (let t = 0; t <= bound; t++) {
    nemesis.stopsDue();
    if (committed < 0) {
      const leader = world.leader();
      if (leader !== undefined && world.tick - proposedAt >= retryTicks) {
        if (clients.propose(leader, `live${attempt++}`)) proposedAt = world.tick;
      }
    } else if (laggards(world, committed).length === 0) {
      world.log(`liveness: done after ${world.tick - start} ticks (commit ${committed})`);
      return world.tick - start;
    }
    world.runTick();
  }
  throw new Violation('liveness', livenessReport(world, committed, bound));
}

/**
 * The scenario's bound (elections, transfers and snapshots settle well within it), plus time to
 * replicate the backlog: with one append in flight and one entry per message, catching up takes
 * a round trip per entry.
 */
function livenessBound(world: World): number {
  let last = 0;
  let applied = Number.POSITIVE_INFINITY;
  for (const n of world.upNodes()) {
    last = Math.max(last, n.disk.live.lastIndex());
    applied = Math.min(applied, n.sm.index);
  }
  const backlog = Number.isFinite(applied) ? Math.max(0, last - applied) : 0;
  return world.scenario.livenessTicksMax + 2 * backlog;
}

function laggards(world: World, index: number): SimNode[] {
  const conf = world.latestConf;
  if (conf === null) return [];
  const members = membersOf(conf);
  const out: SimNode[] = [];
  for (const n of world.nodes.values()) {
    if (members.has(n.id) && n.isUp() && n.sm.index < index) out.push(n);
  }
  return out;
}

function livenessReport(world: World, committed: number, bound: number): string {
  const head = committed < 0
    ? `no new proposal committed within ${bound} ticks after healing (leader: ${world.leader()?.id ?? 'none'})`
    : `proposal committed at ${committed}, but members did not catch up within ${bound} ticks`;
  const nodes = [...world.nodes.values()].map((n) =>
    `${n.id} ${n.state} ${n.role} t${n.term} commit ${n.commit} applied ${n.sm.index} leader '${n.leader}'`);
  const conf = world.latestConf;
  const confText = conf === null ? '' : `; conf voters [${conf.voters}] outgoing [${conf.votersOutgoing}] learners [${conf.learners}]`;
  return `${head}${confText}; ${nodes.join('; ')}`;
}
