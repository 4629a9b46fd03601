// Volume streams in backups, never whole in memory (issue 43): the `chunked` encryption (round
// trip, a cut, a swapped chunk, another file name or backup, an empty file), the streaming reads
// and writes of the directory and S3 targets, and a 64 MiB volume stream backed up through the
// runner and read back by the restore's first pass and its receive stream, with the live heap
// (after a GC) growing by a few MiB, far below the stream's size.

import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ChunkOpener, ChunkSealer, chunkedStoredBytes, chunkPlainBytes, chunkRecordBytes, through, WholeOpener, type ByteStep } from '../../src/node/backup/backup-chunks.ts';
import { decodeManifest, manifestName, openBackupFile, openDataKey, openSeal, sealBackup, storeFileName } from '../../src/node/backup/backup-format.ts';
import { BackupRunner, type VolumeStreamSource } from '../../src/node/backup/backup-runner.ts';
import { listBackups, verifyBackup, writeBackupFiles } from '../../src/node/backup/backup-store.ts';
import { S3TargetIo } from '../../src/node/backup/s3-io.ts';
import { DirTargetIo } from '../../src/node/backup/target-io.ts';
import { readBackup } from '../../src/cli/restore.ts';
import { rawPublicKey } from '../../src/resources/secret-crypto.ts';
import { volumesCollection } from '../../src/resources/volumes.ts';
import { exposedGc, heapAndBuffers } from '../../src/node/idle-collector.ts';
import { S3SigV4Server } from '../support/s3-sigv4-server.ts';
import { backupNode, backupWorld, quietLog, scratchDirs } from '../support/backup-fixture.ts';

const tmp = scratchDirs('shoal-backup-stream-');

const key = randomBytes(32);
const id = '20261206T140000Z-000000000007';
const run = (step: ByteStep, input: Uint8Array, piece = 100_003): Buffer => {
  const out: Buffer[] = [];
  for (let at = 0; at < input.length; at += piece) out.push(...step.push(input.subarray(at, at + piece)));
  out.push(...step.end());
  return Buffer.concat(out);
};
const seal = (plain: Uint8Array, file = 'volume-1.stream'): Buffer => run(new ChunkSealer(key, id, file), plain);
const open = (stored: Uint8Array, file = 'volume-1.stream', backup = id): Buffer => run(new ChunkOpener(key, backup, file), stored, 77_777);

