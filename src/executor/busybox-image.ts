// A Docker image made on this machine, for a machine with no registry: Debian's static busybox
// (package busybox-static, /bin/busybox) alone in a root filesystem, with a symlink per applet
// (sh, sleep, httpd, ...), imported with `docker import` (POST /images/create?fromSrc=-).
// `shoal dev demo-image` makes shoal-demo/busybox:local with it (docs/examples/web-local.yaml runs
// that image), and the Docker tests make shoal-test/busybox:local (test/executor/test-image.ts).
// An image already there is left alone; an import takes about a second. More files of the
// machine may be copied in (a dynamically linked program and the libraries ldd names: the tests'
// SQLite image, test/executor/test-image.ts).

import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type Docker from 'dockerode';
import { runCommand } from '../base/run-command.ts';

export const busyboxPath = '/bin/busybox';
export const busyboxMissing = `${busyboxPath} is missing: install Debian's busybox-static (sudo apt-get install --no-install-recommends busybox-static)`;

const importTimeoutMs = 60_000;
const listTimeoutMs = 10_000;

async function applets(busybox: string): Promise<string[]> {
  let stdout: string;
  try {
    ({ stdout } = await runCommand(busybox, ['--list'], { timeoutMs: listTimeoutMs }));
  } catch (err) {
    throw new Error(`${busybox} --list failed (${(err as Error).message}); ${busyboxMissing}`);
  }
  return stdout.split('\n').map((s) => s.trim()).filter((s) => /^[a-z0-9_.[-]+$/.test(s) && s !== 'busybox');
}

/** A file of this machine copied into the image: `from` (symlinks followed) to `to` in the image. */
export interface ImageFile {
  from: string;
  to: string;
}

/** A root filesystem in a fresh temporary directory: bin/busybox, its applets, /etc/passwd, /tmp, and `extra`. */
async function buildRootfs(busybox: string, extra: readonly ImageFile[]): Promise<string> {
  if (!existsSync(busybox)) throw new Error(busyboxMissing);
  const names = await applets(busybox);
  const root = mkdtempSync(path.join(os.tmpdir(), 'shoal-busybox-'));
  mkdirSync(path.join(root, 'bin'));
  mkdirSync(path.join(root, 'etc'));
  mkdirSync(path.join(root, 'tmp'));
  chmodSync(path.join(root, 'tmp'), 0o1777); // not through mkdir's mode, which the umask narrows
  copyFileSync(busybox, path.join(root, 'bin', 'busybox'));
  for (const name of names) symlinkSync('busybox', path.join(root, 'bin', name));
  // Named users resolve only through /etc/passwd; specs and tests use `nobody`.
  writeFileSync(path.join(root, 'etc', 'passwd'), 'root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n');
  writeFileSync(path.join(root, 'etc', 'group'), 'root:x:0:\nnogroup:x:65534:\n');
  for (const f of extra) {
    if (!path.isAbsolute(f.to) || f.to.split('/').includes('..')) throw new Error(`${f.to}: a file in the image is named by an absolute path without ..`);
    mkdirSync(path.join(root, path.dirname(f.to)), { recursive: true });
    copyFileSync(f.from, path.join(root, f.to)); // the mode comes along
  }
  return root;
}

export async function imageExists(docker: Docker, ref: string): Promise<boolean> {
  try {
    await docker.getImage(ref).inspect();
    return true;
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode === 404) return false;
    throw err;
  }
}

async function importRootfs(docker: Docker, root: string, ref: string): Promise<void> {
  const at = ref.lastIndexOf(':');
  const [repo, tag] = at > 0 ? [ref.slice(0, at), ref.slice(at + 1)] : [ref, 'latest'];
  // node-tar packs the tree in process (its symlinks kept as links), streamed into the import.
  // node-tar loads here, on the first import of the image, not with every node (issue 45).
  const { create: createTar } = await import('tar');
  const tar = createTar({ cwd: root, portable: true }, ['.']);
  const stream = await docker.importImage(tar as unknown as NodeJS.ReadableStream, {
    repo, tag, changes: ['CMD ["sh"]', 'ENV PATH=/bin'], abortSignal: AbortSignal.timeout(importTimeoutMs),
  });
  await new Promise<void>((resolve, reject) => {
    docker.modem.followProgress(stream, (err: Error | null, out: Array<{ error?: string }>) => {
      const failed = out?.find((o) => o.error !== undefined);
      if (err ?? failed) reject(err ?? new Error(failed?.error));
      else resolve();
    });
  });
}

/**
 * Makes sure `ref` names a busybox image on this Docker daemon, importing one from `busybox`
 * when it is absent, with `extra` copied in. Says which it did; throws, saying what to install,
 * when busybox is missing.
 */
export async function ensureBusyboxImage(docker: Docker, ref: string, busybox = busyboxPath, extra: readonly ImageFile[] = []): Promise<'present' | 'imported'> {
  if (await imageExists(docker, ref)) return 'present';
  const root = await buildRootfs(busybox, extra);
  try {
    await importRootfs(docker, root, ref);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  return 'imported';
}
