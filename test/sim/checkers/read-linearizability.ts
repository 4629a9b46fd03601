// ReadIndex linearizability: the index a read is served at covers every write acknowledged, and
// every entry known committed anywhere, before the read was issued; and the read is served only
// once the node has applied up to that index.

import { Violation, type Checker, type SimEvent } from './events.ts';

interface Issued {
  node: string;
  minIndex: number;
}

export class ReadLinearizabilityChecker implements Checker {
  readonly name = 'read-linearizability';
  private readonly issued = new Map<string, Issued>();
  private maxAcked = 0;
  private maxCommitted = 0;

  observe(e: SimEvent): void {
    switch (e.kind) {
      case 'ack':
        if (e.index > this.maxAcked) this.maxAcked = e.index;
        return;
      case 'settled':
        if (e.commit > this.maxCommitted) this.maxCommitted = e.commit;
        return;
      case 'readIssue':
        this.issued.set(e.context, { node: e.node, minIndex: Math.max(this.maxAcked, this.maxCommitted) });
        return;
      case 'readState': {
        const r = this.issued.get(e.context);
        if (r === undefined || r.node !== e.node) {
          throw new Violation(this.name, `${e.node} got read state ${e.context} that it never issued`);
        }
        if (e.index < r.minIndex) {
          throw new Violation(this.name, `read ${e.context} on ${e.node} got index ${e.index}, but ${r.minIndex} was committed before it was issued`);
        }
        return;
      }
      case 'readServed':
        if (e.applied < e.index) throw new Violation(this.name, `read ${e.context} served at applied ${e.applied} below its index ${e.index}`);
        return;
      default:
        return;
    }
  }
}
