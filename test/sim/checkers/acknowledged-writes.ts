// No acknowledged write is lost: once the node a client proposed to has applied the proposal (the
// client's answer), every node that reaches that index applies that same entry there.

import { Violation, type Checker, type SimEvent } from './events.ts';

interface Ack {
  digest: string;
  payload: string;
  node: string;
}

export class AcknowledgedWritesChecker implements Checker {
  readonly name = 'acknowledged-writes';
  private readonly acked = new Map<number, Ack>();
  maxAckedIndex = 0;

  observe(e: SimEvent): void {
    if (e.kind === 'ack') {
      const prior = this.acked.get(e.index);
      if (prior !== undefined && prior.digest !== e.digest) {
        throw new Violation(this.name, `index ${e.index} acknowledged as ${prior.payload} to ${prior.node} and as ${e.payload} to ${e.node}`);
      }
      this.acked.set(e.index, { digest: e.digest, payload: e.payload, node: e.node });
      if (e.index > this.maxAckedIndex) this.maxAckedIndex = e.index;
      return;
    }
    if (e.kind !== 'apply' && e.kind !== 'reapply') return;
    const ack = this.acked.get(e.index);
    if (ack !== undefined && ack.digest !== e.digest) {
      throw new Violation(this.name, `write ${ack.payload} acknowledged by ${ack.node} at index ${e.index} is lost: ${e.node} applied another entry there`);
    }
  }

  acknowledged(): number {
    return this.acked.size;
  }
}
