// Replicated volumes (issue 41, docs/volumes.md): the store's record of a volume, its versions
// and who holds them, and the pure rules every part decides by: which version is the newest
// complete one, where a failed-over task may start, which copies are diverged, which increment a
// holder accepts, and which versions a holder may drop. No clock, no I/O.
//
// A version is named by (seq, writer node, writer epoch). `seq` counts the volume's snapshots over
// its whole life, across writers: a writer that restores version s continues at s + 1. The
// volume's history is a list of eras, one per writer (node, epoch) since a restore; a version
// belongs to the volume's line when an era of its writer covers its seq. Anything else (an old
// writer's snapshots taken after the volume was restored elsewhere) is diverged: kept, never
// started from, never sent, never counted.

import { z } from 'zod';

/** One snapshot of a replicated volume. */
export interface VolumeVersion {
  /** The volume's snapshot count at this snapshot (1, 2, ...), across every writer. */
  seq: number;
  /** The node that wrote it, and its epoch then. */
  node: string;
  epoch: number;
}

/** A writer's stretch of the volume's history: from `fromSeq` until the next era's. */
export interface VolumeEra {
  node: string;
  epoch: number;
  /** Its first snapshot's seq (the restored version's + 1; 1 for a new volume). */
  fromSeq: number;
  /** The version it started from; null: empty (a new volume, or `shoal volume restore --empty`). */
  base: VolumeVersion | null;
}

/** A version a node holds, complete (received and checked, or taken by the writer itself). */
export interface VolumeCopy {
  node: string;
  version: VolumeVersion;
  /** When the holder recorded it (log time, ms). */
  atMs: number;
}

/** The record `shoal.volumes/<name>`: written by the leader's loops (eras) and by holders (copies, by CAS). */
export interface VolumeRecord {
  name: string;
  /** The exclusive service that mounts it. */
  service: string;
  copies: number;
  everyMs: number;
  sizeBytes: number;
  /** Oldest first; the last is the current writer. Empty: never started. */
  eras: VolumeEra[];
  held: VolumeCopy[];
  /** The last replication error the writer reported, if any since its last success. */
  lastError: { atMs: number; message: string } | null;
  /**
   * Copies the operator removed (`shoal volume rm-copy`): gone from `held` already, their files
   * still on the node until it deletes them and takes them off this list. Absent: none.
   */
  removing?: { node: string; version: VolumeVersion }[];
}

export const volumesCollection = 'shoal.volumes';

/** Versions each holder keeps besides the newest (the newest complete copy is never dropped). */
export const volumeVersionsKept = 3;

const nodeId = z.string().min(1).max(128);
export const volumeVersionSchema = z.object({ seq: z.number().int().min(1), node: nodeId, epoch: z.number().int().min(0) }).strict();
export const volumeRecordSchema = z.object({
  name: z.string().min(1).max(128),
  service: z.string().min(1).max(63),
  copies: z.number().int().min(1),
  everyMs: z.number().int().min(1),
  sizeBytes: z.number().int().min(1),
  eras: z.array(z.object({ node: nodeId, epoch: z.number().int().min(0), fromSeq: z.number().int().min(1), base: volumeVersionSchema.nullable() }).strict()),
  held: z.array(z.object({ node: nodeId, version: volumeVersionSchema, atMs: z.number().int().min(0) }).strict()),
  lastError: z.object({ atMs: z.number().int().min(0), message: z.string() }).strict().nullable(),
  removing: z.array(z.object({ node: nodeId, version: volumeVersionSchema }).strict()).max(1024).optional(),
}).strict();

/** A version as a file name: `s12-e3-node1` (seq, epoch, node), what the engine names its snapshots. */
export function versionName(v: VolumeVersion): string {
  return `s${v.seq}-e${v.epoch}-${v.node}`;
}

/** The inverse of versionName; null for a name that is not one. */
export function parseVersionName(name: string): VolumeVersion | null {
  const m = /^s([1-9]\d{0,14})-e(0|[1-9]\d{0,14})-([A-Za-z0-9_.-]{1,128})$/.exec(name);
  if (m === null) return null;
  return { seq: Number(m[1]), epoch: Number(m[2]), node: m[3] as string };
}

