// Concurrent clients doing register operations on a few documents, recording every invocation
// and completion into a history for the linearizability checker (history.ts documents the
// format). Each register is the document reg/<key>, its value in `doc.value`.
//
// Worker i starts on member i mod n and moves to the next member after a transport error or a
// 5xx, backing off (50 ms, doubling up to 1 s) while errors follow each other, as a real client
// would; without it a cluster that is down turns each worker into a busy loop of unknown outcomes. A worker runs one operation at a time under a process id; when an outcome is unknown
// (`info`) that process id is retired and the worker takes a fresh one (the Jepsen convention:
// the unknown operation stays open forever, and a process is sequential).
//
// How answers map to outcomes (docs/errors.md):
//
//   read   200 → ok with the value; 404 → ok with null. Anything else → fail: a read changes
//          nothing, so one whose answer is lost is the same as one that never happened (Jepsen
//          records failed reads as :fail for the same reason), and the process goes on.
//   write  PUT with a value never written before and an Idempotency-Key.
//          200 → ok. 503 no_leader or proposal_dropped → fail: refused before reaching the log.
//          A refused connection (ECONNREFUSED) → fail: the request was never sent. Anything
//          else (timeout, leader_changed, stopping, 5xx, a reset, our 3 s deadline) → info.
//   cas    GET the document; its value differs from `from` → fail (the compare failed; the read
//          is where it linearizes). Equal → PUT with If-Match: <rev> (If-None-Match: * when
//          `from` is null, the document absent). 200 → ok. 412 precondition_failed → fail:
//          every value is written once, so another revision means another value, and the
//          compare truly failed. Anything else → info, including a failed
//          GET and a refused PUT: the checker reads a `fail` cas as "the register did not hold
//          `from`", which such a cas does not show, and `info` (took effect or not) is the
//          sound way to record "nothing happened" for it.

import { performance } from 'node:perf_hooks';
import type { SeededPrng } from '../../src/raft/prng.ts';
import type { HistoryEvent, HistoryWriter, OpKind } from './history.ts';
import { call, docRev, docValue, sleep, type HttpResult } from './http.ts';

export interface Target {
  name: string;
  apiAddress: string;
}

export interface RegisterClientsOptions {
  workers: number;
  keys: readonly string[];
  collection: string;
  history: HistoryWriter;
  prng: SeededPrng;
  /** The members to talk to; read at each operation, so membership changes are followed. */
  targets: () => readonly Target[];
  requestTimeoutMs: number;
  /** Pause between a worker's operations, drawn uniformly from [0, thinkMsMax]. */
  thinkMsMax: number;
  /** Makes idempotency keys unique to this run. */
  runId: string;
  /** Plain reads only; the cas compare always reads linearizably. 'stale' is for self-checks. */
  readConsistency?: 'linearizable' | 'stale';
}

export type OutcomeType = 'ok' | 'fail' | 'info';

export interface ClientStats {
  invoked: number;
  byOutcome: Record<OpKind, Record<OutcomeType, number>>;
  /** Error codes and transport errors seen, with counts. */
  errors: Record<string, number>;
  processes: number;
  /** Answers no outcome rule expects (a 400, an idempotency conflict): client or server bugs. */
  anomalies: string[];
}

type Completion = { type: OutcomeType; value?: string | null; error?: string; switchNode: boolean };

const refusedCodes = new Set(['no_leader', 'proposal_dropped']);
const backoffMsMin = 50;
const backoffMsMax = 1000;

export class RegisterClients {
  private running = false;
  private loops: Promise<void>[] = [];
  private nextProcess = 0;
  private readonly seq = new Map<number, number>();
  readonly stats: ClientStats = {
    invoked: 0, processes: 0, errors: {}, anomalies: [],
    byOutcome: { read: { ok: 0, fail: 0, info: 0 }, write: { ok: 0, fail: 0, info: 0 }, cas: { ok: 0, fail: 0, info: 0 } },
  };

  constructor(private readonly opts: RegisterClientsOptions) {
    if (opts.workers < 1 || opts.keys.length < 1) throw new RangeError('need at least one worker and one key');
  }

  start(): void {
    if (this.running) throw new Error('clients already running');
    this.running = true;
    this.loops = Array.from({ length: this.opts.workers }, (_, i) => this.worker(i, this.opts.prng.fork()));
  }

