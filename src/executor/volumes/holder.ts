// A holder's pass over one volume (issue 41, docs/volumes.md), on every node that is not the
// volume's writer: record in the store every version it holds that the store does not list
// (a returning old writer's snapshots among them: those of the line count as complete copies,
// the later ones are diverged, kept and never used), then drop versions of the line beyond its
// last K (versionsToDrop: never a diverged one, never the newest complete copy). The store
// forgets a copy before the node deletes it, so the store never lists a copy that is gone.

import { currentWriter, removalsOf, sameVersion, versionsToDrop, volumeVersionsKept, type VolumeRecord, type VolumeVersion } from '../../resources/volumes.ts';
import type { VolumeEngine } from './volume-engine.ts';

export interface HolderPorts {
  record(name: string): VolumeRecord | undefined;
  /** Adds `versions` to what `node` holds (a compare-and-set on the record, by the caller). */
  recordHeld(name: string, node: string, versions: readonly VolumeVersion[]): Promise<void>;
  /** Removes `versions` from what `node` holds. */
  forgetHeld(name: string, node: string, versions: readonly VolumeVersion[]): Promise<void>;
}

export async function holderPass(engine: VolumeEngine, ports: HolderPorts, name: string, self: string, kept: number = volumeVersionsKept): Promise<{ recorded: VolumeVersion[]; dropped: VolumeVersion[] }> {
  const rec = ports.record(name);
  // The writer's own snapshots are not copies: a failover must not wait for the node it replaces.
  if (rec === undefined || currentWriter(rec)?.node === self) return { recorded: [], dropped: [] };
  const local = await engine.versions(name);
  const known = rec.held.filter((c) => c.node === self).map((c) => c.version);
  // A copy the operator removed is not recorded again while its deletion is pending (removeMarked).
  const removed = removalsOf(rec, self);
  const recorded = local.filter((v) => !known.some((k) => sameVersion(k, v)) && !removed.some((r) => sameVersion(r, v)));
  if (recorded.length > 0) await ports.recordHeld(name, self, recorded);
  const view: VolumeRecord = { ...rec, held: [...rec.held, ...recorded.map((version) => ({ node: self, version, atMs: 0 }))] };
  const dropped = versionsToDrop(view, self, kept).filter((v) => local.some((l) => sameVersion(l, v)));
  if (dropped.length > 0) {
    await ports.forgetHeld(name, self, dropped);
    for (const v of dropped) await engine.drop(name, v);
  }
  return { recorded, dropped };
}
