// The checks of `shoal doctor` (docs/operations.md, "Doctor"): pure functions of what was
// gathered (doctor.ts), each answering OK, WARN or FAIL with what to do, so each can be tested
// on made-up facts. The cluster's (quorum, tolerance, clocks, disks, versions), this machine's
// node's (API exposure, certificates), and the workloads' (container runtime, this node's
// containers against its assignments, services, images).

import { normalizeImageRef } from '../executor/image-ref.ts';
import type { View } from './cluster-view.ts';
import { mixedVersions } from './cluster-view.ts';

export type CheckStatus = 'ok' | 'warn' | 'fail' | 'skip';

export interface Check {
  name: string;
  status: CheckStatus;
  message: string;
  /** What to do about it (WARN and FAIL). */
  fix?: string;
}

export interface MemberFacts {
  name: string;
  id: string;
  reachable: boolean;
  /** The member's clock minus ours, from its answer's Date header (1 s resolution). */
  clockOffsetMs?: number;
  availBytes?: number;
  sizeBytes?: number;
}

/** Skew above this is worth a look; above skewFailMs, timestamps in events and tasks mislead. */
export const skewWarnMs = 2000;
export const skewFailMs = 30_000;
/** Free space under this share of the filesystem, or these bytes, is a warning (or a failure). */
export const diskWarnShare = 0.15;
export const diskFailShare = 0.05;
export const diskFailBytes = 1024 ** 3;
/** A certificate that expires within this many days is a warning. */
export const certWarnDays = 30;

const gib = (b: number): string => `${(b / 1024 ** 3).toFixed(1)} GiB`;

export function quorumCheck(view: View | undefined, addr: string): Check {
  const name = 'quorum';
  if (view === undefined) return { name, status: 'fail', message: `no node answered at ${addr}`, fix: 'start the nodes (shoal serve, or their service), or point --addr at a running member' };
  const voters = view.members.filter((m) => m.role === 'voter');
  const quorum = Math.floor(voters.length / 2) + 1;
  const up = voters.filter((m) => m.health === 'healthy' || m.health === 'lagging');
  if (view.leader === null) return { name, status: 'fail', message: `no leader (${view.view === 'local' ? 'this node cannot reach one' : 'election under way'}); ${up.length} of ${voters.length} voters reachable, a quorum is ${quorum}`, fix: 'bring voters back until a quorum answers; if two of three are gone for good, see "Recovery" in docs/operations.md' };
  if (up.length < quorum) return { name, status: 'fail', message: `${up.length} of ${voters.length} voters reachable; a quorum is ${quorum}`, fix: 'bring the unreachable voters back (shoal status lists them)' };
  const down = voters.filter((m) => !up.includes(m)).map((m) => m.name);
  if (down.length > 0) return { name, status: 'warn', message: `leader up, ${up.length} of ${voters.length} voters reachable (down: ${down.join(', ')}); one more failure may stop the cluster`, fix: `bring ${down.join(', ')} back, or remove it (shoal cluster remove) and add a replacement` };
  return { name, status: 'ok', message: `leader up, all ${voters.length} voters reachable` };
}

export function toleranceCheck(view: View | undefined): Check {
  const name = 'failure tolerance';
  if (view === undefined) return { name, status: 'skip', message: 'no cluster view' };
  const n = view.members.filter((m) => m.role === 'voter').length;
  const tolerates = Math.floor((n - 1) / 2);
  if (n === 1) return { name, status: 'warn', message: 'a lone voter: losing it stops the cluster', fix: 'add two members (shoal cluster add, then promote) for a cluster that survives one failure' };
  if (n % 2 === 0) return { name, status: 'warn', message: `${n} voters tolerate ${tolerates} failure(s), as ${n - 1} would, and need more for a quorum`, fix: `add or remove a voter to get an odd number` };
  return { name, status: 'ok', message: `${n} voters tolerate ${tolerates} failure(s)` };
}

