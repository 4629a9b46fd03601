// The port through which a part above the node writes to the replicated log. The node driver
// (src/node/raft-node.ts) implements it; loops, agents and certificate code take only this.

/** What a committed proposal gave: its log index and the state machine's answer. */
export interface ProposalResult {
  index: number;
  result: unknown;
}

export interface ProposeOptions {
  /** The cluster feature level the entry needs (src/base/feature-level.ts). */
  featureLevel?: number;
  /** The leader term the proposer acts in: the entry is refused (stale_term) in any other. */
  term?: number;
}

export interface Proposer {
  /**
   * Proposes an encoded command; resolves once it is applied on this node. Rejects with a typed
   * error for a consensus failure (no leader, timeout, overloaded); the state machine's own
   * answer, a refused compare included, is the result.
   */
  propose(data: Uint8Array, opts?: ProposeOptions): Promise<ProposalResult>;
}
