// The control plane of one node: the leader's loops (supervisor.ts: they run only while this node
// leads) and the node's agent (src/executor/agent.ts: it runs on every node), wired to the node's
// store, its Raft node and its container runtime. Both wait for the cluster feature level of the
// control plane (src/base/feature-level.ts): a cluster mid-upgrade writes none of it.

import { StoreTaskNetworks, type TaskNetworks } from '../executor/task-networks.ts';
import type { DocumentStore } from '../../fsm/index.ts';
import type { Logger, RaftNode } from '../node/raft-node.ts';
import { Agent } from '../executor/agent.ts';
import { procBootClock, systemClock } from '../executor/clock.ts';
import { FileLeaseStore } from '../executor/lease-file.ts';
import { MemoryLeaseStore } from '../executor/lease-keeper.ts';
import { leaseDefaults, type LeaseConfig } from '../resources/lease.ts';
import { ImageCleaner } from '../executor/image-cleaner.ts';
import { FileImageLedger, MemoryImageLedger } from '../executor/image-ledger.ts';
import type { Runtime } from '../executor/runtime.ts';
import { DiskSecretFiles, MemorySecretFiles } from '../executor/secret-files.ts';
import type { SecretDelivery } from '../executor/secret-delivery.ts';
import { MemoryClusterKeys } from '../security/cluster-key-files.ts';
import { SecretSource } from './secret-source.ts';
import { registryLoginInStore } from '../resources/registry-logins.ts';
import { StoreAgentView, StoreAgentWriter, type NodeIdentity } from '../executor/store-ports.ts';
import { controlFeatureLevel } from '../resources/collections.ts';
import type { NodeHealthConfig } from '../control/node-health.ts';
import { Supervisor, type SupervisorOptions } from '../control/supervisor.ts';
import { PeerViewReporter, peerViewUnheardAfterMs } from '../node/peer-view-reporter.ts';
import type { PassReport } from '../control/leader-run.ts';
import type { VolumeEngine } from '../executor/volumes/volume-engine.ts';
import { runtimeHooks } from '../executor/volumes/hooks.ts';
import { EngineTaskVolumes } from '../executor/volumes/task-volumes.ts';
import { StoreVolumeWriter } from '../executor/volumes/volume-writer.ts';
import { VolumeLoop, type IncrementSender } from '../executor/volumes/volume-loop.ts';

export interface ControlPlaneOptions {
  node: RaftNode;
  store: DocumentStore;
  clusterId: string;
  identity: NodeIdentity;
  /** null: this node runs no workloads (no agent), but its leader loops still run when it leads. */
  runtime: Runtime | null;
  health: NodeHealthConfig;
  log: Logger;
  /**
   * Removing the images shoal pulled once unused (image-cleaner.ts); absent or graceMs 0: never.
   * `ledgerFile`: where the pulled images are remembered across restarts (memory when absent).
   */
  imageGc?: { graceMs: number; pinned: readonly string[]; ledgerFile?: string };
  /** Told of each pass of the leader's loops (the node's metrics). */
  observeLoops?: (pass: PassReport) => void;
  /**
   * The node's lease directory for exclusive tasks (lease-file.ts; the Docker runtime mounts the
   * same one into their containers). Absent: the lease is kept in memory (the memory runtime).
   */
  leaseDir?: string;
  /** The range the leader allocates mesh addresses from (config `mesh.cidr`). */
  meshCidr?: string;
  /** The exclusive-task lease, for the agent and the leader's loops alike (config `exclusive`; default leaseDefaults). */
  lease?: LeaseConfig;
  /** Why scheduled job runs must not fire now (the clock rule: src/node/clock-watch.ts); absent: they may. */
  jobClockHold?: () => string | null;
  /**
   * How the agent gets a secret's value for a task (secret-source.ts), and where it writes the
   * files: `dir` on a tmpfs (`<secrets.tmpfsDir>/shoal-<node id>`), `legacyDir` where an older
   * release wrote them (cleaned up only); without `dir` the files are kept in memory (the memory
   * runtime's tests).
   */
  secrets?: { read: SecretDelivery['read']; dir?: string; legacyDir?: string };
  /** The agent's view of overlay addresses and readiness (src/executor/task-networks.ts); absent: the store's addresses alone. */
  networks?: TaskNetworks;
  /** The virtual IPs the leader's loops manage (config `vips`), and who is told when one moves. */
  vips?: SupervisorOptions['vips'];
  /** The VIP lease (config `vipLeaseMs`, `exclusive.driftRho`); absent: the defaults. */
  vipLease?: SupervisorOptions['vipLease'];
  onVipMoved?: SupervisorOptions['onVipMoved'];
  /**
   * Replicated volumes (issue 41, docs/volumes.md): this node's engine and how it sends an
   * increment to a holder. With them the agent readies and binds a task's replicated volume
   * before its container starts, and the volume loop runs the writer's and the holders' passes.
   * Absent (a node without workloads, the memory runtime): neither.
   */
  volumes?: { engine: VolumeEngine; send: IncrementSender };
}

