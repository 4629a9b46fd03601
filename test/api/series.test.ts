// Pictures over time (series-ring.ts, series-sampler.ts, series-routes.ts) and the health summary
// (health-summary.ts): the ring keeps the newest rows in a fixed allocation; the sampler turns
// counters into rates and marks; the routes answer a node's and a service's series and the
// summary on one node that runs the control plane, sampling every 100 ms
// (SHOAL_SERIES_INTERVAL_MS), and refuse bad input with a catalogued error.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import os from 'node:os';
import { Registry } from '../../src/base/metrics.ts';
import { registerNodeMetrics } from '../../src/node/metrics/node-metrics.ts';
import { SeriesRing } from '../../src/api/series-ring.ts';
import { SeriesSampler, nodeSeriesNames, seriesConfigOf } from '../../src/api/series-sampler.ts';
import type { ControlState } from '../../src/resources/state.ts';
import { singleNode, type SingleNode } from './single-node.ts';

describe('SeriesRing', () => {
  it('keeps the newest rows, oldest first, in the bytes it allocated once', () => {
    const ring = new SeriesRing(['a', 'b'] as const, 4, 10);
    const before = ring.bytes;
    expect(before).toBe(4 * 8 + 2 * 4 * 4);
    for (let i = 1; i <= 6; i++) ring.push(i * 10, { a: i, b: i % 2 === 0 ? null : i * 100 });
    expect(ring.size).toBe(4);
    expect(ring.bytes).toBe(before);
    const w = ring.window(0);
    expect(w.times).toEqual([30, 40, 50, 60]);
    expect(w.series.a).toEqual([3, 4, 5, 6]);
    expect(w.series.b).toEqual([300, null, 500, null]);
    expect(ring.window(45).times).toEqual([50, 60]);
  });

  it('stores a value that is not a finite number as missing', () => {
    const ring = new SeriesRing(['a'] as const, 2, 10);
    ring.push(1, { a: Number.POSITIVE_INFINITY });
    ring.push(2, {});
    expect(ring.window(0).series.a).toEqual([null, null]);
  });
});

describe('SeriesSampler', () => {
  const empty: ControlState = { revision: 0, nodes: new Map(), services: new Map(), tasks: new Map(), statuses: new Map() } as unknown as ControlState;

  it('turns the applied index into a write rate and leader changes into per-interval counts', async () => {
    const metrics = new Registry();
    let applied = 100;
    let changes = 1;
    metrics.gauge({ name: 'shoal_raft_applied_index', help: 'x', type: 'gauge', read: () => [{ value: applied }] });
    metrics.gauge({ name: 'shoal_raft_leader_changes_total', help: 'x', type: 'counter', read: () => [{ value: changes }] });
    metrics.gauge({ name: 'shoal_raft_apply_lag_entries', help: 'x', type: 'gauge', read: () => [{ value: 3 }] });
    const latency = metrics.histogram('shoal_proposal_duration_seconds', 'x');
    let now = 1_000_000;
    const sampler = new SeriesSampler({ metrics, nodeId: 'n1', state: () => empty, now: () => now }, { intervalMs: 10_000, rows: 8, servicesTrackedMax: 2 });
    await sampler.sampleNow();
    now += 10_000;
    applied += 500;
    changes += 2;
    latency.observe(0.004);
    latency.observe(0.006);
    await sampler.sampleNow();
    now += 10_000;
    await sampler.sampleNow();
    const w = sampler.node.window(0);
    expect(w.series.writes).toEqual([null, 50, 0]);
    expect(w.series.leaderChanges).toEqual([null, 2, 0]);
    expect(w.series.writeLatencyMs[1]).toBeCloseTo(5, 3);
    expect(w.series.writeLatencyMs[2]).toBeNull();
    expect(w.series.commitLag).toEqual([3, 3, 3]);
    expect(w.series.memoryTotalBytes[0]).toBeGreaterThan(0);
    expect(w.series.tasksRunning).toEqual([0, 0, 0]);
    expect(Object.keys(w.series)).toEqual([...nodeSeriesNames]);
  });

  it('refuses a sampling interval that is not whole milliseconds from 100 to 600000', () => {
    expect(seriesConfigOf({ SHOAL_SERIES_INTERVAL_MS: '250' }).intervalMs).toBe(250);
    expect(seriesConfigOf({}).intervalMs).toBe(10_000);
    expect(() => seriesConfigOf({ SHOAL_SERIES_INTERVAL_MS: '5' })).toThrow(/100 to 600000/);
    expect(() => seriesConfigOf({ SHOAL_SERIES_INTERVAL_MS: 'fast' })).toThrow(/SHOAL_SERIES_INTERVAL_MS/);
  });
});

