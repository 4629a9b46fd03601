// Incremental volume streams in backups (issue 43, format 4): the manifest's parent references
// (and older formats still read), chain walks that name a missing or damaged backup, the choice
// of whole vs increment (no earlier backup, a chain too long, a parent gone, a holder that no
// longer has the parent version, nothing changed), verify and the restore's first pass following
// the chain across backups with their own data keys, and retention that never breaks a kept
// backup's chain (a property over random histories). The real btrfs path is
// test/volumes/btrfs-backup-chain.test.ts.

import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { DocumentStore } from '../../fsm/index.ts';
import {
  backupIdOf, backupsToKeep, decodeManifest, manifestName, manifestOf, type BackupManifest, type BackupVolume,
} from '../../src/node/backup/backup-format.ts';
import { chooseParent, keptForChains, volumeChain, volumeChainLinksMax, type ManifestLookup } from '../../src/node/backup/backup-chain.ts';
import { BackupRunner, type VolumeStreamSource } from '../../src/node/backup/backup-runner.ts';
import { pruneBackups, verifyBackup } from '../../src/node/backup/backup-store.ts';
import { DirTargetIo } from '../../src/node/backup/target-io.ts';
import { readBackup } from '../../src/cli/restore.ts';
import { volumesCollection, type VolumeVersion } from '../../src/resources/volumes.ts';
import { backupNode, backupWorld, quietLog, scratchDirs } from '../support/backup-fixture.ts';

const tmp = scratchDirs('shoal-backup-chain-');

const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');
const vol = { name: 'data', service: 'db', sizeBytes: 1 << 30, copies: 2, everyMs: 1000 };

/** A manifest at hour `h` of 2026-12-06 holding volume `data` as `entry` says. */
function manifest(h: number, entry: Partial<BackupVolume> & { version: string | null }, format?: number): BackupManifest {
  const at = Date.UTC(2026, 11, 6, h);
  const id = backupIdOf(new Date(at), h + 1);
  const file = entry.file === undefined ? (entry.version === null ? null : 'volume-1.stream') : entry.file;
  const files = [{ name: 'store.snap', bytes: 1, sha256: sha(Buffer.from('x')) }, ...(file === null ? [] : [{ name: file, bytes: 1, sha256: sha(Buffer.from('y')) }])];
  const m = manifestOf({ id, clusterId: 'c1', featureLevel: 6, createdAt: at, index: h + 1, term: 1, writtenBy: 'test' }, null, files, [{ ...vol, ...entry, file }]);
  return format === undefined ? m : { ...m, format } as BackupManifest;
}
const lookupOf = (ms: readonly BackupManifest[]): ManifestLookup => (id) => ms.find((m) => m.id === id) ?? { problem: 'no such backup on the target' };

