// What a loop decides, as writes to the store: each a put or a delete with the revision it read
// (or "must not exist"), plus compares on values it relied on without writing (a node's epoch
// and state for a placement). A plan is proposed as fenced transactions (design.md, Fencing):
// refused with stale_term if the leader that decided it has been deposed, and changing nothing
// if anything it read has changed since (the loop then reads again and decides again).

import type { Compare, Op, TxnCommand } from '../../fsm/index.ts';
import { txnComparesMax, txnOpsMax } from '../../fsm/limits.ts';
import type { JsonObject } from '../../fsm/types.ts';

export type Change =
  | { kind: 'put'; collection: string; id: string; doc: JsonObject; expect: { rev: number } | { absent: true } }
  | { kind: 'delete'; collection: string; id: string; expect: { rev: number } };

export interface Plan {
  changes: Change[];
  /** Values the plan relied on and does not write (checked in the same transaction). */
  compares: Compare[];
}

export const emptyPlan = (): Plan => ({ changes: [], compares: [] });

export function putChange(collection: string, id: string, doc: object, rev: number | null): Change {
  return { kind: 'put', collection, id, doc: doc as JsonObject, expect: rev === null ? { absent: true } : { rev } };
}

export function deleteChange(collection: string, id: string, rev: number): Change {
  return { kind: 'delete', collection, id, expect: { rev } };
}

export function merge(...plans: Plan[]): Plan {
  return { changes: plans.flatMap((p) => p.changes), compares: dedupe(plans.flatMap((p) => p.compares)) };
}

function dedupe(compares: Compare[]): Compare[] {
  const seen = new Set<string>();
  return compares.filter((c) => {
    const k = JSON.stringify(c);
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

/**
 * The plan as transactions of at most txnOpsMax ops, each carrying every compare (a chunk applies
 * only if what the whole plan read still holds). Chunks apply independently: a loop is
 * level-triggered, so a plan applied in part is finished by the next pass.
 */
export function toTransactions(plan: Plan): TxnCommand[] {
  if (plan.changes.length === 0) return [];
  const compares = plan.compares.slice(0, txnComparesMax);
  const out: TxnCommand[] = [];
  for (let i = 0; i < plan.changes.length; i += txnOpsMax) {
    out.push({ op: 'txn', compare: compares, success: plan.changes.slice(i, i + txnOpsMax).map(toOp), failure: [] });
  }
  return out;
}

function toOp(c: Change): Op {
  if (c.kind === 'delete') return { op: 'delete', collection: c.collection, id: c.id, expect: c.expect };
  return { op: 'put', collection: c.collection, id: c.id, doc: c.doc, expect: c.expect };
}
