// The health summary (src/api/health-summary.ts) and the console's header items and chart helpers
// (src/console/summary.ts, charts.ts): a node down, a member unreachable, a service short of its
// replicas and a task orphaned on the down node each show, with a link to where they are; the
// documented alert rules' conditions fire from the cluster view and this node's series. Pure.

import { describe, expect, it } from 'vitest';
import type { ClusterView, MemberView } from '../../src/api/cluster-routes.ts';
import type { ServiceStatus } from '../../src/api/control-views.ts';
import { healthSummary } from '../../src/api/health-summary.ts';
import type { SeriesWindow } from '../../src/api/series-ring.ts';
import { nodeSeriesNames, type NodeSeriesName } from '../../src/api/series-sampler.ts';
import type { ControlState } from '../../src/resources/state.ts';
import { marksOf, pathOf, spansOf } from '../../src/console/charts.ts';
import { summaryItems } from '../../src/console/summary.ts';
import { node, task } from '../control/fixtures.ts';

const member = (id: string, health: MemberView['health'], lag = 0): MemberView => ({
  id, name: id, peerAddress: '', apiAddress: '', role: 'voter', matchIndex: 0, lag, rttMs: 1, softwareVersion: null, featureLevelMax: null, health,
});
const cluster = (members: MemberView[], leader: string | null = 'n1'): ClusterView => ({
  clusterId: 'c', view: 'leader', node: 'n1', softwareVersion: '', leader, term: 4, commitIndex: 0, appliedIndex: 0, lastIndex: 0, featureLevel: 6, members,
});
const versioned = <T>(value: T) => ({ value, rev: 1, createRev: 1 });

function series(over: Partial<Record<NodeSeriesName, Array<number | null>>> = {}, rows = 6): SeriesWindow<NodeSeriesName> {
  const s = Object.fromEntries(nodeSeriesNames.map((n) => [n, over[n] ?? Array<number | null>(rows).fill(null)])) as Record<NodeSeriesName, Array<number | null>>;
  return { intervalMs: 10_000, times: Array.from({ length: rows }, (_, i) => i * 10_000), series: s };
}

function state(): ControlState {
  // Declared down: its epoch was raised, so what ran there is orphaned.
  const nodes = [node('n1'), node('n2', { state: 'down', epoch: 1 }), node('n3', { state: 'suspect' })];
  const tasks = [
    task('t1', { nodeId: 'n1', observed: 'running', assignedTerm: 1, nodeEpoch: 0 }),
    task('t2', { slot: 2, nodeId: 'n2', observed: 'running', assignedTerm: 1, nodeEpoch: 0 }),
  ];
  return {
    revision: 9,
    nodes: new Map(nodes.map((n) => [n.id, versioned(n)])),
    services: new Map([['web', versioned({ name: 'web' })]]),
    tasks: new Map(tasks.map((t) => [t.id, versioned(t)])),
    statuses: new Map(),
  } as unknown as ControlState;
}

const short = { converged: false, running: 1, desired: 3, pending: 1, updating: false } as ServiceStatus;

