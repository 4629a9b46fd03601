// The port for who is in the cluster: this node's id, the Raft configuration, and the member
// records (names and addresses) it knows.

import type { MemberRecord } from '../resources/membership.ts';
import type { ConfState, NodeId } from '../raft/types.ts';

export interface MembershipView {
  readonly id: NodeId;
  confState(): ConfState;
  readonly membership: { list(): MemberRecord[] };
}
