// Runs one node: identity, durable storage, peer transport, the Raft driver and the client API,
// wired from a validated config. The process entry (`shoal serve`) and the tests both use it.

import { randomBytes } from 'node:crypto';
import { sessionTicketKeysBytes } from '../../transport/peer-server.ts';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { apiLimitsDefault, buildApi, closeApiGracefully } from '../api/app.ts';
import type { ApiAuth } from '../api/auth.ts';
import { PeerHttp } from '../api/peer-http.ts';
import { ShoalError } from '../errors.ts';
import { DiskStorage } from '../storage/index.ts';
import { WsTransport } from '../../transport/ws-transport.ts';
import { PEER_MESSAGES_DROPPED_METRIC, inboundDropSamples } from '../../transport/inbound-drops.ts';
import { DocumentStore } from '../../fsm/index.ts';
import { Registry, latencyBuckets, type Counter } from '../base/metrics.ts';
import { registerNodeMetrics } from '../node/metrics/node-metrics.ts';
import { registerControlMetrics } from '../node/metrics/control-metrics.ts';
import { EventLog } from '../node/events/event-log.ts';
import { watchNodeEvents } from '../node/events/event-sources.ts';
import { watchControlEvents } from '../node/events/control-events.ts';
import { watchJobEvents } from '../node/events/job-events.ts';
import { watchVolumeEvents } from '../node/events/volume-events.ts';
import { ClockWatch, JOB_CLOCK_HOLD_METRIC } from '../node/clock-watch.ts';
import { ClockSyncStatus } from '../node/clock-sync.ts';
import { registerJobMetrics } from '../node/metrics/job-metrics.ts';
import { registerVolumeMetrics } from '../node/metrics/volume-metrics.ts';
import { loadIdentity, loadTls, type Identity } from '../node/identity.ts';
import type { MemberRecord } from '../resources/membership.ts';
import { splitHostPort, type NodeConfig } from './config.ts';
import { RaftNode } from '../node/raft-node.ts';
import { PeerAddresses, announcedSelf, type SelfAddresses } from '../node/peer-addresses.ts';
import type { Logger, ProcessLogger } from '../log.ts';
import type { NodeStorage } from '../node/node-storage.ts';
import { emptyConfState } from '../raft/storage.ts';
import { encodeSnapshotData } from '../node/snapshot-data.ts';
import { featureLevelInitial, featureLevelMax } from '../base/feature-level.ts';
import { ScheduledBackups, snapshotFileParts } from '../node/recovery/backups.ts';
import { BackupRunner } from '../node/backup/backup-runner.ts';
import { registerBackupMetrics } from '../node/backup/backup-metrics.ts';
import { registerRuntimeMetrics } from '../node/metrics/runtime-metrics.ts';
import { ControlPlane } from './control-plane.ts';
import { VolumeEngine } from '../executor/volumes/volume-engine.ts';
import type { IncrementSender } from '../executor/volumes/volume-loop.ts';
import { sendIncrement, fetchVolumeStream } from '../api/volume-routes.ts';
import { machineCapacity, machinePlatform } from '../executor/store-ports.ts';
import { MemoryRuntime } from '../executor/memory-runtime.ts';
import { systemClock } from '../executor/clock.ts';
import type { Runtime } from '../executor/runtime.ts';
import { DockerRuntime } from '../executor/docker-runtime.ts';
import { softwareVersion } from '../version.ts';
import { rotatingCaAuthority, withChain } from '../security/ca-rotation-authority.ts';
import { CaRotationAgent } from '../security/ca-rotation-agent.ts';
import { Autopilot } from '../node/autopilot.ts';
import { foundingTokenFile, mintFoundingToken } from '../security/founding-token.ts';
import { CertRenewer } from '../security/renewal.ts';
import { CaKeyFetcher } from '../security/ca-key-fetcher.ts';
import { announceCaHolder } from '../security/ca-holders.ts';
import { existsSync } from 'node:fs';
import { Server as HttpsServer } from 'node:https';
import { caKeyFile } from '../security/authority.ts';
import { holdsKeyFile } from '../security/key-vault.ts';
import { startMeshAgent } from '../../net/mesh-node.ts';
import { generateKeyPair, loadOrCreateKeyPair, writeKeyPair } from '../../net/wg-keys.ts';
import type { MeshKeys } from '../api/context.ts';
import { startFirewall } from '../../net/firewall-start.ts';
import { startIngress } from '../../net/ingress-start.ts';
import { startServiceDns } from '../../net/dns-start.ts';
import { startOverlayAgent } from '../../net/overlay-node.ts';
import { startVipAgent } from '../../net/vip-start.ts';
import { vipAddresses } from '../resources/vips.ts';
import { procBootClock } from '../executor/clock.ts';
import type { VipAgent } from '../../net/vip-agent.ts';
import { StoreTaskNetworks } from '../executor/task-networks.ts';
import { DrillStorage } from '../node/drill/drill-storage.ts';
import { drillTargetOf } from '../node/drill/drill-target.ts';
import { inertUpgradeHost, processUpgradeHost } from '../node/upgrade/upgrade-host.ts';
import { revokedSerialsOf } from '../security/revoked-index.ts';
import { assert } from '../base/assert.ts';
import type { Tls } from '../base/tls-material.ts';
import type { WgKeyPair } from '../../net/wg-keys.ts';
import type { OverlayAgent } from '../../net/overlay-agent.ts';
import type { MeshAgent } from '../../net/mesh-agent.ts';
import type { FoundingToken } from '../security/founding-token.ts';
import type { CaAuthority } from '../security/authority.ts';
import type { NodeIdentity } from '../executor/store-ports.ts';
import type { PassReport } from '../control/leader-run.ts';
import { Lifecycle, type Component, type LifecycleHooks, type StartTime, type Stop } from './lifecycle.ts';
import { ClusterKeyFiles } from '../security/cluster-key-files.ts';
import { NodeLock } from '../security/node-lock.ts';
import { SecretKeyring } from '../control/secret-keyring.ts';
import { ClusterKeyAgent } from '../node/secrets/cluster-key-agent.ts';
import { SecretPurge } from '../node/secrets/secret-purge.ts';
import { dropSupersededPending, readPendingKeyring, removePendingKeyring } from '../node/secrets/pending-keyring.ts';
import { SecretSource } from './secret-source.ts';
import { exposedGc, heapAndBuffers, IdleCollector, loopUtilization } from '../node/idle-collector.ts';

