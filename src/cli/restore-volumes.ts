// The replicated volumes of a backup, brought back by `shoal restore` (docs/operations.md,
// "Backups"; docs/volumes.md): each volume's stream is received into the founding node's data
// directory as a complete version (the same `btrfs receive` a holder does, its length and sha256
// checked), and the volume's record in the restored store is rewritten so that version, held by
// the new node, is its newest complete copy, with no writer (the era of an operator's restore):
// the placement starts the exclusive service on that node, from that version. A volume the backup
// has no copy of (none was complete then, or a backup of format 1) starts empty.

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
  bytes: number;
  sha256: string;
  /** The stream from the target, decrypted chunk by chunk as it is read. */
  open(): Readable;
}

/** A volume of the backup with its stream (null: no copy, starts empty). */
export interface RestoredVolume {
  entry: BackupVolume;
  stream: VolumeStreamInBackup | null;
}

/** Receives each stream into `dataDir` as a complete version, then unmounts the volume (the node mounts it again). */
export async function receiveVolumes(dataDir: string, volumes: readonly RestoredVolume[]): Promise<void> {
  const engine = new VolumeEngine(dataDir);
  for (const { entry, stream } of volumes) {
    const version = entry.version === null ? null : parseVersionName(entry.version);
    if (stream === null || version === null) continue;
    try {
      await engine.receive({
        volume: entry.name, version, parent: null, sender: { node: version.node, epoch: version.epoch }, bytes: stream.bytes, sha256: stream.sha256,
      }, entry.sizeBytes, stream.open(), () => null);
      // The received subvolume is there, read-only (a receive marks it so only once the stream is whole).
      if (!(await engine.versions(entry.name)).some((v) => versionName(v) === entry.version)) {
        throw new ShoalError('volume_tool_failed', `volume ${entry.name}: btrfs receive of ${entry.version} left no complete version`, { volume: entry.name });
      }
    } finally {
      await engine.unmount(entry.name).catch(() => undefined);
    }
  }
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
    return { ...rewritten, report: { volumes: volumes.map((v) => ({ name: v.entry.name, service: v.entry.service, version: v.stream === null ? null : v.entry.version, bytes: v.stream?.bytes ?? 0 })) } };
  };
}

/** A line for each volume, for the restore's report. */
export function describeRestored(volumes: readonly RestoredVolume[]): string[] {
  return volumes.map(({ entry, stream }) => (entry.version === null || stream === null
    ? `volume ${entry.name}: the backup holds no copy (none was complete when it was taken); it starts empty`
    : `volume ${entry.name}: version ${entry.version} received (${stream.bytes} bytes); service ${entry.service} starts on it here`));
}
