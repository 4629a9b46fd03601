// Which nodes `shoal upgrade` acts on, and in what order (docs/operations.md, "Rolling upgrade"):
// followers first, by name, the leader last, so leadership moves once, at the end. Pure: the
// walk (upgrade-walk.ts) asks the nodes, this decides.

import { compareNatural, compareText } from '../base/order.ts';

/** What one node says of its releases (GET /v1/upgrade), with its place in the cluster. */
export interface NodeReleases {
  id: string;
  name: string;
  apiAddress: string;
  /** The release the process runs, or null when it does not run from its releases folder. */
  running: string | null;
  previous: string | null;
  /** Version of each release the node holds, by name. */
  versions: Record<string, string>;
  /** The feature level each release can apply, by name, where the node knows it (optional: older nodes do not say). */
  levels?: Record<string, number>;
}

/**
 * The rollback steps whose release cannot apply the cluster's feature level (it never goes
 * down): each would stop at the first entry it cannot apply. A release whose level the node
 * does not say is not judged here; the node itself refuses it (release_refused, feature_level).
 */
export function rollbacksBelowLevel(steps: readonly Step[], clusterLevel: number): { node: NodeReleases; to: string; level: number }[] {
  return steps.flatMap((s) => {
    if (s.action !== 'rollback') return [];
    const level = s.node.levels?.[s.to];
    return level !== undefined && level < clusterLevel ? [{ node: s.node, to: s.to, level }] : [];
  });
}

export type Step =
  | { node: NodeReleases; action: 'upgrade'; to: string }
  | { node: NodeReleases; action: 'rollback'; to: string }
  | { node: NodeReleases; action: 'skip'; why: string };

/**
 * Compares two versions (major.minor.patch, then a pre-release, which sorts before the release):
 * negative when a is older. Parts that are not numbers compare as text.
 */
export function compareVersions(a: string, b: string): number {
  const split = (v: string): { main: string[]; pre: string | undefined } => {
    const [core = '', ...pre] = v.replace(/\+.*$/, '').split('-');
    return { main: core.split('.'), pre: pre.length > 0 ? pre.join('-') : undefined };
  };
  const x = split(a);
  const y = split(b);
  for (let i = 0; i < Math.max(x.main.length, y.main.length); i++) {
    const p = x.main[i] ?? '0';
    const q = y.main[i] ?? '0';
    const d = /^\d+$/.test(p) && /^\d+$/.test(q) ? Number(p) - Number(q) : compareText(p, q);
    if (d !== 0) return d;
  }
  if (x.pre === y.pre) return 0;
  if (x.pre === undefined) return 1;
  if (y.pre === undefined) return -1;
  return compareNatural(x.pre, y.pre);
}

/** Followers by name, then the leader. */
export function walkOrder(nodes: readonly NodeReleases[], leader: string | null): NodeReleases[] {
  const sorted = [...nodes].sort((a, b) => compareText(a.name, b.name) || compareText(a.id, b.id));
  return [...sorted.filter((n) => n.id !== leader), ...sorted.filter((n) => n.id === leader)];
}

/** Every node to `release`; a node already running it is skipped (the walk asks for --resume then). */
export function planUpgrade(nodes: readonly NodeReleases[], leader: string | null, release: string): Step[] {
  return walkOrder(nodes, leader).map((node): Step => (node.running === release ? { node, action: 'skip', why: `already runs ${release}` } : { node, action: 'upgrade', to: release }));
}

/**
 * Every node back to its previous release, when that is older than the one it runs: a node
 * already rolled back (its previous is now the newer one) is skipped, so a rollback can be run
 * again after it stopped half-way.
 */
export function planRollback(nodes: readonly NodeReleases[], leader: string | null): Step[] {
  return walkOrder(nodes, leader).map((node): Step => {
    const runningVersion = node.running === null ? undefined : node.versions[node.running];
    const previousVersion = node.previous === null ? undefined : node.versions[node.previous];
    if (node.previous === null || previousVersion === undefined) return { node, action: 'skip', why: 'has no previous release' };
    if (runningVersion === undefined) return { node, action: 'skip', why: 'does not run from its releases folder' };
    if (compareVersions(previousVersion, runningVersion) >= 0) return { node, action: 'skip', why: `already runs ${node.running} (${runningVersion}), not newer than its previous ${node.previous}` };
    return { node, action: 'rollback', to: node.previous };
  });
}
