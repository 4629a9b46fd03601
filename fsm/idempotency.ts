// Idempotency records: the first result of each (principal, key), kept for a window of log time.
// Records are inserted in log order and log time never goes back (see DocumentStore), so the
// oldest record is always first in the Map and expiry and eviction pop from the front.

import type { CommandResult } from './types.ts';

export interface IdempotencyRecord {
  principal: string;
  key: string;
  fingerprint: string;
  /** Log time (ms) when the record was made. */
  ts: number;
  /** The log index of the entry that made it. */
  index: number;
  result: CommandResult;
  /** Estimated memory held by the record (its result dominates). */
  bytes: number;
}

export interface IdempotencyLimits {
  windowMs: number;
  recordsMax: number;
  bytesMax: number;
}

function slot(principal: string, key: string): string {
  return `${principal.length}:${principal}${key}`;
}

export class IdempotencyTable {
  private records = new Map<string, IdempotencyRecord>();
  private bytes = 0;

  constructor(private readonly limits: IdempotencyLimits) {}

  get size(): number {
    return this.records.size;
  }

  /** Drops records whose window has passed at log time `now`. */
  expire(now: number): void {
    for (const [k, r] of this.records) {
      if (r.ts + this.limits.windowMs >= now) return;
      this.drop(k, r);
    }
  }

  lookup(principal: string, key: string): IdempotencyRecord | undefined {
    return this.records.get(slot(principal, key));
  }

  /** Adds a record (its key must be free), then evicts the oldest beyond the count and byte caps. */
  insert(r: IdempotencyRecord): void {
    this.records.set(slot(r.principal, r.key), r);
    this.bytes += r.bytes;
    for (const [k, old] of this.records) {
      if (this.records.size <= this.limits.recordsMax && this.bytes <= this.limits.bytesMax) return;
      this.drop(k, old);
    }
  }

  private drop(k: string, r: IdempotencyRecord): void {
    this.records.delete(k);
    this.bytes -= r.bytes;
  }

  /** Records oldest first. */
  all(): IdempotencyRecord[] {
    return [...this.records.values()];
  }

  static restore(limits: IdempotencyLimits, records: IdempotencyRecord[]): IdempotencyTable {
    const t = new IdempotencyTable(limits);
    for (const r of records) {
      t.records.set(slot(r.principal, r.key), r);
      t.bytes += r.bytes;
    }
    return t;
  }
}
