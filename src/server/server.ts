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
import { Registry, latencyBuckets } from '../base/metrics.ts';
import { registerNodeMetrics } from '../node/metrics/node-metrics.ts';
import { registerControlMetrics } from '../node/metrics/control-metrics.ts';
import { EventLog } from '../node/events/event-log.ts';
import { watchNodeEvents } from '../node/events/event-sources.ts';
import { watchControlEvents } from '../node/events/control-events.ts';
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
import { registerRuntimeMetrics } from '../node/metrics/runtime-metrics.ts';
import { ControlPlane } from './control-plane.ts';
import { machineCapacity } from '../executor/store-ports.ts';
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
import { startMeshAgent } from '../../net/mesh-node.ts';
import { generateKeyPair, loadOrCreateKeyPair, writeKeyPair } from '../../net/wg-keys.ts';
import type { MeshKeys } from '../api/context.ts';
import { startFirewall } from '../../net/firewall-start.ts';
import { startServiceDns } from '../../net/dns-start.ts';
import { startOverlayAgent } from '../../net/overlay-node.ts';
import { StoreTaskNetworks } from '../executor/task-networks.ts';
import { DrillStorage } from '../node/drill/drill-storage.ts';
import { drillTargetOf } from '../node/drill/drill-target.ts';
import { inertUpgradeHost, processUpgradeHost } from '../node/upgrade/upgrade-host.ts';
import { revokedSerialsOf } from '../security/revoked-index.ts';

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
  /** Graceful: hands leadership away when leading, then closes API, transport and storage. */
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
}

