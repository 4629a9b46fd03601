// Why a membership change should wait: the rules the API's promote route and the autopilot
// share, beside the membership they judge.

import type { Status } from '../raft/types.ts';
import type { MemberRecord } from './membership.ts';

/** A member further behind the leader's last index than this is lagging (the API's health, and promotion). */
export const laggingEntriesMax = 1000;
/** A learner further behind the leader's last index than this is not promoted (without force). */
export const promoteLagEntriesMax = laggingEntriesMax;

/**
 * Why the leader should not promote `id` yet, or undefined when it may: as etcd, only a learner
 * the leader has heard from within the last election timeout and whose log is within
 * promoteLagEntriesMax of the leader's is promoted; anything else would make a voter that counts
 * against the quorum while it cannot help form one.
 */
export function promoteRefusal(st: Pick<Status, 'progress' | 'lastIndex'>, m: MemberRecord): { reason: 'inactive' | 'lagging'; message: string } | undefined {
  const pr = st.progress?.[m.id];
  if (pr === undefined || !pr.recentActive || pr.state === 'probe') {
    return { reason: 'inactive', message: `the leader has not heard from it lately (is it running, and reachable at ${m.peerAddress}?)` };
  }
  const lag = Math.max(0, st.lastIndex - pr.match);
  if (pr.state === 'snapshot' || lag > promoteLagEntriesMax) {
    return { reason: 'lagging', message: `it is ${lag} entries behind the leader${pr.state === 'snapshot' ? ' (still receiving a snapshot)' : ''}; a learner is promoted within ${promoteLagEntriesMax}` };
  }
  return undefined;
}
