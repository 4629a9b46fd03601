// The backup format and its store on a directory target: sealing (plain and encrypted to the
// recovery key), the manifest, verify naming the damaged file, atomic writes (a partial backup is
// never listed and is cleared by the next write), and retention (daily and weekly).

import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, writeFileSync, readFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  backupIdOf, backupsToKeep, decodeManifest, encodeManifest, manifestName, openBackupFile, partialPrefix, sealBackup, storeFileName, volumeStreamFileName, type BackupContent,
} from '../../src/node/backup/backup-format.ts';
import { rewriteVolumeRecords } from '../../src/cli/restore-volumes.ts';
import { DocumentStore, encodeCommand } from '../../fsm/index.ts';
import { newestComplete, volumePlacement, volumeRecordSchema, volumesCollection, type VolumeRecord } from '../../src/resources/volumes.ts';
import { listBackups, pruneBackups, verifyBackup, writeBackup } from '../../src/node/backup/backup-store.ts';
import { DirTargetIo } from '../../src/node/backup/target-io.ts';
import { rawPublicKey } from '../../src/resources/secret-crypto.ts';

const dirs: string[] = [];
afterEach(() => { for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true }); });
function tmp(): string {
  const d = mkdtempSync(path.join(tmpdir(), 'shoal-backup-'));
  dirs.push(d);
  return d;
}

function content(at: Date, index: number): BackupContent {
  return {
    id: backupIdOf(at, index), clusterId: 'c-old', featureLevel: 6, createdAt: at.getTime(), index, term: 3, writtenBy: 'test',
    files: [{ name: storeFileName, bytes: Buffer.from(`the store at ${index}`) }, { name: 'keys.json', bytes: Buffer.from('{"keys":[]}') }],
  };
}

describe('backup format', () => {
  it('ids sort by time and name the index', () => {
    expect(backupIdOf(new Date('2026-12-06T14:00:05.123Z'), 42)).toBe('20261206T140005Z-000000000042');
  });

  it('a plain backup lists each file with its size and sha256; the manifest round-trips', () => {
    const s = sealBackup(content(new Date('2026-12-06T14:00:00Z'), 7), null);
    expect(s.manifest.encryption).toBeNull();
    expect(s.manifest.files.map((f) => [f.name, f.bytes])).toEqual([[storeFileName, 14], ['keys.json', 11]]);
    expect(s.manifest.volumes).toEqual([]);
    const back = decodeManifest(encodeManifest(s.manifest));
    expect('manifest' in back && back.manifest).toEqual(s.manifest);
    expect(decodeManifest(Buffer.from('{"format":2}'))).toHaveProperty('problem');
  });

  it('an encrypted backup opens only with the recovery key, and only under its own name', () => {
    const recovery = generateKeyPairSync('x25519');
    const other = generateKeyPairSync('x25519');
    const pub = { id: '0123456789abcdef', publicKey: rawPublicKey(recovery.publicKey).toString('base64') };
    const c = content(new Date('2026-12-06T14:00:00Z'), 9);
    const s = sealBackup(c, pub);
    expect(s.manifest.encryption?.recoveryKeyId).toBe(pub.id);
    const stored = s.files[0]?.bytes ?? new Uint8Array();
    expect(Buffer.from(stored).includes(Buffer.from('the store'))).toBe(false);
    expect(Buffer.from(openBackupFile(s.manifest, storeFileName, stored, recovery.privateKey)).toString()).toBe('the store at 9');
    expect(() => openBackupFile(s.manifest, storeFileName, stored, other.privateKey)).toThrow();
    expect(() => openBackupFile(s.manifest, 'keys.json', stored, recovery.privateKey)).toThrow();
    expect(() => openBackupFile(s.manifest, storeFileName, stored, undefined)).toThrow(/recovery key/);
  });
});