export async function startNode(config: NodeConfig, log: Logger | ProcessLogger, opts: StartOptions = {}): Promise<RunningNode> {
  const levelMax = opts.featureLevelMax ?? featureLevelMax;
  const identity = loadIdentity(config.dataDir);
  // Every later line names the node, with its term and role (the role as its leaderChange events say).
  const ref: { node?: RaftNode; role: string } = { role: 'starting' };
  if ('bindNode' in log) log.bindNode({ name: identity.name, id: identity.id, state: () => ({ term: ref.node?.currentTerm ?? 0, role: ref.role }) });
  const tls = loadTls(config.dataDir);
  const apiAuth: ApiAuth = config.api.insecureLoopback ? { mode: 'insecure' } : { mode: 'tls', tls };
  if (config.api.insecureLoopback) {
    log.warn(`api.insecureLoopback is on: the API on ${config.api.listen} is plain HTTP with no authentication, and every local process is admin; remove it outside tests (docs/security.md)`);
  }
  // Calls to other nodes' APIs: the cluster's APIs all run the same way (TLS unless every node opted out).
  const peerHttp = new PeerHttp(config.api.insecureLoopback ? null : tls);
  // The WireGuard key: made at the first start with `mesh`; a damaged file stops the start here.
  const meshKeys = config.mesh === undefined ? null : loadOrCreateKeyPair(config.dataDir);
  const metrics = new Registry();
  const fsync = metrics.histogram('shoal_storage_sync_duration_seconds', 'Duration of synced storage writes (one per Ready batch).', latencyBuckets);
  // Wrapped for the drills' disk stall (drill-storage.ts): a pass-through until a drill asks.
  const storage = new DrillStorage(await DiskStorage.open(config.dataDir, { logger: log, onSync: (ms, sample) => { if (sample.sync) fsync.observe(ms / 1000); } }));
  // Store options must be the same on every node (they shape snapshots and replays): defaults.
  const store = new DocumentStore({ onListenerError: (err) => log.error(`a store listener failed: ${(err as Error).stack ?? String(err)}`) });
  let seedPeers: MemberRecord[] = [];
  try {
    await bootstrapIfNew(storage, config, identity, store, log);
    if (storage.log.lastIndex() === 0 && config.join !== undefined) seedPeers = await learnMembers(peerHttp, config.join.api, config.join.timeoutMs, log);
  } catch (err) {
    await storage.close();
    throw err;
  }
  // Where members are when their records are out of date, and what this node announces (peer-addresses.ts).
  const addresses: PeerAddresses = new PeerAddresses({
    dataDir: config.dataDir, log, hints: [...new Set([...config.peer.peers, ...(opts.peers ?? [])])],
    self: (): SelfAddresses => announcedSelf(config, transport.address), identify: (address: string): Promise<string> => transport.identify(address),
  });
  // The transport asks the node's membership; the node needs the transport: tie the knot by reference.
  const transport: WsTransport = new WsTransport({
    announce: () => addresses.announcement(),
    nodeId: identity.id, clusterId: identity.clusterId, listen: splitHostPort(config.peer.listen), tls,
    protocolVersion, protocolVersionsSupported: { min: 1, max: protocolVersion }, softwareVersion, featureLevelMax: levelMax, logger: log,
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
    transport.closeRevoked();
    if (revokedSerialsOf(store).hasCertificate(tls.certPem)) log.error('the certificate this node uses was revoked: its peers refuse it and it cannot be renewed; remove the node (shoal cluster remove) and join the machine again (docs/security.md, "Revoking a certificate")');
  });
  const node = new RaftNode({
    id: identity.id, storage, transport, stateMachine: store, logger: log,
    tickMs: config.raft.tickMs,
    electionTimeoutTicks: config.raft.electionTimeoutMs / config.raft.tickMs,
    heartbeatIntervalTicks: config.raft.heartbeatIntervalMs / config.raft.tickMs,
    snapshotEntries: config.raft.snapshotEntries, snapshotIntervalMs: config.raft.snapshotIntervalMs,
    snapshotEntriesMax: config.raft.snapshotEntriesMax, logKeepEntries: config.raft.logKeepEntries,
    appendBytesMax: config.raft.appendBytesMax, appendsInflightMax: config.raft.appendsInflightMax,
    uncommittedBytesMax: config.raft.uncommittedBytesMax, proposalTimeoutMs: config.limits.proposalTimeoutMs, seedPeers,
    featureLevelMax: levelMax, peerAddressOf: (m) => addresses.peerAddressOf(m),
    proposalsPendingMax: config.limits.proposalsPendingMax, readsPendingMax: config.limits.readsPendingMax, diskStallMs: config.limits.diskStallMs,
  });
  ref.node = node;
  node.on('leaderChange', ({ role }) => { ref.role = role; });
  registerNodeMetrics(metrics, node, { identity, softwareVersion, electionTimeoutMs: config.raft.electionTimeoutMs, dataDir: config.dataDir });
  const observeLoops = registerControlMetrics(metrics, store);
  metrics.gauge({ ...PEER_MESSAGES_DROPPED_METRIC, type: 'counter', read: () => inboundDropSamples(transport.inboundDrops()) });
  const stopRuntimeMetrics = registerRuntimeMetrics(metrics);
  // Before the node starts: it counts the stored events, then follows every change from the first.
  const events = new EventLog({ node, store, identity, log });
  try {
    await transport.start();
  } catch (err) {
    await storage.close();
    throw listenError('peer.listen', config.peer.listen, err);
  }
  ref.role = 'follower';
  transport.onAnnounced((id, announced) => addresses.heard(id, announced));
  await node.start();
  addresses.start(node);
  const nodeIdentity = {
    id: identity.id, name: identity.name, apiAddress: config.api.listen, peerAddress: config.peer.listen, softwareVersion,
    capacity: machineCapacity({ ...(config.node.cpuMillis !== undefined ? { cpuMillis: config.node.cpuMillis } : {}), ...(config.node.memoryBytes !== undefined ? { memoryBytes: config.node.memoryBytes } : {}) }),
    labels: config.node.labels,
  };
  // The overlay (net/overlay-agent.ts): Docker networks, and VXLAN over the mesh, for the networks
  // this node hosts; only where containers run on Docker. Stopping shoal leaves them in place.
  const overlay = config.runtime.kind !== 'docker' ? null : startOverlayAgent({
    node, store, clusterId: identity.clusterId, nodeId: identity.id, meshMtu: config.mesh?.mtu ?? null, dockerSocket: config.runtime.dockerSocket, log,
  });
  const control = new ControlPlane({
    networks: new StoreTaskNetworks(store, identity.id, overlay),
    node, store, clusterId: identity.clusterId, log, health: config.control, runtime: makeRuntime(config), observeLoops, leaseDir: leaseDirOf(config), lease: config.exclusive,
    imageGc: { graceMs: config.runtime.imageGcGraceMs, pinned: config.runtime.imagesPinned, ledgerFile: path.join(config.dataDir, 'images-pulled.json') },
    identity: nodeIdentity, secretsDir: path.resolve(config.dataDir, 'secrets'),
    ...(config.mesh !== undefined ? { meshCidr: config.mesh.cidr } : {}),
  });
  control.start();
  // The WireGuard mesh (net/): its interface outlives this process; stopping shoal leaves it up.
  const mesh = config.mesh === undefined || meshKeys === null ? null : startMeshAgent({ config: config.mesh, keys: meshKeys, node, store, identity: nodeIdentity, log });
  // Every node's firewall (config firewall.enabled, off by default): renders its nftables table
  // from the committed store and applies it; stopping leaves the table in force.
  const firewall = config.firewall.enabled ? startFirewall({ node, store, nodeId: identity.id, apiListen: config.api.listen, peerListen: config.peer.listen, log }) : null;
  // The service DNS responder on this node's gateways (config dns.enabled, docker runtime only).
  const dns = startServiceDns({ enabled: config.dns.enabled && config.runtime.kind === 'docker', store, nodeId: identity.id, metrics, log });
  const backups = new ScheduledBackups({
    dir: config.snapshot.dir !== undefined ? path.resolve(config.dataDir, config.snapshot.dir) : path.join(config.dataDir, 'backups'),
    intervalMs: config.snapshot.intervalMs, keep: config.snapshot.keep, clusterId: identity.clusterId, log,
    take: () => snapshotFileParts(node, store, identity.clusterId),
  });
  backups.start();
  const autopilot = new Autopilot({
    node, store, log, stabilizationMs: config.autopilot.stabilizationMs, deadMemberRemoveAfterMs: config.autopilot.deadMemberRemoveAfterMs, minQuorum: config.autopilot.minQuorum,
    record: (type, subject, details) => { if (opts.clusterEvents === false) events.recordLocal(type, subject, details); else events.recordEvent(type, subject, details); },
  });
  autopilot.start();
  // The trust bundle is tls.caPem (two CAs during a CA rotation), kept by the rotation agent below.
  const security = rotatingCaAuthority(config.dataDir, tls, store);
  // `shoal init` left the first voter token to write once this founding node leads.
  const firstRunAfterInit = existsSync(foundingTokenFile(config.dataDir));
  const founding = mintFoundingToken(node, config.dataDir, log);
  // The API is built below; the renewer reaches its server through this once it exists.
  const apiRef: { server?: unknown } = {};
  const peersToAsk = (): { list: MemberRecord[]; leader: string } => ({ list: node.membership.list(), leader: node.leaderId });
  // New certificates or a new trust bundle: new connections use them at once; open ones keep theirs
  // unless the new bundle no longer trusts their certificate (the transport and the API close those).
  const tlsListeners = new Set<() => void>();
  const reloadTls = (): void => {
    transport.reloadTls();
    peerHttp.reloadTls();
    // The API's HTTPS server takes them for new connections too.
    // New ticket keys as the peer listener's: a resumed session would skip the new bundle's check.
    if (apiRef.server instanceof HttpsServer) apiRef.server.setSecureContext({ ca: tls.caPem, cert: tls.certPem, key: tls.keyPem, minVersion: 'TLSv1.3', ticketKeys: randomBytes(sessionTicketKeysBytes) });
    for (const l of tlsListeners) l();
  };
  // Renewal replaces tls's fields in place; the transport reloads its server context, and
  // node-to-node HTTP its client agent.
  const renewer = new CertRenewer({
    dataDir: config.dataDir, nodeId: identity.id, tls, members: peersToAsk, log, scheme: peerHttp.scheme,
    onRenewed: () => reloadTls(),
    // A one-node cluster has no one else to ask: it signs its own renewal with the CA it holds.
    signLocally: async (csrPem) => {
      const signer = security.signer();
      if (signer === undefined) return undefined;
      const { verifyCsr, signNodeCsr } = await import('../security/csr.ts');
      const hosts = ['127.0.0.1', 'localhost', '::1', splitHostPort(config.peer.listen).host, splitHostPort(config.api.listen).host];
      const signed = await signNodeCsr(signer, await verifyCsr(csrPem), identity.id, { hosts });
      return withChain(signed.certPem, signer);
    },
  });
  renewer.start();
  const caKeys = new CaKeyFetcher({
    dataDir: config.dataDir, nodeId: identity.id, tls, members: peersToAsk, log, scheme: peerHttp.scheme,
    isVoter: () => node.confState().voters.includes(identity.id),
    onReceived: (from) => {
      // A node told to write no cluster events (tests comparing stores) writes no record either.
      if (opts.clusterEvents === false) return;
      events.recordEvent('ca.key.received', identity.id, { from });
      holder = announceCaHolder(node, store, identity.id, log);
    },
  });
  caKeys.start();
  // `shoal ca rotate`: this node follows the rotation record in the store (ca-rotation-agent.ts).
  const caRotation = new CaRotationAgent({
    dataDir: config.dataDir, nodeId: identity.id, tls, store, node, log, scheme: peerHttp.scheme, members: peersToAsk,
    isVoter: () => node.confState().voters.includes(identity.id),
    renew: () => renewer.renewNow(), reloadTls,
    onCaKeyChanged: () => { caKeys.close(); caKeys.start(); },
    // A voter holding only the new key (promoted mid-rotation) is a holder too: removing it warns.
    onNextKeyReceived: () => {
      if (opts.clusterEvents === false) return;
      holder.cancel();
      holder = announceCaHolder(node, store, identity.id, log);
    },
  });
  caRotation.start();
  // A node founded by `shoal init` records itself as a holder when it first runs (with the
  // founding token); one that receives the key later, on receipt (above).
  let holder = firstRunAfterInit && existsSync(caKeyFile(config.dataDir)) ? announceCaHolder(node, store, identity.id, log) : { cancel() {} };
  const stopSecurity = (): void => {
    addresses.close();
    autopilot.close();
    founding.cancel();
    renewer.close();
    caKeys.close();
    caRotation.close();
    holder.cancel();
  };
  const clusterEvents = opts.clusterEvents ?? true;
  const stopNodeEvents = watchNodeEvents(node, events, { clusterEvents });
  // The control plane's changes are only cluster events: a node told to write none records none.
  const stopControlEvents = clusterEvents ? watchControlEvents(node, store, events) : () => {};
  const stopEventSources = (): void => {
    stopNodeEvents();
    stopControlEvents();
  };
  // `shoal node rotate-key`: a new key pair, committed, stored, then taken (net/mesh-agent.ts).
  const meshKeysPort: MeshKeys | undefined = mesh === null ? undefined : {
    rotateKey: async () => {
      const pair = generateKeyPair();
      await mesh.rotateKey(pair, (p) => { writeKeyPair(config.dataDir, p); });
      return pair.publicKey;
    },
  };
  // The upgrade's restart stops the node the graceful way; that stop exists once the node is built below.
  const stopRef = { stop: async (): Promise<void> => {} };
  const api = buildApi({
    node: node, store, clusterId: identity.clusterId, softwareVersion, bodyBytesMax: config.limits.bodyBytesMax,
    proposalTimeoutMs: config.limits.proposalTimeoutMs, metrics, streams: new Set(), runtime: control.runtime, events, auth: apiAuth, peer: peerHttp, security, foundingToken: founding,
    ...(meshKeysPort !== undefined ? { mesh: meshKeysPort } : {}),
    renewCertificate: () => renewer.renewNow(),
    onTlsReloaded: (listener) => {
      tlsListeners.add(listener);
      return () => tlsListeners.delete(listener);
    },
    caRotation: { dataDir: config.dataDir },
    limits: {
      ...apiLimitsDefault, connectionsMax: config.limits.connectionsMax, watchStreamsMax: config.limits.watchStreamsMax,
      watchStreamsPerClientMax: config.limits.watchStreamsPerClientMax, snapshotDownloadsMax: config.limits.snapshotDownloadsMax,
    },
    ...(opts.drillActions === true ? { drill: drillTargetOf(storage, config.peer.listen, node, config.dataDir) } : {}),
    // Only a node that owns its process (`shoal serve`, as for the drills) restarts into a new build.
    upgrade: opts.drillActions === true ? processUpgradeHost(config.dataDir, () => stopRef.stop(), log) : inertUpgradeHost(config.dataDir),
  });
  apiRef.server = api.server;
  const apiListen = splitHostPort(config.api.listen);
  try {
    await api.listen({ host: apiListen.host, port: apiListen.port });
  } catch (err) {
    stopSecurity();
    await mesh?.close();
    await overlay?.close();
    await firewall?.close();
    await dns?.close();
    await backups.close();
    await control.close();
    stopEventSources();
    events.close();
    await node.stop();
    stopRuntimeMetrics();
    await peerHttp.close();
    throw listenError('api.listen', config.api.listen, err);
  }
  const addr = api.server.address();
  const apiAddress = typeof addr === 'object' && addr !== null ? `${apiListen.host}:${addr.port}` : config.api.listen;
  let stopping: Promise<void> | undefined;
  const running: RunningNode = {
    identity, node, store, api, apiAddress, apiScheme: peerHttp.scheme, control, events, foundingTokenWritten: founding.written,
    stop: () => {
      stopping ??= (async () => {
        // The loops and the agents first: they propose through the node. Containers and the mesh keep running.
        stopSecurity();
        await mesh?.close();
        await overlay?.close();
        await control.close();
        await firewall?.close();
        await dns?.close();
        await backups.close();
        // Then leadership goes to another voter while this node still serves as a follower: the
        // API stops taking connections and answers what it holds (forwarded to the new leader)
        // before the node itself stops (docs/operations.md, "Graceful stop").
        await node.handOff();
        await closeApiGracefully(api, config.limits.apiDrainMs);
        stopEventSources();
        events.close();
        await node.stop();
        stopRuntimeMetrics();
        await peerHttp.close();
      })();
      return stopping;
    },
  };
  stopRef.stop = running.stop;
  return running;
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