export function clockCheck(members: readonly MemberFacts[]): Check {
  const name = 'clock skew';
  const offsets = members.filter((m) => m.clockOffsetMs !== undefined);
  if (offsets.length < 2) return { name, status: 'skip', message: 'fewer than two members answered' };
  const lo = offsets.reduce((a, m) => ((m.clockOffsetMs ?? 0) < (a.clockOffsetMs ?? 0) ? m : a));
  const hi = offsets.reduce((a, m) => ((m.clockOffsetMs ?? 0) > (a.clockOffsetMs ?? 0) ? m : a));
  const skew = (hi.clockOffsetMs ?? 0) - (lo.clockOffsetMs ?? 0);
  const text = `${(skew / 1000).toFixed(1)} s between ${hi.name} and ${lo.name} (from their answers' Date headers, to about a second)`;
  const fix = 'run a time daemon on every machine (systemd-timesyncd, chrony) and check it is synchronised (timedatectl)';
  if (skew > skewFailMs) return { name, status: 'fail', message: text, fix };
  if (skew > skewWarnMs) return { name, status: 'warn', message: text, fix };
  return { name, status: 'ok', message: `within ${skewWarnMs / 1000} s (${text})` };
}

/** The leader's view of the clocks (GET /v1/jobs `clock`, src/node/clock-watch.ts ClockReport). */
export interface JobClockFacts {
  node: string;
  leader: boolean;
  synchronized: boolean | null;
  skewMaxMs: number;
  skewMs: number | null;
  offsets: { node: string; offsetMs: number | null }[];
  hold: string | null;
}

const signedSeconds = (ms: number): string => `${ms < 0 ? '-' : '+'}${(Math.abs(ms) / 1000).toFixed(1)} s`;

/**
 * The jobs' clock rule on the leader (docs/control-plane.md, Jobs, "Clocks"): FAIL while it holds
 * scheduled runs (with its reason); otherwise the members' clocks as the leader measures them.
 */
export function jobClockCheck(clock: JobClockFacts | undefined, nameOf: (id: string) => string): Check {
  const name = 'job clock';
  if (clock === undefined) return { name, status: 'skip', message: 'the leader did not say (unreachable, or a release without the jobs\' clock rule)' };
  const who = `leader ${nameOf(clock.node)}`;
  if (!clock.leader) return { name, status: 'skip', message: `${nameOf(clock.node)} answered but no longer leads; run again` };
  if (clock.hold !== null) {
    return { name, status: 'fail', message: `${who} holds scheduled jobs: ${clock.hold}`, fix: 'set the leader\'s time (timedatectl; chrony or systemd-timesyncd), or move leadership: shoal cluster transfer-leader' };
  }
  const known = clock.offsets.filter((o) => o.offsetMs !== null).map((o) => `${nameOf(o.node)} ${signedSeconds(o.offsetMs ?? 0)}`);
  const unknown = clock.offsets.filter((o) => o.offsetMs === null).map((o) => nameOf(o.node));
  const sync = clock.synchronized === null ? 'its synchronization unknown (no timedatectl: never holds)' : 'synchronized';
  const parts = [
    known.length > 0 ? `members' clocks against it: ${known.join(', ')}` : 'no other member\'s clock known',
    ...(unknown.length > 0 ? [`unknown: ${unknown.join(', ')}`] : []),
  ];
  return { name, status: 'ok', message: `${who} fires scheduled jobs, ${sync}; ${parts.join('; ')} (limit ${clock.skewMaxMs / 1000} s from the median)` };
}

export function diskCheck(members: readonly MemberFacts[]): Check {
  const name = 'disk free';
  const known = members.filter((m) => m.availBytes !== undefined && m.sizeBytes !== undefined && m.sizeBytes > 0);
  if (known.length === 0) return { name, status: 'skip', message: 'no member reported its data directory\'s filesystem (GET /metrics)' };
  const rows = known.map((m) => ({ m, share: (m.availBytes ?? 0) / (m.sizeBytes ?? 1) }));
  const text = rows.map(({ m, share }) => `${m.name} ${gib(m.availBytes ?? 0)} (${(share * 100).toFixed(0)}%)`).join(', ');
  const fix = 'free space on the data directory\'s filesystem, or move the data directory to a larger one; a full disk stops the node (docs/operations.md, "When a disk stalls")';
  if (rows.some(({ m, share }) => share < diskFailShare || (m.availBytes ?? 0) < diskFailBytes)) return { name, status: 'fail', message: text, fix };
  if (rows.some(({ share }) => share < diskWarnShare)) return { name, status: 'warn', message: text, fix };
  return { name, status: 'ok', message: text };
}

