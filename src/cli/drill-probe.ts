// The probe a drill runs while it injects a fault (docs/operations.md, "Failover drills"):
// workers spread over every node, each in turn creating a document of an ack log (created once,
// never overwritten, so every acknowledged one must be on every node at the end), writing one
// shared register, and reading it back (a linearizable read, the default).
//
// A read went backwards when it returned an older revision of the register than one some
// operation had already seen before the read was sent: a write acknowledged at that revision, or
// a read that returned it. The revision is the store's, so it only grows; a linearizable store
// never shows that. The check only under-estimates what was seen (a completion is counted when
// this process handles it, which is after it happened), so it cannot report a false backwards.
//
// A failed request (no answer, a 5xx) sends the worker to the next node after a short pause, as
// a client with several addresses does; writes carry an Idempotency-Key so a retried one that
// had landed is not applied twice.

import { performance } from 'node:perf_hooks';
import { send as sendToNode } from './client.ts';
import { backoffDelayMs } from '../base/backoff.ts';

export const probeCollection = 'drill-probe';
/** A probe request that has not answered in this long counts as failed. */
const requestTimeoutMs = 5000;
/** The longest pause a worker takes after failures in a row. */
const backoffMsMax = 500;

export interface ProbeTarget {
  name: string;
  apiAddress: string;
}

interface Answer {
  status: number;
  rev: number | undefined;
}

async function send(addr: string, path: string, method: 'GET' | 'PUT', body?: unknown, headers: Record<string, string> = {}): Promise<Answer | undefined> {
  try {
    const res = await sendToNode(addr, path, {
      method, signal: AbortSignal.timeout(requestTimeoutMs),
      headers: { ...headers, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const parsed: unknown = await res.json().catch(() => undefined);
    const rev = typeof parsed === 'object' && parsed !== null && 'rev' in parsed && typeof parsed.rev === 'number' ? parsed.rev : undefined;
    return { status: res.status, rev };
  } catch {
    return undefined;
  }
}

export class DrillProbe {
  /** Ids of the ack log's documents whose creation was acknowledged. */
  readonly acked = new Set<string>();
  /** When each acknowledged write (create or register write) completed (performance.now()). */
  readonly writeEnds: number[] = [];
  writesAttempted = 0;
  writesFailed = 0;
  reads = 0;
  readsFailed = 0;
  backwards = 0;
  /** The first few backwards reads, in words. */
  readonly backwardsSeen: string[] = [];
  /** The highest register revision any completed operation has seen. */
  private seenRev = 0;
  private running = false;
  private loops: Promise<void>[] = [];

  constructor(private readonly targets: readonly ProbeTarget[], private readonly runId: string, private readonly workers: number) {}

  start(): void {
    this.running = true;
    this.loops = Array.from({ length: this.workers }, (_, i) => this.worker(i));
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }

  private async worker(w: number): Promise<void> {
    let node = w;
    let failedInARow = 0;
    for (let seq = 0; this.running; seq++) {
      const t = this.targets[node % this.targets.length] as ProbeTarget;
      const ok = seq % 3 === 0 ? await this.create(t, `${this.runId}-${w}-${seq}`)
        : seq % 3 === 1 ? await this.writeRegister(t, `${w}-${seq}`)
          : await this.readRegister(t);
      if (ok) {
        failedInARow = 0;
        continue;
      }
      node++;
      failedInARow++;
      await new Promise((r) => setTimeout(r, backoffDelayMs(failedInARow + 1, 20, backoffMsMax)));
    }
  }

  private async create(t: ProbeTarget, id: string): Promise<boolean> {
    this.writesAttempted++;
    const a = await send(t.apiAddress, `/v1/docs/${probeCollection}/${id}`, 'PUT', { drill: this.runId }, { 'if-none-match': '*', 'idempotency-key': id });
    if (a?.status !== 200) {
      this.writesFailed++;
      return false;
    }
    this.acked.add(id);
    this.writeEnds.push(performance.now());
    return true;
  }

  private async writeRegister(t: ProbeTarget, value: string): Promise<boolean> {
    this.writesAttempted++;
    const a = await send(t.apiAddress, `/v1/docs/${probeCollection}/${this.runId}-register`, 'PUT', { value }, { 'idempotency-key': `${this.runId}-register-${value}` });
    if (a?.status !== 200 || a.rev === undefined) {
      this.writesFailed++;
      return false;
    }
    this.seenRev = Math.max(this.seenRev, a.rev);
    this.writeEnds.push(performance.now());
    return true;
  }

  private async readRegister(t: ProbeTarget): Promise<boolean> {
    const floor = this.seenRev;
    const a = await send(t.apiAddress, `/v1/docs/${probeCollection}/${this.runId}-register`, 'GET');
    const rev = a?.status === 200 ? a.rev : a?.status === 404 ? 0 : undefined;
    if (rev === undefined) {
      this.readsFailed++;
      return false;
    }
    this.reads++;
    if (rev < floor) {
      this.backwards++;
      if (this.backwardsSeen.length < 5) this.backwardsSeen.push(`a read on ${t.name} returned revision ${rev} after revision ${floor} had been seen`);
    }
    this.seenRev = Math.max(this.seenRev, rev);
    return true;
  }
}

/** The longest time between two acknowledged writes in [fromMs, toMs] (the bounds count as writes). */
export function longestGapMs(ends: readonly number[], fromMs: number, toMs: number): number {
  const points = [fromMs, ...ends.filter((e) => e > fromMs && e < toMs), toMs].sort((a, b) => a - b);
  let gap = 0;
  for (let i = 1; i < points.length; i++) gap = Math.max(gap, (points[i] as number) - (points[i - 1] as number));
  return gap;
}