export { softwareVersion };

export const protocolVersion = 2;

export interface RunningNode {
  identity: Identity;
  node: RaftNode;
  store: DocumentStore;
  control: ControlPlane;
  api: FastifyInstance;
  apiAddress: string;
  /** 'https', or 'http' with api.insecureLoopback. */
  apiScheme: 'http' | 'https';
  /** The cluster's events: `events.recordEvent(type, subject, details)` (src/node/events/event-log.ts). */
  events: EventLog;
  /** True once the token `shoal init` printed is in the store (at once when there is none); false if never. */
  foundingTokenWritten: Promise<boolean>;
  /** How long each component took to start (ms), in start order: the start-up line's breakdown. */
  startTimes: readonly StartTime[];
  /**
   * Graceful: stops the components in the reverse order of their starts (nodeComponents): the
   * loops and agents, then hands leadership away when leading, drains the API, and stops the node.
   * Idempotent; rejects, once every stop has run, if one threw (each is logged).
   */
  stop(): Promise<void>;
}

/** The snapshot every founding member starts from; identical bytes on every founder. */
export function bootstrapSnapshotData(members: MemberRecord[], app: Uint8Array): Uint8Array {
  const sorted = [...members].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  // Every founder starts at the first release's level, whatever its own release: the bytes must
  // be the same on every founder, and the leader raises the level once all members are known.
  return encodeSnapshotData({ members: sorted, featureLevel: featureLevelInitial, removed: [] }, [app]);
}

async function bootstrapIfNew(storage: NodeStorage, config: NodeConfig, identity: Identity, store: DocumentStore, log: Logger): Promise<void> {
  if (storage.log.lastIndex() > 0) return;
  const founders = config.bootstrap;
  if (founders === undefined || founders.length === 0) {
    const add = `shoal cluster add --id ${identity.id} --name ${identity.name} --peer ${config.peer.listen} --api ${config.api.listen}`;
    log.info(config.join !== undefined
      ? `this node (${identity.name}, ${identity.id}) has an empty log and joins through ${config.join.api}: it waits until a member adds it. On any member run: ${add}`
      : `this node (${identity.name}, ${identity.id}) has an empty log, no bootstrap list and no join address: it waits until a member adds it (${add}). To found a new cluster instead, list the founders under 'bootstrap' in its config`);
    return;
  }
  if (!founders.some((m) => m.id === identity.id)) {
    throw new ShoalError('config_invalid', `bootstrap lists ${founders.map((m) => m.id).join(', ')} but not this node (${identity.id}); add it or remove the bootstrap list to join instead`);
  }
  const voters = founders.map((m) => m.id).sort();
  await storage.save({
    entries: [],
    hardState: { term: 1, vote: '', commit: 1 },
    snapshot: { meta: { index: 1, term: 1, confState: { ...emptyConfState(), voters } }, data: bootstrapSnapshotData(founders, store.snapshot()) },
  }, { sync: true });
  log.info(`bootstrapped a new cluster with ${voters.length} voters`);
}

/** Asks a member's API for the members, so a joining node can answer the leader. Retries for `timeoutMs`. */
async function learnMembers(peer: PeerHttp, api: string, timeoutMs: number, log: Logger): Promise<MemberRecord[]> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      const res = await peer.fetch(api, '/v1/cluster', { signal: AbortSignal.timeout(2000) });
      if (res.ok) {
        const view = (await res.json()) as { members: MemberRecord[] };
        return view.members.map(({ id, name, peerAddress, apiAddress }) => ({ id, name, peerAddress, apiAddress }));
      }
      log.warn(`join: ${api} answered ${res.status}; retrying`);
    } catch (err) {
      log.warn(`join: cannot reach ${api} (${(err as Error).message}); retrying`);
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
  throw new ShoalError('join_failed', `join: could not learn the members from ${api} within ${timeoutMs / 1000} s; check that join.api names a running member's client API and that this machine can reach it`, { api });
}

export interface StartOptions {
  /**
   * The highest feature level this node applies and announces (default: this build's). Lowered,
   * the node behaves as an older release would: tests of rolling upgrades use it.
   */
  featureLevelMax?: number;
  /**
   * false: the node writes none of its observations (leader elected, member added, ...) to the
   * cluster's event stream in the store; they stay in its own ring (GET /v1/events?local). For
   * tests that compare the store with an expected one.
   */
  clusterEvents?: boolean;
  /**
   * true: the node carries out drill actions on its own process (POST /v1/drill/actions: exit,
   * stop itself). `shoal serve` sets it; a node inside a test's process does not.
   */
  drillActions?: boolean;
  /** Peer hints from `shoal serve --peers`, added to the config's `peer.peers`. */
  peers?: string[];
  /** false: the leader takes no scheduled backup (`shoal drill restore`'s scratch node must not write to the real targets). */
  backupSchedule?: boolean;
  /**
   * For tests: told before each of the node's components starts (a throw fails that start: what
   * had started stops, in reverse) and after each stops (nodeComponents below).
   */
  lifecycle?: LifecycleHooks;
}

/**
 * What the node's components share. The fields set in the constructor need no stopping and are
 * ready before any component starts; each field below them is set by the component named beside
 * it, for the components after it in the list.
 */
class NodeParts {
  readonly identity: Identity;
  readonly tls: Tls;
  readonly levelMax: number;
  /** Every log line names the node, with its term and role (the role as its leaderChange events say). */
  readonly ref: { node?: RaftNode; role: string } = { role: 'starting' };
  readonly apiAuth: ApiAuth;
  /** The WireGuard key: made at the first start with `mesh`; a damaged file stops the start here. */
  readonly meshKeys: WgKeyPair | null;
  readonly metrics = new Registry();
  readonly store: DocumentStore;
  /** The trust bundle is tls.caPem (two CAs during a CA rotation), kept by the rotation agent. */
  readonly security: CaAuthority;
  /** Told of new certificates or a new trust bundle (the API's routes subscribe). */
  readonly tlsListeners = new Set<() => void>();
  /** The cluster keys this node holds on disk (voters; docs/security.md, "Secrets at rest"). */
  readonly clusterKeys: ClusterKeyFiles;
  /** Autolock: the keys on disk sealed with the unlock key (docs/security.md, "Autolock"). */
  readonly nodeLock: NodeLock;
  readonly lifecycle: Lifecycle;

