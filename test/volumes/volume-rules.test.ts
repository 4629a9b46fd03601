// Replicated volumes' rules (issue 41, src/resources/volumes.ts) and the placement pass with them
// (src/control/volume-placement.ts): the newest complete copy decides where a failed-over task
// starts; never from an older copy or an empty volume; a stale writer's increments refused; a
// returning node's later snapshots diverged, kept, never used; the last copy never dropped.

import { describe, expect, it } from 'vitest';
import { placePending } from '../../src/control/placement.ts';
import type { TaskRecord } from '../../src/resources/records.ts';
import {
  appendEra, beginEra, copyRemovalProblem, currentWriter, divergedCopies, inLine, newestComplete, nextVersion, parseVersionName, refuseIncrement, removalsOf, removeCopy, restoreEras, restoreProblem, restoreWriter, versionName, versionsToDrop,
  volumeErasMax, volumePlacement, volumeRecordSchema, volumeRefusesNode, volumesCollection, type VolumeRecord, type VolumeVersion,
} from '../../src/resources/volumes.ts';
import { serviceYaml, StateBuilder } from '../control/state-builder.ts';

const v = (seq: number, node: string, epoch: number): VolumeVersion => ({ seq, node, epoch });
const held = (node: string, version: VolumeVersion) => ({ node, version, atMs: 0 });
const rec = (over: Partial<VolumeRecord> = {}): VolumeRecord => ({
  name: 'pgdata', service: 'db', copies: 2, everyMs: 30_000, sizeBytes: 1 << 30, eras: [], held: [], lastError: null, ...over,
});
// node1 wrote s1..s3 in epoch 0; node2 holds s1..s3, node3 only s1 and s2.
const written = rec({
  eras: [{ node: 'node1', epoch: 0, fromSeq: 1, base: null }],
  held: [held('node2', v(1, 'node1', 0)), held('node2', v(2, 'node1', 0)), held('node2', v(3, 'node1', 0)), held('node3', v(1, 'node1', 0)), held('node3', v(2, 'node1', 0))],
});

describe('versions', () => {
  it('are named s<seq>-e<epoch>-<node>, and read back', () => {
    expect(versionName(v(12, 'node-a', 3))).toBe('s12-e3-node-a');
    expect(parseVersionName('s12-e3-node-a')).toEqual(v(12, 'node-a', 3));
    for (const bad of ['s0-e1-a', 'x12-e3-a', 's1-e1-', 's1-e-1-a', 's01-e1-a']) expect(parseVersionName(bad)).toBeNull();
  });

  it('continue across writers: the next era starts past every seq held, its first version one past the base', () => {
    const era = beginEra(written, 'node2', 5);
    expect(era).toEqual({ node: 'node2', epoch: 5, fromSeq: 4, base: v(3, 'node1', 0) });
    if (era === null) throw new Error('no era');
    expect(nextVersion(era, [1, 2, 3])).toEqual(v(4, 'node2', 5));
    expect(nextVersion(era, [1, 2, 3, 4, 5])).toEqual(v(6, 'node2', 5));
    expect(beginEra({ ...written, eras: [...written.eras, era] }, 'node2', 5)).toBeNull();
  });

  it('the record schema takes what the rules write', () => {
    expect(volumeRecordSchema.parse(written)).toEqual(written);
  });
});

