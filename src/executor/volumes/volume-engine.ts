// The node's volume engine (issue 41, docs/volumes.md): each replicated volume is its own btrfs
// filesystem in a loop file under the node's data directory, mounted there; the container gets
// its `live` subvolume bound in. Every interval the writer takes a read-only snapshot (atomic,
// crash-consistent: what a power cut would leave) named by its version, and sends it to each
// holder as an increment on the newest version that holder has (`btrfs send -p`), with its
// length and sha256; a holder checks both, and refuses a sender that is no longer the volume's
// writer, before `btrfs receive` makes the version. A restore makes `live` a writable snapshot
// of a version.
//
// Layout under <dataDir>/volumes/<name>/:
//   image            the loop file (sparse, replicate.size)
//   streams/         send and receive streams (outside the filesystem, so a full volume can still send)
//   mnt/             the mounted filesystem:
//     live           the volume the container sees
//     versions/<v>   read-only snapshots, named by versionName (s<seq>-e<epoch>-<node>); a
//                    receive in progress is a writable one there, never listed
//     diverged/<v>   a live volume set aside when another node became the writer: kept, never used
//
// One operation at a time per volume (a promise chain); no clock is read here.

import { createHash, randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, open, readFile, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Transform, type Readable } from 'node:stream';
import { ShoalError } from '../../errors.ts';
import { parseVersionName, versionName, type VolumeEra, type VolumeVersion } from '../../resources/volumes.ts';
import * as btrfs from './btrfs.ts';

/** What a writer announces with an increment, and a holder checks. */
export interface IncrementOffer {
  volume: string;
  version: VolumeVersion;
  /** The version it is an increment on (the holder must have it); null: a full copy. */
  parent: VolumeVersion | null;
  /** The sender, as the holder checks it against the store's current writer. */
  sender: { node: string; epoch: number };
  bytes: number;
  sha256: string;
}

/** A made increment: the offer and the stream's file (deleted by `release`). */
export interface Increment extends IncrementOffer {
  file: string;
}

const volumeNamePattern = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

export class VolumeEngine {
  private readonly root: string;
  private readonly chains = new Map<string, Promise<unknown>>();
  /** Volumes whose streams directory this process has cleared of unreleased sends. */
  private readonly sweptStreams = new Set<string>();

  constructor(dataDir: string) {
    this.root = join(dataDir, 'volumes');
  }

  /** The directory bound into the container. */
  livePath(name: string): string {
    return join(this.mnt(name), 'live');
  }

  /** Makes the volume's filesystem if it has none (a sparse file of sizeBytes), and mounts it. Idempotent. */
  ensure(name: string, sizeBytes: number): Promise<void> {
    return this.serial(name, () => this.ensureNow(name, sizeBytes));
  }

  /**
   * Makes the volume ready for its task on this node: restores `from` (a version this node
   * holds) as the live volume, setting aside any live volume there was as diverged; without
   * `from`, keeps the live volume, or makes an empty one.
   */
  prepareLive(name: string, sizeBytes: number, from: VolumeVersion | null): Promise<{ restored: boolean; setAside: string | null }> {
    return this.serial(name, async () => {
      await this.ensureNow(name, sizeBytes);
      const live = this.livePath(name);
      if (from === null) {
        if (!(await exists(live))) await btrfs.createSubvolume(live);
        return { restored: false, setAside: null };
      }
      const source = this.versionPath(name, from);
      if (!(await exists(source))) {
        throw new ShoalError('volume_no_copy', `volume ${name}: this node does not hold version ${versionName(from)}, so it cannot restore it`, { volume: name, version: from });
      }
      const setAside = await this.setAsideNow(name);
      await btrfs.snapshot(source, live, false);
      return { restored: true, setAside };
    });
  }

