// The agent's side of the exclusive-task lease (src/resources/lease.ts has the rule, and
// docs/control-plane.md the argument). While the node has exclusive work in an epoch, the keeper
// renews the node's lease every third of it: it notes the send time s on the boot clock
// (CLOCK_BOOTTIME, which counts time suspended), proposes the renewal, and only once the write
// has committed holds the lease until s + lease. A renewal that fails, times out or comes back
// refused (the epoch was raised: the leader declared the node down) extends nothing.
//
// What it holds is written to the lease file (lease-file.ts) at once: the fence inside each
// exclusive container reads it and kills the task when it runs out, even if this process is
// frozen or dead; and a restarted agent reads it back, so it neither kills an adopted task whose
// lease still holds nor believes in a lease it cannot vouch for.
//
// At expiry it tells the agent (`onExpired`), which SIGKILLs the epoch's exclusive containers.
// Expiry is checked on the boot clock every `checkEveryMs`, not by one timer at the due time: a
// timer runs on the monotonic clock, which stops while the machine is suspended.

import type { LeaseConfig } from '../resources/lease.ts';
import { renewIntervalMs } from '../resources/lease.ts';
import type { BootClock, Clock, Timer } from './clock.ts';
import { errorText } from './status-reporter.ts';
import { callWithTimeout } from './work-queue.ts';

/** Renews the node's lease by a committed write that compares the node's epoch; rejects when it did not commit (stale_epoch, no leader, timeout). */
export interface LeaseWriter {
  renewLease(renewal: { epoch: number; leaseMs: number }): Promise<void>;
}

/** Where the held lease is kept for the in-container fence and for the next agent (lease-file.ts). */
export interface LeaseStore {
  /** The lease held for `epoch` until `untilBootMs` (boot-clock ms). */
  write(epoch: number, untilBootMs: number): void;
  /** What was last written for `epoch` in this boot of the machine; null if nothing. */
  read(epoch: number): number | null;
}

/** A lease store in memory: the simulator's machines keep it across restarts of shoal. */
export class MemoryLeaseStore implements LeaseStore {
  readonly held = new Map<number, number>();
  write(epoch: number, untilBootMs: number): void {
    this.held.set(epoch, untilBootMs);
  }
  read(epoch: number): number | null {
    return this.held.get(epoch) ?? null;
  }
}

export interface LeaseKeeperOptions {
  writer: LeaseWriter;
  config: LeaseConfig;
  /** Timers (monotonic). */
  clock: Clock;
  boot: BootClock;
  store: LeaseStore;
  log: { info(msg: string): void; warn(msg: string): void };
  /** The lease of `epoch` ran out: kill its exclusive tasks now. */
  onExpired: (epoch: number) => void;
  /** A renewal extended the lease: tasks waiting for one may start. */
  onRenewed: () => void;
  /** How often expiry is checked on the boot clock (default 200 ms). */
  checkEveryMs?: number;
}

/** Renewals awaiting their commit at once; beyond, a tick sends none. */
export const renewalsInFlightMax = 3;

/** How long a graceful stop waits for its last renewal to commit. */
export const finalRenewalWaitMs = 1_000;

export class LeaseKeeper {
  /** Boot-clock ms until which each epoch's lease holds (only ones not yet expired). */
  private readonly held = new Map<number, number>();
  private readonly loaded = new Set<number>();
  private wanted: number | null = null;
  private inFlight = 0;
  private renewTimer: Timer | null = null;
  private checkTimer: Timer | null = null;
  private closed = false;
  private failuresLogged = false;

  constructor(private readonly opts: LeaseKeeperOptions) {}

  /** Whether the lease of `epoch` holds now. */
  covers(epoch: number): boolean {
    this.load(epoch);
    const until = this.held.get(epoch);
    return until !== undefined && this.opts.boot.bootNow() < until;
  }

  /** Boot-clock ms until which the lease of `epoch` holds, or null when it does not hold now. */
  heldUntil(epoch: number): number | null {
    if (!this.covers(epoch)) return null;
    return this.held.get(epoch) ?? null;
  }

  /** The epoch the node has exclusive work in (renew its lease), or null (let it run out). */
  want(epoch: number | null): void {
    if (this.closed || epoch === this.wanted) return;
    this.wanted = epoch;
    this.renewTimer?.cancel();
    this.renewTimer = null;
    if (epoch !== null) {
      this.load(epoch);
      this.renew();
    }
  }

