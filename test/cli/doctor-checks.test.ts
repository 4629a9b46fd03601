// shoal doctor's checks on made-up facts: each says OK, WARN or FAIL at its thresholds, with what
// to do (the workload checks: a runtime that does not answer, this node's containers against its
// assignments, services short of their count, images that cannot be had); and the command
// against no node fails the quorum check and exits 3.

import { describe, expect, it } from 'vitest';
import type { View } from '../../src/cli/cluster-view.ts';
import {
  apiExposureCheck, certificateCheck, clockCheck, containersCheck, diskCheck, imagesCheck, quorumCheck, runtimeCheck, servicesCheck, toleranceCheck, versionCheck,
  type LocalContainer, type LocalRuntimeFacts, type MemberFacts, type NodeFacts, type ServiceFacts, type TaskFacts, type WorkloadFacts,
} from '../../src/cli/doctor-checks.ts';
import { metricValue } from '../../src/cli/doctor.ts';
import { inProcess } from './in-process.ts';

type Health = 'healthy' | 'lagging' | 'unreachable';

function view(health: Health[], opts: { leader?: string | null; versions?: string[]; featureLevel?: number; levelsMax?: number[] } = {}): View {
  return {
    clusterId: 'c', view: 'leader', node: 'a', leader: opts.leader === undefined ? 'a' : opts.leader, term: 3, commitIndex: 9, appliedIndex: 9, lastIndex: 9,
    ...(opts.featureLevel !== undefined ? { featureLevel: opts.featureLevel } : {}),
    members: health.map((h, i) => ({
      id: String.fromCharCode(97 + i), name: `n${i + 1}`, apiAddress: `h${i}:7101`, peerAddress: `h${i}:7102`, role: 'voter' as const,
      matchIndex: 9, lag: 0, rttMs: 1, softwareVersion: opts.versions?.[i] ?? '1.0.0', featureLevelMax: opts.levelsMax?.[i] ?? null, health: h,
    })),
  };
}

describe('quorum and tolerance', () => {
  it('fails without an answer, a leader or a quorum; warns with a voter down', () => {
    expect(quorumCheck(undefined, 'x:1').status).toBe('fail');
    expect(quorumCheck(view(['healthy', 'healthy', 'healthy'], { leader: null }), 'x:1').status).toBe('fail');
    expect(quorumCheck(view(['healthy', 'unreachable', 'unreachable']), 'x:1').status).toBe('fail');
    const down = quorumCheck(view(['healthy', 'lagging', 'unreachable']), 'x:1');
    expect(down.status).toBe('warn');
    expect(down.message).toContain('n3');
    expect(quorumCheck(view(['healthy', 'healthy', 'healthy']), 'x:1').status).toBe('ok');
  });
  it('warns of a lone voter and of an even number', () => {
    expect(toleranceCheck(view(['healthy'])).status).toBe('warn');
    expect(toleranceCheck(view(['healthy', 'healthy'])).status).toBe('warn');
    expect(toleranceCheck(view(['healthy', 'healthy', 'healthy'])).message).toContain('tolerate 1');
  });
});

const m = (name: string, f: Partial<MemberFacts>): MemberFacts => ({ name, id: name, reachable: true, ...f });

describe('clock skew and disk free', () => {
  it('measures skew between the members, not against this machine', () => {
    expect(clockCheck([m('n1', { clockOffsetMs: 9000 }), m('n2', { clockOffsetMs: 9500 })]).status).toBe('ok');
    const warn = clockCheck([m('n1', { clockOffsetMs: 0 }), m('n2', { clockOffsetMs: 3000 }), m('n3', { clockOffsetMs: 100 })]);
    expect(warn.status).toBe('warn');
    expect(warn.message).toContain('between n2 and n1');
    expect(clockCheck([m('n1', { clockOffsetMs: 0 }), m('n2', { clockOffsetMs: -40_000 })]).status).toBe('fail');
    expect(clockCheck([m('n1', { clockOffsetMs: 0 })]).status).toBe('skip');
  });
  it('warns under 15% free, fails under 5% or 1 GiB', () => {
    const gib = 1024 ** 3;
    expect(diskCheck([m('n1', { availBytes: 50 * gib, sizeBytes: 100 * gib })]).status).toBe('ok');
    expect(diskCheck([m('n1', { availBytes: 50 * gib, sizeBytes: 100 * gib }), m('n2', { availBytes: 10 * gib, sizeBytes: 100 * gib })]).status).toBe('warn');
    expect(diskCheck([m('n1', { availBytes: 4 * gib, sizeBytes: 100 * gib })]).status).toBe('fail');
    expect(diskCheck([m('n1', { availBytes: 0.5 * gib, sizeBytes: 2 * gib })]).status).toBe('fail');
    expect(diskCheck([m('n1', {})]).status).toBe('skip');
  });
});