  peerHttp!: PeerHttp; // peer-http
  storage!: DrillStorage; // storage
  seedPeers: MemberRecord[] = []; // bootstrap
  addresses!: PeerAddresses; // node-parts
  transport!: WsTransport; // node-parts
  node!: RaftNode; // node-parts
  observeLoops!: (pass: PassReport) => void; // metrics
  events!: EventLog; // event-log
  clockWatch!: ClockWatch; // clock-watch
  runtime!: Runtime | null; // runtime
  api!: FastifyInstance; // api
  /** Settles once the API's listen has: with its error, or undefined when bound. Never rejects. */
  apiBound!: Promise<unknown>; // api
  overlay!: OverlayAgent | null; // overlay
  control!: ControlPlane; // control
  volumeEngine: VolumeEngine | undefined; // api, control (volumeEngineOf)
  mesh!: MeshAgent | null; // mesh
  vip!: VipAgent; // vip
  /** The VIPs on this node's interfaces now (metrics). */
  readonly vipHeld = new Set<string>();
  vipMoves!: Counter; // metrics
  founding!: FoundingToken; // founding-token
  firstRunAfterInit = false; // founding-token
  renewer!: CertRenewer; // cert-renewal
  caKeys!: CaKeyFetcher; // ca-keys
  holder: { cancel(): void } = { cancel() {} }; // ca-holder (replaced when the CA key arrives)
  apiAddress!: string; // api-bound
  backupRunner!: BackupRunner; // api (its schedule: backups)

  constructor(readonly config: NodeConfig, readonly log: Logger | ProcessLogger, readonly opts: StartOptions) {
    this.levelMax = opts.featureLevelMax ?? featureLevelMax;
    this.identity = loadIdentity(config.dataDir);
    const ref = this.ref;
    if ('bindNode' in log) log.bindNode({ name: this.identity.name, id: this.identity.id, state: () => ({ term: ref.node?.currentTerm ?? 0, role: ref.role }) });
    this.tls = loadTls(config.dataDir);
    this.apiAuth = config.api.insecureLoopback ? { mode: 'insecure' } : { mode: 'tls', tls: this.tls };
    if (config.api.insecureLoopback) {
      log.warn(`api.insecureLoopback is on: the API on ${config.api.listen} is plain HTTP with no authentication, and every local process is admin; remove it outside tests (docs/security.md)`);
    }
    this.meshKeys = config.mesh === undefined ? null : loadOrCreateKeyPair(config.dataDir);
    // Store options must be the same on every node (they shape snapshots and replays): defaults.
    this.store = new DocumentStore({ onListenerError: (err) => log.error(`a store listener failed: ${(err as Error).stack ?? String(err)}`) });
    this.security = rotatingCaAuthority(config.dataDir, this.tls, this.store);
    this.clusterKeys = new ClusterKeyFiles(config.dataDir);
    this.nodeLock = new NodeLock(config.dataDir, this.clusterKeys);
    if (this.nodeLock.locked) log.warn('this node is autolocked: it serves the store, but decrypts no secret and signs no certificate until it is unlocked (shoal unlock --addr THIS_NODE; docs/security.md, "Autolock")');
    this.lifecycle = new Lifecycle({
      ...opts.lifecycle,
      onStopError: (name, err) => log.error(`stopping ${name} failed: ${(err as Error).stack ?? String(err)}`),
    });
  }

  /** Events are cluster events unless the node was told to write none (tests comparing stores). */
  get clusterEvents(): boolean {
    return this.opts.clusterEvents ?? true;
  }
}

/**
 * The node's components, in start order; a stop (RunningNode.stop, or a start that fails) stops
 * them in the reverse order (lifecycle.ts), so read this list bottom-up for the stop:
 *
 * - the security agents and the peer address book stop first, then the mesh, the control plane
 *   (the leader's loops and the agent: they propose through the node; containers and the mesh
 *   keep running), the overlay it reads, the firewall, DNS and backups;
 * - then `hand-over`: a leader hands leadership to another voter while it still serves as a
 *   follower; then the API stops taking connections and answers what it holds (forwarded to the
 *   new leader), before the node itself stops;
 * - then the event sources, the Raft node (its transport and storage with it), the event log,
 *   the runtime metrics and the client for other nodes' APIs.
 *
 * The API begins listening in `api` and the last component waits for the bind: the components
 * between start without waiting on I/O, so no request is served before all have started, as when
 * the API was started last (it reaches the founding token, the renewer and the mesh agent, made
 * after it, through NodeParts; keep any component that waits on I/O out of that stretch).
 * docs/architecture.md, "Start and stop order".
 */
export const nodeComponents: readonly Component<NodeParts>[] = [
  { name: 'peer-http', start: startPeerHttp },
  { name: 'storage', start: openStorage },
  { name: 'bootstrap', start: bootstrap },
  { name: 'node-parts', start: buildNode },
  { name: 'metrics', start: registerMetrics },
  { name: 'event-log', start: startEventLog },
  { name: 'transport', start: listenForPeers },
  { name: 'raft-node', start: startRaftNode },
  { name: 'event-sources', start: startEventSources },
  { name: 'clock-watch', start: startClockWatch },
  { name: 'idle-collector', start: startIdleCollector },
  { name: 'runtime', start: makeRuntimeOf },
  { name: 'api', start: startApi },
  { name: 'hand-over', start: (c) => () => c.node.handOff() },
  { name: 'backups', start: startBackups },
  { name: 'dns', start: startDns },
  { name: 'firewall', start: startFirewallOf },
  { name: 'overlay', start: startOverlay },
  { name: 'ingress', start: startIngressOf },
  { name: 'control', start: startControl },
  { name: 'vip', start: startVip },
  { name: 'mesh', start: startMesh },
  { name: 'peer-addresses', start: (c) => { c.addresses.start(c.node); return () => c.addresses.close(); } },
  { name: 'autopilot', start: startAutopilot },
  { name: 'founding-token', start: startFoundingToken },
  { name: 'cert-renewal', start: startCertRenewal },
  { name: 'ca-keys', start: startCaKeys },
  { name: 'ca-rotation', start: startCaRotation },
  { name: 'ca-holder', start: startCaHolder },
  { name: 'secret-keys', start: startSecretKeys },
  { name: 'api-bound', start: awaitApiBound },
];