  /**
   * A graceful stop (shoal stop, an upgrade's restart): one last renewal while the node has
   * exclusive work, awaited at most `waitMs`, then close(). The lease then holds a whole lease
   * from the stop, so a restart shorter than the lease keeps the exclusive tasks running (the
   * agent that comes back renews as soon as it sees them), where without it the lease left could
   * be as little as two thirds of one. A stop that outlasts the lease ends them at expiry, as any.
   */
  async closeAfterRenewing(waitMs = finalRenewalWaitMs): Promise<void> {
    const epoch = this.wanted;
    if (this.closed || epoch === null) {
      this.close();
      return;
    }
    const { config, boot, clock } = this.opts;
    this.renewTimer?.cancel();
    this.renewTimer = null;
    const sentAt = boot.bootNow();
    try {
      await callWithTimeout(clock, 'the last renewal of the exclusive-task lease', waitMs, () => this.opts.writer.renewLease({ epoch, leaseMs: config.leaseMs })).result;
      this.extend(epoch, sentAt + config.leaseMs);
    } catch (err) {
      this.opts.log.warn(`agent: the last renewal of the exclusive-task lease of epoch ${epoch} before stopping failed (${errorText(err)}); what it holds runs out on its own`);
    } finally {
      this.close();
    }
  }

  /** Stops renewing; what is held runs out on its own (the fence still kills at expiry). */
  close(): void {
    this.closed = true;
    this.renewTimer?.cancel();
    this.checkTimer?.cancel();
  }

  /** A lease written by this agent's previous life (same boot of the machine) still counts. */
  private load(epoch: number): void {
    if (this.loaded.has(epoch)) return;
    this.loaded.add(epoch);
    const until = this.opts.store.read(epoch);
    if (until !== null && until > this.opts.boot.bootNow() && until > (this.held.get(epoch) ?? 0)) {
      this.held.set(epoch, until);
      this.scheduleCheck();
    }
  }

  /**
   * One renewal now, and the next a third of the lease later whether or not this one has
   * answered: renewals overlap (at most renewalsInFlightMax), so a commit slower than the
   * interval does not leave a gap in the lease (the control-plane simulator's seed 393: a node
   * applying slowly lost its lease between two renewals sent one after the other).
   */
  private renew(): void {
    if (this.closed || this.wanted === null) return;
    const epoch = this.wanted;
    const { config, boot, clock } = this.opts;
    this.renewTimer?.cancel();
    this.renewTimer = clock.setTimer(renewIntervalMs(config), () => {
      this.renewTimer = null;
      this.renew();
    });
    if (this.inFlight >= renewalsInFlightMax) return;
    this.inFlight++;
    const sentAt = boot.bootNow();
    // Waiting longer than the lease is pointless: a renewal that lands later would hold nothing.
    callWithTimeout(clock, 'renewing the exclusive-task lease', config.leaseMs, () => this.opts.writer.renewLease({ epoch, leaseMs: config.leaseMs })).result.then(() => {
      this.failuresLogged = false;
      this.extend(epoch, sentAt + config.leaseMs);
    }, (err: unknown) => {
      if (!this.failuresLogged) this.opts.log.warn(`agent: renewing the exclusive-task lease of epoch ${epoch} failed (${errorText(err)}); it runs out unless a renewal commits`);
      this.failuresLogged = true;
    }).finally(() => {
      this.inFlight--;
    });
  }

  private extend(epoch: number, untilBootMs: number): void {
    if (this.closed || untilBootMs <= this.opts.boot.bootNow() || untilBootMs <= (this.held.get(epoch) ?? 0)) return;
    this.held.set(epoch, untilBootMs);
    this.opts.store.write(epoch, untilBootMs);
    this.scheduleCheck();
    this.opts.onRenewed();
  }

  private scheduleCheck(): void {
    if (this.checkTimer !== null || this.held.size === 0) return;
    this.checkTimer = this.opts.clock.setTimer(this.opts.checkEveryMs ?? 200, () => {
      this.checkTimer = null;
      this.checkExpiry();
    });
  }

  private checkExpiry(): void {
    const now = this.opts.boot.bootNow();
    for (const [epoch, until] of [...this.held]) {
      if (now < until) continue;
      this.held.delete(epoch);
      this.opts.log.warn(`agent: the exclusive-task lease of epoch ${epoch} ran out; killing its exclusive tasks`);
      this.opts.onExpired(epoch);
    }
    this.scheduleCheck();
  }
}
