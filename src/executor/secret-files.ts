// Where a node's agent puts the secrets a task's container reads (docs/resources.md, "Secrets").
// Before creating the container, the agent writes each secret the task's spec names to
// `<tmpfs>/shoal-<node id>/<task id>/<target>` (directories 0700, each file the mode its
// reference asks, 0400 by default, owned by its uid/gid, root by default) and bind-mounts the
// file read-only at /run/secrets/<target>.
// A target that is an absolute path (a Compose config at /etc/app/app.conf) is written to
// `<task dir>/+paths/<n>` (n: its place among the task's absolute targets; `+` is in no file
// name target, so the two never meet) and bind-mounted read-only at that path.
// The directory must be on a tmpfs (config `secrets.tmpfsDir`, default /dev/shm): a decrypted
// value never reaches a disk, and a reboot leaves none behind. The files of a task go once no
// container of the task is left on the node (retain, every pass), so a value is there only while
// something may read it, and a restarted container (the same one) finds its files where they were.
// Releases before secrets at rest wrote them under `<data dir>/secrets`: those of containers
// still running there are kept the same way, and go with their containers.

import { mkdir, open, readdir, rm, statfs } from 'node:fs/promises';
import path from 'node:path';
import type { MountSpec } from '../resources/spec/service-spec.ts';

/** Where the files appear in a container. */
export const secretsMountDir = '/run/secrets';

export interface SecretFile {
  /** The file's name (a spec reference's target: no `/`, not `.` or `..`), or an absolute container path. */
  target: string;
  /** Permission bits. */
  mode: number;
  /** The file's owner and group (numbers; absent: 0, root, the agent's own). */
  uid?: number;
  gid?: number;
  bytes: Uint8Array;
}

/** The agent's port to a node's secret files. */
export interface SecretFiles {
  /** Writes a task's files (replacing any it had) and answers the read-only mounts that show them in its container. */
  write(taskId: string, files: readonly SecretFile[]): Promise<MountSpec[]>;
  /** Removes the files of every task not in `taskIds`; answers the tasks whose files it removed. */
  retain(taskIds: ReadonlySet<string>): Promise<string[]>;
}

const safeName = /^(?!\.\.?$)[A-Za-z0-9._-]{1,255}$/;

function checkName(what: string, name: string): void {
  // Task ids and targets are validated where they enter; a path built from one must still never leave the directory.
  if (!safeName.test(name)) throw new Error(`assertion: ${what} ${JSON.stringify(name)} cannot name a file`);
}

function mountOf(source: string, target: string): MountSpec {
  return { type: 'bind', source, target: target.startsWith('/') ? target : `${secretsMountDir}/${target}`, readOnly: true };
}

/** The directory of a task's files at absolute targets (a name no file name target can have). */
const pathsDir = '+paths';

/** Each file's name in the task's directory: its target, or `+paths/<n>` for an absolute target. */
function fileNames(files: readonly SecretFile[]): string[] {
  let n = 0;
  return files.map((f) => {
    if (!f.target.startsWith('/')) {
      checkName('secret target', f.target);
      return f.target;
    }
    // Validated where it enters (an absolute clean path); it never names a file on the node.
    if (f.target.split('/').includes('..')) throw new Error(`assertion: secret target ${JSON.stringify(f.target)} is not a clean path`);
    return path.join(pathsDir, String(n++));
  });
}

// statfs(2) f_type of the memory file systems (linux/magic.h).
const memoryFileSystems = new Map([[0x01021994, 'tmpfs'], [0x858458f6, 'ramfs']]);

/** Throws unless `dir` is on a tmpfs or ramfs (so what is written there never reaches a disk). */
export async function checkTmpfs(dir: string): Promise<void> {
  const { type } = await statfs(dir);
  if (!memoryFileSystems.has(type)) {
    throw new Error(`${dir} is not on a tmpfs (file system type 0x${type.toString(16)}); a decrypted secret must not be written to a disk: set secrets.tmpfsDir in the node's config to a tmpfs (/dev/shm, /run)`);
  }
}