export function versionCheck(view: View | undefined): Check {
  const name = 'versions and feature level';
  if (view === undefined) return { name, status: 'skip', message: 'no cluster view' };
  const mixed = mixedVersions(view);
  const levels = view.members.map((m) => m.featureLevelMax).filter((l): l is number => typeof l === 'number');
  const level = view.featureLevel;
  if (mixed !== undefined) return { name, status: 'warn', message: `members run different versions: ${mixed}${level !== undefined ? `; feature level ${level}` : ''}`, fix: 'finish the rolling upgrade: every member on the same release' };
  if (level !== undefined && levels.length > 0 && Math.min(...levels) > level) return { name, status: 'warn', message: `feature level ${level}, every member supports ${Math.min(...levels)}`, fix: 'the leader raises it within a tick; if it stays, check the leader\'s log' };
  return { name, status: 'ok', message: `every member runs ${view.members[0]?.softwareVersion ?? 'the same version'}${level !== undefined ? `, feature level ${level}` : ''}` };
}

export function apiExposureCheck(apiListen: string | undefined): Check {
  const name = 'API exposure';
  if (apiListen === undefined) return { name, status: 'skip', message: 'needs --data (the node\'s config)' };
  const host = apiListen.slice(0, apiListen.lastIndexOf(':')).replace(/[[\]]/g, '');
  const loopback = host === 'localhost' || host.startsWith('127.') || host === '::1';
  if (loopback) return { name, status: 'ok', message: `the client API listens on ${apiListen} (loopback only)` };
  return { name, status: 'warn', message: `the client API listens on ${apiListen}, beyond loopback, without TLS or authentication: anyone who reaches it can write and run drills`, fix: 'bind api.listen to 127.0.0.1 and reach it through SSH or a proxy, or firewall the port to the machines that need it' };
}

export function certificateCheck(certs: readonly { file: string; notAfter: Date }[] | undefined, now: Date): Check {
  const name = 'certificates';
  if (certs === undefined) return { name, status: 'skip', message: 'needs --data (the node\'s certificates)' };
  const days = (d: Date): number => Math.floor((d.getTime() - now.getTime()) / 86_400_000);
  const text = certs.map((c) => `${c.file} expires ${c.notAfter.toISOString().slice(0, 10)} (${days(c.notAfter)} days)`).join('; ');
  const fix = 'renew the certificates before they expire: a node with an expired certificate is refused by its peers';
  if (certs.some((c) => c.notAfter <= now)) return { name, status: 'fail', message: text, fix };
  if (certs.some((c) => days(c.notAfter) < certWarnDays)) return { name, status: 'warn', message: text, fix };
  return { name, status: 'ok', message: text };
}

// ---- workloads ----------------------------------------------------------------------------

/** One node as GET /v1/nodes shows it. */
export interface NodeFacts {
  id: string;
  name: string;
  state: string;
  epoch: number;
  /** What its agent reports of its container runtime: up, unavailable (with why), unknown. */
  runtime: { status: string; error: string | null };
}

/** One service and its status, as GET /v1/services shows them. */
export interface ServiceFacts {
  name: string;
  image: string;
  specVersion: number;
  status: { desired: number; running: number; tasks: number; pending: number; pendingReasons: string[]; stopping: number; updating: boolean; converged: boolean };
}

