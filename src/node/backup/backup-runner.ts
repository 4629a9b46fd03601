// Taking backups to the targets in the store (docs/operations.md, "Backups"): on demand
// (POST /v1/backups) on the node asked, and on each target's schedule (`--every`) on the leader.
// A run takes the store's snapshot file of this node's applied state (after a read barrier, so
// it holds every acknowledged write), the keyring's recovery-sealed cluster keys, seals them for
// the target (backup-format.ts) with the newest complete copy of every replicated volume (a
// `btrfs send` stream, asked of a node that holds that version: volumeStream, and piped through
// the digest and the encryption into the target as it arrives, never whole in memory; an
// increment on the version the newest backup on the target holds, while that chain is sound and
// short enough: backup-chain.ts), writes
// them atomically (backup-store.ts), prunes by the target's
// retention, and records the outcome: a cluster event, `shoal.backup-status/<target>` (which the
// schedule and the metrics read, on every node), and the log.

import type { DocumentStore } from '../../../fsm/index.ts';
import { encodeCommand } from '../../../fsm/index.ts';
import { ShoalError } from '../../errors.ts';
import type { Logger } from '../../log.ts';
import type { ClusterKeyHolder } from '../../ports/cluster-keys.ts';
import type { MembershipView } from '../../ports/membership-view.ts';
import type { Proposer } from '../../ports/proposer.ts';
import type { TermSource } from '../../ports/term-source.ts';
import {
  backupStatusCollection, backupStatusSchema, backupTargetSchema, backupTargetsCollection, describeTarget,
  type BackupStatus, type BackupTarget,
} from '../../resources/backup-targets.ts';
import { readKeyring } from '../../resources/cluster-keyring.ts';
import { openSecretValue, unwrapDataKey } from '../../resources/secret-crypto.ts';
import { isSealed, plainSecretBytes, secretInStore } from '../../resources/secrets.ts';
import { allDocs } from '../../resources/state.ts';
import { snapshotFileParts } from '../recovery/backups.ts';
import { holdersOf, newestComplete, parseVersionName, versionName, volumeRecordSchema, volumesCollection, type VolumeVersion } from '../../resources/volumes.ts';
import { backupFileBytesMax } from './backup-store.ts';
import { backupIdOf, backupsToKeep, keysFileName, manifestOf, openSeal, storeFileName, volumeStreamFileName, type BackupHeader, type BackupManifest, type BackupVolume, type VolumeParent } from './backup-format.ts';
import { listBackups, lookupIn, pruneBackups, writeBackupFiles, type BackupFileSource } from './backup-store.ts';
import { chooseParent, type ManifestLookup } from './backup-chain.ts';
import { DirTargetIo, SftpTargetIo, type TargetIo } from './target-io.ts';
import { parseS3Url, s3Advice, S3Error, S3TargetIo } from './s3-io.ts';

export interface BackupNode extends Pick<TermSource, 'currentTerm'>, Pick<MembershipView, 'membership'>, Pick<Proposer, 'propose'> {
  readonly appliedIndex: number;
  readonly featureLevel: number;
  /** This node's id: a volume's stream is taken here first when this node holds it. */
  readonly id?: string;
  readonly isLeader: boolean;
  readBarrier(): Promise<unknown>;
}

/**
 * A `btrfs send` stream of version `version` of volume `name`, asked of `node` (a holder of it), at
 * most `bytesMax` bytes, as it arrives: an increment on `parent` when given and the holder still
 * has it, else whole (`parent` in the answer says which). Resolves once the holder has answered (a
 * refusal rejects, and the next holder is asked); the body, iterated, throws when it is cut short,
 * longer, or not the digest that node announced (the backup then fails, nothing listed).
 */
export type VolumeStreamSource = (node: string, name: string, version: VolumeVersion, bytesMax: number, parent: VolumeVersion | null) => Promise<{ body: AsyncIterable<Uint8Array>; parent: VolumeVersion | null }>;

export interface BackupRunnerOptions {
  node: BackupNode;
  store: DocumentStore;
  clusterId: string;
  version: string;
  log: Logger;
  clusterKeys?: ClusterKeyHolder;
  recordEvent?: (type: string, subject: string, details: Record<string, string | number | boolean | null>) => void;
  now?: () => number;
  /** Fetches the replicated volumes' streams; absent, a cluster with a volume that has a complete copy cannot be backed up. */
  volumeStream?: VolumeStreamSource;
  /** How often the leader looks for due targets (default 10 s). */
  tickMs?: number;
}

