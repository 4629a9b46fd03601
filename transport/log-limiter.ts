// A peer that keeps failing in the same way (down, wrong CA, wrong cluster) is retried every
// couple of seconds; logging each attempt at warn would bury everything else. The first
// occurrence of a key in a window goes out at warn, repeats at debug.

export class RepeatLimiter {
  private readonly lastWarnAt = new Map<string, number>();

  constructor(
    private readonly windowMs: number,
    private readonly now: () => number = Date.now,
    /** Bounds the map: a flood of distinct keys (many addresses) cannot grow it without end. */
    private readonly keysMax = 1024,
  ) {}

  /** True when `key` has not been let through within the window; records that it now has. */
  first(key: string): boolean {
    const t = this.now();
    const last = this.lastWarnAt.get(key);
    if (last !== undefined && t - last < this.windowMs) return false;
    if (this.lastWarnAt.size >= this.keysMax) this.lastWarnAt.clear();
    this.lastWarnAt.set(key, t);
    return true;
  }

  /** Forget a key, so the next failure after a recovery is reported at warn again. */
  forget(key: string): void {
    this.lastWarnAt.delete(key);
  }
}
