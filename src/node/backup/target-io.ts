// Where backups are written: a directory (a NAS mount on the node) or an SFTP server. Each is the
// same narrow interface, the few file operations a backup needs, with paths relative to the
// target's root and one level deep (<backup id>/<file>). Written files are durable when the call
// returns: synced (fsync, or OpenSSH's fsync@openssh.com over SFTP), and the directory synced
// after a rename where the filesystem allows it.

import { createReadStream } from 'node:fs';
import { mkdir, open, readdir, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import type { Client, SFTPWrapper } from 'ssh2';

export interface TargetIo {
  /** Where it writes, for messages (a path, or user@host:port:path). */
  readonly where: string;
  /** false: no rename (S3); writeBackup then writes a backup in place under its id, the manifest last. */
  readonly renames?: false;
  /** The names in the root (an absent root: none). */
  list(): Promise<string[]>;
  /** Makes `dir` under the root (and the root), empty. */
  makeDir(dir: string): Promise<void>;
  /** Writes `dir/name` whole and synced. */
  writeFile(dir: string, name: string, bytes: Uint8Array): Promise<void>;
  /** The bytes of `dir/name`, undefined when it is absent; throws when it is larger than `bytesMax`. */
  readFile(dir: string, name: string, bytesMax: number): Promise<Uint8Array | undefined>;
  /**
   * Writes `dir/name` from `body` as it flows (a few chunks in memory at a time), synced; a
   * failure of `body` fails the write (the file is left within `dir`, which the caller removes).
   */
  writeStream(dir: string, name: string, body: AsyncIterable<Uint8Array> | Iterable<Uint8Array>): Promise<void>;
  /** The bytes of `dir/name` as they are read, undefined when it is absent; throws when it is larger than `bytesMax`. */
  readStream(dir: string, name: string, bytesMax: number): Promise<AsyncIterable<Uint8Array> | undefined>;
  /** Renames the directory `from` to `to` (both under the root); `to` must not exist. */
  renameDir(from: string, to: string): Promise<void>;
  /** Removes `dir` and the files in it (no deeper). */
  removeDir(dir: string): Promise<void>;
  close(): Promise<void>;
}

const isMissing = (err: unknown): boolean => (err as NodeJS.ErrnoException).code === 'ENOENT';

async function syncPath(p: string): Promise<void> {
  const fh = await open(p, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

async function writeAll(fh: FileHandle, bytes: Uint8Array): Promise<void> {
  for (let at = 0; at < bytes.length;) {
    const { bytesWritten } = await fh.write(bytes, at, bytes.length - at);
    at += bytesWritten;
  }
}

/** Bytes read per chunk of a streamed read (ssh2 splits an SFTP read into what the server takes). */
const readChunkBytes = 256 * 1024;

/** A directory on this machine. */
export class DirTargetIo implements TargetIo {
  readonly where: string;
  constructor(private readonly root: string) {
    this.where = root;
  }

  async list(): Promise<string[]> {
    try {
      return await readdir(this.root);
    } catch (err) {
      if (isMissing(err)) return [];
      throw err;
    }
  }

  async makeDir(dir: string): Promise<void> {
    await mkdir(this.root, { recursive: true });
    await mkdir(path.join(this.root, dir), { mode: 0o700 });
  }

  async writeFile(dir: string, name: string, bytes: Uint8Array): Promise<void> {
    await this.writeStream(dir, name, [bytes]);
  }

  async writeStream(dir: string, name: string, body: AsyncIterable<Uint8Array> | Iterable<Uint8Array>): Promise<void> {
    const fh = await open(path.join(this.root, dir, name), 'wx', 0o600);
    try {
      for await (const chunk of body) await writeAll(fh, chunk);
      await fh.sync();
    } finally {
      await fh.close();
    }
  }

  async readStream(dir: string, name: string, bytesMax: number): Promise<AsyncIterable<Uint8Array> | undefined> {
    const file = path.join(this.root, dir, name);
    let size: number;
    try {
      size = (await stat(file)).size;
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw err;
    }
    if (size > bytesMax) throw new Error(`${file} is ${size} bytes, more than the ${bytesMax} expected`);
    return createReadStream(file, { highWaterMark: readChunkBytes });
  }

  async readFile(dir: string, name: string, bytesMax: number): Promise<Uint8Array | undefined> {
    const file = path.join(this.root, dir, name);
    try {
      const st = await stat(file);
      if (st.size > bytesMax) throw new Error(`${file} is ${st.size} bytes, more than the ${bytesMax} expected`);
      const fh = await open(file, 'r');
      try {
        return await fh.readFile();
      } finally {
        await fh.close();
      }
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw err;
    }
  }

  async renameDir(from: string, to: string): Promise<void> {
    await syncPath(path.join(this.root, from));
    await rename(path.join(this.root, from), path.join(this.root, to));
    await syncPath(this.root);
  }

  async removeDir(dir: string): Promise<void> {
    await rm(path.join(this.root, dir), { recursive: true, force: true });
  }

  async close(): Promise<void> {}
}

export interface SftpLocation {
  user: string;
  host: string;
  port: number;
  /** The directory on the server (absolute, or relative to the user's home). */
  path: string;
}

export interface SftpAuth {
  password?: string;
  privateKey?: string;
}

/** The host key's SHA-256, base64 as OpenSSH prints it (ssh-keygen -lf), without `SHA256:`. */
export type HostKeyCheck = (sha256: string) => boolean;

const sftpTimeoutMs = 20_000;

function sftpCall<T>(what: string, run: (cb: (err: Error | null | undefined, v?: T) => void) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    run((err, v) => (err ? reject(new Error(`${what}: ${err.message}`)) : resolve(v as T)));
  });
}

/** An SFTP server (OpenSSH's sftp-server, or any that speaks version 3 with OpenSSH's fsync and posix-rename). */
export class SftpTargetIo implements TargetIo {
  readonly where: string;
  private constructor(private readonly client: Client, private readonly sftp: SFTPWrapper, private readonly root: string, where: string) {
    this.where = where;
  }

  static async connect(loc: SftpLocation, auth: SftpAuth, hostKey?: HostKeyCheck): Promise<SftpTargetIo> {
    // ssh2 is loaded by the first SFTP backup, not at start: its poly1305 module alone holds a
    // 16 MiB buffer from its load on (issue 45, bench/RESULTS.md "Footprint levers").
    const { Client: ClientClass } = await import('ssh2');
    const client = new ClientClass();
    const where = `${loc.user}@${loc.host}:${loc.port}:${loc.path}`;
    await new Promise<void>((resolve, reject) => {
      client.once('ready', () => resolve());
      client.once('error', (err) => reject(new Error(`cannot connect to ${where}: ${err.message}`)));
      client.connect({
        host: loc.host, port: loc.port, username: loc.user, readyTimeout: sftpTimeoutMs,
        ...(auth.password !== undefined ? { password: auth.password } : {}),
        ...(auth.privateKey !== undefined ? { privateKey: auth.privateKey } : {}),
        ...(hostKey !== undefined ? { hostHash: 'sha256', hostVerifier: (hash: string) => hostKey(Buffer.from(hash, 'hex').toString('base64').replace(/=+$/, '')) } : {}),
      });
    });
    try {
      const sftp = await sftpCall<SFTPWrapper>(`opening SFTP on ${where}`, (cb) => client.sftp(cb));
      return new SftpTargetIo(client, sftp, loc.path.replace(/\/+$/, '') || '/', where);
    } catch (err) {
      client.end();
      throw err;
    }
  }

  private p(...parts: string[]): string {
    return [this.root, ...parts].join('/');
  }

  async list(): Promise<string[]> {
    try {
      const entries = await sftpCall<{ filename: string }[]>(`listing ${this.where}`, (cb) => this.sftp.readdir(this.root, cb));
      return entries.map((e) => e.filename);
    } catch (err) {
      if (/No such file/i.test((err as Error).message)) return [];
      throw err;
    }
  }

  async makeDir(dir: string): Promise<void> {
    try {
      await sftpCall<void>(`creating ${this.root}`, (cb) => this.sftp.mkdir(this.root, cb));
    } catch {
      // It exists already (SFTP version 3 says only "Failure"); the next call tells otherwise.
    }
    await sftpCall<void>(`creating ${this.p(dir)}`, (cb) => this.sftp.mkdir(this.p(dir), { mode: 0o700 }, cb));
  }

  async writeFile(dir: string, name: string, bytes: Uint8Array): Promise<void> {
    await this.writeStream(dir, name, [bytes]);
  }

  async writeStream(dir: string, name: string, body: AsyncIterable<Uint8Array> | Iterable<Uint8Array>): Promise<void> {
    const file = this.p(dir, name);
    const handle = await sftpCall<Buffer>(`opening ${file}`, (cb) => this.sftp.open(file, 'wx', 0o600, cb));
    try {
      let at = 0;
      for await (const chunk of body) {
        await this.writeAt(handle, file, chunk, at);
        at += chunk.length;
      }
      await sftpCall<void>(`syncing ${file}`, (cb) => this.sftp.ext_openssh_fsync(handle, cb));
    } finally {
      await sftpCall<void>(`closing ${file}`, (cb) => this.sftp.close(handle, cb));
    }
  }

  /** `bytes` at `offset`, in pieces of 32 KiB (what OpenSSH's sftp-server takes per request), a few in flight at once. */
  private async writeAt(handle: Buffer, file: string, bytes: Uint8Array, offset: number): Promise<void> {
    const piece = 32 * 1024;
    const inFlightMax = 8;
    const pending: Promise<void>[] = [];
    for (let at = 0; at < bytes.length; at += piece) {
      const part = Buffer.from(bytes.buffer, bytes.byteOffset + at, Math.min(piece, bytes.length - at));
      pending.push(sftpCall<void>(`writing ${file}`, (cb) => this.sftp.write(handle, part, 0, part.length, offset + at, cb)));
      if (pending.length >= inFlightMax) await Promise.all(pending.splice(0));
    }
    await Promise.all(pending);
  }

  /** Whether `file` exists (false when not); throws when it is larger than `bytesMax`. */
  private async existsWithin(file: string, bytesMax: number): Promise<boolean> {
    let size: number;
    try {
      size = (await sftpCall<{ size: number }>(`reading ${file}`, (cb) => this.sftp.stat(file, cb))).size;
    } catch (err) {
      if (/No such file/i.test((err as Error).message)) return false;
      throw err;
    }
    if (size > bytesMax) throw new Error(`${file} is ${size} bytes, more than the ${bytesMax} expected`);
    return true;
  }

  async readStream(dir: string, name: string, bytesMax: number): Promise<AsyncIterable<Uint8Array> | undefined> {
    const file = this.p(dir, name);
    if (!(await this.existsWithin(file, bytesMax))) return undefined;
    return this.readPieces(file);
  }

  /**
   * The file read piece by piece, its handle closed (and the close answered) before the last piece
   * is handed out or on any early stop: not ssh2's ReadStream, whose close may still be in flight
   * when the connection ends, and then fails with an error nobody listens to.
   */
  private async *readPieces(file: string): AsyncGenerator<Uint8Array> {
    const handle = await sftpCall<Buffer>(`opening ${file}`, (cb) => this.sftp.open(file, 'r', cb));
    try {
      for (let at = 0; ;) {
        const buf = Buffer.allocUnsafe(readChunkBytes);
        const n = await sftpCall<number>(`reading ${file}`, (cb) => this.sftp.read(handle, buf, 0, buf.length, at, (err, bytesRead) => cb(err, bytesRead)));
        if (n === 0) return;
        at += n;
        yield buf.subarray(0, n);
      }
    } finally {
      await sftpCall<void>(`closing ${file}`, (cb) => this.sftp.close(handle, cb));
    }
  }

  async readFile(dir: string, name: string, bytesMax: number): Promise<Uint8Array | undefined> {
    const file = this.p(dir, name);
    if (!(await this.existsWithin(file, bytesMax))) return undefined;
    return await sftpCall<Buffer>(`reading ${file}`, (cb) => this.sftp.readFile(file, cb));
  }

  async renameDir(from: string, to: string): Promise<void> {
    await sftpCall<void>(`renaming ${this.p(from)}`, (cb) => this.sftp.ext_openssh_rename(this.p(from), this.p(to), cb));
  }

  async removeDir(dir: string): Promise<void> {
    let names: { filename: string }[];
    try {
      names = await sftpCall<{ filename: string }[]>(`listing ${this.p(dir)}`, (cb) => this.sftp.readdir(this.p(dir), cb));
    } catch (err) {
      if (/No such file/i.test((err as Error).message)) return;
      throw err;
    }
    for (const n of names) await sftpCall<void>(`removing ${this.p(dir, n.filename)}`, (cb) => this.sftp.unlink(this.p(dir, n.filename), cb));
    await sftpCall<void>(`removing ${this.p(dir)}`, (cb) => this.sftp.rmdir(this.p(dir), cb));
  }

  async close(): Promise<void> {
    this.sftp.end();
    this.client.end();
  }
}
