// Txn compares: a pure predicate over one document's state before the txn. An absent document
// has rev 0 and createRev 0 (etcd's convention), so `rev = 0` also means "absent".

import type { Compare } from './command.ts';
import type { Doc } from './types.ts';

export function compareHolds(c: Compare, doc: Doc | undefined): boolean {
  if (c.target === 'value') return valueHolds(c, fieldAt(doc, c.path ?? ''));
  const actual: number | boolean = c.target === 'exists' ? doc !== undefined : c.target === 'rev' ? doc?.rev ?? 0 : doc?.createRev ?? 0;
  const value = c.value as number | boolean;
  switch (c.cmp) {
    case '=': return actual === value;
    case '!=': return actual !== value;
    case '<': return actual < value;
    case '>': return actual > value;
    case '<=': return actual <= value;
    case '>=': return actual >= value;
  }
}

/** The scalar at a dot path of the document, or undefined (absent, or not a scalar). */
function fieldAt(doc: Doc | undefined, path: string): number | string | boolean | undefined {
  let at: unknown = doc?.doc;
  for (const key of path.split('.')) {
    if (typeof at !== 'object' || at === null || Array.isArray(at) || !Object.prototype.hasOwnProperty.call(at, key)) return undefined;
    at = (at as Record<string, unknown>)[key];
  }
  return typeof at === 'number' || typeof at === 'string' || typeof at === 'boolean' ? at : undefined;
}

/** An absent field equals nothing; ordering holds only between two numbers. */
function valueHolds(c: Compare, actual: number | string | boolean | undefined): boolean {
  const { value } = c;
  if (c.cmp === '=') return actual === value;
  if (c.cmp === '!=') return actual !== value;
  if (typeof actual !== 'number' || typeof value !== 'number') return false;
  switch (c.cmp) {
    case '<': return actual < value;
    case '>': return actual > value;
    case '<=': return actual <= value;
    case '>=': return actual >= value;
  }
}
