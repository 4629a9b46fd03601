// Values handed out by the core are never mutated afterwards (types.ts), and in the simulation
// they are shared by reference between nodes, where a real transport would copy them. Freezing
// turns a mutation into an immediate TypeError instead of a silent corruption of another node.

import type { Entry, Message } from '../../src/raft/types.ts';

export function freezeEntries(entries: Entry[]): void {
  Object.freeze(entries);
  for (const e of entries) {
    if (Object.isFrozen(e)) continue;
    Object.freeze(e);
    if (e.kind === 'conf') {
      Object.freeze(e.change);
      Object.freeze(e.change.changes);
    }
  }
}

export function freezeMessage(m: Message): void {
  Object.freeze(m);
  freezeEntries(m.entries);
  if (m.snapshot !== undefined) {
    Object.freeze(m.snapshot);
    Object.freeze(m.snapshot.meta);
  }
}
