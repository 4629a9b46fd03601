// Node health as pure functions: the rule for one node (node-verdict.ts) as a table and as
// properties, and the leader's pass over every node (node-health.ts): the other members' views,
// the epoch, and the hand-over when only the leader cannot hear a node.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { assessNodes, transferCooldownMs, type HealthInput, type NodeContact } from '../../src/control/node-health.ts';
import { judgeNode, type NodeEvidence, type NodeHealthConfig } from '../../src/control/node-verdict.ts';
import type { PeerLink } from '../../src/ports/leadership.ts';
import type { NodeState } from '../../src/resources/records.ts';
import { StateBuilder } from './state-builder.ts';

const cfg: NodeHealthConfig = { suspectAfterMs: 1_500, downAfterMs: 4_000, restartGraceMs: 30_000 };
const ev = (over: Partial<NodeEvidence> = {}): NodeEvidence => ({ member: true, silentMs: 0, link: 'connected', goodbye: false, refused: false, heardBy: [], ...over });

describe('the node-health rule (judgeNode)', () => {
  // recorded state, evidence → state, transition, wake (ms), leader problem
  const table: [string, NodeState, Partial<NodeEvidence>, NodeState, string, number | null, boolean][] = [
    ['heard lately', 'ready', { silentMs: 200 }, 'ready', 'healthy', 1_300, false],
    ['silent past suspect', 'ready', { silentMs: 1_500, link: 'silent' }, 'suspect', 'suspect', 2_500, false],
    ['suspect heard again', 'suspect', { silentMs: 100 }, 'ready', 'healthy', 1_400, false],
    ['silent past down, nobody hears it', 'suspect', { silentMs: 4_000, link: 'silent' }, 'down', 'down', null, false],
    ['silent past down, connection open (frozen)', 'suspect', { silentMs: 5_000, link: 'connected' }, 'down', 'down', null, false],
    ['silent past down, a member hears it: the leader is cut off', 'suspect', { silentMs: 4_000, heardBy: ['n3'] }, 'suspect', 'suspect', null, true],
    ['silent, a member hears it, not yet the down timeout', 'suspect', { silentMs: 2_000, heardBy: ['n3'] }, 'suspect', 'suspect', 2_000, false],
    ['refused: shoal down, machine up, within the grace', 'suspect', { silentMs: 20_000, link: 'refused' }, 'suspect', 'suspect', 10_000, false],
    ['refused past the grace', 'suspect', { silentMs: 30_000, link: 'refused' }, 'down', 'down', null, false],
    ['refused earlier, now a dial hangs (a restarted shoal listens, not answering yet): within the grace', 'suspect', { silentMs: 6_000, link: 'silent', refused: true }, 'suspect', 'suspect', 24_000, false],
    ['refused earlier, silent past the grace', 'suspect', { silentMs: 30_000, link: 'silent', refused: true }, 'down', 'down', null, false],
    ['goodbye (graceful stop) within the grace, link silent', 'suspect', { silentMs: 10_000, link: 'silent', goodbye: true }, 'suspect', 'suspect', 20_000, false],
    ['goodbye past the grace', 'suspect', { silentMs: 31_000, link: 'refused', goodbye: true }, 'down', 'down', null, false],
    ['closed without goodbye, then silent: a death', 'suspect', { silentMs: 4_500, link: 'closed' }, 'down', 'down', null, false],
    ['down stays down while silent, even on a shorter watch', 'down', { silentMs: 2_000, link: 'silent' }, 'down', 'down', null, false],
    ['down, refused and within the grace: stays down', 'down', { silentMs: 2_000, link: 'refused' }, 'down', 'down', null, false],
    ['down heard again: back', 'down', { silentMs: 50 }, 'ready', 'back', 1_450, false],
    ['not a member', 'ready', { member: false }, 'down', 'down', null, false],
    ['heard, nothing of its own for 3 s (a follower\'s stalled disk): healthy', 'ready', { silentMs: 200, muteMs: 3_000 }, 'ready', 'healthy', 1_300, false],
    ['heard but mute past the down timeout (it answers, cannot send)', 'ready', { silentMs: 300, muteMs: 4_000 }, 'suspect', 'suspect', 4_000, false],
    ['heard but mute past twice the down timeout: down, whoever hears it', 'suspect', { silentMs: 300, muteMs: 8_000, heardBy: ['n3'] }, 'down', 'down', null, false],
    ['down, heard but still mute: stays down', 'down', { silentMs: 100, muteMs: 5_000 }, 'down', 'down', null, false],
  ];
  for (const [name, recorded, over, state, transition, wake, problem] of table) {
    it(name, () => {
      const j = judgeNode(recorded, ev(over), cfg);
      expect({ state: j.state, transition: j.transition, wake: j.wakeInMs, problem: j.leaderProblem }).toEqual({ state, transition, wake, problem });
      expect(j.reason.length).toBeGreaterThan(0);
    });
  }

  const links: PeerLink[] = ['connected', 'refused', 'closed', 'silent', 'unknown'];
  const arbEvidence = fc.record({
    member: fc.boolean(), silentMs: fc.integer({ min: 0, max: 120_000 }), link: fc.constantFrom(...links), goodbye: fc.boolean(),
    refused: fc.boolean(), heardBy: fc.array(fc.constantFrom('n2', 'n3', 'n4'), { maxLength: 3 }),
  });
  const arbState = fc.constantFrom<NodeState>('ready', 'suspect', 'down');
  const arbConfig = fc.record({ suspectAfterMs: fc.integer({ min: 500, max: 5_000 }), extra: fc.integer({ min: 500, max: 20_000 }), grace: fc.integer({ min: 0, max: 60_000 }) })
    .map(({ suspectAfterMs, extra, grace }) => ({ suspectAfterMs, downAfterMs: suspectAfterMs + extra, restartGraceMs: suspectAfterMs + extra + grace }));

  it('never declares a member down that some member hears, or before the down timeout (properties)', () => {
    fc.assert(fc.property(arbState, arbEvidence, arbConfig, (recorded, e, c) => {
      const j = judgeNode(recorded, e, c);
      if (j.state !== 'down' || !e.member || recorded === 'down') return;
      expect(e.heardBy).toEqual([]);
      expect(e.silentMs).toBeGreaterThanOrEqual(c.downAfterMs);
      if (e.goodbye || e.refused || e.link === 'refused') expect(e.silentMs).toBeGreaterThanOrEqual(c.restartGraceMs);
    }));
  });

  it('a down node comes back only by being heard; heard, any member is ready (properties)', () => {
    fc.assert(fc.property(arbEvidence, arbConfig, (e, c) => {
      const j = judgeNode('down', e, c);
      if (j.state !== 'down') expect(e.member && e.silentMs < c.suspectAfterMs).toBe(true);
      if (e.member && e.silentMs < c.suspectAfterMs) expect(judgeNode('suspect', e, c).state).toBe('ready');
    }));
  });

  it('more silence never makes a verdict milder (properties)', () => {
    const rank: Record<NodeState, number> = { ready: 0, suspect: 1, down: 2 };
    fc.assert(fc.property(arbState, arbEvidence, arbConfig, fc.integer({ min: 0, max: 60_000 }), (recorded, e, c, more) => {
      const a = judgeNode(recorded, e, c);
      const b = judgeNode(recorded, { ...e, silentMs: e.silentMs + more }, c);
      expect(rank[b.state]).toBeGreaterThanOrEqual(rank[a.state]);
    }));
  });

  it('a heard node is down only when nothing of its own reached the leader for twice the down timeout (properties)', () => {
    fc.assert(fc.property(arbState, arbEvidence, arbConfig, fc.integer({ min: 0, max: 60_000 }), (recorded, e, c, muteMs) => {
      const heard = { ...e, member: true, silentMs: Math.min(e.silentMs, c.suspectAfterMs - 1), muteMs };
      const j = judgeNode(recorded, heard, c);
      if (j.state === 'down' && recorded !== 'down') expect(muteMs).toBeGreaterThanOrEqual(2 * c.downAfterMs);
      if (muteMs < c.downAfterMs) expect(j.state).toBe('ready');
    }));
  });

  it('a leader problem is only reported for a member silent past the down timeout that some member hears (properties)', () => {
    fc.assert(fc.property(arbState, arbEvidence, arbConfig, (recorded, e, c) => {
      if (!judgeNode(recorded, e, c).leaderProblem) return;
      expect(e.member && e.heardBy.length > 0 && e.silentMs >= c.downAfterMs && recorded !== 'down').toBe(true);
    }));
  });
});

