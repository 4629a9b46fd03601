// What one seed exercised. The test suite sums these over all seeds and asserts every fault kind
// actually happened, so the run cannot pass vacuously.

export interface SeedStats {
  nodes: number;
  ticks: number;
  /** Terms that had a leader. */
  elections: number;
  /** Highest index known committed. */
  commitIndex: number;
  proposals: number;
  proposalsDropped: number;
  acked: number;
  crashes: number;
  crashesMidReady: number;
  unsyncedWritesLost: number;
  restarts: number;
  partitions: number;
  snapshotsSent: number;
  snapshotsInstalled: number;
  compactions: number;
  checkpoints: number;
  confChangesProposed: number;
  confChangesApplied: number;
  nodesAdded: number;
  nodesRemoved: number;
  /** Conf changes proposed that replace a majority of the voters at once. */
  majorityReplacements: number;
  /** Partitions that cut the outgoing-only voters of a joint configuration off. */
  jointSplits: number;
  /** 'persisted' notices delivered to followers (followerCommit). */
  persistedNotices: number;
  /** Of those, the ones on which the follower committed by itself at once. */
  followerCommits: number;
  /** Reads answered to another node without a heartbeat round, with several voters (followerReadQuorum). */
  followerReads: number;
  transfersRequested: number;
  transfersCompleted: number;
  readsIssued: number;
  readsServed: number;
  messagesSent: number;
  messagesLost: number;
  messagesDuplicated: number;
  /** Ticks the liveness phase needed to reach a leader, a commit and convergence. */
  livenessTicks: number;
}

export const emptyStats = (): SeedStats => ({
  nodes: 0, ticks: 0, elections: 0, commitIndex: 0, proposals: 0, proposalsDropped: 0, acked: 0,
  crashes: 0, crashesMidReady: 0, unsyncedWritesLost: 0, restarts: 0, partitions: 0,
  snapshotsSent: 0, snapshotsInstalled: 0, compactions: 0, checkpoints: 0,
  confChangesProposed: 0, confChangesApplied: 0, nodesAdded: 0, nodesRemoved: 0, majorityReplacements: 0, jointSplits: 0,
  persistedNotices: 0, followerCommits: 0, followerReads: 0,
  transfersRequested: 0, transfersCompleted: 0, readsIssued: 0, readsServed: 0,
  messagesSent: 0, messagesLost: 0, messagesDuplicated: 0, livenessTicks: 0,
});

export function addStats(into: SeedStats, s: SeedStats): void {
  for (const k of Object.keys(into) as Array<keyof SeedStats>) into[k] += s[k];
}
