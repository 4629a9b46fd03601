// Replicated volumes at the node side (issue 41), modelled: the real engine needs btrfs, so each
// machine keeps a set of the versions its disk holds (it outlives shoal, and a machine's death:
// the disk stays). While the volume's task runs on its writer's node, every `every` the node runs
// the real writer's pass (replicateOnce) on a model engine: a snapshot adds a version to the
// node's set, a send goes to a holder over the modelled network, which catches up with the
// leader first (the real route's read barrier) and then checks the sender against its applied
// record with refuseIncrement, as the real route does; the store writes are the real
// StoreVolumeWriter's compare-and-sets through the modelled log. Every other node that is
// involved runs the real holder's pass (holderPass): it records what it holds and drops old
// versions by versionsToDrop.

import { ShoalError } from '../../src/errors.ts';
import { labelKeys } from '../../src/executor/labels.ts';
import { replicateOnce } from '../../src/executor/volumes/replicator.ts';
import { holderPass } from '../../src/executor/volumes/holder.ts';
import type { IncrementOffer, VolumeEngine } from '../../src/executor/volumes/volume-engine.ts';
import { StoreVolumeWriter } from '../../src/executor/volumes/volume-writer.ts';
import type { RaftNode } from '../../src/node/raft-node.ts';
import { nodeRecordSchema } from '../../src/resources/records.ts';
import { nodesCollection } from '../../src/resources/collections.ts';
import { currentWriter, refuseIncrement, removalsOf, versionName, volumeRecordSchema, volumesCollection, type VolumeRecord, type VolumeVersion } from '../../src/resources/volumes.ts';
import type { DocumentStore } from '../../fsm/index.ts';
import { VolumesChecker } from './checkers/volumes.ts';
import { Violation } from './checkers/violation.ts';
import type { Session } from './session.ts';
import type { SimNode } from './sim-node.ts';
import type { VolumePlan } from './scenario.ts';
import type { SimStats } from './stats.ts';

/** How long an increment takes on the wire (ms of the holder's clock). */
const transferMs = 150;
/** The holder's pass at most this often (volume-loop.ts, holderPassMsMin). */
const holderEveryMs = 2_000;

export function volumeRecordOf(store: DocumentStore, name: string): VolumeRecord | undefined {
  const r = volumeRecordSchema.safeParse(store.get(volumesCollection, name)?.doc);
  return r.success ? r.data : undefined;
}

/** What the world lends the model. */
export interface VolumeWorld {
  readonly stats: SimStats;
  now(): number;
  log(line: string): void;
  connected(a: SimNode, b: SimNode): boolean;
  nodeById(id: string): SimNode;
  caughtUp(n: SimNode): Promise<void>;
  /** The committed store (the reference). */
  committed(): DocumentStore;
  readonly memberIds: ReadonlySet<string>;
}

export class SimVolumes {
  readonly checker = new VolumesChecker();
  /** Per machine: the versions its disk holds, by name. */
  private readonly disks = new Map<string, Map<string, VolumeVersion>>();
  /** Per machine: the writer epoch its live volume was made for (the agent makes it before the task's container starts; engine.liveIsFor). */
  private readonly live = new Map<string, number>();
  /** A violation found inside a pass (which would take it for a failed send), thrown at the next check. */
  private violation: Violation | null = null;
  /** Running containers of the service already seen (their ids), for the start check. */
  private readonly seenRunning = new Set<string>();

  constructor(private readonly world: VolumeWorld, readonly plan: VolumePlan) {}

  private disk(node: string): Map<string, VolumeVersion> {
    let d = this.disks.get(node);
    if (d === undefined) this.disks.set(node, (d = new Map()));
    return d;
  }

  holds(node: string, v: VolumeVersion): boolean {
    return this.disk(node).has(versionName(v));
  }

  /** The loop of one incarnation of shoal on n: a pass every `every` (a holder's at most every 2 s). */
  startLoop(n: SimNode, session: Session, proposer: Pick<RaftNode, 'propose'>): void {
    const writer = new StoreVolumeWriter(proposer, n.store, n.id, () => this.world.now());
    let lastHolderPass = Number.NEGATIVE_INFINITY;
    const tick = (): void => {
      if (!session.alive || n.session !== session) return;
      const done = (): void => { session.clock.setTimer(this.plan.everyMs, tick); };
      this.pass(n, session, writer, (now) => {
        if (now - lastHolderPass < holderEveryMs) return false;
        lastHolderPass = now;
        return true;
      }).catch((err: unknown) => this.world.log(`${n.id} volume pass failed: ${err instanceof Error ? err.message : String(err)}`)).finally(done);
    };
    session.clock.setTimer(this.plan.everyMs, tick);
  }

