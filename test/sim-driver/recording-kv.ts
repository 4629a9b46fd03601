// The driver tests' KvStateMachine, reporting every entry it applies and every snapshot it
// restores to the world's checkers (what the state machine sees, not the driver's internals).

import { KvStateMachine } from '../node/kv-state-machine.ts';
import type { AppliedEntry } from '../../src/base/state-machine.ts';

export interface ApplyObserver {
  applied(node: string, entry: AppliedEntry): void;
  restored(node: string): void;
}

export class RecordingKv extends KvStateMachine {
  constructor(private readonly node: string, private readonly observer: ApplyObserver) {
    super();
  }

  override apply(entry: AppliedEntry): unknown {
    this.observer.applied(this.node, entry);
    return super.apply(entry);
  }

  override restore(data: Uint8Array): void {
    super.restore(data);
    this.observer.restored(this.node);
  }
}