describe('format 4: a volume stream that is an increment on an older backup\'s', () => {
  it('a manifest with a parent is format 4 and round-trips; one without stays the format it was', () => {
    const a = manifest(1, { version: 's1-e1-n1' });
    expect(a.format).toBe(2);
    const b = manifest(2, { version: 's2-e1-n1', parent: { backupId: a.id, version: 's1-e1-n1' } });
    expect(b.format).toBe(4);
    const back = decodeManifest(Buffer.from(JSON.stringify(b)));
    expect('manifest' in back && back.manifest).toEqual(b);
    // Unchanged since the parent: no file, the parent's version.
    const c = manifest(3, { version: 's2-e1-n1', file: null, parent: { backupId: b.id, version: 's2-e1-n1' } });
    expect(c.volumes[0]).toMatchObject({ file: null, version: 's2-e1-n1' });
  });

  it('older formats are still read; a parent in an older format, a parent not older, or an entry that contradicts itself is refused', () => {
    for (const f of [2, 3]) {
      const m = { ...manifest(1, { version: 's1-e1-n1' }), format: f };
      expect('manifest' in decodeManifest(Buffer.from(JSON.stringify(m))), `format ${f}`).toBe(true);
    }
    const a = manifest(1, { version: 's1-e1-n1' });
    const b = manifest(2, { version: 's2-e1-n1', parent: { backupId: a.id, version: 's1-e1-n1' } });
    const problem = (x: unknown): string => {
      const r = decodeManifest(Buffer.from(JSON.stringify(x)));
      return 'problem' in r ? r.problem : '';
    };
    expect(problem({ ...b, format: 3 })).toMatch(/a volume with a parent is format 4/);
    expect(problem({ ...b, volumes: [{ ...b.volumes[0], parent: { backupId: b.id, version: 's1-e1-n1' } }] })).toMatch(/not older than the backup/);
    expect(problem({ ...b, volumes: [{ ...b.volumes[0], file: null }] })).toMatch(/no file, so it holds its parent's version s1-e1-n1, not s2-e1-n1/);
    expect(problem({ ...b, volumes: [{ ...b.volumes[0], parent: { backupId: a.id, version: 's2-e1-n1' } }] })).toMatch(/an increment on the version it holds/);
    expect(problem({ ...b, format: 5 })).toMatch(/format 5, written by shoal test; this release reads formats 1 to 4/);
  });
});

describe('chains', () => {
  const a = manifest(1, { version: 's1-e1-n1' });
  const b = manifest(2, { version: 's2-e1-n1', parent: { backupId: a.id, version: 's1-e1-n1' } });
  const c = manifest(3, { version: 's2-e1-n1', file: null, parent: { backupId: b.id, version: 's2-e1-n1' } });
  const d = manifest(4, { version: 's4-e1-n1', parent: { backupId: c.id, version: 's2-e1-n1' } });

  it('walks from the whole stream to the newest, an unchanged link without a file', () => {
    const chain = volumeChain(d, 'data', lookupOf([a, b, c, d]));
    expect('links' in chain && chain.links).toEqual([
      { backupId: a.id, version: 's1-e1-n1', file: 'volume-1.stream', parent: null },
      { backupId: b.id, version: 's2-e1-n1', file: 'volume-1.stream', parent: 's1-e1-n1' },
      { backupId: c.id, version: 's2-e1-n1', file: null, parent: 's2-e1-n1' },
      { backupId: d.id, version: 's4-e1-n1', file: 'volume-1.stream', parent: 's2-e1-n1' },
    ]);
  });

  it('names the backup that is missing, damaged or holds another version', () => {
    expect(volumeChain(d, 'data', lookupOf([b, c, d]))).toEqual({ problem: { backupId: a.id, problem: expect.stringMatching(/no such backup.*volume data's stream in .* is an increment on it/) } });
    expect(volumeChain(d, 'data', (id) => (id === b.id ? { problem: 'damaged (manifest.json: missing)' } : lookupOf([a, b, c, d])(id)))).toEqual({ problem: { backupId: b.id, problem: expect.stringMatching(/damaged/) } });
    const other = { ...a, volumes: [{ ...a.volumes[0], version: 's9-e1-n1' }] } as BackupManifest;
    expect(volumeChain(b, 'data', lookupOf([other, b]))).toEqual({ problem: { backupId: a.id, problem: expect.stringMatching(/holds s9-e1-n1 version of volume data, not s1-e1-n1/) } });
  });

  it('chooses whole with no earlier backup, a broken chain or one too long; unchanged for the same version; else an increment', () => {
    const all = lookupOf([a, b, c, d]);
    expect(chooseParent(null, 'data', 's5-e1-n1', all)).toMatchObject({ kind: 'whole', reason: 'no earlier backup on the target' });
    expect(chooseParent(d, 'data', 's5-e1-n1', all)).toEqual({ kind: 'increment', parent: { backupId: d.id, version: 's4-e1-n1' } });
    expect(chooseParent(d, 'data', 's4-e1-n1', all)).toEqual({ kind: 'unchanged', parent: { backupId: d.id, version: 's4-e1-n1' } });
    expect(chooseParent(d, 'data', 's5-e1-n1', lookupOf([b, c, d]))).toMatchObject({ kind: 'whole', reason: expect.stringMatching(/cannot be followed: .*no such backup/) });
    expect(chooseParent(d, 'data', 's5-e1-n1', all, 4)).toMatchObject({ kind: 'whole', reason: 'the chain would span more than 4 backups' });
    expect(chooseParent(d, 'data', 's5-e1-n1', all, 5)).toMatchObject({ kind: 'increment' });
    expect(chooseParent(manifest(5, { version: null }), 'data', 's5-e1-n1', all)).toMatchObject({ kind: 'whole', reason: expect.stringMatching(/holds no copy/) });
  });

  it('retention keeps what a kept backup\'s chain needs, and only that', () => {
    expect([...keptForChains(new Set([d.id]), lookupOf([a, b, c, d]))].sort()).toEqual([a.id, b.id, c.id]);
    expect([...keptForChains(new Set([a.id]), lookupOf([a, b, c, d]))]).toEqual([]);
  });

  it('property: after retention, every kept backup\'s chains are complete', () => {
    // A history of backups of two volumes; each is whole, unchanged, or an increment on the one before (if any).
    const step = fc.record({ kindA: fc.integer({ min: 0, max: 3 }), kindB: fc.integer({ min: 0, max: 3 }), hours: fc.integer({ min: 1, max: 60 }) });
    fc.assert(fc.property(fc.array(step, { minLength: 1, maxLength: 40 }), fc.integer({ min: 0, max: 5 }), fc.integer({ min: 0, max: 3 }), (steps, keepDaily, keepWeekly) => {
      const ms: BackupManifest[] = [];
      let at = Date.UTC(2026, 10, 1);
      let seq = 0;
      for (const s of steps) {
        at += s.hours * 3_600_000;
        const id = backupIdOf(new Date(at), ms.length + 1);
        const prev = ms.at(-1);
        const volumes = (['a', 'b'] as const).map((name, i): BackupVolume => {
          const kind = i === 0 ? s.kindA : s.kindB;
          const before = prev?.volumes.find((v) => v.name === name);
          const base = { ...vol, name };
          if (prev === undefined || before?.version === null || before === undefined || kind === 0) return { ...base, version: `s${++seq}-e1-n1`, file: `volume-${i + 1}.stream` };
          const parent = { backupId: prev.id, version: before.version };
          if (kind === 1) return { ...base, version: before.version, file: null, parent };
          return { ...base, version: `s${++seq}-e1-n1`, file: `volume-${i + 1}.stream`, parent };
        });
        const files = [{ name: 'store.snap', bytes: 1, sha256: sha(Buffer.from('x')) }, ...volumes.flatMap((v) => (v.file === null ? [] : [{ name: v.file, bytes: 1, sha256: sha(Buffer.from('y')) }]))];
        ms.push(manifestOf({ id, clusterId: 'c1', featureLevel: 6, createdAt: at, index: ms.length + 1, term: 1, writtenBy: 't' }, null, files, volumes));
      }
      const kept = backupsToKeep(ms.map((m) => m.id), { keepDaily, keepWeekly });
      const all = new Set([...kept, ...keptForChains(kept, lookupOf(ms))]);
      const after = lookupOf(ms.filter((m) => all.has(m.id)));
      for (const id of kept) {
        const m = ms.find((x) => x.id === id);
        if (m === undefined) return false;
        for (const v of m.volumes) if ('problem' in volumeChain(m, v.name, after)) return false;
      }
      return true;
    }), { numRuns: 300 });
  });
});

describe('the runner, verify and the restore\'s first pass over chains', () => {
  const node = backupNode;
  const quiet = quietLog;

  function setup(encrypt: boolean, keepDaily = 30): { root: string; store: DocumentStore; hold: (seq: number, nodes?: string[]) => void; rawPrivate: Buffer } {
    const { store, put, target, rawPrivate } = backupWorld();
    const root = tmp();
    target(root, { encrypt, keepDaily, keepWeekly: 0 });
    const hold = (seq: number, nodes = ['n2', 'n3']): void => put(volumesCollection, 'data', {
      ...vol, eras: [{ node: 'n2', epoch: 2, fromSeq: 1, base: null }], held: nodes.map((n) => ({ node: n, version: { seq, node: 'n2', epoch: 2 }, atMs: 1 })), lastError: null,
    });
    return { root, store, hold, rawPrivate };
  }

  /** A holder that has versions `held` (by seq): answers an increment on the parent asked when it has it, else whole. */
  function holder(held: () => number[], asked: { parent: string | null; from: string }[]): VolumeStreamSource {
    const v = (x: VolumeVersion): string => `s${x.seq}`;
    return async (from, _name, version, _max, parent) => {
      asked.push({ from, parent: parent === null ? null : v(parent) });
      const got = parent !== null && held().includes(parent.seq) ? parent : null;
      const text = got === null ? `whole ${v(version)} `.repeat(2000) : `${v(got)}->${v(version)}`;
      return { parent: got, body: (async function* body(): AsyncGenerator<Uint8Array> { yield Buffer.from(text); })() };
    };
  }
  const read = (root: string, id: string): BackupManifest => {
    const r = decodeManifest(readFileSync(path.join(root, id, manifestName)));
    if (!('manifest' in r)) throw new Error(r.problem);
    return r.manifest;
  };

  it('whole first, then increments on the newest backup, whole again when the holder lost the parent or the chain is long; restore reads the chain', async () => {
    const { root, store, hold, rawPrivate } = setup(true);
    let held = [1];
    const asked: { parent: string | null; from: string }[] = [];
    const source = holder(() => held, asked);
    let day = 1;
    const take = async (seq: number) => {
      hold(seq);
      held = [...held, seq];
      const at = Date.UTC(2026, 11, day++, 12);
      return await new BackupRunner({ node, store, clusterId: 'c1', version: 'test', log: quiet, volumeStream: source, now: () => at }).run('nas');
    };
    const r1 = await take(1);
    expect(r1.volumes).toEqual([{ name: 'data', version: 's1-e2-n2', bytes: expect.any(Number), parent: null }]);
    expect(asked.at(-1)).toEqual({ from: 'n2', parent: null });
    const r2 = await take(2);
    expect(asked.at(-1)).toEqual({ from: 'n2', parent: 's1' });
    expect(r2.volumes[0]).toMatchObject({ version: 's2-e2-n2', parent: { backupId: r1.id, version: 's1-e2-n2' } });
    expect(r2.volumes[0]?.bytes).toBeLessThan(r1.volumes[0]?.bytes ?? 0);
    expect(read(root, r2.id).format).toBe(4);
    // Nothing changed: nothing fetched, an entry with no file.
    const before = asked.length;
    const r3 = await take(2);
    expect(asked.length).toBe(before);
    expect(read(root, r3.id).volumes[0]).toMatchObject({ version: 's2-e2-n2', file: null, parent: { backupId: r2.id, version: 's2-e2-n2' } });
    // The holder no longer has s2: it answers whole, and the backup records it so.
    held = [];
    const r4 = await take(4);
    expect(asked.at(-1)).toEqual({ from: 'n2', parent: 's2' });
    expect(r4.volumes[0]?.parent).toBeNull();
    expect(read(root, r4.id).volumes[0]?.parent).toBeUndefined();
    // A chain of volumeChainLinksMax backups at most: the next is whole again.
    const ids: string[] = [r4.id];
    for (let seq = 5; seq < 5 + volumeChainLinksMax - 1; seq++) ids.push((await take(seq)).id);
    expect(read(root, ids.at(-1) ?? '').volumes[0]?.parent).toBeDefined();
    const rLong = await take(20);
    expect(asked.at(-1)).toEqual({ from: 'n2', parent: null });
    expect(rLong.volumes[0]?.parent).toBeNull();

    // verify and the restore's first pass follow the chain r4 .. the last increment, each backup with its own data key.
    const last = ids.at(-1) ?? '';
    const verified = await verifyBackup(new DirTargetIo(root), last);
    expect(verified).toMatchObject({ ok: true, missing: [] });
    expect(verified.chains?.get('data')?.map((l) => l.backupId)).toEqual(ids);
    const back = await readBackup(root, { 'password-stdin': false }, last, rawPrivate);
    try {
      const streams = back.volumes[0]?.streams ?? [];
      expect(streams.map((s) => [s.version, s.parent])).toEqual([['s4-e2-n2', null], ...ids.slice(1).map((_, i) => [`s${5 + i}-e2-n2`, `s${4 + i}-e2-n2`])]);
      const texts: string[] = [];
      for (const s of streams) {
        const parts: Buffer[] = [];
        for await (const c of s.open()) parts.push(c as Buffer);
        const all = Buffer.concat(parts);
        expect([all.length, sha(all)]).toEqual([s.bytes, s.sha256]);
        texts.push(all.toString().slice(0, 12));
      }
      expect(texts).toEqual(['whole s4 who', 's4->s5', 's5->s6', 's6->s7', 's7->s8', 's8->s9', 's9->s10']);
    } finally {
      await back.close();
    }
  });

  it('a backup whose chain lost a backup fails verify and restore naming it; retention keeps what a chain needs and says so', async () => {
    // keepDaily 2: by the fourth backup, the first two are past retention, but the chain of the kept ones starts at the first.
    const { root, store, hold, rawPrivate } = setup(false, 2);
    let held: number[] = [];
    const source = holder(() => held, []);
    let day = 1;
    const runner = (): BackupRunner => {
      const at = Date.UTC(2026, 11, day++, 12);
      return new BackupRunner({ node, store, clusterId: 'c1', version: 'test', log: quiet, volumeStream: source, now: () => at });
    };
    const rs = [];
    for (const seq of [1, 2, 3, 4]) {
      hold(seq);
      held = [...held, seq];
      rs.push(await runner().run('nas'));
    }
    expect(rs.map((r) => r.pruned)).toEqual([[], [], [], []]);
    expect(rs[3]?.keptForChains).toEqual([rs[0]?.id, rs[1]?.id]);
    expect(readdirSync(root).sort()).toEqual(rs.map((r) => r.id));

    // The second backup goes missing (removed by hand): verify and restore of the fourth name it.
    rmSync(path.join(root, rs[1]?.id ?? ''), { recursive: true });
    const bad = await verifyBackup(new DirTargetIo(root), rs[3]?.id ?? '');
    expect(bad).toMatchObject({ ok: false, missing: [rs[1]?.id] });
    expect(bad.problems).toEqual([{ file: rs[1]?.id, problem: expect.stringMatching(/volume data's chain needs it: no such backup/) }]);
    await expect(readBackup(root, { 'password-stdin': false }, rs[3]?.id, rawPrivate)).rejects.toMatchObject({
      code: 'backup_damaged', message: expect.stringContaining(rs[1]?.id ?? '?'), extra: { details: { missing: [rs[1]?.id] } },
    });
    // The next backup cannot follow that chain: whole. Retention keeps the fourth (a day kept) and
    // the third (its chain); the first, reachable only through the missing second, goes.
    hold(5);
    held = [...held, 5];
    const r5 = await runner().run('nas');
    expect(r5.volumes[0]?.parent).toBeNull();
    expect([r5.pruned, r5.keptForChains]).toEqual([[rs[0]?.id], [rs[2]?.id]]);
    const { removed } = await pruneBackups(new DirTargetIo(root), 'c1', (ids) => backupsToKeep(ids, { keepDaily: 1, keepWeekly: 0 }));
    expect(removed).toEqual([rs[2]?.id, rs[3]?.id]);
    expect(readdirSync(root)).toEqual([r5.id]);
  });
});
