// Incremental volume streams in backups on real btrfs (issue 43, format 4): a holder's volume
// engine with 50 MiB of random data; a backup holds its whole `btrfs send` stream; after a small
// change, the next backup asks the holder (versionStream, what GET .../stream?parent= runs) for
// an increment on the version the first backup holds, and stores only about the change, naming
// its parent; restored from the second backup onto a fresh data directory, the volume holds the
// second's content (the whole stream received first, then the increment on it). A holder that no
// longer has the parent version sends the whole stream, and the backup says so.
// Needs root, loop devices and btrfs-progs (npm run test:setup); run under the machine lock.
// Prints the sizes it measured (docs/operations.md, "Backups").

import { createHash, randomBytes } from 'node:crypto';
import { appendFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { versionStream } from '../../src/api/volume-routes.ts';
import { readBackup } from '../../src/cli/restore.ts';
import { receiveVolumes } from '../../src/cli/restore-volumes.ts';
import { VolumeEngine } from '../../src/executor/volumes/volume-engine.ts';
import { BackupRunner, type VolumeStreamSource } from '../../src/node/backup/backup-runner.ts';
import { volumesCollection, type VolumeVersion } from '../../src/resources/volumes.ts';
import { backupNode, backupWorld, quietLog } from '../support/backup-fixture.ts';

const size = 160 * 1024 * 1024;
const dataBytes = 50 * 1024 * 1024;
const vol = 'data';
const v = (seq: number): VolumeVersion => ({ seq, node: 'n1', epoch: 1 });
const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

let base: string;
let holder: VolumeEngine;
let restored: VolumeEngine | undefined;

beforeAll(async () => {
  base = await mkdtemp(join(tmpdir(), 'shoal-backup-chain-'));
  holder = new VolumeEngine(join(base, 'holder'));
});

afterAll(async () => {
  await holder.unmount(vol).catch(() => undefined);
  await restored?.unmount(vol).catch(() => undefined);
  await rm(base, { recursive: true, force: true });
});

describe('incremental volume streams in backups, on btrfs', () => {
  const { store, put, target, rawPrivate } = backupWorld();
  const hold = (seq: number): void => put(volumesCollection, vol, {
    name: vol, service: 'db', copies: 1, everyMs: 1000, sizeBytes: size, eras: [{ node: 'n1', epoch: 1, fromSeq: 1, base: null }], held: [{ node: 'n1', version: v(seq), atMs: 1 }], lastError: null,
  });
  // The holder's side of GET /v1/volumes/NAME/versions/VERSION/stream?parent=..., on this node's engine.
  const source: VolumeStreamSource = async (_node, name, version, _max, parent) => {
    const made = await versionStream(holder, 'n1', name, version, parent);
    const body = holder.body(made);
    body.once('close', () => { void holder.release(made); });
    return { parent: made.parent, body };
  };
  let day = 1;
  const backup = async (seq: number) => {
    hold(seq);
    const at = Date.UTC(2026, 11, day++, 12);
    return await new BackupRunner({ node: backupNode, store, clusterId: 'c1', version: 'test', log: quietLog, volumeStream: source, now: () => at }).run('nas');
  };

  it('the second backup is a small increment naming its parent; restored from it, the volume holds the second\'s content', async () => {
    const root = join(base, 'target');
    target(root, { encrypt: true, keepDaily: 7, keepWeekly: 0 });

    await holder.prepareLive(vol, size, null);
    await writeFile(join(holder.livePath(vol), 'blob'), randomBytes(dataBytes));
    await holder.snapshot(vol, v(1));
    const r1 = await backup(1);
    expect(r1.volumes[0]).toMatchObject({ version: 's1-e1-n1', parent: null });

    // A small change: 5 bytes appended, a small file written.
    await appendFile(join(holder.livePath(vol), 'blob'), 'hello');
    await writeFile(join(holder.livePath(vol), 'note'), 'second backup');
    await holder.snapshot(vol, v(2));
    const r2 = await backup(2);
    const full = r1.volumes[0]?.bytes ?? 0;
    const inc = r2.volumes[0]?.bytes ?? 0;
    console.log(`btrfs send of a 160 MiB volume with 50 MiB of random data: whole ${full} bytes; after appending 5 bytes and writing a 13-byte file, the increment ${inc} bytes (stored ${r1.bytes} and ${r2.bytes} bytes in all, encrypted)`);
    expect(full).toBeGreaterThan(dataBytes);
    expect(inc).toBeLessThan(64 * 1024);
    expect(r2.volumes[0]).toMatchObject({ version: 's2-e1-n1', parent: { backupId: r1.id, version: 's1-e1-n1' } });
    const manifest = JSON.parse(await readFile(join(root, r2.id, 'manifest.json'), 'utf8')) as { format: number; volumes: { parent?: unknown }[] };
    expect(manifest.format).toBe(4);
    expect(manifest.volumes[0]?.parent).toEqual({ backupId: r1.id, version: 's1-e1-n1' });

    // Restore from the second: the first's whole stream, then the increment on it.
    const back = await readBackup(root, { 'password-stdin': false }, r2.id, rawPrivate);
    try {
      expect(back.volumes[0]?.streams.map((s) => [s.backupId, s.version, s.parent])).toEqual([[r1.id, 's1-e1-n1', null], [r2.id, 's2-e1-n1', 's1-e1-n1']]);
      await receiveVolumes(join(base, 'restored'), back.volumes);
    } finally {
      await back.close();
    }
    restored = new VolumeEngine(join(base, 'restored'));
    await restored.ensure(vol, size);
    expect(await restored.versions(vol)).toEqual([v(2)]);
    await restored.prepareLive(vol, size, v(2));
    const live = restored.livePath(vol);
    expect(sha(await readFile(join(live, 'blob')))).toBe(sha(await readFile(join(holder.livePath(vol), 'blob'))));
    expect(await readFile(join(live, 'note'), 'utf8')).toBe('second backup');
    await restored.unmount(vol);
  }, 120_000);

  it('a holder that no longer has the parent version sends the whole stream, and the backup records it whole', async () => {
    await holder.drop(vol, v(1));
    await holder.drop(vol, v(2));
    await writeFile(join(holder.livePath(vol), 'note'), 'third backup');
    await holder.snapshot(vol, v(3));
    const r3 = await backup(3);
    expect(r3.volumes[0]).toMatchObject({ version: 's3-e1-n1', parent: null });
    expect(r3.volumes[0]?.bytes).toBeGreaterThan(dataBytes);
  }, 120_000);
});
