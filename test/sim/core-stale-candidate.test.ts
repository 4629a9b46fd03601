// A liveness failure the simulator found (seed 701291, PreVote off): after a majority
// replacement the cluster sat in the joint configuration voters [n4,n5], outgoing [n1,n2]. The
// leader n2 had appended entries that the others lacked when the joint split cut it off, so
// after the heal n2 alone could be elected, and it needed the votes of all three others. They
// could win nobody's vote but kept timing out first, and each of their vote requests, at a newer
// term, restarted n2's election timer: for 350 ticks no leader, nothing committed.
//
// Raft restarts a follower's timer when it grants a vote or hears from the leader (paper
// Figure 2), not when a request it refuses raises its term. With that, the node that can win
// campaigns on its own schedule, whatever the others do. docs/raft.md tells the whole story.

import { describe, expect, it } from 'vitest';
import { SeededPrng } from '../../src/raft/prng.ts';
import { RawNode } from '../../src/raft/raw-node.ts';
import { bootstrapStorage, MemoryStorage } from '../../src/raft/storage.ts';
import type { Message } from '../../src/raft/types.ts';
import { runSeed } from './run-seed.ts';

const et = 10;
const ids = ['n1', 'n2', 'n4', 'n5'] as const;

interface Peer {
  raw: RawNode;
  storage: MemoryStorage;
}

function cluster(): Map<string, Peer> {
  const peers = new Map<string, Peer>();
  ids.forEach((id, i) => {
    const storage = new MemoryStorage();
    bootstrapStorage(storage, ['n1', 'n2'], ['n4', 'n5']);
    const raw = new RawNode({ id, prng: new SeededPrng(i + 1), electionTimeoutTicks: et, preVote: false }, storage);
    peers.set(id, { raw, storage });
  });
  return peers;
}

/** Handles Readies and delivers messages (except those `drop` rejects) until all is quiet. */
function pump(peers: Map<string, Peer>, drop: (m: Message) => boolean = () => false): void {
  for (let round = 0; round < 100; round++) {
    const inbox: Message[] = [];
    for (const p of peers.values()) {
      while (p.raw.hasReady()) {
        const rd = p.raw.ready();
        if (rd.snapshot) p.storage.applySnapshot(rd.snapshot);
        p.storage.append(rd.entries);
        if (rd.hardState) p.storage.setHardState(rd.hardState);
        inbox.push(...rd.messages.filter((m) => !drop(m)));
        p.raw.advance(rd);
      }
    }
    if (inbox.length === 0) return;
    for (const m of inbox) peers.get(m.to)?.raw.step(m);
  }
  throw new Error('cluster did not quiesce');
}

function node(peers: Map<string, Peer>, id: string): RawNode {
  const p = peers.get(id);
  if (p === undefined) throw new Error(`no ${id}`);
  return p.raw;
}

describe('candidates that cannot win (found by the simulator)', () => {
  it('do not keep the one node that can win in a joint configuration from being elected', () => {
    const peers = cluster();
    node(peers, 'n2').campaign();
    pump(peers);
    node(peers, 'n2').proposeConfChange({
      changes: [{ type: 'addVoter', node: 'n4' }, { type: 'addVoter', node: 'n5' }, { type: 'removeNode', node: 'n1' }, { type: 'removeNode', node: 'n2' }],
      autoLeave: false,
    });
    pump(peers);
    for (const id of ids) expect(node(peers, id).confState()).toMatchObject({ voters: ['n4', 'n5'], votersOutgoing: ['n1', 'n2'] });

    // n2 appends an entry nobody else receives and is cut off until it has stepped down (its
    // quorum check) and the others have tried, and failed, to elect one of them without it.
    const cutOff = (m: Message): boolean => m.from === 'n2' || m.to === 'n2';
    node(peers, 'n2').propose(new Uint8Array([1]));
    for (let t = 0; t < 3 * et; t++) {
      for (const id of ids) node(peers, id).tick();
      pump(peers, cutOff);
    }
    const newest = node(peers, 'n2').status().lastIndex;
    for (const id of ['n1', 'n4', 'n5']) expect(node(peers, id).status().lastIndex).toBe(newest - 1);
    for (const id of ids) expect(node(peers, id).status().role).not.toBe('leader');

    // Every half election timeout one of the others campaigns: it times out first, every round.
    let ticks = 0;
    for (; ticks < 4 * et && node(peers, 'n2').status().role !== 'leader'; ticks++) {
      if (ticks % (et / 2) === 0) node(peers, ['n1', 'n4', 'n5'][(ticks / (et / 2)) % 3] as string).campaign();
      pump(peers);
      for (const id of ids) node(peers, id).tick();
      pump(peers);
    }
    expect(node(peers, 'n2').status().role).toBe('leader');
    expect(ticks).toBeLessThan(2 * et);

    // And the joint configuration commits again, with both majorities.
    node(peers, 'n2').propose(new Uint8Array([2]));
    pump(peers);
    const leaderLast = node(peers, 'n2').status().lastIndex;
    for (const id of ids) expect(node(peers, id).status().commit).toBe(leaderLast);
  });

  it('seed 701291 recovers', () => {
    expect(runSeed(701291).failure).toBeUndefined();
  });
});
