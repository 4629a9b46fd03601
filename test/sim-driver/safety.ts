// Checkers fed as things happen, independent of the driver's internals: election safety (at most
// one leader per term, from the nodes' leaderChange events) and state machine safety (every node
// applies the same entry at each index, and each life of a node applies indexes in increasing
// order, from what the state machine is handed).

import { createHash } from 'node:crypto';
import type { AppliedEntry } from '../../src/base/state-machine.ts';
import type { ApplyObserver } from './recording-kv.ts';

export class SafetyCheckers implements ApplyObserver {
  readonly violations: string[] = [];
  private readonly leaders = new Map<number, string>();
  /** index -> "term:digest" of the entry first applied there, and by whom. */
  private readonly appliedAt = new Map<number, { what: string; node: string }>();
  /** The last index each node applied in its current life (reset by a restore or a restart). */
  private readonly lastApplied = new Map<string, number>();
  applies = 0;

  constructor(private readonly trace: (line: string) => void) {}

  leader(node: string, term: number): void {
    const known = this.leaders.get(term);
    if (known === undefined) this.leaders.set(term, node);
    else if (known !== node) this.violations.push(`election safety: ${known} and ${node} both leaders in term ${term}`);
  }

  applied(node: string, e: AppliedEntry): void {
    this.applies++;
    const what = `${e.term}:${createHash('sha256').update(e.data).digest('hex').slice(0, 16)}`;
    this.trace(`${node} apply ${e.index} ${what}`);
    const first = this.appliedAt.get(e.index);
    if (first === undefined) this.appliedAt.set(e.index, { what, node });
    else if (first.what !== what) this.violations.push(`state machine safety: index ${e.index} applied as ${first.what} on ${first.node} but ${what} on ${node}`);
    const last = this.lastApplied.get(node);
    if (last !== undefined && e.index <= last) this.violations.push(`apply order: ${node} applied ${e.index} after ${last}`);
    this.lastApplied.set(node, e.index);
  }

  restored(node: string): void {
    this.trace(`${node} restored a snapshot`);
    this.lastApplied.delete(node);
  }

  restarted(node: string): void {
    this.lastApplied.delete(node);
  }

  get terms(): number {
    return this.leaders.size;
  }
}