export async function startNode(config: NodeConfig, log: Logger | ProcessLogger, opts: StartOptions = {}): Promise<RunningNode> {
  const c = new NodeParts(config, log, opts);
  await c.lifecycle.startAll(nodeComponents, c);
  return {
    identity: c.identity, node: c.node, store: c.store, api: c.api, apiAddress: c.apiAddress, apiScheme: c.peerHttp.scheme,
    control: c.control, events: c.events, foundingTokenWritten: c.founding.written, startTimes: c.lifecycle.startTimes,
    stop: () => c.lifecycle.close(),
  };
}

function startPeerHttp(c: NodeParts): Stop {
  // Calls to other nodes' APIs: the cluster's APIs all run the same way (TLS unless every node opted out).
  c.peerHttp = new PeerHttp(c.config.api.insecureLoopback ? null : c.tls);
  return () => c.peerHttp.close();
}

async function openStorage(c: NodeParts): Promise<Stop> {
  const fsync = c.metrics.histogram('shoal_storage_sync_duration_seconds', 'Duration of synced storage writes (one per Ready batch).', latencyBuckets);
  const disk = await DiskStorage.open(c.config.dataDir, { logger: c.log, onSync: (ms, sample) => { if (sample.sync) fsync.observe(ms / 1000); } });
  // Wrapped for the drills' disk stall (drill-storage.ts): a pass-through until a drill asks.
  c.storage = new DrillStorage(disk);
  // The Raft node closes it when it stops; closing again does nothing.
  return () => c.storage.close();
}

async function bootstrap(c: NodeParts): Promise<void> {
  const { config, storage } = c;
  await bootstrapIfNew(storage, config, c.identity, c.store, c.log);
  if (storage.log.lastIndex() === 0 && config.join !== undefined) c.seedPeers = await learnMembers(c.peerHttp, config.join.api, config.join.timeoutMs, c.log);
}

/** The peer address book, the transport and the Raft node, built (nothing runs yet). */
function buildNode(c: NodeParts): void {
  const { config, identity, store, tls, ref, log } = c;
  // Where members are when their records are out of date, and what this node announces (peer-addresses.ts).
  c.addresses = new PeerAddresses({
    dataDir: config.dataDir, log, hints: [...new Set([...config.peer.peers, ...(c.opts.peers ?? [])])],
    self: (): SelfAddresses => announcedSelf(config, c.transport.address), identify: (address: string): Promise<string> => c.transport.identify(address),
  });
  // The transport asks the node's membership; the node needs the transport: tie the knot by reference.
  c.transport = new WsTransport({
    announce: () => c.addresses.announcement(),
    nodeId: identity.id, clusterId: identity.clusterId, listen: splitHostPort(config.peer.listen), tls,
    protocolVersion, protocolVersionsSupported: { min: 1, max: protocolVersion }, softwareVersion, featureLevelMax: c.levelMax, logger: log,
    // A node that knows its members accepts only them: a removed node's certificate is refused,
    // with the reason `removed`, so it learns it and stops.
    authorizePeer: (id) => {
      const node = ref.node;
      if (node === undefined) return 'member';
      if (node.isRemoved(id)) return 'removed';
      const members = node.membership;
      return members.list().length === 0 || members.get(id) !== undefined ? 'member' : 'not_member';
    },
    // One certificate refused by serial (docs/security.md, "Revoking a certificate").
    isRevoked: (serial) => revokedSerialsOf(store).has(serial),
  });
  revokedSerialsOf(store).onRevoked(() => {
    c.transport.closeRevoked();
    if (revokedSerialsOf(store).hasCertificate(tls.certPem)) log.error('the certificate this node uses was revoked: its peers refuse it and it cannot be renewed; remove the node (shoal cluster remove) and join the machine again (docs/security.md, "Revoking a certificate")');
  });
  c.node = new RaftNode({
    id: identity.id, storage: c.storage, transport: c.transport, stateMachine: store, logger: log,
    tickMs: config.raft.tickMs,
    electionTimeoutTicks: config.raft.electionTimeoutMs / config.raft.tickMs,
    heartbeatIntervalTicks: config.raft.heartbeatIntervalMs / config.raft.tickMs,
    snapshotEntries: config.raft.snapshotEntries, snapshotIntervalMs: config.raft.snapshotIntervalMs,
    snapshotEntriesMax: config.raft.snapshotEntriesMax, logKeepEntries: config.raft.logKeepEntries,
    appendBytesMax: config.raft.appendBytesMax, appendsInflightMax: config.raft.appendsInflightMax,
    uncommittedBytesMax: config.raft.uncommittedBytesMax, proposalTimeoutMs: config.limits.proposalTimeoutMs, seedPeers: c.seedPeers,
    featureLevelMax: c.levelMax, peerAddressOf: (m) => c.addresses.peerAddressOf(m),
    proposalsPendingMax: config.limits.proposalsPendingMax, readsPendingMax: config.limits.readsPendingMax, diskStallMs: config.limits.diskStallMs,
  });
  ref.node = c.node;
  c.node.on('leaderChange', ({ role }) => { ref.role = role; });
}

function registerMetrics(c: NodeParts): Stop {
  registerNodeMetrics(c.metrics, c.node, { identity: c.identity, softwareVersion, electionTimeoutMs: c.config.raft.electionTimeoutMs, dataDir: c.config.dataDir });
  c.observeLoops = registerControlMetrics(c.metrics, c.store);
  c.vipMoves = c.metrics.counter('shoal_vip_moves_total', 'Virtual IPs this node, as leader, gave to another holder (or to none), by reason: assigned, released, lease_expired.', ['reason']);
  c.metrics.gauge({ name: 'shoal_vips_held', help: 'Virtual IPs on this node\'s interfaces now (it holds them).', type: 'gauge', read: () => [{ value: c.vipHeld.size }] });
  registerJobMetrics(c.metrics, c.store);
  registerVolumeMetrics(c.metrics, c.store, () => c.node.logTimeNow());
  c.metrics.gauge({ ...PEER_MESSAGES_DROPPED_METRIC, type: 'counter', read: () => inboundDropSamples(c.transport.inboundDrops()) });
  return registerRuntimeMetrics(c.metrics);
}