/** One task as GET /v1/tasks shows it (its observed state merged with its agent's report). */
export interface TaskFacts {
  id: string;
  service: string;
  slot: number | string;
  nodeId: string | null;
  nodeName: string | null;
  desired: string;
  observed: string;
  specVersion: number;
  nodeEpoch: number | null;
  createdAt: number;
  /** The agent's last words on it (its report's, else the record's): `image_pull_failed: ...`, an exit. */
  message: string | null;
}

/** What the API says of the workloads; undefined when it could not be read. */
export interface WorkloadFacts {
  nodes: NodeFacts[];
  services: ServiceFacts[];
  tasks: TaskFacts[];
}

/** One container carrying this node's cluster and node labels, on this machine's Docker. */
export interface LocalContainer {
  id: string;
  name: string;
  /** running, paused or restarting: it holds a process. */
  running: boolean;
  /** From its labels; null when they do not parse. */
  taskId: string | null;
  nodeEpoch: number | null;
}

/** This machine's node (--data) and its container runtime, seen from here. */
export interface LocalRuntimeFacts {
  nodeId: string;
  nodeName: string;
  kind: 'docker' | 'memory' | 'none';
  /** Docker: where it was asked (the node's runtime.dockerSocket, DOCKER_HOST, or the default socket). */
  endpoint?: string;
  /** Docker: why it did not answer; undefined when it did. */
  unreachable?: string;
  /** Docker, when it answered: the containers labelled as this node's. */
  containers?: LocalContainer[];
  /** Docker, when it answered: every image reference it holds, normalised (image-ref.ts). */
  imageRefs?: string[];
}

/** At most this many items are named in one message. */
const namedMax = 5;

function listed(items: readonly string[]): string {
  return items.length <= namedMax ? items.join(', ') : `${items.slice(0, namedMax).join(', ')} and ${items.length - namedMax} more`;
}

const dockerFix = "start Docker on this machine (systemctl start docker) and check that the node may use its socket (runtime.dockerSocket or DOCKER_HOST in its config; the docker group); until then its agent starts nothing";

export function runtimeCheck(local: LocalRuntimeFacts | undefined, workloads: WorkloadFacts | undefined): Check {
  const name = 'container runtime';
  const down = (workloads?.nodes ?? []).filter((n) => n.runtime.status === 'unavailable');
  const downText = down.map((n) => `${n.name} (${n.runtime.error ?? 'no reason given'})`);
  const ownRecord = workloads?.nodes.find((n) => n.id === local?.nodeId);
  if (local?.kind === 'docker' && local.unreachable !== undefined) {
    const text = `Docker does not answer at ${local.endpoint ?? 'the default socket'}: ${local.unreachable}`;
    // The node may run as another user than this command (root, the docker group).
    if (ownRecord?.runtime.status === 'up') {
      return { name, status: 'warn', message: `${text}; ${local.nodeName}'s own agent reports it up`, fix: 'run shoal doctor as a user who may use the Docker socket (root, or one in the docker group), so it can compare the containers with the assignments' };
    }
    return { name, status: 'fail', message: text, fix: dockerFix };
  }
  if (down.length > 0) {
    return { name, status: 'fail', message: `the agents of ${down.length} node(s) report their runtime unavailable: ${listed(downText)}`, fix: 'on each of those machines, check Docker (systemctl status docker, docker info) and the node\'s runtime settings; such a node runs no new tasks until its runtime answers' };
  }
  if (local === undefined && workloads === undefined) return { name, status: 'skip', message: 'no cluster view, and no --data' };
  const here = local === undefined ? '' : local.kind === 'docker' ? `Docker answers at ${local.endpoint ?? 'the default socket'}; ` : `${local.nodeName} runs the ${local.kind} runtime (no Docker to check); `;
  return { name, status: 'ok', message: `${here}${workloads === undefined ? 'the nodes\' reports could not be read' : 'no node reports its runtime unavailable'}` };
}

