// One simulated machine: its disk, its state machine, and the running core when it is up. What a
// client is waiting for (proposals, reads) lives here too and is forgotten when the node crashes.

import type { RawNode } from '../../src/raft/raw-node.ts';
import type { MemoryStorage } from '../../src/raft/storage.ts';
import type { NodeId, ReadState, Role } from '../../src/raft/types.ts';
import type { LogView } from './checkers/events.ts';
import { SimDisk } from './disk.ts';
import { HashChainStateMachine } from './state-machine.ts';

export type NodeState = 'up' | 'crashed' | 'stopped';
export type CrashPoint = 'beforePersist' | 'afterPersist';

export class SimNode {
  raw: RawNode | null = null;
  state: NodeState = 'up';
  /** Incremented at every restart; checkers track per-life properties with it. */
  life = 0;
  readonly disk = new SimDisk();
  sm = HashChainStateMachine.initial(0);
  /** After a restart with applied = 0: entries up to here are already in the state machine. */
  replayUpTo = 0;
  /** Client proposals accepted here and not yet applied here, by payload. */
  readonly pending = new Set<string>();
  /** Read states waiting for the state machine to catch up. */
  reads: ReadState[] = [];
  /** Crash at this point of the next Ready. */
  crashArm: CrashPoint | null = null;
  crashArmedAt = 0;
  restartAt = 0;
  /** Index of the applied configuration that no longer lists this node; 0 while it is a member. */
  removedAt = 0;
  /** Tick at which a removed node is stopped; -1 when none is planned. */
  stopAt = -1;
  /** Was ever in an applied configuration (so leaving it means it was removed). */
  everMember = false;
  // Last observed status.
  role: Role = 'follower';
  term = 0;
  commit = 0;
  leader: NodeId = '';

  readonly log: LogView;

  constructor(readonly id: NodeId, readonly createdAtTick: number) {
    const disk = this.disk;
    this.log = {
      termAt: (index: number) => termAt(disk.live, index),
      lastIndex: () => disk.live.lastIndex(),
    };
  }

  isUp(): boolean {
    return this.state === 'up' && this.raw !== null;
  }
}

/** The term at `index` in the storage, or undefined when compacted or beyond the end. */
export function termAt(s: MemoryStorage, index: number): number | undefined {
  if (index < s.firstIndex() - 1 || index > s.lastIndex()) return undefined;
  return s.term(index);
}