  /**
   * Makes the live volume the one era `era` starts from, once per era (a marker file says which
   * era it was made for, so a task restarted within the era keeps its data): `keepLive` (this
   * node was the previous writer: a restart in place) keeps it; an era with a base restores
   * that version; an era without one (a new volume, or restored empty) starts empty, setting
   * aside any old live volume as diverged.
   */
  prepareForEra(name: string, sizeBytes: number, era: VolumeEra, keepLive: boolean): Promise<void> {
    const marker = eraMarker(era);
    return this.serial(name, async () => {
      await this.ensureNow(name, sizeBytes);
      const file = join(this.root, name, 'era');
      if ((await readFile(file, 'utf8').catch(() => '')) === marker) return;
      const live = this.livePath(name);
      if (keepLive || (era.base === null && !(await exists(live)))) {
        if (!(await exists(live))) await btrfs.createSubvolume(live);
      } else if (era.base === null) {
        await this.setAsideNow(name);
        await btrfs.createSubvolume(live);
      } else {
        const source = this.versionPath(name, era.base);
        if (!(await exists(source))) {
          throw new ShoalError('volume_no_copy', `volume ${name}: this node does not hold version ${versionName(era.base)}, which its era restores`, { volume: name, version: era.base });
        }
        await this.setAsideNow(name);
        await btrfs.snapshot(source, live, false);
      }
      await writeFile(`${file}.tmp`, marker);
      await rename(`${file}.tmp`, file);
    });
  }

  /** Whether the live volume was made for `era` (prepareForEra ran for it here): only then does the writer take versions of it. */
  async liveIsFor(name: string, era: VolumeEra): Promise<boolean> {
    const marker = await readFile(join(this.root, name, 'era'), 'utf8').catch(() => '');
    return marker === eraMarker(era) && (await exists(this.livePath(name)));
  }

  /** Whether this node has the volume's filesystem (it was a writer or a holder of it). */
  has(name: string): Promise<boolean> {
    assertVolumeName(name);
    return exists(join(this.root, name, 'image'));
  }

  /** The names of the volumes this node has a filesystem of. */
  async names(): Promise<string[]> {
    const entries = await readdir(this.root).catch(() => [] as string[]);
    const out: string[] = [];
    for (const e of entries) if (volumeNamePattern.test(e) && (await exists(join(this.root, e, 'image')))) out.push(e);
    return out.sort();
  }

  /** Sets the live volume aside as diverged (another node is the writer now); returns its name there, or null when there was none. */
  setAsideLive(name: string): Promise<string | null> {
    return this.serial(name, () => this.setAsideNow(name));
  }

  /** Takes version v: a read-only snapshot of the live volume, atomic (as a power cut would leave it). */
  snapshot(name: string, v: VolumeVersion): Promise<void> {
    return this.serial(name, async () => {
      const dest = this.versionPath(name, v);
      if (await exists(dest)) throw new ShoalError('volume_copy_refused', `volume ${name}: version ${versionName(v)} exists already`, { reason: 'exists', volume: name });
      await btrfs.snapshot(this.livePath(name), dest, true);
    });
  }

  /** The versions this node holds (whole ones: a receive in progress is not listed), oldest first. */
  versions(name: string): Promise<VolumeVersion[]> {
    return this.serial(name, () => this.versionsNow(name));
  }

  /** The live volumes set aside here as diverged, by name. */
  async diverged(name: string): Promise<string[]> {
    return (await readdir(join(this.mnt(name), 'diverged')).catch(() => [] as string[])).sort();
  }

  /**
   * Writes version v's stream, as an increment on `parent` (which the holder has) or whole, to
   * a file, and measures it. The caller sends it (`body`) and then `release`s it.
   */
  makeIncrement(name: string, v: VolumeVersion, parent: VolumeVersion | null, sender: { node: string; epoch: number }): Promise<Increment> {
    return this.serial(name, async () => {
      const streams = join(this.root, name, 'streams');
      await mkdir(streams, { recursive: true });
      if (!this.sweptStreams.has(name)) {
        // What an earlier process made and never released (it stopped mid-send) goes once.
        this.sweptStreams.add(name);
        for (const f of await readdir(streams)) if (f.startsWith('out-')) await rm(join(streams, f), { force: true });
      }
      // One file per increment made: a backup's whole stream and a holder's may be read at once,
      // and each is released (deleted) when its own send ends.
      const file = join(streams, `out-${versionName(v)}-${parent === null ? 'full' : versionName(parent)}-${randomUUID()}.stream`);
      await btrfs.send(this.versionPath(name, v), file, parent === null ? null : this.versionPath(name, parent));
      const { bytes, sha256 } = await measure(file);
      return { volume: name, version: v, parent, sender, bytes, sha256, file };
    });
  }

