// The node's configuration file (YAML or JSON). Validated strictly: an unknown key is refused
// with its path, so a typo never silently falls back to a default.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { ShoalError } from '../errors.ts';
import { hostPortSchema as hostPort, splitHostPort } from '../base/host-port.ts';
import { memberRecordSchema } from '../resources/membership.ts';
import { meshConfigSchema } from '../../net/mesh-config.ts';
import { vipLeaseDefaults, vipLeaseMsMax, vipLeaseMsMin, vipsConfigSchema } from '../resources/vips.ts';
import { downAfterMsMin, nodeHealthDefaults } from '../control/node-health.ts';
import { jobClockSkewMaxMsDefault } from '../control/clock-sanity.ts';
import { driftRhoMax, driftRhoMin, killMsMax, killMsMin, leaseConfigProblem, leaseDefaults, leaseMsMax, leaseMsMin, stopReportMsMax } from '../resources/lease.ts';

export { splitHostPort };

/** The shortest silence after which autopilot may remove a member (a reboot or a blip must not cost a rejoin). */
export const deadMemberRemoveAfterMsMin = 60_000;

export const configSchema = z.object({
  /** Data directory; relative paths are relative to the config file. */
  dataDir: z.string().min(1),
  api: z.object({
    listen: hostPort,
    /**
     * Serve the API as plain HTTP with no authentication (every caller is admin). Only for a
     * loopback listen address, and only when asked for: test harnesses on one machine. A warning
     * is logged at start (docs/security.md, "insecureLoopback").
     */
    insecureLoopback: z.boolean().default(false),
    /** The API address other nodes and clients use, when it is not `listen` (a wildcard, NAT); announced to peers. */
    advertise: hostPort.optional(),
  }).strict(),
  peer: z.object({
    listen: hostPort,
    /** The peer address other nodes dial, when it is not `listen`; announced in every hello. */
    advertise: hostPort.optional(),
    /**
     * Addresses where some members may be (any members: their ids are learned there), dialled
     * when the members' stored addresses are out of date: after every machine of the cluster got
     * a new address (docs/operations.md, "Changing addresses"). `shoal serve --peers` adds to it.
     */
    peers: z.array(hostPort).max(32).default([]),
  }).strict(),
  /** The founding members of a new cluster (this node included). Ignored once the log exists. */
  bootstrap: z.array(memberRecordSchema.extend({ peerAddress: hostPort, apiAddress: hostPort })).optional(),
  /** Joining an existing cluster: any member's client API, asked once (empty log) for the members. */
  join: z.object({
    api: hostPort,
    /** How long a joining node keeps trying to reach `api` before it gives up (join_failed, exit 9). */
    timeoutMs: z.number().int().min(1_000).default(30_000),
  }).strict().optional(),
  raft: z.object({
    tickMs: z.number().int().min(1).max(10_000).default(100),
    heartbeatIntervalMs: z.number().int().min(1).default(100),
    electionTimeoutMs: z.number().int().min(2).default(1000),
    snapshotEntries: z.number().int().min(100).default(10_000),
    snapshotIntervalMs: z.number().int().min(0).default(30_000),
    snapshotEntriesMax: z.number().int().min(100).default(100_000),
    logKeepEntries: z.number().int().min(0).default(5_000),
    appendBytesMax: z.number().int().min(1024).default(1 << 20),
    appendsInflightMax: z.number().int().min(1).max(65_536).default(256),
    uncommittedBytesMax: z.number().int().min(1 << 20).default(64 << 20),
  }).strict().prefault({}),
  limits: z.object({
    proposalTimeoutMs: z.number().int().min(100).default(10_000),
    bodyBytesMax: z.number().int().min(1024).default(1 << 20),
    /** Proposals and linearizable reads waiting in this node; beyond them: 503 overloaded. */
    proposalsPendingMax: z.number().int().min(1).default(10_000),
    readsPendingMax: z.number().int().min(1).default(10_000),
    /** A durable write not done after this long marks the disk stalled (0: never). */
    diskStallMs: z.number().int().min(0).default(5_000),
    connectionsMax: z.number().int().min(1).default(512),
    watchStreamsMax: z.number().int().min(1).default(256),
    watchStreamsPerClientMax: z.number().int().min(1).default(32),
    snapshotDownloadsMax: z.number().int().min(1).default(2),
    /** On a graceful stop, how long the API may take to answer the requests it holds before they are cut. */
    apiDrainMs: z.number().int().min(0).default(10_000),
  }).strict().prefault({}),
  /**
   * The leader promotes a learner that joined with a voter token once it has been caught up and
   * healthy this long, and (when deadMemberRemoveAfterMs is set) removes a member it has not heard
   * from for that long while at least minQuorum voters remain (src/node/autopilot.ts).
   */
  autopilot: z.object({
    stabilizationMs: z.number().int().min(0).default(10_000),
    /** 0 (the default): never remove a member on its own; else at least a minute, and above control.downAfterMs. */
    deadMemberRemoveAfterMs: z.number().int().min(0).default(0),
    minQuorum: z.number().int().min(1).default(3),
  }).strict().prefault({}),
  logLevel: z.enum(['debug', 'info', 'warn', 'error']).default('info'),
  /**
   * The container runtime this node's agent drives: `docker` (the default), `memory` (containers
   * simulated in this process: for tests and demos, `shoal dev --runtime memory`) or `none` (this
   * node runs no workloads; it still votes and its leader loops run when it leads).
   */
  runtime: z.object({
    kind: z.enum(['docker', 'memory', 'none']).default('docker'),
    /** The Docker socket (default $DOCKER_HOST, else /var/run/docker.sock). */
    dockerSocket: z.string().min(1).optional(),
    /** Images shoal pulled are removed once no task of this node used them for this long; 0 never removes any. */
    imageGcGraceMs: z.number().int().min(0).default(3_600_000),
    /** Images never removed by the image cleaner (as a service spec names them). */
    imagesPinned: z.array(z.string().min(1).max(512)).max(1000).default([]),
  }).strict().prefault({}),
  /** What this node offers the scheduler: read from the machine unless set here. */
  node: z.object({
    cpuMillis: z.number().int().min(1).optional(),
    memoryBytes: z.number().int().min(1).optional(),
    /** Labels the node registers with (later changed with `shoal node label`). */
    labels: z.record(z.string().regex(/^[A-Za-z0-9]([A-Za-z0-9._/-]{0,62}[A-Za-z0-9])?$/, 'a label key'), z.string().regex(/^[^\s,'"()]{0,63}$/, 'a label value (no spaces, commas, quotes or parentheses)')).default({}),
  }).strict().prefault({}),
  /**
   * Scheduled snapshot files of this node's applied state (src/node/recovery/backups.ts): every intervalMs
   * (0: never), to `dir` (default DATA/backups), keeping the newest `keep`.
   */
  snapshot: z.object({
    intervalMs: z.number().int().min(0).default(0),
    keep: z.number().int().min(1).max(10_000).default(7),
    dir: z.string().min(1).optional(),
  }).strict().prefault({}),
  /** Secrets on this node (docs/security.md, "Secrets at rest"). */
  secrets: z.object({
    /** A tmpfs under which the agent writes tasks' secret files (in shoal-<node id>/): a decrypted value never reaches a disk. */
    tmpfsDir: z.string().min(1).default('/dev/shm'),
    /** Autolock: once restarted, ask the unlocked voters for the unlock key over mTLS rather than wait for `shoal unlock`. */
    peerUnlock: z.boolean().default(false),
  }).strict().prefault({}),
  /**
   * Node health (the leader's loops; docs/control-plane.md "Node health"): silence before a node
   * is suspect, and down when no member hears it either (then its tasks move); and how long a
   * node whose shoal is known to be restarting (its machine refuses the peer port, or it said
   * goodbye as it stopped) may stay silent before it is down.
   */
  control: z.object({
    suspectAfterMs: z.number().int().min(500).default(nodeHealthDefaults.suspectAfterMs),
    downAfterMs: z.number().int().min(downAfterMsMin).default(nodeHealthDefaults.downAfterMs),
    restartGraceMs: z.number().int().min(downAfterMsMin).max(3_600_000).default(nodeHealthDefaults.restartGraceMs),
    /**
     * The jobs' clock rule (src/control/clock-sanity.ts): a leader whose clock is further than this
     * from the members' median fires no scheduled run. At least a second (the offsets are measured
     * to a few ms, and a finer limit would trip on a busy machine), at most an hour.
     */
    jobClockSkewMaxMs: z.number().int().min(1_000).max(3_600_000).default(jobClockSkewMaxMsDefault),
  }).strict().prefault({}),
  /**
   * The lease exclusive services run under (src/resources/lease.ts, docs/control-plane.md
   * "Exclusive services"): the agent's lease and renewal (a third of it), and the leader's margin.
   */
  exclusive: z.object({
    leaseMs: z.number().int().min(leaseMsMin).max(leaseMsMax).default(leaseDefaults.leaseMs),
    driftRho: z.number().min(driftRhoMin).max(driftRhoMax).default(leaseDefaults.driftRho),
    killMs: z.number().int().min(killMsMin).max(killMsMax).default(leaseDefaults.killMs),
    stopReportMs: z.number().int().min(0).max(stopReportMsMax).default(leaseDefaults.stopReportMs),
  }).strict().prefault({}),
  /** The WireGuard mesh between the nodes (net/mesh-config.ts, docs/network.md); absent: this node takes no part. */
  mesh: meshConfigSchema.optional(),
  /**
   * The node's nftables firewall from the store's networks and policies (net/firewall-loop.ts,
   * docs/network.md). Off by default in this release: it needs root, nft and conntrack, and it
   * changes the host's packet filtering.
   */
  firewall: z.object({
    enabled: z.boolean().default(false),
  }).strict().prefault({}),
  /**
   * The service DNS responder on this node's gateway of each network (net/service-dns.ts,
   * docs/network.md "Service discovery"). On by default; it runs with the docker runtime only
   * (the memory and none runtimes have no bridges), and binding port 53 needs root.
   */
  dns: z.object({
    enabled: z.boolean().default(true),
  }).strict().prefault({}),
  /**
   * Virtual IPs (src/resources/vips.ts, docs/network.md "Virtual IP"): addresses one healthy node
   * holds at a time. The leader's value counts (keep it the same on every node); absent: a leader
   * manages none (the ones recorded stay with their holders).
   */
  vips: vipsConfigSchema.optional(),
  /**
   * The VIP lease (src/resources/vips.ts, docs/network.md "Virtual IP"): how long one renewal of a
   * holder's lease holds; renewed every third of it; a lost holder's VIP moves about this plus
   * 0.9 s after its last renewal. Shorter: a faster failover, one more committed write per
   * holder per renewal, and an election longer than about a third of it blinks the VIP.
   */
  vipLeaseMs: z.number().int().min(vipLeaseMsMin).max(vipLeaseMsMax).default(vipLeaseDefaults.leaseMs),
  /**
   * The routing mesh (net/ingress-loop.ts, docs/network.md "Ingress"): every node answers on
   * every ingress port and forwards to a running, healthy task over the overlay. On by default,
   * since ingress is the default mode of a replicated service's ports; it runs with the docker
   * runtime only and needs root and nft (and conntrack). Off: ingress ports are open nowhere.
   * preferLocal: a connection arriving at a node that runs a running, healthy task of the port's
   * service goes to that node's tasks only, without SNAT, so the task sees the client's address
   * (each node applies its own value; keep it the same everywhere). Off by default, as Swarm.
   */
  ingress: z.object({
    enabled: z.boolean().default(true),
    preferLocal: z.boolean().default(false),
  }).strict().prefault({}),
}).strict().superRefine((c, ctx) => {
  if (c.control.suspectAfterMs >= c.control.downAfterMs) {
    ctx.addIssue({ code: 'custom', path: ['control', 'suspectAfterMs'], message: `must be below control.downAfterMs (${c.control.downAfterMs})` });
  }
  if (c.control.restartGraceMs < c.control.downAfterMs) {
    ctx.addIssue({ code: 'custom', path: ['control', 'restartGraceMs'], message: `must be at least control.downAfterMs (${c.control.downAfterMs}): a node known to be restarting never waits less than one that is silent` });
  }
  if (c.api.insecureLoopback && !isLoopbackHost(splitHostPort(c.api.listen).host)) {
    ctx.addIssue({ code: 'custom', path: ['api', 'insecureLoopback'], message: `is allowed only when api.listen is a loopback address (127.0.0.0/8, ::1, localhost); ${c.api.listen} is not: remove it and use TLS with a credential (docs/security.md)` });
  }
  if (c.api.listen === c.peer.listen) {
    ctx.addIssue({ code: 'custom', path: ['peer', 'listen'], message: 'must differ from api.listen (the API and the peer transport each need their own port)' });
  }
  if (c.bootstrap !== undefined && c.join !== undefined) {
    ctx.addIssue({ code: 'custom', path: ['join'], message: 'a node either founds a cluster (bootstrap) or joins one (join), not both' });
  }
  if (c.raft.heartbeatIntervalMs % c.raft.tickMs !== 0 || c.raft.electionTimeoutMs % c.raft.tickMs !== 0) {
    ctx.addIssue({ code: 'custom', path: ['raft'], message: 'heartbeatIntervalMs and electionTimeoutMs must be multiples of tickMs' });
  }
  if (c.raft.electionTimeoutMs <= c.raft.heartbeatIntervalMs) {
    ctx.addIssue({ code: 'custom', path: ['raft', 'electionTimeoutMs'], message: 'must exceed heartbeatIntervalMs' });
  }
  if (c.snapshot.intervalMs > 0 && c.snapshot.intervalMs < 60_000) {
    ctx.addIssue({ code: 'custom', path: ['snapshot', 'intervalMs'], message: 'must be 0 (off) or at least 60000 (a minute): each file holds the whole store' });
  }
  const leaseProblem = leaseConfigProblem(c.exclusive);
  if (leaseProblem !== undefined) ctx.addIssue({ code: 'custom', path: ['exclusive', 'stopReportMs'], message: leaseProblem });
  if (c.exclusive.leaseMs < 3 * c.raft.electionTimeoutMs) {
    ctx.addIssue({ code: 'custom', path: ['exclusive', 'leaseMs'], message: `must be at least three election timeouts (${3 * c.raft.electionTimeoutMs}): renewals go through the log, and one election must not cost the lease` });
  }
  if (c.vipLeaseMs < 2 * c.raft.electionTimeoutMs) {
    ctx.addIssue({ code: 'custom', path: ['vipLeaseMs'], message: `must be at least two election timeouts (${2 * c.raft.electionTimeoutMs}): renewals go through the log, and one election must not cost a VIP its holder` });
  }
  const deadAfter = c.autopilot.deadMemberRemoveAfterMs;
  if (deadAfter > 0 && (deadAfter < deadMemberRemoveAfterMsMin || deadAfter <= c.control.restartGraceMs)) {
    ctx.addIssue({ code: 'custom', path: ['autopilot', 'deadMemberRemoveAfterMs'], message: `must be 0 (off) or at least ${deadMemberRemoveAfterMsMin} (a minute) and above control.restartGraceMs (${c.control.restartGraceMs}): a removed machine comes back only with a new data directory and a token` });
  }
  if (c.raft.snapshotEntriesMax < c.raft.snapshotEntries) {
    ctx.addIssue({ code: 'custom', path: ['raft', 'snapshotEntriesMax'], message: `must be at least snapshotEntries (${c.raft.snapshotEntries})` });
  }
});

export type NodeConfig = z.infer<typeof configSchema>;

/** Whether `host` can only be reached from this machine. */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/** Every problem at once, one per line, with the path of the offending key. */
export function formatIssues(issues: readonly z.core.$ZodIssue[]): string {
  return issues.map((i) => {
    const where = i.path.length > 0 ? i.path.join('.') : '(top level)';
    const keys = 'keys' in i && Array.isArray(i.keys) ? `: ${i.keys.join(', ')}` : '';
    return `  ${where}: ${i.message}${keys}`;
  }).join('\n');
}

export function parseConfig(raw: unknown, source: string): NodeConfig {
  const parsed = configSchema.safeParse(raw);
  if (!parsed.success) {
    throw new ShoalError('config_invalid', `${source} is invalid:\n${formatIssues(parsed.error.issues)}`, { issues: parsed.error.issues });
  }
  return parsed.data;
}

export function loadConfig(file: string): NodeConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ShoalError('config_invalid', `cannot read config file ${file}: ${(err as Error).message}`);
  }
  let raw: unknown;
  try {
    raw = file.endsWith('.json') ? JSON.parse(text) : parseYaml(text);
  } catch (err) {
    throw new ShoalError('config_invalid', `${file} is not valid ${file.endsWith('.json') ? 'JSON' : 'YAML'}: ${(err as Error).message}`);
  }
  const config = parseConfig(raw, file);
  return { ...config, dataDir: path.resolve(path.dirname(file), config.dataDir) };
}
