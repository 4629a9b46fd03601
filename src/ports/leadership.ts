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

/** What a leader's loops need of the log besides proposing: its clock, its peers' silence, its own proposals. */
export interface LeaderLog {
  /** The log time to stamp now (src/node/log-clock.ts). */
  logTimeNow(): number;
  /** How long `id` has been silent to this leader, or undefined when unknown. */
  silentForMs(id: NodeId): number | undefined;
  /** Resolves once every proposal this node made has been applied or failed. */
  settleOwnProposals(): Promise<void>;
}
