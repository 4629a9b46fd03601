// The state machine contract (the "FSM" port of the node).
//
// apply() must be deterministic: given the same entries in the same order it must produce the
// same state and the same results on every node. Anything time- or identity-dependent it needs
// comes in the entry (stamped by the proposer), never from the local clock or randomness.

export interface AppliedEntry {
  index: number;
  term: number;
  data: Uint8Array;
  /**
   * The entry's log time (ms), stamped by the leader that appended it (feature level 2 and up).
   * Undefined in entries of the first release, and in entries that carry none.
   */
  logTimeMs?: number;
  /**
   * The committed cluster feature level when the entry is applied (src/base/feature-level.ts;
   * default 1). At level 1 the state machine applies an entry exactly as the first release did
   * (log time from the proposer's stamp, its id rule), so old and new nodes agree during a rolling
   * upgrade; from level 2 only `logTimeMs` moves log time, and the current rules apply.
   */
  featureLevel?: number;
}

export interface StateMachine {
  /** Applies one committed entry and returns its result (handed to the proposer). */
  apply(entry: AppliedEntry): unknown;
  /** Serializes the whole state as of the last applied entry. */
  snapshot(): Uint8Array;
  /**
   * Optional: the same bytes as snapshot() once its parts are concatenated, of the state at the
   * time of the call, produced in slices with `pause()` between them while entries go on being
   * applied. The node prefers it, so a large state does not stop replication while it is
   * serialized.
   */
  snapshotInSlices?(pause: () => Promise<void>): Promise<Uint8Array[]>;
  /** Replaces the whole state with a snapshot produced by snapshot() (possibly on another node). */
  restore(data: Uint8Array): void;
  /** Optional: the log time (ms) as of the last applied entry; a new leader's log clock starts from it. */
  readonly logTimeMs?: number;
  /**
   * Optional: why restore() would refuse `data`, or undefined if it would take it. The node asks
   * before it accepts a snapshot from a peer, so bytes that cannot be restored never reach the
   * disk. Keeps nothing of what it decodes.
   */
  checkSnapshot?(data: Uint8Array): string | undefined;
}
