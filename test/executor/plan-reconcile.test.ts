// The agent's planning, table-driven: assignments × containers × quorum → actions and reports.

import { describe, expect, it } from 'vitest';
import type { ServiceRecord, TaskRecord, TaskStatus } from '../../src/resources/records.ts';
import { containerLabels } from '../../src/executor/labels.ts';
import { containerKey, planReconcile, type AgentAssignment, type Plan, type PlanInput, type Quorum } from '../../src/executor/plan-reconcile.ts';
import type { LocalRestarts } from '../../src/executor/restart-backoff.ts';
import type { ContainerInfo, ContainerState, HealthState } from '../../src/executor/runtime.ts';
import { node, spec, task } from '../control/fixtures.ts';

const owner = { clusterId: 'c1', nodeId: 'n1' };
const epoch = 1;

function service(fields: Record<string, unknown> = {}): ServiceRecord {
  return {
    name: 'web', spec: spec({ command: ['sleep', '1'], restart: { condition: 'always', delay: '1s' }, ...fields }), specVersion: 1,
    previousSpec: null, previousSpecVersion: null, updateStatus: { state: 'none', startedAt: null, completedAt: null, message: null }, source: null, forcedDisruptions: [], createdAt: 1, updatedAt: 1,
  };
}

function assigned(id: string, o: Partial<TaskRecord> = {}, status: Partial<TaskStatus> | null = null, svc: ServiceRecord | null = service()): AgentAssignment {
  return {
    task: task(id, { nodeId: 'n1', observed: 'assigned', assignedTerm: 3, nodeEpoch: epoch, ...o }),
    service: svc,
    status: status === null ? null : {
      taskId: id, nodeId: 'n1', nodeEpoch: epoch, state: 'running', containerId: `c-${id}`, exitCode: null, health: null,
      message: null, startedAt: 100, finishedAt: null, ...status,
    },
  };
}

function ctr(taskId: string, state: ContainerState, o: { epoch?: number; id?: string; health?: HealthState; exitCode?: number; node?: string; labels?: Record<string, string> } = {}): ContainerInfo {
  const labels = o.labels ?? containerLabels({ ...owner, nodeId: o.node ?? 'n1', service: 'web', slot: 1, taskId, specVersion: 1, term: 3, nodeEpoch: o.epoch ?? epoch });
  const exited = state === 'exited';
  return {
    id: o.id ?? `c-${taskId}`, name: `shoal-web.1.${taskId}`, image: 'busybox:local', labels, state,
    exitCode: exited ? (o.exitCode ?? 1) : null, startedAt: state === 'created' ? null : 100, finishedAt: exited ? 200 : null,
    health: o.health ?? null, error: null,
  };
}

interface Row {
  name: string;
  assignments: AgentAssignment[];
  containers: ContainerInfo[];
  quorum: Quorum;
  input?: Partial<PlanInput>;
  want: { actions?: string[]; reports?: string[]; barrier?: boolean; restartUpdates?: [string, LocalRestarts][]; wakeAtMs?: number | null };
}

function summary(p: Plan): Row['want'] {
  return {
    actions: p.actions.map((a) => {
      switch (a.type) {
        case 'create': return `create ${a.key} ${a.spec.name}`;
        case 'start': return `start ${a.key} ${a.containerId}`;
        case 'restart': return `restart ${a.key} ${a.containerId} #${a.restarts.count}`;
        case 'remove': return `remove ${a.key} ${a.containerId}: ${a.reason}${a.shutdownOf === null ? '' : ' +shutdown'} [${a.stop.signal} ${a.stop.graceMs}]`;
      }
    }),
    reports: p.reports.map((r) => `${r.taskId} ${r.state}${r.health === null ? '' : `/${r.health}`}${r.exitCode === null ? '' : ` ${r.exitCode}`}${r.message === null ? '' : `: ${r.message}`}`),
    barrier: p.needsBarrier,
    restartUpdates: p.restartUpdates,
    wakeAtMs: p.wakeAtMs,
  };
}

const nothing = { actions: [], reports: [], barrier: false, restartUpdates: [], wakeAtMs: null };

