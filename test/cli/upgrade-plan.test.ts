// The order and choices of `shoal upgrade` (src/cli/upgrade-plan.ts): followers by name, the
// leader last; nodes already on the build skipped; a rollback only where the previous release is
// older than the running one, so a rollback run again after it stopped goes on where it was.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compareVersions, planRollback, planUpgrade, rollbacksBelowLevel, walkOrder, type NodeReleases } from '../../src/cli/upgrade-plan.ts';
import { printer, terminalPrinter, type UpgradeEvent } from '../../src/cli/upgrade-output.ts';
import { toleranceProblem } from '../../src/cli/upgrade-node.ts';
import type { View } from '../../src/cli/cluster-view.ts';

const versions = { '0.1.0-aaaaaaaa': '0.1.0', '0.1.1-bbbbbbbb': '0.1.1' };
const node = (id: string, name: string, running: string, previous: string | null = null): NodeReleases => ({ id, name, apiAddress: `${name}:1`, running, previous, versions });

describe('walkOrder', () => {
  it('puts the followers first, by name, and the leader last', () => {
    const nodes = [node('c', 'n3', '0.1.0-aaaaaaaa'), node('a', 'n1', '0.1.0-aaaaaaaa'), node('b', 'n2', '0.1.0-aaaaaaaa')];
    expect(walkOrder(nodes, 'a').map((n) => n.name)).toEqual(['n2', 'n3', 'n1']);
    expect(walkOrder(nodes, null).map((n) => n.name)).toEqual(['n1', 'n2', 'n3']);
  });
});

describe('planUpgrade', () => {
  it('upgrades every node that does not run the build and skips those that do', () => {
    const steps = planUpgrade([node('a', 'n1', '0.1.1-bbbbbbbb'), node('b', 'n2', '0.1.0-aaaaaaaa'), node('c', 'n3', '0.1.0-aaaaaaaa')], 'b', '0.1.1-bbbbbbbb');
    expect(steps.map((s) => [s.node.name, s.action])).toEqual([['n1', 'skip'], ['n3', 'upgrade'], ['n2', 'upgrade']]);
  });
});

describe('planRollback', () => {
  it('rolls back only nodes whose previous release is older than the one they run', () => {
    const steps = planRollback([
      node('a', 'n1', '0.1.1-bbbbbbbb', '0.1.0-aaaaaaaa'),
      node('b', 'n2', '0.1.0-aaaaaaaa', '0.1.1-bbbbbbbb'),
      node('c', 'n3', '0.1.0-aaaaaaaa'),
    ], 'a');
    expect(steps.map((s) => [s.node.name, s.action])).toEqual([['n2', 'skip'], ['n3', 'skip'], ['n1', 'rollback']]);
    expect(steps[2]).toMatchObject({ to: '0.1.0-aaaaaaaa' });
  });

  it('names the rollbacks whose release cannot apply the cluster feature level, and judges none whose level is not said', () => {
    const levels = { '0.1.0-aaaaaaaa': 5, '0.1.1-bbbbbbbb': 6 };
    const steps = planRollback([
      { ...node('a', 'n1', '0.1.1-bbbbbbbb', '0.1.0-aaaaaaaa'), levels },
      { ...node('b', 'n2', '0.1.1-bbbbbbbb', '0.1.0-aaaaaaaa'), levels: {} },
      { ...node('c', 'n3', '0.1.0-aaaaaaaa', '0.1.1-bbbbbbbb'), levels },
    ], 'a');
    expect(rollbacksBelowLevel(steps, 6).map((b) => [b.node.name, b.to, b.level])).toEqual([['n1', '0.1.0-aaaaaaaa', 5]]);
    expect(rollbacksBelowLevel(steps, 5)).toEqual([]);
  });
});