describe('placement by the newest complete copy', () => {
  it('a volume never started may go anywhere, empty', () => {
    expect(volumePlacement(rec())).toEqual({ kind: 'any' });
    expect(volumeRefusesNode(rec(), 'node9')).toBeNull();
  });

  it('after its writer is lost, only on a holder of the newest complete copy (or the writer\'s node, restarting in place)', () => {
    expect(newestComplete(written)).toEqual(v(3, 'node1', 0));
    expect(volumePlacement(written)).toEqual({ kind: 'nodes', nodes: ['node1', 'node2'], version: v(3, 'node1', 0) });
    // node3 holds only s2: it is never started from that older copy.
    expect(volumeRefusesNode(written, 'node3')).toBe('volume pgdata: only node1, node2 hold its newest complete copy (s3-e0-node1)');
    expect(volumeRefusesNode(written, 'node2')).toBeNull();
  });

  it('a writer with no copy anywhere is the only place: never an empty start elsewhere', () => {
    const lonely = rec({ eras: [{ node: 'node1', epoch: 0, fromSeq: 1, base: null }] });
    expect(volumePlacement(lonely)).toEqual({ kind: 'nodes', nodes: ['node1'], version: null });
    expect(volumeRefusesNode(lonely, 'node2')).toMatch(/only node1 holds its data \(no complete copy yet\)/);
  });

  it('restored empty by the operator (no era), it may go anywhere again, and every old copy is diverged', () => {
    const emptied = { ...written, eras: [] };
    expect(volumePlacement(emptied)).toEqual({ kind: 'any' });
    expect(divergedCopies(emptied)).toHaveLength(written.held.length);
    expect(beginEra(emptied, 'node3', 2)).toEqual({ node: 'node3', epoch: 2, fromSeq: 4, base: null });
  });
});

