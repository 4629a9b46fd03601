// The meaning check of a message from a peer, run after its shape check (validate-message.ts)
// and before the consensus core sees it. Every rule here holds for every message a correct node
// sends, whatever the receiver's state, so a message that breaks one can only come from a bug,
// a version skew or a hostile member, and is dropped and counted. The core's assertions are
// left for this node's own bugs: a well-shaped but meaningless message used to reach them (a
// 'snap' without a snapshot, a proposal without entries, an append whose entries skip an
// index) and stop the node, and, since every node gets the same messages, the cluster.
//
// Rules that depend on the receiver's state are the core's, which ignores such messages (an
// acknowledgement past the leader's last index, a snapshot not newer than the commit index). A
// message that is meaningful but false (a follower acknowledging entries it lacks) cannot be
// told from a true one: Raft trusts its members, as etcd's raft does.

import type { ConfState, Entry, Message, MessageType, NodeId } from '../src/raft/types.ts';
import type { MessageRefusal } from './inbound-drops.ts';

/** Requests a follower relays to the leader: the leader judges them in its own term, so they carry none. */
const FORWARDED: ReadonlySet<MessageType> = new Set(['prop', 'readIndex', 'transferLeader']);
/** Message types with entries: an append carries the leader's, a proposal the new ones. */
const WITH_ENTRIES: ReadonlySet<MessageType> = new Set(['app', 'prop']);
/**
 * Longer than any context the core produces (a read's key is the asking node's id, at most 256
 * characters, and the driver's short sequence number). The leader keeps up to 4096 pending reads
 * with their contexts; this bounds that memory.
 */
export const CONTEXT_LENGTH_MAX = 1024;

/** Whether `m` may have come from `peer`, the node the connection authenticated, and is for `local`. */
export function checkAddressing(m: Message, peer: NodeId, local: NodeId): MessageRefusal | undefined {
  if (m.from !== peer) return { reason: 'wrong_sender', detail: `a '${m.type}' message claims to be from ${JSON.stringify(m.from)} on the connection of ${peer}` };
  if (m.to !== local) return { reason: 'misaddressed', detail: `a '${m.type}' message from ${peer} is addressed to ${JSON.stringify(m.to)}, not to this node` };
  // Only a relayed request names another node it acts for, never the node relaying it. (It may
  // name this node: a request it relayed as a follower, relayed back once it became leader.)
  if (m.origin !== undefined && (!FORWARDED.has(m.type) || m.origin === peer || m.origin === '')) {
    return { reason: 'misaddressed', detail: `a '${m.type}' message from ${peer} relays for ${JSON.stringify(m.origin)}, which only a request relayed for another node may name` };
  }
  return undefined;
}

/** The rules every message a correct node sends obeys; the first one broken, if any. */
export function checkMessage(m: Message): MessageRefusal | undefined {
  return checkTerm(m) ?? checkEntries(m) ?? checkSnapshotField(m) ?? checkContext(m);
}

/** Addressing, then meaning: what a transport runs on each message before handing it on. */
export function admitMessage(m: Message, peer: NodeId, local: NodeId): MessageRefusal | undefined {
  return checkAddressing(m, peer, local) ?? checkMessage(m);
}

function badTerm(m: Message, why: string): MessageRefusal {
  return { reason: 'bad_term', detail: `'${m.type}' message with term ${m.term}: ${why}` };
}

function checkTerm(m: Message): MessageRefusal | undefined {
  if (FORWARDED.has(m.type)) return m.term === 0 ? undefined : badTerm(m, 'a relayed request carries no term');
  // Everything else is stamped with the sender's term, 1 or more from the bootstrap on. A vote
  // request with term 0 used to reach the assertion that a vote answer carries a term.
  if (m.term === 0) return badTerm(m, 'it must carry a term');
  // A candidate's last entry, and the entry an append follows, are of a term no later than the sender's.
  if ((m.type === 'vote' || m.type === 'preVote' || m.type === 'app') && m.logTerm > m.term) {
    return badTerm(m, `its log term ${m.logTerm} is later than its term`);
  }
  if (m.type === 'app' && (m.index === 0) !== (m.logTerm === 0)) return badTerm(m, `index ${m.index} and log term ${m.logTerm}: only entry 0 has term 0`);
  return undefined;
}

function badEntries(m: Message, why: string): MessageRefusal {
  return { reason: 'bad_entries', detail: `'${m.type}' message with ${m.entries.length} entries: ${why}` };
}

