// When a node snapshots its applied state and compacts its log, and the snapshot's production:
// taken between two Readys, then serialized in slices and written in the background while the
// Ready loop goes on, one at a time. docs/architecture.md, "When a snapshot is taken".

import type { ConfState } from '../raft/types.ts';
import type { StateMachine } from '../base/state-machine.ts';
import type { Histogram } from '../base/metrics.ts';
import type { NodeStorage } from './node-storage.ts';
import { encodeSnapshotDataInSlices, type NodeState } from './snapshot-data.ts';

/** The knobs of RaftNodeOptions this policy reads (documented there). */
export interface SnapshotPolicyOptions {
  snapshotEntries: number;
  snapshotIntervalMs: number;
  snapshotEntriesMax: number;
  /** Draws the snapshot factors, uniform in [0, 1). */
  random: () => number;
  logKeepEntries: number;
}

/** What the policy needs of the driver. */
export interface SnapshotHost {
  /** The configuration and the node's own state as of the applied index, at this moment. */
  capture(): { confState: ConfState; nodeState: NodeState };
  /**
   * Queues the hard state not yet written, if any, ahead of any later write: a snapshot past the
   * durable commit index would not survive a restart's checks.
   */
  flushHardState(): Promise<void>;
  /** The snapshot failed (serializing, writing or compacting). */
  failed(err: unknown): void;
  /** The snapshot task ended, done or failed. */
  ended(): void;
}

export class SnapshotPolicy {
  /** The index of the newest snapshot this node holds (taken or received). */
  private snapshotIndex = 0;
  /** When this node took or received its last snapshot (or started), and its draw for the next. */
  private snapshotAt = 0;
  private snapshotDraw = 0;
  /** The snapshot being serialized and written in the background, if any. */
  private snapshotTask: Promise<void> | undefined;
  /** Asked for by forceAt: the next snapshot starts at once, compacts its whole log, and tells these. */
  private forced: { through: number; done: (index: number) => void; failed: (err: unknown) => void }[] = [];

  constructor(
    private readonly opts: SnapshotPolicyOptions,
    private readonly storage: NodeStorage,
    private readonly stateMachine: StateMachine,
    private readonly duration: Histogram,
    private readonly host: SnapshotHost,
  ) {}

  get index(): number {
    return this.snapshotIndex;
  }

  /** The snapshot in progress, if any (a stop awaits it). */
  get inProgress(): Promise<void> | undefined {
    return this.snapshotTask;
  }

  /** The node holds a snapshot at `index` (loaded at start, or received): the clock restarts. */
  restart(index: number): void {
    this.snapshotIndex = index;
    this.restartClock();
  }

  /**
   * Starts a snapshot of the applied state at `applied` when one is due (see due). It is taken
   * here, between two Readys, and serialized and written in the background while the loop goes
   * on; one at a time.
   */
  maybeStart(applied: number): void {
    if (this.snapshotTask !== undefined) return;
    const forced = this.forced.filter((f) => f.through <= applied);
    if (forced.length === 0 && !this.due(applied)) return;
    this.forced = this.forced.filter((f) => f.through > applied);
    this.restartClock();
    const index = applied;
    const { confState, nodeState } = this.host.capture();
    const flushed = this.host.flushHardState();
    const sm = this.stateMachine;
    const pause = (): Promise<void> => new Promise<void>((r) => setImmediate(r));
    const app = sm.snapshotInSlices ? sm.snapshotInSlices(pause) : Promise.resolve([sm.snapshot()]);
    this.snapshotTask = this.produce(index, confState, nodeState, flushed, app, pause, forced.length > 0)
      .then(() => { for (const f of forced) f.done(index); }, (err: unknown) => {
        for (const f of forced) f.failed(err);
        throw err;
      })
      .catch((err: unknown) => this.host.failed(err))
      .finally(() => {
        this.snapshotTask = undefined;
        this.host.ended();
      });
  }

  /**
   * Asks for a snapshot at an applied index of `through` or later, taken at the next turn of the
   * loop that reaches it (after the one in progress, if any), with the whole log behind it
   * compacted; resolves with its index once it is written.
   */
  forceAt(through: number): Promise<number> {
    return new Promise((done, failed) => { this.forced.push({ through, done, failed }); });
  }

  /**
   * Whether a snapshot is due. A snapshot serializes and writes the whole state, so its cost
   * follows the state's size, not the write rate: taken every snapshotEntries entries it would
   * come every few seconds under load, each one a stall of tens of milliseconds, and on every
   * node at the same index, so that a quorum stalls together. So it also waits for
   * snapshotIntervalMs, unless snapshotEntriesMax entries pile up first (bounding the log kept in
   * memory and replayed on restart), and both are scaled by a random draw per node and snapshot,
   * so that the nodes of a cluster snapshot at different moments. docs/architecture.md.
   */
  private due(applied: number): boolean {
    const since = applied - this.snapshotIndex;
    if (since < this.opts.snapshotEntries) return false;
    const { snapshotIntervalMs, snapshotEntriesMax } = this.opts;
    // With snapshotIntervalMs 0 the time condition always holds.
    return performance.now() - this.snapshotAt >= snapshotIntervalMs * (1 + this.snapshotDraw)
      || since >= snapshotEntriesMax * (1 + this.snapshotDraw) / 2;
  }

  /** Restarts the snapshot clock (a snapshot begun or received, or a start) and draws the next factor. */
  private restartClock(): void {
    this.snapshotAt = performance.now();
    this.snapshotDraw = this.opts.random();
  }

  /** Serializes and writes the snapshot at `index`, then compacts the log behind it. */
  private async produce(
    index: number, confState: ConfState, nodeState: NodeState,
    flushed: Promise<void>, app: Promise<Uint8Array[]>, pause: () => Promise<void>, compactAll = false,
  ): Promise<void> {
    const started = performance.now();
    await flushed;
    const data = await encodeSnapshotDataInSlices(nodeState, await app, pause);
    await this.storage.createSnapshot(index, confState, data);
    this.snapshotIndex = Math.max(this.snapshotIndex, index);
    const compactTo = compactAll ? index : index - this.opts.logKeepEntries;
    if (compactTo > this.storage.log.firstIndex()) await this.storage.compact(compactTo);
    this.duration.observe((performance.now() - started) / 1000);
  }
}
