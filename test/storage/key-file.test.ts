// The key file that replaced LevelDB (format, log id, node metadata), the data directory's lock,
// and the move of a data directory written by the last release that had LevelDB.

import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ShoalError } from '../../src/errors.ts';
import { DiskStorage, StorageCorruptionError, storagePaths } from '../../src/storage/index.ts';
import type { Logger } from '../../src/raft/types.ts';
import { openRefused, openStorage, tempDir } from './helpers.ts';
import { KeyFile } from '../../src/storage/key-file.ts';
import { formatKey } from '../../src/storage/keys.ts';
import { packr, seal } from '../../src/storage/sealed.ts';
import { createHash } from 'node:crypto';


async function withMeta(): Promise<string> {
  const dir = await tempDir();
  const s = await openStorage(dir);
  await s.putMeta('identity', { id: 'n1' });
  await s.close();
  return dir;
}

describe('the key file', () => {
  it('keeps the metadata across restarts, replaced whole on each write, a leftover temporary file ignored', async () => {
    const dir = await withMeta();
    await writeFile(join(dir, 'storage.keys.tmp'), 'half written by a crash');
    const s = await openStorage(dir);
    expect(await s.getMeta('identity')).toEqual({ id: 'n1' });
    await s.putMeta('identity', { id: 'n2' });
    await s.close();
    const again = await openStorage(dir);
    expect(await again.getMeta('identity')).toEqual({ id: 'n2' });
    await again.close();
    expect(existsSync(join(dir, 'storage.keys.tmp'))).toBe(false);
  });

  it('a flipped bit, a cut and a foreign file refuse the start, naming the file and what to do', async () => {
    const dir = await withMeta();
    const file = join(dir, 'storage.keys');
    const good = await readFile(file);
    const flipped = Buffer.from(good);
    flipped.writeUInt8(flipped.readUInt8(20) ^ 0x10, 20);
    for (const [bytes, detail] of [
      [flipped, /checksum mismatch/],
      [good.subarray(0, good.length - 3), /truncated or appended to/],
      [Buffer.from('not a key file at all'), /does not start with the key file magic/],
    ] as const) {
      await writeFile(file, bytes);
      const err = await openRefused(dir);
      expect(err.file).toBe(file);
      expect(err.detail).toMatch(detail);
      expect(err.recovery).toMatch(/remove the node from the cluster/);
    }
  });

  it('format 1 in the key file (which only LevelDB ever held) refuses the start', async () => {
    const dir = await withMeta();
    await (await KeyFile.load(storagePaths(dir))).put([[formatKey, seal({ format: 1 })]]);
    expect((await openRefused(dir)).detail).toMatch(/says storage format 1, which only LevelDB ever held/);
  });
});

