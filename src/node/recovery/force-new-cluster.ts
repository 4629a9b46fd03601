// Rebuilding a one-node cluster from the log of the last member standing, when quorum is lost
// for good (`shoal recover --force-new-cluster`; docs/operations.md, "Recovery"), as etcd's
// --force-new-cluster does.
//
// The survivor's log is kept whole: every entry it holds, also those past the commit index it
// knew (etcd drops those; docs/operations.md says why shoal keeps them). After it come membership
// changes, written as already committed: leave a joint configuration if one is in effect, enter
// one whose incoming half is this node alone (every other voter and learner removed), leave it.
// At the next start the node applies them as it applies any committed entry: the others' ids go
// on the replicated removed list, their member records go, and with one voter it elects itself.
//
// The membership is computed by the consensus core itself (a RawNode over the log, no I/O, no
// timers), once to find the members and once over the result to check that it leaves this node
// the only voter, before and after the new log is written.

import { rm } from 'node:fs/promises';
import path from 'node:path';
import { assert } from '../../base/assert.ts';
import { SeededPrng } from '../../raft/prng.ts';
import { RawNode } from '../../raft/raw-node.ts';
import type { InitialState, LogStorage } from '../../raft/storage.ts';
import type { ConfChange, ConfState, Entry, HardState, Snapshot } from '../../raft/types.ts';
import { DiskStorage } from '../../storage/index.ts';
import { softwareVersion } from '../../version.ts';
import { newId, replaceClusterId, type Identity } from '../identity.ts';
import { confChangeContext, Membership, type MemberRecord } from '../../resources/membership.ts';
import { swapStorage, writeMarker, type RecoveryMarker } from './recovery-files.ts';
import { decodeSnapshotData } from '../snapshot-data.ts';

/** Entry bytes per write of the new log: well under the write-ahead log's record limit. */
const copyBatchBytesMax = 8 * 1024 * 1024;

/** What the survivor's log holds, and the entries that make it a one-node cluster. */
export interface ForceNewClusterPlan {
  nodeId: string;
  hardState: HardState;
  snapshotIndex: number;
  /** The last index of the survivor's log, before the forced entries. */
  lastIndex: number;
  /** Entries held but never seen committed: kept, and committed by the rewrite. */
  uncommitted: number;
  /** The membership at the end of the log (committed or not). */
  confState: ConfState;
  /** This node's member record, if the log has one. */
  self: MemberRecord | undefined;
  /** Whether this node stays a voter or learner of the configuration at the end of the log once any joint one is left. */
  isMember: boolean;
  /** The other voters and learners: removed by the forced entries. */
  otherIds: string[];
  /** Their member records (addresses), for the check that none of them answers. */
  others: MemberRecord[];
  /** Appended after lastIndex, in the term of the hard state. */
  forced: Entry[];
}

/** Reads the survivor's log (an open storage) and plans its rewrite. Changes nothing. */
export function planForceNewCluster(log: LogStorage, nodeId: string): ForceNewClusterPlan {
  const hardState = log.initialState().hardState;
  const lastIndex = log.lastIndex();
  const { confState, members } = replay(log, nodeId, []);
  const all = new Set([...confState.voters, ...confState.votersOutgoing, ...confState.learners, ...confState.learnersNext]);
  const otherIds = [...all].filter((id) => id !== nodeId).sort();
  const self = members.find((m) => m.id === nodeId);
  return {
    nodeId, hardState, snapshotIndex: log.snapshot().meta.index, lastIndex, uncommitted: lastIndex - hardState.commit,
    // A node that a joint change in progress removes is on the removed list already: not a member.
    confState, self, isMember: [...confState.voters, ...confState.learners, ...confState.learnersNext].includes(nodeId),
    otherIds, others: members.filter((m) => m.id !== nodeId),
    forced: forcedEntries(confState, nodeId, self, hardState.term, lastIndex),
  };
}

/**
 * Carries out `plan` on the data directory whose storage `storage` is (open, so that no node
 * starts on it meanwhile; closed here): the new log is written and checked aside, then the marker
 * says a rewrite started, the old storage is moved into a backup directory and the new one into
 * place, node.json gets the new cluster id, and the marker says it is done.
 */
export async function forceNewCluster(dataDir: string, storage: DiskStorage, plan: ForceNewClusterPlan, identity: Identity, now = new Date()): Promise<RecoveryMarker> {
  checkPlan(storage, plan);
  const stamp = now.toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
  const staging = path.join(dataDir, `recover-${stamp}.tmp`);
  const backup = path.join(dataDir, `pre-recover-${stamp}`);
  try {
    await writeForcedLog(staging, storage, plan);
  } catch (err) {
    // Nothing in the data directory changed: only our own unfinished copy goes.
    await rm(staging, { recursive: true, force: true });
    throw err;
  } finally {
    await storage.close();
  }
  const marker: RecoveryMarker = {
    version: 1, state: 'started', at: now.toISOString(), softwareVersion, nodeId: identity.id, name: identity.name,
    oldClusterId: identity.clusterId, clusterId: newId(), commitIndex: plan.hardState.commit, lastIndex: plan.lastIndex,
    index: plan.lastIndex + plan.forced.length, removed: plan.otherIds, backup: path.basename(backup),
  };
  await writeMarker(dataDir, marker);
  await swapStorage(dataDir, staging, backup);
  replaceClusterId(dataDir, marker.clusterId);
  const done = { ...marker, state: 'done' as const };
  await writeMarker(dataDir, done);
  return done;
}

/**
 * The membership changes that leave `nodeId` the only voter, as entries after `lastIndex`. A
 * change of the voters goes through a joint configuration (src/raft/confchange.ts), left by the
 * last entry; autoLeave is off, as the leave is already there.
 */
