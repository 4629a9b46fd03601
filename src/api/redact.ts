// The one place the API's generic read paths (/v1/docs, /v1/txn, /v1/watch) take documents of
// the store through before answering: a secret's value (src/resources/secrets.ts) never leaves in
// an answer. A new path that hands out store documents must use these.

import type { Doc, OpResult, WatchEvent } from '../../fsm/types.ts';
import { redactSecretValue } from '../resources/secrets.ts';

export function redactDoc(d: Doc): Doc {
  const doc = redactSecretValue(d.collection, d.doc);
  return doc === d.doc ? d : { ...d, doc };
}

export function redactEvent(ev: WatchEvent): WatchEvent {
  return ev.doc === undefined ? ev : { ...ev, doc: redactDoc(ev.doc) };
}

export function redactOpResults(results: readonly OpResult[]): OpResult[] {
  return results.map((r) => (r.kind === 'put' ? { kind: 'put', doc: redactDoc(r.doc) } : r));
}
