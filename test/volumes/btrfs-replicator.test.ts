// A replication pass on real btrfs (issue 41): the writer's pass takes the next version and
// sends it to its holders (whole the first time, then as increments of about the change),
// records each holder's copy, and drops its own old versions; after a failover the old writer's
// late increments are refused by the holders (the store says another node writes), and the new
// writer, restored from the newest copy, sends increments on it. Three engines stand for three
// nodes; the store's record and the mesh are in-memory ports. Needs root and btrfs-progs.

import { randomBytes } from 'node:crypto';
import { appendFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { holderPass } from '../../src/executor/volumes/holder.ts';
import { replicateOnce, type ReplicatorPorts } from '../../src/executor/volumes/replicator.ts';
import { VolumeEngine } from '../../src/executor/volumes/volume-engine.ts';
import { appendEra, beginEra, divergedCopies, newestComplete, refuseIncrement, sameVersion, versionName, type VolumeRecord } from '../../src/resources/volumes.ts';

const size = 160 * 1024 * 1024;
const vol = 'appdata';
let base: string;
const engines = new Map<string, VolumeEngine>();
let rec: VolumeRecord;

/** The ports as a node sees them; `view` is its (possibly stale) applied record. */
function ports(view: () => VolumeRecord, candidates: string[]): ReplicatorPorts {
  return {
    record: () => view(),
    holderCandidates: () => candidates,
    recordHeld: async (_name, node, version) => { rec = { ...rec, held: [...rec.held, { node, version, atMs: 0 }] }; },
    recordError: async (_name, message) => { rec = { ...rec, lastError: message === null ? null : { atMs: 0, message } }; },
    // The holder checks the sender against the store's current record, not the sender's view.
    send: (node, offer, body) => (engines.get(node) as VolumeEngine).receive(offer, size, body, () => refuseIncrement(rec, offer.sender, offer.version)),
  };
}

beforeAll(async () => {
  base = await mkdtemp(join(tmpdir(), 'shoal-replicator-'));
  for (const n of ['a', 'b', 'c']) engines.set(n, new VolumeEngine(join(base, n)));
  rec = { name: vol, service: 'app', copies: 2, everyMs: 1000, sizeBytes: size, eras: [{ node: 'a', epoch: 1, fromSeq: 1, base: null }], held: [], lastError: null };
});

afterAll(async () => {
  for (const e of engines.values()) await e.unmount(vol).catch(() => undefined);
  await rm(base, { recursive: true, force: true });
});

describe('replication passes', () => {
  const a = () => engines.get('a') as VolumeEngine;
  const b = () => engines.get('b') as VolumeEngine;
  const c = () => engines.get('c') as VolumeEngine;

  it('sends the first version whole to two holders, then increments of about the change; drops its own old versions', async () => {
    await a().prepareLive(vol, size, null);
    await writeFile(join(a().livePath(vol), 'big.bin'), randomBytes(4 * 1024 * 1024));
    const first = await replicateOnce(a(), ports(() => rec, ['b', 'c']), vol, { node: 'a', epoch: 1 });
    expect(first.failed).toEqual([]);
    expect(first.sent.map((s) => [s.node, s.parent])).toEqual([['b', null], ['c', null]]);
    expect(first.sent.every((s) => s.bytes > 4 * 1024 * 1024)).toBe(true);
    for (let i = 2; i <= 5; i++) {
      await appendFile(join(a().livePath(vol), 'log'), `${i}\n`);
      const r = await replicateOnce(a(), ports(() => rec, ['b', 'c']), vol, { node: 'a', epoch: 1 });
      expect(r.version).toEqual({ seq: i, node: 'a', epoch: 1 });
      expect(r.sent.map((s) => [s.node, s.parent?.seq])).toEqual([['b', i - 1], ['c', i - 1]]);
      expect(r.sent.every((s) => s.bytes < 64 * 1024)).toBe(true);
    }
    expect((await a().versions(vol)).map(versionName)).toEqual(['s3-e1-a', 's4-e1-a', 's5-e1-a']);
    expect((await c().versions(vol)).map(versionName)).toEqual(['s1-e1-a', 's2-e1-a', 's3-e1-a', 's4-e1-a', 's5-e1-a']);
    expect(newestComplete(rec)).toEqual({ seq: 5, node: 'a', epoch: 1 });
    expect(rec.lastError).toBeNull();
  });

  it('after a failover, the old writer\'s late pass is refused by every holder and changes no copy', async () => {
    const stale = rec;
    const era = beginEra(rec, 'b', 2);
    if (era === null) throw new Error('no era');
    rec = { ...rec, eras: appendEra(rec, era) };
    expect(era.base).toEqual({ seq: 5, node: 'a', epoch: 1 });
    await appendFile(join(a().livePath(vol), 'log'), 'late\n');
    const heldBefore = rec.held.length;
    const r = await replicateOnce(a(), ports(() => stale, ['b', 'c']), vol, { node: 'a', epoch: 1 });
    expect(r.sent).toEqual([]);
    expect(r.failed.map((f) => f.node)).toEqual(['b', 'c']);
    expect(r.failed.every((f) => /stale_epoch/.test(f.message))).toBe(true);
    expect(rec.held.length).toBe(heldBefore);
    expect(rec.lastError?.message).toMatch(/stale_epoch/);
    // With the current record, the old writer refuses to take a version at all.
    await expect(replicateOnce(a(), ports(() => rec, ['b', 'c']), vol, { node: 'a', epoch: 1 })).rejects.toMatchObject({ code: 'volume_copy_refused' });
  });

  it('the new writer restores the newest copy and sends increments on it; the returning node gets a whole copy', async () => {
    const from = rec.eras.at(-1)?.base ?? null;
    expect(await b().prepareLive(vol, size, from)).toEqual({ restored: true, setAside: null });
    expect(await readFile(join(b().livePath(vol), 'log'), 'utf8')).toBe('2\n3\n4\n5\n');
    await appendFile(join(b().livePath(vol), 'log'), '6\n');
    const r = await replicateOnce(b(), ports(() => rec, ['a', 'c']), vol, { node: 'b', epoch: 2 });
    expect(r.version).toEqual({ seq: 6, node: 'b', epoch: 2 });
    expect(r.failed).toEqual([]);
    expect(r.sent.map((s) => [s.node, s.parent === null ? null : versionName(s.parent)])).toEqual([['c', 's5-e1-a'], ['a', null]]);
    expect(r.sent[0]?.bytes).toBeLessThan(64 * 1024);
    expect(newestComplete(rec)).toEqual({ seq: 6, node: 'b', epoch: 2 });
    expect(await c().prepareLive(vol, size, { seq: 6, node: 'b', epoch: 2 })).toEqual({ restored: true, setAside: null });
    expect(await readFile(join(c().livePath(vol), 'log'), 'utf8')).toBe('2\n3\n4\n5\n6\n');
  });

  it('the returning node records what it holds: its late snapshot as diverged, kept; old versions of the line dropped, the store first', async () => {
    const forgotten: string[] = [];
    const holder = {
      record: () => rec,
      recordHeld: async (_n: string, node: string, versions: readonly { seq: number; node: string; epoch: number }[]) => {
        rec = { ...rec, held: [...rec.held, ...versions.map((version) => ({ node, version, atMs: 0 }))] };
      },
      forgetHeld: async (_n: string, node: string, versions: readonly { seq: number; node: string; epoch: number }[]) => {
        // The store forgets before the node deletes: the version is still on disk here.
        for (const v of versions) expect((await a().versions(vol)).some((l) => sameVersion(l, v))).toBe(true);
        forgotten.push(...versions.map(versionName));
        rec = { ...rec, held: rec.held.filter((c) => c.node !== node || !versions.some((v) => sameVersion(v, c.version))) };
      },
    };
    // The writer reports nothing of its own.
    expect(await holderPass(b(), holder, vol, 'b')).toEqual({ recorded: [], dropped: [] });
    // Keeping 1 version of the line (instead of 3) to see drops with few versions.
    const r = await holderPass(a(), holder, vol, 'a', 1);
    // Its own pass kept s4..s6 of its snapshots; s6-e2-b the store knew already (sent whole above).
    expect(r.recorded.map(versionName)).toEqual(['s4-e1-a', 's5-e1-a', 's6-e1-a']);
    expect(divergedCopies(rec).map((c) => `${c.node}:${versionName(c.version)}`)).toEqual(['a:s6-e1-a']);
    expect(newestComplete(rec)).toEqual({ seq: 6, node: 'b', epoch: 2 });
    // a holds s4, s5 of the line and s6-e2-b: beyond the newest, s5 and s4 go; the diverged s6-e1-a stays.
    expect(forgotten).toEqual(['s5-e1-a', 's4-e1-a']);
    expect(r.dropped.map(versionName)).toEqual(forgotten);
    expect((await a().versions(vol)).map(versionName).sort()).toEqual(['s6-e1-a', 's6-e2-b']);
  });
});
