// What one seed exercised. The test suite sums these over all seeds and asserts every kind of
// fault and every path of the modelled consensus happened, so the run cannot pass vacuously.

export interface SimStats {
  steps: number;
  entries: number;
  elections: number;
  /** Leadership changes with a live leader. */
  transfers: number;
  /** Deposed leaders' proposals forwarded and appended in a later term. */
  forwarded: number;
  /** Deposed leaders' proposals that committed in their own term at the next election. */
  survived: number;
  /** Proposals lost (in a deposed leader's own log, or with a crashed shoal). */
  lost: number;
  /** Committed loop entries refused with stale_term. */
  staleTermRefused: number;
  /** Committed loop transactions whose compare failed (decided on state that had changed). */
  loopConflicts: number;
  /** Committed loop writes refused because a document they wrote had changed since the loop read it. */
  loopWritesRefused: number;
  /** Operator writes timed to land between a decision's read and its write (scenario.operator.race). */
  races: number;
  /** Agents' report transactions whose compare failed (the node's epoch raised, or a task gone). */
  reportsRefused: number;
  placements: number;
  /** Node records declared down (epoch raised). */
  nodesDeclaredDown: number;
  partitions: number;
  crashes: number;
  machineDeaths: number;
  restarts: number;
  runtimeOutages: number;
  containerExits: number;
  updates: number;
  badUpdates: number;
  scales: number;
  drains: number;
  /** Rebalance steps the operator wrote (a task moved). */
  rebalances: number;
  /** Slots voluntary actions took down (the budget checker judged each), and the entries that used the budget to its last slot. */
  budgetedStops: number;
  budgetAtLimit: number;
  /** Updates that ended paused, rolled back, or completed, as the committed store saw them. */
  updatesPaused: number;
  updatesRolledBack: number;
  updatesCompleted: number;
  /** shoal frozen by SIGSTOP; machines suspended. */
  freezes: number;
  suspends: number;
  /** Exclusive containers killed by their fence (the agent could not, or was too late). */
  fenceKills: number;
  /** One link cut (two nodes cannot hear each other, both hear the rest). */
  linkCuts: number;
  /** Graceful stops of shoal (a goodbye to its peers; containers run on). */
  gracefulStops: number;
  /** Hand-overs asked for by node health (a node only the leader could not hear). */
  healthTransfers: number;
  /** Replicated volumes (issue 41): versions the writers took, increments holders accepted, and refused as stale, and tasks of the volume's service started. */
  volumeVersions: number;
  volumeCopies: number;
  volumeRefused: number;
  volumeTaskStarts: number;
  /** Eras begun on another node from a complete copy. */
  volumeFailovers: number;
  /** Simulated ms the liveness phase took to converge. */
  livenessMs: number;
}

export const emptyStats = (): SimStats => ({
  steps: 0, entries: 0, elections: 0, transfers: 0, forwarded: 0, survived: 0, lost: 0, staleTermRefused: 0, loopConflicts: 0, loopWritesRefused: 0, races: 0,
  reportsRefused: 0, placements: 0, nodesDeclaredDown: 0, partitions: 0, crashes: 0, machineDeaths: 0, restarts: 0,
  runtimeOutages: 0, containerExits: 0, updates: 0, badUpdates: 0, scales: 0, drains: 0, rebalances: 0, budgetedStops: 0, budgetAtLimit: 0,
  updatesPaused: 0, updatesRolledBack: 0, updatesCompleted: 0, freezes: 0, suspends: 0, fenceKills: 0,
  linkCuts: 0, gracefulStops: 0, healthTransfers: 0, volumeVersions: 0, volumeCopies: 0, volumeRefused: 0, volumeTaskStarts: 0, volumeFailovers: 0, livenessMs: 0,
});

export function addStats(into: SimStats, s: SimStats): void {
  for (const k of Object.keys(into) as (keyof SimStats)[]) into[k] += s[k];
}