describe('the chunked encryption', () => {
  it('round-trips any length, in chunks of 1 MiB, whatever the pieces it is pushed in', () => {
    for (const n of [1, 1000, chunkPlainBytes - 1, chunkPlainBytes, chunkPlainBytes + 1, 3 * chunkPlainBytes + 12_345]) {
      const plain = randomBytes(n);
      const stored = seal(plain);
      expect(stored.length, `${n} bytes`).toBe(chunkedStoredBytes(n));
      // The plaintext does not show through (checked on 16 bytes or more: a shorter random run turns up in any ciphertext by chance; one byte did, one run in ten).
      if (n >= 16) expect(stored.includes(plain.subarray(0, 64))).toBe(false);
      expect(open(stored).equals(plain), `${n} bytes`).toBe(true);
    }
  });

  it('an empty file is one empty final chunk; an empty stored file is refused', () => {
    const stored = seal(new Uint8Array(0));
    expect(stored.length).toBe(28);
    expect(open(stored).length).toBe(0);
    expect(() => open(new Uint8Array(0))).toThrow(/chunk 0 .*cut short/);
  });

  it('refuses a file cut at a chunk boundary or inside a chunk', () => {
    const stored = seal(randomBytes(3 * chunkPlainBytes + 10));
    expect(() => open(stored.subarray(0, 3 * chunkRecordBytes))).toThrow(/chunk 2 does not open/);
    expect(() => open(stored.subarray(0, 2 * chunkRecordBytes))).toThrow(/chunk 1 does not open/);
    expect(() => open(stored.subarray(0, stored.length - 1))).toThrow(/chunk 3 does not open/);
    expect(() => open(stored.subarray(0, chunkRecordBytes + 20))).toThrow(/chunk 1 .*cut short/);
  });

  it('refuses swapped chunks, a flipped bit, another file name and another backup', () => {
    const plain = randomBytes(3 * chunkPlainBytes);
    const stored = seal(plain);
    const r = (i: number): Buffer => stored.subarray(i * chunkRecordBytes, (i + 1) * chunkRecordBytes);
    expect(() => open(Buffer.concat([r(1), r(0), r(2)]))).toThrow(/chunk 0 does not open/);
    // The last two swapped: each is full size, so only the final flag and the index tell.
    expect(() => open(Buffer.concat([r(0), r(2), r(1)]))).toThrow(/chunk 1 does not open/);
    const flipped = Buffer.from(stored);
    flipped[chunkRecordBytes + 500] = (flipped[chunkRecordBytes + 500] ?? 0) ^ 1;
    expect(() => open(flipped)).toThrow(/chunk 1 does not open/);
    expect(() => open(stored, 'volume-2.stream')).toThrow(/chunk 0 does not open/);
    expect(() => open(stored, 'volume-1.stream', '20261206T140000Z-000000000008')).toThrow(/chunk 0 does not open/);
  });

  it('a backup\'s seal hands out nothing once its data key is forgotten', async () => {
    const recovery = generateKeyPairSync('x25519');
    const s = openSeal(id, { id: '0123456789abcdef', publicKey: rawPublicKey(recovery.publicKey).toString('base64') });
    const { body, encoding } = s.stream('volume-1.stream', pieces(3 * chunkPlainBytes, 65_536));
    expect(encoding).toBe('chunked');
    const it = body[Symbol.asyncIterator]();
    expect((await it.next()).value?.length).toBe(chunkRecordBytes);
    s.close();
    await expect(it.next()).rejects.toThrow(/data key was forgotten/);
    expect(() => s.whole(storeFileName, Buffer.from('x'))).toThrow(/forgotten/);
  });

  it('reads a whole-file (format 2) encrypted file as it flows, and refuses a changed tag', () => {
    const recovery = generateKeyPairSync('x25519');
    const plain = randomBytes(300_000);
    const s = sealBackup({ id, clusterId: 'c1', featureLevel: 1, createdAt: 0, index: 7, term: 1, writtenBy: 'test', files: [{ name: storeFileName, bytes: plain }] },
      { id: '0123456789abcdef', publicKey: rawPublicKey(recovery.publicKey).toString('base64') });
    const stored = s.files[0]?.bytes ?? new Uint8Array();
    expect(Buffer.from(openBackupFile(s.manifest, storeFileName, stored, recovery.privateKey)).equals(plain)).toBe(true);
    expect(s.manifest.format).toBe(1);
    // The same file through the streaming opener, with the data key the manifest seals.
    const dataKey = openDataKey(s.manifest, recovery.privateKey) ?? Buffer.alloc(32);
    expect(run(new WholeOpener(dataKey, id, storeFileName), stored, 4096).equals(plain)).toBe(true);
    const changed = Buffer.from(stored);
    changed[changed.length - 1] = (changed[changed.length - 1] ?? 0) ^ 1;
    expect(() => run(new WholeOpener(dataKey, id, storeFileName), changed, 4096)).toThrow(/does not open/);
    expect(() => run(new WholeOpener(dataKey, id, 'keys.json'), stored, 4096)).toThrow(/does not open/);
    expect(() => run(new WholeOpener(dataKey, id, storeFileName), stored.subarray(0, 20))).toThrow(/shorter than an IV and a tag/);
  });
});

async function* pieces(total: number, piece: number, fill: (i: number) => number = (i) => i & 255): AsyncGenerator<Uint8Array> {
  for (let at = 0, i = 0; at < total; at += piece, i++) yield Buffer.alloc(Math.min(piece, total - at), fill(i));
}

async function collect(body: AsyncIterable<Uint8Array> | undefined): Promise<Buffer> {
  const out: Buffer[] = [];
  for await (const c of body ?? []) out.push(Buffer.from(c));
  return Buffer.concat(out);
}

