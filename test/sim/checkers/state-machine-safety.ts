// State machine safety (Raft §5.4.3): once a node has applied an entry at an index, no node ever
// applies a different entry at that index. Also checked: each node applies indexes in order with
// no gap and no repeat, and every state (after applying index i, or restored from a snapshot at
// i) has the same digest on every node.

import { Violation, type Checker, type SimEvent } from './events.ts';

export class StateMachineSafetyChecker implements Checker {
  readonly name = 'state-machine-safety';
  private readonly entryAt: string[] = [];
  private readonly stateAt: string[] = [];
  private readonly applied = new Map<string, number>();

  observe(e: SimEvent): void {
    switch (e.kind) {
      case 'restore': return this.onRestore(e.node, e.life, e.index, e.stateDigest, e.reason);
      case 'apply': return this.onApply(e.node, e.life, e.index, e.digest, e.stateDigest);
      case 'reapply': return this.expectEntry(e.node, e.index, e.digest);
      default: return;
    }
  }

  private onRestore(node: string, life: number, index: number, stateDigest: string, reason: 'boot' | 'snapshot'): void {
    const key = `${node}#${life}`;
    const prev = this.applied.get(key);
    if (reason === 'snapshot' && prev !== undefined && index < prev) {
      throw new Violation(this.name, `${node} was handed a snapshot at ${index} after applying up to ${prev}`);
    }
    this.applied.set(key, index);
    this.expectState(node, index, stateDigest);
  }

  private onApply(node: string, life: number, index: number, digest: string, stateDigest: string): void {
    const key = `${node}#${life}`;
    const prev = this.applied.get(key);
    if (prev !== undefined && index !== prev + 1) {
      throw new Violation(this.name, `${node} applied index ${index} right after ${prev}`);
    }
    this.applied.set(key, index);
    this.expectEntry(node, index, digest);
    this.expectState(node, index, stateDigest);
  }

  private expectEntry(node: string, index: number, digest: string): void {
    const known = this.entryAt[index];
    if (known === undefined) this.entryAt[index] = digest;
    else if (known !== digest) throw new Violation(this.name, `${node} applied entry ${digest} at index ${index}, another node applied ${known}`);
  }

  private expectState(node: string, index: number, stateDigest: string): void {
    const known = this.stateAt[index];
    if (known === undefined) this.stateAt[index] = stateDigest;
    else if (known !== stateDigest) throw new Violation(this.name, `${node} has state ${stateDigest} at index ${index}, another node had ${known}`);
  }
}
