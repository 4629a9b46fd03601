import { describe, expect, it } from 'vitest';
import {
  constraintsHold, demandOf, emptyUsage, feasible, firstRejection, hostPortsFree, maxPerNodeRoom, nodeActive, nodeReady, resourcesFree, runtimeUp,
  type NodeUsage,
} from '../../../src/control/scheduler/index.ts';
import { GiB, node, spec } from '../fixtures.ts';

const usage = (overrides: Partial<NodeUsage> = {}): NodeUsage => ({ ...emptyUsage(), ...overrides });
const plain = demandOf(spec());

describe('node filters', () => {
  it.each([
    ['ready', null], ['suspect', 'suspect (not heard from lately)'], ['down', 'down'],
  ] as const)('nodeReady: %s', (state, phrase) => {
    expect(nodeReady(node('n1', { state }), usage(), plain)?.phrase ?? null).toBe(phrase);
  });

  it.each([['active', null], ['pause', 'paused'], ['drain', 'draining']] as const)('nodeActive: %s', (availability, phrase) => {
    expect(nodeActive(node('n1', { availability }), usage(), plain)?.phrase ?? null).toBe(phrase);
  });

  it.each([
    ['up', null], ['unavailable', 'with its container runtime unavailable'], ['unknown', 'with no report from its container runtime yet'],
  ] as const)('runtimeUp: %s', (status, phrase) => {
    expect(runtimeUp(node('n1', { runtime: { status, error: null } }), usage(), plain)?.phrase ?? null).toBe(phrase);
  });
});

describe('constraintsHold', () => {
  const d = demandOf(spec({ constraints: ['node.labels.role == db', 'node.name != n9'] }));
  it.each([
    [{ role: 'db' }, 'n1', null],
    [{ role: 'web' }, 'n1', 'excluded by constraint node.labels.role == db'],
    [{}, 'n1', 'excluded by constraint node.labels.role == db'],
    [{ role: 'db' }, 'n9', 'excluded by constraint node.name != n9'],
  ])('labels %j on %s', (labels, name, phrase) => {
    expect(constraintsHold(node('id', { name, labels }), usage(), d)?.phrase ?? null).toBe(phrase);
  });
});

describe('resourcesFree', () => {
  const d = demandOf(spec({ resources: { reservations: { cpu: 1, memory: '2Gi' } } }));
  const n = node('n1', { capacity: { cpuMillis: 2000, memoryBytes: 4 * GiB } });
  it.each([
    [0, 0, null],
    [1000, 2 * GiB, null],
    [1001, 0, 'without 1 CPU free'],
    [0, 2 * GiB + 1, 'without 2 GiB memory free'],
    [1500, 3 * GiB, 'without 1 CPU and 2 GiB memory free'],
  ])('with %d millicores and %d bytes reserved', (cpuMillis, memoryBytes, phrase) => {
    expect(resourcesFree(n, usage({ cpuMillis, memoryBytes }), d)?.phrase ?? null).toBe(phrase);
  });

  it('lets a task that reserves nothing onto a full node', () => {
    expect(resourcesFree(n, usage({ cpuMillis: 9000, memoryBytes: 99 * GiB }), plain)).toBeNull();
  });
});

describe('hostPortsFree', () => {
  const d = demandOf(spec({ ports: [{ published: 80, target: 80, mode: 'host' }, { published: 53, target: 53, protocol: 'udp', mode: 'host' }] }));
  it.each([
    [[], null], [['80/udp', '53/tcp'], null], [['80/tcp'], 'with port 80/tcp in use'], [['53/udp'], 'with port 53/udp in use'],
  ])('with %j bound', (ports, phrase) => {
    expect(hostPortsFree(node('n1'), usage({ ports: new Set(ports) }), d)?.phrase ?? null).toBe(phrase);
  });
});

describe('maxPerNodeRoom', () => {
  const d = demandOf(spec({ maxPerNode: 2 }));
  it.each([[0, null], [1, null], [2, 'already running 2 tasks of web (maxPerNode 2)']])('with %d of the service', (count, phrase) => {
    expect(maxPerNodeRoom(node('n1'), usage({ perService: new Map([['web', count], ['other', 9]]) }), d)?.phrase ?? null).toBe(phrase);
  });

  it('does not apply without maxPerNode', () => {
    expect(maxPerNodeRoom(node('n1'), usage({ perService: new Map([['web', 99]]) }), plain)).toBeNull();
  });
});

describe('the stack', () => {
  it('names the first stage that rejects', () => {
    const d = demandOf(spec({ constraints: ['node.labels.role == db'] }));
    const bad = node('n1', { state: 'down', availability: 'drain' });
    expect(firstRejection(bad, usage(), d)).toEqual({ stage: 0, rejection: { key: 'state:down', phrase: 'down' } });
    // Stage 4: the constraints, after the image's platforms (stage 3, issue 40).
    expect(firstRejection(node('n1'), usage(), d)?.stage).toBe(4);
    expect(firstRejection(node('n1', { labels: { role: 'db' } }), usage(), d)).toBeNull();
    expect(feasible(node('n1'), usage(), d)).toBe(false);
    expect(feasible(node('n1', { labels: { role: 'db' } }), usage(), d)).toBe(true);
  });
});