const rows: Row[] = [
  { name: 'a new task waits for a barrier', assignments: [assigned('t1')], containers: [], quorum: 'unknown', want: { ...nothing, barrier: true } },
  { name: 'a new task starts with a quorum', assignments: [assigned('t1')], containers: [], quorum: 'yes', want: { ...nothing, actions: ['create t1 shoal-web.1.t1'] } },
  { name: 'a new task does not start without one', assignments: [assigned('t1')], containers: [], quorum: 'no', want: nothing },
  { name: 'a running container is reported running, no barrier', assignments: [assigned('t1')], containers: [ctr('t1', 'running')], quorum: 'unknown', want: { ...nothing, reports: ['t1 running'] } },
  { name: 'an unchanged report is not made again', assignments: [assigned('t1', {}, {})], containers: [ctr('t1', 'running')], quorum: 'unknown', want: nothing },
  {
    name: 'health-gated: starting until healthy', assignments: [assigned('t1', {}, null, service({ healthCheck: { command: ['true'] } }))],
    containers: [ctr('t1', 'running', { health: 'starting' })], quorum: 'unknown', want: { ...nothing, reports: ['t1 starting/starting'] },
  },
  {
    name: 'health-gated: unhealthy says so', assignments: [assigned('t1', {}, null, service({ healthCheck: { command: ['true'] } }))],
    containers: [ctr('t1', 'running', { health: 'unhealthy' })], quorum: 'unknown', want: { ...nothing, reports: ['t1 starting/unhealthy: health check failing'] },
  },
  {
    name: 'health-gated: healthy is running', assignments: [assigned('t1', {}, null, service({ healthCheck: { command: ['true'] } }))],
    containers: [ctr('t1', 'running', { health: 'healthy' })], quorum: 'unknown', want: { ...nothing, reports: ['t1 running/healthy'] },
  },
  { name: 'an unclaimed container waits for a barrier', assignments: [], containers: [ctr('gone', 'running')], quorum: 'unknown', want: { ...nothing, barrier: true } },
  {
    name: 'an unclaimed container is removed with a quorum, with the default stop', assignments: [], containers: [ctr('gone', 'running')], quorum: 'yes',
    want: { ...nothing, actions: ['remove gone c-gone: no task assigned to this node claims it [SIGTERM 10000]'] },
  },
  { name: 'an unclaimed container stays without a quorum', assignments: [], containers: [ctr('gone', 'running')], quorum: 'no', want: nothing },
  {
    name: 'a stale-epoch container goes before anything new starts', assignments: [assigned('old', { nodeEpoch: 0 }), assigned('t1')],
    containers: [ctr('old', 'running', { epoch: 0 })], quorum: 'yes',
    want: { ...nothing, actions: ['remove old c-old: it was placed in epoch 0 and the node is in epoch 1 [SIGTERM 10000]'] },
  },
  {
    name: 'a stale-epoch container also holds back starting a created one', assignments: [assigned('t1')],
    containers: [ctr('t1', 'created'), ctr('x', 'exited', { epoch: 0 })], quorum: 'yes',
    want: { ...nothing, actions: ['remove x c-x: no task assigned to this node claims it [SIGTERM 10000]'] },
  },
  {
    name: 'a task shut down is stopped with its own signal and grace, then reported', assignments: [assigned('t1', { desired: 'shutdown' }, {}, service({ stopSignal: 'SIGINT', stopGracePeriod: '3s' }))],
    containers: [ctr('t1', 'running')], quorum: 'yes', want: { ...nothing, actions: ['remove t1 c-t1: its task is shut down +shutdown [SIGINT 3000]'] },
  },
  {
    name: 'a failed task shut down is removed without a shutdown report', assignments: [assigned('t1', { desired: 'shutdown' }, { state: 'failed', exitCode: 1 })],
    containers: [ctr('t1', 'exited')], quorum: 'yes', want: { ...nothing, actions: ['remove t1 c-t1: its task is shut down [SIGTERM 10000]'] },
  },
  { name: 'a task shut down whose container is gone is reported shut down', assignments: [assigned('t1', { desired: 'shutdown' }, {})], containers: [], quorum: 'unknown', want: { ...nothing, reports: ['t1 shutdown'] } },
  { name: 'a task shut down that never ran here is reported shut down (else the leader waits for it)', assignments: [assigned('t1', { desired: 'shutdown' })], containers: [], quorum: 'yes', want: { ...nothing, reports: ['t1 shutdown'] } },
  { name: 'a task shut down already reported so is left', assignments: [assigned('t1', { desired: 'shutdown' }, { state: 'shutdown' })], containers: [], quorum: 'yes', want: nothing },
  { name: 'an exit waits for a barrier', assignments: [assigned('t1', {}, {})], containers: [ctr('t1', 'exited')], quorum: 'unknown', want: { ...nothing, barrier: true } },
  { name: 'an exit with a quorum is reported failed', assignments: [assigned('t1', {}, {})], containers: [ctr('t1', 'exited', { exitCode: 3 })], quorum: 'yes', want: { ...nothing, reports: ['t1 failed 3: exited with code 3'] } },
  {
    name: 'an exit without a quorum starts the restart backoff', assignments: [assigned('t1', {}, {})], containers: [ctr('t1', 'exited', { exitCode: 3 })], quorum: 'no',
    want: { ...nothing, reports: ['t1 failed 3: exited with code 3'], restartUpdates: [['t1', { count: 0, notBeforeMs: 6000 }]], wakeAtMs: 6000 },
  },
  {
    name: 'once the backoff has passed, the same container restarts', assignments: [assigned('t1', {}, {})], containers: [ctr('t1', 'exited', { exitCode: 3 })], quorum: 'no',
    input: { restarts: new Map([['t1', { count: 0, notBeforeMs: 5000 }]]) },
    want: { ...nothing, actions: ['restart t1 c-t1 #1'], reports: ['t1 failed 3: exited with code 3'] },
  },
  {
    name: 'an exit under restart policy never is only reported', assignments: [assigned('t1', {}, {}, service({ restart: { condition: 'never' } }))],
    containers: [ctr('t1', 'exited', { exitCode: 3 })], quorum: 'no', want: { ...nothing, reports: ['t1 failed 3: exited with code 3'] },
  },
  { name: 'an exit the leader knows of is left to it', assignments: [assigned('t1', {}, {})], containers: [ctr('t1', 'exited')], quorum: 'no', input: { failureReported: new Map([['c-t1', 200]]) }, want: nothing },
  { name: 'a later exit of a container restarted without a quorum is reported again', assignments: [assigned('t1', {}, {})], containers: [ctr('t1', 'exited')], quorum: 'yes', input: { failureReported: new Map([['c-t1', 150]]) }, want: { ...nothing, reports: ['t1 failed 1: exited with code 1'] } },
  { name: 'an exit the store shows failed is left to the leader', assignments: [assigned('t1', {}, { state: 'failed', exitCode: 1, finishedAt: 200 })], containers: [ctr('t1', 'exited')], quorum: 'no', want: nothing },
  { name: 'a created container is started with a quorum', assignments: [assigned('t1')], containers: [ctr('t1', 'created')], quorum: 'yes', want: { ...nothing, actions: ['start t1 c-t1'] } },
  { name: 'a created container whose start failed is left', assignments: [assigned('t1', {}, { state: 'failed' })], containers: [ctr('t1', 'created')], quorum: 'yes', want: nothing },
  {
    name: 'of two containers of one task the running one is kept', assignments: [assigned('t1', {}, {})],
    containers: [ctr('t1', 'exited', { id: 'c-a' }), ctr('t1', 'running')], quorum: 'yes',
    want: { ...nothing, actions: ['remove t1 c-a: another container of the same task is kept [SIGTERM 10000]'] },
  },
  { name: 'a busy task is left alone', assignments: [assigned('t1'), assigned('t2')], containers: [ctr('t2', 'running')], quorum: 'yes', input: { busyKeys: new Set(['t1', 't2']) }, want: nothing },
  { name: 'a task whose start failed is not tried again', assignments: [assigned('t1')], containers: [], quorum: 'yes', input: { failedStarts: new Set(['t1']) }, want: nothing },
  { name: 'a task of an older epoch is never started', assignments: [assigned('t1', { nodeEpoch: 0 })], containers: [], quorum: 'yes', want: nothing },
  { name: 'a task without its service fails', assignments: [assigned('t1', {}, null, null)], containers: [], quorum: 'unknown', want: { ...nothing, reports: ['t1 failed: service web is not in the store'] } },
  { name: 'a task of an unknown spec version fails', assignments: [assigned('t1', { specVersion: 7 })], containers: [], quorum: 'unknown', want: { ...nothing, reports: ['t1 failed: spec version 7 of service web is not in the store'] } },
  {
    name: 'a container removed outside shoal fails its task, which is not started again', assignments: [assigned('t1', {}, {})], containers: [], quorum: 'yes',
    want: { ...nothing, reports: ['t1 failed: container c-t1 was removed outside shoal'] },
  },
  {
    name: 'our container whose labels do not parse is removed by its container key', assignments: [],
    containers: [ctr('x', 'running', { id: 'c-bad', labels: { 'io.shoal.cluster': 'c1', 'io.shoal.node': 'n1', 'io.shoal.task': 'x', 'io.shoal.node-epoch': 'one' } })], quorum: 'yes',
    want: { ...nothing, actions: [`remove ${containerKey('c-bad')} c-bad: its labels do not parse (io.shoal.service: missing; io.shoal.slot: missing; io.shoal.spec-version: missing; io.shoal.term: missing; io.shoal.node-epoch: must be a whole number) [SIGTERM 10000]`] },
  },
  { name: 'a container of another node is not ours', assignments: [], containers: [ctr('x', 'running', { node: 'n2' })], quorum: 'yes', want: nothing },
  { name: 'a container of an epoch newer than the store knows is left', assignments: [assigned('t1')], containers: [ctr('t1', 'running', { epoch: 2 })], quorum: 'yes', want: nothing },
];

