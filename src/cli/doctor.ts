// shoal doctor: checks the cluster and, with --data, this machine's node, and says for each check
// OK, WARN or FAIL with what to do (docs/operations.md, "Doctor"). What it gathers: the cluster
// view (GET /v1/cluster), the leader's view of the clocks (its GET /v1/jobs `clock`), each
// member's own answer (its Date header, for clock skew) and its
// /metrics (free space of its data directory); the nodes, services and tasks (GET /v1/nodes,
// /v1/services, /v1/tasks); with --data, the node's config, identity and certificates, and, when
// its runtime is Docker, what that Docker holds: the node's containers (by their labels, as the
// agent lists them) and its images.

import { X509Certificate } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { describeEndpoint } from '../executor/docker-endpoint.ts';
import { ownerLabels, readLabels } from '../executor/labels.ts';
import { isRunningState } from '../executor/task-report.ts';
import { loadConfig, type NodeConfig } from '../server/config.ts';
import { loadIdentity, type Identity } from '../node/identity.ts';
import { exitCodes, parse, UsageError } from './args.ts';
import { request, resolveAddr, send } from './client.ts';
import { nodeListSchema, serviceListSchema, taskItemSchema } from './control-api.ts';
import { getView, type View } from './cluster-view.ts';
import { commonFlags, help } from './doc-common.ts';
import { commonFlagsHelp } from './group.ts';
import {
  apiExposureCheck, certificateCheck, clockCheck, containersCheck, diskCheck, imagesCheck, quorumCheck, runtimeCheck, servicesCheck, toleranceCheck, versionCheck,
  jobClockCheck, type JobClockFacts,
  type Check, type LocalRuntimeFacts, type MemberFacts, type TaskFacts, type WorkloadFacts,
} from './doctor-checks.ts';

export const doctorHelp = `Usage: shoal doctor [--data DIR] [--addr HOST:PORT] [--json]

Checks the cluster and says for each check OK, WARN or FAIL, with what to do: a reachable quorum,
failure tolerance (a lone voter, an even number), clock skew between the members, the jobs'
clock rule on the leader (scheduled jobs held while its clock is unsynchronized or far from the
members'), free space on each member's data directory, versions and the feature level; with --data, this machine's node:
its client API bound beyond loopback (no TLS or authentication), its certificates near expiry.
Then the workloads: every node's container runtime (and, with --data and the docker runtime,
whether Docker answers here), this node's containers against its assignments (with --data and
Docker: orphans, duplicates, missing), services not at their count, images that cannot be
pulled or are absent from this node's Docker.

Options:
  --data DIR         the data directory of the node on this machine (its shoal.yaml, node.json
                     and tls/); its Docker is asked as the user running this command
${commonFlagsHelp}

Exit codes: 0 no check failed (warnings are printed); 1 a check failed; 2 usage error; 3 no node
answered at --addr (the quorum check fails too).`;

const memberTimeoutMs = 2000;

async function memberFacts(m: View['members'][number]): Promise<MemberFacts> {
  const facts: MemberFacts = { name: m.name, id: m.id, reachable: false };
  try {
    const sent = Date.now();
    const res = await send(m.apiAddress, '/v1/cluster?local', { signal: AbortSignal.timeout(memberTimeoutMs) });
    const received = Date.now();
    await res.arrayBuffer();
    facts.reachable = true;
    const date = res.headers.get('date');
    // The Date header has whole seconds: its second began up to 1 s before it was written.
    if (date !== null) facts.clockOffsetMs = Date.parse(date) + 500 - (sent + received) / 2;
    const text = await (await send(m.apiAddress, '/metrics', { signal: AbortSignal.timeout(memberTimeoutMs) })).text();
    const avail = metricValue(text, 'shoal_storage_filesystem_avail_bytes');
    const size = metricValue(text, 'shoal_storage_filesystem_size_bytes');
    if (avail !== undefined) facts.availBytes = avail;
    if (size !== undefined) facts.sizeBytes = size;
  } catch {
    // Unreachable, or no metrics: the checks say what they could not see.
  }
  return facts;
}