export interface BackupResult {
  target: string;
  id: string;
  index: number;
  bytes: number;
  encrypted: boolean;
  pruned: string[];
  /** Removed by retention, but kept: a kept backup's volume chain needs them. */
  keptForChains: string[];
  /**
   * The replicated volumes in it, each with the version its stream holds (null: none was complete,
   * restored empty), its stream's bytes, and what the stream is an increment on (null: whole).
   */
  volumes: { name: string; version: string | null; bytes: number; parent: VolumeParent | null }[];
}

const tickMsDefault = 10_000;

export function readTargets(store: DocumentStore): BackupTarget[] {
  return [...allDocs(store, backupTargetsCollection)].flatMap((d) => {
    const r = backupTargetSchema.safeParse(d.doc);
    return r.success ? [r.data] : [];
  });
}

export function readTarget(store: DocumentStore, name: string): BackupTarget | undefined {
  const d = store.get(backupTargetsCollection, name);
  const r = d === undefined ? undefined : backupTargetSchema.safeParse(d.doc);
  return r?.success === true ? r.data : undefined;
}

export function readStatus(store: DocumentStore, name: string): BackupStatus | undefined {
  const d = store.get(backupStatusCollection, name);
  const r = d === undefined ? undefined : backupStatusSchema.safeParse(d.doc);
  return r?.success === true ? r.data : undefined;
}

