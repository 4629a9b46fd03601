// The meaning check (transport/check-message.ts): every rule refuses what it should, with its
// reason; no valid message is refused; and the rules that guard an assertion of the consensus
// core are needed: the same message stepped into a core stops it.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AssertionError } from '../../src/base/assert.ts';
import type { Message } from '../../src/raft/types.ts';
import { admitMessage, checkMessage, confStateProblem } from '../../transport/check-message.ts';
import { decodeFrames } from '../../transport/codec.ts';
import type { InboundDropReason } from '../../transport/inbound-drops.ts';
import { validateMessage } from '../../transport/validate-message.ts';
import { Cluster } from '../raft/harness.ts';
import {
  MEANING_RULES, SHAPE_BREAKS, buildMalformed, buildMeaningless, buildValid, classify, render, validRecipeArb,
  type MeaningRule, type Route,
} from './fuzz-messages.ts';

const route: Route = { from: 'b', to: 'a', members: ['a', 'b', 'c'], term: 4 };
const runs = Number(process.env.SHOAL_FUZZ_RUNS ?? 200);

const expectedReason: Record<MeaningRule, InboundDropReason> = {
  snapWithoutSnapshot: 'bad_snapshot', snapshotOnOtherType: 'bad_snapshot', snapIndexZero: 'bad_snapshot', snapTermZero: 'bad_snapshot',
  snapTermAhead: 'bad_snapshot', learnerVoter: 'bad_snapshot', learnerNextNotOutgoing: 'bad_snapshot', noVoters: 'bad_snapshot',
  emptyMemberId: 'bad_snapshot', autoLeaveNotJoint: 'bad_snapshot', propWithoutEntries: 'bad_entries', propEmptyConfChange: 'bad_entries',
  appGap: 'bad_entries', appTermDecreases: 'bad_entries', appEntryTermAhead: 'bad_entries', appEntryTermZero: 'bad_entries',
  appLogTermAhead: 'bad_term', appIndexWithoutTerm: 'bad_term', entriesOnOtherType: 'bad_entries', termZero: 'bad_term',
  relayedWithTerm: 'bad_term', contextTooLong: 'bad_context', wrongSender: 'wrong_sender', misaddressed: 'misaddressed',
};

describe('the meaning check of messages from peers', () => {
  it.each(MEANING_RULES)('refuses %s with its reason, whatever the rest of the message', (rule) => {
    fc.assert(fc.property(validRecipeArb, (base) => {
      const m = buildMeaningless(rule, base, route);
      expect(validateMessage(m).ok, 'still well-shaped').toBe(true);
      expect(admitMessage(m, route.from, route.to)?.reason).toBe(expectedReason[rule]);
    }), { numRuns: 30 });
  });

  it('admits every message a correct member sends, through the codec too', () => {
    fc.assert(fc.property(validRecipeArb, (r) => {
      const m = buildValid(r, route);
      expect(admitMessage(m, route.from, route.to)).toBeUndefined();
      const decoded = decodeFrames(render(r, route));
      expect(decoded.ok).toBe(true);
      expect(classify(render(r, route), route)).toBe(FORWARDED_OR_CURRENT(m) ? 'admitted' : 'stale');
    }), { numRuns: runs });
  });

  it('leaves nothing of the malformed recipes to the meaning check: the shape check refuses them all', () => {
    fc.assert(fc.property(fc.constantFrom(...SHAPE_BREAKS), fc.nat({ max: 20 }), validRecipeArb, (brk, field, base) => {
      expect(validateMessage(buildMalformed(brk, field, base, route)).ok).toBe(false);
      expect(classify(render({ kind: 'malformed', brk, field, base }, route), route)).toBe('dropped');
    }), { numRuns: runs });
  });

  it('refuses memberships the configuration tracker would assert on', () => {
    const cs = { voters: ['a', 'b'], votersOutgoing: [], learners: [], learnersNext: [], autoLeave: false };
    expect(confStateProblem(cs)).toBeUndefined();
    expect(confStateProblem({ ...cs, votersOutgoing: ['a', 'b', 'c'], learnersNext: ['c'], autoLeave: true })).toBeUndefined();
    expect(confStateProblem({ ...cs, learners: ['b'] })).toMatch(/both a learner and a voter/);
    expect(confStateProblem({ ...cs, votersOutgoing: ['c'], learners: ['c'] })).toMatch(/both a learner and a voter/);
    expect(confStateProblem({ ...cs, learnersNext: ['c'] })).toMatch(/not an outgoing voter/);
    expect(confStateProblem({ ...cs, votersOutgoing: ['a', 'c'], learners: ['c'], learnersNext: ['c'] })).toMatch(/learner and a voter|already a learner/);
    expect(confStateProblem({ ...cs, votersOutgoing: ['a'], learnersNext: ['a'] })).toMatch(/already a learner or an incoming voter/);
    expect(confStateProblem({ ...cs, voters: [] })).toMatch(/without voters/);
  });

  it('keeps a relayed request free of a term and every other message tied to one', () => {
    const [r] = fc.sample(validRecipeArb, { seed: 1, numRuns: 1 });
    if (r === undefined) throw new Error('no sample');
    const m = buildValid({ ...r, type: 'heartbeat' }, route);
    expect(checkMessage({ ...m, term: 0 })?.reason).toBe('bad_term');
    expect(checkMessage({ ...m, type: 'transferLeader', term: 0 })).toBeUndefined();
    expect(checkMessage({ ...m, type: 'transferLeader', term: 2 })?.reason).toBe('bad_term');
  });
});