describe('healthSummary', () => {
  it('names the node down, the member unreachable, the service short and the task orphaned on the down node', () => {
    const s = healthSummary({ cluster: cluster([member('n1', 'healthy'), member('n2', 'unreachable'), member('n3', 'healthy')]), state: state(), statuses: new Map([['web', short]]), series: series() });
    expect(s.leader).toEqual({ id: 'n1', name: 'n1' });
    expect(s.quorum).toEqual({ voters: 3, reachable: 2, needed: 2, tolerance: 0, hasQuorum: true });
    expect(s.nodesNotReady.map((n) => `${n.name} ${n.state}`)).toEqual(['n2 down', 'n3 suspect']);
    expect(s.membersUnreachable).toEqual([{ id: 'n2', name: 'n2' }]);
    expect(s.servicesNotConverged).toEqual([{ name: 'web', running: 1, desired: 3, pending: 1, updating: false }]);
    expect(s.failingTasks).toMatchObject([{ id: 't2', service: 'web', slot: 2, node: 'n2', observed: 'orphaned' }]);
    expect(s.alerts.map((a) => a.alert)).toEqual(['ShoalMemberUnreachable', 'ShoalNodeDown', 'ShoalTasksPending']);
  });

  it('counts a task that failed in the last 5 minutes as failing (a crash loop replaces each at once), and not one older', () => {
    const st = state();
    const failed = (id: string, finishedAt: number) => versioned(task(id, { slot: 1, nodeId: 'n1', desired: 'shutdown', observed: 'failed', assignedTerm: 1, nodeEpoch: 0, finishedAt, message: 'exit 1' }));
    (st.tasks as Map<string, unknown>).set('f1', failed('f1', 1_000_000 - 60_000));
    (st.tasks as Map<string, unknown>).set('f0', failed('f0', 1_000_000 - 600_000));
    const s = healthSummary({ cluster: cluster([member('n1', 'healthy')]), state: st, statuses: new Map(), series: series(), now: 1_000_000 });
    expect(s.failingTasks.map((t) => t.id).sort()).toEqual(['f1', 't2']);
    expect(s.failingTasks.find((t) => t.id === 'f1')).toMatchObject({ observed: 'failed', message: 'exit 1' });
  });

  it('fires the rules read from the series: frequent leader changes, a full disk, a growing apply lag; and no leader', () => {
    const s = healthSummary({
      cluster: cluster([member('n1', 'healthy'), member('n2', 'healthy', 20_000)], null), state: state(), statuses: new Map(),
      series: series({ leaderChanges: [1, 0, 2, 0, 1, null], diskAvailBytes: [5, 5, 5, 5, 5, 5], diskSizeBytes: [100, 100, 100, 100, 100, 100], commitLag: [50, 80, 120, 150, 200, 250] }),
    });
    expect(s.alerts.map((a) => a.alert).sort()).toEqual(['ShoalApplyLagGrowing', 'ShoalDiskAlmostFull', 'ShoalFollowerBehind', 'ShoalFrequentLeaderChanges', 'ShoalNoLeader', 'ShoalNodeDown']);
  });

  it('fires nothing for a healthy cluster', () => {
    const st = state();
    (st.nodes as Map<string, unknown>).clear();
    (st.tasks as Map<string, unknown>).clear();
    const s = healthSummary({ cluster: cluster([member('n1', 'healthy'), member('n2', 'healthy'), member('n3', 'healthy')]), state: st, statuses: new Map(), series: series() });
    expect(s.alerts).toEqual([]);
    expect(s.quorum.tolerance).toBe(1);
  });
});

describe('the header items', () => {
  it('links each problem to where it is', () => {
    const s = healthSummary({ cluster: cluster([member('n1', 'healthy'), member('n2', 'unreachable'), member('n3', 'healthy')]), state: state(), statuses: new Map([['web', short]]), series: series() });
    const items = summaryItems(s).map((i) => [i.text, i.href, i.level]);
    expect(items).toContainEqual(['Leader n1 · quorum, tolerates 0 failures', '#cluster', 'warn']);
    expect(items).toContainEqual(['Node n2 down', '#nodes/n2', 'bad']);
    expect(items).toContainEqual(['Node n3 suspect', '#nodes/n3', 'warn']);
    expect(items).toContainEqual(['web 1/3, 1 pending', '#services/web', 'warn']);
    expect(items).toContainEqual(['1 failing task', '#services/web', 'bad']);
    expect(items).toContainEqual(['ShoalNodeDown: node n2 is down', '#nodes/n2', 'bad']);
  });

  it('says all is well in three items when it is', () => {
    const st = state();
    (st.nodes as Map<string, unknown>).clear();
    (st.tasks as Map<string, unknown>).clear();
    const s = healthSummary({ cluster: cluster([member('n1', 'healthy'), member('n2', 'healthy'), member('n3', 'healthy')]), state: st, statuses: new Map(), series: series() });
    expect(summaryItems(s).map((i) => i.text)).toEqual(['Leader n1 · quorum, tolerates 1 failure', 'Nodes ready', 'Services converged']);
  });
});

describe('chart helpers', () => {
  const x = (t: number) => t;
  const y = (v: number) => 100 - v;
  it('breaks a line where a value is missing', () => {
    expect(pathOf([0, 1, 2, 3, 4], [1, 2, null, 4, 5], x, y)).toBe('M0.0,99.0L1.0,98.0M3.0,96.0L4.0,95.0');
    expect(pathOf([0], [null], x, y)).toBe('');
    // A lone point is a dot.
    expect(pathOf([0, 1, 2], [null, 3, null], x, y)).toBe('M1.0,97.0h0');
    expect(pathOf([0, 1], [1, null], x, y)).toBe('M0.0,99.0h0');
  });

  it('turns flags into spans and counts into marks', () => {
    expect(spansOf([0, 10, 20, 30, 40], [0, 1, 1, 0, 1])).toEqual([{ from: 10, to: 30 }, { from: 40, to: 40 }]);
    expect(marksOf([0, 10, 20], [0, 2, null], (n) => `${n} changes`)).toEqual([{ at: 10, label: '2 changes' }]);
  });
});
