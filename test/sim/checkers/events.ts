// The history the simulator records and the checkers read. Checkers see only these events (and
// read-only views of each node's persisted log), never the core's internals, so a checker can be
// fed a hand-made history in a unit test.

import type { NodeId, Role } from '../../../src/raft/types.ts';

/** A read-only view of one node's persisted log, as it is when the checker looks. */
export interface LogView {
  /** Term of the entry at `index`; undefined when compacted away or beyond the last index. */
  termAt(index: number): number | undefined;
  lastIndex(): number;
}

export interface EntryFact {
  index: number;
  term: number;
  /** Term of the entry before it in the same log; undefined when that entry is compacted. */
  prevTerm: number | undefined;
  digest: string;
}

export type SimEvent =
  /** The node's role or term changed in memory (observed after every input). */
  | { kind: 'role'; node: NodeId; life: number; term: number; role: Role }
  /** A Ready was handed out, before the driver acted on it. */
  | { kind: 'ready'; node: NodeId; mustSync: boolean; entries: number; snapshot: boolean; termOrVoteChanged: boolean }
  /** A hard state was written to the node's disk. */
  | { kind: 'hardState'; node: NodeId; life: number; term: number; vote: NodeId; commit: number }
  /** Entries were written to the node's log. */
  | { kind: 'append'; node: NodeId; entries: EntryFact[] }
  /** A node (re)started on its durable state. */
  | { kind: 'boot'; node: NodeId; life: number; term: number; vote: NodeId; commit: number }
  /** All of the node's Readies are handled; its whole log is in storage. */
  | { kind: 'settled'; node: NodeId; life: number; term: number; role: Role; commit: number; log: LogView }
  /**
   * The state machine applied the entry at `index`; `stateDigest` is its state afterwards and
   * `persistedCommit` the commit index on the node's disk when it did.
   */
  | { kind: 'apply'; node: NodeId; life: number; index: number; digest: string; stateDigest: string; persistedCommit: number }
  /** An entry at or below the restored index was handed out again after a restart; it is skipped. */
  | { kind: 'reapply'; node: NodeId; life: number; index: number; digest: string }
  /** The state machine was replaced by snapshot data. */
  | { kind: 'restore'; node: NodeId; life: number; index: number; stateDigest: string; reason: 'boot' | 'snapshot' }
  /** The node a client proposed to applied the proposal: the client has its answer. */
  | { kind: 'ack'; node: NodeId; index: number; digest: string; payload: string }
  | { kind: 'readIssue'; node: NodeId; context: string }
  | { kind: 'readState'; node: NodeId; context: string; index: number }
  | { kind: 'readServed'; node: NodeId; context: string; index: number; applied: number };

/** A safety property that the history broke. */
export class Violation extends Error {
  constructor(readonly checker: string, message: string) {
    super(`${checker}: ${message}`);
    this.name = 'Violation';
  }
}

export interface Checker {
  readonly name: string;
  /** Throws a Violation when the event breaks the property. */
  observe(e: SimEvent): void;
}