function FORWARDED_OR_CURRENT(m: Message): boolean {
  return m.type === 'prop' || m.type === 'readIndex' || m.type === 'transferLeader' || m.term >= route.term;
}

/**
 * Each of these messages is refused by the check; without it, it reached an assertion of the
 * core, which stops the node (and, as every node gets the same messages, the cluster).
 */
describe('what the meaning check keeps from the consensus core', () => {
  function settled(): { c: Cluster; term: number; committed: number } {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    for (const x of ['x', 'y', 'z']) c.propose('a', x);
    c.stabilize();
    const st = c.status('b');
    return { c, term: st.term, committed: st.commit };
  }
  const base = (over: Partial<Message> & Pick<Message, 'type' | 'from' | 'to'>): Message => ({
    term: 0, logTerm: 0, index: 0, entries: [], commit: 0, reject: false, rejectHint: 0, ...over,
  });
  function expectRefusedAndFatal(m: Message, step: (m: Message) => void): void {
    expect(admitMessage(m, m.from, m.to)).toBeDefined();
    expect(() => step(m)).toThrow(AssertionError);
  }

  it('a snap message without a snapshot', () => {
    const { c, term } = settled();
    expectRefusedAndFatal(base({ type: 'snap', from: 'a', to: 'b', term }), (m) => c.node('b').step(m));
  });

  it('a proposal without entries', () => {
    const { c } = settled();
    expectRefusedAndFatal(base({ type: 'prop', from: 'b', to: 'a' }), (m) => c.node('a').step(m));
  });

  it('a vote request of term 0 to a node that has not voted', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    // Granted (its log is up to date), and the grant would carry the request's term, 0.
    expectRefusedAndFatal(base({ type: 'vote', from: 'c', to: 'b', term: 0, index: 100, logTerm: 1 }), (m) => c.node('b').step(m));
  });

  it('an append whose entries do not follow its index, over committed entries', () => {
    const { c, term, committed } = settled();
    const logTerm = c.log('b').find((e) => e.index === committed)?.term ?? term;
    // Entry 2 is the leader's no-op of this term; an entry 2 of term 1 conflicts with it.
    expect(committed).toBeGreaterThan(2);
    const m = base({ type: 'app', from: 'a', to: 'b', term, index: committed, logTerm, entries: [{ kind: 'normal', term: 1, index: 2, data: new Uint8Array(0) }] });
    expectRefusedAndFatal(m, (x) => c.node('b').step(x));
  });

  it('a snapshot whose membership has a node both voter and learner', () => {
    const { c, term, committed } = settled();
    const confState = { voters: ['a', 'b', 'c'], votersOutgoing: [], learners: ['c'], learnersNext: [], autoLeave: false };
    const m = base({ type: 'snap', from: 'a', to: 'b', term, snapshot: { meta: { index: committed + 5, term, confState }, data: new Uint8Array(0) } });
    expectRefusedAndFatal(m, (x) => c.node('b').step(x));
  });
});
