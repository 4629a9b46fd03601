// Dead member cleanup on real RaftNodes (in-memory transport and storage): the autopilot of each
// node runs its rounds; only the leader acts, removes the stopped voter once, and then keeps the
// next dead voter, which the floor of three voters needs. Waits are bounded polls, not measurements.

import { afterEach, describe, expect, it } from 'vitest';
import { DocumentStore, type JsonObject } from '../../fsm/index.ts';
import { Autopilot } from '../../src/node/autopilot.ts';
import type { Logger } from '../../src/log.ts';
import { MemoryCluster } from './memory-cluster.ts';

let cluster: MemoryCluster | undefined;
afterEach(async () => { await cluster?.stopAll(); cluster = undefined; });

async function until(what: string, cond: () => boolean, step: () => Promise<void>): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await step();
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('dead member cleanup on a running cluster', () => {
  it('the leader removes a stopped voter once, and never below autopilot.minQuorum', async () => {
    const c = new MemoryCluster({ size: 4 });
    cluster = c;
    await c.start();
    const leader = await c.waitForLeader();
    const lines: string[] = [];
    const events: Array<[string, string, JsonObject]> = [];
    const log: Logger = { debug() {}, info: (m) => lines.push(m), warn: (m) => lines.push(m), error: (m) => lines.push(m) };
    const pilots = c.nodes.map((n) => new Autopilot({
      node: n.node, store: new DocumentStore(), log, deadMemberRemoveAfterMs: 300, minQuorum: 3, record: (t, s, d) => events.push([t, s, d]),
    }));
    const round = async (): Promise<void> => { for (const p of pilots) await p.maybeRemoveDead(); };
    const [first, second] = c.nodes.filter((n) => n !== leader);
    if (first === undefined || second === undefined) throw new Error('expected followers');

    await first.node.stop();
    await until(`${first.id} removed`, () => !leader.node.confState().voters.includes(first.id), round);
    expect(leader.node.confState().voters).toHaveLength(3);
    expect(leader.node.isRemoved(first.id)).toBe(true);

    await second.node.stop();
    // (A leader elected meanwhile may first say its voters are no quorum: it has not heard them yet.)
    const heldByFloor = (l: string): boolean => l.includes('not removing dead voter') && l.includes(second.id) && l.includes('below autopilot.minQuorum (3)');
    await until(`${second.id} held by the floor`, () => lines.some(heldByFloor), round);
    for (let i = 0; i < 10; i++) await round();
    expect(leader.node.confState().voters).toContain(second.id);
    expect(events.map(([t, s]) => [t, s])).toEqual([['member.auto_removed', first.id]]);
    expect(lines.filter((l) => l.includes('removed dead voter'))).toHaveLength(1);
  });
});
