// kill -9 of the leader under a write load: 16 clients spread over the three nodes, each moving
// to the next node after an error. Measures the time from the kill until the survivors agree
// on a new leader and the longest gap between two successful writes (any client), then reads
// back every acknowledged write from a survivor: each write has its own key and a value that
// carries its sequence number, so a lost or stale acknowledged write is counted, not guessed.

import { Client } from './http.ts';
import { runLoad, stickyFailover } from './load.ts';
import { sleep } from './proc.ts';
import type { System } from './system.ts';
import { value256 } from './throughput.ts';

export interface FailoverOptions {
  clients: number;
  /** Load before the kill, and after it. */
  beforeMs: number;
  afterMs: number;
  timeoutMs: number;
  /** Makes this round's keys distinct from earlier rounds', so an old value cannot hide a lost write. */
  round: number;
}

export interface FailoverResult {
  system: string;
  round: number;
  killedIndex: number;
  killed: string;
  newLeader: string;
  newLeaderMs: number;
  writeGapMs: number;
  /** Gap start relative to the kill (negative: the last success before it). */
  gapStartMs: number;
  acked: number;
  lost: number;
  failedRequests: number;
}

const collection = 'failover';

export async function runFailover(sys: System, opts: FailoverOptions): Promise<FailoverResult> {
  const old = await sys.leader();
  if (old === undefined) throw new Error(`${sys.kind}: no leader before the failover`);
  const idOf = (seq: number): string => `r${opts.round}w${seq}`;
  const acks: [number, number][] = [];
  const started = performance.now();
  const load = runLoad({
    endpoints: sys.nodes.map((n) => n.client),
    workers: opts.clients, warmupMs: 0, durationMs: opts.beforeMs + opts.afterMs, timeoutMs: opts.timeoutMs, retryDelayMs: 25,
    route: stickyFailover(sys.nodes.length),
    request: (_w, s) => sys.writeRequest(collection, idOf(s), value256(String(s))),
    accept: (a) => sys.writeAccepted(a),
    onAccepted: (s, t) => { acks.push([s, t]); },
  });
  await sleep(opts.beforeMs);
  const killedAt = performance.now();
  await sys.kill(old);
  let next: number | undefined;
  while (next === undefined && performance.now() - killedAt < opts.afterMs) {
    next = await sys.leader().catch(() => undefined);
    if (next === undefined) await sleep(20);
  }
  const newLeaderMs = performance.now() - killedAt;
  const result = await load;
  const ended = started + opts.beforeMs + opts.afterMs;
  const gap = longestGap(acks.map(([, t]) => t), started, ended);
  const survivor = sys.nodes.findIndex((n, i) => i !== old && n.pid !== undefined);
  const lost = await countLost(sys, survivor, acks.map(([s]) => s), idOf);
  return {
    system: sys.kind, round: opts.round, killedIndex: old, killed: sys.nodes[old]?.name ?? '?', newLeader: next === undefined ? 'none' : sys.nodes[next]?.name ?? '?',
    newLeaderMs: next === undefined ? Number.NaN : newLeaderMs,
    writeGapMs: gap.ms, gapStartMs: gap.from - killedAt, acked: acks.length, lost, failedRequests: result.failed,
  };
}

/**
 * The longest stretch of [start, end] without a successful write, its start and end counting as
 * edges. Writes that completed after `end` (requests still in flight when the load stopped) are
 * left out: the load had stopped, so the silence before them is not a gap.
 */
export function longestGap(times: readonly number[], start: number, end: number): { ms: number; from: number } {
  const sorted = times.filter((t) => t >= start && t <= end).sort((a, b) => a - b);
  let best = { ms: 0, from: start };
  let prev = start;
  for (const t of [...sorted, end]) {
    if (t - prev > best.ms) best = { ms: t - prev, from: prev };
    prev = t;
  }
  return best;
}

/** Reads every acknowledged key back from node `at`; counts the missing and the wrong. */
async function countLost(sys: System, at: number, seqs: number[], idOf: (seq: number) => string): Promise<number> {
  const node = sys.nodes[at];
  if (!node) throw new Error(`${sys.kind}: no surviving node to read back from`);
  const workers = 32;
  const client = new Client(node.client, workers);
  let lost = 0;
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let i = next++; i < seqs.length; i = next++) {
      const s = seqs[i] ?? -1;
      const v = await readWithRetries(sys, client, idOf(s));
      if (v !== value256(String(s))) lost++;
    }
  };
  try {
    await Promise.all(Array.from({ length: workers }, worker));
  } finally {
    client.destroy();
  }
  return lost;
}

async function readWithRetries(sys: System, client: Client, id: string): Promise<string | undefined> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await sys.readValue(client, collection, id);
    } catch (err) {
      if (attempt >= 10) throw err;
      await sleep(200);
    }
  }
}
