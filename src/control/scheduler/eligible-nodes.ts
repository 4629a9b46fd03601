// Which nodes a global service has a slot on: the orchestrator keeps one task per node listed
// here, and shuts down the tasks of nodes that drop out.
//
// Eligible: the service's constraints hold, the node is not draining, and it is not down. The
// rest is left to the scheduler, which keeps a task pending with a reason: a paused node keeps
// its slot (pause stops new placements only, so an existing task stays and a new one waits),
// as does a suspect node (it may come back) and one whose runtime is down or that lacks the
// capacity. A node that was down and returns is eligible again.

import { matchesConstraint } from '../../resources/spec/constraint.ts';
import type { NodeRecord } from '../../resources/records.ts';
import type { ServiceSpec } from '../../resources/spec/service-spec.ts';
import { withRoles } from './roles.ts';
import { compareText } from '../../base/order.ts';

/** The nodes a global service should have a task on, sorted by id. `voters`: for `node.role` constraints (roles.ts). */
export function eligibleNodes(spec: ServiceSpec, nodes: readonly NodeRecord[], voters?: ReadonlySet<string>): NodeRecord[] {
  // Roles only when a constraint asks: the records are returned, not the copies that carry them.
  const subjects = spec.constraints.some((c) => c.attribute === 'role') ? withRoles(nodes, voters) : nodes;
  return subjects
    .map((subject, i) => ({ subject, node: nodes[i] as NodeRecord }))
    .filter(({ subject: n }) => n.availability !== 'drain' && n.state !== 'down' && spec.constraints.every((c) => matchesConstraint(c, n)))
    .map(({ node }) => node)
    .sort((a, b) => compareText(a.id, b.id));
}