  private async pass(n: SimNode, session: Session, writer: StoreVolumeWriter, holderDue: (now: number) => boolean): Promise<void> {
    const name = this.plan.name;
    const rec = writer.record(name);
    if (rec === undefined) return;
    const epoch = nodeRecordSchema.safeParse(n.store.get(nodesCollection, n.id)?.doc);
    const self = epoch.success ? { node: n.id, epoch: epoch.data.epoch } : null;
    const w = currentWriter(rec);
    const engine = this.engine(n.id);
    if (self !== null && w !== null && w.node === self.node && w.epoch === self.epoch) {
      // The live volume exists once the task of this era started here (the agent made it before the container);
      // like the real loop's, the pass goes on when the container stops (a fence's kill, an exit).
      if (this.live.get(n.id) !== self.epoch) return;
      const r = await replicateOnce(engine, {
        record: (x) => writer.record(x),
        holderCandidates: () => this.candidates(n),
        recordHeld: (x, node, v) => writer.recordHeld(x, node, [v]),
        recordError: (x, message) => writer.recordError(x, message),
        send: (node, offer) => session.guard(this.send(n, node, offer)),
      }, name, self);
      this.world.stats.volumeVersions++;
      this.world.log(`${n.id} volume ${name}: took ${versionName(r.version)}; sent to ${r.sent.map((s) => s.node).join(', ') || 'none'}${r.failed.length > 0 ? `; failed ${r.failed.map((f) => `${f.node} (${f.message})`).join(', ')}` : ''}`);
      return;
    }
    if (this.disk(n.id).size === 0 && removalsOf(rec, n.id).length === 0) return;
    if (!holderDue(session.clock.now())) return;
    // Another node writes it: this node's live volume is set aside (diverged, never used again).
    if (w !== null && w.node !== n.id) this.live.delete(n.id);
    const removals = removalsOf(rec, n.id);
    if (removals.length > 0) {
      for (const v of removals) this.disk(n.id).delete(versionName(v));
      await writer.finishRemoval(name, n.id, removals);
    }
    const r = await holderPass(engine, {
      record: (x) => writer.record(x),
      recordHeld: (x, node, vs) => writer.recordHeld(x, node, vs),
      forgetHeld: (x, node, vs) => writer.forgetHeld(x, node, vs),
    }, name, n.id);
    if (r.recorded.length + r.dropped.length > 0) {
      this.world.log(`${n.id} volume ${name}: recorded ${r.recorded.map(versionName).join(', ') || 'none'}, dropped ${r.dropped.map(versionName).join(', ') || 'none'}`);
    }
  }

  /** Ready nodes besides n, by n's applied store (volume-loop.ts, holderCandidates). */
  private candidates(n: SimNode): string[] {
    const out: string[] = [];
    for (const m of this.world.memberIds) {
      const r = nodeRecordSchema.safeParse(n.store.get(nodesCollection, m)?.doc);
      if (r.success && r.data.id !== n.id && r.data.state === 'ready') out.push(r.data.id);
    }
    return out.sort();
  }

  /** The modelled increment: over the network to the holder, which catches up, then checks the sender by its record. */
  private async send(from: SimNode, to: string, offer: IncrementOffer): Promise<void> {
    const holder = this.world.nodeById(to);
    const hs = holder.session;
    if (hs === null || !this.world.connected(from, holder)) throw new ShoalError('node_unreachable', `${to} does not answer`);
    await hs.guard(this.world.caughtUp(holder));
    await new Promise<void>((resolve) => hs.clock.setTimer(transferMs, resolve));
    if (holder.session !== hs || !this.world.connected(from, holder)) throw new ShoalError('node_unreachable', `${to} stopped answering`);
    if (offer.parent !== null && !this.holds(to, offer.parent)) throw new ShoalError('volume_copy_refused', `${to} lacks the parent ${versionName(offer.parent)}`);
    const rec = volumeRecordOf(holder.store, offer.volume);
    const refused = rec === undefined ? 'stale_epoch: no record' : refuseIncrement(rec, offer.sender, offer.version);
    if (refused !== null) {
      this.world.stats.volumeRefused++;
      throw new ShoalError('volume_copy_refused', refused);
    }
    try {
      this.checker.onAccept(rec, to, offer.sender, offer.version, this.world.now());
    } catch (err) {
      // Thrown here it would be one failed send to the writer's pass: the world rethrows it.
      if (err instanceof Violation) this.violation ??= err;
      throw err;
    }
    this.disk(to).set(versionName(offer.version), offer.version);
    this.world.stats.volumeCopies++;
  }

  /** The engine's calls the passes make, on the machine's set of versions. */
  private engine(node: string): VolumeEngine {
    const disk = (): Map<string, VolumeVersion> => this.disk(node);
    const model = {
      versions: async () => [...disk().values()].sort((a, b) => a.seq - b.seq),
      has: async () => disk().size > 0,
      ensure: async () => {},
      snapshot: async (_name: string, v: VolumeVersion) => { disk().set(versionName(v), v); },
      makeIncrement: async (volume: string, version: VolumeVersion, parent: VolumeVersion | null, sender: { node: string; epoch: number }) => ({ volume, version, parent, sender, bytes: 1, sha256: '', file: '' }),
      body: () => null,
      release: async () => {},
      drop: async (_name: string, v: VolumeVersion) => { disk().delete(versionName(v)); },
    };
    return model as unknown as VolumeEngine;
  }

  /** After every instant: a running container of the service that was not running before has started. */
  checkStarts(nodes: readonly SimNode[]): void {
    if (this.violation !== null) throw this.violation;
    for (const n of nodes) {
      for (const c of n.runtime.all()) {
        if (c.state !== 'running' || c.labels[labelKeys.service] !== this.plan.service || this.seenRunning.has(c.id)) continue;
        this.seenRunning.add(c.id);
        const epoch = Number(c.labels[labelKeys.nodeEpoch]);
        this.live.set(n.id, epoch);
        this.world.stats.volumeTaskStarts++;
        this.checker.onTaskStart(volumeRecordOf(this.world.committed(), this.plan.name), n.id, epoch, (v) => this.holds(n.id, v), this.world.now());
      }
    }
  }
}
