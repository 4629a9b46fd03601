// Regression test for a core bug the simulator found (seed 1086, read-linearizability, once the
// restart-membership bugs were fixed): a leader that removed itself kept serving ReadIndex reads
// on its own once the configuration had a single voter, because the single-voter fast path did
// not check that the single voter was itself. Meanwhile that voter elected itself and committed.

import { describe, expect, it } from 'vitest';
import { SeededPrng } from '../../src/raft/prng.ts';
import { RawNode } from '../../src/raft/raw-node.ts';
import { bootstrapStorage, MemoryStorage } from '../../src/raft/storage.ts';
import type { Message, ReadState } from '../../src/raft/types.ts';

interface Peer {
  raw: RawNode;
  storage: MemoryStorage;
  reads: ReadState[];
}

function peer(id: string, seed: number): Peer {
  const storage = new MemoryStorage();
  bootstrapStorage(storage, ['n1', 'n2']);
  return { raw: new RawNode({ id, prng: new SeededPrng(seed) }, storage), storage, reads: [] };
}

/** Handles Readies and delivers messages until the cluster is quiet. */
function pump(peers: Map<string, Peer>): void {
  for (let round = 0; round < 100; round++) {
    const inbox: Message[] = [];
    for (const p of peers.values()) {
      while (p.raw.hasReady()) {
        const rd = p.raw.ready();
        if (rd.snapshot) p.storage.applySnapshot(rd.snapshot);
        p.storage.append(rd.entries);
        if (rd.hardState) p.storage.setHardState(rd.hardState);
        inbox.push(...rd.messages);
        p.reads.push(...rd.readStates);
        p.raw.advance(rd);
      }
    }
    if (inbox.length === 0) return;
    for (const m of inbox) peers.get(m.to)?.raw.step(m);
  }
  throw new Error('cluster did not quiesce');
}

describe('removed leader reads (found by the simulator)', () => {
  it('a leader that removed itself does not serve reads alone', () => {
    const n1 = peer('n1', 1);
    const n2 = peer('n2', 2);
    const peers = new Map([['n1', n1], ['n2', n2]]);
    n1.raw.campaign();
    pump(peers);
    expect(n1.raw.status().role).toBe('leader');
    n1.raw.proposeConfChange({ changes: [{ type: 'removeNode', node: 'n1' }] });
    pump(peers);
    expect(n1.raw.confState().voters).toEqual(['n2']);

    // n2, now the only voter, elects itself and commits; n1 does not hear of it.
    peers.delete('n1');
    n2.raw.campaign();
    pump(peers);
    n2.raw.propose(new Uint8Array([1]));
    pump(peers);
    const committed = n2.raw.status().commit;

    n1.raw.readIndex('r1');
    pump(new Map([['n1', n1]]));
    // The bug: n1 answered at once with its own, stale, commit index.
    for (const rs of n1.reads) expect(rs.index).toBeGreaterThanOrEqual(committed);
  });
});
