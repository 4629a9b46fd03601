// The retained tail of watch events, in log order. Old events are dropped a whole revision at a
// time, so for any cursor the store either returns every later event or says it cannot: after
// dropping, `compactedRev` is the newest revision whose events may be gone, and a cursor
// afterRev < compactedRev is expired. The newest revision is never dropped, so one large entry
// (a retain of 50,000 documents) may exceed the caps until the next entry arrives.

import assert from 'node:assert/strict';
import { CursorExpiredError } from './errors.ts';
import { jsonBytes } from './json-value.ts';
import type { WatchEvent, WatchFilter } from './types.ts';

// Bookkeeping per event beyond its document: the rev, type, names and object headers.
const eventOverheadBytes = 64;

/** Memory an event holds, given its document's JSON size (0 for a delete). */
export function eventBytes(ev: WatchEvent, docBytes: number): number {
  return eventOverheadBytes + ev.collection.length + ev.id.length + docBytes;
}

export interface SizedEvent {
  ev: WatchEvent;
  bytes: number;
}

export class EventLog {
  // Events live in events[head..] (sizes[i] is the bytes of events[i]); the prefix before head is
  // garbage awaiting a compaction.
  private events: WatchEvent[] = [];
  private sizes: number[] = [];
  private head = 0;
  private bytes = 0;
  private compacted = 0;

  constructor(private readonly countMax: number, private readonly bytesMax: number) {}

  get size(): number {
    return this.events.length - this.head;
  }

  /** The newest revision whose events may have been dropped (0: none ever were). */
  get compactedRev(): number {
    return this.compacted;
  }

  /** The oldest revision whose events are all held: eventsSince(oldestRev - 1) succeeds. */
  get oldestRev(): number {
    return this.compacted + 1;
  }

  /**
   * Appends events of one entry (all with the same rev, not older than any held). An entry may
   * append in parts (its command's changes, then its audit record: fsm/audit.ts); the newest
   * revision is never trimmed, so its parts stay together.
   */
  append(evs: readonly SizedEvent[]): void {
    const last = this.events[this.events.length - 1];
    for (const { ev, bytes } of evs) {
      assert.ok(last === undefined || ev.rev >= last.rev, 'events must arrive in revision order');
      this.events.push(ev);
      this.sizes.push(bytes);
      this.bytes += bytes;
    }
    this.trim();
  }

  private trim(): void {
    const newest = this.events[this.events.length - 1];
    if (newest === undefined) return;
    while (this.size > this.countMax || this.bytes > this.bytesMax) {
      const oldest = this.events[this.head] as WatchEvent;
      if (oldest.rev === newest.rev) break;
      while (this.head < this.events.length && (this.events[this.head] as WatchEvent).rev === oldest.rev) {
        this.bytes -= this.sizes[this.head] as number;
        this.head++;
      }
      this.compacted = oldest.rev;
    }
    if (this.head > 1024 && this.head * 2 > this.events.length) {
      this.events = this.events.slice(this.head);
      this.sizes = this.sizes.slice(this.head);
      this.head = 0;
    }
  }

  /**
   * Drops every event older than `rev` (a compaction command at `rev`): a cursor older than
   * rev - 1 is expired from then on. Returns the compaction point.
   */
  compactBefore(rev: number): number {
    assert.ok(rev > this.compacted, 'a compaction moves forward');
    while (this.head < this.events.length && (this.events[this.head] as WatchEvent).rev < rev) {
      this.bytes -= this.sizes[this.head] as number;
      this.head++;
    }
    this.compacted = Math.max(this.compacted, rev - 1);
    this.events = this.events.slice(this.head);
    this.sizes = this.sizes.slice(this.head);
    this.head = 0;
    return this.compacted;
  }

  /** Events with rev > afterRev that match the filter, in order. Throws CursorExpiredError. */
  since(afterRev: number, filter: WatchFilter): WatchEvent[] {
    if (afterRev < this.compacted) throw new CursorExpiredError(afterRev, this.oldestRev);
    let lo = this.head;
    let hi = this.events.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((this.events[mid] as WatchEvent).rev <= afterRev) lo = mid + 1;
      else hi = mid;
    }
    const out: WatchEvent[] = [];
    for (let i = lo; i < this.events.length; i++) {
      const ev = this.events[i] as WatchEvent;
      if (filter.collection !== undefined && ev.collection !== filter.collection) continue;
      if (filter.prefix !== undefined && !ev.id.startsWith(filter.prefix)) continue;
      out.push(ev);
    }
    return out;
  }

  /** The held events, oldest first. */
  all(): WatchEvent[] {
    return this.events.slice(this.head);
  }

  /** Rebuilds a log from a snapshot's events and compaction point (no trimming: caps may differ). */
  static restore(countMax: number, bytesMax: number, compactedRev: number, events: WatchEvent[]): EventLog {
    const log = new EventLog(countMax, bytesMax);
    log.compacted = compactedRev;
    log.events = events;
    log.sizes = events.map((ev) => eventBytes(ev, ev.doc !== undefined ? jsonBytes(ev.doc.doc) : 0));
    log.bytes = log.sizes.reduce((a, b) => a + b, 0);
    return log;
  }
}
