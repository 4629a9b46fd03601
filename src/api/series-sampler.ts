// What a node samples into its rings every interval (10 s by default): its own key series, read
// from its Prometheus registry (rates and means from the counters' deltas since the previous
// sample) and from the host, and the running tasks of every service from its applied store.
// Served by series-routes.ts; drawn by the console (src/console/charts.ts).
//
// Memory is bounded and allocated up front: a node ring of `nodeSeriesNames` Float32 columns plus
// a Float64 time column, and one service ring (running, desired, updating, failures) per service
// for at most `servicesTrackedMax` services. With the defaults (2,160 rows: 6 h at 10 s) that is
// 138,240 bytes for the node and 51,840 bytes per service, 2.73 MB with 50 services;
// `bench/series-footprint.ts` measures the heap it takes.

import { cpus, freemem, totalmem } from 'node:os';
import type { Registry } from '../base/metrics.ts';
import type { ControlState } from '../resources/state.ts';
import { tasksOf } from '../resources/state.ts';
import { viewOf } from '../resources/task-view.ts';
import { SeriesRing, type SeriesWindow } from './series-ring.ts';

export const nodeSeriesNames = [
  /** Log entries applied per second: the cluster's committed write rate, the same on every node. */
  'writes',
  /** GET requests per second answered by this node's API. */
  'reads',
  /** Mean time from proposing to applying a write made on this node (the leader makes every forwarded one), ms. */
  'writeLatencyMs',
  /** Mean time to answer a GET on this node, ms. */
  'readLatencyMs',
  /** Entries committed and not yet applied here (the latest value). */
  'commitLag',
  /** Leader changes this node saw during the interval: drawn as marks. */
  'leaderChanges',
  'term',
  /** Busy fraction of the host's CPUs during the interval, 0 to 1. */
  'cpu',
  /** Host memory in use (total less available), and the total, bytes. */
  'memoryUsedBytes',
  'memoryTotalBytes',
  /** This process's resident set, bytes. */
  'rssBytes',
  /** The filesystem of the data directory: bytes available to shoal, and its size. */
  'diskAvailBytes',
  'diskSizeBytes',
  /** Tasks desired running on this node and observed running (its containers running). */
  'tasksRunning',
] as const;
export type NodeSeriesName = (typeof nodeSeriesNames)[number];

export const serviceSeriesNames = [
  /** Tasks of the current spec version running (ServiceStatus.running), and the tasks desired. */
  'running', 'desired',
  /** 1 while a rolling update or rollback was in progress. */
  'updating',
  /** Tasks of the service seen failed for the first time during the interval: drawn as marks. */
  'failures',
] as const;
export type ServiceSeriesName = (typeof serviceSeriesNames)[number];

export interface SeriesConfig {
  intervalMs: number;
  rows: number;
  servicesTrackedMax: number;
}

/** One sample per 10 s for the last 6 hours; 50 services. */
export const seriesConfigDefault: SeriesConfig = { intervalMs: 10_000, rows: 2160, servicesTrackedMax: 50 };

/** $SHOAL_SERIES_INTERVAL_MS (tests sample faster; the ring still holds `rows` samples). */
export function seriesConfigOf(env: NodeJS.ProcessEnv = process.env): SeriesConfig {
  const raw = env.SHOAL_SERIES_INTERVAL_MS;
  if (raw === undefined || raw === '') return seriesConfigDefault;
  const ms = Number(raw);
  if (!Number.isInteger(ms) || ms < 100 || ms > 600_000) {
    throw new Error(`SHOAL_SERIES_INTERVAL_MS=${raw}: give whole milliseconds from 100 to 600000`);
  }
  return { ...seriesConfigDefault, intervalMs: ms };
}

/** What the sampler reads: the registry, the applied state, the node. Functions, so tests can fake them. */
export interface SamplerInputs {
  metrics: Registry;
  nodeId: string;
  state: () => ControlState;
  now: () => number;
}

interface Counters {
  at: number;
  applied: number | null;
  proposalSum: number;
  proposalCount: number;
  getSum: number;
  getCount: number;
  leaderChanges: number | null;
  cpuBusy: number;
  cpuTotal: number;
}

type PromJson = Array<{ name: string; values: Array<{ value: number; labels: Record<string, string | number>; metricName?: string }> }>;

function one(json: PromJson, name: string): number | null {
  return json.find((m) => m.name === name)?.values[0]?.value ?? null;
}

/** Sum of a histogram's `_sum` and `_count` over the label sets `keep` accepts. */
function histogramTotals(json: PromJson, name: string, keep: (labels: Record<string, string | number>) => boolean): { sum: number; count: number } {
  let sum = 0;
  let count = 0;
  for (const v of json.find((m) => m.name === name)?.values ?? []) {
    if (!keep(v.labels)) continue;
    if (v.metricName === `${name}_sum`) sum += v.value;
    else if (v.metricName === `${name}_count`) count += v.value;
  }
  return { sum, count };
}

function cpuTimes(): { busy: number; total: number } {
  let busy = 0;
  let total = 0;
  for (const c of cpus()) {
    const t = c.times;
    const all = t.user + t.nice + t.sys + t.idle + t.irq;
    total += all;
    busy += all - t.idle;
  }
  return { busy, total };
}

const meanMs = (sum: number, count: number): number | null => (count > 0 ? (sum / count) * 1000 : null);

interface ServiceTrack {
  ring: SeriesRing<ServiceSeriesName>;
  failedSeen: Set<string>;
}