/** Why the container comparison cannot run, if it cannot. */
function containersSkip(local: LocalRuntimeFacts | undefined, workloads: WorkloadFacts | undefined): string | undefined {
  if (local === undefined) return 'needs --data (this machine\'s node)';
  if (local.kind !== 'docker') return `${local.nodeName} runs the ${local.kind} runtime: its containers live inside the node process, and the task states stand for them`;
  if (local.containers === undefined) return 'Docker does not answer (see container runtime)';
  if (workloads === undefined) return 'the tasks could not be read from the cluster';
  if (!workloads.nodes.some((n) => n.id === local.nodeId)) return `the cluster has no node record for ${local.nodeName} (${local.nodeId}) yet`;
  return undefined;
}

export function containersCheck(local: LocalRuntimeFacts | undefined, workloads: WorkloadFacts | undefined): Check {
  const name = 'containers';
  const skip = containersSkip(local, workloads);
  if (skip !== undefined || local === undefined || workloads === undefined) return { name, status: 'skip', message: skip ?? '' };
  const epoch = workloads.nodes.find((n) => n.id === local.nodeId)?.epoch ?? 0;
  const assigned = new Map(workloads.tasks.filter((t) => t.nodeId === local.nodeId && t.desired === 'running' && t.nodeEpoch === epoch).map((t) => [t.id, t]));
  const running = (local.containers ?? []).filter((c) => c.running);
  const owned = (c: LocalContainer): boolean => c.taskId !== null && assigned.has(c.taskId) && c.nodeEpoch === epoch;
  const orphans = running.filter((c) => !owned(c));
  const byTask = new Map<string, LocalContainer[]>();
  for (const c of running) if (owned(c) && c.taskId !== null) byTask.set(c.taskId, [...(byTask.get(c.taskId) ?? []), c]);
  const duplicates = [...byTask.entries()].filter(([, cs]) => cs.length > 1);
  const missing = [...assigned.values()].filter((t) => t.observed === 'running' && !byTask.has(t.id));
  const problems: string[] = [];
  const fixes: string[] = [];
  if (duplicates.length > 0) {
    problems.push(`${duplicates.length} task(s) run in more than one container: ${listed(duplicates.map(([id, cs]) => `${id} (${cs.map((c) => c.name).join(', ')})`))}`);
    fixes.push('the agent keeps one container per task and removes the others on its next pass (within 10 s); if they stay, check that the node is up (shoal status) and its log, and remove the extra ones with docker rm -f ID');
  }
  if (missing.length > 0) {
    problems.push(`${missing.length} task(s) the cluster counts as running here have no running container: ${listed(missing.map((t) => `${t.service} slot ${t.slot} (task ${t.id})`))}`);
    fixes.push('the agent notices within its 10 s resync and reports the task failed, so the leader replaces it; if it stays, the agent is stuck: check the node\'s log and restart the node');
  }
  if (orphans.length > 0) {
    problems.push(`${orphans.length} running container(s) of this node have no assignment here (unknown task, shut down, moved, or of an older epoch): ${listed(orphans.map((c) => c.name))}`);
    fixes.push('the agent stops and removes them once it has caught up with the leader (a stop waits out the service\'s stop grace period, 10 s by default); if they stay, check the node\'s log, and remove them with docker rm -f ID');
  }
  if (problems.length === 0) return { name, status: 'ok', message: `${running.length} running container(s) on ${local.nodeName}, one for each of its ${assigned.size} assigned task(s) that runs` };
  return { name, status: duplicates.length + missing.length > 0 ? 'fail' : 'warn', message: problems.join('; '), fix: fixes.join('; ') };
}

