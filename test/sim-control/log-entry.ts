// The modelled log: every entry is committed once appended (consensus itself is the other
// simulator's subject); each carries the term of the leader that appended it, and who proposed
// it, which the checkers read (never the command's own fence field).

import type { CommandResult } from '../../fsm/types.ts';
import type { ProposalResult } from '../../src/node/raft-node.ts';
import type { Session } from './session.ts';
import type { HealthFact } from './checkers/health.ts';

/** Who decided an entry: the world's own record of it. */
export type Origin =
  /** The empty entry a new leader appends in its term. */
  | { kind: 'empty' }
  | { kind: 'operator'; what: string }
  /** readRevision: the revision of its node's store when it proposed (it reads, then proposes at once). */
  | { kind: 'agent'; node: string; readRevision: number }
  | LoopOrigin;

/** A leader loop's decision: which node decided it under which term, and what it knew then. */
export interface LoopOrigin {
  kind: 'loop';
  node: string;
  term: number;
  key: string;
  decidedAtMs: number;
  /** The revision of the deciding node's applied store the decision read. */
  readRevision: number;
  /** Ms since the deciding loops started. */
  loopsRunningMs: number;
  /** Per node: ms since the deciding node last heard from it, from the world's contact table (null: never). */
  silenceMs: Record<string, number | null>;
  /** Node health's decisions: what the world knew of every other node (checkers/health.ts). */
  health?: Record<string, HealthFact>;
}

export interface Proposal {
  readonly seq: number;
  readonly node: string;
  readonly session: Session;
  readonly data: Uint8Array;
  /** The term a leader loop decided it in; null for agents' writes. */
  readonly fenceTerm: number | null;
  readonly origin: Origin;
  readonly deliverStep: number;
  readonly expireStep: number;
  /** Appended to its proposer's own log while it was a deposed leader that did not know it. */
  inOwnLog: boolean;
  settle(outcome: { ok: ProposalResult } | { err: Error }): void;
}

export interface LogEntry {
  index: number;
  term: number;
  logTimeMs: number;
  /** Null for a leader's empty entry. */
  data: Uint8Array | null;
  origin: Origin;
  proposal: Proposal | null;
  /** The committed result (the reference store's); null for an empty entry. */
  result: CommandResult | null;
}

/** Whether a committed entry changed anything: applied, and for a transaction, its compare held. */
export function tookEffect(r: CommandResult | null): boolean {
  return r !== null && r.ok && (r.kind !== 'txn' || r.succeeded);
}
