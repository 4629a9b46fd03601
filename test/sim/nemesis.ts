// The faults: partitions (both ways and one way), crashes (now, or in the middle of handling a
// Ready), restarts, stopping removed nodes, and snapshots with log compaction at random points.

import type { SeededPrng } from '../../src/raft/prng.ts';
import type { NodeId } from '../../src/raft/types.ts';
import type { SimNode } from './sim-node.ts';
import type { World } from './world.ts';

export class Nemesis {
  private healAt = -1;

  constructor(private readonly world: World, private readonly prng: SeededPrng) {}

  onTick(): void {
    this.partitions();
    this.crashes();
    this.restartsDue(this.world.tick);
    this.stopsDue();
    this.storage();
  }

  /** Restarts crashed nodes whose time has come (all of them when `upTo` is infinite). */
  restartsDue(upTo: number): void {
    for (const n of this.world.nodes.values()) if (n.state === 'crashed' && n.restartAt <= upTo) this.world.restart(n);
  }

  stopsDue(): void {
    this.world.stopRemoved();
  }

  /** Ends every fault for the liveness phase. */
  healAll(): void {
    this.world.network.heal();
    this.healAt = -1;
    for (const n of this.world.nodes.values()) n.crashArm = null;
    this.restartsDue(Number.POSITIVE_INFINITY);
  }

  private partitions(): void {
    const w = this.world;
    if (this.healAt >= 0 && w.tick >= this.healAt) {
      w.network.heal();
      this.healAt = -1;
      w.log('network healed');
    }
    const f = w.scenario.faults;
    if (f.leaderFlap > 0 && this.prng.chance(f.leaderFlap) && this.flapLeader()) return;
    if (f.jointSplit > 0 && this.healAt < 0 && this.splitJoint(f.jointSplit)) return;
    if (this.healAt >= 0 || !this.prng.chance(f.partition)) return;
    const ids = [...w.nodes.values()].filter((n) => n.state !== 'stopped').map((n) => n.id);
    if (ids.length < 2) return;
    const leader = w.leader()?.id;
    const victim = leader !== undefined && this.prng.chance(0.5) ? leader : this.pick(ids);
    const others = ids.filter((id) => id !== victim);
    if (this.prng.chance(f.oneWayShare)) this.oneWay(victim, others);
    else if (this.prng.chance(0.5)) {
      w.network.partition([victim], others);
      w.log(`partition: ${victim} isolated`);
    } else {
      const a = ids.filter(() => this.prng.chance(0.5));
      const b = ids.filter((id) => !a.includes(id));
      w.network.partition(a, b);
      w.log(`partition: [${a}] | [${b}]`);
    }
    this.healAt = w.tick + 1 + this.prng.nextInt(f.partitionTicksMax);
    w.stats.partitions++;
  }

  /**
   * While the leader is in a joint configuration: cuts the voters only in its outgoing half off
   * from everyone else, for up to partitionTicksMax. Draws from the PRNG only in a joint phase.
   */
  private splitJoint(rate: number): boolean {
    const w = this.world;
    const cs = w.leader()?.raw?.confState();
    if (cs === undefined || cs.votersOutgoing.length === 0 || !this.prng.chance(rate)) return false;
    const outgoingOnly = cs.votersOutgoing.filter((id) => !cs.voters.includes(id));
    const rest = [...w.nodes.values()].filter((n) => n.state !== 'stopped' && !outgoingOnly.includes(n.id)).map((n) => n.id);
    if (outgoingOnly.length === 0 || rest.length === 0) return false;
    w.network.partition(outgoingOnly, rest);
    this.healAt = w.tick + 1 + this.prng.nextInt(w.scenario.faults.partitionTicksMax);
    w.stats.partitions++;
    w.stats.jointSplits++;
    w.log(`partition: outgoing-only voters [${outgoingOnly}] | [${rest}] (joint configuration)`);
    return true;
  }

  /** Isolates a leader that has entries not yet committed, replacing any partition. */
  private flapLeader(): boolean {
    const w = this.world;
    const leader = w.leader();
    if (leader === undefined || leader.disk.live.lastIndex() <= leader.commit) return false;
    const others = [...w.nodes.values()].filter((n) => n !== leader && n.state !== 'stopped').map((n) => n.id);
    w.network.heal();
    w.network.partition([leader.id], others);
    this.healAt = w.tick + 1 + this.prng.nextInt(w.scenario.raft.electionTimeoutTicks);
    w.stats.partitions++;
    w.log(`partition: leader ${leader.id} isolated with entries past its commit ${leader.commit}`);
    return true;
  }

  private oneWay(victim: NodeId, others: NodeId[]): void {
    const w = this.world;
    const kind = this.prng.nextInt(3);
    for (const o of others) {
      if (kind === 0) w.network.cutOneWay(victim, o); // it hears everyone, nobody hears it
      else if (kind === 1) w.network.cutOneWay(o, victim); // it is heard, hears nobody
      else if (this.prng.chance(0.5)) w.network.cutOneWay(this.prng.chance(0.5) ? victim : o, this.prng.chance(0.5) ? o : victim);
    }
    w.log(`one-way partition (${['mute', 'deaf', 'random links'][kind]}) around ${victim}: ${w.network.cutLinks()} links cut`);
  }

  private crashes(): void {
    const w = this.world;
    const f = w.scenario.faults;
    if (!this.prng.chance(f.crash)) return;
    let down = 0;
    for (const n of w.nodes.values()) if (n.state === 'crashed' || n.crashArm !== null) down++;
    if (down >= f.downMax) return;
    const up = w.upNodes().filter((n) => n.crashArm === null);
    if (up.length === 0) return;
    const leader = w.leader();
    const victim: SimNode = leader !== undefined && leader.crashArm === null && this.prng.chance(0.4) ? leader : this.pick(up);
    victim.restartAt = w.tick + 1 + this.prng.nextInt(f.downTicksMax);
    if (this.prng.chance(f.midReadyShare)) w.armCrash(victim, this.prng.chance(0.5) ? 'beforePersist' : 'afterPersist');
    else w.crash(victim, 'now');
  }

  private storage(): void {
    const w = this.world;
    const f = w.scenario.faults;
    for (const n of w.upNodes()) {
      if (this.prng.chance(f.compact)) w.compact(n, this.prng.chance(0.3) ? 0 : this.prng.nextInt(20));
      if (f.checkpoint > 0 && this.prng.chance(f.checkpoint)) w.checkpoint(n);
    }
  }

  private pick<T>(items: readonly T[]): T {
    return items[this.prng.nextInt(items.length)] as T;
  }
}
