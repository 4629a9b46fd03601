// Whether a process id names a running process (a lock file's owner: the storage lock, shoal dev's).

/** True when `pid` runs now; also when it runs as another user (the kill is refused, EPERM, but it exists). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
