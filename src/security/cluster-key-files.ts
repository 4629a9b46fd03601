// Where a voter keeps the private halves of the cluster keys (docs/security.md, "Secrets at
// rest"): one file per key, `DATA/tls/cluster-keys/<id>.key`, mode 0600 in a 0700 directory,
// beside the CA key and never in the store, the log or a snapshot. A file holds the raw X25519
// key in base64, or, with autolock, the key sealed with the unlock key (unlock-key.ts): the node
// then cannot use it until it is unlocked, and a stolen disk does not give it away.

import { createPrivateKey, type KeyObject } from 'node:crypto';
import { closeSync, fsyncSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import type { ClusterKeyHolder } from '../ports/cluster-keys.ts';
import { openWithUnlockKey, sealWithUnlockKey, unlockSealSchema } from './unlock-key.ts';

const pkcs8Prefix = Buffer.from('302e020100300506032b656e04220420', 'hex');

const fileSchema = z.union([
  z.object({ version: z.literal(1), id: z.string(), key: z.string() }).strict(),
  z.object({ version: z.literal(1), id: z.string(), sealed: unlockSealSchema }).strict(),
]);
type KeyFile = z.infer<typeof fileSchema>;

export const clusterKeysDir = (dataDir: string): string => path.join(dataDir, 'tls', 'cluster-keys');

const idPattern = /^[0-9a-f]{16}$/;

function raw(k: KeyObject): Buffer {
  return k.export({ format: 'der', type: 'pkcs8' }).subarray(pkcs8Prefix.length);
}

function keyOf(rawKey: Buffer): KeyObject {
  return createPrivateKey({ key: Buffer.concat([pkcs8Prefix, rawKey]), format: 'der', type: 'pkcs8' });
}

/** Writes `text` to `file` whole or not at all, synced, mode 0600. */
export function writePrivateFile(file: string, text: string): void {
  const tmp = `${file}.tmp`;
  const fd = openSync(tmp, 'w', 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, file);
  const dir = openSync(path.dirname(file), 'r');
  try {
    fsyncSync(dir);
  } finally {
    closeSync(dir);
  }
}

/** The keys in memory only: tests, and nodes built without a data directory. */
export class MemoryClusterKeys implements ClusterKeyHolder {
  private readonly keys = new Map<string, KeyObject>();
  locked = false;

  privateKey(id: string): KeyObject | undefined {
    return this.locked ? undefined : this.keys.get(id);
  }

  heldIds(): string[] {
    return [...this.keys.keys()].sort();
  }

  add(id: string, privateKey: KeyObject): void {
    this.keys.set(id, privateKey);
  }

  remove(id: string): void {
    this.keys.delete(id);
  }
}

/**
 * The keys of a data directory. Files are read at construction and when a key is added or the
 * node unlocked; keys sealed with the unlock key stay unusable (`locked`) until `unlock`.
 */
export class ClusterKeyFiles implements ClusterKeyHolder {
  private readonly dir: string;
  private readonly open = new Map<string, KeyObject>();
  private readonly sealed = new Set<string>();
  /** With autolock, once unlocked: new keys are sealed with it too. */
  private unlockKey: Buffer | undefined;

  constructor(dataDir: string) {
    this.dir = clusterKeysDir(dataDir);
    this.reload();
  }

  get locked(): boolean {
    return this.sealed.size > 0 && this.unlockKey === undefined;
  }

  /** Whether the files on disk are sealed with an unlock key. */
  get sealedOnDisk(): boolean {
    return this.sealed.size > 0;
  }

  privateKey(id: string): KeyObject | undefined {
    return this.open.get(id);
  }

  heldIds(): string[] {
    return [...new Set([...this.open.keys(), ...this.sealed])].sort();
  }

  add(id: string, privateKey: KeyObject): void {
    if (!idPattern.test(id)) throw new Error(`assertion: cluster key id ${JSON.stringify(id)}`);
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    const file: KeyFile = this.unlockKey !== undefined
      ? { version: 1, id, sealed: sealWithUnlockKey(this.unlockKey, raw(privateKey), `cluster key ${id}`) }
      : { version: 1, id, key: raw(privateKey).toString('base64') };
    writePrivateFile(path.join(this.dir, `${id}.key`), `${JSON.stringify(file)}\n`);
    this.open.set(id, privateKey);
    if ('sealed' in file) this.sealed.add(id);
  }

  remove(id: string): void {
    rmSync(path.join(this.dir, `${id}.key`), { force: true });
    this.open.delete(id);
    this.sealed.delete(id);
  }

  /**
   * Opens the sealed keys with `unlockKey`; throws (and stays locked) if it does not open them.
   * The key is kept in memory (never on disk) to seal keys added later.
   */
  unlock(unlockKey: Buffer): void {
    const opened = new Map<string, KeyObject>();
    for (const id of this.sealed) opened.set(id, keyOf(openWithUnlockKey(unlockKey, this.readFile(id), `cluster key ${id}`)));
    for (const [id, k] of opened) this.open.set(id, k);
    this.unlockKey = Buffer.from(unlockKey);
  }

  /**
   * Seals every key on disk with `unlockKey` (autolock on; the node must hold the keys open), or,
   * with null, writes them back in the clear (autolock off). Each file is replaced whole.
   */
  reseal(unlockKey: Buffer | null): void {
    if (this.locked) throw new Error('the keys are locked: unlock the node first');
    this.unlockKey = unlockKey === null ? undefined : Buffer.from(unlockKey);
    for (const [id, k] of [...this.open]) {
      this.sealed.delete(id);
      this.add(id, k);
    }
  }

  /** The unlock key this node was unlocked with (to hand to a locked peer), if any. */
  heldUnlockKey(): Buffer | undefined {
    return this.unlockKey;
  }

  private readFile(id: string): Extract<KeyFile, { sealed: unknown }>['sealed'] {
    const f = fileSchema.parse(JSON.parse(readFileSync(path.join(this.dir, `${id}.key`), 'utf8')));
    if (!('sealed' in f)) throw new Error(`assertion: cluster key ${id} is not sealed`);
    return f.sealed;
  }

  private reload(): void {
    let names: string[];
    try {
      names = readdirSync(this.dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw err;
    }
    for (const name of names) {
      const id = name.replace(/\.key$/, '');
      if (!name.endsWith('.key') || !idPattern.test(id)) continue;
      const f = fileSchema.parse(JSON.parse(readFileSync(path.join(this.dir, name), 'utf8')));
      if ('key' in f) this.open.set(id, keyOf(Buffer.from(f.key, 'base64')));
      else this.sealed.add(id);
    }
  }
}
