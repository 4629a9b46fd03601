// The last resort when a lease runs out and the runtime does not answer a kill: SIGKILL the
// container's first process by its host pid, as the runtime reported it while the container ran.
// A pid is reused once its process is gone, so the kill happens only if /proc says the process
// is still in a cgroup named after the container (Docker's cgroup paths carry the container id,
// under cgroup v1 and v2, with the systemd and cgroupfs drivers alike).

import { readFileSync } from 'node:fs';

/** 'killed', 'gone' (no such process, or no longer the container's), or throws on a refusal (EPERM). */
export function killContainerProcess(pid: number, containerId: string): 'killed' | 'gone' {
  if (!Number.isSafeInteger(pid) || pid <= 1) return 'gone';
  let cgroup: string;
  try {
    cgroup = readFileSync(`/proc/${pid}/cgroup`, 'utf8');
  } catch {
    return 'gone';
  }
  if (!cgroup.includes(containerId)) return 'gone';
  try {
    process.kill(pid, 'SIGKILL');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return 'gone';
    throw err;
  }
  return 'killed';
}
