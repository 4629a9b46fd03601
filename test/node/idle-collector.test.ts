// The idle collector (src/node/idle-collector.ts): one collection once the node is quiet after a
// burst that grew its heap and buffers, none while it works or stays small, and a real `gc`.

import { describe, expect, it } from 'vitest';
import { exposedGc, heapAndBuffers, IdleCollector, loopUtilization } from '../../src/node/idle-collector.ts';

const MiB = 2 ** 20;

function setup() {
  const s = { busy: 0.02, memory: 100 * MiB, collected: 0, lines: [] as string[] };
  const c = new IdleCollector({
    utilization: () => s.busy, memory: () => s.memory, growthBytes: 32 * MiB,
    collect: () => { s.collected++; s.memory = 110 * MiB; }, log: { info: (m) => s.lines.push(m) },
  });
  return { s, c };
}

describe('IdleCollector', () => {
  it('collects once when the node went quiet after a burst that grew memory by the threshold, not while it works', () => {
    const { s, c } = setup();
    s.busy = 0.9; s.memory = 250 * MiB;
    c.look(); // still writing
    expect(s.collected).toBe(0);
    s.memory = 300 * MiB;
    c.look();
    expect(s.collected).toBe(0);
    s.busy = 0.03;
    c.look(); // quiet since the last look
    expect(s.collected).toBe(1);
    expect(s.lines).toEqual([expect.stringMatching(/^memory: collected after a burst of work \(300\.0 MiB of heap and buffers before, 110\.0 after, \d+ ms\)$/)]);
    c.look(); // quiet, nothing grew since: no second collection
    c.look();
    expect(s.collected).toBe(1);
    expect(c.count).toBe(1);
  });

  it('does not collect an idle node whose memory grew less than the threshold, nor counts what it gave back by itself as growth', () => {
    const { s, c } = setup();
    s.memory = 120 * MiB;
    c.look();
    c.look();
    expect(s.collected).toBe(0);
    s.memory = 60 * MiB; // V8 collected by itself
    c.look();
    s.memory = 85 * MiB; // 25 MiB over the lowest seen: under the threshold
    c.look();
    c.look();
    expect(s.collected).toBe(0);
    s.memory = 93 * MiB;
    c.look();
    expect(s.collected).toBe(1);
  });

  it('takes V8\'s own full collection without --expose-gc, and it frees unreachable objects and buffers', async () => {
    const gc = exposedGc();
    expect(exposedGc()).toBe(gc);
    const make = (): WeakRef<Buffer[]> => new WeakRef(Array.from({ length: 64 }, () => Buffer.alloc(MiB, 1)));
    const ref = make();
    // A WeakRef's target is kept until the job that made it ends.
    await new Promise((r) => setImmediate(r));
    const held = heapAndBuffers();
    gc();
    expect(ref.deref()).toBeUndefined();
    // The buffers' memory is given back as their sweeping finishes.
    for (let i = 0; i < 100 && held - heapAndBuffers() < 48 * MiB; i++) await new Promise((r) => setTimeout(r, 10));
    expect(held - heapAndBuffers()).toBeGreaterThan(48 * MiB);
  });

  it('measures the event loop busy since the previous look: near 1 while it spins, near 0 while it waits', async () => {
    const busy = loopUtilization();
    for (const end = Date.now() + 100; Date.now() < end;) { /* spin */ }
    expect(busy()).toBeGreaterThan(0.8);
    await new Promise((r) => setTimeout(r, 200));
    expect(busy()).toBeLessThan(0.3);
  });
});