export function sameVersion(a: VolumeVersion, b: VolumeVersion): boolean {
  return a.seq === b.seq && a.node === b.node && a.epoch === b.epoch;
}

/** The era that covers seq, or null (before the first, or a seq no era's writer is allowed). */
function eraOf(rec: Pick<VolumeRecord, 'eras'>, seq: number): VolumeEra | null {
  let found: VolumeEra | null = null;
  for (const era of rec.eras) {
    if (era.fromSeq <= seq) found = era;
  }
  return found;
}

/** Whether v is in the volume's line (written by the writer of the era that covers it). */
export function inLine(rec: Pick<VolumeRecord, 'eras'>, v: VolumeVersion): boolean {
  const era = eraOf(rec, v.seq);
  return era !== null && era.node === v.node && era.epoch === v.epoch;
}

/** The current writer (node, epoch), or null when the volume was never started. */
export function currentWriter(rec: Pick<VolumeRecord, 'eras'>): { node: string; epoch: number } | null {
  const last = rec.eras.at(-1);
  return last === undefined ? null : { node: last.node, epoch: last.epoch };
}

/** The newest version of the line that some node holds completely, or null. */
export function newestComplete(rec: Pick<VolumeRecord, 'eras' | 'held'>): VolumeVersion | null {
  let best: VolumeVersion | null = null;
  for (const c of rec.held) {
    if (!inLine(rec, c.version)) continue;
    if (best === null || c.version.seq > best.seq) best = c.version;
  }
  return best;
}

/** The nodes holding version v, sorted. */
export function holdersOf(rec: Pick<VolumeRecord, 'held'>, v: VolumeVersion): string[] {
  return [...new Set(rec.held.filter((c) => sameVersion(c.version, v)).map((c) => c.node))].sort();
}

/** The copies that are diverged: versions outside the line (a replaced writer's later snapshots). */
export function divergedCopies(rec: Pick<VolumeRecord, 'eras' | 'held'>): VolumeCopy[] {
  return rec.held.filter((c) => !inLine(rec, c.version));
}

/**
 * Where the volume's task may start, as the scheduler's feasibility check. `any`: the volume
 * holds no data anyone must keep (never started, or the operator restored it empty: no era),
 * so any node will do, starting empty. `nodes`: only these: the holders of the newest complete
 * copy, and the current writer's node, whose live volume is newer than any copy of it (a
 * restart in place). A failed-over task never starts anywhere else, so never from an older copy
 * or an empty volume.
 */
export type VolumePlacement = { kind: 'any' } | { kind: 'nodes'; nodes: string[]; version: VolumeVersion | null };

export function volumePlacement(rec: Pick<VolumeRecord, 'eras' | 'held'>): VolumePlacement {
  const writer = currentWriter(rec);
  if (writer === null) return { kind: 'any' };
  const newest = newestComplete(rec);
  const nodes = new Set(newest === null ? [] : holdersOf(rec, newest));
  // An operator's restore is written as an era of nobody's (restoreEras): only the holders may take it.
  if (writer.node !== restoreWriter) nodes.add(writer.node);
  return { kind: 'nodes', nodes: [...nodes].sort(), version: newest };
}

/** Why a node cannot take the volume's task (a pending reason), or null when it can. */
export function volumeRefusesNode(rec: Pick<VolumeRecord, 'name' | 'eras' | 'held'>, node: string): string | null {
  const p = volumePlacement(rec);
  if (p.kind === 'any' || p.nodes.includes(node)) return null;
  const what = p.version === null ? 'its data (no complete copy yet)' : `its newest complete copy (${versionName(p.version)})`;
  return `volume ${rec.name}: only ${p.nodes.join(', ')} hold${p.nodes.length === 1 ? 's' : ''} ${what}`;
}