function startEventLog(c: NodeParts): Stop {
  // Before the node starts: it counts the stored events, then follows every change from the first.
  c.events = new EventLog({ node: c.node, store: c.store, identity: c.identity, log: c.log });
  return () => c.events.close();
}

async function listenForPeers(c: NodeParts): Promise<Stop> {
  try {
    await c.transport.start();
  } catch (err) {
    await c.transport.close();
    throw listenError('peer.listen', c.config.peer.listen, err);
  }
  // The Raft node closes it when it stops; closing again does nothing.
  return () => c.transport.close();
}

async function startRaftNode(c: NodeParts): Promise<Stop> {
  c.ref.role = 'follower';
  c.transport.onAnnounced((id, announced) => c.addresses.heard(id, announced));
  await c.node.start();
  // A leader hands leadership away first (already done by hand-over on a normal stop); then the
  // node stops, and closes its transport and storage.
  return () => c.node.stop();
}

function startEventSources(c: NodeParts): Stop {
  const stopNodeEvents = watchNodeEvents(c.node, c.events, { clusterEvents: c.clusterEvents });
  // The control plane's changes are only cluster events: a node told to write none records none.
  const stopControlEvents = c.clusterEvents ? watchControlEvents(c.node, c.store, c.events) : () => {};
  const stopJobEvents = c.clusterEvents ? watchJobEvents(c.node, c.store, c.events) : () => {};
  const stopVolumeEvents = c.clusterEvents ? watchVolumeEvents(c.node, c.store, c.events, () => c.node.logTimeNow()) : () => {};
  return () => {
    stopNodeEvents();
    stopControlEvents();
    stopJobEvents();
    stopVolumeEvents();
  };
}

/** The jobs' clock rule (clock-watch.ts): the leader's `jobClockHold`, its events, gauge and report. */
function startClockWatch(c: NodeParts): Stop {
  const sync = new ClockSyncStatus();
  c.clockWatch = new ClockWatch({
    node: c.node, synchronized: () => sync.synchronized, skewMaxMs: c.config.control.jobClockSkewMaxMs, log: c.log,
    record: (type, subject, details) => { if (c.clusterEvents) c.events.recordEvent(type, subject, details); else c.events.recordLocal(type, subject, details); },
  });
  c.metrics.gauge({ ...JOB_CLOCK_HOLD_METRIC, type: 'gauge', read: () => [{ value: c.clockWatch.holding ? 1 : 0 }] });
  sync.start();
  c.clockWatch.start();
  return () => {
    c.clockWatch.close();
    sync.close();
  };
}

/** One collection once the node goes quiet after a burst (idle-collector.ts). */
function startIdleCollector(c: NodeParts): Stop {
  // The gc function (a V8 flag and a new context) is taken at the first collection, not at start-up.
  const collector = new IdleCollector({ utilization: loopUtilization(), memory: heapAndBuffers, collect: () => exposedGc()(), log: c.log });
  c.metrics.gauge({ name: 'shoal_idle_collections_total', help: 'Full garbage collections this node made once quiet after a burst of work (docs/operations.md, "Memory after a burst").', type: 'counter', read: () => [{ value: collector.count }] });
  collector.start();
  return () => collector.close();
}

function makeRuntimeOf(c: NodeParts): Stop {
  c.runtime = makeRuntime(c.config);
  // The control plane closes it when it stops; this closes it when the control plane never started.
  return () => c.runtime?.close();
}

/** Builds the API and begins listening; `api-bound`, the last component, waits for the bind. */
function startApi(c: NodeParts): Stop {
  const { config, node, storage, log } = c;
  c.backupRunner = new BackupRunner({
    node, store: c.store, clusterId: c.identity.clusterId, version: softwareVersion, log, clusterKeys: c.clusterKeys,
    recordEvent: (type, subject, details) => c.events.recordEvent(type, subject, details),
    // A volume's stream is asked of a holder over the mesh (this node included: its own API).
    volumeStream: (nodeId, name, version, bytesMax, parent) => {
      const addr = nodeId === c.identity.id ? c.apiAddress : c.node.membership.get(nodeId)?.apiAddress;
      if (addr === undefined) throw new ShoalError('node_unreachable', `node ${nodeId} is not a member this node knows the address of`, { node: nodeId });
      return fetchVolumeStream(c.peerHttp, addr, name, version, bytesMax, parent);
    },
  });
  c.api = buildApi({
    node, store: c.store, clusterId: c.identity.clusterId, softwareVersion, bodyBytesMax: config.limits.bodyBytesMax,
    proposalTimeoutMs: config.limits.proposalTimeoutMs, metrics: c.metrics, streams: new Set(), runtime: c.runtime, events: c.events,
    auth: c.apiAuth, peer: c.peerHttp, security: c.security, foundingToken: foundingTokenOf(c),
    ...(config.mesh !== undefined ? { mesh: meshKeysOf(c) } : {}),
    renewCertificate: () => c.renewer.renewNow(),
    jobClock: () => c.clockWatch.report(),
    onTlsReloaded: (listener) => {
      c.tlsListeners.add(listener);
      return () => c.tlsListeners.delete(listener);
    },
    caRotation: { dataDir: config.dataDir }, clusterKeys: c.clusterKeys, nodeLock: c.nodeLock,
    backups: c.backupRunner,
    ...(volumeEngineOf(c) !== undefined ? { volumes: volumeEngineOf(c) } : {}),
    limits: {
      ...apiLimitsDefault, connectionsMax: config.limits.connectionsMax, watchStreamsMax: config.limits.watchStreamsMax,
      watchStreamsPerClientMax: config.limits.watchStreamsPerClientMax, snapshotDownloadsMax: config.limits.snapshotDownloadsMax,
    },
    ...(c.opts.drillActions === true ? { drill: drillTargetOf(storage, config.peer.listen, node, config.dataDir) } : {}),
    // Only a node that owns its process (`shoal serve`, as for the drills) restarts into a new build.
    upgrade: c.opts.drillActions === true ? processUpgradeHost(config.dataDir, () => c.lifecycle.close(), log) : inertUpgradeHost(config.dataDir),
  });
  const where = splitHostPort(config.api.listen);
  c.apiBound = c.api.listen({ host: where.host, port: where.port }).then(() => undefined, (err: unknown) => err ?? new Error('listen failed'));
  return async () => {
    // Closed only once its listen has settled: a close racing the bind could leave it listening.
    await c.apiBound;
    await closeApiGracefully(c.api, config.limits.apiDrainMs);
  };
}

