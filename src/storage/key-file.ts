// The storage's few keys, in one small file beside the write-ahead log: <data>/storage.keys.
//
//   "SHOALKEY"       8 bytes, magic
//   u32be version    1
//   u32be bodyBytes
//   body             msgpack: [key, value][], each value a sealed frame (sealed.ts)
//   u32be crc32(body)
//
// Keys (keys.ts): 'format' (the storage format), 'm/logId' (the log's id, log-incarnation.ts),
// and 'm/<key>' for the node layer's metadata; 'levelCopy' while the keys are an unchanged copy
// of a LevelDB directory kept beside them (its fingerprint, migrate.ts). Releases up to 0.1.x kept them in LevelDB under
// <data>/log (moved here at the first start: migrate.ts).
//
// While the LevelDB directory of the release before is kept beside it (level-aside.ts), the
// first write that changes a key renames that directory aside first: that release, rolled back
// to, would read the old value.
//
// Every change rewrites the whole file (a few hundred bytes): written to a temporary name,
// fsynced, renamed over the old one, and the directory fsynced, so a crash leaves the old file
// or the new one, never half of either. A file that fails its checks refuses the start
// (StorageCorruptionError); a leftover temporary file is ignored and replaced.

import { existsSync } from 'node:fs';
import { open, readFile, rename } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Logger } from '../raft/types.ts';
import { crc32 } from './crc32.ts';
import { StorageCorruptionError, rebuildNodeRecovery } from './errors.ts';
import { hasLevelDir, setLevelAside } from './level-aside.ts';
import type { StoragePaths } from './paths.ts';
import { packr } from './sealed.ts';
import { syncDir } from './sync-dir.ts';

const magic = Buffer.from('SHOALKEY');
/** Not a sealed record: the fingerprint of the LevelDB directory the keys are a copy of. */
const levelCopyKey = 'levelCopy';
const version = 1;
const fixedBytes = magic.length + 4 + 4 + 4;
/** Node metadata values are at most 1 MiB each (disk-storage.ts); a larger file is damage. */
const fileBytesMax = 64 * 1024 * 1024;

export class KeyFile {
  private constructor(
    readonly paths: StoragePaths,
    private readonly entries: Map<string, Buffer>,
    private readonly logger: Logger,
  ) {}

  /** Loads the file, or an empty set of keys if there is none. Verifies it whole. */
  static async load(paths: StoragePaths, logger: Logger = silent): Promise<KeyFile> {
    const file = paths.log;
    if (!existsSync(file)) return new KeyFile(paths, new Map(), logger);
    return new KeyFile(paths, decodeKeyFile(await readFile(file), (detail) => corrupt(paths, detail)), logger);
  }

  /**
   * The fingerprint of the LevelDB directory these keys were copied from and that has stayed in
   * place since (migrate.ts); undefined if they were not, or a key changed since.
   */
  levelCopy(): string | undefined {
    const v = this.entries.get(levelCopyKey);
    return v === undefined ? undefined : v.toString('latin1');
  }

  /** Replaces every key with a copy of the LevelDB directory's, of fingerprint `fingerprint`. */
  async copyOf(entries: Map<string, Buffer>, fingerprint: string): Promise<void> {
    const next = new Map(entries);
    next.set(levelCopyKey, Buffer.from(fingerprint, 'latin1'));
    await this.replaceAll(next);
  }

  /** Replaces every key (durably), as they are: the move of a format 1 directory. */
  async replaceAll(entries: Map<string, Buffer>): Promise<void> {
    await writeFileDurably(this.paths.log, encodeKeyFile(entries));
    this.entries.clear();
    for (const [k, v] of entries) this.entries.set(k, v);
  }

  /** The file's path (where damage is reported). */
  get file(): string {
    return this.paths.log;
  }

  /** The sealed value of `key`, if any. */
  get(key: Uint8Array): Buffer | undefined {
    return this.entries.get(Buffer.from(key).toString('latin1'));
  }