describe('versions, API exposure, certificates', () => {
  it('warns of mixed versions and a feature level below what all support', () => {
    expect(versionCheck(view(['healthy', 'healthy'], { versions: ['1.0.0', '1.1.0'] })).status).toBe('warn');
    expect(versionCheck(view(['healthy', 'healthy'], { featureLevel: 2, levelsMax: [3, 3] })).status).toBe('warn');
    expect(versionCheck(view(['healthy', 'healthy'], { featureLevel: 3, levelsMax: [3, 3] })).status).toBe('ok');
  });
  it('warns of an API beyond loopback', () => {
    expect(apiExposureCheck('127.0.0.1:7101').status).toBe('ok');
    expect(apiExposureCheck('[::1]:7101').status).toBe('ok');
    expect(apiExposureCheck('0.0.0.0:7101').status).toBe('warn');
    expect(apiExposureCheck(undefined).status).toBe('skip');
  });
  it('fails an expired certificate and warns of one expiring within 30 days', () => {
    const now = new Date('2026-12-01T00:00:00Z');
    const cert = (days: number) => [{ file: 'tls/node.crt', notAfter: new Date(now.getTime() + days * 86_400_000) }];
    expect(certificateCheck(cert(365), now).status).toBe('ok');
    expect(certificateCheck(cert(10), now).status).toBe('warn');
    expect(certificateCheck(cert(-1), now).status).toBe('fail');
  });
  it('reads an unlabelled sample from Prometheus text', () => {
    const text = '# HELP x y\nshoal_storage_filesystem_avail_bytes 1234\nshoal_storage_filesystem_size_bytes_other 9\n';
    expect(metricValue(text, 'shoal_storage_filesystem_avail_bytes')).toBe(1234);
    expect(metricValue(text, 'shoal_storage_filesystem_size_bytes')).toBeUndefined();
  });
  it('reads a labelled sample, its labels in any order, and no other', () => {
    const text = [
      'shoal_peer_messages_dropped_total{reason="malformed"} 7',
      'shoal_peer_messages_dropped_total{reason="wrong_sender"} 2',
      'shoal_x_total{a="1",b="2"} 5',
      'shoal_peer_messages_dropped_total 99',
    ].join('\n');
    expect(metricValue(text, 'shoal_peer_messages_dropped_total', { reason: 'wrong_sender' })).toBe(2);
    expect(metricValue(text, 'shoal_peer_messages_dropped_total', { reason: 'misaddressed' })).toBeUndefined();
    expect(metricValue(text, 'shoal_peer_messages_dropped_total')).toBe(99);
    expect(metricValue(text, 'shoal_x_total', { b: '2', a: '1' })).toBe(5);
    expect(metricValue(text, 'shoal_x_total', { a: '1' })).toBeUndefined();
  });
});

