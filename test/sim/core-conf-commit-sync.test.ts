// A liveness hazard the simulator found (seed 2677, with removed nodes stopped as soon as every
// running member had applied their removal): a membership change takes effect when applied, but
// the Ready that commits it may carry only a new commit index, which is written without sync.
// Remove n2 from {n1, n2}, let n1 apply it, stop n2 as an operator would, and crash n1 before
// anything else syncs: n1 comes back with the older commit index, in the old configuration,
// and waits for n2's vote forever. Syncing a Ready whose committed entries hold a membership
// change (rare, so cheap) closes the window.

import { describe, expect, it } from 'vitest';
import { SeededPrng } from '../../src/raft/prng.ts';
import { RawNode } from '../../src/raft/raw-node.ts';
import { bootstrapStorage, MemoryStorage } from '../../src/raft/storage.ts';
import type { Message, Ready } from '../../src/raft/types.ts';

describe('committing a membership change (found by the simulator)', () => {
  it('the Ready that hands out a committed membership change is synced', () => {
    const nodes = new Map<string, { raw: RawNode; storage: MemoryStorage }>();
    for (const [id, seed] of [['n1', 1], ['n2', 2]] as const) {
      const storage = new MemoryStorage();
      bootstrapStorage(storage, ['n1', 'n2']);
      nodes.set(id, { raw: new RawNode({ id, prng: new SeededPrng(seed) }, storage), storage });
    }
    const unsyncedConfCommits: Ready[] = [];
    const pump = (): void => {
      for (let round = 0; round < 100; round++) {
        const inbox: Message[] = [];
        for (const [id, p] of nodes) {
          while (p.raw.hasReady()) {
            const rd = p.raw.ready();
            p.storage.append(rd.entries);
            if (rd.hardState) p.storage.setHardState(rd.hardState);
            if (id === 'n1' && !rd.mustSync && rd.committedEntries.some((e) => e.kind === 'conf')) unsyncedConfCommits.push(rd);
            inbox.push(...rd.messages);
            p.raw.advance(rd);
          }
        }
        if (inbox.length === 0) return;
        for (const m of inbox) nodes.get(m.to)?.raw.step(m);
      }
    };
    nodes.get('n1')?.raw.campaign();
    pump();
    nodes.get('n1')?.raw.proposeConfChange({ changes: [{ type: 'removeNode', node: 'n2' }] });
    pump();
    expect(nodes.get('n1')?.raw.confState().voters).toEqual(['n1']);
    expect(unsyncedConfCommits.map((rd) => rd.committedEntries.map((e) => e.index))).toEqual([]);
  });
});