  /** Sets keys to sealed values and rewrites the file durably; the keys change only once it is. */
  async put(changes: Iterable<readonly [Uint8Array, Buffer]>): Promise<number> {
    const next = new Map(this.entries);
    let changed = false;
    for (const [k, v] of changes) {
      const key = Buffer.from(k).toString('latin1');
      changed ||= !this.entries.get(key)?.equals(v);
      next.set(key, v);
    }
    if (changed) {
      if (hasLevelDir(this.paths)) {
        await setLevelAside(this.paths, this.logger, 'a key changed that the release before, rolled back to, would read stale from it');
      }
      next.delete(levelCopyKey);
    }
    const bytes = encodeKeyFile(next);
    await writeFileDurably(this.paths.log, bytes);
    this.entries.clear();
    for (const [k, v] of next) this.entries.set(k, v);
    return bytes.length;
  }
}

export function encodeKeyFile(entries: Map<string, Buffer>): Buffer {
  const body = packr.pack([...entries].map(([k, v]) => [Buffer.from(k, 'latin1'), v]));
  const out = Buffer.alloc(fixedBytes + body.length);
  magic.copy(out, 0);
  out.writeUInt32BE(version, magic.length);
  out.writeUInt32BE(body.length, magic.length + 4);
  body.copy(out, magic.length + 8);
  out.writeUInt32BE(crc32(body), magic.length + 8 + body.length);
  return out;
}

function decodeKeyFile(buf: Buffer, fail: (detail: string) => Error): Map<string, Buffer> {
  if (buf.length < fixedBytes) throw fail(`the file is ${buf.length} bytes, shorter than its header`);
  if (!buf.subarray(0, magic.length).equals(magic)) throw fail('the file does not start with the key file magic');
  const v = buf.readUInt32BE(magic.length);
  if (v !== version) throw fail(`the file is of version ${v}; this release reads version ${version}`);
  const bodyBytes = buf.readUInt32BE(magic.length + 4);
  if (buf.length > fileBytesMax || fixedBytes + bodyBytes !== buf.length) {
    throw fail(`the header says ${bodyBytes} bytes of keys, the ${buf.length}-byte file holds ${buf.length - fixedBytes} (truncated or appended to)`);
  }
  const body = buf.subarray(magic.length + 8, magic.length + 8 + bodyBytes);
  const stored = buf.readUInt32BE(magic.length + 8 + bodyBytes);
  if (stored !== crc32(body)) throw fail(`checksum mismatch (stored 0x${stored.toString(16).padStart(8, '0')}, computed 0x${crc32(body).toString(16).padStart(8, '0')})`);
  let decoded: unknown;
  try {
    decoded = packr.unpack(body);
  } catch (err) {
    throw fail(`the checksum matches but the keys do not decode: ${(err as Error).message}`);
  }
  const entries = new Map<string, Buffer>();
  if (!Array.isArray(decoded)) throw fail('the keys are not a list');
  for (const pair of decoded as unknown[]) {
    if (!Array.isArray(pair) || pair.length !== 2 || !(pair[0] instanceof Uint8Array) || !(pair[1] instanceof Uint8Array)) {
      throw fail('an entry is not a key and a value');
    }
    entries.set(Buffer.from(pair[0]).toString('latin1'), Buffer.from(pair[1]));
  }
  return entries;
}

const silent: Logger = { debug: () => {}, info: () => {}, warn: () => {} };

function corrupt(paths: StoragePaths, detail: string): StorageCorruptionError {
  return new StorageCorruptionError(paths.log, detail, rebuildNodeRecovery(paths.dir));
}

/** Temporary file, fsync, rename over `file`, fsync of the directory. */
export async function writeFileDurably(file: string, data: Uint8Array | string): Promise<void> {
  const tmp = `${file}.tmp`;
  const fh = await open(tmp, 'w');
  try {
    await fh.writeFile(data);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(tmp, file);
  await syncDir(dirname(file));
}