describe('streaming reads and writes of a target', () => {
  it('a directory: written and read back as it flows; absent is undefined; larger than expected is refused', async () => {
    const root = tmp();
    const io = new DirTargetIo(root);
    await io.makeDir('d');
    await io.writeStream('d', 'f', pieces(3_000_000, 65_536));
    const back = await collect(await io.readStream('d', 'f', 3_000_000));
    expect(back.equals(await collect(pieces(3_000_000, 65_536)))).toBe(true);
    expect(await io.readStream('d', 'none', 10)).toBeUndefined();
    await expect(io.readStream('d', 'f', 2_999_999)).rejects.toThrow(/more than the 2999999 expected/);
    await expect(io.writeStream('d', 'f', pieces(1, 1))).rejects.toThrow();
  });

  it('a source that fails midway fails the backup, and nothing is listed or left behind', async () => {
    const root = tmp();
    const io = new DirTargetIo(root);
    async function* failing(): AsyncGenerator<Uint8Array> {
      yield Buffer.alloc(1000, 1);
      throw new Error('the holder went away');
    }
    const header = { id, createdAt: Date.UTC(2026, 11, 6, 14) };
    await expect(writeBackupFiles(io, header, [{ name: storeFileName, bytes: Buffer.from('s') }, { name: 'volume-1.stream', body: failing() }], () => {
      throw new Error('no manifest may be made');
    })).rejects.toThrow(/the holder went away/);
    expect(readdirSync(root)).toEqual([]);
    expect(await listBackups(io)).toEqual([]);
  });

  it('S3: a file larger than a part goes up in parts (multipart, one part in memory), a small one in one PUT; read back as it flows', async () => {
    const server = new S3SigV4Server({ keys: { AK: 'SK' }, buckets: ['b'] });
    const url = new URL(await server.start());
    try {
      const io = new S3TargetIo({ protocol: 'http:', host: url.host, bucket: 'b', prefix: 'p' }, { accessKeyId: 'AK', secretKey: 'SK', region: 'us-east-1' });
      const total = 12 * 1024 * 1024 + 5;
      await io.writeStream(id, 'volume-1.stream', pieces(total, 100_000));
      expect(server.refusals).toEqual([]);
      expect(server.largestBodyBytes).toBeLessThan(6 * 1024 * 1024);
      expect(server.uploads.size).toBe(0);
      const back = await collect(await io.readStream(id, 'volume-1.stream', total));
      expect(back.length).toBe(total);
      expect(createHash('sha256').update(back).digest('hex')).toBe(createHash('sha256').update(await collect(pieces(total, 100_000))).digest('hex'));
      await expect(io.readStream(id, 'volume-1.stream', total - 1)).rejects.toThrow(/more than the/);
      expect(await io.readStream(id, 'nothing', 10)).toBeUndefined();
      await io.writeStream(id, 'small', pieces(1000, 300));
      expect(server.objects('b').get(`p/${id}/small`)?.length).toBe(1000);
      // A source failing after a part went up: the upload is aborted, no object is made.
      async function* failing(): AsyncGenerator<Uint8Array> {
        yield* pieces(6 * 1024 * 1024, 1 << 20);
        throw new Error('cut');
      }
      await expect(io.writeStream(id, 'cut', failing())).rejects.toThrow(/cut/);
      expect(server.objects('b').has(`p/${id}/cut`)).toBe(false);
      expect(server.uploads.size).toBe(0);
    } finally {
      await server.close();
    }
  });
});

/** The live heap and array buffers (after a full GC), in bytes. */
const gc = exposedGc();
function liveBytes(): number {
  gc();
  return heapAndBuffers();
}

