// Regression tests for core bugs the simulator found, reduced to a few lines each. Both are
// about restarting on a log whose membership changes are newer than the storage snapshot.
//
// Found by seeds 74, 75, 96, 266, 317, 505 and 685 of the first simulator runs (liveness: a node
// restarted with `applied` past a removal still counted the removed voter, so the cluster could
// never elect a leader again).

import { describe, expect, it } from 'vitest';
import { SeededPrng } from '../../src/raft/prng.ts';
import { RawNode } from '../../src/raft/raw-node.ts';
import { bootstrapStorage, MemoryStorage } from '../../src/raft/storage.ts';
import type { ConfState } from '../../src/raft/types.ts';

/** Bootstrap {n1,n2,n3}, then: remove n3 (joint), leave joint, add n4 (joint). All committed. */
function storageWithChanges(): MemoryStorage {
  const s = new MemoryStorage();
  bootstrapStorage(s, ['n1', 'n2', 'n3']);
  s.append([
    { kind: 'conf', term: 1, index: 2, change: { changes: [{ type: 'removeNode', node: 'n3' }] } },
    { kind: 'conf', term: 1, index: 3, change: { changes: [], leaveJoint: true } },
    { kind: 'conf', term: 1, index: 4, change: { changes: [{ type: 'addVoter', node: 'n4' }] } },
  ]);
  s.setHardState({ term: 1, vote: '', commit: 4 });
  return s;
}

/** The membership a node reaches by applying entries 2..4 in order. */
function appliedInOrder(s: MemoryStorage): ConfState {
  const n = new RawNode({ id: 'n1', prng: new SeededPrng(1) }, s);
  const rd = n.ready();
  n.advance(rd);
  return n.confState();
}

const sorted = (cs: ConfState): ConfState => ({
  ...cs,
  voters: [...cs.voters].sort(), votersOutgoing: [...cs.votersOutgoing].sort(),
  learners: [...cs.learners].sort(), learnersNext: [...cs.learnersNext].sort(),
});

describe('restart membership (found by the simulator)', () => {
  it('a node restarted with applied past membership changes has those changes in effect', () => {
    const s = storageWithChanges();
    const truth = appliedInOrder(s);
    const restarted = new RawNode({ id: 'n1', prng: new SeededPrng(2), applied: 4 }, s);
    // The bug: the core took the membership from the snapshot (index 1) and never replayed the
    // changes at 2..4, which it does not hand out again either: n3 still counted as a voter.
    expect(sorted(restarted.confState())).toEqual(sorted(truth));
  });

  it('a node restarted with applied 0 on a snapshot newer than the compaction point keeps its membership', () => {
    const s = storageWithChanges();
    const truth = appliedInOrder(s);
    s.createSnapshot(4, truth, new Uint8Array(0)); // snapshot taken, log not compacted yet
    const restarted = new RawNode({ id: 'n1', prng: new SeededPrng(2) }, s);
    while (restarted.hasReady()) {
      const rd = restarted.ready();
      restarted.advance(rd);
    }
    // The bug: applied started at firstIndex - 1 (the compaction point), not at the snapshot, so
    // the changes at 2..4 were handed out and applied a second time on top of the snapshot's
    // membership, which already held them: the joint configuration was lost (outgoing [n1,n2]
    // disappeared), and a leader could then have committed with n1 and n4 alone.
    expect(sorted(restarted.confState())).toEqual(sorted(truth));
  });
});