export function forcedEntries(cs: ConfState, nodeId: string, self: MemberRecord | undefined, term: number, lastIndex: number): Entry[] {
  const changes: ConfChange[] = [];
  if (cs.votersOutgoing.length > 0) changes.push({ changes: [], leaveJoint: true });
  // After that leave, the outgoing voters that were to become learners are learners.
  const voters = new Set(cs.voters);
  const others = [...new Set([...cs.voters, ...cs.learners, ...cs.learnersNext])].filter((id) => id !== nodeId).sort();
  const touchesVoters = !voters.has(nodeId) || others.some((id) => voters.has(id));
  changes.push({
    changes: [{ type: 'addVoter', node: nodeId }, ...others.map((node) => ({ type: 'removeNode' as const, node }))],
    autoLeave: false,
    ...(self !== undefined ? { context: confChangeContext([self]) } : {}),
  });
  if (touchesVoters) changes.push({ changes: [], leaveJoint: true });
  return changes.map((change, i) => ({ kind: 'conf', term, index: lastIndex + 1 + i, change }));
}

/**
 * Writes the new log into `dir` (a new, empty directory): the survivor's snapshot, its entries
 * after it, the forced entries, and a hard state that commits them all. Then reads it back as a
 * node's start would and checks that it makes `plan.nodeId` the only voter.
 */
export async function writeForcedLog(dir: string, log: LogStorage, plan: ForceNewClusterPlan): Promise<void> {
  const storage = await DiskStorage.open(dir);
  try {
    const snap: Snapshot = log.snapshot();
    const { term, vote } = plan.hardState;
    if (snap.meta.index > 0) await storage.save({ entries: [], snapshot: snap, hardState: { term, vote, commit: snap.meta.index } });
    for (let next = snap.meta.index + 1; next <= plan.lastIndex;) {
      const batch = log.entries(next, plan.lastIndex + 1, copyBatchBytesMax);
      await storage.save({ entries: batch });
      next += batch.length;
    }
    const last = plan.lastIndex + plan.forced.length;
    await storage.save({ entries: plan.forced, hardState: { term, vote, commit: last } });
  } finally {
    await storage.close();
  }
  const back = await DiskStorage.open(dir);
  try {
    assert(back.lastIndex() === plan.lastIndex + plan.forced.length, `the new log ends at ${back.lastIndex()}, not ${plan.lastIndex + plan.forced.length}`);
    checkSoleVoter(replay(back, plan.nodeId, []).confState, plan.nodeId);
  } finally {
    await back.close();
  }
}

/** Checks, before anything is written, that the forced entries leave `plan.nodeId` the only voter. */
export function checkPlan(log: LogStorage, plan: ForceNewClusterPlan): void {
  checkSoleVoter(replay(log, plan.nodeId, plan.forced).confState, plan.nodeId);
}

function checkSoleVoter(cs: ConfState, nodeId: string): void {
  const sole = cs.voters.length === 1 && cs.voters[0] === nodeId && cs.votersOutgoing.length === 0 && cs.learners.length === 0 && cs.learnersNext.length === 0;
  assert(sole, `the forced membership is not ${nodeId} alone: ${JSON.stringify(cs)}`);
}

/**
 * Applies the log's membership changes, through `tail`, as a node's start would: the consensus
 * core over the log with every entry committed, and the member records as RaftNode keeps them.
 */
function replay(log: LogStorage, nodeId: string, tail: readonly Entry[]): { confState: ConfState; members: MemberRecord[] } {
  const view = new CommittedThrough(log, tail);
  const raw = new RawNode({ id: nodeId, prng: new SeededPrng(1) }, view);
  const membership = new Membership();
  const data = log.snapshot().data;
  if (data.length > 0) membership.restore(decodeSnapshotData(data).members);
  // One Ready hands out every committed entry; a second would only be a role or term change.
  for (let round = 0; round < 10 && raw.hasReady(); round++) {
    const rd = raw.ready();
    for (const e of rd.committedEntries) if (e.kind === 'conf') membership.applyConfChange(e.change);
    raw.advance(rd);
  }
  assert(raw.status().applied === view.lastIndex(), `replay applied ${raw.status().applied} of ${view.lastIndex()}`);
  const confState = raw.confState();
  membership.retain(confState);
  return { confState, members: membership.list() };
}

/** A log with `tail` after its last entry and a hard state that commits every entry. */
class CommittedThrough implements LogStorage {
  constructor(private readonly base: LogStorage, private readonly tail: readonly Entry[]) {}

  initialState(): InitialState {
    const s = this.base.initialState();
    return { confState: s.confState, hardState: { ...s.hardState, commit: this.lastIndex() } };
  }

  entries(lo: number, hi: number, bytesMax: number): Entry[] {
    const baseLast = this.base.lastIndex();
    const head = lo <= baseLast ? this.base.entries(lo, Math.min(hi, baseLast + 1), bytesMax) : [];
    const headEnd = lo + head.length - 1;
    if (hi <= baseLast + 1 || headEnd < Math.min(hi - 1, baseLast)) return head;
    return [...head, ...this.tail.slice(Math.max(lo, baseLast + 1) - baseLast - 1, hi - baseLast - 1)];
  }

  term(index: number): number {
    const baseLast = this.base.lastIndex();
    if (index <= baseLast) return this.base.term(index);
    const e = this.tail[index - baseLast - 1];
    if (e === undefined) throw new RangeError(`term(${index}) beyond last index ${this.lastIndex()}`);
    return e.term;
  }

  firstIndex(): number {
    return this.base.firstIndex();
  }

  lastIndex(): number {
    return this.base.lastIndex() + this.tail.length;
  }

  snapshot(): Snapshot {
    return this.base.snapshot();
  }
}
