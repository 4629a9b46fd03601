// A sorted set of ids kept as a list of sorted chunks (the layout of Python's sortedcontainers):
// insert and delete touch one chunk of at most chunkMax ids plus a binary search over chunk
// heads, and a page read seeks in O(log n) and then walks. With 100,000 ids that is ~200 chunks,
// so a write never moves more than a few hundred references and a list never sorts.
//
// Order is JavaScript string order (UTF-16 code units), the same on every node.

import assert from 'node:assert/strict';

const chunkMax = 512;
const chunkMergeBelow = chunkMax / 4;

/** Index of the first element of sorted `a` that is greater than `x` (or >= x when !strict). */
function bound(a: readonly string[], x: string, strict: boolean): number {
  let lo = 0;
  let hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const v = a[mid] as string;
    if (v < x || (strict && v === x)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export class SortedIds {
  // Invariants: every chunk is non-empty and sorted; chunks are in order and disjoint.
  private chunks: string[][] = [];
  private count = 0;

  /** Builds from ids already sorted ascending and distinct (a snapshot). */
  static fromSorted(ids: readonly string[]): SortedIds {
    const s = new SortedIds();
    for (let i = 0; i < ids.length; i += chunkMax) s.chunks.push(ids.slice(i, i + chunkMax));
    s.count = ids.length;
    return s;
  }

  get size(): number {
    return this.count;
  }

  /** Index of the chunk that holds `id`, or would hold it. */
  private chunkFor(id: string): number {
    let lo = 0;
    let hi = this.chunks.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((this.chunks[mid] as string[])[0] as string <= id) lo = mid + 1;
      else hi = mid;
    }
    return Math.max(0, lo - 1);
  }

  has(id: string): boolean {
    const chunk = this.chunks[this.chunkFor(id)];
    if (chunk === undefined) return false;
    return chunk[bound(chunk, id, false)] === id;
  }

  /** Adds `id`; returns false if it was already there. */
  insert(id: string): boolean {
    const ci = this.chunkFor(id);
    const chunk = this.chunks[ci];
    if (chunk === undefined) {
      this.chunks.push([id]);
      this.count++;
      return true;
    }
    const at = bound(chunk, id, false);
    if (chunk[at] === id) return false;
    chunk.splice(at, 0, id);
    this.count++;
    if (chunk.length > chunkMax) this.chunks.splice(ci + 1, 0, chunk.splice(chunkMax >>> 1));
    return true;
  }

  /** Removes `id`; returns false if it was not there. */
  delete(id: string): boolean {
    const ci = this.chunkFor(id);
    const chunk = this.chunks[ci];
    if (chunk === undefined) return false;
    const at = bound(chunk, id, false);
    if (chunk[at] !== id) return false;
    chunk.splice(at, 1);
    this.count--;
    if (chunk.length === 0) this.chunks.splice(ci, 1);
    else if (chunk.length < chunkMergeBelow) this.maybeMerge(ci);
    return true;
  }

  /** Merges a small chunk into a neighbour when the two fit in one, so chunks stay few. */
  private maybeMerge(ci: number): boolean {
    const chunk = this.chunks[ci] as string[];
    const next = this.chunks[ci + 1];
    if (next !== undefined && chunk.length + next.length <= chunkMax) {
      chunk.push(...next);
      this.chunks.splice(ci + 1, 1);
      return true;
    }
    const prev = this.chunks[ci - 1];
    if (prev !== undefined && chunk.length + prev.length <= chunkMax) {
      prev.push(...chunk);
      this.chunks.splice(ci, 1);
      return true;
    }
    return false;
  }

  /** Ids in order, starting at the first id > `from` (or >= `from` when `inclusive`). */
  *from(from: string, inclusive: boolean): Generator<string> {
    let ci = this.chunkFor(from);
    const first = this.chunks[ci];
    if (first === undefined) return;
    let at = bound(first, from, !inclusive);
    for (; ci < this.chunks.length; ci++, at = 0) {
      const chunk = this.chunks[ci] as string[];
      for (; at < chunk.length; at++) yield chunk[at] as string;
    }
  }

  *[Symbol.iterator](): Generator<string> {
    for (const chunk of this.chunks) yield* chunk;
  }

  /** Checks the invariants (tests and debugging). */
  check(): void {
    let prev: string | undefined;
    let n = 0;
    for (const chunk of this.chunks) {
      assert.ok(chunk.length > 0 && chunk.length <= chunkMax, 'chunk size out of range');
      for (const id of chunk) {
        assert.ok(prev === undefined || prev < id, 'ids out of order');
        prev = id;
        n++;
      }
    }
    assert.equal(n, this.count, 'count disagrees with the chunks');
  }
}
