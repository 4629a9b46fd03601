import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  buildContainerSpec, carriesOwner, containerLabels, containerName, labelKeys, ownerLabels, readLabels, type ContainerLabels,
} from '../../src/executor/labels.ts';
import { spec, task } from '../control/fixtures.ts';

const sample: ContainerLabels = { clusterId: 'c1', nodeId: 'n1', service: 'web', slot: 2, taskId: '9f8e7d6c5b4a3210', specVersion: 4, term: 7, nodeEpoch: 3 };

describe('container labels', () => {
  it('are under io.shoal. and read back to what was written', () => {
    const labels = containerLabels(sample);
    expect(labels).toEqual({
      'io.shoal.cluster': 'c1', 'io.shoal.node': 'n1', 'io.shoal.service': 'web', 'io.shoal.slot': '2', 'io.shoal.task': '9f8e7d6c5b4a3210',
      'io.shoal.spec-version': '4', 'io.shoal.term': '7', 'io.shoal.node-epoch': '3',
    });
    expect(readLabels(labels)).toEqual({ ok: true, labels: sample });
  });

  it('keep a global slot (a node id) apart from a number, even one of digits only', () => {
    const l = containerLabels({ ...sample, slot: '1234' });
    expect(l['io.shoal.slot']).toBe('"1234"');
    expect(readLabels(l)).toMatchObject({ ok: true, labels: { slot: '1234' } });
  });

  it('round-trip any record (property)', () => {
    const id = fc.string({ minLength: 1, maxLength: 40 });
    const whole = fc.integer({ min: 0, max: 2 ** 40 });
    fc.assert(fc.property(
      fc.record({
        clusterId: id, nodeId: id, service: id, slot: fc.oneof(fc.integer({ min: 1, max: 10_000 }), id), taskId: id,
        specVersion: fc.integer({ min: 1, max: 2 ** 40 }), term: whole, nodeEpoch: whole,
      }),
      (l) => {
        expect(readLabels(containerLabels(l))).toEqual({ ok: true, labels: l });
      },
    ));
  });

  it('ignore labels outside io.shoal.', () => {
    expect(readLabels({ ...containerLabels(sample), 'com.docker.compose.project': 'x', maintainer: 'y' })).toEqual({ ok: true, labels: sample });
  });

  it.each([
    ['a missing label', labelKeys.term, undefined, 'io.shoal.term: missing'],
    ['an epoch that is not a whole number', labelKeys.nodeEpoch, '1.5', 'io.shoal.node-epoch: must be a whole number'],
    ['a negative term', labelKeys.term, '-1', 'io.shoal.term: must be a whole number'],
    ['a leading zero', labelKeys.term, '07', 'io.shoal.term: must be a whole number'],
    ['spec version 0', labelKeys.specVersion, '0', 'io.shoal.spec-version: must be at least 1'],
    ['an unquoted string slot', labelKeys.slot, 'abc', 'io.shoal.slot: must be a slot'],
    ['slot 0', labelKeys.slot, '0', 'io.shoal.slot: must be a slot'],
    ['an empty task id', labelKeys.task, '', 'io.shoal.task: must not be empty'],
  ])('refuse %s', (_what, key, value, problem) => {
    const labels: Record<string, string> = { ...containerLabels(sample) };
    if (value === undefined) delete labels[key];
    else labels[key] = value;
    const r = readLabels(labels);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.problems.join('; ')).toContain(problem);
  });

  it('name the owner by cluster and node id together', () => {
    const labels = containerLabels(sample);
    expect(ownerLabels({ clusterId: 'c1', nodeId: 'n1' })).toEqual({ 'io.shoal.cluster': 'c1', 'io.shoal.node': 'n1' });
    expect(carriesOwner(labels, { clusterId: 'c1', nodeId: 'n1' })).toBe(true);
    expect(carriesOwner(labels, { clusterId: 'c1', nodeId: 'n2' })).toBe(false);
    expect(carriesOwner(labels, { clusterId: 'c2', nodeId: 'n1' })).toBe(false);
  });
});

describe('containerName', () => {
  it('is shoal-<service>.<slot>.<short task id>', () => {
    expect(containerName('web', 3, '9f8e7d6c5b4a3210')).toBe('shoal-web.3.9f8e7d6c5b4a');
    expect(containerName('agent', 'a1b2c3', 't1')).toBe('shoal-agent.a1b2c3.t1');
  });

  it('holds only what a Docker name may', () => {
    fc.assert(fc.property(fc.string({ minLength: 1 }), fc.oneof(fc.nat(), fc.string({ minLength: 1 })), fc.string({ minLength: 1 }), (svc, slot, id) => {
      expect(containerName(svc, slot, id)).toMatch(/^[a-zA-Z0-9][a-zA-Z0-9_.-]+$/);
    }));
  });
});

