// Dead member cleanup: the rule (src/node/dead-members.ts) as a table, then the autopilot acting
// on it with a fake node and clock (src/node/autopilot.ts): who is removed, when, never below the
// voter floor or the quorum, once, with a log line, an event and the CA holder's warning.

import { describe, expect, it } from 'vitest';
import { DocumentStore, encodeCommand, type JsonObject } from '../../fsm/index.ts';
import { Autopilot, type AutopilotNode } from '../../src/node/autopilot.ts';
import { deadMemberDecision, type DeadMemberInput } from '../../src/node/dead-members.ts';
import { Membership } from '../../src/resources/membership.ts';
import type { ConfChange, ConfState, ProgressStatus } from '../../src/raft/types.ts';
import { caHoldersCollection } from '../../src/security/ca-holders.ts';
import type { Logger } from '../../src/log.ts';

const minute = 60_000;
const base: DeadMemberInput = {
  removeAfterMs: 10 * minute, minQuorum: 3, self: 'a', voters: ['a', 'b', 'c', 'd'], learners: [], healthyVoters: ['a', 'b', 'c'], downForMs: new Map(),
};
const down = (entries: Array<[string, number]>): Map<string, number> => new Map(entries);

describe('dead member rule', () => {
  it('removes nothing when off, or before the member has been silent long enough', () => {
    expect(deadMemberDecision({ ...base, removeAfterMs: 0, downForMs: down([['d', 60 * minute]]) }).remove).toBeNull();
    expect(deadMemberDecision({ ...base, downForMs: down([['d', 10 * minute - 1]]) }).remove).toBeNull();
    expect(deadMemberDecision({ ...base, downForMs: down([['d', 10 * minute]]) }).remove).toEqual({ id: 'd', role: 'voter', downForMs: 10 * minute });
  });

  it('never takes the voters below minQuorum, and says why', () => {
    const d = deadMemberDecision({ ...base, voters: ['a', 'b', 'c'], healthyVoters: ['a', 'b'], downForMs: down([['c', 60 * minute]]) });
    expect(d.remove).toBeNull();
    expect(d.held).toEqual([{ id: 'c', downForMs: 60 * minute, reason: 'removing it would leave 2 voters, below autopilot.minQuorum (3)' }]);
    expect(deadMemberDecision({ ...base, minQuorum: 2, voters: ['a', 'b', 'c'], healthyVoters: ['a', 'b'], downForMs: down([['c', 60 * minute]]) }).remove?.id).toBe('c');
  });

  it('never removes a voter when the healthy voters are no quorum', () => {
    // Five voters, three dead: the two healthy cannot commit a removal, nor keep a quorum after it.
    const d = deadMemberDecision({ ...base, minQuorum: 1, voters: ['a', 'b', 'c', 'd', 'e'], healthyVoters: ['a', 'b'], downForMs: down([['c', 20 * minute], ['d', 20 * minute], ['e', 20 * minute]]) });
    expect(d.remove).toBeNull();
    expect(d.held.map((h) => h.id)).toEqual(['c', 'd', 'e']);
    expect(d.held[0]?.reason).toContain('only 2 of 5 voters are healthy');
  });

  it('removes one at a time, the longest silent first (then by id); a learner whatever the floor', () => {
    const five = { ...base, minQuorum: 3, voters: ['a', 'b', 'c', 'd', 'e'], healthyVoters: ['a', 'b', 'c'] };
    expect(deadMemberDecision({ ...five, downForMs: down([['d', 20 * minute], ['e', 30 * minute]]) }).remove?.id).toBe('e');
    expect(deadMemberDecision({ ...five, downForMs: down([['e', 20 * minute], ['d', 20 * minute]]) }).remove?.id).toBe('d');
    const floor = { ...base, voters: ['a', 'b', 'c'], healthyVoters: ['a', 'b', 'c'], learners: ['l'] };
    expect(deadMemberDecision({ ...floor, downForMs: down([['l', 11 * minute]]) }).remove).toEqual({ id: 'l', role: 'learner', downForMs: 11 * minute });
  });

  it('skips a voter held by the floor for a removable learner', () => {
    const d = deadMemberDecision({ ...base, voters: ['a', 'b', 'c'], healthyVoters: ['a', 'b'], learners: ['l'], downForMs: down([['c', 30 * minute], ['l', 20 * minute]]) });
    expect(d.remove?.id).toBe('l');
    expect(d.held.map((h) => h.id)).toEqual(['c']);
  });

  it('never removes the leader itself', () => {
    expect(deadMemberDecision({ ...base, downForMs: down([['a', 60 * minute]]) }).remove).toBeNull();
  });
});

