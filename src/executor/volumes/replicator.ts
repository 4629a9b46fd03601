// One replication pass of a volume on its writer's node (issue 41, docs/volumes.md): take the
// next version (a read-only snapshot, crash-consistent), send it to each holder as an increment
// on the newest version of the line that holder has (whole when it has none), and record each
// holder's complete copy in the store; then drop this node's versions beyond the last K that no
// holder needs as a parent. Holders check the sender against the store (refuseIncrement), so a
// writer cut off by a failover sends nothing that is kept.
//
// Ports, not the node: the store read (the applied record), the record write (a compare-and-set
// the caller proposes), and the sender (the mesh in the node; a function in tests).

import type { Readable } from 'node:stream';
import { ShoalError, isShoalError } from '../../errors.ts';
import {
  currentWriter, inLine, nextVersion, sameVersion, volumeVersionsKept, type VolumeRecord, type VolumeVersion,
} from '../../resources/volumes.ts';
import type { ReplicateHooks } from '../../resources/spec/service-spec.ts';
import type { HookPhase } from './hooks.ts';
import type { IncrementOffer, VolumeEngine } from './volume-engine.ts';

export interface ReplicatorPorts {
  /** The volume's record as this node's applied store has it. */
  record(name: string): VolumeRecord | undefined;
  /** The nodes that may hold copies now (ready, not this one), in a stable order. */
  holderCandidates(): readonly string[];
  /** Records that `node` holds version v completely (a compare-and-set on the record, by the caller). */
  recordHeld(name: string, node: string, v: VolumeVersion): Promise<void>;
  /** Records (or clears, with null) the last replication error of the volume. */
  recordError(name: string, message: string | null): Promise<void>;
  /** Sends an increment to a holder; it resolves once the holder received and checked it. */
  send(node: string, offer: IncrementOffer, body: Readable): Promise<void>;
  /** Runs a hook of the volume's (replicate.hooks) in its task's container; throws volume_hook_failed. Absent: the volume has none. */
  runHook?(phase: HookPhase, argv: readonly string[], timeoutMs: number): Promise<void>;
}

export interface PassResult {
  version: VolumeVersion;
  /** Per holder: the bytes sent and the parent used, or the error. */
  sent: { node: string; bytes: number; parent: VolumeVersion | null }[];
  failed: { node: string; message: string }[];
  dropped: VolumeVersion[];
}

/**
 * The holders a writer sends to: those already holding a version of the line first (an
 * increment is cheap for them), newest first, then the other candidates in their order, up to
 * `copies`; never the writer itself.
 */
export function chooseHolders(rec: VolumeRecord, writer: string, candidates: readonly string[], copies: number): string[] {
  const allowed = candidates.filter((n) => n !== writer);
  const newestOf = (n: string): number => Math.max(0, ...rec.held.filter((c) => c.node === n && inLine(rec, c.version)).map((c) => c.version.seq));
  const ranked = [...allowed].sort((a, b) => newestOf(b) - newestOf(a) || allowed.indexOf(a) - allowed.indexOf(b));
  return ranked.slice(0, copies);
}

/** The version an increment to `holder` is based on: the newest of the line both have; null: send it whole. */
export function parentFor(rec: VolumeRecord, holder: string, local: readonly VolumeVersion[]): VolumeVersion | null {
  const theirs = rec.held.filter((c) => c.node === holder && inLine(rec, c.version)).map((c) => c.version);
  const common = theirs.filter((v) => local.some((l) => sameVersion(l, v))).sort((a, b) => b.seq - a.seq);
  return common[0] ?? null;
}

/** Runs one pass for `name` as writer (node, epoch). Refused (volume_copy_refused) when the store says another node writes it. */
export async function replicateOnce(engine: VolumeEngine, ports: ReplicatorPorts, name: string, self: { node: string; epoch: number }, hooks?: ReplicateHooks): Promise<PassResult> {
  const rec = ports.record(name);
  const era = rec?.eras.at(-1);
  const writer = rec === undefined ? null : currentWriter(rec);
  if (rec === undefined || era === undefined || writer === null || writer.node !== self.node || writer.epoch !== self.epoch) {
    throw new ShoalError('volume_copy_refused', `volume ${name}: this node (${self.node}, epoch ${self.epoch}) is not its writer; it takes no versions`, { reason: 'stale_epoch', volume: name });
  }
  const before = await engine.versions(name);
  const version = nextVersion(era, before.filter((v) => v.node === self.node && v.epoch === self.epoch).map((v) => v.seq));
  await snapshotWithHooks(engine, ports, name, version, hooks);
  const local = [...before, version];
  const result: PassResult = { version, sent: [], failed: [], dropped: [] };
  for (const holder of chooseHolders(rec, self.node, ports.holderCandidates(), rec.copies)) {
    const parent = parentFor(rec, holder, local);
    try {
      const inc = await engine.makeIncrement(name, version, parent, self);
      try {
        await ports.send(holder, inc, engine.body(inc));
      } finally {
        await engine.release(inc);
      }
      await ports.recordHeld(name, holder, version);
      result.sent.push({ node: holder, bytes: inc.bytes, parent });
    } catch (err) {
      result.failed.push({ node: holder, message: isShoalError(err) || err instanceof Error ? err.message : String(err) });
    }
  }
  await ports.recordError(name, result.failed.length === 0 ? null : result.failed.map((f) => `${f.node}: ${f.message}`).join('; '));
  result.dropped = await dropOld(engine, ports.record(name) ?? rec, name, local.filter((v) => v.node === self.node && v.epoch === self.epoch));
  return result;
}

/**
 * The writer's own versions of its era (`own`) beyond the newest K that no holder needs as a
 * parent (the newest one each holder has) are deleted. The store does not count a writer's own
 * versions as copies, so this never removes a complete copy; what the node received as a holder
 * before it became the writer stays.
 */
async function dropOld(engine: VolumeEngine, rec: VolumeRecord, name: string, own: readonly VolumeVersion[]): Promise<VolumeVersion[]> {
  const needed = new Set<string>();
  for (const node of new Set(rec.held.map((c) => c.node))) {
    const p = parentFor(rec, node, own);
    if (p !== null) needed.add(`${p.seq}/${p.node}/${p.epoch}`);
  }
  const sorted = [...own].sort((a, b) => b.seq - a.seq);
  const drop = sorted.slice(volumeVersionsKept).filter((v) => !needed.has(`${v.seq}/${v.node}/${v.epoch}`));
  for (const v of drop) await engine.drop(name, v);
  return drop;
}

/**
 * The snapshot between the hooks: `before` failing takes no snapshot; `after` runs once `before`
 * succeeded, whether the snapshot did or not (it undoes what `before` did), and failing fails the
 * round (the version stays here unsent, an old one the writer drops later).
 */
async function snapshotWithHooks(engine: VolumeEngine, ports: ReplicatorPorts, name: string, version: VolumeVersion, hooks: ReplicateHooks | undefined): Promise<void> {
  const run = async (phase: HookPhase, argv: readonly string[] | undefined): Promise<void> => {
    if (argv === undefined || hooks === undefined) return;
    if (ports.runHook === undefined) throw new ShoalError('volume_hook_failed', `volume ${name}: its ${phase} hook cannot run: this node runs no commands in containers`, { phase, argv: [...argv] });
    await ports.runHook(phase, argv, hooks.timeoutMs);
  };
  await run('before', hooks?.before);
  let snapshotError: unknown = null;
  await engine.snapshot(name, version).catch((err: unknown) => { snapshotError = err; });
  await run('after', hooks?.after);
  if (snapshotError !== null) throw snapshotError;
}