describe('compareVersions', () => {
  it('orders by number, and a pre-release before its release', () => {
    expect(compareVersions('0.1.0', '0.1.1-test')).toBeLessThan(0);
    expect(compareVersions('0.1.1-test', '0.1.1')).toBeLessThan(0);
    expect(compareVersions('0.10.0', '0.9.9')).toBeGreaterThan(0);
    expect(compareVersions('1.0.0-rc.2', '1.0.0-rc.10')).toBeLessThan(0);
    expect(compareVersions('2.0.0', '2.0.0')).toBe(0);
  });

  it('is antisymmetric', () => {
    const v = fc.tuple(fc.nat(20), fc.nat(20), fc.nat(20), fc.option(fc.constantFrom('rc.1', 'rc.2', 'test', 'beta'), { nil: undefined }))
      .map(([a, b, c, pre]) => `${a}.${b}.${c}${pre === undefined ? '' : `-${pre}`}`);
    fc.assert(fc.property(v, v, (a, b) => Math.sign(compareVersions(a, b)) === -Math.sign(compareVersions(b, a))));
  });
});

describe('printer', () => {
  it('prints one line per event: JSON with --json, else the node and its place in the walk', () => {
    const lines: string[] = [];
    const step: UpgradeEvent = { event: 'step', node: 'n2', id: 'b', index: 1, total: 3, step: 'back', message: 'runs 0.1.1-bbbbbbbb, caught up and healthy after 2.0 s', ms: 2000 };
    printer(true, (l) => lines.push(l))(step);
    printer(false, (l) => lines.push(l))(step);
    expect(JSON.parse(lines[0] ?? '')).toEqual(step);
    expect(lines[1]).toBe('[1/3] n2: runs 0.1.1-bbbbbbbb, caught up and healthy after 2.0 s');
  });
});

describe('terminalPrinter', () => {
  it("rewrites a node's line until its step ends it, so each node keeps one line", () => {
    let screen = '';
    const print = terminalPrinter((s) => { screen += s; });
    const at = { event: 'step' as const, node: 'n1', id: 'a', index: 1, total: 2 };
    print({ ...at, step: 'activating', message: 'activating r' });
    print({ ...at, step: 'waiting', message: 'waiting: its API does not answer yet' });
    print({ ...at, step: 'back', message: 'runs r' });
    print({ ...at, node: 'n2', index: 2, step: 'skipped', message: 'skipped: already runs r' });
    expect(screen).toBe('[1/2] n1: activating r\r\x1b[K[1/2] n1: waiting: its API does not answer yet\r\x1b[K[1/2] n1: runs r\n[2/2] n2: skipped: already runs r\n');
  });
});

describe('toleranceProblem', () => {
  const member = (id: string, health: 'healthy' | 'unreachable', role: 'voter' | 'learner' = 'voter') => ({
    id, name: id, peerAddress: 'x:1', apiAddress: 'x:2', role, matchIndex: 0, lag: 0, rttMs: 1, softwareVersion: '0.1.0', health,
  });
  const view = (members: ReturnType<typeof member>[], from: 'leader' | 'local' = 'leader'): View => ({
    clusterId: 'c', view: from, node: 'a', leader: 'a', term: 2, commitIndex: 9, appliedIndex: 9, lastIndex: 9, members,
  });

  it('lets one voter go when the others still make a quorum, and says why not otherwise', () => {
    expect(toleranceProblem(view([member('a', 'healthy'), member('b', 'healthy'), member('c', 'healthy')]))).toBeUndefined();
    expect(toleranceProblem(view([member('a', 'healthy'), member('b', 'healthy'), member('c', 'unreachable')]))).toContain('not healthy: c (unreachable)');
    expect(toleranceProblem(view([member('a', 'healthy'), member('b', 'healthy')]))).toContain('fewer than three voters');
    expect(toleranceProblem(view([member('a', 'healthy'), member('b', 'healthy'), member('c', 'healthy'), member('d', 'unreachable', 'learner')]))).toBeUndefined();
    expect(toleranceProblem(view([member('a', 'healthy'), member('b', 'healthy'), member('c', 'healthy')], 'local'))).toContain('no leader');
  });
});
