// The closed-loop load generator, written once and used for both systems: N workers, each sends
// one request, waits for the answer, records its latency, and sends the next. What a request
// is and where it goes come from the caller (a request builder and a router), so shoal and etcd
// differ only in the bytes on the wire.
//
// Only requests that complete inside the measured window count: the window starts after a
// warm-up (connections open, JIT warm, leader settled) and throughput is successes / window.

import { SeededPrng } from '../../src/raft/prng.ts';
import { Client, type Answer, type Endpoint, type RequestSpec } from './http.ts';
import { LatencyHistogram } from './histogram.ts';
import { sleep } from './proc.ts';

export interface LoadSpec {
  endpoints: readonly Endpoint[];
  workers: number;
  warmupMs: number;
  durationMs: number;
  /** Per request; on expiry the request counts as failed and its connection is dropped. */
  timeoutMs: number;
  /** Pause after a failed request before the worker's next one, so a dead node is not spun on. */
  retryDelayMs: number;
  /** Index into `endpoints` for a worker's next request; `failed` says its previous one failed. */
  route(worker: number, failed: boolean): number;
  /** The next request of a worker; `seq` is unique across the run. */
  request(worker: number, seq: number): RequestSpec;
  accept(a: Answer): boolean;
  /** Called for each accepted request, with the time it completed (performance.now()). */
  onAccepted?(seq: number, endedMs: number): void;
}

export interface LoadResult {
  ok: number;
  failed: number;
  seconds: number;
  perSecond: number;
  latency: LatencyHistogram;
  /** A few failure reasons with their counts, for the report. */
  failures: Map<string, number>;
}

const failureKindsMax = 8;

export async function runLoad(spec: LoadSpec): Promise<LoadResult> {
  const clients = spec.endpoints.map((e) => new Client(e, spec.workers));
  const latency = new LatencyHistogram();
  const failures = new Map<string, number>();
  let ok = 0;
  let failed = 0;
  let seq = 0;
  const begin = performance.now();
  const windowStart = begin + spec.warmupMs;
  const windowEnd = windowStart + spec.durationMs;
  const noteFailure = (reason: string): void => {
    failed++;
    if (failures.size < failureKindsMax || failures.has(reason)) failures.set(reason, (failures.get(reason) ?? 0) + 1);
  };
  const worker = async (w: number): Promise<void> => {
    let lastFailed = false;
    while (performance.now() < windowEnd) {
      const s = seq++;
      const client: Client | undefined = clients[spec.route(w, lastFailed)];
      if (!client) throw new Error('route() returned an index outside endpoints');
      const req = spec.request(w, s);
      const t0 = performance.now();
      let reason: string | undefined;
      try {
        const a: Answer = await client.send(req, spec.timeoutMs);
        if (!spec.accept(a)) reason = failureOf(a);
      } catch (err) {
        reason = (err as Error).message.slice(0, 120);
      }
      const t1 = performance.now();
      const inWindow = t1 >= windowStart && t1 < windowEnd;
      lastFailed = reason !== undefined;
      if (reason === undefined) {
        spec.onAccepted?.(s, t1);
        if (inWindow) { ok++; latency.recordMicros((t1 - t0) * 1000); }
      } else {
        if (inWindow) noteFailure(reason);
        await sleep(spec.retryDelayMs);
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: spec.workers }, (_, w) => worker(w)));
  } finally {
    for (const c of clients) c.destroy();
  }
  const seconds = spec.durationMs / 1000;
  return { ok, failed, seconds, perSecond: ok / seconds, latency, failures };
}

/** A short, groupable reason: the status and the error code or message, without request ids. */
function failureOf(a: Answer): string {
  const text = a.body.toString('utf8', 0, Math.min(a.body.length, 400));
  const code = /"code"\s*:\s*"([^"]+)"/.exec(text)?.[1] ?? /"(?:error|message)"\s*:\s*"([^"]{0,80})/.exec(text)?.[1] ?? text.slice(0, 80);
  return `HTTP ${a.status} ${code}`;
}

/** Every request of every worker to one endpoint. */
export const toOne = (i: number) => (): number => i;

/** Each worker walks the endpoints in turn, one request each, starting at a different one. */
export function roundRobin(n: number): (worker: number) => number {
  const next: number[] = [];
  return (w) => {
    const i = next[w] ?? w % n;
    next[w] = (i + 1) % n;
    return i;
  };
}

/** Each worker sticks to one endpoint and moves to the next only after a failure. */
export function stickyFailover(n: number): (worker: number, failed: boolean) => number {
  const at: number[] = [];
  return (w, failed) => {
    const i = at[w] ?? w % n;
    at[w] = failed ? (i + 1) % n : i;
    return at[w] ?? i;
  };
}

/** Seeded draws in [0, 1), so key sequences repeat from run to run. */
export function prng(seed: number): () => number {
  const p = new SeededPrng(seed);
  return () => p.nextFloat();
}
