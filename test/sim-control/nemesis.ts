// The faults: partitions (one node cut off, the leader half the time, or the cluster split in
// two), kill -9 of shoal (containers run on; the restarted agent adopts them), whole machine
// deaths (containers die too), leadership changes with the leader alive, container runtimes
// that stop answering for a while, and containers that exit by themselves; and, from their own
// stream so the others are drawn as before, shoal frozen by SIGSTOP and machines suspended.

import type { SeededPrng } from '../../src/raft/prng.ts';
import type { SimNode } from './sim-node.ts';
import type { World } from './world.ts';

export class Nemesis {
  private healAt = -1;
  private readonly outages = new Map<SimNode, number>();
  private readonly frozen = new Map<SimNode, number>();

  private linkHealAt = -1;

  constructor(private readonly world: World, private readonly prng: SeededPrng, private readonly freezePrng: SeededPrng, private readonly healthPrng: SeededPrng) {}

  onStep(): void {
    this.returns(this.world.step);
    this.partitions();
    this.stops();
    this.leadership();
    this.runtimes();
    this.containers();
    this.freezes();
    this.linkCuts();
    this.gracefulStops();
  }

  /** Ends every fault for the liveness phase: the network whole, every machine and runtime back. */
  healAll(): void {
    const w = this.world;
    w.network.heal();
    this.healAt = -1;
    for (const [n] of this.outages) n.runtime.setAvailable();
    this.outages.clear();
    for (const n of w.nodes) n.stalledUntil = 0;
    for (const [n] of this.frozen) n.clock.thaw();
    this.frozen.clear();
    this.returns(Number.POSITIVE_INFINITY);
    w.log('healed everything');
  }

  private returns(upTo: number): void {
    for (const n of this.world.nodes) if (!n.isUp && n.returnAt <= upTo) this.world.restartNode(n);
  }

  private partitions(): void {
    const w = this.world;
    const f = w.scenario.faults;
    if (this.healAt >= 0 && w.step >= this.healAt) {
      w.network.healSides();
      this.healAt = -1;
      w.log('network healed');
    }
    if (this.healAt >= 0 || !this.prng.chance(f.partition)) return;
    const ids = w.nodes.map((n) => n.id);
    const leader = w.consensus.leader?.id;
    if (this.prng.chance(0.6)) {
      const victim = leader !== undefined && this.prng.chance(0.5) ? leader : this.pick(ids);
      if (victim !== undefined) w.network.split([[victim]]);
    } else {
      const a = ids.filter(() => this.prng.chance(0.5));
      w.network.split([a]);
    }
    this.healAt = w.step + 1 + this.prng.nextInt(f.partitionStepsMax);
    w.stats.partitions++;
    w.log(`PARTITION ${w.network.describe()} until step ${this.healAt}`);
  }

  private stops(): void {
    const w = this.world;
    const f = w.scenario.faults;
    const crash = this.prng.chance(f.crash);
    const death = f.machineDeath > 0 && this.prng.chance(f.machineDeath);
    if (!crash && !death) return;
    if (w.nodes.filter((n) => !n.isUp).length >= f.downMax) return;
    const up = w.nodes.filter((n) => n.isUp && !this.frozen.has(n));
    const leader = w.consensus.leader;
    const victim = leader !== null && leader.isUp && this.prng.chance(0.4) ? leader : this.pick(up);
    if (victim === undefined) return;
    const steps = 1 + this.prng.nextInt(f.downStepsMax);
    if (death) w.stats.machineDeaths++;
    else w.stats.crashes++;
    w.stopNode(victim, death ? 'dead' : 'crashed', steps);
  }

  private leadership(): void {
    const w = this.world;
    if (w.scenario.faults.transfer > 0 && this.prng.chance(w.scenario.faults.transfer) && w.consensus.leaderValid()) {
      w.stats.transfers++;
      w.consensus.forceElection();
    }
  }

  private runtimes(): void {
    const w = this.world;
    for (const [n, until] of this.outages) {
      if (w.step < until) continue;
      n.runtime.setAvailable();
      this.outages.delete(n);
      w.log(`runtime of ${n.id} answers again`);
    }
    const rate = w.scenario.faults.runtimeOutage;
    if (rate === 0) return;
    for (const n of w.nodes) {
      if (this.outages.has(n) || !this.prng.chance(rate)) continue;
      const until = w.step + 1 + this.prng.nextInt(30);
      n.runtime.setUnavailable('Cannot connect to the Docker daemon');
      this.outages.set(n, until);
      w.stats.runtimeOutages++;
      w.log(`RUNTIME OUTAGE on ${n.id} until step ${until}`);
    }
  }