/** A leader whose members, health and silences the test sets; membership changes apply at once. */
class FakeNode implements AutopilotNode {
  readonly id = 'a';
  isLeader = true;
  currentTerm = 2;
  readonly membership = new Membership();
  cs: ConfState = { voters: ['a', 'b', 'c', 'd'], votersOutgoing: [], learners: [], learnersNext: [], autoLeave: false };
  /** Monotonic ms at which each peer was last heard (absent: never since start). */
  readonly heardAt = new Map<string, number>();
  clock = 0;
  readonly changes: ConfChange[] = [];

  constructor() {
    this.membership.restore(['a', 'b', 'c', 'd'].map((id) => ({ id, name: `n-${id}`, peerAddress: `${id}:7200`, apiAddress: `${id}:7100` })));
  }

  status(): ReturnType<AutopilotNode['status']> {
    const progress: Record<string, ProgressStatus> = {};
    for (const id of [...this.cs.voters, ...this.cs.learners]) {
      const at = this.heardAt.get(id);
      progress[id] = { match: 10, next: 11, state: 'replicate', recentActive: id === this.id || (at !== undefined && this.clock - at < 2_000), learner: false, inflight: 0, pendingSnapshot: 0 };
    }
    return {
      id: this.id, term: this.currentTerm, vote: this.id, commit: 10, applied: 10, lastIndex: 10, firstIndex: 1, role: 'leader', leader: this.id, leadTransferee: '',
      confState: this.cs, progress, membersInfo: this.membership.list(),
    };
  }

  silentForMs(id: string): number | undefined {
    const at = this.heardAt.get(id);
    return at === undefined ? undefined : this.clock - at;
  }

  changeMembership(cc: ConfChange): Promise<void> {
    this.changes.push(cc);
    for (const c of cc.changes) {
      if (c.type === 'removeNode') this.cs = { ...this.cs, voters: this.cs.voters.filter((v) => v !== c.node), learners: this.cs.learners.filter((v) => v !== c.node) };
    }
    this.membership.retain(this.cs);
    return Promise.resolve();
  }

  /** Every peer but `silent` speaks at `clock`. */
  heartbeat(...silent: string[]): void {
    for (const id of this.cs.voters) if (id !== this.id && !silent.includes(id)) this.heardAt.set(id, this.clock);
  }
}

function harness(opts: { removeAfterMs?: number; minQuorum?: number } = {}): { node: FakeNode; store: DocumentStore; pilot: Autopilot; lines: string[]; events: Array<[string, string, JsonObject]> } {
  const node = new FakeNode();
  const store = new DocumentStore();
  const lines: string[] = [];
  const log: Logger = { debug() {}, info: (m) => lines.push(m), warn: (m) => lines.push(m), error: (m) => lines.push(m) };
  const events: Array<[string, string, JsonObject]> = [];
  const pilot = new Autopilot({
    node, store, log, deadMemberRemoveAfterMs: opts.removeAfterMs ?? 10 * minute, minQuorum: opts.minQuorum ?? 3,
    record: (type, subject, details) => events.push([type, subject, details]),
  });
  return { node, store, pilot, lines, events };
}

/** Advances the fake clock by `ms` in one-second rounds, `silent` peers saying nothing; returns what was removed. */
async function run(h: ReturnType<typeof harness>, ms: number, ...silent: string[]): Promise<string[]> {
  const removed: string[] = [];
  for (let t = 0; t < ms; t += 1_000) {
    h.node.clock += 1_000;
    h.node.heartbeat(...silent);
    const id = await h.pilot.maybeRemoveDead(h.node.clock);
    if (id !== null) removed.push(id);
  }
  return removed;
}