function input(r: Row): PlanInput {
  return {
    owner, node: node('n1', { epoch }), assignments: r.assignments, containers: r.containers, quorum: r.quorum,
    busyKeys: new Set(), latestReports: new Map(), failedStarts: new Set(), failureReported: new Map(), restarts: new Map(),
    nowMs: 5000, defaultStop: { signal: 'SIGTERM', graceMs: 10_000 }, leaseCovered: false, ...r.input,
  };
}

describe('planReconcile', () => {
  for (const r of rows) {
    it(r.name, () => {
      expect(summary(planReconcile(input(r)))).toEqual({ ...nothing, ...r.want });
    });
  }

  describe('exclusive tasks run only under the node\'s lease', () => {
    const excl = service({ exclusive: true });
    const exclCtr = (id: string, state: ContainerState): ContainerInfo => {
      const c = ctr(id, state);
      return { ...c, labels: { ...c.labels, 'io.shoal.exclusive': 'true' } };
    };
    const plan = (assignments: AgentAssignment[], containers: ContainerInfo[], quorum: Quorum, leaseCovered: boolean): Plan =>
      planReconcile({ ...input({ name: '', assignments, containers, quorum, want: nothing }), leaseCovered });

    it('a new exclusive task waits for the lease, and asks for it', () => {
      const p = plan([assigned('t1', {}, null, excl)], [], 'yes', false);
      expect(summary(p)).toEqual(nothing);
      expect(p.leaseWanted).toBe(true);
    });
    it('starts under a lease that holds, with the exclusive label', () => {
      const p = plan([assigned('t1', {}, null, excl)], [], 'yes', true);
      expect(summary(p).actions).toEqual(['create t1 shoal-web.1.t1']);
      const a = p.actions[0];
      expect(a?.type === 'create' ? a.spec.labels['io.shoal.exclusive'] : undefined).toBe('true');
    });
    it('a created container is not started without the lease', () => {
      expect(summary(plan([assigned('t1', {}, null, excl)], [exclCtr('t1', 'created')], 'yes', false))).toEqual(nothing);
    });
    it('an exited exclusive container is never restarted locally without a quorum: it is reported failed', () => {
      const p = plan([assigned('t1', {}, {}, excl)], [exclCtr('t1', 'exited')], 'no', true);
      expect(summary(p)).toEqual({ ...nothing, reports: ['t1 failed 1: exited with code 1'] });
    });
    it('a running one keeps the lease wanted; a plain service never wants it', () => {
      expect(plan([assigned('t1', {}, {}, excl)], [exclCtr('t1', 'running')], 'no', true).leaseWanted).toBe(true);
      expect(plan([assigned('t1', {}, {})], [ctr('t1', 'running')], 'no', false).leaseWanted).toBe(false);
    });
  });

  it('plans nothing before the node has a record', () => {
    expect(summary(planReconcile({ ...input(rows[1]!), node: null }))).toEqual(nothing);
  });

  it('prefers its own newest report to the store\'s copy', () => {
    const r: Row = { name: '', assignments: [assigned('t1', { desired: 'shutdown' }, {})], containers: [], quorum: 'yes', want: {} };
    const shutdown: TaskStatus = { taskId: 't1', nodeId: 'n1', nodeEpoch: epoch, state: 'shutdown', containerId: 'c-t1', exitCode: 0, health: null, message: null, startedAt: 100, finishedAt: 200 };
    expect(summary(planReconcile({ ...input(r), latestReports: new Map([['t1', shutdown]]) }))).toEqual(nothing);
  });

  it('is a function of its input', () => {
    for (const r of rows) expect(planReconcile(input(r))).toEqual(planReconcile(input(r)));
  });
});
