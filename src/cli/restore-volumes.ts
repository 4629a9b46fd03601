// The replicated volumes of a backup, brought back by `shoal restore` (docs/operations.md,
// "Backups"; docs/volumes.md): each volume's stream is received into the founding node's data
// directory as a complete version (the same `btrfs receive` a holder does, its length and sha256
// checked), and the volume's record in the restored store is rewritten so that version, held by
// the new node, is its newest complete copy, with no writer (the era of an operator's restore):
// the placement starts the exclusive service on that node, from that version. A volume the backup
// has no copy of (none was complete then, or a backup of format 1) starts empty. A volume whose
// stream is an increment (format 4) is received as its chain: the whole stream of the oldest
// backup of the chain first, then each increment in order, each on the version received before
// it (btrfs receive finds that parent by its received UUID), and the versions on the way deleted
// once the newest is there.

import type { Readable } from 'node:stream';
import { DocumentStore, encodeCommand } from '../../fsm/index.ts';
import { ShoalError } from '../errors.ts';
import { VolumeEngine } from '../executor/volumes/volume-engine.ts';
import { allDocs } from '../resources/state.ts';
import { compatCommand } from '../resources/record-compat.ts';
import {
  parseVersionName, restoreEras, versionName, volumeRecordSchema, volumesCollection, type VolumeRecord, type VolumeVersion,
} from '../resources/volumes.ts';
import type { BackupVolume } from '../node/backup/backup-format.ts';
import type { RestoreHook } from './snapshot.ts';

/**
 * A volume's stream in a backup, in the clear: its length and SHA-256 (known from a first pass
 * over the backup, before anything is written) and a way to read it again as it flows.
 */
export interface VolumeStreamInBackup {
  /** The backup the stream is in, and the version it makes. */
  backupId: string;
  version: string;
  /** The version it is an increment on (received just before it); null: whole. */
  parent: string | null;
  bytes: number;
  sha256: string;
  /** The stream from the target, decrypted chunk by chunk as it is read. */
  open(): Readable;
}

/** A volume of the backup with its chain's streams, the whole one first (none: no copy, starts empty). */
export interface RestoredVolume {
  entry: BackupVolume;
  streams: VolumeStreamInBackup[];
}

/** The bytes of a volume's streams, its whole one and its increments. */
export const streamBytes = (v: RestoredVolume): number => v.streams.reduce((n, s) => n + s.bytes, 0);

/**
 * Receives each volume's chain into `dataDir`, the whole stream first, then each increment on the
 * version before it; keeps only the newest as a complete version, then unmounts the volume (the
 * node mounts it again).
 */
export async function receiveVolumes(dataDir: string, volumes: readonly RestoredVolume[]): Promise<void> {
  const engine = new VolumeEngine(dataDir);
  for (const { entry, streams } of volumes) {
    const version = entry.version === null ? null : parseVersionName(entry.version);
    if (streams.length === 0 || version === null) continue;
    try {
      for (const s of streams) await receiveLink(engine, entry, s);
      // The received subvolume is there, read-only (a receive marks it so only once the stream is whole).
      const held = await engine.versions(entry.name);
      if (!held.some((v) => versionName(v) === entry.version)) {
        throw new ShoalError('volume_tool_failed', `volume ${entry.name}: btrfs receive of ${entry.version} left no complete version`, { volume: entry.name });
      }
      // The chain's older versions were only the way there: the record names the newest alone.
      for (const v of held) if (versionName(v) !== entry.version) await engine.drop(entry.name, v);
    } finally {
      await engine.unmount(entry.name).catch(() => undefined);
    }
  }
}

async function receiveLink(engine: VolumeEngine, entry: BackupVolume, s: VolumeStreamInBackup): Promise<void> {
  const version = parseVersionName(s.version);
  const parent = s.parent === null ? null : parseVersionName(s.parent);
  if (version === null || (s.parent !== null && parent === null)) throw new ShoalError('internal', `volume ${entry.name}: ${s.backupId} names no version (${s.version} on ${s.parent ?? 'nothing'})`);
  await engine.receive({
    volume: entry.name, version, parent, sender: { node: version.node, epoch: version.epoch }, bytes: s.bytes, sha256: s.sha256,
  }, entry.sizeBytes, s.open(), () => null);
}