const node = (id: string, f: Partial<NodeFacts> = {}): NodeFacts => ({ id, name: `n-${id}`, state: 'ready', epoch: 1, runtime: { status: 'up', error: null }, ...f });
const service = (name: string, desired: number, running: number, f: Partial<ServiceFacts['status']> = {}): ServiceFacts => ({
  name, image: `${name}:1`, specVersion: 1,
  status: { desired, running, tasks: desired, pending: 0, pendingReasons: [], stopping: 0, updating: false, converged: running === desired, ...f },
});
const taskOn = (id: string, nodeId: string | null, f: Partial<TaskFacts> = {}): TaskFacts => ({
  id, service: 'web', slot: Number(id.replace(/\D/g, '')) || 1, nodeId, nodeName: nodeId === null ? null : `n-${nodeId}`, desired: 'running', observed: 'running',
  specVersion: 1, nodeEpoch: 1, createdAt: 100, message: null, ...f,
});
const container = (name: string, taskId: string | null, f: Partial<LocalContainer> = {}): LocalContainer => ({ id: `c-${name}`, name, running: true, taskId, nodeEpoch: 1, ...f });
const docker = (f: Partial<LocalRuntimeFacts> = {}): LocalRuntimeFacts => ({ nodeId: 'a', nodeName: 'n-a', kind: 'docker', endpoint: 'unix:///var/run/docker.sock', containers: [], imageRefs: ['web:1'], ...f });
const cluster = (f: Partial<WorkloadFacts> = {}): WorkloadFacts => ({ nodes: [node('a'), node('b')], services: [service('web', 2, 2)], tasks: [taskOn('t1', 'a'), taskOn('t2', 'b')], ...f });

describe('container runtime', () => {
  it('fails when this node\'s Docker does not answer, and says how to start it', () => {
    const c = runtimeCheck(docker({ unreachable: 'connect ENOENT /var/run/docker.sock' }), cluster({ nodes: [node('a', { runtime: { status: 'unavailable', error: 'ENOENT' } })] }));
    expect(c.status).toBe('fail');
    expect(c.message).toContain('ENOENT');
    expect(c.fix).toContain('systemctl start docker');
  });
  it('only warns when this command cannot reach Docker but the node\'s agent can (another user)', () => {
    const c = runtimeCheck(docker({ unreachable: 'connect EACCES' }), cluster());
    expect(c.status).toBe('warn');
    expect(c.fix).toContain('docker group');
  });
  it('fails when any node\'s agent reports its runtime unavailable, naming it', () => {
    const c = runtimeCheck(undefined, cluster({ nodes: [node('a'), node('b', { runtime: { status: 'unavailable', error: 'Docker is not running' } })] }));
    expect(c.status).toBe('fail');
    expect(c.message).toContain('n-b (Docker is not running)');
  });
  it('is fine with a memory runtime, and with every runtime up', () => {
    expect(runtimeCheck({ nodeId: 'a', nodeName: 'n-a', kind: 'memory' }, cluster()).status).toBe('ok');
    expect(runtimeCheck(docker(), cluster()).status).toBe('ok');
    expect(runtimeCheck(undefined, undefined).status).toBe('skip');
  });
});

describe('containers against assignments', () => {
  it('is fine with one running container per task assigned here', () => {
    const c = containersCheck(docker({ containers: [container('shoal-web.1', 't1'), container('old', 't9', { running: false })] }), cluster());
    expect(c.status).toBe('ok');
  });
  it('warns of orphans: a container of no task here, of a task moved away or shut down, of an older epoch, or unreadable', () => {
    const tasks = [taskOn('t1', 'a'), taskOn('t2', 'b'), taskOn('t3', 'a', { desired: 'shutdown', observed: 'shutdown' })];
    const containers = [container('shoal-web.1', 't1'), container('moved', 't2'), container('stopped-task', 't3'), container('unknown', 'zz'), container('old-epoch', 't1', { nodeEpoch: 0 }), container('bad-labels', null)];
    const c = containersCheck(docker({ containers }), cluster({ tasks }));
    expect(c.status).toBe('warn');
    expect(c.message).toContain('5 running container(s)');
    for (const n of ['moved', 'stopped-task', 'unknown', 'bad-labels']) expect(c.message).toContain(n);
    expect(c.fix).toContain('docker rm -f');
  });
  it('fails on two running containers of one task', () => {
    const c = containersCheck(docker({ containers: [container('x1', 't1'), container('x2', 't1')] }), cluster());
    expect(c.status).toBe('fail');
    expect(c.message).toContain('t1 (x1, x2)');
  });
  it('fails on a task counted as running here with no running container; one still starting is not missing', () => {
    const tasks = [taskOn('t1', 'a'), taskOn('t3', 'a', { observed: 'starting' })];
    const c = containersCheck(docker({ containers: [container('x', 't1', { running: false })] }), cluster({ tasks }));
    expect(c.status).toBe('fail');
    expect(c.message).toContain('web slot 1 (task t1)');
    expect(c.message).not.toContain('t3');
  });
  it('skips without --data, with another runtime, without Docker or without the tasks', () => {
    expect(containersCheck(undefined, cluster()).status).toBe('skip');
    expect(containersCheck({ nodeId: 'a', nodeName: 'n-a', kind: 'memory' }, cluster()).message).toContain('memory runtime');
    expect(containersCheck(docker({ containers: undefined, unreachable: 'x' }), cluster()).status).toBe('skip');
    expect(containersCheck(docker(), undefined).status).toBe('skip');
  });
});

