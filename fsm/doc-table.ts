// The documents, by collection: a Map per collection for point reads and a SortedIds for ordered
// pages. A collection exists while it holds at least one document.

import { SortedIds } from './sorted-ids.ts';
import type { Doc } from './types.ts';

interface Collection {
  docs: Map<string, Doc>;
  ids: SortedIds;
}

export interface Page {
  items: Doc[];
  next: string | null;
}

export class DocTable {
  private collections = new Map<string, Collection>();
  private docCount = 0;

  get documents(): number {
    return this.docCount;
  }

  get collectionCount(): number {
    return this.collections.size;
  }

  get(collection: string, id: string): Doc | undefined {
    return this.collections.get(collection)?.docs.get(id);
  }

  /** Inserts or replaces the document at (doc.collection, doc.id). */
  set(doc: Doc): void {
    let c = this.collections.get(doc.collection);
    if (c === undefined) {
      c = { docs: new Map(), ids: new SortedIds() };
      this.collections.set(doc.collection, c);
    }
    if (!c.docs.has(doc.id)) {
      c.ids.insert(doc.id);
      this.docCount++;
    }
    c.docs.set(doc.id, doc);
  }

  delete(collection: string, id: string): void {
    const c = this.collections.get(collection);
    if (c === undefined || !c.docs.delete(id)) return;
    c.ids.delete(id);
    this.docCount--;
    if (c.docs.size === 0) this.collections.delete(collection);
  }

  /** Up to `limit` documents in id order, after `after` (exclusive), whose ids start with `prefix`. */
  page(collection: string, prefix: string, after: string | undefined, limit: number): Page {
    const c = this.collections.get(collection);
    if (c === undefined) return { items: [], next: null };
    const start = after !== undefined && after >= prefix ? c.ids.from(after, false) : c.ids.from(prefix, true);
    const items: Doc[] = [];
    for (const id of start) {
      if (!id.startsWith(prefix)) break;
      if (items.length === limit) return { items, next: (items[items.length - 1] as Doc).id };
      items.push(c.docs.get(id) as Doc);
    }
    return { items, next: null };
  }

  /** Documents in a collection (0 when it holds none). */
  count(collection: string): number {
    return this.collections.get(collection)?.docs.size ?? 0;
  }

  /** Ids of a collection in order (a copy: safe to delete while walking it). */
  ids(collection: string): string[] {
    const c = this.collections.get(collection);
    return c === undefined ? [] : [...c.ids];
  }

  /** Each collection's name and document count, in name order. */
  sizes(): Array<{ name: string; documents: number }> {
    return this.names().map((name) => ({ name, documents: this.collections.get(name)?.docs.size ?? 0 }));
  }

  /** Collection names in order. */
  names(): string[] {
    return [...this.collections.keys()].sort();
  }

  /** Documents of a collection in id order. */
  *docs(collection: string): Generator<Doc> {
    const c = this.collections.get(collection);
    if (c === undefined) return;
    for (const id of c.ids) yield c.docs.get(id) as Doc;
  }

  /** Replaces the whole table with one built from collections whose docs are in id order. */
  static fromSorted(collections: Iterable<[string, Doc[]]>): DocTable {
    const t = new DocTable();
    for (const [name, docs] of collections) {
      if (docs.length === 0) continue;
      t.collections.set(name, { docs: new Map(docs.map((d) => [d.id, d])), ids: SortedIds.fromSorted(docs.map((d) => d.id)) });
      t.docCount += docs.length;
    }
    return t;
  }
}