/** The founding token as the API sees it: minted by `founding-token`, after the API is built. */
function foundingTokenOf(c: NodeParts): FoundingToken {
  return {
    pendingId: () => c.founding.pendingId(),
    get written() { return c.founding.written; },
    cancel: () => c.founding.cancel(),
  };
}

/** `shoal node rotate-key`: a new key pair, committed, stored, then taken (net/mesh-agent.ts). */
function meshKeysOf(c: NodeParts): MeshKeys {
  return {
    rotateKey: async () => {
      const mesh = c.mesh;
      assert(mesh !== null, 'a node with a mesh config runs the mesh agent');
      const pair = generateKeyPair();
      await mesh.rotateKey(pair, (p) => { writeKeyPair(c.config.dataDir, p); });
      return pair.publicKey;
    },
  };
}

async function awaitApiBound(c: NodeParts): Promise<void> {
  const err = await c.apiBound;
  if (err !== undefined) throw listenError('api.listen', c.config.api.listen, err);
  const where = splitHostPort(c.config.api.listen);
  const addr = c.api.server.address();
  c.apiAddress = typeof addr === 'object' && addr !== null ? `${where.host}:${addr.port}` : c.config.api.listen;
}

function startBackups(c: NodeParts): Stop {
  const { config, identity, node, store } = c;
  const backups = new ScheduledBackups({
    dir: config.snapshot.dir !== undefined ? path.resolve(config.dataDir, config.snapshot.dir) : path.join(config.dataDir, 'backups'),
    intervalMs: config.snapshot.intervalMs, keep: config.snapshot.keep, clusterId: identity.clusterId, log: c.log,
    take: () => snapshotFileParts(node, store, identity.clusterId),
  });
  backups.start();
  // Backups off the cluster (issue 43): each target's schedule, on the leader; and their metrics.
  registerBackupMetrics(c.metrics, store);
  if (c.opts.backupSchedule !== false) c.backupRunner.start();
  return async () => {
    await c.backupRunner.close();
    await backups.close();
  };
}

/** The service DNS responder on this node's gateways (config dns.enabled, docker runtime only); its metrics in any case. */
function startDns(c: NodeParts): Stop | undefined {
  const { config } = c;
  const dns = startServiceDns({ enabled: config.dns.enabled && config.runtime.kind === 'docker', store: c.store, nodeId: c.identity.id, metrics: c.metrics, log: c.log });
  return dns === null ? undefined : () => dns.close();
}

/**
 * Every node's firewall (config firewall.enabled, off by default): renders its nftables table
 * from the committed store and applies it; stopping leaves the table in force.
 */
function startFirewallOf(c: NodeParts): Stop | undefined {
  const { config } = c;
  if (!config.firewall.enabled) return undefined;
  const firewall = startFirewall({ node: c.node, store: c.store, nodeId: c.identity.id, apiListen: config.api.listen, peerListen: config.peer.listen, log: c.log });
  return () => firewall.close();
}

/**
 * The routing mesh (config ingress.enabled, on by default; docker runtime only): renders its
 * nftables table from the committed store and applies it; stopping leaves the table in force.
 */
function startIngressOf(c: NodeParts): Stop | undefined {
  const { config } = c;
  if (!config.ingress.enabled || config.runtime.kind !== 'docker') return undefined;
  const loop = startIngress({ node: c.node, store: c.store, nodeId: c.identity.id, firewallEnabled: config.firewall.enabled, preferLocal: config.ingress.preferLocal, log: c.log });
  return () => loop.close();
}

/**
 * The overlay (net/overlay-agent.ts): Docker networks, and VXLAN over the mesh, for the networks
 * this node hosts; only where containers run on Docker. Stopping shoal leaves them in place.
 */
function startOverlay(c: NodeParts): Stop | undefined {
  const { config, identity } = c;
  c.overlay = config.runtime.kind !== 'docker' ? null : startOverlayAgent({
    node: c.node, store: c.store, clusterId: identity.clusterId, nodeId: identity.id, meshMtu: config.mesh?.mtu ?? null, dockerSocket: config.runtime.dockerSocket, log: c.log,
  });
  const overlay = c.overlay;
  return overlay === null ? undefined : () => overlay.close();
}

/** The leader's loops and this node's agent (control-plane.ts); stopping leaves containers running. */
function startControl(c: NodeParts): Stop {
  const { config, identity, store } = c;
  c.control = new ControlPlane({
    networks: new StoreTaskNetworks(store, identity.id, c.overlay),
    node: c.node, store, clusterId: identity.clusterId, log: c.log, health: config.control, runtime: c.runtime, observeLoops: c.observeLoops, leaseDir: leaseDirOf(config), lease: config.exclusive,
    imageGc: { graceMs: config.runtime.imageGcGraceMs, pinned: config.runtime.imagesPinned, ledgerFile: path.join(config.dataDir, 'images-pulled.json') },
    identity: nodeIdentityOf(c),
    secrets: {
      read: (name, taskId) => secretSourceOf(c).read(name, taskId),
      dir: path.join(config.secrets.tmpfsDir, `shoal-${identity.id}`), legacyDir: path.resolve(config.dataDir, 'secrets'),
    },
    ...(config.mesh !== undefined ? { meshCidr: config.mesh.cidr } : {}),
    jobClockHold: () => c.clockWatch.jobClockHold(),
    ...(config.vips !== undefined ? { vips: config.vips } : {}),
    vipLease: { leaseMs: config.vipLeaseMs, driftRho: config.exclusive.driftRho },
    onVipMoved: (m) => {
      c.vipMoves.inc({ reason: m.reason });
      if (c.clusterEvents) c.events.recordEvent('vip.moved', m.address, { from: m.from, to: m.to, reason: m.reason });
    },
    ...volumesOf(c),
  });
  c.control.start();
  return () => c.control.close();
}

