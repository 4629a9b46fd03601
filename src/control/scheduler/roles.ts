// A node's role for `node.role` constraints. Shoal has no managers and workers, only raft voters
// and learners, and the role is not in the node's record but in raft's configuration, which the
// caller reads (ControlState.voters): a voter is a `manager`, any other node a `worker`. Without
// the voters, no role is given, and no role constraint holds (constraint.ts).

import type { NodeRecord } from '../../resources/records.ts';
import type { RoledNode } from './types.ts';

/** The nodes with their roles (copies), or the records themselves when the voters are not known. */
export function withRoles(nodes: readonly NodeRecord[], voters: ReadonlySet<string> | undefined): readonly RoledNode[] {
  if (voters === undefined) return nodes;
  return nodes.map((n) => ({ ...n, role: voters.has(n.id) ? 'manager' : 'worker' }));
}
