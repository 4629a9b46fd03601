// The port for parts that start and stop with this node's leadership (the leader's loops): the
// term facts, the committed feature level, whether the node failed for good, and the events
// that say any of them may have changed. Listeners take no arguments: on each event the part
// re-reads what it needs (level-triggered).

import type { ShoalError } from '../errors.ts';
import type { NodeId } from '../raft/types.ts';
import type { TermSource } from './term-source.ts';

export type LeadershipEvent = 'leaderChange' | 'applied' | 'featureLevel';

export interface Leadership extends TermSource {
  readonly id: NodeId;
  /** The committed cluster feature level (src/base/feature-level.ts). */
  readonly featureLevel: number;
  /** Set once the node stopped for good; nothing may act for it after that. */
  readonly failure: ShoalError | undefined;
  on(event: LeadershipEvent, listener: () => void): unknown;
  off(event: LeadershipEvent, listener: () => void): unknown;
}

/**
 * How a peer's outbound connection from this node stands (transport/types.ts has the same
 * values): open, or what the last attempt came to. 'refused': the machine answered, nothing
 * listens on its peer port; 'silent': nothing answered; 'closed': a connection closed or a dial
 * failed otherwise; 'unknown': never dialled, or a transport that cannot tell.
 */
export type PeerLink = 'connected' | 'refused' | 'closed' | 'silent' | 'unknown';

/** What this node knows first-hand of a peer being there: node health's evidence (src/control/node-verdict.ts). */
export interface PeerContact {
  /** Ms since anything arrived from the peer (a Raft message; a transport frame, ping or pong); undefined: nothing yet. */
  heardAgoMs: number | undefined;
  /**
   * How long this node has been listening for the peer at all (since its transport started): a
   * silence counts from then at the most. Undefined when the transport cannot tell (the
   * in-memory one): only Raft messages are heard, which a follower gets from the leader alone.
   */
  watchingForMs: number | undefined;
  link: PeerLink;
  /** The peer said it is stopping (closed its connections with "going away") and nothing arrived since. */
  goodbye: boolean;
  /** Its machine refused a dial to the peer port (shoal not running there) and nothing arrived since, whatever `link` says now. */
  refused: boolean;
  /**
   * The peer's wall clock minus this node's, ms (positive: the peer is ahead), from the pongs of
   * this node's connection to it (transport/clock-offset.ts); absent when unknown (a peer of the
   * previous release, an in-memory transport, no pong yet). The jobs' clock rule uses it
   * (src/control/clock-sanity.ts).
   */
  clockOffsetMs?: number;
  /** Ms since that offset was measured (present with it). */
  clockSampledAgoMs?: number;
}

/** What a leader's loops need of the log besides proposing: its clock, its peers' silence, its own proposals. */
export interface LeaderLog {
  /** The log time to stamp now (src/node/log-clock.ts). */
  logTimeNow(): number;
  /** How long `id` has been silent to this leader, or undefined when unknown. */
  silentForMs(id: NodeId): number | undefined;
  /** What this node knows of `id` being there: Raft messages and the transport's connections together. */
  peerContact(id: NodeId): PeerContact;
  /** Resolves once every proposal this node made has been applied or failed. */
  settleOwnProposals(): Promise<void>;
}
