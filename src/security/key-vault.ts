// The private keys a voter keeps in files beside its certificates (the CA key, a CA rotation's
// next key), under autolock (docs/security.md, "Autolock"): each is then kept as FILE.sealed,
// sealed with the unlock key (unlock-key.ts), and FILE itself is gone from the disk. The node
// can use it only once unlocked: the unlock key is held in memory, per data directory, never
// written anywhere. Without autolock they are FILE, mode 0600, as always.
//
// Everything that reads or writes these files goes through here: a key is "held" when either
// file exists, readable only in the clear or once unlocked, and a write while the node is locked
// is refused rather than leave a key in the clear on an autolocked disk.

import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { writePrivateFile } from './cluster-key-files.ts';
import { openWithUnlockKey, sealWithUnlockKey, unlockSealSchema } from './unlock-key.ts';

const unlockKeys = new Map<string, Buffer>();
/** Data directories whose keys are to be sealed (autolock on, as this node last heard). */
const autolocked = new Set<string>();

const dirOf = (file: string): string => path.resolve(path.dirname(path.dirname(file)));
export const sealedFileOf = (file: string): string => `${file}.sealed`;
const labelOf = (file: string): string => `key file ${path.basename(file)}`;

/** The node of `dataDir` is unlocked with `unlockKey` (or forgets it, with undefined). */
export function setUnlockKey(dataDir: string, unlockKey: Buffer | undefined): void {
  const dir = path.resolve(dataDir);
  if (unlockKey === undefined) unlockKeys.delete(dir);
  else unlockKeys.set(dir, Buffer.from(unlockKey));
}

/** Whether `dataDir`'s key files are sealed and this process has not been given the unlock key. */
export function isLocked(dataDir: string): boolean {
  return sealedFiles(dataDir).length > 0 && !unlockKeys.has(path.resolve(dataDir));
}

function sealedFiles(dataDir: string): string[] {
  const tls = path.join(dataDir, 'tls');
  try {
    return readdirSync(tls).filter((n) => n.endsWith('.key.sealed')).map((n) => path.join(tls, n));
  } catch {
    return [];
  }
}

/** Whether this node holds the key of `file`, in the clear or sealed. */
export function holdsKeyFile(file: string): boolean {
  return existsSync(file) || existsSync(sealedFileOf(file));
}

/** The key of `file` as text; undefined when absent, or sealed and the node is locked. */
export function readKeyFile(file: string): string | undefined {
  if (existsSync(file)) return readFileSync(file, 'utf8');
  const sealed = sealedFileOf(file);
  const unlockKey = unlockKeys.get(dirOf(file));
  if (unlockKey === undefined || !existsSync(sealed)) return undefined;
  return openWithUnlockKey(unlockKey, unlockSealSchema.parse(JSON.parse(readFileSync(sealed, 'utf8'))), labelOf(file)).toString('utf8');
}

/** Whether new key files of `dataDir` are to be sealed: autolock turned on here, or sealed files found. */
function sealsWrites(dir: string): boolean {
  return autolocked.has(dir) || sealedFiles(dir).length > 0;
}

function write(file: string, text: string, sealed: boolean): void {
  if (!sealed) {
    writePrivateFile(file, text);
    rmSync(sealedFileOf(file), { force: true });
    return;
  }
  const unlockKey = unlockKeys.get(dirOf(file));
  if (unlockKey === undefined) throw new Error(`this node is autolocked: it writes no key (${path.basename(file)}) until it is unlocked (shoal unlock)`);
  writePrivateFile(sealedFileOf(file), `${JSON.stringify(sealWithUnlockKey(unlockKey, Buffer.from(text), labelOf(file)))}\n`);
  rmSync(file, { force: true });
}

/** Writes the key of `file`: sealed under autolock (refused while locked), else in the clear, 0600. */
export function writeKeyFile(file: string, text: string): void {
  write(file, text, sealsWrites(dirOf(file)));
}

export function removeKeyFile(file: string): void {
  rmSync(file, { force: true });
  rmSync(sealedFileOf(file), { force: true });
}

/**
 * Autolock on (`unlockKey`) or off (null) for `files` of `dataDir`: each is rewritten sealed or in
 * the clear. The node must be unlocked (it must read them); the new file is in place, synced,
 * before the old one goes.
 */
export function resealKeyFiles(dataDir: string, files: readonly string[], unlockKey: Buffer | null): void {
  const dir = path.resolve(dataDir);
  // Read with the key they are sealed with now, if any; then written with the new one.
  const texts = files.map((f) => ({ f, text: readKeyFile(f) }));
  if (unlockKey !== null) unlockKeys.set(dir, Buffer.from(unlockKey));
  if (unlockKey === null) autolocked.delete(dir);
  else autolocked.add(dir);
  for (const { f, text } of texts) if (text !== undefined) write(f, text, unlockKey !== null);
}