describe('backup format 2: replicated volumes', () => {
  const stream = Buffer.from('btrfs-stream-bytes');
  const withVolumes = (at: Date, index: number): BackupContent => ({
    ...content(at, index),
    files: [...content(at, index).files, { name: volumeStreamFileName(0), bytes: stream }],
    volumes: [
      { name: 'Data_1', service: 'db', sizeBytes: 1 << 27, copies: 2, everyMs: 1000, version: 's5-e2-n2', file: volumeStreamFileName(0) },
      { name: 'empty', service: 'cache', sizeBytes: 1 << 27, copies: 1, everyMs: 1000, version: null, file: null },
    ],
  });

  it('a backup with volumes is format 2, its stream checksummed and encrypted like any file; one without stays format 1', () => {
    const recovery = generateKeyPairSync('x25519');
    const pub = { id: '0123456789abcdef', publicKey: rawPublicKey(recovery.publicKey).toString('base64') };
    const s = sealBackup(withVolumes(new Date('2026-12-06T14:00:00Z'), 7), pub);
    expect(s.manifest.format).toBe(2);
    expect(s.manifest.volumes.map((v) => [v.name, v.version, v.file])).toEqual([['Data_1', 's5-e2-n2', 'volume-1.stream'], ['empty', null, null]]);
    const stored = s.files.find((f) => f.name === 'volume-1.stream')?.bytes ?? new Uint8Array();
    expect(s.manifest.files.find((f) => f.name === 'volume-1.stream')?.bytes).toBe(stored.length);
    expect(Buffer.from(stored).includes(stream)).toBe(false);
    expect(Buffer.from(openBackupFile(s.manifest, 'volume-1.stream', stored, recovery.privateKey))).toEqual(stream);
    const back = decodeManifest(encodeManifest(s.manifest));
    expect('manifest' in back && back.manifest).toEqual(s.manifest);
    expect(sealBackup(content(new Date('2026-12-06T14:00:00Z'), 7), null).manifest.format).toBe(1);
  });

  it('refuses a newer format by name, volumes in format 1, and a volume whose stream is not among the files', () => {
    const m = sealBackup(withVolumes(new Date('2026-12-06T14:00:00Z'), 7), null).manifest;
    const problem = (x: unknown): string => {
      const r = decodeManifest(Buffer.from(JSON.stringify(x)));
      return 'problem' in r ? r.problem : '';
    };
    expect(problem({ ...m, format: 5 })).toMatch(/format 5, written by shoal test; this release reads formats 1 to 4/);
    expect(problem({ ...m, files: m.files.map((f) => ({ ...f, encoding: 'chunked' })) })).toMatch(/only an encrypted backup of format 3 has chunked files/);
    expect(problem({ ...m, format: 1 })).toMatch(/volumes: format 1 lists no volumes/);
    expect(problem({ ...m, files: m.files.filter((f) => f.name !== 'volume-1.stream') })).toMatch(/volume-1.stream is not among the files/);
    expect(problem({ ...m, volumes: [{ ...m.volumes[0], file: null }] })).toMatch(/both a version and a file, or neither/);
  });

  it('a restore rewrites each volume record: the backed-up version, held by the new node alone, is the newest complete copy', () => {
    const store = new DocumentStore();
    const old: VolumeRecord = {
      name: 'Data_1', service: 'db', copies: 2, everyMs: 1000, sizeBytes: 1 << 27,
      eras: [{ node: 'n1', epoch: 1, fromSeq: 1, base: null }, { node: 'n2', epoch: 2, fromSeq: 4, base: { seq: 3, node: 'n1', epoch: 1 } }],
      held: [{ node: 'n3', version: { seq: 5, node: 'n2', epoch: 2 }, atMs: 1 }, { node: 'n1', version: { seq: 3, node: 'n1', epoch: 1 }, atMs: 1 }],
      lastError: null,
    };
    const put = (id: string, doc: unknown, index: number): void => {
      store.apply({ index, term: 1, data: encodeCommand({ cmd: { op: 'put', collection: volumesCollection, id, doc: doc as Record<string, never> }, ts: 1, principal: 't' }), featureLevel: 10 });
    };
    put('Data_1', old, 1);
    put('empty', { ...old, name: 'empty', service: 'cache' }, 2);
    const m = sealBackup(withVolumes(new Date('2026-12-06T14:00:00Z'), 2), null).manifest;
    const out = rewriteVolumeRecords(store.snapshot(), 2, m.volumes, 'new-node', 99);
    expect(out.index).toBe(4);
    const after = new DocumentStore();
    after.restore(out.app);
    const rec = volumeRecordSchema.parse(after.get(volumesCollection, 'Data_1')?.doc);
    expect(newestComplete(rec)).toEqual({ seq: 5, node: 'n2', epoch: 2 });
    expect(rec.held).toEqual([{ node: 'new-node', version: { seq: 5, node: 'n2', epoch: 2 }, atMs: 99 }]);
    expect(volumePlacement(rec)).toEqual({ kind: 'nodes', nodes: ['new-node'], version: { seq: 5, node: 'n2', epoch: 2 } });
    const empty = volumeRecordSchema.parse(after.get(volumesCollection, 'empty')?.doc);
    expect(volumePlacement(empty)).toEqual({ kind: 'any' });
  });
});

