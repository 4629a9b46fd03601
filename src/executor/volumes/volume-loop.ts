// The node's replicated-volume loop (issue 41, docs/volumes.md): it reads the volume records of
// its applied store when they change (a store event on shoal.volumes, or a snapshot restore) and
// when a pass of this node's falls due, and, for each volume,
//   - on the writer's node (the record's current era names this node in its current epoch, and
//     the agent made the live volume for that era), runs the writer's pass (replicator.ts) every
//     `every`: a snapshot sent to the holders as increments, their copies recorded;
//   - on any other node that has the volume's filesystem, runs the holder's pass (holder.ts) as
//     often: what it holds recorded (a returning old writer's late versions as diverged), old
//     versions dropped, the store first.
// One pass per volume at a time; a pass that fails is logged and retried at the next interval
// (the writer's error is recorded in the store by the pass itself).
//
// Timers: a node that neither writes nor holds any replicated volume (no record names it in an
// era or among the copies held) arms none; it only wakes on the records' changes. Otherwise one
// timer is armed for the earliest due pass of the volumes it writes or holds: `every` after its
// last pass, or `tickMs` when a pass could not start yet (the live volume not made for the era,
// the filesystem not here). A copy a writer sends here is recorded in the store, which wakes it.

import type { Readable } from 'node:stream';
import type { DocumentStore } from '../../../fsm/index.ts';
import { isShoalError } from '../../errors.ts';
import type { Logger } from '../../log.ts';
import { nodesCollection, servicesCollection } from '../../resources/collections.ts';
import { nodeRecordSchema, serviceRecordSchema } from '../../resources/records.ts';
import { allDocs } from '../../resources/state.ts';
import { currentWriter, removalsOf, restoreWriter, versionName, volumeRecordSchema, volumesCollection, type VolumeRecord, type VolumeVersion } from '../../resources/volumes.ts';
import type { ReplicateSpec } from '../../resources/spec/service-spec.ts';
import type { HookRunner } from './hooks.ts';
import { holderPass } from './holder.ts';
import { replicateOnce, type PassResult } from './replicator.ts';
import type { IncrementOffer, VolumeEngine } from './volume-engine.ts';
import type { StoreVolumeWriter } from './volume-writer.ts';

/** Sends an increment to a holder, bounded to `bytesPerSecond` when given; resolves once the holder received and checked it. */
export type IncrementSender = (node: string, offer: IncrementOffer, body: Readable, bytesPerSecond: number | undefined) => Promise<void>;

export interface VolumeLoopOptions {
  engine: VolumeEngine;
  store: DocumentStore;
  writer: Pick<StoreVolumeWriter, 'record' | 'recordHeld' | 'forgetHeld' | 'recordError' | 'finishRemoval'>;
  self: string;
  send: IncrementSender;
  /** Monotonic milliseconds. */
  now: () => number;
  log: Logger;
  /** The wait before looking again at a volume of this node's whose pass could not start yet (default 1 s); each volume's passes run every `every` of its record. */
  tickMs?: number;
  /** Runs a volume's hooks (replicate.hooks) in its task's container; absent: a volume with hooks fails its passes, saying so. */
  hooks?: HookRunner;
  /** Told of each writer's pass that ran (events, metrics). */
  onWriterPass?: (name: string, result: PassResult) => void;
  /** Told of a writer's pass that failed as a whole (no version taken). */
  onWriterFailed?: (name: string, message: string) => void;
}

/** How long close() waits for the passes in flight. */
const closeWaitMs = 5_000;

/** The holder's pass runs at most this often (it lists the versions, a few btrfs calls). */
const holderPassMsMin = 2_000;

export class VolumeLoop {
  private timer: NodeJS.Timeout | undefined;
  private readonly running = new Set<string>();
  private readonly lastPass = new Map<string, number>();
  /** When a pass of the volume last started, whether or not it got to take or record anything. */
  private readonly lastTry = new Map<string, number>();
  private readonly inFlight = new Set<Promise<void>>();
  private unsubscribe: (() => void)[] = [];
  private started = false;
  private wakeQueued = false;
  private closed = false;

  constructor(private readonly opts: VolumeLoopOptions) {}

  start(): void {
    if (this.started || this.closed) return;
    this.started = true;
    this.unsubscribe = [
      this.opts.store.subscribe((ev) => { if (ev.collection === volumesCollection) this.wake(); }),
      this.opts.store.subscribeRestore(() => this.wake()),
    ];
    this.tick();
  }

  /** Whether a timer is armed (tests: none on a node that writes or holds no replicated volume). */
  get timerArmed(): boolean {
    return this.timer !== undefined;
  }

