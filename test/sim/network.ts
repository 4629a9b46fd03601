// The simulated network between nodes: every message gets a delivery time (so messages are
// delayed and reordered), and may be lost or duplicated. Links can be cut one way or both ways;
// a cut link drops what would cross it at delivery time. Time is in simulation steps.

import type { SeededPrng } from '../../src/raft/prng.ts';
import type { Message, NodeId } from '../../src/raft/types.ts';

export interface NetworkFaults {
  /** Probability that a message is lost. */
  lossRate: number;
  /** Probability that a message is delivered twice (each copy with its own delay). */
  dupRate: number;
  /** Probability that a message takes the slow path. */
  slowRate: number;
  /** Usual delay range, in steps, inclusive. */
  delayMinSteps: number;
  delayMaxSteps: number;
  /** Slow-path delay range upper bound, in steps. */
  slowMaxSteps: number;
}

export const perfectNetwork = (): NetworkFaults => ({
  lossRate: 0, dupRate: 0, slowRate: 0, delayMinSteps: 1, delayMaxSteps: 2, slowMaxSteps: 2,
});

export interface Envelope {
  msg: Message;
  /** The node that sent it: usually msg.from, but a relayed proposal keeps its proposer as from. */
  sender: NodeId;
  /** Life of the sender when it sent: reports about the send go to that life only. */
  fromLife: number;
  at: number;
  /** Lost on the way: delivered to nobody, but a snapshot's sender learns that it failed. */
  lost: boolean;
}

export class SimNetwork {
  private readonly due = new Map<number, Envelope[]>();
  private readonly cut = new Set<string>();
  private inFlight = 0;
  sent = 0;
  lost = 0;
  duplicated = 0;

  constructor(private readonly prng: SeededPrng, public faults: NetworkFaults) {}

  send(sender: NodeId, msg: Message, fromLife: number, now: number): void {
    this.sent++;
    if (this.prng.chance(this.faults.lossRate)) {
      this.lost++;
      // A lost message still reaches the queue as "lost" so the sender can be told about snapshots.
      if (msg.type === 'snap') this.enqueue({ msg, sender, fromLife, at: now + this.delay(), lost: true });
      return;
    }
    this.enqueue({ msg, sender, fromLife, at: now + this.delay(), lost: false });
    if (this.prng.chance(this.faults.dupRate)) {
      this.duplicated++;
      this.enqueue({ msg, sender, fromLife, at: now + this.delay(), lost: false });
    }
  }

  /** Messages due at `now`, in random order. */
  take(now: number): Envelope[] {
    const list = this.due.get(now);
    if (list === undefined) return [];
    this.due.delete(now);
    this.inFlight -= list.length;
    return this.prng.shuffle(list);
  }

  pending(): number {
    return this.inFlight;
  }

  isCut(from: NodeId, to: NodeId): boolean {
    return this.cut.size > 0 && this.cut.has(`${from}>${to}`);
  }

  cutOneWay(from: NodeId, to: NodeId): void {
    this.cut.add(`${from}>${to}`);
  }

  /** Cuts every link between the two groups, both ways. */
  partition(a: NodeId[], b: NodeId[]): void {
    for (const x of a) {
      for (const y of b) {
        this.cut.add(`${x}>${y}`);
        this.cut.add(`${y}>${x}`);
      }
    }
  }

  heal(): void {
    this.cut.clear();
  }

  cutLinks(): number {
    return this.cut.size;
  }

  private delay(): number {
    const f = this.faults;
    if (f.slowRate > 0 && this.prng.chance(f.slowRate)) return f.delayMinSteps + this.prng.nextInt(f.slowMaxSteps);
    return f.delayMinSteps + this.prng.nextInt(f.delayMaxSteps - f.delayMinSteps + 1);
  }

  private enqueue(env: Envelope): void {
    let list = this.due.get(env.at);
    if (list === undefined) {
      list = [];
      this.due.set(env.at, list);
    }
    list.push(env);
    this.inFlight++;
  }
}
