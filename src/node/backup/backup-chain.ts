// Chains of incremental volume streams (issue 43, format 4; docs/operations.md, "Backups"). A
// volume's entry in a backup may name a parent: an older backup on the same target and the
// version its entry for that volume holds. The entry's stream is then `btrfs send -p` against
// that version, so a restore receives the chain's whole stream first and each increment after it
// in order. The chain is the entries from the whole one to this one; its length (links) is the
// number of backups a restore of the volume reads, and is bounded (volumeChainLinksMax) so one
// damaged link costs at most that many backups, and a restore reads at most that many streams.
//
// Pure: manifests in, decisions out. The runner (which parent to ask for), verify and restore
// (what to read), and retention (what to keep) all walk chains the same way, here.

import type { BackupManifest, BackupVolume, VolumeParent } from './backup-format.ts';

/**
 * The most backups one volume's chain may span, the whole stream included: the backup after a
 * chain this long holds a whole stream again. 7: a week of daily backups per whole stream.
 */
export const volumeChainLinksMax = 7;

/** One backup of a volume's chain, the whole stream first. */
export interface ChainLink {
  backupId: string;
  /** The version this link's entry holds. */
  version: string;
  /** Its stream's file in that backup; null: the parent's version unchanged (nothing to receive). */
  file: string | null;
  /** The version its stream is an increment on; null: a whole stream. */
  parent: string | null;
}

/** A backup on the target as a chain walk sees it: its manifest, or why it has none (missing, damaged). */
export type ManifestLookup = (id: string) => BackupManifest | { problem: string };

/** Why a chain cannot be followed: the backup that is missing or damaged, and what is wrong. */
export interface ChainProblem {
  backupId: string;
  problem: string;
}

/** A bound on a walk, whatever the manifests say (each link is older than the last, so this is never reached by a sound target). */
const chainWalkLinksMax = 1024;

function entryOf(m: BackupManifest, name: string): BackupVolume | undefined {
  return m.volumes.find((v) => v.name === name);
}

/**
 * The chain of volume `name` that ends in backup `m`, the whole stream first; or the first backup
 * of it that is missing, damaged, or does not hold the version the next link is an increment on.
 * A volume without a version has an empty chain (it is restored empty).
 */
export function volumeChain(m: BackupManifest, name: string, lookup: ManifestLookup): { links: ChainLink[] } | { problem: ChainProblem } {
  const links: ChainLink[] = [];
  let cur = m;
  let entry = entryOf(m, name);
  if (entry === undefined) return { problem: { backupId: m.id, problem: `it lists no volume ${name}` } };
  while (entry.version !== null) {
    links.unshift({ backupId: cur.id, version: entry.version, file: entry.file, parent: entry.parent?.version ?? null });
    const parent: VolumeParent | undefined = entry.parent;
    if (parent === undefined) return { links };
    if (links.length >= chainWalkLinksMax) return { problem: { backupId: cur.id, problem: `volume ${name}'s chain is longer than ${chainWalkLinksMax} backups` } };
    const found = lookup(parent.backupId);
    const what = `volume ${name}'s stream in ${cur.id} is an increment on it`;
    if ('problem' in found) return { problem: { backupId: parent.backupId, problem: `${found.problem}; ${what}` } };
    const next = entryOf(found, name);
    if (next?.version !== parent.version) {
      return { problem: { backupId: parent.backupId, problem: `it holds ${next?.version ?? 'no'} version of volume ${name}, not ${parent.version}; ${what}` } };
    }
    cur = found;
    entry = next;
  }
  return { links };
}

/** Every backup id the chains of backup `m`'s volumes pass through (`m` included), as far as they can be followed. */
export function chainBackups(m: BackupManifest, lookup: ManifestLookup): Set<string> {
  const out = new Set<string>([m.id]);
  for (const v of m.volumes) {
    let entry: BackupVolume | undefined = v;
    let steps = 0;
    while (entry?.parent !== undefined && steps++ < chainWalkLinksMax) {
      out.add(entry.parent.backupId);
      const found = lookup(entry.parent.backupId);
      entry = 'problem' in found ? undefined : entryOf(found, v.name);
    }
  }
  return out;
}

/**
 * Retention over chains: `kept` and every backup a kept one's chains need. Returns the ids kept
 * only because a chain needs them (removing one would leave a kept backup unrestorable).
 */
export function keptForChains(kept: ReadonlySet<string>, lookup: ManifestLookup): Set<string> {
  const extra = new Set<string>();
  for (const id of kept) {
    const m = lookup(id);
    if ('problem' in m) continue;
    for (const need of chainBackups(m, lookup)) if (!kept.has(need)) extra.add(need);
  }
  return extra;
}

/** What a new backup's entry for a volume whose newest complete copy is `version` should be based on. */
export type ParentChoice =
  | { kind: 'whole'; reason: string }
  /** Nothing changed since the parent: an entry with no file. */
  | { kind: 'unchanged'; parent: VolumeParent }
  /** Ask the holder for an increment on parent.version. */
  | { kind: 'increment'; parent: VolumeParent };

/**
 * The parent for volume `name` at `version` in a new backup, given `previous`, the newest backup
 * of this cluster on the target whose manifest reads (null: none): an increment on the version it
 * holds while its chain can be followed and stays within volumeChainLinksMax; else whole, saying why.
 */
export function chooseParent(previous: BackupManifest | null, name: string, version: string, lookup: ManifestLookup, linksMax = volumeChainLinksMax): ParentChoice {
  if (previous === null) return { kind: 'whole', reason: 'no earlier backup on the target' };
  const chain = volumeChain(previous, name, lookup);
  if ('problem' in chain) return { kind: 'whole', reason: `the chain of ${previous.id} cannot be followed: ${chain.problem.backupId}: ${chain.problem.problem}` };
  const last = chain.links.at(-1);
  if (last === undefined) return { kind: 'whole', reason: `${previous.id} holds no copy of it` };
  if (chain.links.length + 1 > linksMax) return { kind: 'whole', reason: `the chain would span more than ${linksMax} backups` };
  const parent = { backupId: previous.id, version: last.version };
  return last.version === version ? { kind: 'unchanged', parent } : { kind: 'increment', parent };
}