  private containers(): void {
    const w = this.world;
    const rate = w.scenario.faults.containerExit;
    if (rate === 0 || !this.prng.chance(rate)) return;
    const running = w.nodes.flatMap((n) => n.runtime.all().filter((c) => c.state === 'running').map((c) => ({ n, c })));
    const victim = this.pick(running);
    if (victim === undefined) return;
    const code = this.prng.chance(0.5) ? 1 : 137;
    victim.n.runtime.exit(victim.c.id, code, { oom: code === 137 && this.prng.chance(0.5) });
    w.stats.containerExits++;
    w.log(`CONTAINER EXIT ${victim.c.name} on ${victim.n.id} (code ${code})`);
  }

  /** SIGSTOP of shoal (its containers run on), or the whole machine suspended; thawed after a while. */
  private freezes(): void {
    const w = this.world;
    const x = w.scenario.exclusive;
    for (const [n, until] of this.frozen) {
      if (w.step < until) continue;
      this.frozen.delete(n);
      n.clock.thaw();
      w.log(`THAW ${n.id}`);
    }
    for (const kind of ['freeze', 'suspend'] as const) {
      if (x[kind] === 0 || !this.freezePrng.chance(x[kind])) continue;
      if (this.frozen.size + w.nodes.filter((n) => !n.isUp).length >= w.scenario.faults.downMax) continue;
      const candidates = w.nodes.filter((n) => n.isUp && !this.frozen.has(n));
      const leader = w.consensus.leader;
      const victim = leader !== null && candidates.includes(leader) && this.freezePrng.chance(0.4) ? leader : candidates[this.freezePrng.nextInt(Math.max(1, candidates.length))];
      if (victim === undefined) continue;
      const until = w.step + 1 + this.freezePrng.nextInt(x.frozenStepsMax);
      if (kind === 'freeze') {
        victim.clock.freeze();
        w.stats.freezes++;
      } else {
        victim.clock.suspend();
        w.stats.suspends++;
      }
      this.frozen.set(victim, until);
      w.log(`${kind === 'freeze' ? 'SIGSTOP of shoal' : 'SUSPEND of the machine'} ${victim.id} until step ${until}`);
    }
  }

  /** One link cut, from the leader most of the time: the node at its other end is heard by the rest. */
  private linkCuts(): void {
    const w = this.world;
    const f = w.scenario.faults;
    if (this.linkHealAt >= 0 && w.step >= this.linkHealAt) {
      w.network.healLinks();
      this.linkHealAt = -1;
      w.log('cut link healed');
    }
    if (this.linkHealAt >= 0 || f.linkCut === 0 || !this.healthPrng.chance(f.linkCut)) return;
    const leader = w.consensus.leader;
    const a = leader !== null && this.healthPrng.chance(0.7) ? leader : w.nodes[this.healthPrng.nextInt(w.nodes.length)];
    const others = w.nodes.filter((n) => n !== a);
    const b = others[this.healthPrng.nextInt(others.length)];
    if (a === undefined || b === undefined) return;
    w.network.cutLink(a.id, b.id);
    this.linkHealAt = w.step + 1 + this.healthPrng.nextInt(Math.max(1, f.linkCutStepsMax));
    w.stats.linkCuts++;
    w.log(`LINK CUT ${a.id}-${b.id} until step ${this.linkHealAt}`);
  }

  /** shoal stops gracefully (a goodbye to its peers; its containers run on) and starts again later. */
  private gracefulStops(): void {
    const w = this.world;
    const f = w.scenario.faults;
    if (f.gracefulStop === 0 || !this.healthPrng.chance(f.gracefulStop)) return;
    if (w.nodes.filter((n) => !n.isUp).length + this.frozen.size >= f.downMax) return;
    const up = w.nodes.filter((n) => n.isUp && !this.frozen.has(n));
    const victim = up[this.healthPrng.nextInt(Math.max(1, up.length))];
    if (victim === undefined) return;
    w.stats.gracefulStops++;
    w.stopNode(victim, 'crashed', 1 + this.healthPrng.nextInt(Math.max(1, f.downStepsMax)), true);
  }

  private pick<T>(items: readonly T[]): T | undefined {
    return items.length === 0 ? undefined : items[this.prng.nextInt(items.length)];
  }
}
