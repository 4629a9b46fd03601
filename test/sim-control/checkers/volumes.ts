// Checker 10: replicated volumes (issue 41, docs/volumes.md), for seeds whose exclusive service
// mounts one (scenario.volume). Four properties:
//
//   (1) placement: every era the committed log begins goes to a node the record allowed just
//       before it (the holders of the newest complete copy, the writer's own node, or anywhere
//       for a volume never started), based on that newest complete copy; and when the task's
//       container starts on its node, the node has that base (or it is the previous writer's
//       node keeping its live volume, or the era starts empty);
//   (2) never two tasks at once: the exclusive checker (the service has one slot);
//   (3) the record never loses its last complete copy: once some node holds a complete copy,
//       every committed record has one, and the newest complete copy never goes back;
//   (4) an increment is accepted only from the sender the holder's applied record names as the
//       current writer, in the same epoch (checked independently of refuseIncrement).

import { restoreWriter, sameVersion, versionName, type VolumeRecord, type VolumeVersion } from '../../../src/resources/volumes.ts';
import { Violation } from './violation.ts';

// The rules, written again here rather than taken from src/resources/volumes.ts: a checker that
// called the functions under test would not see them broken.

/** The newest held version whose seq the era of its own writer covers. */
function newestComplete(rec: Pick<VolumeRecord, 'eras' | 'held'>): VolumeVersion | null {
  let best: VolumeVersion | null = null;
  for (const c of rec.held) {
    const era = rec.eras.filter((e) => e.fromSeq <= c.version.seq).at(-1);
    if (era === undefined || era.node !== c.version.node || era.epoch !== c.version.epoch) continue;
    if (best === null || c.version.seq > best.seq) best = c.version;
  }
  return best;
}

/** Where a task may start: null for anywhere (never started), else the holders of the newest complete copy and the writer's node. */
function allowedNodes(rec: Pick<VolumeRecord, 'eras' | 'held'>): string[] | null {
  const last = rec.eras.at(-1);
  if (last === undefined) return null;
  const newest = newestComplete(rec);
  const out = newest === null ? [] : rec.held.filter((c) => sameVersion(c.version, newest)).map((c) => c.node);
  if (last.node !== restoreWriter) out.push(last.node);
  return [...new Set(out)].sort();
}

function currentWriter(rec: Pick<VolumeRecord, 'eras'>): { node: string; epoch: number } | null {
  const last = rec.eras.at(-1);
  return last === undefined ? null : { node: last.node, epoch: last.epoch };
}

function show(v: VolumeVersion | null): string {
  return v === null ? 'none' : versionName(v);
}

export class VolumesChecker {
  /** Eras begun on another node than the last writer's, from a complete copy (failovers). */
  failovers = 0;

  /** Between two committed records of the volume (before: absent for the first write). */
  onCommitted(before: VolumeRecord | undefined, after: VolumeRecord | undefined, index: number): void {
    if (after === undefined) {
      if (before !== undefined && newestComplete(before) !== null) throw new Violation('volumes', `entry ${index} deleted volume ${before.name}'s record while ${show(newestComplete(before))} was its newest complete copy`);
      return;
    }
    const lastBefore = before?.eras.at(-1);
    const lastAfter = after.eras.at(-1);
    const newEra = lastAfter !== undefined && (lastBefore === undefined || lastBefore.node !== lastAfter.node || lastBefore.epoch !== lastAfter.epoch);
    if (newEra) {
      if (before === undefined || before.eras.length === 0) {
        if (lastAfter.base !== null) throw new Violation('volumes', `entry ${index}: the first era of volume ${after.name} starts from ${show(lastAfter.base)}, not empty`);
      } else {
        const allowed = allowedNodes(before);
        const newest = newestComplete(before);
        if (allowed !== null && !allowed.includes(lastAfter.node)) {
          throw new Violation('volumes', `entry ${index}: volume ${after.name}'s task placed on ${lastAfter.node} (epoch ${lastAfter.epoch}), but only ${allowed.join(', ') || 'no node'} held its newest complete copy ${show(newest)} (or wrote it)`);
        }
        const base = lastAfter.base;
        if ((base === null) !== (newest === null) || (base !== null && newest !== null && !sameVersion(base, newest))) {
          throw new Violation('volumes', `entry ${index}: volume ${after.name}'s era on ${lastAfter.node} starts from ${show(base)}, not the newest complete copy ${show(newest)}`);
        }
        if (base !== null && lastBefore?.node !== lastAfter.node) this.failovers++;
      }
    }
    const was = before === undefined ? null : newestComplete(before);
    const now = newestComplete(after);
    if (was !== null && (now === null || now.seq < was.seq)) {
      throw new Violation('volumes', `entry ${index}: volume ${after.name}'s newest complete copy went from ${show(was)} (held by ${before?.held.filter((c) => sameVersion(c.version, was)).map((c) => c.node).join(', ')}) to ${show(now)}`);
    }
  }

  /** A running container of the volume's service appeared on `node` (epoch from its labels); `holds` is what the node's disk has. */
  onTaskStart(rec: VolumeRecord | undefined, node: string, epoch: number, holds: (v: VolumeVersion) => boolean, atMs: number): void {
    if (rec === undefined) return;
    // The last era of (node, epoch): a node may write the volume again, in the same epoch, after another did.
    let i = rec.eras.length - 1;
    while (i >= 0 && (rec.eras[i]?.node !== node || rec.eras[i]?.epoch !== epoch)) i--;
    if (i < 0) throw new Violation('volumes', `at ${atMs} ms a task of volume ${rec.name}'s service runs on ${node} (epoch ${epoch}), which no era of the committed record names`);
    const era = rec.eras[i];
    const previous = rec.eras[i - 1];
    if (era === undefined || era.base === null || holds(era.base) || previous?.node === node) return;
    throw new Violation('volumes', `at ${atMs} ms a task of volume ${rec.name}'s service starts on ${node} (epoch ${epoch}) without the version its era starts from (${show(era.base)})`);
  }

  /** A holder accepted an increment of v from sender, by its applied record `rec`. */
  onAccept(rec: VolumeRecord | undefined, holder: string, sender: { node: string; epoch: number }, v: VolumeVersion, atMs: number): void {
    const w = rec === undefined ? null : currentWriter(rec);
    if (w === null || w.node !== sender.node || w.epoch !== sender.epoch) {
      throw new Violation('volumes', `at ${atMs} ms ${holder} accepted ${versionName(v)} from ${sender.node} (epoch ${sender.epoch}), but its record names ${w === null ? 'no writer' : `${w.node} (epoch ${w.epoch})`} as the writer`);
    }
  }
}