  /** Lets every worker finish its operation in flight (bounded by the request timeout). */
  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
    this.loops = [];
  }

  /**
   * A linearizable read of each key under a fresh process, trying each target until one answers;
   * recorded in the history like any read. Returns the values read (a key whose read never
   * succeeded is missing from the map).
   */
  async finalReads(deadlineMs: number): Promise<Map<string, string | null>> {
    const values = new Map<string, string | null>();
    const end = performance.now() + deadlineMs;
    for (const key of this.opts.keys) {
      const proc = this.newProcess();
      for (let attempt = 0; performance.now() < end && !values.has(key); attempt++) {
        const targets = this.opts.targets();
        const node = targets[attempt % targets.length];
        if (node === undefined) break;
        const c = await this.record(proc, node, { op: 'read', key }, () => this.read(node, key));
        if (c.type === 'ok') values.set(key, c.value ?? null);
        else await sleep(200);
      }
    }
    return values;
  }

  private async worker(index: number, prng: SeededPrng): Promise<void> {
    let proc = this.newProcess();
    let target = index;
    const lastSeen = new Map<string, string | null>();
    let errorsInARow = 0;
    while (this.running) {
      const targets = this.opts.targets();
      const node = targets[target % Math.max(1, targets.length)];
      if (node === undefined) {
        await sleep(50);
        continue;
      }
      const key = this.opts.keys[prng.nextInt(this.opts.keys.length)] as string;
      const dice = prng.nextFloat();
      let c: Completion;
      if (dice < 0.4) {
        c = await this.record(proc, node, { op: 'read', key }, () => this.read(node, key));
        if (c.type === 'ok') lastSeen.set(key, c.value ?? null);
      } else if (dice < 0.75) {
        const value = this.freshValue(proc);
        c = await this.record(proc, node, { op: 'write', key, value }, () => this.write(node, key, value));
        if (c.type === 'ok') lastSeen.set(key, value);
      } else {
        const from = lastSeen.get(key) ?? null;
        const value = this.freshValue(proc);
        c = await this.record(proc, node, { op: 'cas', key, from, value }, () => this.cas(node, key, from, value));
        if (c.type === 'ok') lastSeen.set(key, value);
      }
      if (c.type === 'info') proc = this.newProcess();
      if (c.switchNode) target++;
      errorsInARow = c.switchNode ? errorsInARow + 1 : 0;
      if (errorsInARow > 0) await sleep(Math.min(backoffMsMax, backoffMsMin * 2 ** (errorsInARow - 1)));
      const think = prng.nextInt(this.opts.thinkMsMax + 1);
      if (think > 0) await sleep(think);
    }
  }

  private newProcess(): number {
    this.stats.processes++;
    return this.nextProcess++;
  }

  /** `${process}-${n}`: unique across the run, since process ids are never reused. */
  private freshValue(proc: number): string {
    const n = (this.seq.get(proc) ?? 0) + 1;
    this.seq.set(proc, n);
    return `${proc}-${n}`;
  }

  private async record(
    proc: number, node: Target,
    op: { op: 'read'; key: string } | { op: 'write'; key: string; value: string } | { op: 'cas'; key: string; from: string | null; value: string },
    perform: () => Promise<Completion>,
  ): Promise<Completion> {
    const h = this.opts.history;
    h.append({ type: 'invoke', process: proc, node: node.name, time: performance.now(), ...op });
    this.stats.invoked++;
    let c: Completion;
    try {
      c = await perform();
    } catch (err) {
      // A bug on either side; the outcome is unknown, and the run reports it.
      this.stats.anomalies.push(`${op.op} on ${node.name}: ${(err as Error).message}`);
      c = { type: 'info', error: 'exception', switchNode: true };
    }
    const time = performance.now();
    const error = c.error === undefined ? {} : { error: c.error };
    let event: HistoryEvent;
    if (op.op === 'read') {
      event = c.type === 'ok'
        ? { type: 'ok', process: proc, node: node.name, time, op: 'read', key: op.key, value: c.value ?? null }
        : { type: c.type, process: proc, node: node.name, time, ...op, ...error };
    } else {
      event = c.type === 'ok' ? { type: 'ok', process: proc, node: node.name, time, ...op } : { type: c.type, process: proc, node: node.name, time, ...op, ...error };
    }
    h.append(event);
    this.stats.byOutcome[op.op][c.type]++;
    if (c.error !== undefined) this.stats.errors[c.error] = (this.stats.errors[c.error] ?? 0) + 1;
    return c;
  }

  private get(node: Target, key: string, consistency: 'linearizable' | 'stale' = 'linearizable'): Promise<HttpResult> {
    const query = consistency === 'stale' ? '?consistency=stale' : '';
    return call(node.apiAddress, `/v1/docs/${this.opts.collection}/${encodeURIComponent(key)}${query}`, { timeoutMs: this.opts.requestTimeoutMs });
  }

  private async read(node: Target, key: string): Promise<Completion> {
    const r = await this.get(node, key, this.opts.readConsistency);
    const seen = observed(r);
    if (seen !== undefined) return { type: 'ok', value: seen.value, switchNode: false };
    return { type: 'fail', error: describe(r), switchNode: true };
  }

  private async write(node: Target, key: string, value: string): Promise<Completion> {
    const r = await this.put(node, key, value, {});
    if (r.kind === 'answer' && r.status === 200) return { type: 'ok', switchNode: false };
    return this.unsuccessfulWrite(r, false);
  }

  private async cas(node: Target, key: string, from: string | null, value: string): Promise<Completion> {
    const g = await this.get(node, key);
    const seen = observed(g);
    if (seen === undefined) return { type: 'info', error: `read for compare: ${describe(g)}`, switchNode: true };
    if (seen.value !== from) return { type: 'fail', error: 'compare: another value', switchNode: false };
    const precondition: Record<string, string> = seen.rev === undefined ? { 'if-none-match': '*' } : { 'if-match': String(seen.rev) };
    const r = await this.put(node, key, value, precondition);
    if (r.kind === 'answer' && r.status === 200) return { type: 'ok', switchNode: false };
    if (r.kind === 'answer' && r.status === 412 && r.code === 'precondition_failed') {
      return { type: 'fail', error: r.code, switchNode: false };
    }
    return this.unsuccessfulWrite(r, true);
  }

  private put(node: Target, key: string, value: string, precondition: Record<string, string>): Promise<HttpResult> {
    return call(node.apiAddress, `/v1/docs/${this.opts.collection}/${encodeURIComponent(key)}`, {
      method: 'PUT', body: { value }, timeoutMs: this.opts.requestTimeoutMs,
      headers: { 'idempotency-key': `${this.opts.runId}-reg-${value}`, ...precondition },
    });
  }

  /** A PUT that did not succeed: refused (fail, except for a cas: see the top of the file) or unknown. */
  private unsuccessfulWrite(r: HttpResult, isCas: boolean): Completion {
    const error = describe(r);
    const refused = (r.kind === 'answer' && r.status === 503 && r.code !== undefined && refusedCodes.has(r.code))
      || (r.kind === 'failure' && r.error === 'ECONNREFUSED');
    if (refused) return { type: isCas ? 'info' : 'fail', error, switchNode: true };
    // A node removed by the membership nemesis answers 410 removed until it is killed: a pending
    // write's outcome is then unknown (another member may commit it), like a 5xx.
    if (r.kind === 'answer' && r.status < 500 && r.code !== 'removed') this.stats.anomalies.push(`unexpected answer to a PUT: ${error} ${JSON.stringify(r.body)}`);
    return { type: 'info', error, switchNode: true };
  }
}

/** The register's value and the document's revision, from a GET answer; undefined if it is not one. */
function observed(r: HttpResult): { value: string | null; rev: number | undefined } | undefined {
  if (r.kind !== 'answer') return undefined;
  if (r.status === 404 && r.code === 'not_found') return { value: null, rev: undefined };
  if (r.status !== 200) return undefined;
  const value = docValue(r.body);
  const rev = docRev(r.body);
  if (value === undefined || rev === undefined) throw new Error(`a 200 GET without doc.value and rev: ${JSON.stringify(r.body)}`);
  return { value, rev };
}

function describe(r: HttpResult): string {
  return r.kind === 'failure' ? r.error : `${r.status} ${r.code ?? ''}`.trim();
}