export class BackupRunner {
  private readonly running = new Map<string, Promise<BackupResult>>();
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly o: BackupRunnerOptions) {}

  private now(): number {
    return (this.o.now ?? Date.now)();
  }

  /** Opens the target's files: a directory here, or the SFTP server with its stored credential. */
  async open(t: BackupTarget): Promise<TargetIo> {
    if (t.dir !== undefined) return new DirTargetIo(t.dir);
    if (t.s3 !== undefined) {
      const loc = parseS3Url(t.s3.url);
      if (typeof loc === 'string' || t.secret === null) throw new ShoalError('backup_failed', `backup target ${t.name}: ${typeof loc === 'string' ? loc : 'its secret key is missing'}; add the target again`, { target: t.name });
      const credential = this.openCredential(t.name, t.secret);
      try {
        return new S3TargetIo(loc, { accessKeyId: t.s3.accessKeyId, secretKey: credential.toString('utf8'), region: t.s3.region, ...(t.s3.ca !== null ? { ca: t.s3.ca } : {}) });
      } finally {
        credential.fill(0);
      }
    }
    const sftp = t.sftp;
    if (sftp === undefined || t.secret === null) throw new ShoalError('backup_failed', `backup target ${t.name} has no location`, { target: t.name });
    const credential = this.openCredential(t.name, t.secret);
    try {
      const auth = sftp.auth === 'password' ? { password: credential.toString('utf8') } : { privateKey: credential.toString('utf8') };
      const want = sftp.hostKey.slice('SHA256:'.length);
      return await SftpTargetIo.connect(sftp, auth, (got) => got === want);
    } catch (err) {
      throw new ShoalError('backup_failed', `backup target ${t.name} (${describeTarget(t)}): ${(err as Error).message}; check the address, the credential and the host key (${sftp.hostKey})`, { target: t.name });
    } finally {
      credential.fill(0);
    }
  }

  private openCredential(target: string, secret: string): Buffer {
    const r = secretInStore(this.o.store, secret);
    if (r === undefined) throw new ShoalError('backup_failed', `backup target ${target}: its credential (secret ${secret}) is missing; add the target again`, { target });
    if (!isSealed(r)) return plainSecretBytes(r);
    const key = this.o.clusterKeys?.privateKey(r.sealed.key.keyId);
    if (key === undefined) throw new ShoalError('backup_failed', `backup target ${target}: this node does not hold cluster key ${r.sealed.key.keyId} (only voters do, unlocked); take the backup on a voter`, { target });
    const dataKey = unwrapDataKey(r.sealed.key, secret, key);
    try {
      return openSecretValue(secret, r.sealed, dataKey);
    } finally {
      dataKey.fill(0);
    }
  }

  /** One backup to `target` now; a second call while one runs for the same target joins it. */
  run(targetName: string): Promise<BackupResult> {
    const cur = this.running.get(targetName);
    if (cur !== undefined) return cur;
    const p = this.runOnce(targetName).finally(() => this.running.delete(targetName));
    this.running.set(targetName, p);
    return p;
  }

  private async runOnce(targetName: string): Promise<BackupResult> {
    const t = readTarget(this.o.store, targetName);
    if (t === undefined) throw new ShoalError('not_found', `no backup target ${targetName}; list them with: shoal backup target ls`, { target: targetName });
    const startedAt = this.now();
    try {
      const r = await this.take(t);
      await this.recordStatus(t.name, { lastAttemptAt: startedAt, lastSuccessAt: startedAt, lastId: r.id, lastError: null, failures: 0 });
      this.o.recordEvent?.('backup.completed', t.name, { id: r.id, index: r.index, bytes: r.bytes, encrypted: r.encrypted, pruned: r.pruned.length });
      this.o.log.info(`backup ${r.id} written to ${t.name} (${describeTarget(t)}): ${r.bytes} bytes, index ${r.index}${r.pruned.length > 0 ? `; removed ${r.pruned.join(', ')}` : ''}`);
      return r;
    } catch (caught) {
      const err = this.failureOf(t, caught);
      const message = err.message;
      const prev = readStatus(this.o.store, t.name);
      await this.recordStatus(t.name, { lastAttemptAt: startedAt, lastSuccessAt: prev?.lastSuccessAt ?? null, lastId: prev?.lastId ?? null, lastError: message.slice(0, 2048), failures: (prev?.failures ?? 0) + 1 });
      this.o.recordEvent?.('backup.failed', t.name, { error: message.slice(0, 512) });
      this.o.log.warn(`backup to ${t.name} failed: ${message}`);
      throw err;
    }
  }

  /** The error a failed backup to `t` answers: a ShoalError as it is; an S3 refusal with what to do about it. */
  private failureOf(t: BackupTarget, err: unknown): ShoalError {
    if (err instanceof ShoalError) return err;
    if (err instanceof S3Error && t.s3 !== undefined) {
      return new ShoalError('backup_failed', `backup to ${t.name} (${describeTarget(t)}) failed: ${err.message}; ${s3Advice(err, t.s3.accessKeyId, t.name)}; nothing was listed as a backup`, { target: t.name, s3Code: err.code });
    }
    return new ShoalError('backup_failed', `backup to ${t.name} (${describeTarget(t)}) failed: ${(err as Error).message}; nothing was listed as a backup`, { target: t.name });
  }

  private async take(t: BackupTarget): Promise<BackupResult> {
    await this.o.node.readBarrier();
    const { index, parts } = await snapshotFileParts(this.o.node, this.o.store, this.o.clusterId);
    const keyring = readKeyring(this.o.store)?.keyring;
    const recovery = keyring?.recovery ?? null;
    if (t.encrypt && recovery === null) {
      throw new ShoalError('backup_failed', `backup target ${t.name} is encrypted to the recovery key, and this cluster has none; make one with: shoal secret recovery-key`, { target: t.name });
    }
    const keys = { recovery: recovery === null ? null : { id: recovery.id, publicKey: recovery.publicKey }, keys: (keyring?.keys ?? []).map((k) => ({ id: k.id, publicKey: k.publicKey, recovery: k.recovery })) };
    const createdAt = this.now();
    const header: BackupHeader = { id: backupIdOf(new Date(createdAt), index), clusterId: this.o.clusterId, featureLevel: this.o.node.featureLevel, createdAt, index, term: this.o.node.currentTerm, writtenBy: this.o.version };
    const seal = openSeal(header.id, t.encrypt && recovery !== null ? { id: recovery.id, publicKey: recovery.publicKey } : null);
    let io: TargetIo | undefined;
    try {
      io = await this.open(t);
      const listed = await listBackups(io);
      // The newest older backup of this cluster whose manifest reads: its volumes' versions are the
      // parents (older: a clock set back must not make a backup an increment on a later one).
      const previous = listed.filter((b) => b.manifest?.clusterId === this.o.clusterId && b.id < header.id).at(-1)?.manifest ?? null;
      const plan = this.volumePlan(t.name, previous, lookupIn(listed, io.where));
      const files: BackupFileSource[] = [
        { name: storeFileName, bytes: seal.whole(storeFileName, Buffer.concat(parts)) },
        { name: keysFileName, bytes: seal.whole(keysFileName, Buffer.from(`${JSON.stringify(keys, null, 2)}\n`)) },
        ...plan.streams.map((s) => ({ name: s.file, ...seal.stream(s.file, s.body) })),
      ];
      const manifest = await writeBackupFiles(io, header, files, (stored) => manifestOf(header, seal.encryption, stored, plan.entries()));
      const prune = await pruneBackups(io, this.o.clusterId, (ids) => backupsToKeep(ids, t));
      if (prune.keptForChains.length > 0) this.o.log.info(`backup target ${t.name}: kept ${prune.keptForChains.join(', ')} past retention: a kept backup's volume chain needs them`);
      return { target: t.name, id: header.id, index, bytes: manifest.files.reduce((n, f) => n + f.bytes, 0), encrypted: manifest.encryption !== null, pruned: prune.removed, keptForChains: prune.keptForChains,
        volumes: manifest.volumes.map((v) => ({ name: v.name, version: v.version, bytes: plan.streams.find((s) => s.file === v.file)?.plainBytes() ?? 0, parent: v.parent ?? null })),
      };
    } finally {
      seal.close();
      await io?.close();
    }
  }

  /**
   * The newest complete copy of every replicated volume, as the store has it after the snapshot
   * was taken (a copy recorded since is newer than the snapshot's record, never older), and for
   * each one a body that, once read, asks a node holding it for the stream (each holder in turn
   * until one answers) and passes it on as it arrives: an increment on the version `previous`
   * (the newest backup on the target) holds, while its chain is sound and short (chooseParent),
   * else whole; nothing at all when that version is the newest still. A volume no holder could
   * send fails the backup (a backup missing a volume is not good); so does a stream cut off
   * midway (it is not asked again of another holder: its file is half written by then). One with
   * no complete copy yet is listed with version null. `entries()`, once the streams have flowed,
   * are the manifest's volumes, each with the parent its holder actually sent against.
   */
  private volumePlan(target: string, previous: BackupManifest | null, lookup: ManifestLookup): { entries: () => BackupVolume[]; streams: PlannedStream[] } {
    const recs = [...allDocs(this.o.store, volumesCollection)].flatMap((d) => {
      const r = volumeRecordSchema.safeParse(d.doc);
      return r.success ? [r.data] : [];
    }).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const entries: (() => BackupVolume)[] = [];
    const streams: PlannedStream[] = [];
    for (const rec of recs) {
      const newest = newestComplete(rec);
      const entry = { name: rec.name, service: rec.service, sizeBytes: rec.sizeBytes, copies: rec.copies, everyMs: rec.everyMs };
      if (newest === null) {
        entries.push(() => ({ ...entry, version: null, file: null }));
        this.o.log.warn(`backup to ${target}: volume ${rec.name} has no complete copy yet; the backup lists it, and a restore starts it empty`);
        continue;
      }
      const version = versionName(newest);
      const choice = chooseParent(previous, rec.name, version, lookup);
      if (choice.kind === 'unchanged') {
        entries.push(() => ({ ...entry, version, file: null, parent: choice.parent }));
        continue;
      }
      if (choice.kind === 'whole' && previous !== null) this.o.log.info(`backup to ${target}: volume ${rec.name} goes in whole: ${choice.reason}`);
      const asked = choice.kind === 'increment' ? parseVersionName(choice.parent.version) : null;
      const file = volumeStreamFileName(entries.length);
      const holders = holdersOf(rec, newest);
      const withParent = asked === null ? [] : holdersOf(rec, asked);
      const planned = countedStream(target, rec.name, file, () => this.fetchStream(target, rec.name, newest, holders, Math.min(backupFileBytesMax, 2 * rec.sizeBytes), asked, withParent));
      streams.push(planned);
      entries.push(() => {
        const got = planned.parent();
        return { ...entry, version, file, ...(got !== null && choice.kind === 'increment' ? { parent: choice.parent } : {}) };
      });
    }
    return { entries: () => entries.map((e) => e()), streams };
  }

  /**
   * Version v's stream from the first holder that answers: this node first when it holds the
   * version (no transfer), then those that hold `parent` too (they can send the increment). A
   * holder of an older release refuses the parent query (bad_request): it is asked again whole.
   */
  private async fetchStream(target: string, name: string, v: VolumeVersion, holders: readonly string[], bytesMax: number, parent: VolumeVersion | null, withParent: readonly string[]): Promise<StreamAnswer> {
    const source = this.o.volumeStream;
    const what = `volume ${name}'s newest complete copy (${versionName(v)})`;
    if (source === undefined) throw new ShoalError('backup_failed', `backup to ${target}: this node cannot fetch ${what}; take the backup on a node that runs workloads with Docker`, { target, volume: name });
    const failed: string[] = [];
    const self = this.o.node.id;
    const rank = (n: string): number => (n === self ? 2 : 0) + (withParent.includes(n) ? 1 : 0);
    for (const node of [...holders].sort((a, b) => rank(b) - rank(a))) {
      try {
        try {
          return await source(node, name, v, bytesMax, parent);
        } catch (err) {
          if (parent === null || !(err instanceof ShoalError) || err.code !== 'bad_request') throw err;
          return await source(node, name, v, bytesMax, null);
        }
      } catch (err) {
        failed.push(`${node}: ${(err as Error).message}`);
      }
    }
    throw new ShoalError('backup_failed', `backup to ${target}: no node sent ${what} (${failed.join('; ') || 'no node holds it'}); nothing was listed as a backup`, { target, volume: name, version: versionName(v) });
  }

  private async recordStatus(target: string, status: BackupStatus): Promise<void> {
    try {
      await this.o.node.propose(encodeCommand({ cmd: { op: 'put', collection: backupStatusCollection, id: target, doc: { ...status } }, ts: this.now(), principal: 'shoal' }));
    } catch (err) {
      this.o.log.warn(`recording the outcome of the backup to ${target} failed: ${(err as Error).message}`);
    }
  }

  /** The targets whose schedule is due now (pure over the store; the leader runs them). */
  due(): string[] {
    const now = this.now();
    return readTargets(this.o.store).filter((t) => {
      if (t.intervalMs <= 0) return false;
      const s = readStatus(this.o.store, t.name);
      return s === undefined || now - s.lastAttemptAt >= t.intervalMs;
    }).map((t) => t.name);
  }

  /** The schedule: on the leader, every few seconds, the due targets, one at a time. */
  start(): void {
    if (this.timer !== undefined || this.closed) return;
    let busy = false;
    this.timer = setInterval(() => {
      if (busy || !this.o.node.isLeader) return;
      busy = true;
      void (async () => {
        for (const name of this.due()) {
          if (this.closed || !this.o.node.isLeader) break;
          await this.run(name).catch(() => undefined);
        }
      })().finally(() => { busy = false; });
    }, this.o.tickMs ?? tickMsDefault);
    this.timer.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    this.timer = undefined;
    await Promise.allSettled([...this.running.values()]);
  }
}

type StreamAnswer = Awaited<ReturnType<VolumeStreamSource>>;

interface PlannedStream {
  file: string;
  body: AsyncIterable<Uint8Array>;
  plainBytes: () => number;
  /** What the holder sent the stream against (null: whole), once it has answered. */
  parent: () => VolumeVersion | null;
}

/**
 * A volume's stream in a backup: fetched when first read, its bytes (in the clear) counted as they
 * pass; one that breaks off or arrives damaged fails the backup, saying after how many bytes.
 */
function countedStream(target: string, volume: string, file: string, fetch: () => Promise<StreamAnswer>): PlannedStream {
  let bytes = 0;
  let parent: VolumeVersion | null = null;
  async function* body(): AsyncGenerator<Uint8Array> {
    const answer = await fetch();
    parent = answer.parent;
    try {
      for await (const chunk of answer.body) {
        bytes += chunk.length;
        yield chunk;
      }
    } catch (err) {
      throw new ShoalError('backup_failed', `backup to ${target}: volume ${volume}'s stream failed after ${bytes} bytes: ${(err as Error).message}; nothing was listed as a backup`, { target, volume });
    }
  }
  return { file, body: body(), plainBytes: () => bytes, parent: () => parent };
}
