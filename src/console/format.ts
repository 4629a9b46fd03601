// Pure helpers the views share: numbers as people read them.

import type { ClusterView } from '../api/cluster-routes.ts';
import type { ServiceStatus } from '../api/control-views.ts';

export function bytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i === 0 ? v : v.toFixed(1)} ${units[i]}`;
}

export function cores(millis: number): string {
  return `${(millis / 1000).toFixed(millis % 1000 === 0 ? 0 : 2)} cores`;
}

/** How long ago an ISO time or epoch milliseconds was, coarsely ("4 s ago", "3 min ago"). */
export function ago(when: string | number, nowMs: number): string {
  const t = typeof when === 'number' ? when : Date.parse(when);
  if (!Number.isFinite(t)) return '?';
  const s = Math.max(0, Math.round((nowMs - t) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86_400)} d ago`;
}

/**
 * How many voters the cluster can lose and keep a quorum, counting only the voters the leader
 * sees as healthy: a cluster with one voter already unreachable tolerates one fewer.
 */
export function failureTolerance(view: ClusterView): { voters: number; healthy: number; tolerance: number } {
  const voters = view.members.filter((m) => m.role === 'voter');
  const healthy = voters.filter((m) => m.health === 'healthy' || m.health === 'lagging').length;
  const quorum = Math.floor(voters.length / 2) + 1;
  return { voters: voters.length, healthy, tolerance: Math.max(0, healthy - quorum) };
}

/**
 * A service's replicas for the Services view: `2 / 3`, then what else is known of its tasks:
 * `0 / 5 · 5 serving` during an update (the old tasks still serve), `2 / 3 · 1 on an unreachable
 * node` (its node is suspect or down: nobody knows whether it still serves).
 */
export function replicasText(s: ServiceStatus): string {
  const extra: string[] = [];
  if (s.serving !== s.running) extra.push(`${s.serving} serving`);
  if (s.unreachable > 0) extra.push(`${s.unreachable} on ${s.unreachable === 1 ? 'an unreachable node' : 'unreachable nodes'}`);
  return [`${s.running} / ${s.desired}`, ...extra].join(' · ');
}
