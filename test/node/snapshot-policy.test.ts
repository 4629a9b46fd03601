import { describe, expect, it } from 'vitest';
import { SnapshotPolicy, type SnapshotPolicyOptions } from '../../src/node/snapshot-policy.ts';
import type { NodeStorage } from '../../src/node/node-storage.ts';
import type { StateMachine } from '../../src/base/state-machine.ts';
import { Histogram } from '../../src/base/metrics.ts';
import { decodeSnapshotData } from '../../src/node/snapshot-data.ts';

const confState = { voters: ['a'], votersOutgoing: [], learners: [], learnersNext: [], autoLeave: false };

/** A policy over a storage that records what it is asked to do. */
function harness(opts: Partial<SnapshotPolicyOptions> = {}) {
  const calls: string[] = [];
  const snapshots: { index: number; data: Uint8Array }[] = [];
  const storage = {
    log: { firstIndex: () => 1 },
    createSnapshot: async (index: number, _cs: unknown, data: Uint8Array) => { calls.push(`snapshot ${index}`); snapshots.push({ index, data }); },
    compact: async (index: number) => { calls.push(`compact ${index}`); },
  } as unknown as NodeStorage;
  const sm = { snapshot: () => new Uint8Array([7]) } as unknown as StateMachine;
  const duration = new Histogram('test_snapshot_seconds', 'test');
  let ended = 0;
  const policy = new SnapshotPolicy(
    { snapshotEntries: 10, snapshotIntervalMs: 0, snapshotEntriesMax: 100, random: () => 0, logKeepEntries: 5, ...opts },
    storage, sm, duration,
    {
      capture: () => { calls.push('capture'); return { confState, nodeState: { members: [], featureLevel: 3, removed: [] } }; },
      flushHardState: async () => { calls.push('flush'); },
      failed: (err) => { throw err; },
      ended: () => { ended++; },
    },
  );
  return { policy, calls, snapshots, duration, ended: () => ended };
}

describe('the snapshot policy', () => {
  it('snapshots once snapshotEntries entries are applied since the last one, and compacts behind it', async () => {
    const h = harness();
    h.policy.restart(0);
    h.policy.maybeStart(9);
    expect(h.policy.inProgress).toBeUndefined();
    h.policy.maybeStart(10);
    const task = h.policy.inProgress;
    expect(task).toBeDefined();
    h.policy.maybeStart(30);
    await task;
    expect(h.calls).toEqual(['capture', 'flush', 'snapshot 10', 'compact 5']);
    expect(h.policy.index).toBe(10);
    expect(h.policy.inProgress).toBeUndefined();
    expect(h.ended()).toBe(1);
    expect(h.duration.count).toBe(1);
    expect(decodeSnapshotData(h.snapshots[0]?.data ?? new Uint8Array()).featureLevel).toBe(3);
  });

  it('waits for the interval, unless the entries reach the ceiling scaled by the draw', async () => {
    const h = harness({ snapshotIntervalMs: 60_000, random: () => 0.5 });
    h.policy.restart(0);
    h.policy.maybeStart(74);
    expect(h.policy.inProgress).toBeUndefined();
    h.policy.maybeStart(75);
    expect(h.policy.inProgress).toBeDefined();
    await h.policy.inProgress;
  });

  it('counts from a snapshot received', () => {
    const h = harness();
    h.policy.restart(50);
    h.policy.maybeStart(55);
    expect(h.policy.inProgress).toBeUndefined();
    expect(h.policy.index).toBe(50);
  });
});