describe('the data directory lock', () => {
  it('refuses a second open while the storage is open, and allows it after close', async () => {
    const dir = await tempDir();
    const s = await openStorage(dir);
    const err: unknown = await DiskStorage.open(dir).then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(ShoalError);
    expect((err as ShoalError).code).toBe('data_dir_locked');
    expect((err as Error).message).toMatch(new RegExp(`process ${process.pid} holds .*storage\\.lock`));
    await s.close();
    expect(existsSync(join(dir, 'storage.lock'))).toBe(false);
    await (await openStorage(dir)).close();
  });

  it('refuses a lock of a living process, takes over one of a process that is gone', async () => {
    const dir = await tempDir();
    await (await openStorage(dir)).close();
    await writeFile(join(dir, 'storage.lock'), '1 someone-else\n'); // pid 1 always runs
    await expect(DiskStorage.open(dir)).rejects.toThrow(/is in use by another process \(process 1 holds/);
    const gone = Number(execFileSync('sh', ['-c', 'sh -c "echo \\$\\$"'], { encoding: 'utf8' }).trim()); // a process that has exited
    await writeFile(join(dir, 'storage.lock'), `${gone} stale\n`);
    const warned: string[] = [];
    const logger: Logger = { debug: () => {}, info: () => {}, warn: (m) => warned.push(m) };
    const s = await openStorage(dir, { logger });
    expect(warned.join()).toMatch(new RegExp(`took over the stale lock .* \\(process ${gone} no longer runs`));
    expect(readFileSync(join(dir, 'storage.lock'), 'utf8')).toMatch(new RegExp(`^${process.pid} `));
    await s.close();
  });
});

describe('a data directory written by the last release with LevelDB (test/fixtures/leveldb/current-release.tar.gz)', () => {
  const fixture = new URL('../fixtures/leveldb/', import.meta.url).pathname;
  const unpack = async (name: string): Promise<string> => {
    const dir = await tempDir();
    execFileSync('tar', ['xzf', join(fixture, name), '-C', dir]);
    return dir;
  };
  const capture = (): { logger: Logger; lines: string[] } => {
    const lines: string[] = [];
    return { lines, logger: { debug: () => {}, info: (m) => lines.push(m), warn: (m) => lines.push(`warn: ${m}`) } };
  };

  // The directory was opened by that release's storage once more after the node stopped (to
  // record current-release.json), so LevelDB had turned its log into a table: both are read.
  it('serves the same log, snapshot and log id; LevelDB stays in place, for a rollback, until a key changes', async () => {
    const expected = JSON.parse(readFileSync(join(fixture, 'current-release.json'), 'utf8')) as Record<string, unknown>;
    const dir = await unpack('current-release.tar.gz');
    const first = capture();
    const s = await openStorage(dir, { logger: first.logger });
    const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');
    const entries = s.entries(s.firstIndex(), s.lastIndex() + 1, Number.MAX_SAFE_INTEGER);
    expect({
      firstIndex: s.firstIndex(), lastIndex: s.lastIndex(), hardState: s.hardState(),
      snapshot: { meta: s.snapshot().meta, sha256: sha(s.snapshot().data) },
      entries: entries.length, entriesSha256: sha(packr.pack(entries)), logId: await s.getMeta('logId'),
    }).toEqual(expected);
    await s.close();
    expect(first.lines.join('\n')).toMatch(/copied 2 keys from the LevelDB directory .*\/log \(1 tables, 1 logs\) into .*storage\.keys; the LevelDB directory stays for a rollback/);
    expect(first.lines.join('\n')).not.toMatch(/warn:|renamed the LevelDB/);
    expect((await readFile(join(dir, 'log.id'), 'utf8')).trim()).toBe((expected.logId as { logId: string }).logId);
    const levelFiles = ['000005.ldb', '000006.log', 'CURRENT', 'LOCK', 'LOG', 'LOG.old', 'MANIFEST-000004'];
    expect((await readdir(join(dir, 'log'))).sort()).toEqual(levelFiles); // untouched: the release before reads it

    // The next start finds the same keys in both: nothing to copy, nothing renamed.
    const second = capture();
    const again = await openStorage(dir, { logger: second.logger });
    expect(second.lines.join('\n')).not.toMatch(/LevelDB/);
    // The first change of a key sets LevelDB aside before the key file changes.
    await again.putMeta('identity', { id: 'n1' });
    await again.close();
    expect(second.lines.join('\n')).toMatch(/renamed the LevelDB directory .*\/log to .*\/log\.moved \(a key changed that the release before, rolled back to, would read stale from it\)/);
    expect(existsSync(storagePaths(dir).level)).toBe(false);
    expect((await readdir(join(dir, 'log.moved'))).sort()).toEqual(levelFiles);
    const third = await openStorage(dir);
    expect(await third.getMeta('identity')).toEqual({ id: 'n1' });
    expect(third.lastIndex()).toBe(expected.lastIndex);
    await third.close();
  });

  it('a LevelDB directory changed after the copy (a rolled-back release ran) is the truth: copied again, then checked', async () => {
    const dir = await unpack('current-release.tar.gz');
    await (await openStorage(dir)).close();
    // Another log's LevelDB: its log id is not the one log.id names.
    const other = await tempDir();
    execFileSync('tar', ['xzf', new URL('../fixtures/release-0.1.0/data.tar.gz', import.meta.url).pathname, '-C', other, './log']);
    execFileSync('rm', ['-r', join(dir, 'log')]);
    execFileSync('cp', ['-r', join(other, 'log'), join(dir, 'log')]);
    const c = capture();
    const err: unknown = await DiskStorage.open(dir, { logger: c.logger }).then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(StorageCorruptionError);
    expect((err as StorageCorruptionError).detail).toMatch(/comes from another node/);
    expect(c.lines.join('\n')).toMatch(/copied the keys of the LevelDB directory .* again: they changed since the last start/);
  });

  it('a LevelDB directory beside a key file not copied from it (a recovery wrote a new storage) is renamed aside', async () => {
    const dir = await tempDir();
    await (await openStorage(dir)).close();
    const id = (await readFile(join(dir, 'log.id'), 'utf8')).trim();
    const old = await unpack('current-release.tar.gz');
    execFileSync('cp', ['-r', join(old, 'log'), join(dir, 'log')]);
    const c = capture();
    const s = await openStorage(dir, { logger: c.logger });
    expect(await s.getMeta('logId')).toEqual({ logId: id });
    await s.close();
    expect(c.lines.join('\n')).toMatch(/renamed the LevelDB directory .*\/log to .*\/log\.moved \(.*storage\.keys was not copied from it\)/);
    expect(existsSync(join(dir, 'log'))).toBe(false);
  });

  it('a damaged LevelDB table refuses the start, names the file, and changes nothing', async () => {
    const dir = await tempDir();
    execFileSync('tar', ['xzf', new URL('../fixtures/leveldb/current-release.tar.gz', import.meta.url).pathname, '-C', dir]);
    const table = join(dir, 'log', '000005.ldb');
    const b = await readFile(table);
    b.writeUInt8(b.readUInt8(10) ^ 0x04, 10);
    await writeFile(table, b);
    const before = (await readdir(dir)).sort();
    const err = await openRefused(dir);
    expect(err.file).toBe(table);
    expect(err.detail).toMatch(/LevelDB directory of an older release cannot be read to move its keys: checksum mismatch in the block at byte 0/);
    expect((await readdir(dir)).sort()).toEqual(before);
  });
});