describe('services', () => {
  it('fails on a service short of its count, naming why its tasks wait', () => {
    const c = servicesCheck(cluster({ services: [service('web', 3, 1, { pending: 2, pendingReasons: ['no node with 2 GiB free'] }), service('db', 1, 1)] }));
    expect(c.status).toBe('fail');
    expect(c.message).toContain('web 1/3 running (2 pending: no node with 2 GiB free)');
    expect(c.message).not.toContain('db');
    expect(c.fix).toContain('shoal service ps NAME');
  });
  it('warns while an update is under way or tasks are stopping; fine when all are converged', () => {
    expect(servicesCheck(cluster({ services: [service('web', 3, 2, { updating: true })] })).status).toBe('warn');
    expect(servicesCheck(cluster({ services: [service('web', 3, 3, { stopping: 1, converged: false })] })).status).toBe('warn');
    expect(servicesCheck(cluster()).status).toBe('ok');
    expect(servicesCheck(undefined).status).toBe('skip');
  });
});

describe('images', () => {
  it('fails on a slot that runs nothing because its image could not be pulled', () => {
    const tasks = [
      taskOn('t1', 'a'),
      taskOn('t2', 'b', { observed: 'failed', desired: 'shutdown', message: 'image_pull_failed: image web:2 could not be pulled: manifest unknown', createdAt: 1 }),
      taskOn('t2', 'b', { id: 't2b', observed: 'pending', nodeId: null, createdAt: 2 }),
    ];
    const c = imagesCheck(undefined, cluster({ tasks }));
    expect(c.status).toBe('fail');
    expect(c.message).toContain('web slot 2 on n-b: image_pull_failed: image web:2 could not be pulled: manifest unknown');
    expect(c.fix).toContain('docker pull');
  });
  it('says once a failure that several slots share', () => {
    const pull = 'image_pull_failed: no such host';
    const tasks = [taskOn('t1', 'a', { observed: 'failed', message: pull }), taskOn('t2', 'b', { observed: 'failed', message: pull })];
    const c = imagesCheck(undefined, cluster({ tasks }));
    expect(c.message).toBe(`2 slot(s) run nothing because the image could not be pulled: web slot 1 on n-a, 2 on n-b: ${pull}`);
  });
  it('does not count a pull that failed once in a slot that runs now', () => {
    const tasks = [taskOn('t1', 'a'), taskOn('t2', 'b', { observed: 'failed', desired: 'shutdown', message: 'image_pull_failed: timeout' }), taskOn('t2', 'b', { id: 't2b' })];
    expect(imagesCheck(undefined, cluster({ tasks })).status).toBe('ok');
  });
  it('warns of an image of a task assigned here that this node\'s Docker does not hold, comparing references as Docker does', () => {
    const c = imagesCheck(docker({ imageRefs: ['busybox:latest'] }), cluster());
    expect(c.status).toBe('warn');
    expect(c.message).toContain('web:1');
    const same = imagesCheck(docker({ imageRefs: ['docker.io/library/web:1'] }), cluster());
    expect(same.status).toBe('ok');
    expect(imagesCheck(undefined, undefined).status).toBe('skip');
  });
});

describe('shoal doctor', () => {
  it('with no node answering: the quorum check fails and the exit code is 3', async () => {
    const r = await inProcess('doctor', '--json', '--addr', '127.0.0.1:9');
    expect(r.code).toBe(3);
    const checks = (JSON.parse(r.stdout) as { checks: { name: string; status: string }[] }).checks;
    expect(checks.find((c) => c.name === 'quorum')?.status).toBe('fail');
  });
});
