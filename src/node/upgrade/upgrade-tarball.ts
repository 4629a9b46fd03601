// A shoal build as `npm pack` makes it, read in this process with node-tar (the `tar` package)
// rather than by scraping what a tar program prints: its entries listed as typed records, checked,
// then unpacked. npm packs files (and folders) under package/ and nothing else, so an entry
// outside package/, with `..` in its path or an absolute one, or of any other type (a symbolic
// or hard link could lead a later entry, or the running node through the release, outside the
// release folder; a device or a FIFO has no place in a package) refuses the whole tarball, before
// anything is written.

// node-tar loads on the first upgrade, not with every node (issue 45: footprint).
import type { ReadEntry } from 'tar';
import { ShoalError } from '../../errors.ts';

/** Entries a build may hold (a shoal package has a few hundred). */
export const tarballEntriesMax = 100_000;
/** Bytes a build may unpack to, all entries together (a shoal package is a few MiB). */
export const tarballUnpackedBytesMax = 1024 * 1024 * 1024;
/** The largest package.json read from a tarball. */
const packageJsonBytesMax = 1024 * 1024;

/** The entry types npm packs. */
const packedTypes: ReadonlySet<string> = new Set(['File', 'OldFile', 'ContiguousFile', 'Directory']);

export interface TarballEntry {
  path: string;
  /** node-tar's type name: File, Directory, SymbolicLink, Link, ... */
  type: string;
  size: number;
  /** Where a link points. */
  linkpath?: string;
}

/** A tarball refused as no npm package; `activating`: said by a node receiving it, which then activates nothing. */
const notPackage = (message: string, activating = true): ShoalError =>
  new ShoalError('release_refused', `${message}${activating ? '; nothing was activated' : ''}`, { reason: 'not_package' });

/** Why `e` has no place in an npm package, or undefined when it has. */
export function entryProblem(e: TarballEntry): string | undefined {
  if (e.path.startsWith('/') || !e.path.startsWith('package/') || e.path.split('/').includes('..')) {
    return `the tarball holds '${e.path}', outside package/: it is not an npm package`;
  }
  if (!packedTypes.has(e.type)) {
    const what = e.linkpath !== undefined ? `${e.path} -> ${e.linkpath}` : `${e.path}, ${e.type}`;
    return `the tarball holds an entry that is not a file or a folder (${what}): npm packs none`;
  }
  return undefined;
}

function readFailure(tarball: string, err: unknown, activating = true): ShoalError {
  return err instanceof ShoalError ? err : notPackage(`${tarball} is not a readable gzipped tarball (${(err as Error).message})`, activating);
}

/** Every entry of `tarball`; refuses more than tarballEntriesMax, or an archive that does not read. */
export async function listTarball(tarball: string): Promise<TarballEntry[]> {
  const entries: TarballEntry[] = [];
  let tooMany = false;
  const onReadEntry = (e: ReadEntry): void => {
    if (entries.length >= tarballEntriesMax) {
      tooMany = true;
      return;
    }
    entries.push({ path: e.path, type: e.type, size: e.size, ...(e.linkpath !== undefined && e.linkpath !== '' ? { linkpath: e.linkpath } : {}) });
  };
  const { list } = await import('tar');
  try {
    await list({ file: tarball, strict: true, onReadEntry });
  } catch (err) {
    throw readFailure(tarball, err);
  }
  if (tooMany) throw notPackage(`the tarball holds more than ${tarballEntriesMax} entries (tarballEntriesMax)`);
  return entries;
}

/** Refuses `tarball` unless every entry is a file or a folder under package/, within the limits. */
export async function checkPackageTarball(tarball: string): Promise<void> {
  const entries = await listTarball(tarball);
  for (const e of entries) {
    const problem = entryProblem(e);
    if (problem !== undefined) throw notPackage(problem);
  }
  const bytes = entries.reduce((sum, e) => sum + e.size, 0);
  if (bytes > tarballUnpackedBytesMax) throw notPackage(`the tarball unpacks to ${bytes} bytes, more than ${tarballUnpackedBytesMax} (tarballUnpackedBytesMax)`);
}

/**
 * Unpacks `tarball` into `dir` (its package/ folder) once checkPackageTarball passes; files are
 * owned by this process's user, whatever the archive says. The same check filters each entry as
 * it is written, so an archive changed between the two reads still writes nothing outside.
 */
export async function extractPackageTarball(tarball: string, dir: string): Promise<void> {
  await checkPackageTarball(tarball);
  let refused: string | undefined;
  const filter = (_path: string, e: unknown): boolean => {
    const r = e as ReadEntry;
    const problem = entryProblem({ path: r.path, type: r.type, size: r.size, ...(r.linkpath ? { linkpath: r.linkpath } : {}) });
    refused ??= problem;
    return problem === undefined;
  };
  const { extract } = await import('tar');
  try {
    await extract({ file: tarball, cwd: dir, strict: true, preserveOwner: false, filter });
  } catch (err) {
    throw readFailure(tarball, err);
  }
  if (refused !== undefined) throw notPackage(refused);
}

/** The text of package/package.json in `tarball` (for the CLI, before anything is sent); refuses a tarball without one. */
export async function readTarballPackageJson(tarball: string): Promise<string> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  let found = false;
  const onReadEntry = (e: ReadEntry): void => {
    found = true;
    e.on('data', (b: Buffer) => {
      bytes += b.length;
      if (bytes <= packageJsonBytesMax) chunks.push(b);
    });
  };
  const { list } = await import('tar');
  try {
    await list({ file: tarball, strict: true, filter: (p) => p === 'package/package.json', onReadEntry });
  } catch (err) {
    throw readFailure(tarball, err, false);
  }
  if (!found) throw notPackage(`${tarball} holds no package/package.json`, false);
  if (bytes > packageJsonBytesMax) throw notPackage(`package/package.json in ${tarball} is larger than ${packageJsonBytesMax} bytes`, false);
  return Buffer.concat(chunks).toString('utf8');
}
