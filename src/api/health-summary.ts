// What an operator looks for first, in one answer (GET /v1/summary; the console's header on
// every view): is there a leader and a quorum, how many voters may still fail, which nodes are
// not ready, which services have not converged, which tasks meant to run are failing, and which
// of the documented alert rules (docs/monitoring/shoal-rules.yml) have their condition true now.
// Pure: the route gathers the cluster view, the applied state and this node's series.

import type { ControlState } from '../resources/state.ts';
import { tasksOf } from '../resources/state.ts';
import { viewOf } from '../resources/task-view.ts';
import type { ClusterView } from './cluster-routes.ts';
import type { ServiceStatus } from './control-views.ts';
import type { SeriesWindow } from './series-ring.ts';
import type { NodeSeriesName } from './series-sampler.ts';
import { compareText } from '../base/order.ts';

export interface SummaryAlert {
  /** The rule's name in docs/monitoring/shoal-rules.yml. */
  alert: string;
  severity: 'critical' | 'warning';
  summary: string;
  /** Where to look: the console links a node to Nodes, a service to Services, the cluster to Cluster. */
  subject: { kind: 'cluster' | 'node' | 'service'; name: string | null };
}

export interface HealthSummary {
  /** The node that answered, and whether its view is the leader's (a follower's is its own). */
  node: string;
  view: 'leader' | 'local';
  leader: { id: string; name: string } | null;
  term: number;
  quorum: { voters: number; reachable: number; needed: number; tolerance: number; hasQuorum: boolean };
  nodesNotReady: Array<{ id: string; name: string; state: string; availability: string }>;
  membersUnreachable: Array<{ id: string; name: string }>;
  servicesNotConverged: Array<{ name: string; running: number; desired: number; pending: number; updating: boolean }>;
  /**
   * Tasks desired running whose state is failed or orphaned (their node is down), and tasks that
   * failed within the last `recentFailureMs` (a crash loop: each failed task is replaced at once,
   * so none is desired running for long); at most `failingTasksMax`.
   */
  failingTasks: Array<{ id: string; service: string; slot: number | string; node: string | null; observed: string; message: string | null }>;
  failingTasksTotal: number;
  alerts: SummaryAlert[];
}

export const failingTasksMax = 20;
/** How long a failed task counts as failing after it finished, in log time. */
export const recentFailureMs = 5 * 60_000;
/** docs/monitoring/shoal-rules.yml's thresholds. */
const followerBehindEntries = 10_000;
const applyLagEntries = 100;
const leaderChangesPerHour = 3;
const diskAvailFraction = 0.1;

export interface SummaryInputs {
  cluster: ClusterView;
  state: ControlState;
  /** Every service's status (control-views.ts serviceStatus), by name. */
  statuses: ReadonlyMap<string, ServiceStatus>;
  /** This node's samples of the last hour. */
  series: SeriesWindow<NodeSeriesName>;
  /** The leader's log time now (tasks' finishedAt is in it); without it, only tasks desired running count. */
  now?: number;
}

function quorumOf(cluster: ClusterView): HealthSummary['quorum'] {
  const voters = cluster.members.filter((m) => m.role === 'voter');
  const reachable = voters.filter((m) => m.health === 'healthy' || m.health === 'lagging').length;
  const needed = Math.floor(voters.length / 2) + 1;
  return { voters: voters.length, reachable, needed, tolerance: Math.max(0, reachable - needed), hasQuorum: reachable >= needed };
}

function failingTasks(state: ControlState, now: number | undefined): HealthSummary['failingTasks'] {
  const out: HealthSummary['failingTasks'] = [];
  for (const s of state.services.values()) {
    for (const t of tasksOf(state, s.value.name)) {
      const v = viewOf(state, t);
      const stuck = t.value.desired === 'running' && (v.observed === 'failed' || v.observed === 'orphaned');
      const recent = now !== undefined && v.observed === 'failed' && t.value.finishedAt !== null && t.value.finishedAt >= now - recentFailureMs;
      if (!stuck && !recent) continue;
      const node = t.value.nodeId === null ? null : state.nodes.get(t.value.nodeId)?.value.name ?? t.value.nodeId;
      out.push({ id: t.value.id, service: t.value.service, slot: t.value.slot, node, observed: v.observed, message: t.value.message ?? v.status?.message ?? null });
    }
  }
  return out;
}