/** The value of a sample in Prometheus text: unlabelled, or with exactly these labels (in any order; values without commas). */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const want = Object.entries(labels).map(([k, v]) => `${k}=${JSON.stringify(v)}`).sort().join(',');
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    let value: string;
    if (rest.startsWith(' ')) {
      if (want !== '') continue;
      value = rest;
    } else if (rest.startsWith('{')) {
      const close = rest.indexOf('} ');
      if (close < 0 || rest.slice(1, close).split(',').filter((l) => l !== '').sort().join(',') !== want) continue;
      value = rest.slice(close + 1);
    } else {
      continue;
    }
    const v = Number(value.trim().split(' ')[0]);
    return Number.isFinite(v) ? v : undefined;
  }
  return undefined;
}

interface LocalNode {
  config: NodeConfig;
  identity: Identity;
  certs: { file: string; notAfter: Date }[];
}

function readLocalNode(dataDir: string): LocalNode {
  const dir = path.resolve(dataDir);
  const configFile = path.join(dir, 'shoal.yaml');
  if (!existsSync(configFile)) throw new UsageError(`--data ${dataDir}: no shoal.yaml there; give the data directory of a node (shoal init made it)`);
  const config = loadConfig(configFile);
  const certs = ['ca.crt', 'node.crt'].map((f) => path.join(dir, 'tls', f)).filter((f) => existsSync(f))
    .map((f) => ({ file: path.relative(dir, f), notAfter: new Date(new X509Certificate(readFileSync(f)).validTo) }));
  return { config, identity: loadIdentity(dir), certs };
}

function localChecks(local: LocalNode | undefined, now: Date): Check[] {
  if (local === undefined) return [apiExposureCheck(undefined), certificateCheck(undefined, now)];
  return [apiExposureCheck(local.config.api.listen), certificateCheck(local.certs, now)];
}

// What doctor reads of a task: the fields its checks use (the API sends more).
const taskFactsSchema = taskItemSchema.extend({
  record: z.object({ specVersion: z.number(), message: z.string().nullable(), createdAt: z.number(), nodeEpoch: z.number().nullable() }).loose(),
  report: z.object({ message: z.string().nullable() }).loose().nullable().optional(),
});
const taskFactsPageSchema = z.object({ items: z.array(taskFactsSchema), next: z.string().nullable() }).loose();
const pagesMax = 100;

async function listTaskFacts(addr: string): Promise<TaskFacts[]> {
  const out: TaskFacts[] = [];
  let after: string | undefined;
  for (let page = 0; page < pagesMax; page++) {
    const res = await request(addr, 'GET', '/v1/tasks', taskFactsPageSchema, { query: { limit: 1000, after }, retry: 'safe', timeoutMs: 10_000 });
    for (const t of res.body.items) {
      out.push({
        id: t.id, service: t.service, slot: t.slot, nodeId: t.nodeId, nodeName: t.nodeName, desired: t.desired, observed: t.observed,
        specVersion: t.record.specVersion, nodeEpoch: t.record.nodeEpoch, createdAt: t.record.createdAt, message: t.report?.message ?? t.record.message,
      });
    }
    if (res.body.next === null) break;
    after = res.body.next;
  }
  return out;
}

const jobClockSchema = z.object({
  node: z.string(), leader: z.boolean(), synchronized: z.boolean().nullable(), skewMaxMs: z.number(), skewMs: z.number().nullable(),
  offsets: z.array(z.object({ node: z.string(), offsetMs: z.number().nullable() })), hold: z.string().nullable(),
});
const jobListClockSchema = z.object({ clock: jobClockSchema.optional() }).loose();

/** The leader's view of the clocks and the jobs' clock rule (its GET /v1/jobs); undefined when it did not say. */
async function jobClockFacts(view: View | undefined): Promise<JobClockFacts | undefined> {
  const leader = view?.members.find((m) => m.id === view.leader);
  if (leader === undefined) return undefined;
  try {
    return (await request(leader.apiAddress, 'GET', '/v1/jobs', jobListClockSchema, { retry: 'safe', timeoutMs: memberTimeoutMs })).body.clock;
  } catch {
    return undefined;
  }
}

