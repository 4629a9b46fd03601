// The commands of the document store as types: what a proposal carries once decoded and
// validated (command.ts, validate-command.ts). In a file of their own so that the two validators
// share them without importing each other.

import type { JsonValue } from './types.ts';

export type Expect = { rev: number } | { absent: true };
export interface PutOp { op: 'put'; collection: string; id: string; doc: JsonValue; expect?: Expect }
export interface DeleteOp { op: 'delete'; collection: string; id: string; expect?: Expect }
export type Op = PutOp | DeleteOp;
export type CompareTarget = 'rev' | 'createRev' | 'exists' | 'value';
export type CompareOperator = '=' | '!=' | '<' | '>' | '<=' | '>=';
/**
 * rev and createRev of an absent document are 0 (as in etcd). `exists` takes only = and !=.
 * `value` compares the document's field at `path` (dot-separated keys, e.g. `epoch` or
 * `runtime.status`) with a number (any operator), a string or a boolean (= and != only); a field
 * that is absent (or a document that is) equals nothing, so only != holds for it.
 */
export interface Compare { collection: string; id: string; target: CompareTarget; cmp: CompareOperator; value: number | boolean | string; path?: string }
export interface TxnCommand { op: 'txn'; compare: Compare[]; success: Op[]; failure: Op[] }
export interface RetainCommand { op: 'retain'; collection: string; ids: string[] }
/**
 * Drops every retained watch event before this entry (etcd's compaction): a cursor older than
 * the entry before it is expired from then on. Documents do not change. Feature level 6 (the
 * leader uses it to drop the history of values it re-encrypted: docs/security.md).
 */
export interface CompactCommand { op: 'compact' }
export type Command = PutOp | DeleteOp | TxnCommand | RetainCommand | CompactCommand;

/**
 * A command as proposed: `ts` is the proposer's wall clock (ms) when it proposed (log time until
 * feature level 2; see src/node/log-clock.ts).
 */
export interface Stamped {
  cmd: Command;
  ts: number;
  /**
   * The term of the leader loop that decided this command (design.md, Fencing). Applied only in
   * an entry of that same term; otherwise refused with stale_term and nothing changes, on every
   * node alike: a deposed leader's late write never lands. Feature level 2.
   */
  fence?: { term: number };
  /** Who sent it; scopes idempotency keys. A key without a principal belongs to the anonymous principal ''. */
  principal?: string;
  /**
   * The role the API authenticated the sender with, for its audit record. Feature level 5: an
   * older release refuses the key (its schema is strict), so apply refuses it below that level
   * too (fsm/store.ts), and the API stamps it only once the cluster runs at level 5.
   */
  role?: StampedRole;
  idempotencyKey?: string;
}

/** The roles a command may name (src/security/roles.ts's client roles; fsm/ imports nothing from src/security). */
export const stampedRoles = ['admin', 'operator', 'reader'] as const;
export type StampedRole = typeof stampedRoles[number];
