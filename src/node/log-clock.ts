// The leader's log clock (feature level 2): the time stamped into every entry the leader
// appends, which the store's idempotency windows are measured in.
//
// The first release took log time from every proposer's wall clock (the largest stamp applied),
// so one node whose clock ran a day ahead expired every idempotency record in the cluster, and
// followers stamp their own writes, so any node's clock counted. Now only the leader stamps, and
// from its monotonic clock: when a node becomes leader its clock starts at the log time it has
// applied and advances with `performance.now()`, which no wall-clock step or skew moves. A new
// leader starts from its applied log time, so log time never goes back (the store also keeps the
// maximum) and no clock can push it ahead. The price: log time does not advance while the cluster
// has no leader (a whole-cluster outage does not count toward a window), and it trails wall
// time by the election gaps; documented in docs/api.md (idempotency).

export class LogClock {
  private base = 0;
  private startedAt = 0;
  private running = false;

  /**
   * Starts the clock at `appliedLogTimeMs`, the log time this node has applied. A cluster that
   * never stamped one (0) starts from `wallNowMs`, once in its life, so its log time is near the
   * calendar.
   */
  start(appliedLogTimeMs: number, monoNowMs: number, wallNowMs: number): void {
    this.base = appliedLogTimeMs > 0 ? appliedLogTimeMs : Math.max(0, Math.floor(wallNowMs));
    this.startedAt = monoNowMs;
    this.running = true;
  }

  stop(): void {
    this.running = false;
  }

  /** The log time to stamp now, or undefined when this node is not stamping (not leader). */
  now(monoNowMs: number): number | undefined {
    if (!this.running) return undefined;
    return this.base + Math.max(0, Math.floor(monoNowMs - this.startedAt));
  }
}