describe('the leader\'s pass over every node (assessNodes)', () => {
  const members = new Set(['n1', 'n2', 'n3']);
  const heard = (ms: number | undefined, over: Partial<NodeContact> = {}): NodeContact => ({ heardAgoMs: ms, watchingForMs: 600_000, link: 'connected', goodbye: false, refused: false, ...over });
  const input = (contacts: Record<string, NodeContact>, over: Partial<HealthInput> = {}): HealthInput => ({
    self: 'n1', members, voters: members, contact: (id) => contacts[id] ?? heard(0), views: new Map(), lastTransferAgoMs: undefined, ...over,
  });
  const states = (d: ReturnType<typeof assessNodes>) => d.changes.map((c) => c.kind === 'put' && [(c.doc as { id: string }).id, (c.doc as { state: string }).state, (c.doc as { epoch: number }).epoch]);
  const three = () => new StateBuilder().node('n1').node('n2').node('n3');

  it('ready, suspect, down (raising the epoch), and back (ready in the raised epoch) when heard again', () => {
    const b = three();
    const dead = { n2: heard(5_000, { link: 'silent' }) };
    const views = new Map([['n3', new Set(['n2'])]]);
    expect(assessNodes(b.build(), input({ n2: heard(500) }), cfg).changes).toEqual([]);
    expect(states(assessNodes(b.build(), input({ n2: heard(2_000, { link: 'silent' }) }, { views }), cfg))).toEqual([['n2', 'suspect', 0]]);
    const down = assessNodes(b.build(), input(dead, { views }), cfg);
    expect(states(down)).toEqual([['n2', 'down', 1]]);
    expect(down.verdicts[0]?.judgement.transition).toBe('down');
    b.apply({ changes: down.changes, compares: [] });
    const back = assessNodes(b.build(), input({ n2: heard(100) }), cfg);
    expect(states(back)).toEqual([['n2', 'ready', 1]]);
    expect(back.verdicts[0]?.judgement.transition).toBe('back');
  });

  it('a node that a member hears is not declared down: the leader hands leadership to a voter that hears everyone', () => {
    const d = assessNodes(three().build(), input({ n2: heard(10_000, { link: 'silent' }) }, { views: new Map([['n3', new Set()]]) }), cfg);
    expect(states(d)).toEqual([['n2', 'suspect', 0]]);
    expect(d.verdicts[0]?.judgement.reason).toMatch(/heard by n3/);
    expect(d.transferTo).toBe('n3');
  });

  it('no hand-over within the cooldown of the last one, nor to a voter that does not hear every member', () => {
    const silentN2 = { n2: heard(10_000, { link: 'silent' }) };
    const hearsAll = new Map([['n3', new Set<string>()]]);
    expect(assessNodes(three().build(), input(silentN2, { views: hearsAll, lastTransferAgoMs: transferCooldownMs - 1 }), cfg).transferTo).toBeNull();
    expect(assessNodes(three().build(), input(silentN2, { views: hearsAll, lastTransferAgoMs: transferCooldownMs }), cfg).transferTo).toBe('n3');
    // n4 hears n2 but not n3; n3 hears n2 but is a learner: nobody to hand over to, and n2 stays suspect.
    const four = new Set(['n1', 'n2', 'n3', 'n4']);
    const d = assessNodes(three().node('n4').build(), input(silentN2, {
      members: four, voters: new Set(['n1', 'n2', 'n4']), views: new Map([['n4', new Set(['n3'])], ['n3', new Set<string>()]]),
    }), cfg);
    expect(states(d)).toEqual([['n2', 'suspect', 0]]);
    expect(d.transferTo).toBeNull();
  });

  it('counts only the views of members the leader hears itself, and a member without a view says nothing', () => {
    const views = new Map([['n3', new Set<string>()]]);
    // n3 hears n2, but n3 is itself silent to the leader: its word does not count.
    const d = assessNodes(three().build(), input({ n2: heard(10_000, { link: 'silent' }), n3: heard(3_000) }, { views }), cfg);
    expect(states(d)).toEqual([['n2', 'down', 1], ['n3', 'suspect', 0]]);
    expect(states(assessNodes(three().build(), input({ n2: heard(10_000, { link: 'silent' }) }), cfg))).toEqual([['n2', 'down', 1]]);
  });

  it('a refused peer port or a goodbye waits the restart grace', () => {
    const views = new Map([['n3', new Set(['n2'])]]);
    expect(states(assessNodes(three().build(), input({ n2: heard(10_000, { link: 'refused' }) }, { views }), cfg))).toEqual([['n2', 'suspect', 0]]);
    expect(states(assessNodes(three().build(), input({ n2: heard(10_000, { link: 'silent', goodbye: true }) }, { views }), cfg))).toEqual([['n2', 'suspect', 0]]);
    expect(states(assessNodes(three().build(), input({ n2: heard(30_000, { link: 'refused' }) }, { views }), cfg))).toEqual([['n2', 'down', 1]]);
  });

  it('a refusal holds until the node is heard: a dial that then hangs on the restarted shoal is no death', () => {
    const views = new Map([['n3', new Set(['n2'])]]);
    expect(states(assessNodes(three().build(), input({ n2: heard(6_000, { link: 'silent', refused: true }) }, { views }), cfg))).toEqual([['n2', 'suspect', 0]]);
    expect(states(assessNodes(three().build(), input({ n2: heard(6_000, { link: 'silent' }) }, { views }), cfg))).toEqual([['n2', 'down', 1]]);
  });

  it('counts silence from when this node began listening at the most: a new node declares nobody down at once', () => {
    const d = assessNodes(three().build(), input({ n2: heard(undefined, { watchingForMs: 2_000 }) }), cfg);
    expect(states(d)).toEqual([['n2', 'suspect', 0]]);
    expect(d.verdicts[0]?.judgement.wakeInMs).toBe(2_000);
  });

  it('a node that left the cluster is down', () => {
    const d = assessNodes(new StateBuilder().node('n1').node('gone').build(), input({}, { members: new Set(['n1']) }), cfg);
    expect(states(d)).toEqual([['gone', 'down', 1]]);
  });
});