describe('buildContainerSpec', () => {
  const s = spec({
    command: ['sleep'], args: ['3600'], env: { A: '1' }, user: '1000', stopSignal: 'SIGINT', stopGracePeriod: '3s',
    healthCheck: { command: ['true'], interval: '5s' }, resources: { limits: { cpu: '500m', memory: '64Mi' } },
    ports: [{ published: 8080, target: 80, mode: 'host' }], privileged: true,
  });
  const t = task('9f8e7d6c5b4a3210', { nodeId: 'n1', slot: 2, specVersion: 4, assignedTerm: 7, nodeEpoch: 3 });

  it('names the service\'s networks, their addresses left for the agent to fill in', () => {
    const c = buildContainerSpec(spec({ networks: ['front', 'back'] }), t, { clusterId: 'c1', nodeId: 'n1' });
    expect(c.networks).toEqual([{ name: 'back', address: null }, { name: 'front', address: null }]);
    expect(c.dns).toEqual([]);
    expect(buildContainerSpec(s, t, { clusterId: 'c1', nodeId: 'n1' }).networks).toEqual([]);
  });

  it('carries the spec, the name and the labels of the task', () => {
    const c = buildContainerSpec(s, t, { clusterId: 'c1', nodeId: 'n1' });
    expect(c).toMatchObject({
      name: 'shoal-web.2.9f8e7d6c5b4a', image: 'busybox:local', command: ['sleep'], args: ['3600'], env: { A: '1' }, user: '1000',
      limits: { cpuMillis: 500, memoryBytes: 64 * 1024 ** 2 }, ports: [{ published: 8080, target: 80, protocol: 'tcp' }], privileged: true,
      stopSignal: 'SIGINT', stopGracePeriodMs: 3000, healthCheck: { command: ['true'], intervalMs: 5000 },
    });
    expect(readLabels(c.labels)).toEqual({ ok: true, labels: sample });
  });

  it('copies, so the container spec never aliases the stored one', () => {
    const c = buildContainerSpec(s, t, { clusterId: 'c1', nodeId: 'n1' });
    c.command?.push('x');
    c.env['B'] = '2';
    expect(s.command).toEqual(['sleep']);
    expect(s.env).toEqual({ A: '1' });
  });

  it('carries the container settings, the service\'s labels beside shoal\'s, and its name servers', () => {
    const c = buildContainerSpec(spec({
      workingDir: '/srv', hostname: 'web', init: true, readOnlyRootfs: true, shmSize: '128Mi', tmpfs: ['/tmp', { target: '/run', size: '64Mi', mode: '1777' }],
      extraHosts: ['nas=10.0.0.5'], dns: ['1.1.1.1'], dnsSearch: ['lan'], dnsOptions: ['ndots:2'], ulimits: { nofile: { soft: 1024, hard: 4096 }, nproc: 512 },
      sysctls: { 'net.core.somaxconn': 1024 }, labels: { 'traefik.enable': 'true' },
    }), t, { clusterId: 'c1', nodeId: 'n1' });
    expect(c.settings).toEqual({
      workingDir: '/srv', hostname: 'web', init: true, readOnlyRootfs: true, shmSizeBytes: 128 * 1024 ** 2,
      tmpfs: [{ target: '/run', sizeBytes: 64 * 1024 ** 2, mode: 0o1777 }, { target: '/tmp', sizeBytes: null, mode: null }],
      extraHosts: [{ host: 'nas', address: '10.0.0.5' }], dnsSearch: ['lan'], dnsOptions: ['ndots:2'],
      ulimits: [{ name: 'nofile', soft: 1024, hard: 4096 }, { name: 'nproc', soft: 512, hard: 512 }], sysctls: { 'net.core.somaxconn': '1024' },
    });
    expect(c.dns).toEqual(['1.1.1.1']);
    expect(c.labels['traefik.enable']).toBe('true');
    expect(readLabels(c.labels)).toEqual({ ok: true, labels: sample });
  });

  it('asserts the task is placed on this node', () => {
    expect(() => buildContainerSpec(s, t, { clusterId: 'c1', nodeId: 'n2' })).toThrow(/not placed on n2/);
    expect(() => buildContainerSpec(s, { ...t, nodeEpoch: null }, { clusterId: 'c1', nodeId: 'n1' })).toThrow(/assertion/);
  });
});