function checkEntries(m: Message): MessageRefusal | undefined {
  if (!WITH_ENTRIES.has(m.type)) return m.entries.length === 0 ? undefined : badEntries(m, 'this type carries none');
  if (m.type === 'prop') return checkProposal(m);
  // An append: entries index+1, index+2, ..., their terms from logTerm up to the leader's term
  // and never decreasing (etcd's logSlice.valid). Entries that skip an index used to reach the
  // assertion that an append never rewrites a committed entry.
  let prevTerm = m.logTerm;
  for (let i = 0; i < m.entries.length; i++) {
    const e = m.entries[i] as Entry;
    if (e.index !== m.index + 1 + i) return badEntries(m, `entry ${i} has index ${e.index}, not ${m.index + 1 + i}`);
    if (e.term === 0) return badEntries(m, `entry ${e.index} has term 0`);
    if (e.term < prevTerm) return badEntries(m, `entry ${e.index} has term ${e.term}, before the term ${prevTerm} of the entry it follows`);
    if (e.term > m.term) return badEntries(m, `entry ${e.index} has term ${e.term}, later than the leader's term`);
    prevTerm = e.term;
  }
  return undefined;
}

/** A proposal's index and terms are the leader's to stamp; what it must have is content. */
function checkProposal(m: Message): MessageRefusal | undefined {
  if (m.entries.length === 0) return badEntries(m, 'a proposal proposes something');
  for (const e of m.entries) {
    if (e.kind !== 'conf') continue;
    // What RawNode.proposeConfChange refuses on the node that proposes.
    const cc = e.change;
    if (cc.changes.length === 0 && cc.leaveJoint !== true) return badEntries(m, 'a membership change without changes that does not leave a joint configuration');
    if (cc.changes.some((c) => c.node === '')) return badEntries(m, 'a membership change names no node');
  }
  return undefined;
}

function badSnapshot(m: Message, why: string): MessageRefusal {
  return { reason: 'bad_snapshot', detail: `'${m.type}' message: ${why}` };
}

function checkSnapshotField(m: Message): MessageRefusal | undefined {
  const s = m.snapshot;
  if (m.type !== 'snap') return s === undefined ? undefined : badSnapshot(m, 'only a snap message carries a snapshot');
  if (s === undefined) return badSnapshot(m, 'a snap message without a snapshot');
  const { index, term, confState } = s.meta;
  // Index 0 is the empty log's, which no leader sends; the entry at any later index has a term.
  if (index === 0) return badSnapshot(m, 'a snapshot at index 0');
  if (term === 0) return badSnapshot(m, `a snapshot at index ${index} with term 0`);
  if (term > m.term) return badSnapshot(m, `a snapshot of term ${term} sent in term ${m.term}`);
  const problem = confStateProblem(confState);
  return problem === undefined ? undefined : badSnapshot(m, `snapshot ${index}: ${problem}`);
}

/**
 * What the tracker's configuration invariants (configProblem in src/raft/tracker.ts) refuse,
 * plus what no change can produce (no voter; an empty id). A snapshot's membership is restored
 * as it is, and used to reach that assertion.
 */
export function confStateProblem(cs: ConfState): string | undefined {
  if (cs.voters.length === 0) return 'a membership without voters';
  const all = [...cs.voters, ...cs.votersOutgoing, ...cs.learners, ...cs.learnersNext];
  if (all.includes('')) return 'a membership naming an empty node id';
  const incoming = new Set(cs.voters);
  const outgoing = new Set(cs.votersOutgoing);
  const learners = new Set(cs.learners);
  for (const id of learners) {
    if (incoming.has(id) || outgoing.has(id)) return `${id} is both a learner and a voter`;
  }
  for (const id of cs.learnersNext) {
    if (!outgoing.has(id)) return `${id} is to become a learner but is not an outgoing voter`;
    if (learners.has(id) || incoming.has(id)) return `${id} is to become a learner but is already a learner or an incoming voter`;
  }
  if (cs.autoLeave && outgoing.size === 0) return 'autoLeave set outside a joint configuration';
  return undefined;
}

function checkContext(m: Message): MessageRefusal | undefined {
  if (m.context === undefined || m.context.length <= CONTEXT_LENGTH_MAX) return undefined;
  return { reason: 'bad_context', detail: `'${m.type}' message with a context of ${m.context.length} characters (at most ${CONTEXT_LENGTH_MAX})` };
}
