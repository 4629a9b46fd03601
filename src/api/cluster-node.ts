// The client API's port to the node (beside the API, which alone uses it): what its routes read (identity, leadership, membership,
// progress) and ask for (proposals, reads, membership changes, leadership transfers). The node
// driver implements it; the API holds nothing more of the node than this.

import type { Logger } from '../log.ts';
import type { MemberRecord } from '../resources/membership.ts';
import type { ConfChange, NodeId, Status } from '../raft/types.ts';
import type { PeerStats } from '../../transport/types.ts';
import type { Leadership, LeaderLog } from '../ports/leadership.ts';
import type { Proposer } from '../ports/proposer.ts';
import type { ReadBarrier } from '../ports/read-barrier.ts';

export interface ClusterNode extends Proposer, ReadBarrier, Leadership, Pick<LeaderLog, 'logTimeNow'> {
  /** The node's logger, so that a route logs under the node's name. */
  readonly log: Logger;
  readonly membership: { list(): MemberRecord[]; get(id: NodeId): MemberRecord | undefined };
  confState(): Status['confState'];
  status(): Status & { membersInfo: MemberRecord[] };
  peerStats(): PeerStats[];
  readonly leaderId: NodeId;
  readonly appliedIndex: number;
  /** The highest feature level this build can apply. */
  readonly featureLevelSupported: number;
  /** Whether `id` was removed from the cluster (its certificate is refused from then on). */
  isRemoved(id: NodeId): boolean;
  changeMembership(cc: ConfChange): Promise<void>;
  /** Moves leadership to `to` (or the best voter); resolves with the new leader. */
  transferLeadership(to?: NodeId, opts?: { giveUpIfDisconnected?: boolean }): Promise<NodeId>;
}
