// A V8 heap snapshot (.heapsnapshot, as v8.writeHeapSnapshot writes it) summarised by what its
// objects are: the self size and count of each constructor (objects), or of each kind of node
// (strings, compiled code, closures, arrays...). Self sizes only: retained sizes need the
// dominator tree, which this does not compute.

import { readFileSync } from 'node:fs';

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

export interface HeapGroup {
  what: string;
  count: number;
  bytes: number;
}

/** The group a node counts under: its constructor for objects, its kind otherwise. */
function groupOf(type: string, name: string): string {
  if (type === 'object' || type === 'native') return name === '' ? `(${type})` : name;
  if (type.includes('string')) return '(strings)';
  if (type === 'array') return `(array) ${name}`;
  if (type === 'hidden' || type === 'object shape') return `(${type}) ${name.length > 40 ? `${name.slice(0, 40)}…` : name}`;
  return `(${type})`;
}

/** Every group, largest self size first, and the snapshot's total self size. */
export function summariseHeapSnapshot(file: string): { groups: HeapGroup[]; totalBytes: number; nodes: number } {
  const snap = JSON.parse(readFileSync(file, 'utf8')) as Snapshot;
  const fields = snap.snapshot.meta.node_fields;
  const types = snap.snapshot.meta.node_types[0];
  const width = fields.length;
  const typeAt = fields.indexOf('type');
  const nameAt = fields.indexOf('name');
  const sizeAt = fields.indexOf('self_size');
  const groups = new Map<string, HeapGroup>();
  let totalBytes = 0;
  for (let i = 0; i < snap.nodes.length; i += width) {
    const type = types[snap.nodes[i + typeAt] ?? 0] ?? '?';
    const name = snap.strings[snap.nodes[i + nameAt] ?? 0] ?? '';
    const bytes = snap.nodes[i + sizeAt] ?? 0;
    const key = groupOf(type, name);
    const g = groups.get(key) ?? { what: key, count: 0, bytes: 0 };
    g.count++;
    g.bytes += bytes;
    totalBytes += bytes;
    groups.set(key, g);
  }
  return { groups: [...groups.values()].sort((a, b) => b.bytes - a.bytes), totalBytes, nodes: snap.nodes.length / width };
}