/**
 * The era a writer begins when the volume's task starts on `node` in `epoch`: restoring the
 * newest complete copy, or, on the current writer's node, keeping its live volume. Null when
 * the node is the current writer in this very epoch (nothing changes). The caller has checked
 * volumeRefusesNode.
 */
export function beginEra(rec: Pick<VolumeRecord, 'eras' | 'held'>, node: string, epoch: number): VolumeEra | null {
  const writer = currentWriter(rec);
  if (writer !== null && writer.node === node && writer.epoch === epoch) return null;
  const base = newestComplete(rec);
  const lastSeq = Math.max(0, ...rec.held.map((c) => c.version.seq), ...rec.eras.map((e) => e.fromSeq - 1));
  return { node, epoch, fromSeq: lastSeq + 1, base };
}

/** The next version a writer takes in its era, given the seqs of the snapshots it holds locally. */
export function nextVersion(era: VolumeEra, localSeqs: readonly number[]): VolumeVersion {
  const mine = localSeqs.filter((s) => s >= era.fromSeq);
  return { seq: Math.max(era.fromSeq - 1, ...mine) + 1, node: era.node, epoch: era.epoch };
}

/** Why a holder refuses an increment of version v from sender (node, epoch), or null to accept it. */
export function refuseIncrement(rec: VolumeRecord, sender: { node: string; epoch: number }, v: VolumeVersion): string | null {
  const writer = currentWriter(rec);
  if (writer === null || writer.node !== sender.node || writer.epoch !== sender.epoch) {
    return `stale_epoch: ${sender.node} (epoch ${sender.epoch}) is not the writer of volume ${rec.name}${writer === null ? '' : ` (${writer.node}, epoch ${writer.epoch} is)`}`;
  }
  if (v.node !== sender.node || v.epoch !== sender.epoch || !inLine(rec, v)) return `stale_epoch: version ${versionName(v)} is not of the current writer's era`;
  return null;
}

/**
 * The versions `node` may delete: beyond the newest `kept` of the line it holds. Never a
 * diverged copy (the operator removes those), never the newest complete version of the volume,
 * and never a version no other node holds while it is the base of the current era.
 */
export function versionsToDrop(rec: VolumeRecord, node: string, kept: number = volumeVersionsKept): VolumeVersion[] {
  const newest = newestComplete(rec);
  const base = rec.eras.at(-1)?.base ?? null;
  const mine = rec.held.filter((c) => c.node === node && inLine(rec, c.version)).map((c) => c.version).sort((a, b) => b.seq - a.seq);
  return mine.slice(kept).filter((v) => (newest === null || !sameVersion(v, newest)) && !(base !== null && sameVersion(v, base) && holdersOf(rec, v).length <= 1));
}

/** Eras kept in a record at most: older ones that cover no held version are dropped first. */
export const volumeErasMax = 32;

/**
 * The eras with `era` appended, bounded: an era (not the last) that covers no version any node
 * holds, diverged ones included, is dropped oldest first; dropping it changes no version's
 * standing, since none lies in its range.
 */
export function appendEra(rec: Pick<VolumeRecord, 'eras' | 'held'>, era: VolumeEra): VolumeEra[] {
  const eras = [...rec.eras, era];
  const covers = (i: number): boolean => {
    const from = (eras[i] as VolumeEra).fromSeq;
    const until = i + 1 < eras.length ? (eras[i + 1] as VolumeEra).fromSeq : Number.POSITIVE_INFINITY;
    return rec.held.some((c) => c.version.seq >= from && c.version.seq < until);
  };
  for (let i = 0; eras.length > volumeErasMax && i < eras.length - 1;) {
    if (covers(i)) i++;
    else eras.splice(i, 1);
  }
  return eras;
}

/**
 * The writer of the era an operator's restore of a version begins (`shoal volume restore NAME
 * --version V`): no node is it, so nothing is written in that era; versions after V fall into it
 * and are diverged, V becomes the newest complete copy, and the next placement restores it.
 */
export const restoreWriter = '-restore';

