// The image Docker tests run: Debian's static busybox (package busybox-static, /bin/busybox)
// alone in a root filesystem, with a symlink per applet (sh, sleep, true, false, echo, ...),
// imported with `docker import` (POST /images/create?fromSrc=-) as shoal-test/busybox:local, the
// way `shoal dev demo-image` makes its image (src/executor/busybox-image.ts).
// Tests never pull from a registry: there is none on CI, and pulls would make them slow and
// flaky. Building is idempotent (an image already there is left alone) and takes a second.
//
// shoal-test/sqlite:local is the same with Debian's sqlite3 (package sqlite3) and the shared
// libraries ldd names for it, copied from this machine: a real database engine for the replicated
// volume test (test/system/replicated-volume.test.ts).

import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import Docker from 'dockerode';
import { busyboxPath, ensureBusyboxImage, imageExists, type ImageFile } from '../../src/executor/busybox-image.ts';
import { defaultSocketPath } from './dockerd.ts';

export const testImage = 'shoal-test/busybox:local';

/**
 * Makes sure `shoal-test/busybox:local` exists (importing it when absent) and that each of
 * `extraTags` (full references, `repo:tag`) names it too. Returns the image reference.
 */
export async function ensureTestImage(extraTags: readonly string[] = [], socketPath = defaultSocketPath): Promise<string> {
  const docker = new Docker({ socketPath });
  await ensureBusyboxImage(docker, testImage);
  for (const ref of extraTags) {
    if (await imageExists(docker, ref)) continue;
    const at = ref.lastIndexOf(':');
    await docker.getImage(testImage).tag({ repo: ref.slice(0, at), tag: ref.slice(at + 1) });
  }
  return testImage;
}

/** Removes a tag made by ensureTestImage (the image itself stays while another tag names it). */
export async function removeTestTag(ref: string, socketPath = defaultSocketPath): Promise<void> {
  const docker = new Docker({ socketPath });
  try {
    await docker.getImage(ref).remove({ noprune: true });
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode !== 404) throw err;
  }
}

export const sqliteTestImage = 'shoal-test/sqlite:local';
export const sqlitePath = '/usr/bin/sqlite3';
const sqliteMissing = `${sqlitePath} is missing: install Debian's sqlite3 (apt-get install --no-install-recommends sqlite3; npm run test:setup does)`;

/** The shared libraries (and the loader) `ldd` names for `program`, by their absolute paths. */
export function sharedLibraries(program: string): string[] {
  const r = spawnSync('ldd', [program], { encoding: 'utf8', timeout: 10_000 });
  if (r.status !== 0) throw new Error(`ldd ${program}: ${r.stderr || r.error?.message}`);
  const out: string[] = [];
  for (const line of r.stdout.split('\n')) {
    // `libz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x...)` or `/lib64/ld-linux-x86-64.so.2 (0x...)`; not linux-vdso.
    const m = /(?:=>\s*)?(\/\S+)\s+\(0x[0-9a-f]+\)/.exec(line);
    if (m?.[1] !== undefined) out.push(m[1]);
  }
  if (out.length === 0) throw new Error(`ldd ${program} named no library: ${r.stdout}`);
  return out;
}

/** Makes sure `shoal-test/sqlite:local` exists: the busybox image with /bin/sqlite3 and its libraries at their paths. */
export async function ensureSqliteTestImage(socketPath = defaultSocketPath): Promise<string> {
  if (!existsSync(sqlitePath)) throw new Error(sqliteMissing);
  const files: ImageFile[] = [{ from: sqlitePath, to: '/bin/sqlite3' }, ...sharedLibraries(sqlitePath).map((lib) => ({ from: lib, to: lib }))];
  await ensureBusyboxImage(new Docker({ socketPath }), sqliteTestImage, busyboxPath, files);
  return sqliteTestImage;
}
