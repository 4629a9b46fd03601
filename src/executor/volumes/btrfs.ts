// The programs the volume engine runs (docs/volumes.md): mkfs.btrfs, mount, umount, mountpoint
// and btrfs, through the one command runner (arguments as arrays, a timeout, bounded output),
// each failure turned into `volume_tool_failed` with the command line and its stderr.
//
// Streams never pass through a pipe of ours: `btrfs send -f FILE` writes the increment to a
// file and `btrfs receive -f FILE` reads one, so the runner's bounded output holds, the stream's
// sha256 and length are taken from the file, and a transfer can be retried from it.

import { ShoalError } from '../../errors.ts';
import { isCommandError, runCommand, type RunOptions } from '../../base/run-command.ts';

/** Timeouts, by what the call does: metadata operations are quick; a send or receive moves the volume's data. */
export const btrfsTimeouts = { quickMs: 30_000, dataMs: 30 * 60_000 } as const;

/** Runs one program; a failure is `volume_tool_failed`. Exported for tests. */
export async function runVolumeTool(command: string, args: readonly string[], opts: Partial<RunOptions> = {}): Promise<string> {
  try {
    const r = await runCommand(command, args, { timeoutMs: btrfsTimeouts.quickMs, ...opts });
    return r.stdout;
  } catch (err) {
    if (!isCommandError(err)) throw err;
    const hint = err.reason === 'not_found' ? ` (install it: apt-get install --no-install-recommends ${command === 'btrfs' || command === 'mkfs.btrfs' ? 'btrfs-progs' : 'util-linux'})` : '';
    throw new ShoalError('volume_tool_failed', `${err.message}${hint}`, { command, args: [...args], reason: err.reason, stderr: err.stderrTail });
  }
}

/** Makes a btrfs filesystem in the (sparse) file `image`. */
export async function mkfs(image: string): Promise<void> {
  await runVolumeTool('mkfs.btrfs', ['-q', '-f', image]);
}

/** Whether `dir` is a mount point. */
export async function isMounted(dir: string): Promise<boolean> {
  const r = await runCommand('mountpoint', ['-q', dir], { timeoutMs: btrfsTimeouts.quickMs, nonZeroExit: 'return' }).catch((err: unknown) => {
    if (isCommandError(err)) throw new ShoalError('volume_tool_failed', err.message, { command: 'mountpoint', reason: err.reason });
    throw err;
  });
  return r.exitCode === 0;
}

/** Mounts the filesystem in `image` at `dir` through a loop device (freed again by umount). */
export async function mountLoop(image: string, dir: string): Promise<void> {
  await runVolumeTool('mount', ['-t', 'btrfs', '-o', 'loop,noatime', image, dir]);
}

export async function umount(dir: string): Promise<void> {
  await runVolumeTool('umount', [dir]);
}

export async function createSubvolume(path: string): Promise<void> {
  await runVolumeTool('btrfs', ['-q', 'subvolume', 'create', path]);
}

/** A snapshot of `source` at `dest`: read-only (a version) or writable (a restored live volume). */
export async function snapshot(source: string, dest: string, readOnly: boolean): Promise<void> {
  await runVolumeTool('btrfs', ['-q', 'subvolume', 'snapshot', ...(readOnly ? ['-r'] : []), source, dest]);
}

export async function deleteSubvolume(path: string): Promise<void> {
  await runVolumeTool('btrfs', ['-q', 'subvolume', 'delete', path]);
}

/** Writes the send stream of read-only snapshot `snap` to `file`, as an increment on `parent` when given. */
export async function send(snap: string, file: string, parent: string | null): Promise<void> {
  await runVolumeTool('btrfs', ['-q', 'send', '-f', file, ...(parent === null ? [] : ['-p', parent]), snap], { timeoutMs: btrfsTimeouts.dataMs });
}

/** Receives the stream in `file` into directory `dir` (it makes a read-only subvolume there). */
export async function receive(file: string, dir: string): Promise<void> {
  await runVolumeTool('btrfs', ['-q', 'receive', '-f', file, dir], { timeoutMs: btrfsTimeouts.dataMs });
}

/** Whether the subvolume at path is read-only (a version, or a receive that completed). */
export async function isReadOnly(path: string): Promise<boolean> {
  const out = await runVolumeTool('btrfs', ['property', 'get', '-ts', path, 'ro']);
  return out.trim() === 'ro=true';
}
