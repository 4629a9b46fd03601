// The lease on disk, and the fence that lives with each exclusive container
// (docs/control-plane.md, "Exclusive services": why this fence).
//
// The agent keeps one file per epoch in the node's lease directory (`<data dir>/lease/epoch-<N>`):
// the boot-clock time, in hundredths of a second (the unit of /proc/uptime), until which the
// lease of that epoch holds, then the machine's boot id. Written to a temporary name and renamed,
// so a reader never sees half of it.
//
// The directory is bind-mounted read-only into every exclusive container, and the container's
// command runs under `fence.sh` (below) as its first process: it starts the command, and every
// `fencePollMs` compares /proc/uptime (the same CLOCK_BOOTTIME, the kernel's, not namespaced by
// Docker) with the file of the container's epoch. Once the lease has run out (or the file is
// gone) it SIGKILLs every other process of the container and exits, which stops the container.
// It needs nothing from shoal's process, so it kills on time when the agent is frozen (SIGSTOP),
// killed (kill -9, OOM) or cut off; it needs a POSIX shell in the image (`/bin/sh`: busybox,
// Alpine, Debian; not distroless or scratch images).
//
// A restarted agent reads the file back (same boot id only: after a reboot /proc/uptime starts
// again from zero, and an old file would look valid).

import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { LeaseStore } from './lease-keeper.ts';

/** Where the lease directory appears inside an exclusive container. */
export const fenceMountPath = '/run/shoal-lease';
/** How often the fence looks at the lease (its share of the kill time in the margin). */
export const fencePollMs = 200;

/** The fence: `sh fence.sh <lease file> <command> [args...]`. POSIX sh (busybox ash, dash, bash). */
export const fenceScript = `#!/bin/sh
# shoal's fence for an exclusive task (docs/control-plane.md, "Exclusive services").
# Runs the task's command, and kills every process of the container once the node's lease,
# kept fresh by shoal's agent in "$1", has run out on CLOCK_BOOTTIME (/proc/uptime).
lease="$1"
shift
"$@" &
child=$!
for sig in TERM INT HUP QUIT USR1 USR2 WINCH; do
  trap "kill -$sig \\"\\$child\\" 2>/dev/null" "$sig"
done
while kill -0 "$child" 2>/dev/null; do
  read -r up idle < /proc/uptime
  now="\${up%.*}\${up#*.}"
  exp=0
  { read -r exp boot < "$lease"; } 2>/dev/null || exp=0
  if [ "$now" -ge "$exp" ]; then
    echo "shoal fence: the lease ran out; killing the task" >&2
    kill -KILL -1 2>/dev/null
    exit 137
  fi
  sleep ${fencePollMs / 1000}
done
wait "$child"
`;

/** The lease file of `epoch` in `dir`. */
export function leaseFileOf(dir: string, epoch: number): string {
  return path.join(dir, `epoch-${epoch}`);
}

/** The machine's boot id (a fresh one at every boot). */
export function readBootId(): string {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    return 'unknown';
  }
}

export class FileLeaseStore implements LeaseStore {
  private readonly bootId = readBootId();

  /** Creates the directory and writes the fence script into it. */
  constructor(readonly dir: string) {
    mkdirSync(dir, { recursive: true, mode: 0o755 });
    writeFileSync(path.join(dir, 'fence.sh'), fenceScript, { mode: 0o755 });
  }

  write(epoch: number, untilBootMs: number): void {
    const file = leaseFileOf(this.dir, epoch);
    const tmp = `${file}.tmp`;
    // Hundredths rounded down: the fence never believes in more than the agent holds.
    writeFileSync(tmp, `${Math.floor(untilBootMs / 10)} ${this.bootId}\n`, { mode: 0o644 });
    renameSync(tmp, file);
  }

  read(epoch: number): number | null {
    let text: string;
    try {
      text = readFileSync(leaseFileOf(this.dir, epoch), 'utf8');
    } catch {
      return null;
    }
    const m = /^(\d+) (\S+)\n?$/.exec(text);
    if (m === null || m[2] !== this.bootId) return null;
    return Number(m[1]) * 10;
  }
}