/** The nodes, services and tasks as the API shows them; undefined when they could not be read. */
async function workloadFacts(addr: string): Promise<WorkloadFacts | undefined> {
  try {
    const opts = { retry: 'safe' as const, timeoutMs: 10_000 };
    const [nodes, services, tasks] = await Promise.all([
      request(addr, 'GET', '/v1/nodes', nodeListSchema, opts), request(addr, 'GET', '/v1/services', serviceListSchema, opts), listTaskFacts(addr),
    ]);
    return {
      nodes: nodes.body.items.map((n) => ({ id: n.id, name: n.name, state: n.record.state, epoch: n.record.epoch, runtime: { status: n.record.runtime.status, error: n.record.runtime.error } })),
      services: services.body.items.map((sv) => ({ name: sv.name, image: sv.record.spec.image, specVersion: sv.record.specVersion, status: sv.status })),
      tasks,
    };
  } catch {
    return undefined;
  }
}

/** This machine's node's runtime; for Docker, asked from here with the node's socket setting. */
async function localRuntimeFacts(local: LocalNode): Promise<LocalRuntimeFacts> {
  const facts: LocalRuntimeFacts = { nodeId: local.identity.id, nodeName: local.identity.name, kind: local.config.runtime.kind };
  if (facts.kind !== 'docker') return facts;
  const { DockerRuntime } = await import('../executor/docker-runtime.ts');
  let docker;
  try {
    docker = new DockerRuntime({ ...(local.config.runtime.dockerSocket !== undefined ? { socketPath: local.config.runtime.dockerSocket } : {}), pingTimeoutMs: memberTimeoutMs, callTimeoutMs: 10_000 });
  } catch (err) {
    return { ...facts, unreachable: (err as Error).message };
  }
  facts.endpoint = describeEndpoint(docker.endpoint);
  try {
    await docker.ping();
    const containers = await docker.list(ownerLabels({ clusterId: local.identity.clusterId, nodeId: local.identity.id }));
    facts.containers = containers.map((c) => {
      const l = readLabels(c.labels);
      return { id: c.id, name: c.name, running: isRunningState(c), taskId: l.ok ? l.labels.taskId : null, nodeEpoch: l.ok ? l.labels.nodeEpoch : null };
    });
    facts.imageRefs = (await docker.listImages()).flatMap((i) => i.refs);
  } catch (err) {
    facts.unreachable = (err as Error).message;
    delete facts.containers;
  } finally {
    await docker.close();
  }
  return facts;
}

const marks: Record<Check['status'], string> = { ok: 'OK  ', warn: 'WARN', fail: 'FAIL', skip: 'SKIP' };

export async function doctorCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...commonFlags, data: { type: 'string' } }, doctorHelp);
  if (values.help) return help(doctorHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const addr = resolveAddr(values.addr);
  const localNode = values.data === undefined ? undefined : readLocalNode(values.data);
  const view = await getView(addr).catch(() => undefined);
  const [members, workloads, runtime, jobClock] = await Promise.all([
    view === undefined ? [] : Promise.all(view.members.map(memberFacts)),
    view === undefined ? undefined : workloadFacts(addr),
    localNode === undefined ? undefined : localRuntimeFacts(localNode),
    jobClockFacts(view),
  ]);
  const nameOf = (id: string): string => view?.members.find((m) => m.id === id)?.name ?? id;
  const checks = [
    quorumCheck(view, addr), toleranceCheck(view), clockCheck(members), jobClockCheck(jobClock, nameOf), diskCheck(members), versionCheck(view), ...localChecks(localNode, new Date()),
    runtimeCheck(runtime, workloads), containersCheck(runtime, workloads), servicesCheck(workloads), imagesCheck(runtime, workloads),
  ];
  if (values.json) {
    console.log(JSON.stringify({ checks }, null, 2));
  } else {
    for (const c of checks) {
      console.log(`${marks[c.status]}  ${c.name.padEnd(26)} ${c.message}`);
      if (c.fix !== undefined && (c.status === 'warn' || c.status === 'fail')) console.log(`      ${''.padEnd(26)} -> ${c.fix}`);
    }
  }
  if (view === undefined) return exitCodes.unavailable;
  return checks.some((c) => c.status === 'fail') ? exitCodes.failed : exitCodes.ok;
}