  /**
   * Stops the loop and waits for the passes in flight, at most closeWaitMs: a send of a large
   * increment is not waited out by a stopping node (a holder drops a partial receive; the next
   * writer's pass sends again).
   */
  async close(): Promise<void> {
    this.closed = true;
    for (const u of this.unsubscribe) u();
    this.unsubscribe = [];
    clearTimeout(this.timer);
    this.timer = undefined;
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<void>((resolve) => { timer = setTimeout(resolve, closeWaitMs); });
    await Promise.race([Promise.allSettled([...this.inFlight]), waited]);
    clearTimeout(timer);
  }

  /** Resolves once the passes in flight have ended (tests). */
  async idle(): Promise<void> {
    await Promise.allSettled([...this.inFlight]);
  }

  /** One look at every volume: starts the passes that are due, then arms the timer for the next one (exported for tests through the class). */
  tick(): void {
    if (this.closed) return;
    const epoch = this.selfEpoch();
    for (const rec of this.records()) {
      if (this.running.has(rec.name)) continue;
      const mine = this.writes(rec, epoch);
      const last = this.lastPass.get(rec.name);
      const removals = removalsOf(rec, this.opts.self);
      if (last !== undefined && this.opts.now() - last < this.everyOf(rec, mine)) {
        // Not due, but the operator removed copies here: deleted now, not at the next interval.
        if (removals.length > 0) this.run(rec.name, () => this.removeMarked(rec, removals));
        continue;
      }
      this.run(rec.name, async () => {
        if (removals.length > 0) await this.removeMarked(rec, removals);
        await (mine && epoch !== undefined ? this.writerPass(rec, epoch) : this.holderPass(rec));
      });
    }
    this.arm();
  }

  /** A change of the records: one tick for the events of one apply (they come synchronously). */
  private wake(): void {
    if (this.wakeQueued || this.closed) return;
    this.wakeQueued = true;
    queueMicrotask(() => {
      this.wakeQueued = false;
      this.tick();
    });
  }