/**
 * This node's replicated volumes' engine (issue 41, docs/volumes.md), under its data directory:
 * on a node that runs containers with Docker (the memory runtime mounts nothing); built once.
 */
function volumeEngineOf(c: NodeParts): VolumeEngine | undefined {
  if (c.runtime === null || c.config.runtime.kind !== 'docker') return undefined;
  c.volumeEngine ??= new VolumeEngine(c.config.dataDir);
  return c.volumeEngine;
}

/** The engine and the sender the control plane runs replicated volumes with: increments go to a holder's API over mTLS. */
function volumesOf(c: NodeParts): { volumes?: { engine: VolumeEngine; send: IncrementSender } } {
  const engine = volumeEngineOf(c);
  if (engine === undefined) return {};
  return {
    volumes: {
      engine,
      send: (nodeId, offer, body, bytesPerSecond) => {
        const addr = c.node.membership.get(nodeId)?.apiAddress;
        if (addr === undefined) throw new ShoalError('node_unreachable', `node ${nodeId} is not a member this node knows the address of`, { node: nodeId });
        return sendIncrement(c.peerHttp, addr, offer, body, bytesPerSecond);
      },
    },
  };
}

/**
 * The virtual IPs this node holds (net/vip-agent.ts), on every node: under its own VIP lease
 * (net/vip-lease.ts, `vipLeaseMs`). Its stop, before the control plane's, hands each VIP it holds
 * over (the address off, a release committed), so a planned stop does not wait out a lease.
 */
function startVip(c: NodeParts): Stop {
  c.vip = startVipAgent({
    node: c.node, store: c.store, nodeId: c.identity.id, log: c.log, bootNow: () => procBootClock.bootNow(), leaseMs: c.config.vipLeaseMs,
    onChange: (address, held) => { if (held) c.vipHeld.add(address); else c.vipHeld.delete(address); },
  });
  const vip = c.vip;
  return () => vip.close();
}

/** The WireGuard mesh (net/): its interface outlives this process; stopping shoal leaves it up. */
function startMesh(c: NodeParts): Stop | undefined {
  const { config, meshKeys } = c;
  c.mesh = config.mesh === undefined || meshKeys === null ? null : startMeshAgent({ config: config.mesh, keys: meshKeys, node: c.node, store: c.store, identity: nodeIdentityOf(c), log: c.log });
  const mesh = c.mesh;
  return mesh === null ? undefined : () => mesh.close();
}

function nodeIdentityOf(c: NodeParts): NodeIdentity {
  const { config, identity } = c;
  return {
    id: identity.id, name: identity.name, apiAddress: config.api.listen, peerAddress: config.peer.listen, softwareVersion,
    capacity: machineCapacity({ ...(config.node.cpuMillis !== undefined ? { cpuMillis: config.node.cpuMillis } : {}), ...(config.node.memoryBytes !== undefined ? { memoryBytes: config.node.memoryBytes } : {}) }),
    labels: config.node.labels,
    // Issue 40: the node's platform, for placement by the platforms an image offers.
    ...(machinePlatform() !== undefined ? { platform: machinePlatform() } : {}),
    // Issue 38: whether it runs the routing mesh (startIngressOf's condition): apply warns when none does.
    ingress: config.ingress.enabled && config.runtime.kind === 'docker',
  };
}

function startAutopilot(c: NodeParts): Stop {
  const { config, events } = c;
  const autopilot = new Autopilot({
    node: c.node, wake: c.node, store: c.store, log: c.log, stabilizationMs: config.autopilot.stabilizationMs, deadMemberRemoveAfterMs: config.autopilot.deadMemberRemoveAfterMs, minQuorum: config.autopilot.minQuorum,
    record: (type, subject, details) => { if (c.opts.clusterEvents === false) events.recordLocal(type, subject, details); else events.recordEvent(type, subject, details); },
  });
  autopilot.start();
  return () => autopilot.close();
}

/** `shoal init` left the first voter token to write once this founding node leads. */
function startFoundingToken(c: NodeParts): Stop {
  c.firstRunAfterInit = existsSync(foundingTokenFile(c.config.dataDir));
  c.founding = mintFoundingToken(c.node, c.config.dataDir, c.log);
  return () => c.founding.cancel();
}

/**
 * New certificates or a new trust bundle: new connections use them at once; open ones keep theirs
 * unless the new bundle no longer trusts their certificate (the transport and the API close those).
 */
function reloadTls(c: NodeParts): void {
  const { tls } = c;
  c.transport.reloadTls();
  c.peerHttp.reloadTls();
  // The API's HTTPS server takes them for new connections too.
  // New ticket keys as the peer listener's: a resumed session would skip the new bundle's check.
  if (c.api.server instanceof HttpsServer) c.api.server.setSecureContext({ ca: tls.caPem, cert: tls.certPem, key: tls.keyPem, minVersion: 'TLSv1.3', ticketKeys: randomBytes(sessionTicketKeysBytes) });
  for (const l of c.tlsListeners) l();
}

function peersToAsk(node: RaftNode): () => { list: MemberRecord[]; leader: string } {
  return () => ({ list: node.membership.list(), leader: node.leaderId });
}

/** Renewal replaces tls's fields in place; the transport reloads its server context, and node-to-node HTTP its client agent. */
function startCertRenewal(c: NodeParts): Stop {
  const { config, identity } = c;
  c.renewer = new CertRenewer({
    dataDir: config.dataDir, nodeId: identity.id, tls: c.tls, members: peersToAsk(c.node), log: c.log, scheme: c.peerHttp.scheme,
    onRenewed: () => reloadTls(c),
    // A one-node cluster has no one else to ask: it signs its own renewal with the CA it holds.
    signLocally: async (csrPem) => {
      const signer = c.security.signer();
      if (signer === undefined) return undefined;
      const { verifyCsr, signNodeCsr } = await import('../security/csr.ts');
      const hosts = ['127.0.0.1', 'localhost', '::1', splitHostPort(config.peer.listen).host, splitHostPort(config.api.listen).host, ...vipAddresses(c.store)];
      const signed = await signNodeCsr(signer, await verifyCsr(csrPem), identity.id, { hosts });
      return withChain(signed.certPem, signer);
    },
  });
  c.renewer.start();
  return () => c.renewer.close();
}