describe('autopilot dead member cleanup', () => {
  it('removes a voter silent for deadMemberRemoveAfterMs, once, with a log line and an event', async () => {
    const h = harness();
    expect(await run(h, 60_000)).toEqual([]);
    expect(await run(h, 10 * minute - 1_000, 'd')).toEqual([]);
    expect(await run(h, 1_000, 'd')).toEqual(['d']);
    expect(await run(h, 5 * minute, 'd')).toEqual([]);
    expect(h.node.changes).toEqual([{ changes: [{ type: 'removeNode', node: 'd' }] }]);
    expect(h.lines.filter((l) => l.includes('removed dead voter n-d (d)'))).toHaveLength(1);
    expect(h.lines.join('\n')).toContain('join token');
    expect(h.events).toEqual([['member.auto_removed', 'd', { name: 'n-d', role: 'voter', downMs: 10 * minute, removeAfterMs: 10 * minute, caKeyHolder: false }]]);
  });

  it('does nothing when off', async () => {
    const h = harness({ removeAfterMs: 0 });
    expect(await run(h, 60 * minute, 'd')).toEqual([]);
    expect(h.lines).toEqual([]);
  });

  it('keeps a voter the floor needs, saying so once', async () => {
    const h = harness({ minQuorum: 4 });
    expect(await run(h, 30 * minute, 'd')).toEqual([]);
    const held = h.lines.filter((l) => l.includes('not removing dead voter n-d'));
    expect(held).toHaveLength(1);
    expect(held[0]).toContain('below autopilot.minQuorum (4)');
  });

  it('counts from its own start of leading, not from a silence it inherited', async () => {
    const h = harness();
    h.node.isLeader = false;
    h.node.clock = 50 * minute; // d last spoke at 0, long before this node led
    h.node.heardAt.set('d', 0);
    expect(await h.pilot.maybeRemoveDead(h.node.clock)).toBeNull();
    h.node.isLeader = true;
    h.node.currentTerm = 3;
    // The first round as leader starts the count at 0 s, so 600 rounds reach 599 s.
    expect(await run(h, 10 * minute, 'd')).toEqual([]);
    expect(await run(h, 1_000, 'd')).toEqual(['d']);
  });

  it('counts a new member from when it joined, even one that never spoke', async () => {
    const h = harness();
    await run(h, 30 * minute);
    h.node.cs = { ...h.node.cs, learners: ['e'] };
    h.node.membership.restore([...h.node.membership.list(), { id: 'e', name: 'n-e', peerAddress: 'e:7200', apiAddress: 'e:7100' }]);
    expect(await run(h, 10 * minute)).toEqual([]);
    expect(await run(h, 1_000)).toEqual(['e']);
    expect(h.events[0]?.[2]).toMatchObject({ role: 'learner' });
  });

  it('logs the CA holder warning when the removed member held the CA key', async () => {
    const h = harness();
    h.store.apply({ index: 1, term: 1, data: encodeCommand({ cmd: { op: 'put', collection: caHoldersCollection, id: 'd', doc: { since: 0 } }, ts: 0, principal: 'shoal' }) });
    expect(await run(h, 11 * minute, 'd')).toEqual(['d']);
    expect(h.lines.some((l) => l.includes('held the cluster CA key') && l.includes('shoal ca rotate'))).toBe(true);
    expect(h.events[0]?.[2]).toMatchObject({ caKeyHolder: true });
  });

  it('counts a removal whose answer was lost but which committed, and tries again one that did not', async () => {
    const h = harness();
    const apply = h.node.changeMembership.bind(h.node);
    let calls = 0;
    h.node.changeMembership = async (cc) => {
      calls++;
      if (calls === 1) throw new Error('proposal dropped'); // not committed: d is still a member
      await apply(cc);
      throw new Error('timed out'); // committed, but the answer was lost
    };
    expect(await run(h, 10 * minute + 5_000, 'd')).toEqual(['d']);
    expect(calls).toBe(2);
    expect(h.lines.filter((l) => l.includes('removing dead member d failed'))).toHaveLength(1);
    expect(h.events.map(([t, s]) => [t, s])).toEqual([['member.auto_removed', 'd']]);
  });

  it('does nothing on a follower', async () => {
    const h = harness();
    h.node.isLeader = false;
    expect(await run(h, 60 * minute, 'd')).toEqual([]);
    expect(h.node.changes).toEqual([]);
  });
});
