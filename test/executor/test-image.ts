// The image Docker tests run: Debian's static busybox (package busybox-static, /bin/busybox)
// alone in a root filesystem, with a symlink per applet (sh, sleep, true, false, echo, ...),
// imported with `docker import` (POST /images/create?fromSrc=-) as shoal-test/busybox:local.
// Tests never pull from a registry: there is none on CI, and pulls would make them slow and
// flaky. Building is idempotent (an image already there is left alone) and takes a second.

import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Docker from 'dockerode';
import { defaultSocketPath } from './dockerd.ts';

export const testImage = 'shoal-test/busybox:local';
export const busyboxPath = '/bin/busybox';

const importTimeoutMs = 60_000;

function applets(): string[] {
  const r = spawnSync(busyboxPath, ['--list'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${busyboxPath} --list failed; install busybox-static (.ci/run does this)`);
  return r.stdout.split('\n').map((s) => s.trim()).filter((s) => /^[a-z0-9_.[-]+$/.test(s) && s !== 'busybox');
}

/** A root filesystem in a fresh temporary directory: bin/busybox, its applets, /etc/passwd, /tmp. */
function buildRootfs(): string {
  if (!existsSync(busyboxPath)) throw new Error(`${busyboxPath} is missing: apt-get install -y busybox-static (.ci/run does this)`);
  const root = mkdtempSync(path.join(os.tmpdir(), 'shoal-busybox-'));
  mkdirSync(path.join(root, 'bin'));
  mkdirSync(path.join(root, 'etc'));
  mkdirSync(path.join(root, 'tmp'), { mode: 0o1777 });
  copyFileSync(busyboxPath, path.join(root, 'bin', 'busybox'));
  for (const name of applets()) symlinkSync('busybox', path.join(root, 'bin', name));
  // Named users resolve only through /etc/passwd; tests use `nobody`.
  writeFileSync(path.join(root, 'etc', 'passwd'), 'root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n');
  writeFileSync(path.join(root, 'etc', 'group'), 'root:x:0:\nnogroup:x:65534:\n');
  return root;
}

async function imageExists(docker: Docker, ref: string): Promise<boolean> {
  try {
    await docker.getImage(ref).inspect();
    return true;
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode === 404) return false;
    throw err;
  }
}

async function importRootfs(docker: Docker, root: string, ref: string): Promise<void> {
  const [repo, tag] = ref.split(':') as [string, string];
  const tar = spawn('tar', ['-C', root, '-cf', '-', '.'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const tarDone = new Promise<void>((resolve, reject) => {
    tar.once('error', reject);
    tar.once('close', (code) => (code === 0 ? resolve() : reject(new Error(`tar exited with ${code}`))));
  });
  const stream = await docker.importImage(tar.stdout, {
    repo, tag, changes: ['CMD ["sh"]', 'ENV PATH=/bin'], abortSignal: AbortSignal.timeout(importTimeoutMs),
  });
  await new Promise<void>((resolve, reject) => {
    docker.modem.followProgress(stream, (err: Error | null, out: Array<{ error?: string }>) => {
      const failed = out?.find((o) => o.error !== undefined);
      if (err ?? failed) reject(err ?? new Error(failed?.error));
      else resolve();
    });
  });
  await tarDone;
}

/**
 * Makes sure `shoal-test/busybox:local` exists (importing it when absent) and that each of
 * `extraTags` (full references, `repo:tag`) names it too. Returns the image reference.
 */
export async function ensureTestImage(extraTags: readonly string[] = [], socketPath = defaultSocketPath): Promise<string> {
  const docker = new Docker({ socketPath });
  if (!(await imageExists(docker, testImage))) {
    const root = buildRootfs();
    try {
      await importRootfs(docker, root, testImage);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  }
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
