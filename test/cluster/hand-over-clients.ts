// Clients for the hand-over test and benchmark: register writes and linearizable reads spread
// over every node, recording a history for the linearizability checker, with only the retries
// an ordinary HTTP client makes (issue "Leadership hand-over that no client notices"):
//
// - a refused connection never reached a node: the client moves to the next node and sends the
//   same request again;
// - a connection reset (or closed) may have reached one: the client sends the same request, with
//   the same Idempotency-Key, to the next node.
//
// Anything else that is not a success is a failed request, counted and kept for the report. A
// write whose last attempt failed is recorded `info` (outcome unknown), a read `fail`.

import { performance } from 'node:perf_hooks';
import type { HistoryEvent } from '../faults/history.ts';
import { call, docValue, sleep, type HttpResult } from '../faults/http.ts';

export interface HandOverTarget {
  name: string;
  apiAddress: string;
}

export interface HandOverClientsOptions {
  workers: number;
  keys: readonly string[];
  collection: string;
  runId: string;
  targets: () => readonly HandOverTarget[];
  requestTimeoutMs: number;
  /** Attempts of one request across refused or reset connections before it counts as failed. */
  attemptsMax: number;
}

/** One completed operation, for the gap and latency figures. */
export interface Completed {
  op: 'read' | 'write';
  ok: boolean;
  startMs: number;
  endMs: number;
}

const movedOn = new Set(['ECONNREFUSED']);
const reset = new Set(['ECONNRESET', 'UND_ERR_SOCKET', 'EPIPE', 'other side closed']);

/** The collection of the ack log (ack()). */
export const ackCollection = 'acks';

export class HandOverClients {
  readonly history: HistoryEvent[] = [];
  /** Ids of the ack log's documents whose creation was acknowledged. */
  readonly acked = new Set<string>();
  readonly completed: Completed[] = [];
  readonly failures: string[] = [];
  /** Requests sent again after a refused or reset connection. */
  retried = 0;
  private running = false;
  private loops: Promise<void>[] = [];
  private nextProcess = 0;

  constructor(private readonly opts: HandOverClientsOptions) {}

  start(): void {
    this.running = true;
    this.loops = Array.from({ length: this.opts.workers }, (_, i) => this.worker(i));
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }

  private async worker(index: number): Promise<void> {
    let proc = this.nextProcess++;
    let target = index;
    for (let n = 0; this.running; n++) {
      const key = this.opts.keys[(index + n) % this.opts.keys.length] as string;
      const value = `${proc}-${n}`;
      if (n % 3 === 2) {
        target = await this.ack(target, value);
        continue;
      }
      const op = n % 3 === 0 ? 'write' : 'read';
      const startMs = performance.now();
      this.history.push(op === 'write'
        ? { type: 'invoke', process: proc, key, time: startMs, op, value }
        : { type: 'invoke', process: proc, key, time: startMs, op });
      const { result, node } = await this.send(target, op, key, value);
      target = node;
      const endMs = performance.now();
      const answered = result.kind === 'answer' ? result : undefined;
      if (op === 'write' && answered?.status === 200) {
        this.history.push({ type: 'ok', process: proc, key, time: endMs, op, value });
        this.completed.push({ op, ok: true, startMs, endMs });
        continue;
      }
      if (op === 'read' && (answered?.status === 200 || (answered?.status === 404 && answered.code === 'not_found'))) {
        this.history.push({ type: 'ok', process: proc, key, time: endMs, op, value: answered.status === 200 ? docValue(answered.body) ?? null : null });
        this.completed.push({ op, ok: true, startMs, endMs });
        continue;
      }
      const why = answered !== undefined ? `${answered.status} ${answered.code ?? ''}` : `transport ${result.kind === 'failure' ? result.error : ''}`;
      this.failures.push(`${op} ${key} by process ${proc}: ${why}`);
      this.completed.push({ op, ok: false, startMs, endMs });
      // An unknown write ends its process (a process runs one operation at a time, forever open).
      this.history.push(op === 'write'
        ? { type: 'info', process: proc, key, time: endMs, op, value, error: why.slice(0, 200) }
        : { type: 'fail', process: proc, key, time: endMs, op, error: why.slice(0, 200) });
      if (op === 'write') proc = this.nextProcess++;
    }
  }

  /**
   * Creates the document acks/<runId>-<value> once (an ack log: registers are overwritten, so a
   * lost acknowledged register write may not show in the final state; these must all be there).
   */
  private async ack(start: number, value: string): Promise<number> {
    const id = `${this.opts.runId}-${value}`;
    const startMs = performance.now();
    const { result, node } = await this.send(start, 'create', id, value);
    const ok = result.kind === 'answer' && result.status === 200;
    if (ok) this.acked.add(id);
    else this.failures.push(`create ${id}: ${result.kind === 'answer' ? `${result.status} ${result.code ?? ''}` : `transport ${result.error}`}`);
    this.completed.push({ op: 'write', ok, startMs, endMs: performance.now() });
    return node;
  }

  /** Sends one request, moving on after a refused or reset connection; returns the last result and node. */
  private async send(start: number, op: 'read' | 'write' | 'create', key: string, value: string): Promise<{ result: HttpResult; node: number }> {
    let node = start;
    let result: HttpResult = { kind: 'failure', error: 'no target' };
    for (let attempt = 0; attempt < this.opts.attemptsMax; attempt++) {
      const targets = this.opts.targets();
      const t = targets[node % targets.length] as HandOverTarget;
      const collection = op === 'create' ? ackCollection : this.opts.collection;
      const path = `/v1/docs/${collection}/${encodeURIComponent(key)}`;
      const idempotency = { 'idempotency-key': `${this.opts.runId}-${op}-${value}` };
      result = op === 'read'
        ? await call(t.apiAddress, path, { timeoutMs: this.opts.requestTimeoutMs })
        : await call(t.apiAddress, path, {
          method: 'PUT', body: { value }, timeoutMs: this.opts.requestTimeoutMs,
          headers: op === 'create' ? { ...idempotency, 'if-none-match': '*' } : idempotency,
        });
      if (result.kind === 'answer' || !(movedOn.has(result.error) || reset.has(result.error))) return { result, node };
      this.retried++;
      node++;
      if (attempt >= targets.length) await sleep(50);
    }
    return { result, node };
  }
}

/** The longest time between two successful writes' completions within [fromMs, toMs]. */
export function longestWriteGapMs(done: readonly Completed[], fromMs: number, toMs: number): number {
  const ends = done.filter((c) => c.op === 'write' && c.ok && c.endMs >= fromMs && c.endMs <= toMs).map((c) => c.endMs).sort((a, b) => a - b);
  let gap = 0;
  for (let i = 1; i < ends.length; i++) gap = Math.max(gap, (ends[i] as number) - (ends[i - 1] as number));
  return gap;
}
