// Txn compares: a pure predicate over one document's state before the txn. An absent document
// has rev 0 and createRev 0 (etcd's convention), so `rev = 0` also means "absent".

import type { Compare } from './command.ts';
import type { Doc } from './types.ts';

export function compareHolds(c: Compare, doc: Doc | undefined): boolean {
  const actual: number | boolean = c.target === 'exists' ? doc !== undefined : c.target === 'rev' ? doc?.rev ?? 0 : doc?.createRev ?? 0;
  const { value } = c;
  switch (c.cmp) {
    case '=': return actual === value;
    case '!=': return actual !== value;
    case '<': return actual < value;
    case '>': return actual > value;
    case '<=': return actual <= value;
    case '>=': return actual >= value;
  }
}