describe('after a failover', () => {
  const era = beginEra(written, 'node2', 5) ?? (() => { throw new Error('no era'); })();
  // node2 took over from s3 and wrote s4 (held by node3); node1 comes back with s4 of its own,
  // taken after its last send, and reports what it holds.
  const after = rec({
    eras: [...written.eras, era],
    held: [...written.held, held('node3', v(4, 'node2', 5)), held('node1', v(3, 'node1', 0)), held('node1', v(4, 'node1', 0))],
  });

  it('refuses the old writer\'s increments and takes the new writer\'s', () => {
    expect(refuseIncrement(after, { node: 'node1', epoch: 0 }, v(4, 'node1', 0))).toMatch(/^stale_epoch: node1 \(epoch 0\) is not the writer of volume pgdata \(node2, epoch 5 is\)/);
    // The same node with its new epoch is no writer either until an era says so.
    expect(refuseIncrement(after, { node: 'node1', epoch: 1 }, v(4, 'node1', 1))).toMatch(/^stale_epoch/);
    expect(refuseIncrement(after, { node: 'node2', epoch: 5 }, v(5, 'node2', 5))).toBeNull();
    // A version outside its own era (an old seq) is refused even from the writer.
    expect(refuseIncrement(after, { node: 'node2', epoch: 5 }, v(3, 'node2', 5))).toMatch(/not of the current writer's era/);
  });

  it('keeps the returning node\'s later snapshot as diverged, never the newest, never a place to start', () => {
    expect(inLine(after, v(4, 'node1', 0))).toBe(false);
    expect(divergedCopies(after)).toEqual([held('node1', v(4, 'node1', 0))]);
    expect(newestComplete(after)).toEqual(v(4, 'node2', 5));
    expect(volumeRefusesNode(after, 'node1')).toMatch(/only node2, node3 hold its newest complete copy \(s4-e5-node2\)/);
  });

  it('lets the operator remove a diverged copy, a complete one only forced, and never the last complete copy of the newest version', () => {
    expect(copyRemovalProblem(after, 'node1', v(4, 'node1', 0), false)).toBeNull();
    expect(copyRemovalProblem(after, 'node2', v(1, 'node1', 0), false)?.reason).toBe('not_diverged');
    expect(copyRemovalProblem(after, 'node2', v(1, 'node1', 0), true)).toBeNull();
    // s4 of node2 is the newest complete copy, held by node3 alone; s3 the base of node2's era, on node1 and node2.
    expect(copyRemovalProblem(after, 'node3', v(4, 'node2', 5), true)?.reason).toBe('last_complete');
    expect(copyRemovalProblem(after, 'node1', v(3, 'node1', 0), true)).toBeNull();
    const once = removeCopy(after, 'node1', v(3, 'node1', 0));
    expect(copyRemovalProblem(once, 'node2', v(3, 'node1', 0), true)?.reason).toBe('era_base');
    const removed = removeCopy(once, 'node1', v(4, 'node1', 0));
    expect(divergedCopies(removed)).toEqual([]);
    expect(removalsOf(removed, 'node1')).toEqual([v(3, 'node1', 0), v(4, 'node1', 0)]);
    expect(removalsOf(removed, 'node2')).toEqual([]);
    expect(volumeRecordSchema.safeParse(removed).success).toBe(true);
    expect(newestComplete(removed)).toEqual(v(4, 'node2', 5));
  });

  it('drops only old versions of the line, never a diverged one, never the newest complete copy', () => {
    expect(versionsToDrop(after, 'node2', 1).map(versionName)).toEqual(['s2-e0-node1', 's1-e0-node1']);
    expect(versionsToDrop(after, 'node1', 0).map(versionName)).toEqual(['s3-e0-node1']);
    expect(versionsToDrop(after, 'node3', 0).map(versionName)).toEqual(['s2-e0-node1', 's1-e0-node1']);
    const last = rec({ eras: after.eras, held: [held('node3', v(4, 'node2', 5))] });
    expect(versionsToDrop(last, 'node3', 0)).toEqual([]);
  });

  it('bounds the eras kept, never changing which copies are in the line', () => {
    let r = after;
    for (let i = 0; i < volumeErasMax + 10; i++) {
      const e = beginEra(r, `n${i}`, i) ?? (() => { throw new Error('no era'); })();
      r = { ...r, eras: appendEra(r, e) };
    }
    expect(r.eras.length).toBeLessThanOrEqual(volumeErasMax);
    expect(r.held.map((c) => inLine(r, c.version))).toEqual(after.held.map((c) => inLine(after, c.version)));
  });
});

describe('the placement pass with a replicated volume', () => {
  const svc = serviceYaml('db', 'exclusive: true\nmounts: [{type: volume, source: pgdata, target: /data, replicate: {copies: 2, every: 10s}}]').replace('replicas: 3', 'replicas: 1');
  const cluster = () => new StateBuilder().node('node1').node('node2').node('node3').service(svc).task({ id: 'd1', service: 'db', slot: 1 });
  const task = (b: StateBuilder) => b.tasks.get('d1')?.value as TaskRecord;

  it('places a new volume\'s task anywhere and begins its first era in the same plan', () => {
    const b = cluster();
    const d = placePending(b.build(), 3, 50);
    b.apply(d.plan);
    expect(d.placements).toBe(1);
    const vol = b.volumes.get('pgdata')?.value;
    expect(vol).toMatchObject({ service: 'db', copies: 2, everyMs: 10_000, eras: [{ node: task(b).nodeId, epoch: 0, fromSeq: 1, base: null }], held: [] });
    const put = d.plan.changes.find((c) => c.collection === volumesCollection);
    expect(put?.expect).toEqual({ absent: true });
  });

  it('fails over only to the holder of the newest complete copy, writing the new era against the record\'s revision', () => {
    const b = cluster().volume(written);
    const n1 = b.nodes.get('node1');
    if (n1) n1.value = { ...n1.value, state: 'down', epoch: 1 };
    const before = b.volumes.get('pgdata')?.rev;
    const d = placePending(b.build(), 3, 50);
    expect(d.plan.changes.find((c) => c.collection === volumesCollection)?.expect).toEqual({ rev: before });
    b.apply(d.plan);
    expect(task(b).nodeId).toBe('node2');
    expect(b.volumes.get('pgdata')?.value.eras.at(-1)).toEqual({ node: 'node2', epoch: 0, fromSeq: 4, base: v(3, 'node1', 0) });
  });

  it('keeps a replacement task on the writer\'s node while that node is up and active (never moved onto an older copy)', () => {
    // node3 writes; node1 and node2 hold its newest version (the scheduler alone would pick node1: ties go to the smallest id).
    const v3 = v(3, 'node3', 0);
    const byNode3 = rec({ eras: [{ node: 'node3', epoch: 0, fromSeq: 1, base: null }], held: [held('node1', v3), held('node2', v3)] });
    const b = cluster().volume(byNode3);
    const d = placePending(b.build(), 3, 50);
    b.apply(d.plan);
    expect(task(b).nodeId).toBe('node3');
    // A restart on the writer's node in the same epoch begins no era.
    expect(d.plan.changes.some((c) => c.collection === volumesCollection)).toBe(false);
    const drained = cluster().volume(byNode3);
    const n3 = drained.nodes.get('node3');
    if (n3) n3.value = { ...n3.value, availability: 'drain' };
    drained.apply(placePending(drained.build(), 3, 50).plan);
    expect(task(drained).nodeId).toBe('node1');
    expect(drained.volumes.get('pgdata')?.value.eras.at(-1)).toEqual({ node: 'node1', epoch: 0, fromSeq: 4, base: v3 });
  });

  it('stays pending, saying why, when no node that may run it holds the newest copy', () => {
    const b = cluster().volume(written);
    for (const id of ['node1', 'node2']) {
      const n = b.nodes.get(id);
      if (n) n.value = { ...n.value, state: 'down', epoch: 1 };
    }
    const d = placePending(b.build(), 3, 50);
    expect(d.placements).toBe(0);
    expect(d.plan.changes.some((c) => c.collection === volumesCollection)).toBe(false);
    b.apply(d.plan);
    expect(task(b).nodeId).toBeNull();
    expect(task(b).pendingReason).toBe('1 node without volume pgdata\'s data (its newest complete copy s3-e0-node1 is on node1, node2 only) (n3); 2 nodes down (n1, n2)');
  });
});

describe('an operator\'s restore (restoreEras)', () => {
  it('cuts the line after the version: later copies diverged, the version the newest, only its holders may take the task, the next era restores it', () => {
    const after = { ...written, eras: restoreEras(written, v(2, 'node1', 0)) };
    expect(newestComplete(after)).toEqual(v(2, 'node1', 0));
    expect(divergedCopies(after).map((c) => versionName(c.version))).toEqual(['s3-e0-node1']);
    expect(currentWriter(after)?.node).toBe(restoreWriter);
    // The restore's era is nobody's: node1 (the writer before) may take the task only if it holds the copy.
    expect(volumePlacement(after)).toEqual({ kind: 'nodes', nodes: ['node2', 'node3'], version: v(2, 'node1', 0) });
    const era = beginEra(after, 'node3', 7);
    expect(era).toEqual({ node: 'node3', epoch: 7, fromSeq: 4, base: v(2, 'node1', 0) });
  });

  it('restores a diverged version by making it the line, and empty by clearing the eras (any node, nothing in line)', () => {
    const old = { ...written, eras: [...written.eras, { node: 'node2', epoch: 1, fromSeq: 3, base: v(2, 'node1', 0) }] };
    expect(inLine(old, v(3, 'node1', 0))).toBe(false);
    const back = { ...old, eras: restoreEras(old, v(3, 'node1', 0)) };
    expect(inLine(back, v(3, 'node1', 0))).toBe(true);
    expect(newestComplete(back)).toEqual(v(3, 'node1', 0));
    const empty = { ...written, eras: restoreEras(written, null) };
    expect(volumePlacement(empty)).toEqual({ kind: 'any' });
    expect(newestComplete(empty)).toBeNull();
    expect(beginEra(empty, 'node3', 2)).toEqual({ node: 'node3', epoch: 2, fromSeq: 4, base: null });
  });

  it('is refused for a version no node holds, naming the newest complete one', () => {
    expect(restoreProblem(written, v(3, 'node1', 0))).toBeNull();
    expect(restoreProblem(written, v(9, 'node1', 0))).toMatch(/no node holds version s9-e0-node1 of volume pgdata completely .*the newest complete is s3-e0-node1/);
  });
});
