// A seeded random workload for the document store: puts, deletes, compare-and-set, txns,
// retains, idempotent retries and conflicts, invalid entries, index gaps (no-ops and membership
// changes the store never sees) and a leader clock that sometimes jumps back. A small id space
// makes expectations hit and miss.

import { SeededPrng } from '../../src/raft/prng.ts';
import { encodeCommand, type Command, type Compare, type Op, type Stamped } from '../../fsm/index.ts';
import type { AppliedEntry } from '../../src/base/state-machine.ts';
import { rawPackr } from './harness.ts';

const collections = ['apps', 'nodes', 'svc.v1'];
const cmps = ['=', '!=', '<', '>', '<=', '>='] as const;

export class Workload {
  private readonly rng: SeededPrng;
  private index = 0;
  private ts = 1_700_000_000_000;
  private readonly sent: Stamped[] = [];

  constructor(seed: number) {
    this.rng = new SeededPrng(seed);
  }

  private pick<T>(xs: readonly T[]): T {
    return xs[this.rng.nextInt(xs.length)] as T;
  }

  private id(): string {
    return `d${this.rng.nextInt(12)}`;
  }

  private doc(): Record<string, unknown> {
    const d: Record<string, unknown> = { n: this.rng.nextInt(1000), at: this.index };
    if (this.rng.chance(0.3)) d.tags = ['a', 'b'].slice(0, this.rng.nextInt(3));
    if (this.rng.chance(0.2)) d.nested = { x: this.rng.nextFloat(), ok: this.rng.chance(0.5), none: null };
    return d;
  }

  private op(collection = this.pick(collections), id = this.id()): Op {
    const expect = this.rng.chance(0.3) ? (this.rng.chance(0.7) ? { rev: 1 + this.rng.nextInt(this.index + 1) } : { absent: true as const }) : undefined;
    const base = this.rng.chance(0.75) ? { op: 'put' as const, collection, id, doc: this.doc() as never } : { op: 'delete' as const, collection, id };
    return expect ? { ...base, expect } : base;
  }

  private compare(): Compare {
    const target = this.pick(['rev', 'createRev', 'exists'] as const);
    if (target === 'exists') return { collection: this.pick(collections), id: this.id(), target, cmp: this.pick(['=', '!='] as const), value: this.rng.chance(0.5) };
    return { collection: this.pick(collections), id: this.id(), target, cmp: this.pick(cmps), value: this.rng.nextInt(this.index + 2) };
  }

  private branch(): Op[] {
    const ops: Op[] = [];
    const used = new Set<string>();
    for (let i = this.rng.nextInt(4); i > 0; i--) {
      const o = this.op();
      if (used.has(`${o.collection}/${o.id}`)) continue;
      used.add(`${o.collection}/${o.id}`);
      ops.push(o);
    }
    return ops;
  }

  private command(): Command {
    const r = this.rng.nextFloat();
    if (r < 0.6) return this.op();
    if (r < 0.85) return { op: 'txn', compare: Array.from({ length: this.rng.nextInt(3) }, () => this.compare()), success: this.branch(), failure: this.branch() };
    return { op: 'retain', collection: this.pick(collections), ids: Array.from({ length: this.rng.nextInt(10) }, () => this.id()) };
  }

  private stamped(): Stamped {
    // Mostly forward, sometimes a big step (records expire), sometimes back (a new leader's slow clock).
    this.ts += this.rng.chance(0.05) ? -60_000 : this.rng.chance(0.05) ? 3_600_000 : this.rng.nextInt(2000);
    const prior = this.sent.length > 0 && this.rng.chance(0.1) ? this.pick(this.sent) : undefined;
    if (prior !== undefined) {
      // A retry of an earlier keyed request (replay), or its key reused for something else (conflict).
      return this.rng.chance(0.7) ? { ...prior, ts: this.ts } : { ...prior, cmd: this.command(), ts: this.ts };
    }
    const s: Stamped = { cmd: this.command(), ts: this.ts };
    if (this.rng.chance(0.3)) {
      s.principal = this.pick(['alice', 'bob']);
      s.idempotencyKey = `k${this.rng.nextInt(1_000_000)}`;
      this.sent.push(s);
    }
    return s;
  }

  next(): AppliedEntry {
    this.index += 1 + (this.rng.chance(0.1) ? this.rng.nextInt(3) : 0);
    if (this.rng.chance(0.02)) return { index: this.index, term: 1, data: rawPackr.pack({ cmd: { op: 'put', collection: 'BAD' }, ts: this.ts }) };
    return { index: this.index, term: 1, data: encodeCommand(this.stamped()) };
  }

  entries(n: number): AppliedEntry[] {
    return Array.from({ length: n }, () => this.next());
  }
}