/** The record of a restored volume: its version held by `nodeId` alone, as the newest complete copy; or empty. */
export function restoredRecord(rec: VolumeRecord, version: VolumeVersion | null, nodeId: string, atMs: number): VolumeRecord {
  if (version === null) return { ...rec, eras: [], held: [], lastError: null };
  return { ...rec, eras: restoreEras(rec, version), held: [{ node: nodeId, version, atMs }], lastError: null };
}

/**
 * The store snapshot `app` (at `index`) with every volume record rewritten for the new node: one
 * entry per record, applied after `index`; returns the new snapshot and its index.
 */
export function rewriteVolumeRecords(app: Uint8Array, index: number, volumes: readonly BackupVolume[], nodeId: string, nowMs: number): { app: Uint8Array; index: number } {
  const store = new DocumentStore();
  store.restore(app);
  const names = new Set([...[...allDocs(store, volumesCollection)].map((d) => d.id), ...volumes.map((v) => v.name)]);
  let at = Math.max(index, store.revision);
  for (const name of [...names].sort()) {
    const doc = store.get(volumesCollection, name);
    const parsed = volumeRecordSchema.safeParse(doc?.doc);
    const entry = volumes.find((v) => v.name === name);
    if (!parsed.success && entry === undefined) continue;
    const base: VolumeRecord = parsed.success ? parsed.data : {
      name, service: entry?.service ?? name, copies: entry?.copies ?? 1, everyMs: entry?.everyMs ?? 60_000, sizeBytes: entry?.sizeBytes ?? 1, eras: [], held: [], lastError: null,
    };
    const version = entry?.version === null || entry?.version === undefined ? null : parseVersionName(entry.version);
    const next = restoredRecord(base, version, nodeId, nowMs);
    const compat = compatCommand({ op: 'put', collection: volumesCollection, id: name, doc: next as unknown as Record<string, never> });
    at += 1;
    const r = store.apply({ index: at, term: 1, data: encodeCommand({ cmd: compat.cmd, ts: nowMs, principal: 'shoal:restore' }), logTimeMs: nowMs, featureLevel: compat.featureLevel });
    if (!r.ok) throw new ShoalError('internal', `rewriting volume ${name}'s record for the restored node failed: ${r.error.message}`);
  }
  return { app: store.snapshot(), index: at };
}

/** What `shoal restore` and `shoal drill restore` run between the new identity and the log (snapshot.ts, RestoreHook). */
export function volumesRestoreHook(volumes: readonly RestoredVolume[]): RestoreHook {
  return async ({ dataDir, nodeId, app, index }) => {
    await receiveVolumes(dataDir, volumes);
    const rewritten = rewriteVolumeRecords(app, index, volumes.map((v) => v.entry), nodeId, Date.now());
    return { ...rewritten, report: { volumes: volumes.map((v) => ({ name: v.entry.name, service: v.entry.service, version: v.streams.length === 0 ? null : v.entry.version, bytes: streamBytes(v), streams: v.streams.length })) } };
  };
}

/** A line for each volume, for the restore's report. */
export function describeRestored(volumes: readonly RestoredVolume[]): string[] {
  return volumes.map((v) => (v.entry.version === null || v.streams.length === 0
    ? `volume ${v.entry.name}: the backup holds no copy (none was complete when it was taken); it starts empty`
    : `volume ${v.entry.name}: version ${v.entry.version} received (${streamBytes(v)} bytes${v.streams.length > 1 ? `: a whole stream of ${v.streams[0]?.backupId ?? '?'} and ${v.streams.length - 1} increments` : ''}); service ${v.entry.service} starts on it here`));
}
