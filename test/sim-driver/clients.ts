// Clients of the simulated cluster: each writes unique values and makes linearizable reads
// (readBarrier, then the local state machine) on random live nodes, through the driver's public
// API, and records a register history for test/faults/linearizability.ts. Times in the history
// are a counter of events, so no two events tie.

import { KvStateMachine } from '../node/kv-state-machine.ts';
import type { SeededPrng } from '../../src/raft/prng.ts';
import type { HistoryEvent } from '../faults/history.ts';
import type { World } from './world.ts';
import { ShoalError } from '../../src/errors.ts';

/** Codes with which the driver says a write was certainly not applied (src/node/raft-node.ts). */
const notAppliedCodes = new Set(['no_leader', 'proposal_dropped', 'overloaded', 'feature_not_enabled', 'bad_request', 'stale_term']);

function describe(err: unknown): string {
  return err instanceof ShoalError ? err.code : (err as Error).message;
}

/** An event before its time is stamped (distributes over the union). */
type Untimed<T> = T extends unknown ? Omit<T, 'time'> : never;

export interface Ack {
  key: string;
  value: string;
  index: number;
  node: string;
}

export class Clients {
  readonly history: HistoryEvent[] = [];
  readonly acks: Ack[] = [];
  private stopped = false;
  private running = 0;
  private nextProcess = 0;
  private eventTime = 0;
  counts = { ok: 0, fail: 0, info: 0 };

  constructor(private readonly world: World, private readonly prng: SeededPrng) {}

  start(): void {
    for (let c = 0; c < this.world.scenario.clients; c++) void this.client(c);
  }

  stop(): void {
    this.stopped = true;
  }

  get idle(): boolean {
    return this.running === 0;
  }

  private async client(c: number): Promise<void> {
    this.running++;
    let process = this.nextProcess++;
    let n = 0;
    const s = this.world.scenario;
    while (!this.stopped) {
      await new Promise((r) => setTimeout(r, this.prng.nextInt(s.thinkMs + 1)));
      const up = this.world.up();
      if (this.stopped || up.length === 0) continue;
      const m = up[this.prng.nextInt(up.length)];
      if (m === undefined) continue;
      const key = `k${this.prng.nextInt(s.keys)}`;
      const outcome = this.prng.chance(s.readRate) ? await this.read(process, m.id, key) : await this.write(process, m.id, key, `c${c}.${n++}`);
      if (outcome === 'info') process = this.nextProcess++;
    }
    this.running--;
  }

  /** One write; 'info' when its outcome is unknown (the process id must then change). */
  async write(process: number, node: string, key: string, value: string): Promise<'ok' | 'fail' | 'info'> {
    const m = this.world.members.get(node);
    if (m?.node === undefined) return 'fail';
    this.record({ type: 'invoke', process, key, op: 'write', value, node });
    let pending;
    try {
      pending = m.node.propose(KvStateMachine.encode({ op: 'put', key, value }));
    } catch (err) {
      // Refused before it reached the core: nothing was proposed.
      return this.done({ type: 'fail', process, key, op: 'write', value, node, error: describe(err) });
    }
    try {
      const r = await pending;
      this.acks.push({ key, value, index: r.index, node });
      return this.done({ type: 'ok', process, key, op: 'write', value, node });
    } catch (err) {
      // The driver's word that nothing was changed is taken, and so checked by the history.
      const definite = err instanceof ShoalError && notAppliedCodes.has(err.code);
      return this.done({ type: definite ? 'fail' : 'info', process, key, op: 'write', value, node, error: describe(err) });
    }
  }

  /** One linearizable read: the barrier, then the state machine of the same node. */
  async read(process: number, node: string, key: string): Promise<'ok' | 'fail' | 'info'> {
    const m = this.world.members.get(node);
    if (m?.node === undefined) return 'fail';
    const kv = m.kv;
    this.record({ type: 'invoke', process, key, op: 'read', node });
    try {
      await m.node.readBarrier();
    } catch (err) {
      return this.done({ type: 'fail', process, key, op: 'read', node, error: describe(err) });
    }
    return this.done({ type: 'ok', process, key, op: 'read', value: kv.get(key)?.value ?? null, node });
  }

  private record(u: Untimed<HistoryEvent>): void {
    const e = { ...u, time: ++this.eventTime } as HistoryEvent;
    this.history.push(e);
    const error = 'error' in e && e.error !== undefined ? ` (${e.error})` : '';
    this.world.log(`client p${e.process} ${e.type} ${e.op} ${e.key}${'value' in e ? ` ${String(e.value)}` : ''} on ${e.node ?? '?'}${error}`);
  }

  private done(e: Untimed<HistoryEvent> & { type: 'ok' | 'fail' | 'info' }): 'ok' | 'fail' | 'info' {
    this.record(e);
    this.counts[e.type]++;
    return e.type;
  }
}
