// One throughput point: a closed-loop load of writes or linearizable reads at a given number of
// clients, all to the leader or spread over every node, with the server CPU it cost and how
// busy the rest of the machine was meanwhile (the load generator shares the same cores).

import { Client } from './http.ts';
import { LatencyHistogram } from './histogram.ts';
import { prng, roundRobin, runLoad, toOne, type LoadResult } from './load.ts';
import { cpuMs, machineJiffies } from './proc.ts';
import type { System } from './system.ts';

export type Op = 'write' | 'read';
export type Placement = 'leader' | 'spread';

export interface PointSpec {
  op: Op;
  clients: number;
  to: Placement;
}

export interface PointResult extends PointSpec {
  system: string;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
  failed: number;
  failures: [string, number][];
  /** CPU time of the three server processes per successful request, in µs. */
  serverCpuMicrosPerReq: number;
  /** CPU used by processes other than the servers and this benchmark, in % of the machine. */
  otherCpuPercent: number;
  leaderChanged: boolean;
}

export interface PointOptions {
  warmupMs: number;
  durationMs: number;
  keys: number;
  timeoutMs: number;
}

export const benchCollection = 'bench';
export const keyOf = (i: number): string => `k${String(i).padStart(6, '0')}`;

/** A 256-character value; `tag` (a sequence number) makes it unique where that matters. */
export function value256(tag = ''): string {
  const filler = 'abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ';
  let s = tag === '' ? '' : `${tag}:`;
  while (s.length < 256) s += filler;
  return s.slice(0, 256);
}

/** One measured round of a point on one system: raw counts, to be merged with its other rounds. */
export interface PointRound {
  system: string;
  ok: number;
  failed: number;
  failures: Map<string, number>;
  seconds: number;
  latency: LatencyHistogram;
  /** CPU of the three server processes during the round, warm-up included, in ms. */
  serverCpuMs: number;
  /** Requests accepted during the round, warm-up included: what `serverCpuMs` paid for. */
  accepted: number;
  /** The machine's capacity and busy time during the round, and ours (servers and generator), in ms. */
  capacityMs: number;
  busyMs: number;
  ourMs: number;
  leaderChanged: boolean;
}

export async function runRound(sys: System, spec: PointSpec, opts: PointOptions): Promise<PointRound> {
  const leader = await sys.leader();
  if (leader === undefined) throw new Error(`${sys.kind}: no leader before the ${spec.op} point`);
  const rand = prng(spec.clients * 7919 + (spec.op === 'write' ? 1 : 2));
  const value = value256();
  const pids = sys.nodes.map((n) => n.pid ?? 0);
  const cpu0 = pids.reduce((a, p) => a + cpuMs(p), 0);
  const self0 = process.cpuUsage();
  const jiffies0 = machineJiffies();
  let accepted = 0;
  const result: LoadResult = await runLoad({
    endpoints: sys.nodes.map((n) => n.client),
    workers: spec.clients, warmupMs: opts.warmupMs, durationMs: opts.durationMs, timeoutMs: opts.timeoutMs, retryDelayMs: 10,
    route: spec.to === 'leader' ? toOne(leader) : roundRobin(sys.nodes.length),
    request: (_w, _s) => {
      const key = keyOf(Math.floor(rand() * opts.keys));
      return spec.op === 'write' ? sys.writeRequest(benchCollection, key, value) : sys.readRequest(benchCollection, key);
    },
    accept: spec.op === 'write' ? (a) => sys.writeAccepted(a) : (a) => sys.readFound(a),
    onAccepted: () => { accepted++; },
  });
  const serverCpuMs = pids.reduce((a, p) => a + cpuMs(p), 0) - cpu0;
  const self = process.cpuUsage(self0);
  const jiffies1 = machineJiffies();
  const after = await sys.leader().catch(() => undefined);
  return {
    system: sys.kind, ok: result.ok, failed: result.failed, failures: result.failures, seconds: result.seconds, latency: result.latency, serverCpuMs, accepted,
    // Jiffies are 10 ms and summed over every core: the machine's capacity in the interval.
    capacityMs: (jiffies1.total - jiffies0.total) * 10, busyMs: (jiffies1.busy - jiffies0.busy) * 10,
    ourMs: serverCpuMs + (self.user + self.system) / 1000,
    leaderChanged: after !== leader,
  };
}

/** A point's figures from all its rounds on one system, counted together. */
export function pointOf(spec: PointSpec, rounds: readonly PointRound[]): PointResult {
  const first = rounds[0];
  if (!first) throw new Error('pointOf: no rounds');
  const latency = new LatencyHistogram();
  const failures = new Map<string, number>();
  const sum = (f: (r: PointRound) => number): number => rounds.reduce((a, r) => a + f(r), 0);
  for (const r of rounds) {
    latency.merge(r.latency);
    for (const [k, n] of r.failures) failures.set(k, (failures.get(k) ?? 0) + n);
  }
  const ok = sum((r) => r.ok);
  return {
    ...spec, system: first.system, perSecond: ok / sum((r) => r.seconds), p50Ms: latency.quantileMs(0.5), p99Ms: latency.quantileMs(0.99),
    failed: sum((r) => r.failed), failures: [...failures],
    serverCpuMicrosPerReq: sum((r) => r.accepted) > 0 ? (sum((r) => r.serverCpuMs) * 1000) / sum((r) => r.accepted) : Number.NaN,
    otherCpuPercent: Math.max(0, ((sum((r) => r.busyMs) - sum((r) => r.ourMs)) / Math.max(1, sum((r) => r.capacityMs))) * 100),
    leaderChanged: rounds.some((r) => r.leaderChanged),
  };
}

/** Writes every key of the keyspace once, so that reads find what they look for. */
export async function fill(sys: System, target: number, collection: string, count: number, workers: number, valueOf: (i: number) => string = () => value256()): Promise<{ seconds: number }> {
  const node = sys.nodes[target];
  if (!node) throw new Error(`no node ${target}`);
  const client = new Client(node.client, workers);
  let next = 0;
  const started = performance.now();
  const worker = async (): Promise<void> => {
    for (let i = next++; i < count; i = next++) {
      const id = collection === benchCollection ? keyOf(i) : `d${String(i).padStart(7, '0')}`;
      await writeWithRetries(sys, client, collection, id, valueOf(i));
    }
  };
  try {
    await Promise.all(Array.from({ length: workers }, worker));
  } finally {
    client.destroy();
  }
  return { seconds: (performance.now() - started) / 1000 };
}

async function writeWithRetries(sys: System, client: Client, collection: string, id: string, value: string): Promise<void> {
  let last = '';
  for (let attempt = 0; attempt < 10; attempt++) {
    try {
      const a = await client.send(sys.writeRequest(collection, id, value), 10_000);
      if (sys.writeAccepted(a)) return;
      last = `HTTP ${a.status} ${a.body.toString().slice(0, 200)}`;
    } catch (err) {
      last = (err as Error).message;
    }
    await new Promise((r) => setTimeout(r, 100 * (attempt + 1)));
  }
  throw new Error(`${sys.kind}: could not write ${collection}/${id}: ${last}`);
}