  /** The increment's stream, to send. */
  body(inc: Increment): Readable {
    return createReadStream(inc.file);
  }

  async release(inc: Increment): Promise<void> {
    await rm(inc.file, { force: true });
  }

  /**
   * Receives an increment: `refuse` (the store's verdict on the sender: refuseIncrement) is
   * asked first; then the stream is written to a file, its length and sha256 checked against
   * the offer, and `btrfs receive` makes the version. Any failure leaves no version behind.
   */
  receive(offer: IncrementOffer, sizeBytes: number, body: Readable, refuse: () => string | null): Promise<void> {
    const name = offer.volume;
    assertVolumeName(name);
    return this.serial(name, async () => {
      const refusal = refuse();
      if (refusal !== null) {
        body.resume();
        throw new ShoalError('volume_copy_refused', `volume ${name}: copy ${versionName(offer.version)} refused: ${refusal}`, { reason: refusal.split(':')[0], volume: name });
      }
      await this.ensureNow(name, sizeBytes);
      await this.checkReceivable(offer, sizeBytes, body);
      const streams = join(this.root, name, 'streams');
      await mkdir(streams, { recursive: true });
      const file = join(streams, `in-${versionName(offer.version)}.stream`);
      try {
        const got = await writeMeasured(body, file, offer.bytes);
        if (got.bytes !== offer.bytes || got.sha256 !== offer.sha256) {
          throw new ShoalError('volume_copy_refused', `volume ${name}: copy ${versionName(offer.version)} refused: checksum: received ${got.bytes} bytes with sha256 ${got.sha256}, sent ${offer.bytes} with ${offer.sha256}`, { reason: 'checksum', volume: name });
        }
        await this.receiveFileNow(name, offer.version, file);
      } finally {
        await rm(file, { force: true });
      }
    });
  }

  /** Deletes version v here (the caller has asked versionsToDrop, which never names the last copy). */
  drop(name: string, v: VolumeVersion): Promise<void> {
    return this.serial(name, async () => {
      const path = this.versionPath(name, v);
      if (await exists(path)) await btrfs.deleteSubvolume(path);
    });
  }

  /** Unmounts the volume's filesystem (its loop device goes with it); the files stay. */
  unmount(name: string): Promise<void> {
    return this.serial(name, async () => {
      if (await btrfs.isMounted(this.mnt(name))) await btrfs.umount(this.mnt(name));
    });
  }

  private async ensureNow(name: string, sizeBytes: number): Promise<void> {
    assertVolumeName(name);
    const dir = join(this.root, name);
    const image = join(dir, 'image');
    await mkdir(this.mnt(name), { recursive: true });
    if (!(await exists(image))) {
      // Made under another name and renamed once mkfs succeeded: a crash in between leaves no half-made image.
      const part = `${image}.part`;
      const fh = await open(part, 'w');
      try {
        await fh.truncate(sizeBytes);
      } finally {
        await fh.close();
      }
      await btrfs.mkfs(part);
      await rename(part, image);
    }
    if (!(await btrfs.isMounted(this.mnt(name)))) await btrfs.mountLoop(image, this.mnt(name));
    for (const sub of ['versions', 'diverged']) await mkdir(join(this.mnt(name), sub), { recursive: true });
  }