/**
 * The files in `dir`, which must be on a tmpfs (`<secrets.tmpfsDir>/shoal-<node id>`); `legacyDir`
 * (`<data dir>/secrets`, where releases before secrets at rest wrote them) is only cleaned up.
 */
export class DiskSecretFiles implements SecretFiles {
  constructor(private readonly dir: string, private readonly legacyDir?: string) {}

  async write(taskId: string, files: readonly SecretFile[]): Promise<MountSpec[]> {
    checkName('task id', taskId);
    const names = fileNames(files);
    await checkTmpfs(path.dirname(this.dir));
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const taskDir = path.join(this.dir, taskId);
    // A new container of the task reads these: the files an older release left on the disk for
    // the task's earlier container go now.
    if (this.legacyDir !== undefined) await rm(path.join(this.legacyDir, taskId), { recursive: true, force: true });
    // A create that failed after writing leaves files behind; start from nothing.
    await rm(taskDir, { recursive: true, force: true });
    await mkdir(taskDir, { mode: 0o700 });
    const mounts: MountSpec[] = [];
    if (names.some((n) => n.startsWith(`${pathsDir}/`))) await mkdir(path.join(taskDir, pathsDir), { mode: 0o700 });
    for (const [i, f] of files.entries()) {
      const file = path.join(taskDir, names[i] ?? f.target);
      // Created owner-only and written, then given its mode: never readable by others, even for a moment.
      const handle = await open(file, 'wx', 0o600);
      try {
        await handle.writeFile(f.bytes);
        // Given to its owner before its mode: until then only root (the agent) can read it.
        // The agent runs as root, so it may; ids are the container's (no user namespace remapping).
        if ((f.uid ?? 0) !== 0 || (f.gid ?? 0) !== 0) await handle.chown(f.uid ?? 0, f.gid ?? 0);
        await handle.chmod(f.mode);
      } finally {
        await handle.close();
      }
      mounts.push(mountOf(file, f.target));
    }
    return mounts;
  }

  async retain(taskIds: ReadonlySet<string>): Promise<string[]> {
    const removed = await retainIn(this.dir, taskIds);
    if (this.legacyDir !== undefined) removed.push(...await retainIn(this.legacyDir, taskIds));
    return removed;
  }
}

async function retainIn(dir: string, taskIds: ReadonlySet<string>): Promise<string[]> {
  let entries: string[];
  try {
    entries = await readdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  const removed = entries.filter((e) => !taskIds.has(e));
  for (const e of removed) await rm(path.join(dir, e), { recursive: true, force: true });
  return removed;
}

/** Files kept in memory, for the memory runtime (tests, the simulator, `--runtime memory`). */
export class MemorySecretFiles implements SecretFiles {
  private readonly tasks = new Map<string, Map<string, SecretFile>>();

  async write(taskId: string, files: readonly SecretFile[]): Promise<MountSpec[]> {
    checkName('task id', taskId);
    const names = fileNames(files);
    this.tasks.set(taskId, new Map(files.map((f) => [f.target, { ...f, bytes: Uint8Array.from(f.bytes) }])));
    return files.map((f, i) => mountOf(`memory:secrets/${taskId}/${names[i] ?? f.target}`, f.target));
  }

  async retain(taskIds: ReadonlySet<string>): Promise<string[]> {
    const removed = [...this.tasks.keys()].filter((t) => !taskIds.has(t));
    for (const t of removed) this.tasks.delete(t);
    return removed;
  }

  /** A task's file, as its container would read it; undefined when absent. */
  read(taskId: string, target: string): SecretFile | undefined {
    return this.tasks.get(taskId)?.get(target);
  }

  /** The tasks that have files. */
  taskIds(): string[] {
    return [...this.tasks.keys()].sort();
  }
}
