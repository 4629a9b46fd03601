// Log time (feature level 2): stamped by the leader from its monotonic clock, so a node whose
// wall clock is a day ahead cannot expire the cluster's idempotency records.

import { afterEach, describe, expect, it } from 'vitest';
import { DocumentStore, encodeCommand, type Stamped } from '../../fsm/index.ts';
import type { CommandResult } from '../../fsm/types.ts';
import { featureLevelMax } from '../../src/base/feature-level.ts';
import { LogClock } from '../../src/node/log-clock.ts';
import { MemoryCluster, type TestNode } from './memory-cluster.ts';
import { waitFor } from '../transport/helpers.ts';

const dayMs = 24 * 60 * 60 * 1000;

let cluster: MemoryCluster | undefined;
afterEach(async () => {
  await cluster?.stopAll();
  cluster = undefined;
});

function put(id: string, ts: number, key?: string): Uint8Array {
  const s: Stamped = { cmd: { op: 'put', collection: 'c', id, doc: { v: id } }, ts, principal: 'p', ...(key !== undefined ? { idempotencyKey: key } : {}) };
  return encodeCommand(s);
}

const storeOf = (n: TestNode): DocumentStore => n.sm as DocumentStore;

async function run(level: number | undefined): Promise<{ leader: TestNode; skewed: TestNode; c: MemoryCluster }> {
  const c = new MemoryCluster({ stateMachine: () => new DocumentStore({ idempotencyWindowMs: 60 * 60 * 1000 }), featureLevelMax: () => level });
  cluster = c;
  await c.start();
  const leader = await c.waitForLeader();
  if (level !== undefined) await Promise.all(c.nodes.map((n) => waitFor('the level', () => n.node.featureLevel === level)));
  return { leader, skewed: c.follower(leader), c };
}

describe('log time', () => {
  it('is not pushed forward by a follower whose clock is a day ahead (level 2)', async () => {
    const { leader, skewed, c } = await run(featureLevelMax);
    const first = (await leader.node.propose(put('a', Date.now(), 'k1'))).result as CommandResult;
    expect(first.ok).toBe(true);
    await skewed.node.propose(put('b', Date.now() + dayMs));
    for (const n of c.nodes) {
      await n.node.readBarrier();
      expect(Math.abs(storeOf(n).logTimeMs - Date.now())).toBeLessThan(60_000);
    }
    // The idempotency record made before is still there: the retry is answered from it.
    const retry = (await leader.node.propose(put('a', Date.now(), 'k1'))).result as CommandResult;
    expect(retry).toMatchObject({ ok: true, replayed: true });
  });

  it('was pushed a day ahead by such a follower in the first release (level 1), as documented', async () => {
    const { leader, skewed, c } = await run(undefined);
    await leader.node.propose(put('a', Date.now(), 'k1'));
    await skewed.node.propose(put('b', Date.now() + dayMs));
    const retry = (await leader.node.propose(put('a', Date.now(), 'k1'))).result as CommandResult;
    expect(retry).toMatchObject({ ok: true });
    expect(retry).not.toHaveProperty('replayed');
    for (const n of c.nodes) {
      await n.node.readBarrier();
      expect(storeOf(n).logTimeMs).toBeGreaterThan(Date.now() + dayMs - 60_000);
    }
  });

  it('is the same on every node, and never goes back across a leader change', async () => {
    const { leader, c } = await run(featureLevelMax);
    for (let i = 0; i < 10; i++) await leader.node.propose(put(`k${i}`, Date.now()));
    await Promise.all(c.nodes.map((n) => n.node.readBarrier()));
    const before = storeOf(leader).logTimeMs;
    await leader.node.transferLeadership();
    const next = await c.waitForLeader();
    await next.node.propose(put('after', Date.now()));
    await Promise.all(c.nodes.map((n) => n.node.readBarrier()));
    const times = c.nodes.map((n) => storeOf(n).logTimeMs);
    expect(new Set(times).size).toBe(1);
    expect(times[0]).toBeGreaterThanOrEqual(before);
  });
});

describe('LogClock', () => {
  it('counts from the applied log time with the monotonic clock, and from the wall clock only when none was ever stamped', () => {
    const c = new LogClock();
    expect(c.now(0)).toBeUndefined();
    c.start(5_000, 100, 9_999_999);
    expect(c.now(100)).toBe(5_000);
    expect(c.now(350.7)).toBe(5_250);
    c.stop();
    expect(c.now(400)).toBeUndefined();
    c.start(0, 10, 1_700_000_000_000);
    expect(c.now(20)).toBe(1_700_000_000_010);
  });
});
