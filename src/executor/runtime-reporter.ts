// Writes the node's runtime status (up, or unavailable with the error) to its node record:
// only the newest value, only when it changed or the store shows another, retried with backoff.

import type { RuntimeStatus } from '../resources/records.ts';
import { backoffDelayMs } from '../base/backoff.ts';
import type { Clock, Timer } from './clock.ts';
import { errorText } from './status-reporter.ts';

export interface NodeRuntimeReport {
  status: Exclude<RuntimeStatus, 'unknown'>;
  /** Why it is unavailable, as the agent saw it; null when up. */
  error: string | null;
  /** The runtime's kind ('docker', 'memory'), shown in `shoal node ls`. */
  kind: string;
}

export interface RuntimeStatusWriter {
  reportNodeRuntime(report: NodeRuntimeReport): Promise<void>;
}

export interface RuntimeReporterOptions {
  writer: RuntimeStatusWriter;
  clock: Clock;
  log: { warn(msg: string): void };
  backoffMinMs: number;
  backoffMaxMs: number;
}

export function sameRuntimeReport(a: NodeRuntimeReport, b: NodeRuntimeReport): boolean {
  return a.status === b.status && a.error === b.error && a.kind === b.kind;
}

export class RuntimeReporter {
  private wanted: NodeRuntimeReport | null = null;
  private written: NodeRuntimeReport | null = null;
  private timer: Timer | null = null;
  private writing: Promise<void> | null = null;
  private failures = 0;
  private closed = false;

  constructor(private readonly opts: RuntimeReporterOptions) {}

  /** The value the store should hold; `stored` is what this node's store holds now (null: no record yet). */
  want(report: NodeRuntimeReport, stored: { status: RuntimeStatus; error: string | null } | null): void {
    if (this.closed) return;
    if (stored !== null && stored.status === report.status && stored.error === report.error) {
      this.wanted = null;
      return;
    }
    // Written and not applied here yet: the store catches up (resync() forces a rewrite).
    if (this.written !== null && sameRuntimeReport(this.written, report)) return;
    if (this.wanted !== null && sameRuntimeReport(this.wanted, report)) return;
    this.wanted = report;
    this.schedule(0);
  }

  /** Forgets what was written, so a store that still differs is written again (the slow resync). */
  resync(): void {
    this.written = null;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.timer?.cancel();
    this.timer = null;
    if (this.writing !== null) await this.writing;
  }

  private schedule(delayMs: number): void {
    if (this.closed || this.timer !== null || this.writing !== null || this.wanted === null) return;
    this.timer = this.opts.clock.setTimer(delayMs, () => {
      this.timer = null;
      this.writing = this.write().finally(() => {
        this.writing = null;
        this.schedule(backoffDelayMs(this.failures, this.opts.backoffMinMs, this.opts.backoffMaxMs));
      });
    });
  }

  private async write(): Promise<void> {
    const report = this.wanted;
    if (report === null) return;
    try {
      await this.opts.writer.reportNodeRuntime(report);
      this.failures = 0;
      this.written = report;
      if (this.wanted === report) this.wanted = null;
    } catch (err) {
      this.failures++;
      if (this.failures === 1) this.opts.log.warn(`agent: writing the runtime status failed (${errorText(err)}); retrying with backoff`);
    }
  }
}