describe('a 64 MiB volume stream through the runner, the verify and the restore, in bounded memory', () => {
  const streamBytes = 64 * 1024 * 1024;
  const growthMaxBytes = 24 * 1024 * 1024;
  let root = '';

  const { store, put, target, rawPrivate } = backupWorld();
  put(volumesCollection, 'data', {
    name: 'data', service: 'db', copies: 2, everyMs: 1000, sizeBytes: 1 << 30,
    eras: [{ node: 'n2', epoch: 2, fromSeq: 1, base: null }], held: [{ node: 'n3', version: { seq: 5, node: 'n2', epoch: 2 }, atMs: 1 }, { node: 'n2', version: { seq: 5, node: 'n2', epoch: 2 }, atMs: 1 }], lastError: null,
  });
  const fill = (i: number): number => (i * 31 + 7) & 255;
  const sourceSha = createHash('sha256');
  for (let at = 0, i = 0; at < streamBytes; at += 65_536, i++) sourceSha.update(Buffer.alloc(65_536, fill(i)));
  const expectedSha = sourceSha.digest('hex');

  const runner = (source: VolumeStreamSource, encrypt: boolean, now: number): BackupRunner => {
    root = tmp();
    target(root, { encrypt });
    return new BackupRunner({ node: backupNode, store, clusterId: 'c1', version: 'test', log: quietLog, volumeStream: source, now: () => now });
  };

  it('backs up, verifies and reads back an encrypted 64 MiB stream with the live heap growing by less than 24 MiB', async () => {
    const asked: string[] = [];
    let peak = 0;
    const base = liveBytes();
    const source: VolumeStreamSource = async (from, name, version, bytesMax) => {
      asked.push(from);
      expect([name, version, bytesMax]).toEqual(['data', { seq: 5, node: 'n2', epoch: 2 }, 2 * 1024 ** 3]);
      if (from === 'n2') throw new Error('refused');
      return { parent: null, body: (async function* generated(): AsyncGenerator<Uint8Array> {
        for (let at = 0, i = 0; at < streamBytes; at += 65_536, i++) {
          if (i % 128 === 0) peak = Math.max(peak, liveBytes() - base);
          yield Buffer.alloc(65_536, fill(i));
        }
      })() };
    };
    const r = await runner(source, true, Date.UTC(2026, 11, 6, 14)).run('nas');
    expect(asked).toEqual(['n2', 'n3']);
    expect(r).toMatchObject({ encrypted: true, volumes: [{ name: 'data', version: 's5-e2-n2', bytes: streamBytes }] });
    expect(peak, `live heap growth while backing up ${streamBytes} bytes`).toBeLessThan(growthMaxBytes);
    const stored = readFileSync(path.join(root, r.id, manifestName));
    const m = decodeManifest(stored);
    if (!('manifest' in m)) throw new Error(m.problem);
    expect(m.manifest.format).toBe(3);
    expect(m.manifest.files.find((f) => f.name === 'volume-1.stream')).toMatchObject({ bytes: chunkedStoredBytes(streamBytes), encoding: 'chunked' });

    // verify: streamed, every digest checked, nothing kept.
    peak = 0;
    let reads = 0;
    const verified = await verifyBackup(new DirTargetIo(root), r.id, { tap: () => () => {
      if (reads++ % 64 === 0) peak = Math.max(peak, liveBytes() - base);
    } });
    expect(verified).toMatchObject({ ok: true, problems: [] });
    expect(reads).toBeGreaterThan(64);
    expect(peak, 'live heap growth while verifying').toBeLessThan(growthMaxBytes);

    // The restore's first pass decrypts and hashes the stream; its receive stream reads it again.
    const before = liveBytes();
    const back = await readBackup(root, { 'password-stdin': false }, r.id, rawPrivate);
    try {
      expect(liveBytes() - before).toBeLessThan(growthMaxBytes);
      const v = back.volumes[0]?.streams[0];
      expect(v).toMatchObject({ bytes: streamBytes, sha256: expectedSha });
      const hash = createHash('sha256');
      let n = 0;
      let restorePeak = 0;
      for await (const c of v?.open() ?? []) {
        hash.update(c as Buffer);
        if (n++ % 64 === 0) restorePeak = Math.max(restorePeak, liveBytes() - before);
      }
      expect(hash.digest('hex')).toBe(expectedSha);
      expect(restorePeak, 'live heap growth while reading the stream back').toBeLessThan(growthMaxBytes);
    } finally {
      await back.close();
    }
  }, 120_000);

  it('a damaged chunk fails the restore naming the file; a stream cut short fails the backup and nothing is listed', async () => {
    const small = 3 * chunkPlainBytes + 100;
    const source: VolumeStreamSource = async () => ({ parent: null, body: through(pieces(small, 65_536), { push: (b) => [Buffer.from(b)], end: () => [] }) });
    const r = await runner(source, true, Date.UTC(2026, 11, 6, 15)).run('nas');
    const file = path.join(root, r.id, 'volume-1.stream');
    const bytes = readFileSync(file);
    bytes[chunkRecordBytes + 100] = (bytes[chunkRecordBytes + 100] ?? 0) ^ 1;
    writeFileSync(file, bytes);
    expect((await verifyBackup(new DirTargetIo(root), r.id)).problems).toEqual([{ file: `${r.id}/volume-1.stream`, problem: expect.stringMatching(/sha256/) }]);
    await expect(readBackup(root, { 'password-stdin': false }, r.id, rawPrivate)).rejects.toMatchObject({ code: 'backup_damaged', message: expect.stringContaining('volume-1.stream') });

    // Unencrypted: the stream is stored as it is (format 2), and reads back the same.
    const plainRun = await runner(source, false, Date.UTC(2026, 11, 6, 16)).run('nas');
    const pm = decodeManifest(readFileSync(path.join(root, plainRun.id, manifestName)));
    expect('manifest' in pm && pm.manifest.format).toBe(2);
    expect(readFileSync(path.join(root, plainRun.id, 'volume-1.stream')).equals(await collect(pieces(small, 65_536)))).toBe(true);

    const cut: VolumeStreamSource = async () => ({ parent: null, body: (async function* short(): AsyncGenerator<Uint8Array> {
      yield Buffer.alloc(1 << 20, 1);
      throw new Error('volume data\'s stream from n3 arrived damaged: 1048576 bytes');
    })() });
    const failing = runner(cut, true, Date.UTC(2026, 11, 6, 17));
    await expect(failing.run('nas')).rejects.toMatchObject({ code: 'backup_failed', message: expect.stringMatching(/volume data's stream failed after 1048576 bytes: .*arrived damaged.*nothing was listed/) });
    expect(readdirSync(root)).toEqual([]);
  }, 60_000);
});