export function servicesCheck(workloads: WorkloadFacts | undefined): Check {
  const name = 'services';
  if (workloads === undefined) return { name, status: 'skip', message: 'the services could not be read from the cluster' };
  const off = workloads.services.filter((s) => !s.status.converged);
  if (off.length === 0) return { name, status: 'ok', message: `${workloads.services.length} service(s), each running its count` };
  const short = off.filter((s) => s.status.running < s.status.desired && !s.status.updating);
  const text = off.map((s) => {
    const why = [
      ...(s.status.pending > 0 ? [`${s.status.pending} pending${s.status.pendingReasons.length > 0 ? `: ${s.status.pendingReasons.join('; ')}` : ''}`] : []),
      ...(s.status.updating ? ['an update in progress'] : []),
      ...(s.status.stopping > 0 ? [`${s.status.stopping} stopping`] : []),
    ];
    return `${s.name} ${s.status.running}/${s.status.desired} running${why.length > 0 ? ` (${why.join(', ')})` : ''}`;
  });
  return {
    name, status: short.length > 0 ? 'fail' : 'warn', message: `${off.length} service(s) not converged: ${listed(text)}`,
    fix: 'shoal service ps NAME shows each task and why it does not run: a pending task needs a node that fits (free capacity, or relax its constraints); a failing one says why (shoal service logs NAME); an update in progress finishes or pauses on its own (shoal service inspect NAME)',
  };
}

/** The image a task runs, when it runs its service's current spec. */
function imageOf(t: TaskFacts, services: ReadonlyMap<string, ServiceFacts>): string | undefined {
  const s = services.get(t.service);
  return s !== undefined && s.specVersion === t.specVersion ? s.image : undefined;
}

/** Slots with no running task whose latest pull failed: the image cannot be had on that node. */
function pullFailures(tasks: readonly TaskFacts[]): TaskFacts[] {
  const slots = new Map<string, TaskFacts[]>();
  for (const t of tasks) slots.set(`${t.service}\u0000${String(t.slot)}`, [...(slots.get(`${t.service}\u0000${String(t.slot)}`) ?? []), t]);
  const out: TaskFacts[] = [];
  for (const ts of slots.values()) {
    if (ts.some((t) => t.desired === 'running' && t.observed === 'running')) continue;
    const failed = ts.filter((t) => t.message?.startsWith('image_pull_failed') === true).sort((a, b) => b.createdAt - a.createdAt)[0];
    if (failed !== undefined) out.push(failed);
  }
  return out;
}

export function imagesCheck(local: LocalRuntimeFacts | undefined, workloads: WorkloadFacts | undefined): Check {
  const name = 'images';
  if (workloads === undefined) return { name, status: 'skip', message: 'the tasks could not be read from the cluster' };
  const failed = pullFailures(workloads.tasks);
  const services = new Map(workloads.services.map((s) => [s.name, s]));
  const have = local?.imageRefs === undefined ? undefined : new Set(local.imageRefs.map(normalizeImageRef));
  const absent = have === undefined ? [] : [...new Set(workloads.tasks
    .filter((t) => t.nodeId === local?.nodeId && t.desired === 'running')
    .map((t) => imageOf(t, services)).filter((i): i is string => i !== undefined && !have.has(normalizeImageRef(i))))];
  const fix = 'check the image name and tag (shoal service inspect NAME), that the node reaches its registry and may pull from it (docker pull IMAGE on that machine), or load the image there (docker load)';
  if (failed.length > 0) {
    // One line per service and failure: every slot of a service usually fails alike.
    const alike = new Map<string, TaskFacts[]>();
    for (const t of failed) alike.set(`${t.service}\u0000${t.message ?? ''}`, [...(alike.get(`${t.service}\u0000${t.message ?? ''}`) ?? []), t]);
    const text = [...alike.values()].map((ts) => `${ts[0]?.service ?? ''} slot ${ts.map((t) => `${t.slot} on ${t.nodeName ?? 'no node'}`).join(', ')}: ${ts[0]?.message ?? ''}`);
    return { name, status: 'fail', message: `${failed.length} slot(s) run nothing because the image could not be pulled: ${listed(text)}`, fix };
  }
  if (absent.length > 0) {
    return { name, status: 'warn', message: `images of tasks assigned to ${local?.nodeName ?? 'this node'} are not on its Docker: ${listed(absent)}; the agent pulls one when it starts a task, so a restart needs the registry`, fix };
  }
  const mine = have === undefined ? '' : `; every image of ${local?.nodeName ?? 'this node'}'s tasks is on its Docker`;
  return { name, status: 'ok', message: `no task is stuck on an image pull${mine}` };
}
