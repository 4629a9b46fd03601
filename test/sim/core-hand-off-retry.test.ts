// Two liveness failures the simulator found in the same place (seeds 2054434 and 2057168, with
// PreVote, in the first 100,000-seed run after seed 701291's fix): a node removed by a committed
// change holds entries the remaining voters lack, and they, not having heard of the commit,
// still need its vote; so it campaigns for them and hands leadership over (seed 5035's fix).
//
// - 2054434: one answer to the removed node's pre-vote was lost. Its campaign never ended, as
//   a node that may not campaign on its own never times out one; a pre-candidate does not start
//   another when it refuses a vote, and pre-votes raise no term that would end it.
// - 2057168: the removed leader n3's campaign stalled the same way, and n1, removed with it,
//   did not campaign because it still named n3, which had stepped down without a newer term.
//
// Now such a campaign ends after an election timeout, and a leader that has been silent for an
// election timeout no longer holds the removed node back. The reduced scenarios are in
// test/raft/paper-6-membership.test.ts; docs/raft.md tells the story.

import { describe, expect, it } from 'vitest';
import { runSeed } from './run-seed.ts';

describe('a removed node campaigning to hand leadership over (found by the simulator)', () => {
  it.each([2054434, 2057168])('seed %i recovers', (seed) => {
    expect(runSeed(seed).failure).toBeUndefined();
  });
});
