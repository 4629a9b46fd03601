// The scheduler: pure placement of pending tasks (docs/scheduler.md).

export { schedule, bestNode } from './schedule.ts';
export { eligibleNodes } from './eligible-nodes.ts';
export { filters, feasible, firstRejection, nodeReady, nodeActive, runtimeUp, constraintsHold, resourcesFree, hostPortsFree, maxPerNodeRoom, type Filter } from './filters.ts';
// Issue 40: placement by the platforms an image offers.
export { platformOffered, platformServes, platformText } from './filters.ts';
export { spreadRank, binpackRank, rankOf, compareRanks, loadAfter, spreadGroups, type Rank } from './scores.ts';
export { explain } from './reasons.ts';
export { usageByNode, addDemand, emptyUsage, type NodeUsage } from './usage.ts';
export { demandOf } from './demand.ts';
export type { ScheduleInput, ScheduleResult, Placement, Unplaced, TaskWithSpec, TaskDemand, Rejection, NodeSlot } from './types.ts';