/** Registration is retried this often while it fails (no leader yet, a conflict). */
const registerRetryMs = 1_000;

export class ControlPlane {
  readonly supervisor: Supervisor;
  readonly agent: Agent | null;
  readonly imageCleaner: ImageCleaner | null;
  /** This node's view of the others (src/node/peer-view-reporter.ts), node health's second opinion. */
  readonly peerViews: PeerViewReporter;
  /** The replicated volumes' passes on this node (src/executor/volumes/volume-loop.ts); null without an engine. */
  readonly volumeLoop: VolumeLoop | null;
  private readonly writer: StoreAgentWriter;
  private registered = false;
  /** A registration in flight: a feature-level change meanwhile must not start a second one (and the agent twice). */
  private registering = false;
  private retry: NodeJS.Timeout | undefined;
  private closed = false;
  private readonly onLevel = (): void => this.maybeStartAgent();

  constructor(private readonly opts: ControlPlaneOptions) {
    this.supervisor = new Supervisor({
      node: opts.node, store: opts.store, log: opts.log, health: opts.health, lease: opts.lease ?? leaseDefaults,
      transferLeadership: (to) => opts.node.transferLeadership(to),
      ...(opts.meshCidr !== undefined ? { meshCidr: opts.meshCidr } : {}), ...(opts.observeLoops !== undefined ? { observeLoops: opts.observeLoops } : {}),
      ...(opts.jobClockHold !== undefined ? { jobClockHold: opts.jobClockHold } : {}),
      ...(opts.vips !== undefined ? { vips: opts.vips } : {}), ...(opts.vipLease !== undefined ? { vipLease: opts.vipLease } : {}), ...(opts.onVipMoved !== undefined ? { onVipMoved: opts.onVipMoved } : {}),
    });
    this.writer = new StoreAgentWriter(opts.node, opts.store, opts.identity, () => opts.node.featureLevel);
    this.peerViews = new PeerViewReporter({
      self: opts.identity.id, store: opts.store,
      members: () => {
        const cs = opts.node.confState();
        return [...cs.voters, ...cs.votersOutgoing, ...cs.learners, ...cs.learnersNext];
      },
      heardAgoMs: (id) => opts.node.peerContact(id).heardAgoMs,
      featureLevel: () => opts.node.featureLevel,
      propose: (data, o) => opts.node.propose(data, o),
      clock: systemClock, log: opts.log,
      unheardAfterMs: peerViewUnheardAfterMs(opts.health),
    });
    const owner = { clusterId: opts.clusterId, nodeId: opts.identity.id };
    const view = new StoreAgentView(opts.store);
    const gc = opts.imageGc;
    this.imageCleaner = opts.runtime === null || gc === undefined || gc.graceMs === 0 ? null : new ImageCleaner({
      owner, view, runtime: opts.runtime, clock: systemClock, log: opts.log, graceMs: gc.graceMs, pinned: gc.pinned,
      caughtUp: async () => { await opts.node.readBarrier(); },
      ledger: gc.ledgerFile === undefined ? new MemoryImageLedger() : new FileImageLedger(gc.ledgerFile, (m) => opts.log.warn(m)),
    });
    const cleaner = this.imageCleaner;
    const vols = opts.runtime === null ? undefined : opts.volumes;
    const volumeWriter = vols === undefined ? null : new StoreVolumeWriter(opts.node, opts.store, opts.identity.id, () => opts.node.logTimeNow());
    this.volumeLoop = vols === undefined || volumeWriter === null ? null : new VolumeLoop({
      engine: vols.engine, store: opts.store, writer: volumeWriter, self: opts.identity.id, send: vols.send,
      now: () => systemClock.now(), log: opts.log, ...(opts.runtime !== null ? { hooks: runtimeHooks(opts.runtime, owner) } : {}),
    });
    this.agent = opts.runtime === null ? null : new Agent({
      owner, view, writer: this.writer,
      caughtUp: async () => { await opts.node.readBarrier(); }, runtime: opts.runtime, clock: systemClock, log: opts.log,
      lease: {
        writer: this.writer, config: opts.lease ?? leaseDefaults, boot: procBootClock,
        store: opts.leaseDir === undefined ? new MemoryLeaseStore() : new FileLeaseStore(opts.leaseDir),
      },
      ...(cleaner !== null ? { onImagePulled: (image: string) => cleaner.notePulled(image) } : {}),
      secrets: {
        // Without a source: plain records only (a node that holds no keys and asks no voter).
        read: opts.secrets?.read ?? ((name, taskId) => new SecretSource({ store: opts.store, keys: new MemoryClusterKeys(), nodeId: opts.identity.id, members: () => ({ list: [], leader: '' }), voters: () => [], log: opts.log }).read(name, taskId)),
        files: opts.secrets?.dir !== undefined ? new DiskSecretFiles(opts.secrets.dir, opts.secrets.legacyDir) : new MemorySecretFiles(),
      },
      networks: opts.networks ?? new StoreTaskNetworks(opts.store, opts.identity.id, null),
      registryLogins: { login: (host) => registryLoginInStore(opts.store, host) },
      ...(vols !== undefined && volumeWriter !== null ? { volumes: new EngineTaskVolumes(vols.engine, (name) => volumeWriter.record(name)) } : {}),
    });
  }

