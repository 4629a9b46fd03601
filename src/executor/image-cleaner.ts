// Removes the images shoal pulled once no task of this node has used them for a grace period
// (`runtime.imageGcGraceMs`, default 1 h), so that a node that ran many versions of a service
// does not fill its disk with old ones. Beside the agent, on every node that runs workloads.
//
// What it may remove, and why so little:
// - only images shoal itself pulled (the agent tells it: ensureImage answered 'pulled'), kept in
//   a ledger that survives restarts (image-ledger.ts). An image that was already on the node when
//   a task needed it is the operator's: it may be preloaded for a node with no registry, where
//   removing it would leave the next task unable to start. Those are never touched;
// - never an image in `runtime.imagesPinned`;
// - never one a task assigned to this node uses (its spec's image), nor one a container of this
//   node was created from; and the runtime itself refuses (never forced) an image that any
//   container uses, another node's on a shared daemon or the operator's own included;
// - a reference that names another image than the one shoal pulled (rebuilt or re-pulled under
//   the same tag by someone else) is the operator's from then on, and is forgotten.
//
// Level-triggered like the agent: a sweep every `sweepIntervalMs` lists the images and the
// containers, reads the node's assignments, and converges. An image counts as unused from the
// first sweep that sees it unused; a restart of shoal starts its grace period again. Nothing is
// removed without a quorum: the first removal of a sweep waits for a read barrier.

import type { AgentLog, AgentView } from './agent.ts';
import type { Clock, Timer } from './clock.ts';
import type { ImageLedger, PulledImage } from './image-ledger.ts';
import { normalizeImageRef } from './image-ref.ts';
import { ownerLabels, type Owner } from './labels.ts';
import { RuntimeError, type Runtime } from './runtime.ts';
import { callWithTimeout } from './work-queue.ts';
import { specForTask } from '../resources/records.ts';

export interface ImageCleanerOptions {
  owner: Owner;
  view: AgentView;
  runtime: Runtime;
  clock: Clock;
  log: AgentLog;
  ledger: ImageLedger;
  /** How long an image shoal pulled must go unused before it is removed; > 0 (0 disables: build no cleaner). */
  graceMs: number;
  /** References never removed (compared as Docker resolves them: `nginx` is `docker.io/library/nginx:latest`). */
  pinned: readonly string[];
  /** Default: a quarter of the grace period, from 1 s to 5 min. */
  sweepIntervalMs?: number;
  /** Timeout of each runtime call. */
  callTimeoutMs?: number;
  /**
   * Resolves once this node's store has caught up with the leader's commit index (a read
   * barrier); rejects without a quorum. Awaited before the first removal of a sweep: after a
   * restart the applied store can be behind, and miss a task that needs the image. Absent: no wait.
   */
  caughtUp?: () => Promise<void>;
}

/** What one sweep did, for tests and the log. */
export interface SweepOutcome {
  removed: string[];
  /** Tracked references the operator removed or re-pointed: forgotten. */
  forgotten: string[];
  /** The runtime refused: another container uses the image (kept, its grace starts again). */
  refused: string[];
}

interface Tracked extends PulledImage {
  /** Monotonic ms of the first sweep that saw it unused; null while in use (or not yet swept). */
  unusedSinceMs: number | null;
}

const sweepIntervalMinMs = 1_000;
const sweepIntervalMaxMs = 5 * 60_000;
const callTimeoutMsDefault = 30_000;

export class ImageCleaner {
  private readonly tracked = new Map<string, Tracked>();
  private readonly pinned: Set<string>;
  private readonly sweepIntervalMs: number;
  private readonly callTimeoutMs: number;
  private timer: Timer | null = null;
  private sweeping: Promise<SweepOutcome> | null = null;
  private started = false;
  private closed = false;

  constructor(private readonly opts: ImageCleanerOptions) {
    if (!(opts.graceMs > 0)) throw new RangeError('ImageCleaner needs graceMs > 0 (0 disables cleaning: build no cleaner)');
    this.pinned = new Set(opts.pinned.map(normalizeImageRef));
    this.sweepIntervalMs = opts.sweepIntervalMs ?? Math.min(sweepIntervalMaxMs, Math.max(sweepIntervalMinMs, Math.floor(opts.graceMs / 4)));
    this.callTimeoutMs = opts.callTimeoutMs ?? callTimeoutMsDefault;
    for (const p of opts.ledger.load()) this.tracked.set(normalizeImageRef(p.ref), { ...p, unusedSinceMs: null });
  }

  /** Sweeps every sweepIntervalMs from now on. Call once. */
  start(): void {
    if (this.started) throw new Error('assertion: ImageCleaner.start called twice');
    this.started = true;
    this.schedule();
  }

  /** Stops sweeping (a sweep under way finishes); idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    this.timer?.cancel();
    await this.sweeping?.catch(() => undefined);
  }

  /** The agent pulled `ref`: it is shoal's to remove once unused. */
  notePulled(ref: string): void {
    const key = normalizeImageRef(ref);
    if (this.tracked.has(key)) return;
    this.tracked.set(key, { ref, imageId: null, pulledAt: this.opts.clock.wallNow(), unusedSinceMs: null });
    this.save();
  }