  private async checkReceivable(offer: IncrementOffer, sizeBytes: number, body: Readable): Promise<void> {
    const refuse = (reason: string, message: string): never => {
      body.resume();
      throw new ShoalError('volume_copy_refused', `volume ${offer.volume}: copy ${versionName(offer.version)} refused: ${reason}: ${message}`, { reason, volume: offer.volume });
    };
    const dest = this.versionPath(offer.volume, offer.version);
    if (await exists(dest)) {
      if (await btrfs.isReadOnly(dest)) refuse('exists', 'this node holds that version already');
      else await btrfs.deleteSubvolume(dest);
    }
    // A stream holds at most the filesystem's data and its metadata: twice its size is generous.
    if (offer.bytes > 2 * sizeBytes) refuse('too_large', `the stream announces ${offer.bytes} bytes, more than twice the volume's ${sizeBytes}`);
    if (offer.parent !== null && !(await exists(this.versionPath(offer.volume, offer.parent)))) {
      refuse('no_parent', `this node does not hold ${versionName(offer.parent)}, which the increment is based on; send it whole`);
    }
  }

  /**
   * `btrfs receive` straight into versions/: the version must keep its received UUID, which is
   * how a later increment finds its parent, and a read-only subvolume cannot be moved to another
   * directory. A receive marks the subvolume read-only only once the stream is whole, so one
   * that is not read-only is partial (a crash mid-receive): deleted here and by versionsNow.
   */
  private async receiveFileNow(name: string, v: VolumeVersion, file: string): Promise<void> {
    const dest = this.versionPath(name, v);
    try {
      await btrfs.receive(file, join(this.mnt(name), 'versions'));
    } catch (err) {
      if (await exists(dest)) await btrfs.deleteSubvolume(dest).catch(() => undefined);
      throw err;
    }
  }

  private async setAsideNow(name: string): Promise<string | null> {
    const live = this.livePath(name);
    if (!(await exists(live))) return null;
    const taken = new Set(await readdir(join(this.mnt(name), 'diverged')));
    let n = 1;
    while (taken.has(`live-${n}`)) n++;
    await rename(live, join(this.mnt(name), 'diverged', `live-${n}`));
    return `live-${n}`;
  }

  private async versionsNow(name: string): Promise<VolumeVersion[]> {
    const out: VolumeVersion[] = [];
    for (const entry of await readdir(join(this.mnt(name), 'versions')).catch(() => [] as string[])) {
      const v = parseVersionName(entry);
      if (v === null) continue;
      if (await btrfs.isReadOnly(this.versionPath(name, v))) out.push(v);
      else await btrfs.deleteSubvolume(this.versionPath(name, v));
    }
    return out.sort((a, b) => a.seq - b.seq);
  }

  private mnt(name: string): string {
    assertVolumeName(name);
    return join(this.root, name, 'mnt');
  }

  private versionPath(name: string, v: VolumeVersion): string {
    return join(this.mnt(name), 'versions', versionName(v));
  }

  private serial<T>(name: string, op: () => Promise<T>): Promise<T> {
    const prev = this.chains.get(name) ?? Promise.resolve();
    const next = prev.then(op, op);
    this.chains.set(name, next.catch(() => undefined));
    return next;
  }
}

/** What the `era` marker file holds for an era. */
function eraMarker(era: VolumeEra): string {
  return `${era.node}/${era.epoch}/${era.fromSeq}`;
}

function assertVolumeName(name: string): void {
  if (!volumeNamePattern.test(name)) throw new ShoalError('bad_request', `${JSON.stringify(name)} is not a volume name (letters, digits, _ . -, starting with a letter or digit)`);
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(() => true, () => false);
}

async function measure(file: string): Promise<{ bytes: number; sha256: string }> {
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of createReadStream(file)) {
    hash.update(chunk as Buffer);
    bytes += (chunk as Buffer).length;
  }
  return { bytes, sha256: hash.digest('hex') };
}

/** Writes body to file, hashing it; past `bytesMax` (the announced length) it stops: the copy is refused as damaged. */
async function writeMeasured(body: Readable, file: string, bytesMax: number): Promise<{ bytes: number; sha256: string }> {
  const hash = createHash('sha256');
  let bytes = 0;
  const tap = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      bytes += chunk.length;
      if (bytes > bytesMax) {
        cb(new ShoalError('volume_copy_refused', `the stream is longer than the ${bytesMax} bytes announced`, { reason: 'checksum' }));
        return;
      }
      hash.update(chunk);
      cb(null, chunk);
    },
  });
  await pipeline(body, tap, createWriteStream(file));
  return { bytes, sha256: hash.digest('hex') };
}