const sum = (xs: ReadonlyArray<number | null>): number => xs.reduce<number>((s, x) => s + (x ?? 0), 0);
const lastOf = (xs: ReadonlyArray<number | null>): number | null => [...xs].reverse().find((x) => x !== null) ?? null;

/** The documented rules whose condition holds now (Prometheus would also wait out each rule's `for:`). */
function alertsOf(s: Omit<HealthSummary, 'alerts'>, cluster: ClusterView, series: SeriesWindow<NodeSeriesName>): SummaryAlert[] {
  const alerts: SummaryAlert[] = [];
  const cl = { kind: 'cluster' as const, name: null };
  if (s.leader === null) alerts.push({ alert: 'ShoalNoLeader', severity: 'critical', summary: `node ${s.node} knows no leader`, subject: cl });
  for (const m of s.membersUnreachable) alerts.push({ alert: 'ShoalMemberUnreachable', severity: 'critical', summary: `member ${m.name} is unreachable`, subject: { kind: 'node', name: m.name } });
  for (const n of s.nodesNotReady) {
    if (n.state === 'down') alerts.push({ alert: 'ShoalNodeDown', severity: 'critical', summary: `node ${n.name} is down`, subject: { kind: 'node', name: n.name } });
  }
  for (const m of cluster.members) {
    if ((m.lag ?? 0) > followerBehindEntries) alerts.push({ alert: 'ShoalFollowerBehind', severity: 'warning', summary: `member ${m.name} is ${m.lag} entries behind`, subject: { kind: 'node', name: m.name } });
  }
  const changes = sum(series.series.leaderChanges);
  if (changes > leaderChangesPerHour) alerts.push({ alert: 'ShoalFrequentLeaderChanges', severity: 'warning', summary: `${changes} leader changes in the last hour`, subject: cl });
  const lag = series.series.commitLag;
  const lagNow = lastOf(lag);
  const tenMinAgo = lag.length > 0 ? lag[Math.max(0, lag.length - 1 - Math.round(600_000 / series.intervalMs))] ?? null : null;
  if (lagNow !== null && lagNow > applyLagEntries && tenMinAgo !== null && lagNow > tenMinAgo) {
    alerts.push({ alert: 'ShoalApplyLagGrowing', severity: 'warning', summary: `node ${s.node} has ${lagNow} committed entries not applied, and growing`, subject: cl });
  }
  for (const { name, pending } of s.servicesNotConverged) {
    if (pending > 0) alerts.push({ alert: 'ShoalTasksPending', severity: 'warning', summary: `service ${name} has ${pending} task${pending === 1 ? '' : 's'} waiting for a node`, subject: { kind: 'service', name } });
  }
  const avail = lastOf(series.series.diskAvailBytes);
  const size = lastOf(series.series.diskSizeBytes);
  if (avail !== null && size !== null && size > 0 && avail / size < diskAvailFraction) {
    alerts.push({ alert: 'ShoalDiskAlmostFull', severity: 'critical', summary: `node ${s.node}'s data filesystem has ${Math.round((avail / size) * 100)}% free`, subject: { kind: 'node', name: s.node } });
  }
  return alerts;
}

export function healthSummary({ cluster, state, statuses, series, now }: SummaryInputs): HealthSummary {
  const name = (id: string): string => cluster.members.find((m) => m.id === id)?.name ?? state.nodes.get(id)?.value.name ?? id;
  const failing = failingTasks(state, now);
  const base: Omit<HealthSummary, 'alerts'> = {
    node: name(cluster.node), view: cluster.view,
    leader: cluster.leader === null ? null : { id: cluster.leader, name: name(cluster.leader) },
    term: cluster.term,
    quorum: quorumOf(cluster),
    nodesNotReady: [...state.nodes.values()].map((n) => n.value).filter((n) => n.state !== 'ready')
      .map((n) => ({ id: n.id, name: n.name, state: n.state, availability: n.availability })).sort((a, b) => compareText(a.name, b.name)),
    membersUnreachable: cluster.members.filter((m) => m.health === 'unreachable').map((m) => ({ id: m.id, name: m.name })),
    servicesNotConverged: [...statuses.entries()].filter(([, st]) => !st.converged)
      .map(([n, st]) => ({ name: n, running: st.running, desired: st.desired, pending: st.pending, updating: st.updating })).sort((a, b) => compareText(a.name, b.name)),
    failingTasks: failing.slice(0, failingTasksMax),
    failingTasksTotal: failing.length,
  };
  return { ...base, alerts: alertsOf(base, cluster, series) };
}