/**
 * The eras after an operator's restore (docs/volumes.md, "Restoring"): with `version` null
 * (`--empty`), none: every old copy is diverged (kept) and the task may start anywhere, empty.
 * With a version, the line is cut after it: the eras up to it (an era of its writer added when it
 * was diverged), then the restore's own era, based on it. The caller checked that some node holds
 * the version completely (restoreProblem).
 */
export function restoreEras(rec: Pick<VolumeRecord, 'eras'>, version: VolumeVersion | null): VolumeEra[] {
  if (version === null) return [];
  const upTo = inLine(rec, version)
    ? rec.eras.filter((e) => e.fromSeq <= version.seq)
    : [...rec.eras.filter((e) => e.fromSeq < version.seq), { node: version.node, epoch: version.epoch, fromSeq: version.seq, base: null }];
  return [...upTo, { node: restoreWriter, epoch: 0, fromSeq: version.seq + 1, base: version }];
}

/** Why `version` cannot be restored (no node holds it completely), or null. */
export function restoreProblem(rec: Pick<VolumeRecord, 'name' | 'eras' | 'held'>, version: VolumeVersion): string | null {
  if (holdersOf(rec, version).length > 0) return null;
  const newest = newestComplete(rec);
  const listed = [...new Set(rec.held.map((c) => versionName(c.version)))].sort();
  return `no node holds version ${versionName(version)} of volume ${rec.name} completely${listed.length === 0 ? ' (no node holds any copy)' : ` (held: ${listed.join(', ')}${newest === null ? '' : `; the newest complete is ${versionName(newest)}`})`}`;
}

/** Why a copy is kept against an operator's removal (`volume_copy_kept`, details.reason). */
export type CopyKeptReason = 'not_diverged' | 'last_complete' | 'era_base';

/**
 * Why the operator may not remove `node`'s copy of v (`shoal volume rm-copy`), or null: a
 * diverged copy may go; a copy of the line only with `force`, and even then never the last
 * complete copy of the newest version (the failover would fall back to an older one, or to
 * none), nor the only copy of the version the current era restores (its writer may not have
 * made its live volume from it yet). Not finding the copy is the caller's not_found.
 */
export function copyRemovalProblem(rec: Pick<VolumeRecord, 'name' | 'eras' | 'held'>, node: string, v: VolumeVersion, force: boolean): { reason: CopyKeptReason; message: string } | null {
  if (!inLine(rec, v)) return null;
  const name = versionName(v);
  if (!force) {
    return { reason: 'not_diverged', message: `${node}'s copy ${name} of volume ${rec.name} is complete (of the volume's line: a failover may start from it), not diverged; remove it with --force, which still never removes the last complete copy` };
  }
  const others = holdersOf(rec, v).filter((n) => n !== node);
  const newest = newestComplete(rec);
  if (newest !== null && sameVersion(newest, v) && others.length === 0) {
    return { reason: 'last_complete', message: `${node}'s copy ${name} is the only complete copy of volume ${rec.name}'s newest version: removing it would leave a failover an older copy or none; it is kept, even with --force` };
  }
  const base = rec.eras.at(-1)?.base ?? null;
  if (base !== null && sameVersion(base, v) && others.length === 0) {
    return { reason: 'era_base', message: `${node}'s copy ${name} is the only copy of the version volume ${rec.name}'s current writer starts from; it is kept, even with --force` };
  }
  return null;
}

/** The record with `node`'s copy of v removed from `held` and listed in `removing`, for the node to delete. */
export function removeCopy(rec: VolumeRecord, node: string, v: VolumeVersion): VolumeRecord {
  const held = rec.held.filter((c) => c.node !== node || !sameVersion(c.version, v));
  const removing = (rec.removing ?? []).filter((r) => r.node !== node || !sameVersion(r.version, v));
  return { ...rec, held, removing: [...removing, { node, version: v }] };
}

/** The versions the operator removed that `node` still has to delete. */
export function removalsOf(rec: Pick<VolumeRecord, 'removing'>, node: string): VolumeVersion[] {
  return (rec.removing ?? []).filter((r) => r.node === node).map((r) => r.version);
}
