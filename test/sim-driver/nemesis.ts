// The faults a seed injects while the clients run: partitions (a random split, or one node cut
// off), crashes with a restart later (a minority at most down at once, so the cluster can make
// progress), connection resets, slow disks, disks that stall past diskStallMs, network delay
// spikes, and leadership transfers through the driver's own API. Each lasts a drawn time and
// is undone by a timer; heal() undoes them all for the liveness phase.

import type { SeededPrng } from '../../src/raft/prng.ts';
import type { NemesisAction } from './scenario.ts';
import { normalDisk } from './sim-disk.ts';
import { normalNet } from './sim-network.ts';
import type { World } from './world.ts';

export class Nemesis {
  private stopped = false;
  private partitioned = false;
  readonly counts = new Map<NemesisAction, number>();
  /** Restarts and graceful stops under way (heal waits for them). */
  private readonly restarts = new Set<Promise<void>>();
  private readonly stopping = new Set<string>();

  constructor(private readonly world: World, private readonly prng: SeededPrng) {}

  start(): void {
    void this.run();
  }

  private async run(): Promise<void> {
    const s = this.world.scenario;
    const total = Object.values(s.weights).reduce((a, b) => a + b, 0);
    if (total === 0) return;
    while (!this.stopped) {
      await this.sleep(1 + this.prng.nextInt(2 * s.nemesisEveryMs));
      if (this.stopped) return;
      let r = this.prng.nextInt(total);
      for (const [a, w] of Object.entries(s.weights) as [NemesisAction, number][]) {
        if (r < w) { this.act(a); break; }
        r -= w;
      }
    }
  }

  private act(a: NemesisAction): void {
    this.counts.set(a, (this.counts.get(a) ?? 0) + 1);
    const w = this.world;
    const ids = w.ids;
    const pick = (xs: readonly string[]): string => xs[this.prng.nextInt(xs.length)] as string;
    const lasting = (): number => 20 + this.prng.nextInt(600);
    switch (a) {
      case 'partition':
      case 'isolate': {
        if (this.partitioned) return;
        const side = a === 'isolate' ? [pick(ids)] : ids.filter(() => this.prng.chance(0.5));
        const other = ids.filter((id) => !side.includes(id));
        if (side.length === 0 || other.length === 0) return;
        w.log(`nemesis: partition [${side.join(',')}] | [${other.join(',')}]`);
        w.net.partition(side, other);
        this.partitioned = true;
        this.later(lasting(), () => { w.log('nemesis: heal partition'); w.net.heal(); this.partitioned = false; });
        return;
      }
      case 'crash':
      case 'stop': {
        const down = ids.length - w.up().length + this.stopping.size;
        if (down >= (ids.length - 1) / 2) return;
        const id = pick(w.up().map((m) => m.id).filter((x) => !this.stopping.has(x)));
        const after = (): void => this.later(this.prng.nextInt(800), () => this.restart(id));
        if (a === 'crash') {
          w.crash(id);
          after();
          return;
        }
        this.stopping.add(id);
        const p = w.stop(id).then(after).finally(() => { this.stopping.delete(id); this.restarts.delete(p); });
        this.restarts.add(p);
        return;
      }
      case 'reset': {
        const from = pick(ids);
        const to = pick(ids.filter((x) => x !== from));
        w.log(`nemesis: reset connection ${from}->${to}`);
        w.net.reset(from, to);
        return;
      }
      case 'slowDisk':
      case 'stallDisk': {
        const m = w.members.get(pick(ids));
        if (m === undefined) return;
        const stallMs = w.scenario.diskStallMs + 50 + this.prng.nextInt(300);
        m.disk.speed = a === 'slowDisk' ? { writeMs: 30, slowRate: 0.2, slowMs: 120 } : { writeMs: 5, slowRate: 0.5, slowMs: stallMs };
        w.log(`nemesis: ${a} ${m.id}`);
        const disk = m.disk;
        this.later(lasting(), () => { disk.speed = normalDisk; w.log(`nemesis: ${m.id} disk normal`); });
        return;
      }
      case 'slowNet':
        w.net.speed = { minMs: 2, maxMs: 25, spikeRate: 0.1, spikeMs: 150 };
        w.log('nemesis: slow network');
        this.later(lasting(), () => { w.net.speed = normalNet; w.log('nemesis: network normal'); });
        return;
      case 'transfer': {
        const leader = w.up().find((m) => m.node.isLeader);
        if (leader === undefined) return;
        w.log(`nemesis: ${leader.id} transfers leadership`);
        leader.node.transferLeadership().then(
          (to) => w.log(`nemesis: transfer done, leader ${to}`),
          (err: unknown) => w.log(`nemesis: transfer failed: ${(err as Error).message}`),
        );
        return;
      }
    }
  }

  private restart(id: string): void {
    const p = this.world.restart(id).finally(() => this.restarts.delete(p));
    this.restarts.add(p);
  }

  /** Stops injecting, undoes every fault and restarts the crashed nodes. */
  async heal(): Promise<void> {
    this.stopped = true;
    const w = this.world;
    w.net.heal();
    this.partitioned = false;
    w.net.speed = normalNet;
    for (const m of w.members.values()) m.disk.speed = normalDisk;
    await Promise.all([...this.restarts]);
    for (const id of w.ids) await w.restart(id);
    w.log('nemesis: healed everything');
  }

  private later(ms: number, fn: () => void): void {
    setTimeout(() => { if (!this.stopped) fn(); }, ms);
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((r) => setTimeout(r, ms));
  }
}