  /**
   * Arms one timer for the earliest pass due among the volumes this node writes or holds; none
   * when there are none (a volume whose pass runs is re-armed when it ends).
   */
  private arm(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (!this.started || this.closed) return;
    const epoch = this.selfEpoch();
    const now = this.opts.now();
    let due = Number.POSITIVE_INFINITY;
    for (const rec of this.records()) {
      if (this.running.has(rec.name) || !this.involves(rec)) continue;
      const last = this.lastPass.get(rec.name);
      const at = last !== undefined ? last + this.everyOf(rec, this.writes(rec, epoch)) : (this.lastTry.get(rec.name) ?? now) + (this.opts.tickMs ?? 1_000);
      due = Math.min(due, at);
    }
    if (due === Number.POSITIVE_INFINITY) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.tick();
    }, Math.max(0, due - now));
    this.timer.unref();
  }

  private records(): VolumeRecord[] {
    const out: VolumeRecord[] = [];
    for (const d of allDocs(this.opts.store, volumesCollection)) {
      const parsed = volumeRecordSchema.safeParse(d.doc);
      if (parsed.success) out.push(parsed.data);
    }
    return out;
  }

  /** Whether this node writes the volume now (its current era names this node in its current epoch). */
  private writes(rec: VolumeRecord, epoch: number | undefined): boolean {
    const writer = currentWriter(rec);
    return writer !== null && writer.node === this.opts.self && epoch !== undefined && writer.epoch === epoch;
  }

  /** Whether this node writes, wrote or holds the volume (or has removed copies to delete): only then does the loop keep a timer for it. */
  private involves(rec: VolumeRecord): boolean {
    return rec.eras.some((e) => e.node === this.opts.self) || rec.held.some((c) => c.node === this.opts.self) || removalsOf(rec, this.opts.self).length > 0;
  }

  private everyOf(rec: VolumeRecord, mine: boolean): number {
    return mine ? rec.everyMs : Math.max(rec.everyMs, holderPassMsMin);
  }

  private run(name: string, pass: () => Promise<void>): void {
    this.running.add(name);
    this.lastTry.set(name, this.opts.now());
    const p = pass().catch((err: unknown) => {
      this.opts.log.warn(`volume ${name}: replication pass failed: ${err instanceof Error ? err.message : String(err)}`);
    }).finally(() => {
      this.running.delete(name);
      this.inFlight.delete(p);
      this.arm();
    });
    this.inFlight.add(p);
  }

  private async writerPass(rec: VolumeRecord, epoch: number): Promise<void> {
    const era = rec.eras.at(-1);
    // The agent makes the live volume for the era before the task starts; until then nothing to copy.
    if (era === undefined || !(await this.opts.engine.liveIsFor(rec.name, era))) return;
    this.lastPass.set(rec.name, this.opts.now());
    const replicate = this.replicateOf(rec);
    const bandwidth = replicate?.maxBandwidthBytes;
    const hooks = this.opts.hooks;
    try {
      const result = await replicateOnce(this.opts.engine, {
        record: (n) => this.opts.writer.record(n),
        holderCandidates: () => this.holderCandidates(),
        recordHeld: (n, node, v) => this.opts.writer.recordHeld(n, node, [v]),
        recordError: (n, message) => this.opts.writer.recordError(n, message),
        send: (node, offer, body) => this.opts.send(node, offer, body, bandwidth),
        ...(hooks !== undefined ? { runHook: (phase, argv, timeoutMs) => hooks(rec.service, phase, argv, timeoutMs) } : {}),
      }, rec.name, { node: this.opts.self, epoch }, replicate?.hooks);
      if (result.failed.length > 0) this.opts.log.warn(`volume ${rec.name}: version ${result.version.seq} not copied to ${result.failed.map((f) => `${f.node} (${f.message})`).join(', ')}`);
      this.opts.onWriterPass?.(rec.name, result);
    } catch (err) {
      const message = isShoalError(err) ? `${err.code}: ${err.message}` : err instanceof Error ? err.message : String(err);
      this.opts.onWriterFailed?.(rec.name, message);
      await this.opts.writer.recordError(rec.name, message).catch(() => undefined);
      throw err;
    }
  }

  private async holderPass(rec: VolumeRecord): Promise<void> {
    if (!(await this.opts.engine.has(rec.name))) return;
    this.lastPass.set(rec.name, this.opts.now());
    // After a reboot the filesystem is not mounted: mount it again before listing what it holds.
    await this.opts.engine.ensure(rec.name, rec.sizeBytes);
    // A node that wrote the volume before another became its writer (it comes back after a
    // failover, or the operator restored the volume): its live volume holds what it wrote since
    // the newest copy, diverged from the line. Set aside (kept under diverged/, never started
    // from): the placement never starts the task from it. Only once the record names another
    // node: a restart in place (this node again, a new epoch) keeps its live volume.
    const writer = currentWriter(rec);
    if (writer !== null && writer.node !== this.opts.self) {
      const aside = await this.opts.engine.setAsideLive(rec.name);
      if (aside !== null) this.opts.log.warn(`volume ${rec.name}: this node's live volume set aside as diverged/${aside} (${writer.node === restoreWriter ? 'the volume was restored' : `${writer.node} writes it now`}); it is kept, never used`);
    }
    await holderPass(this.opts.engine, {
      record: (n) => this.opts.writer.record(n),
      recordHeld: (n, node, vs: readonly VolumeVersion[]) => this.opts.writer.recordHeld(n, node, vs),
      forgetHeld: (n, node, vs: readonly VolumeVersion[]) => this.opts.writer.forgetHeld(n, node, vs),
    }, rec.name, this.opts.self);
  }

  /**
   * Deletes the copies the operator removed from this node (the store forgot them first, by
   * `shoal volume rm-copy`), then takes them off the record's list. Level-triggered: a delete
   * that fails is tried again at the next look, the list keeps them meanwhile.
   */
  private async removeMarked(rec: VolumeRecord, versions: readonly VolumeVersion[]): Promise<void> {
    if (await this.opts.engine.has(rec.name)) {
      // After a reboot the filesystem is not mounted: its versions would look absent.
      await this.opts.engine.ensure(rec.name, rec.sizeBytes);
      for (const v of versions) await this.opts.engine.drop(rec.name, v);
    }
    await this.opts.writer.finishRemoval(rec.name, this.opts.self, versions);
    this.opts.log.info(`volume ${rec.name}: removed ${versions.map((v) => versionName(v)).join(', ')} from this node, as the operator asked`);
  }

  /** This node's epoch, from its record; undefined before it registered. */
  private selfEpoch(): number | undefined {
    const r = nodeRecordSchema.safeParse(this.opts.store.get(nodesCollection, this.opts.self)?.doc);
    return r.success ? r.data.epoch : undefined;
  }

  /** The nodes that may hold copies: ready ones besides this one, by id. */
  private holderCandidates(): string[] {
    const out: string[] = [];
    for (const d of allDocs(this.opts.store, nodesCollection)) {
      const r = nodeRecordSchema.safeParse(d.doc);
      if (r.success && r.data.id !== this.opts.self && r.data.state === 'ready') out.push(r.data.id);
    }
    return out.sort();
  }

  /** The spec's replicate settings of the mount of this volume (maxBandwidth, hooks), if any. */
  private replicateOf(rec: VolumeRecord): ReplicateSpec | undefined {
    const svc = serviceRecordSchema.safeParse(this.opts.store.get(servicesCollection, rec.service)?.doc);
    if (!svc.success) return undefined;
    return svc.data.spec.mounts.find((m) => m.type === 'volume' && m.source === rec.name)?.replicate;
  }
}