function startCaKeys(c: NodeParts): Stop {
  const { config, identity, node } = c;
  c.caKeys = new CaKeyFetcher({
    dataDir: config.dataDir, nodeId: identity.id, tls: c.tls, members: peersToAsk(node), log: c.log, scheme: c.peerHttp.scheme,
    isVoter: () => node.confState().voters.includes(identity.id),
    onReceived: (from) => {
      // A node told to write no cluster events (tests comparing stores) writes no record either.
      if (c.opts.clusterEvents === false) return;
      c.events.recordEvent('ca.key.received', identity.id, { from });
      c.holder = announceCaHolder(node, c.store, identity.id, c.log);
    },
  });
  c.caKeys.start();
  return () => c.caKeys.close();
}

/** `shoal ca rotate`: this node follows the rotation record in the store (ca-rotation-agent.ts). */
function startCaRotation(c: NodeParts): Stop {
  const { config, identity, node } = c;
  const caRotation = new CaRotationAgent({
    dataDir: config.dataDir, nodeId: identity.id, tls: c.tls, store: c.store, node, log: c.log, scheme: c.peerHttp.scheme, members: peersToAsk(node),
    isVoter: () => node.confState().voters.includes(identity.id),
    renew: () => c.renewer.renewNow(), reloadTls: () => reloadTls(c),
    onCaKeyChanged: () => { c.caKeys.close(); c.caKeys.start(); },
    // A voter holding only the new key (promoted mid-rotation) is a holder too: removing it warns.
    onNextKeyReceived: () => {
      if (c.opts.clusterEvents === false) return;
      c.holder.cancel();
      c.holder = announceCaHolder(node, c.store, identity.id, c.log);
    },
  });
  caRotation.start();
  return () => caRotation.close();
}

/**
 * A node founded by `shoal init` records itself as a holder of the CA key when it first runs (with
 * the founding token); one that receives the key later, on receipt (ca-keys).
 */
function startCaHolder(c: NodeParts): Stop {
  if (c.firstRunAfterInit && holdsKeyFile(caKeyFile(c.config.dataDir))) c.holder = announceCaHolder(c.node, c.store, c.identity.id, c.log);
  return () => c.holder.cancel();
}

function secretSourceOf(c: NodeParts): SecretSource {
  const { node } = c;
  return new SecretSource({
    store: c.store, keys: c.clusterKeys, nodeId: c.identity.id, remote: { tls: c.tls, peer: c.peerHttp }, log: c.log,
    members: peersToAsk(node), voters: () => node.confState().voters,
  });
}

/** POSTs JSON to another member's API over node-to-node HTTP; the answer's body, or a throw naming its error. */
async function callMember(c: NodeParts, addr: string, route: string, body: unknown): Promise<unknown> {
  const res = await c.peerHttp.fetch(addr, route, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: AbortSignal.timeout(10_000) });
  const raw = (await res.json().catch(() => undefined)) as { code?: string; message?: string } | undefined;
  if (!res.ok) throw new Error(`answered ${res.status}${raw?.code !== undefined ? ` ${raw.code}: ${raw.message ?? ''}` : ''}`);
  return raw;
}

/**
 * Secrets at rest: the leader's keyring loop (keys made, plain secrets encrypted, rotations), this
 * node's cluster keys (fetched, retired, sealed under autolock, reported), and the rewrite of its
 * log and snapshot files once no plain secret is left (docs/security.md, "Secrets at rest").
 */
function startSecretKeys(c: NodeParts): Stop {
  const { config, identity, node, store, log } = c;
  const keyring = new SecretKeyring({
    node, store, keys: c.clusterKeys, log,
    pending: () => readPendingKeyring(config.dataDir, (m) => log.warn(m)), onPendingWritten: () => removePendingKeyring(config.dataDir),
  });
  const agent = new ClusterKeyAgent({
    nodeId: identity.id, store, node, keys: c.clusterKeys, lock: c.nodeLock, tls: c.tls, log, members: peersToAsk(node), peerUnlock: config.secrets.peerUnlock,
    call: (addr, route, body) => callMember(c, addr, route, body), onKeyring: () => dropSupersededPending(config.dataDir),
  });
  const purge = new SecretPurge({
    dataDir: config.dataDir, store, node, log,
    backupsDir: config.snapshot.dir !== undefined ? path.resolve(config.dataDir, config.snapshot.dir) : path.join(config.dataDir, 'backups'),
  });
  keyring.start();
  agent.start();
  purge.start();
  // A rotation whose old key is locked on the leader waits for `shoal unlock`: it goes on at once.
  const offUnlocked = c.nodeLock.onUnlocked(() => { void keyring.settle(); });
  return async () => {
    offUnlocked();
    purge.close();
    agent.close();
    await keyring.close();
  };
}

/** The container runtime the config names (docs/operations.md, `runtime`). */
function makeRuntime(config: NodeConfig): Runtime | null {
  switch (config.runtime.kind) {
    case 'none': return null;
    case 'memory': return new MemoryRuntime({ clock: systemClock, pullAny: true });
    case 'docker': return new DockerRuntime({ ...(config.runtime.dockerSocket !== undefined ? { socketPath: config.runtime.dockerSocket } : {}), leaseDir: leaseDirOf(config) });
  }
}

/** Where the agent keeps the exclusive-task lease, mounted into exclusive containers (src/executor/lease-file.ts). */
function leaseDirOf(config: NodeConfig): string {
  return path.resolve(config.dataDir, 'lease');
}

/** A listen address that cannot be bound: in use, or not an address of this machine. */
function listenError(key: string, address: string, err: unknown): ShoalError {
  const e = err as NodeJS.ErrnoException;
  const why = e.code === 'EADDRINUSE' ? 'it is in use by another process (another shoal node, or shoal dev?)'
    : e.code === 'EADDRNOTAVAIL' ? 'it is not an address of this machine'
      : e.code === 'EACCES' ? 'permission denied (ports below 1024 need root)' : e.message;
  return new ShoalError('address_in_use', `cannot listen on ${address} (${key}): ${why}; change ${key} in the config or stop what holds it`, { key, address, errno: e.code ?? null });
}