export class SeriesSampler {
  readonly node: SeriesRing<NodeSeriesName>;
  private readonly services = new Map<string, ServiceTrack>();
  /** Services that exist but are not sampled, for want of room (servicesTrackedMax). */
  untracked = 0;
  /** Samples skipped because reading the registry failed (a metric's read threw): the row is missing, nothing else. */
  sampleErrors = 0;
  private last: Counters | null = null;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly inputs: SamplerInputs, readonly config: SeriesConfig = seriesConfigDefault) {
    this.node = new SeriesRing(nodeSeriesNames, config.rows, config.intervalMs);
  }

  start(): void {
    if (this.timer !== undefined) return;
    const run = (): void => {
      this.sampleNow().catch(() => {
        this.sampleErrors++;
      });
    };
    run();
    this.timer = setInterval(run, this.config.intervalMs);
    this.timer.unref();
  }

  /** Idempotent. */
  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Bytes the rings hold now (the node's, and every tracked service's). */
  get bytes(): number {
    return this.node.bytes + [...this.services.values()].reduce((s, t) => s + t.ring.bytes, 0);
  }

  serviceWindow(name: string, sinceMs: number): SeriesWindow<ServiceSeriesName> | undefined {
    return this.services.get(name)?.ring.window(sinceMs);
  }

  /** Takes one sample now (the timer calls it; tests call it directly). */
  async sampleNow(): Promise<void> {
    const at = this.inputs.now();
    const json = (await this.inputs.metrics.prom.getMetricsAsJSON()) as unknown as PromJson;
    let state: ControlState | undefined;
    try {
      state = this.inputs.state();
    } catch {
      state = undefined;
    }
    this.sampleNode(at, json, state);
    if (state !== undefined) this.sampleServices(at, state);
  }

  private sampleNode(at: number, json: PromJson, state: ControlState | undefined): void {
    const proposals = histogramTotals(json, 'shoal_proposal_duration_seconds', () => true);
    const gets = histogramTotals(json, 'shoal_http_request_duration_seconds', (l) => l.method === 'GET');
    const cpu = cpuTimes();
    const now: Counters = {
      at, applied: one(json, 'shoal_raft_applied_index'), proposalSum: proposals.sum, proposalCount: proposals.count,
      getSum: gets.sum, getCount: gets.count, leaderChanges: one(json, 'shoal_raft_leader_changes_total'), cpuBusy: cpu.busy, cpuTotal: cpu.total,
    };
    const prev = this.last;
    this.last = now;
    const dt = prev === null ? 0 : (at - prev.at) / 1000;
    const rate = (a: number | null, b: number | null): number | null => (prev === null || dt <= 0 || a === null || b === null ? null : Math.max(0, a - b) / dt);
    const total = totalmem();
    this.node.push(at, {
      writes: rate(now.applied, prev?.applied ?? null),
      reads: rate(now.getCount, prev?.getCount ?? null),
      writeLatencyMs: prev === null ? null : meanMs(now.proposalSum - prev.proposalSum, now.proposalCount - prev.proposalCount),
      readLatencyMs: prev === null ? null : meanMs(now.getSum - prev.getSum, now.getCount - prev.getCount),
      commitLag: one(json, 'shoal_raft_apply_lag_entries'),
      leaderChanges: prev === null || now.leaderChanges === null || prev.leaderChanges === null ? null : Math.max(0, now.leaderChanges - prev.leaderChanges),
      term: one(json, 'shoal_raft_term'),
      cpu: prev === null || now.cpuTotal <= prev.cpuTotal ? null : (now.cpuBusy - prev.cpuBusy) / (now.cpuTotal - prev.cpuTotal),
      memoryUsedBytes: total - freemem(), memoryTotalBytes: total, rssBytes: process.memoryUsage.rss(),
      diskAvailBytes: one(json, 'shoal_storage_filesystem_avail_bytes'), diskSizeBytes: one(json, 'shoal_storage_filesystem_size_bytes'),
      tasksRunning: state === undefined ? null : this.runningHere(state),
    });
  }

  private runningHere(state: ControlState): number {
    let n = 0;
    for (const t of state.tasks.values()) {
      if (t.value.nodeId === this.inputs.nodeId && t.value.desired === 'running' && viewOf(state, t).observed === 'running') n++;
    }
    return n;
  }

  private sampleServices(at: number, state: ControlState): void {
    const names = new Set<string>();
    let untracked = 0;
    for (const s of state.services.values()) {
      const svc = s.value;
      names.add(svc.name);
      let track = this.services.get(svc.name);
      if (track === undefined) {
        if (this.services.size >= this.config.servicesTrackedMax) {
          untracked++;
          continue;
        }
        track = { ring: new SeriesRing(serviceSeriesNames, this.config.rows, this.config.intervalMs), failedSeen: new Set() };
        this.services.set(svc.name, track);
        // Failures from before the first sample are not news: the first one marks none.
        for (const t of tasksOf(state, svc.name)) if (viewOf(state, t).observed === 'failed') track.failedSeen.add(t.value.id);
      }
      const views = tasksOf(state, svc.name).map((t) => viewOf(state, t));
      const failed = views.filter((v) => v.observed === 'failed').map((v) => v.record.id);
      const fresh = failed.filter((id) => !track.failedSeen.has(id)).length;
      track.failedSeen = new Set(failed);
      const running = views.filter((v) => v.record.desired === 'running' && v.healthy && v.node?.state === 'ready' && v.record.specVersion === svc.specVersion).length;
      track.ring.push(at, {
        running, desired: svc.spec.mode === 'global' ? null : svc.spec.replicas ?? 0,
        updating: svc.updateStatus.state === 'updating' || svc.updateStatus.state === 'rolling-back' ? 1 : 0,
        failures: fresh,
      });
    }
    // A removed service's picture goes with it (a new one of the same name starts afresh).
    for (const name of this.services.keys()) if (!names.has(name)) this.services.delete(name);
    this.untracked = untracked;
  }
}
