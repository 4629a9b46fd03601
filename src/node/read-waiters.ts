// The linearizable reads waiting on a node (RaftNode.readBarrier): first for a read index from
// the core (ReadIndex, answered in a Ready's read states), then for the applied index to reach
// it. A read the core refused for want of a leader (feature level 3) waits for one and is asked
// again; so is every read still without an index when leadership moves.

import { ProposalDroppedError, type ReadState } from '../raft/types.ts';
import { ShoalError } from '../errors.ts';
import { translateDrop } from './drop-error.ts';

/** What the read waiters need of the driver. */
export interface ReadIndexAsker {
  /** Asks the core for a read index under `ctx` and wakes the loop; throws the core's refusal. */
  ask(ctx: string): void;
  /** Whether a read refused for want of a leader waits for one (feature level 3) instead of failing. */
  holdsWithoutLeader(): boolean;
}

interface Asking {
  resolve: (index: number) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout;
}

interface Waiting {
  index: number;
  resolve: (index: number) => void;
  reject: (e: Error) => void;
}

export class ReadWaiters {
  /** Reads waiting for a read index, by context. */
  private readonly asking = new Map<string, Asking>();
  /** Reads whose index is known, waiting for the applied index to reach it. */
  private waiting: Waiting[] = [];
  /** Reads the core refused for want of a leader (level 3): asked again once one is known. */
  private readonly unasked = new Set<string>();

  constructor(private readonly core: ReadIndexAsker) {}

  /** Reads waiting here, with an index or without (for the bound and the metrics). */
  get size(): number {
    return this.asking.size + this.waiting.length;
  }

  /** Asks for a read index under `ctx`; resolves with it once it is applied here. */
  wait(ctx: string, timeoutMs: number): Promise<number> {
    return new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.asking.delete(ctx);
        reject(new ShoalError('timeout', `leadership could not be confirmed within ${timeoutMs} ms`));
      }, timeoutMs);
      this.asking.set(ctx, { resolve, reject, timer });
      this.ask(ctx);
    });
  }

  /** A Ready's read states: each read named gets its index and waits for `applied` to reach it. */
  onReadStates(readStates: readonly ReadState[], applied: number): void {
    for (const rs of readStates) {
      const p = this.asking.get(rs.context);
      if (!p) continue;
      this.asking.delete(rs.context);
      clearTimeout(p.timer);
      this.waiting.push({ index: rs.index, resolve: p.resolve, reject: p.reject });
    }
    this.release(applied);
  }

  /** Resolves the reads whose index `applied` has reached. */
  release(applied: number): void {
    if (this.waiting.length === 0) return;
    const still: Waiting[] = [];
    for (const r of this.waiting) {
      if (r.index <= applied) r.resolve(r.index);
      else still.push(r);
    }
    this.waiting = still;
  }

  /** A new leader is known (level 3): every read without an index is asked again, of it. */
  askAllAgain(): void {
    this.unasked.clear();
    for (const ctx of this.asking.keys()) this.ask(ctx);
  }

  /** Leadership moved below level 3: reads without an index fail, as the first release did. */
  failUnansweredOnLeaderChange(): void {
    for (const [ctx, p] of this.asking) {
      clearTimeout(p.timer);
      p.reject(new ShoalError('leader_changed', 'leadership changed before the read was confirmed; retry'));
      this.asking.delete(ctx);
    }
  }

  /** Asks the core again for the reads it refused for want of a leader. */
  askUnasked(): void {
    if (this.unasked.size === 0) return;
    const ctxs = [...this.unasked];
    this.unasked.clear();
    for (const ctx of ctxs) if (this.asking.has(ctx)) this.ask(ctx);
  }

  /** Fails every read waiting here with `err` (a stalled disk). */
  failAll(err: Error): void {
    for (const [ctx, p] of this.asking) {
      clearTimeout(p.timer);
      p.reject(err);
      this.asking.delete(ctx);
    }
    for (const r of this.waiting) r.reject(err);
    this.waiting = [];
  }

  /** The node stopped: every read fails with `reason`, and none is asked again. */
  close(reason: Error): void {
    this.failAll(reason);
    this.unasked.clear();
  }

  /** Asks the core for a read index under `ctx`; without a leader the read waits for one (level 3). */
  private ask(ctx: string): void {
    try {
      this.core.ask(ctx);
    } catch (err) {
      const p = this.asking.get(ctx);
      if (p === undefined) return;
      if (this.core.holdsWithoutLeader() && err instanceof ProposalDroppedError && (err.reason === 'noLeader' || err.reason === 'transferInProgress')) {
        // Asked again once a leader is known (onTick, or the change of leader).
        this.unasked.add(ctx);
        return;
      }
      this.asking.delete(ctx);
      clearTimeout(p.timer);
      p.reject(translateDrop(err));
    }
  }
}
