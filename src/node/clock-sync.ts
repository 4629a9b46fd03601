// Whether this machine's clock is synchronized (NTP), for the jobs' clock rule
// (src/control/clock-sanity.ts). Read off the hot path: a refresh every minute runs
// `timedatectl show -p NTPSynchronized --value` (the kernel's "clock synchronized" flag as systemd
// reports it, whichever daemon sets the time: systemd-timesyncd, chrony, ntpd) with a short
// timeout; the rule reads the cached answer. Without systemd (a container, this project's CI),
// or when timedatectl fails, the status is unknown, and an unknown status never holds jobs.

import { runCommand } from '../base/run-command.ts';

/** How often the status is read again. */
export const clockSyncRefreshMs = 60_000;
/**
 * How long after start() the first read waits: a spawn is 8-14 ms of a node's start (the fork
 * of a process with its heap mapped; issue 45), and the rule (clock-watch.ts) first looks 5 s
 * after its own start. Until read, the status is unknown, which never holds jobs.
 */
export const clockSyncFirstReadMs = 1_000;
/** How long one `timedatectl` may take. */
const timedatectlTimeoutMs = 2_000;

/** true / false: what the system says; undefined: it could not tell. */
export type ClockSyncReader = () => Promise<boolean | undefined>;

/** Parses `timedatectl show -p NTPSynchronized --value`: "yes" or "no"; anything else is unknown. */
export function parseNtpSynchronized(stdout: string): boolean | undefined {
  const v = stdout.trim();
  if (v === 'yes') return true;
  if (v === 'no') return false;
  return undefined;
}

export const readTimedatectl: ClockSyncReader = async () => {
  try {
    const r = await runCommand('timedatectl', ['show', '-p', 'NTPSynchronized', '--value'], { timeoutMs: timedatectlTimeoutMs, stdoutBytesMax: 1024 });
    return parseNtpSynchronized(r.stdout);
  } catch {
    return undefined;
  }
};

/** The cached status, read `firstReadMs` after start() and every `refreshMs` after; `close()` stops it. */
export class ClockSyncStatus {
  private value: boolean | undefined;
  private timer: NodeJS.Timeout | null = null;
  private reading = false;
  private closed = false;

  constructor(
    private readonly read: ClockSyncReader = readTimedatectl,
    private readonly refreshMs = clockSyncRefreshMs,
    private readonly firstReadMs = clockSyncFirstReadMs,
  ) {}

  /** true / false: what the system said at the last refresh; undefined: unknown (or not read yet). */
  get synchronized(): boolean | undefined {
    return this.value;
  }

  start(): void {
    if (this.closed || this.timer !== null) return;
    this.timer = setTimeout(() => {
      void this.refresh();
      this.timer = setInterval(() => void this.refresh(), this.refreshMs);
      this.timer.unref();
    }, this.firstReadMs);
    this.timer.unref();
  }

  /** Reads the status now (one read at a time); resolves once read. */
  async refresh(): Promise<void> {
    if (this.reading || this.closed) return;
    this.reading = true;
    try {
      const v = await this.read().catch(() => undefined);
      if (!this.closed) this.value = v;
    } finally {
      this.reading = false;
    }
  }

  close(): void {
    this.closed = true;
    // clearInterval clears the first read's timeout as well (one kind of timer in Node.js).
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }
}