describe('backups on a directory target', () => {
  it('writes, lists and verifies a backup; a damaged or missing file is named', async () => {
    const root = tmp();
    const io = new DirTargetIo(root);
    const s = sealBackup(content(new Date('2026-12-06T14:00:00Z'), 7), null);
    const id = await writeBackup(io, s.manifest, s.files);
    expect(readdirSync(root)).toEqual([id]);
    expect((await listBackups(io)).map((b) => b.id)).toEqual([id]);
    const good = await verifyBackup(io, id, true);
    expect(good.ok).toBe(true);
    expect(good.files?.get(storeFileName)?.toString()).toBe('the store at 7');

    const file = path.join(root, id, storeFileName);
    const bytes = readFileSync(file);
    bytes[3] = (bytes[3] ?? 0) ^ 1;
    writeFileSync(file, bytes);
    const bad = await verifyBackup(io, id);
    expect(bad.ok).toBe(false);
    expect(bad.problems).toEqual([{ file: `${id}/${storeFileName}`, problem: expect.stringMatching(/sha256/) }]);

    rmSync(path.join(root, id, 'keys.json'));
    expect((await verifyBackup(io, id)).problems.map((p) => p.file)).toEqual([`${id}/${storeFileName}`, `${id}/keys.json`]);
    expect((await verifyBackup(io, '20990101T000000Z-000000000001')).problems[0]?.problem).toMatch(/no such backup/);
  });

  it('a partial backup is never listed, and a later write removes it once it is hours old', async () => {
    const root = tmp();
    const io = new DirTargetIo(root);
    const s = sealBackup(content(new Date('2026-12-06T14:00:00Z'), 7), null);
    // A write cut off before the rename: the files and even the manifest, under the partial name.
    mkdirSync(path.join(root, `${partialPrefix}${s.manifest.id}`));
    writeFileSync(path.join(root, `${partialPrefix}${s.manifest.id}`, manifestName), encodeManifest(s.manifest));
    // A directory under an id's name without a manifest is listed as damaged, never as good.
    mkdirSync(path.join(root, '20261205T000000Z-000000000001'));
    const listed = await listBackups(io);
    expect(listed.map((b) => [b.id, b.manifest === undefined])).toEqual([['20261205T000000Z-000000000001', true]]);
    expect(listed[0]?.problem).toMatch(/manifest.json: missing/);

    // An hour later it may be another node's write in progress: left alone.
    const s2 = sealBackup(content(new Date('2026-12-06T15:00:00Z'), 8), null);
    await writeBackup(io, s2.manifest, s2.files);
    expect(readdirSync(root).sort()).toEqual([`${partialPrefix}${s.manifest.id}`, '20261205T000000Z-000000000001', s2.manifest.id]);
    // Seven hours later it is what a cut-off write left: removed.
    const s3 = sealBackup(content(new Date('2026-12-06T21:00:00Z'), 9), null);
    await writeBackup(io, s3.manifest, s3.files);
    expect(readdirSync(root).sort()).toEqual(['20261205T000000Z-000000000001', s2.manifest.id, s3.manifest.id]);
  });

  it('a write that fails leaves nothing listed', async () => {
    const root = tmp();
    const io = new DirTargetIo(root);
    const s = sealBackup(content(new Date('2026-12-06T14:00:00Z'), 7), null);
    // The same file twice: the second open (wx) fails after the first was written.
    await expect(writeBackup(io, s.manifest, [...s.files, s.files[0] ?? { name: 'x', bytes: new Uint8Array() }])).rejects.toThrow();
    expect(readdirSync(root)).toEqual([]);
    expect(await listBackups(io)).toEqual([]);
  });

  it('retention keeps the newest of each of the last N days and weeks', async () => {
    const ids: string[] = [];
    // Two a day, 2026-11-01 (a Sunday) to 2026-12-06 (a Sunday).
    for (let d = 0; d < 36; d++) {
      for (const h of [3, 15]) ids.push(backupIdOf(new Date(Date.UTC(2026, 10, 1 + d, h)), d * 2 + (h === 15 ? 1 : 0) + 1));
    }
    const keep = backupsToKeep(ids, { keepDaily: 7, keepWeekly: 4 });
    const days = [...keep].map((id) => id.slice(0, 8)).sort();
    // The last 7 days (11-30 to 12-06), and the newest of each of 4 ISO weeks: the Sundays 12-06
    // (in the dailies), 11-29, 11-22, 11-15.
    expect(days).toEqual(['20261115', '20261122', '20261129', '20261130', '20261201', '20261202', '20261203', '20261204', '20261205', '20261206']);
    for (const id of keep) expect(id.slice(9, 11)).toBe('15');
    expect(backupsToKeep(ids, { keepDaily: 0, keepWeekly: 0 }).size).toBe(1);

    const root = tmp();
    const io = new DirTargetIo(root);
    for (const [i, at] of ['2026-12-04T10:00:00Z', '2026-12-05T10:00:00Z', '2026-12-05T11:00:00Z', '2026-12-06T10:00:00Z'].entries()) {
      const s = sealBackup(content(new Date(at), i + 1), null);
      await writeBackup(io, s.manifest, s.files);
    }
    // Another cluster's backup on the same target (the one this cluster was restored from): never pruned here.
    const other = sealBackup({ ...content(new Date('2026-12-01T10:00:00Z'), 99), clusterId: 'c-other' }, null);
    await writeBackup(io, other.manifest, other.files);
    const { removed } = await pruneBackups(io, 'c-old', (all) => backupsToKeep(all, { keepDaily: 2, keepWeekly: 0 }));
    expect(removed).toEqual(['20261204T100000Z-000000000001', '20261205T100000Z-000000000002']);
    expect(readdirSync(root).sort()).toEqual([other.manifest.id, '20261205T110000Z-000000000003', '20261206T100000Z-000000000004']);
  });
});