  /** The node's container runtime (null: it runs no workloads); the API reads task logs through it. */
  get runtime(): Runtime | null {
    return this.opts.runtime;
  }

  start(): void {
    this.supervisor.start();
    this.peerViews.start();
    this.opts.node.on('featureLevel', this.onLevel);
    this.maybeStartAgent();
  }

  /** Registers this node's record, then starts the agent; both once the cluster runs the control plane's level. */
  private maybeStartAgent(): void {
    if (this.closed || this.registered || this.registering || this.retry !== undefined || this.opts.node.featureLevel < controlFeatureLevel) return;
    this.registering = true;
    this.writer.register().then(() => {
      this.registering = false;
      this.registered = true;
      this.opts.log.info(`node ${this.opts.identity.name} registered with the control plane${this.agent === null ? ' (no runtime: it runs no workloads)' : ''}`);
      if (this.closed) return;
      this.agent?.start();
      this.imageCleaner?.start();
      this.volumeLoop?.start();
    }, (err: unknown) => {
      this.registering = false;
      this.opts.log.debug(`registering this node failed (${(err as Error).message}); retrying`);
      this.retry = setTimeout(() => {
        this.retry = undefined;
        this.maybeStartAgent();
      }, registerRetryMs);
    });
  }

  /** Stops the agent (containers keep running) and the leader's loops; idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    this.peerViews.close();
    this.opts.node.off('featureLevel', this.onLevel);
    await Promise.all([this.agent?.close(), this.imageCleaner?.close(), this.volumeLoop?.close(), this.supervisor.close()]);
    await this.opts.runtime?.close();
  }
}