  /** References tracked as pulled by shoal, as the specs name them. */
  trackedRefs(): string[] {
    return [...this.tracked.values()].map((t) => t.ref).sort();
  }

  /** One sweep now (the timer's, or a test's); concurrent calls share one. */
  sweep(): Promise<SweepOutcome> {
    this.sweeping ??= this.sweepOnce().finally(() => { this.sweeping = null; });
    return this.sweeping;
  }

  private schedule(): void {
    if (this.closed) return;
    this.timer = this.opts.clock.setTimer(this.sweepIntervalMs, () => {
      this.sweep().then((o) => {
        if (o.removed.length > 0) this.opts.log.debug(`image cleaner: a sweep removed ${o.removed.length} image(s)`);
      }, (err: unknown) => {
        this.opts.log.debug(`image cleaner: sweep skipped (${err instanceof Error ? err.message : String(err)}); trying again later`);
      }).finally(() => this.schedule());
    });
  }

  private async sweepOnce(): Promise<SweepOutcome> {
    const out: SweepOutcome = { removed: [], forgotten: [], refused: [] };
    if (this.closed || this.tracked.size === 0) return out;
    const { runtime, clock } = this.opts;
    const images = await callWithTimeout(clock, 'listing images', this.callTimeoutMs, () => runtime.listImages()).result;
    const idOf = new Map<string, string>();
    for (const img of images) for (const r of img.refs) idOf.set(normalizeImageRef(r), img.id);
    const now = clock.now();
    let changed = false;
    for (const [key, t] of [...this.tracked]) {
      const id = idOf.get(key);
      if (id === undefined || (t.imageId !== null && t.imageId !== id)) {
        this.tracked.delete(key);
        out.forgotten.push(t.ref);
        changed = true;
        continue;
      }
      if (t.imageId === null) {
        t.imageId = id;
        changed = true;
      }
    }
    let caughtUp = false;
    try {
      const inUse = await this.imagesInUse();
      for (const [key, t] of [...this.tracked]) {
        if (this.closed) break;
        if (this.pinned.has(key) || inUse.has(key)) {
          t.unusedSinceMs = null;
          continue;
        }
        t.unusedSinceMs ??= now;
        if (now - t.unusedSinceMs < this.opts.graceMs) continue;
        // Never without a quorum, nor from a store behind the leader's: the sweep stops here.
        if (!caughtUp) {
          await this.opts.caughtUp?.();
          caughtUp = true;
        }
        // The assignments again, at the last moment: a task placed since the listing keeps it.
        if (this.assignedImages().has(key)) {
          t.unusedSinceMs = null;
          continue;
        }
        if ((await this.remove(t)) === 'refused') {
          t.unusedSinceMs = now;
          out.refused.push(t.ref);
          continue;
        }
        this.tracked.delete(key);
        out.removed.push(t.ref);
        changed = true;
      }
    } finally {
      if (changed) this.save();
    }
    for (const ref of out.forgotten) this.opts.log.info(`image cleaner: no longer tracking ${ref}: it was removed or re-tagged outside shoal, so it is not shoal's to remove`);
    return out;
  }

  /** Normalized references a task of this node or a container of this node uses. */
  private async imagesInUse(): Promise<Set<string>> {
    const { runtime, clock, owner } = this.opts;
    const containers = await callWithTimeout(clock, 'listing containers', this.callTimeoutMs, () => runtime.list(ownerLabels(owner))).result;
    const used = this.assignedImages();
    for (const c of containers) used.add(normalizeImageRef(c.image));
    return used;
  }

  /** Images of the tasks the store assigns to this node (running or being shut down). */
  private assignedImages(): Set<string> {
    const used = new Set<string>();
    for (const a of this.opts.view.assignments(this.opts.owner.nodeId).tasks) {
      const spec = a.service === null ? null : specForTask(a.service, a.task);
      if (spec !== null) used.add(normalizeImageRef(spec.image));
    }
    return used;
  }

  private async remove(t: Tracked): Promise<'removed' | 'refused'> {
    const { runtime, clock, log } = this.opts;
    try {
      await callWithTimeout(clock, `removing image ${t.ref}`, this.callTimeoutMs, () => runtime.removeImage(t.ref)).result;
    } catch (err) {
      // Unavailable or timed out: the sweep stops here and the next one tries again.
      if (!(err instanceof RuntimeError) || err.kind !== 'failed') throw err;
      log.debug(`image cleaner: keeping ${t.ref}: ${err.message}`);
      return 'refused';
    }
    const unusedMin = Math.round((clock.now() - (t.unusedSinceMs ?? clock.now())) / 60_000);
    log.info(`image cleaner: removed image ${t.ref} (${t.imageId ?? 'id unknown'}): shoal pulled it and no task of this node has used it for ${unusedMin} min or more`);
    return 'removed';
  }

  private save(): void {
    this.opts.ledger.save([...this.tracked.values()].map(({ ref, imageId, pulledAt }) => ({ ref, imageId, pulledAt })));
  }
}