describe('the series and summary routes', () => {
  let s: SingleNode;
  const get = async <T>(url: string): Promise<T> => {
    const res = await s.app.inject({ url });
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as T;
  };
  async function until(what: string, check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  beforeAll(async () => {
    process.env.SHOAL_SERIES_INTERVAL_MS = '100';
    s = await singleNode({ control: true });
    delete process.env.SHOAL_SERIES_INTERVAL_MS;
    // As the server does (src/server): the sampler reads the registry at each sample.
    registerNodeMetrics(s.ctx.metrics, s.node, { identity: { id: 'solo', name: 'solo', clusterId: 'test-cluster' }, softwareVersion: '0.0.0-test', electionTimeoutMs: 1000, dataDir: os.tmpdir() });
    await until('the node registered', async () => (await get<{ items: unknown[] }>('/v1/nodes')).items.length === 1);
  });
  afterAll(async () => { await s.close(); });

  it("answers a node's series, with its writes as they happen", async () => {
    const doc = { apiVersion: 'shoal/v1', kind: 'Service', name: 'web', image: 'busybox:local', replicas: 2 };
    expect((await s.app.inject({ method: 'POST', url: '/v1/apply', payload: { documents: [doc] } })).statusCode).toBe(200);
    type Answer = { node: { id: string; name: string }; intervalMs: number; keptMs: number; times: number[]; series: Record<string, Array<number | null>> };
    await until('writes sampled', async () => (await get<Answer>('/v1/nodes/solo/series')).series.writes?.some((v) => v !== null && v > 0) === true);
    const a = await get<Answer>('/v1/nodes/solo/series?window=60');
    expect(a.node).toEqual({ id: 'solo', name: 'solo' });
    expect(a.intervalMs).toBe(100);
    expect(a.keptMs).toBe(100 * 2160);
    expect(a.times.length).toBeGreaterThan(1);
    for (const name of nodeSeriesNames) expect(a.series[name]).toHaveLength(a.times.length);
    await until('tasks running on the node', async () => (await get<Answer>('/v1/nodes/solo/series')).series.tasksRunning?.at(-1) === 2);
  });

  it("answers a service's running tasks over time", async () => {
    type Answer = { service: string; times: number[]; series: { running: Array<number | null>; desired: Array<number | null> } };
    await until('the service sampled running', async () => (await get<Answer>('/v1/services/web/series')).series.running.at(-1) === 2);
    const a = await get<Answer>('/v1/services/web/series?window=600');
    expect(a.service).toBe('web');
    expect(a.series.desired.at(-1)).toBe(2);
  });

  it('answers the health summary: the leader, quorum, nothing wrong once converged', async () => {
    await until('converged', async () => (await get<{ servicesNotConverged: unknown[] }>('/v1/summary')).servicesNotConverged.length === 0);
    const sum = await get<Record<string, unknown>>('/v1/summary');
    expect(sum).toMatchObject({
      node: 'solo', view: 'leader', leader: { id: 'solo', name: 'solo' },
      quorum: { voters: 1, reachable: 1, needed: 1, tolerance: 0, hasQuorum: true },
      nodesNotReady: [], membersUnreachable: [], failingTasks: [], failingTasksTotal: 0, alerts: [],
    });
  });

  it('refuses a bad window, an unknown node or service, and an unknown query', async () => {
    for (const [url, code, status] of [
      ['/v1/nodes/solo/series?window=5', 'bad_request', 400], ['/v1/nodes/solo/series?window=999999', 'bad_request', 400],
      ['/v1/nodes/ghost/series', 'not_found', 404], ['/v1/services/ghost/series', 'not_found', 404], ['/v1/summary?x=1', 'bad_request', 400],
    ] as const) {
      const res = await s.app.inject({ url });
      expect(res.statusCode, url).toBe(status);
      expect((res.json() as { code: string }).code, url).toBe(code);
    }
  });
});
