// One run of the leader's loops: everything they do while this node leads one term. The
// supervisor (supervisor.ts) starts a run when the node may lead the control plane and stops it
// when it may not; the control-plane simulator (test/sim-control/) drives the same class on
// simulated time, so the code it checks is this code.
//
// One work queue (work-queue.ts) fed by the store's events, with these keys:
//   svc:<name>  the orchestrator for one service (orchestrator.ts)
//   place       the placement of pending tasks (placement.ts)
//   nodes       node health (node-health.ts), then mesh addresses (src/resources/mesh-addresses.ts)
//   net:<name>  the addresses of one overlay network (network-allocation.ts)
//   job:<name>  one job's schedule, runs and attempts (job-loop.ts)
//   vips        who holds each virtual IP (vip-holders.ts)
// Keys are handled one at a time; each pass re-reads the state (level-triggered), decides with a
// pure function, and proposes the plan fenced by the run's term. A plan refused because something
// it read changed is decided again at once. A proposal whose outcome is unknown (it timed out, the
// leader changed) is not decided again until this node has applied or lost every proposal it made:
// deciding again from applied state that lacks a write still on its way would decide it twice
// (found by the control-plane simulator, seed 945: a slot given two tasks).
//
// Node health (node-health.ts): the run notes, on its own monotonic clock, when its store applies
// a write of each node's own (an agent report, a lease renewal, its peer view): one more sign that
// the node is there, beside what the node's driver hears (ports.peerContact). A node silent to
// this leader alone makes the run hand leadership over (ports.transferLeadership).
//
// Exclusive services (lease.ts): the orchestrator replaces an exclusive task of a lost node only
// once lease + margin has passed since the later of the last renewal of that node this node's
// store applied (renewal-log.ts: noted on this node's monotonic clock since its control plane
// started, leader or not) and the moment that log began watching.

import type { DocumentStore } from '../../fsm/index.ts';
import { encodeCommand } from '../../fsm/index.ts';
import type { CommandResult, WatchEvent } from '../../fsm/types.ts';
import { ShoalError } from '../errors.ts';
import type { ProposalResult } from '../ports/proposer.ts';
import { compatCommand } from '../resources/record-compat.ts';
import { toTransactions, type Plan } from '../resources/changes.ts';
import { ingressPortsCollection } from '../resources/ingress-ports.ts';
import { leasesCollection, nodesCollection, servicesCollection, taskStatusCollection, tasksCollection } from '../resources/collections.ts';
import { exclusiveClearInMs, leaseDefaults, leaseRecordSchema, type LeaseConfig } from '../resources/lease.ts';
import { RenewalLog, vipRenewals } from './renewal-log.ts';
import { decideNetworkAllocation } from './network-allocation.ts';
import { networksCollection, readNetworkState } from '../resources/network-resources.ts';
import { assessNodes, type HealthDecision, type NodeContact, type NodeHealthConfig } from './node-health.ts';
import type { PeerContact } from '../ports/leadership.ts';
import { allDocs } from '../resources/state.ts';
import { peerViewRecordSchema, peerViewsCollection, readPeerViews } from '../resources/peer-views.ts';
import { allocateMeshAddresses, meshCidrDefault } from '../resources/mesh-addresses.ts';
import { reconcileService, type Decision } from './orchestrator.ts';
import { reconcileJob } from './job-loop.ts';
import { jobRunsCollection, jobsCollection } from '../resources/jobs.ts';
import { imagePullsCollection } from '../resources/image-pulls.ts';
import { featureLevelSecretsAtRest, featureLevelVips } from '../base/feature-level.ts';
import { placePending } from './placement.ts';
import { readDependencies } from './dependencies.ts';
import { ControlStateReader, type ControlState } from '../resources/state.ts';
import { WorkQueue, type QueueClock } from './work-queue.ts';
import { decideVipHolders } from './vip-holders.ts';
import { isIpv6, vipClearInMs, vipLeaseDefaults, vipLeaseRecordSchema, vipLeasesCollection, vipRecordSchema, vipReleaseSchema, vipReleasesCollection, vipsCollection, type VipLeaseConfig, type VipRecord, type VipRelease, type VipSpec } from '../resources/vips.ts';
import type { Versioned } from '../resources/state.ts';

/** How often node health is looked at while any node is not ready (a node may come back). */
export const recheckNodesMs = 1_000;

/** What a pass knew when it decided: the simulator's checkers record it with each proposal. */
export interface PassMeta {
  key: string;
  /** The store revision the pass read. */
  readRevision: number;
  /** Monotonic ms since the run started. */
  runningForMs: number;
}

export interface LeaderRunPorts {
  store: DocumentStore;
  /** Monotonic ms and timers (the work queue's delays). */
  clock: QueueClock & { now(): number };
  /** Log time for what the loops write (the leader's log clock). */
  logTimeNow(): number;
  self: string;
  /** The cluster's members (voters and learners). */
  members(): ReadonlySet<string>;
  health: NodeHealthConfig;
  /** Ms since this node last heard from `id`, or undefined if never (used when peerContact is absent). */
  silentForMs(id: string): number | undefined;
  /** What this node knows first-hand of `id` being there (RaftNode.peerContact); absent: silentForMs alone. */
  peerContact?(id: string): PeerContact;
  /** The voters (whom leadership may go to); absent: every member. */
  voters?(): ReadonlySet<string>;
  /**
   * Hands leadership to `to`: node health found a node that only this leader cannot hear. Absent:
   * never. The supervisor rate-limits across runs (lastTransferAgoMs).
   */
  transferLeadership?(to: string): void;
  /** Ms since this node last handed leadership over for node health; undefined: never. */
  lastTransferAgoMs?(): number | undefined;
  /** Proposes fenced by `term`; rejects with stale_term when this node no longer leads it. */
  /** `featureLevel`: what the command needs (src/resources/record-compat.ts). */
  propose(data: Uint8Array, term: number, meta: PassMeta, featureLevel: number): Promise<ProposalResult>;
  /** Resolves once every proposal this node made so far is applied here, or can no longer commit. */
  settleOwnProposals(): Promise<void>;
  newTaskId(): string;
  log: { debug(msg: string): void; info?(msg: string): void; warn(msg: string): void };
  /** Told of each pass when it ends (the node's metrics); absent in the simulator. */
  observe?: (pass: PassReport) => void;
  /** The exclusive-task lease (default leaseDefaults). */
  lease?: LeaseConfig;
  /**
   * When this node's store applied each lease renewal, watched since before this run (the
   * supervisor's, for the life of the control plane). Absent: the run watches from its own start.
   */
  renewals?: RenewalLog;
  /** The same for the VIP lease and the grants of VIPs (renewal-log.ts vipRenewals). Absent: the run watches from its own start. */
  vipRenewals?: RenewalLog;
  /** The VIP lease (default vipLeaseDefaults, with the exclusive lease's driftRho). */
  vipLease?: VipLeaseConfig;
  /** The range mesh addresses are allocated from (this leader's `mesh.cidr`; default net/mesh-config.ts). */
  meshCidr?: string;
  /**
   * Why this leader must not fire scheduled job runs now (its clock is not synchronized, or far
   * from the members'), or null when it may. Absent: it may. Asked at each job pass.
   */
  jobClockHold?(): string | null;
  /** The cluster's committed feature level; absent: read as the control plane's (no newer writes). */
  featureLevel?(): number;
  /** The virtual IPs (this leader's config `vips`); absent: this leader manages none (the records stay as they are). */
  vips?: readonly VipSpec[];
  /** Told of each VIP that changed holder (events, metrics); absent in the simulator. */
  onVipMoved?: (move: { address: string; from: string | null; to: string | null; reason: string }) => void;
}

/** Which loop a work-queue key belongs to (a metric label: never the service's name). */
export type LoopName = 'service' | 'placement' | 'nodes' | 'network' | 'job' | 'vips';

/** One pass, as the metrics see it. */
export interface PassReport {
  loop: LoopName;
  /** From reading the state to the last write's answer (or the failure). */
  seconds: number;
  /** done: its plan was written; conflict: what it read changed, decided again; error: retried later. */
  outcome: 'done' | 'conflict' | 'error';
  /** The error's code, when the outcome is error. */
  code?: string;
  /** Tasks assigned to a node by a plan that was written. */
  placements: number;
}

export function loopOf(key: string): LoopName {
  if (key === 'place') return 'placement';
  if (key === 'nodes') return 'nodes';
  if (key.startsWith('net:')) return 'network';
  if (key.startsWith('job:')) return 'job';
  if (key === 'vips') return 'vips';
  return 'service';
}

type Outcome = 'done' | 'conflict';

export class LeaderRun {
  private readonly queue: WorkQueue;
  private readonly reader: ControlStateReader;
  private readonly startedAt: number;
  private closed = false;
  private unsubscribe: (() => void) | null = null;
  /** When this node's store applied each node's lease renewals (monotonic ms), and the longest lease each claimed. */
  private readonly renewals: RenewalLog;
  private readonly ownsRenewals: boolean;
  private readonly vipRenewals: RenewalLog;
  private readonly ownsVipRenewals: boolean;
  /** Per node: when this run's store applied a write of the node's own (monotonic ms). */
  private readonly ownWrites = new Map<string, number>();
  /**
   * Since when each node has been heard with no sign of a restart in between (mute counts from
   * then at most): see contactOf.
   */
  private readonly heardSince = new Map<string, number>();
  /** The VIP moves of the plan being written: told once it is (onVipMoved). */
  private pendingVipMoves: { address: string; from: string | null; to: string | null; reason: string }[] = [];
  private vipWaitingLogged = '';
  /** The loop's promise; resolves once the run has stopped. */
  done: Promise<void> = Promise.resolve();
  readonly counts = { passes: 0, proposed: 0, conflicts: 0, unknownOutcomes: 0 };

  constructor(private readonly ports: LeaderRunPorts, readonly term: number) {
    this.queue = new WorkQueue(ports.clock, () => ports.clock.now());
    this.reader = new ControlStateReader(ports.store, (m) => ports.log.warn(`${m.collection}/${m.id} (rev ${m.rev}) is not a valid record and is ignored: ${m.problem}`));
    this.startedAt = ports.clock.now();
    this.ownsRenewals = ports.renewals === undefined;
    this.renewals = ports.renewals ?? new RenewalLog(ports.store, () => ports.clock.now());
    this.ownsVipRenewals = ports.vipRenewals === undefined;
    this.vipRenewals = ports.vipRenewals ?? new RenewalLog(ports.store, () => ports.clock.now(), vipRenewals);
  }

  start(): void {
    this.unsubscribe = this.ports.store.subscribe((ev) => this.enqueueFor(ev));
    this.queue.add('nodes');
    this.queue.add('place');
    for (const id of this.reader.read().services.keys()) this.queue.add(`svc:${id}`);
    this.addJobs();
    this.addNetworks();
    this.queue.add('vips');
    this.done = this.loop();
  }

  /** The cluster's feature level went up: what waited for it (the VIPs) is decided again. */
  featureLevelRaised(): void {
    if (!this.closed) this.queue.add('vips');
  }

  /** Stops handing out keys; the pass under way finishes (await `done`). Idempotent. */
  stop(): void {
    this.closed = true;
    this.queue.close();
    this.unsubscribe?.();
    if (this.ownsRenewals) this.renewals.close();
    if (this.ownsVipRenewals) this.vipRenewals.close();
  }

  private async loop(): Promise<void> {
    for (;;) {
      const key = await this.queue.next();
      if (key === undefined || this.closed) return;
      await this.pass(key);
    }
  }

  /** Every job's loop (a node's state or epoch changed: an attempt may be lost). */
  private addJobs(): void {
    for (const id of this.reader.read().jobs?.keys() ?? []) this.queue.add(`job:${id}`);
  }

  /** Every network's allocator: tasks and nodes come and go. */
  private addNetworks(): void {
    for (const name of readNetworkState(this.ports.store).networks.keys()) this.queue.add(`net:${name}`);
  }

  /** Which keys a change of the store concerns. */
  private enqueueFor(ev: WatchEvent): void {
    if (ev.collection === tasksCollection || ev.collection === nodesCollection) this.addNetworks();
    this.noteOwnWrite(ev);
    if (ev.collection === nodesCollection || ev.collection === vipsCollection || ev.collection === vipReleasesCollection) this.queue.add('vips');
    switch (ev.collection) {
      case peerViewsCollection:
        this.queue.add('nodes');
        return;
      case networksCollection:
        this.queue.add(`net:${ev.id}`);
        return;
      case jobsCollection:
        this.queue.add(`job:${ev.id}`);
        return;
      case jobRunsCollection: {
        const job = (ev.doc?.doc as { job?: unknown } | undefined)?.job;
        if (typeof job === 'string') this.queue.add(`job:${job}`);
        else for (const id of this.reader.read().jobs?.keys() ?? []) if (ev.id.startsWith(`${id}-`)) this.queue.add(`job:${id}`);
        return;
      }
      case servicesCollection:
        this.queue.add(`svc:${ev.id}`);
        this.queue.add('place');
        return;
      case imagePullsCollection: {
        // A node answered a pull a stop waits for (image-pull-gate.ts).
        const service = (ev.doc?.doc as { service?: unknown } | undefined)?.service;
        if (typeof service === 'string') this.queue.add(`svc:${service}`);
        return;
      }
      case tasksCollection:
      case taskStatusCollection: {
        const service = this.serviceOfTask(ev);
        if (service !== undefined) this.queue.add(this.isJob(service) ? `job:${service}` : `svc:${service}`);
        this.queue.add('place');
        return;
      }
      case nodesCollection:
        this.queue.add('nodes');
        this.queue.add('place');
        for (const id of this.reader.read().services.keys()) this.queue.add(`svc:${id}`);
        this.addJobs();
        return;
      default:
    }
  }

  /** A node's own write applied: its agent's report or lease renewal, or its peer view. */
  private noteOwnWrite(ev: WatchEvent): void {
    if (ev.type !== 'put') return;
    let nodeId: unknown;
    if (ev.collection === taskStatusCollection || ev.collection === leasesCollection || ev.collection === vipLeasesCollection) nodeId = (ev.doc?.doc as { nodeId?: unknown } | undefined)?.nodeId;
    else if (ev.collection === peerViewsCollection) nodeId = peerViewRecordSchema.safeParse(ev.doc?.doc).data?.nodeId;
    if (typeof nodeId === 'string') this.ownWrites.set(nodeId, this.ports.clock.now());
  }

  /**
   * Ms until an exclusive task of `nodeId` placed in `epoch` is surely dead: lease + margin after
   * the later of the last renewal this node's store applied and when it began watching (0 when passed).
   */
  private exclusiveClearInMs(nodeId: string, epoch: number): number {
    const cfg = this.ports.lease ?? leaseDefaults;
    const heard = this.renewals.last(nodeId, epoch);
    // The node's last renewal in the store says how long its agent holds the lease, even when it
    // was applied before this run began (an agent configured with a longer lease than this leader).
    const stored = leaseRecordSchema.safeParse(this.ports.store.get(leasesCollection, nodeId)?.doc);
    const storedLeaseMs = stored.success && stored.data.epoch === epoch ? stored.data.leaseMs : 0;
    return exclusiveClearInMs(cfg, {
      nowMs: this.ports.clock.now(), watchingSinceMs: this.renewals.sinceMs, agentLeaseMs: Math.max(heard?.leaseMs ?? 0, storedLeaseMs),
      ...(heard !== undefined ? { renewedAtMs: heard.atMs } : {}),
    });
  }

  /** Ms until the VIP holder `nodeId` of `epoch` has surely lost its VIPs: its VIP lease + margin after its last renewal or grant this node applied (0 when passed). */
  private vipClearInMs(nodeId: string, epoch: number): number {
    const cfg = this.ports.vipLease ?? { ...vipLeaseDefaults, driftRho: (this.ports.lease ?? leaseDefaults).driftRho };
    const heard = this.vipRenewals.last(nodeId, epoch);
    const stored = vipLeaseRecordSchema.safeParse(this.ports.store.get(vipLeasesCollection, nodeId)?.doc);
    const storedLeaseMs = stored.success && stored.data.epoch === epoch ? stored.data.leaseMs : 0;
    // An IPv6 VIP anywhere in the cluster: the kernel may drop it later (vips.ts kernelLateMs6).
    const ipv6 = (this.ports.vips ?? []).some((v) => isIpv6(v.address)) || [...allDocs(this.ports.store, vipsCollection)].some((d) => isIpv6(d.id));
    return vipClearInMs(cfg, {
      nowMs: this.ports.clock.now(), watchingSinceMs: this.vipRenewals.sinceMs, agentLeaseMs: Math.max(heard?.leaseMs ?? 0, storedLeaseMs), ipv6,
      ...(heard !== undefined ? { renewedAtMs: heard.atMs } : {}),
    });
  }

  /** Whether tasks named `name` are a job's (a job and a service never share a name). */
  private isJob(name: string): boolean {
    return this.ports.store.get(jobsCollection, name) !== undefined && this.ports.store.get(servicesCollection, name) === undefined;
  }

  private serviceOfTask(ev: WatchEvent): string | undefined {
    const fromDoc = (ev.doc?.doc as { service?: unknown } | undefined)?.service;
    if (typeof fromDoc === 'string') return fromDoc;
    const task = this.ports.store.get(tasksCollection, ev.id)?.doc as { service?: unknown } | undefined;
    return typeof task?.service === 'string' ? task.service : undefined;
  }

  private async pass(key: string): Promise<void> {
    this.counts.passes++;
    const started = this.ports.clock.now();
    const report = (outcome: PassReport['outcome'], placements = 0, code?: string): void => {
      this.ports.observe?.({ loop: loopOf(key), seconds: (this.ports.clock.now() - started) / 1000, outcome, placements, ...(code !== undefined ? { code } : {}) });
    };
    try {
      // The voters are raft's, not a record's: for node.role constraints (scheduler/roles.ts).
      const state: ControlState = { ...this.reader.read(), voters: this.ports.voters?.() ?? this.ports.members() };
      const decision = this.decide(key, state);
      const meta: PassMeta = { key, readRevision: state.revision, runningForMs: this.ports.clock.now() - this.startedAt };
      if (await this.write(decision.plan, meta) === 'conflict') {
        this.counts.conflicts++;
        report('conflict');
        this.queue.add(key);
        return;
      }
      report('done', decision.placements ?? 0);
      if (key === 'vips') this.tellVipMoves();
      this.queue.forget(key);
      if (decision.wakeInMs !== null) this.queue.addAfter(key, decision.wakeInMs);
    } catch (err) {
      // The run's term is over: not an error of the loop (the next leader's run takes over).
      if (err instanceof ShoalError && err.code === 'stale_term') return;
      report('error', 0, err instanceof ShoalError ? err.code : 'internal');
      if (err instanceof ShoalError && (err.code === 'timeout' || err.code === 'leader_changed')) {
        // The write may still commit: know its fate before deciding anything again.
        this.counts.unknownOutcomes++;
        await this.ports.settleOwnProposals();
      }
      const ms = this.queue.retry(key);
      this.ports.log.warn(`leader loop ${key}: ${(err as Error).message}; retrying in ${ms} ms`);
    }
  }

  private decide(key: string, state: ControlState): Decision {
    const now = this.ports.logTimeNow();
    if (key === 'place') return placePending(state, this.term, now, readDependencies(this.ports.store));
    if (key === 'nodes') return this.decideNodes(state);
    if (key.startsWith('svc:')) {
      return reconcileService(state, key.slice(4), {
        now, newTaskId: () => this.ports.newTaskId(), exclusiveClearInMs: (n, e) => this.exclusiveClearInMs(n, e),
        // The pull requests are read by releases of level 6 on (image-pulls.ts).
        pullBeforeStopElsewhere: (this.ports.featureLevel?.() ?? 0) >= featureLevelSecretsAtRest,
        readPortRecord: (id) => this.ports.store.get(ingressPortsCollection, id),
      });
    }
    if (key.startsWith('job:')) {
      return reconcileJob(state, key.slice(4), {
        now, newTaskId: () => this.ports.newTaskId(), exclusiveClearInMs: (n, e) => this.exclusiveClearInMs(n, e), clockHold: this.ports.jobClockHold?.() ?? null,
      });
    }
    if (key === 'vips') return this.decideVips(state);
    if (key.startsWith('net:')) {
      const d = decideNetworkAllocation(state, readNetworkState(this.ports.store).networks.get(key.slice(4)), now);
      for (const p of d.problems) this.ports.log.warn(p);
      return d;
    }
    return { plan: { changes: [], compares: [] }, wakeInMs: null };
  }

  /** Who holds each VIP (vip-holders.ts); a holder that cannot keep one is waited for until its lease has surely run out. */
  private decideVips(state: ControlState): Decision {
    // Below the level a member may not read a VIP's record nor hold one: nothing is written until
    // the level is raised (the supervisor then calls featureLevelRaised).
    if (this.ports.vips !== undefined && this.ports.vips.length > 0 && (this.ports.featureLevel?.() ?? featureLevelVips) < featureLevelVips) {
      if (this.vipWaitingLogged !== 'level') this.ports.log.warn(`vip: the cluster runs at feature level ${this.ports.featureLevel?.() ?? 0}; virtual IPs need ${featureLevelVips} (every member upgraded): none is held until then`);
      this.vipWaitingLogged = 'level';
      return { plan: { changes: [], compares: [] }, wakeInMs: null };
    }
    const d = decideVipHolders({
      specs: this.ports.vips, records: this.readVersioned(vipsCollection, vipRecordSchema), releases: this.readVersioned(vipReleasesCollection, vipReleaseSchema),
      nodes: state.nodes, members: this.ports.members(), self: this.ports.self, now: this.ports.logTimeNow(),
      clearInMs: (n, e) => this.vipClearInMs(n, e), leaseRev: (n) => this.ports.store.get(vipLeasesCollection, n)?.rev ?? 0,
    });
    // Logged once per change of what waits, not at each pass (the ms left changes every time).
    const waiting = d.waiting.join('; ');
    const key = waiting.replace(/in \d+ ms/g, 'in N ms');
    if (key !== this.vipWaitingLogged && waiting !== '') this.ports.log.warn(`vip: ${waiting}`);
    this.vipWaitingLogged = key;
    this.pendingVipMoves = d.moves;
    return { plan: { changes: d.changes, compares: d.compares }, wakeInMs: d.wakeInMs };
  }

  private readVersioned<T extends VipRecord | VipRelease>(collection: string, schema: { safeParse(x: unknown): { success: boolean; data?: unknown } }): Map<string, Versioned<T>> {
    const out = new Map<string, Versioned<T>>();
    for (const doc of allDocs(this.ports.store, collection)) {
      const r = schema.safeParse(doc.doc);
      if (r.success) out.set(doc.id, { value: r.data as T, rev: doc.rev });
      else this.ports.log.warn(`${collection}/${doc.id} (rev ${doc.rev}) is not a valid record and is ignored`);
    }
    return out;
  }

  private decideNodes(state: ControlState): Decision {
    const members = this.ports.members();
    const d = assessNodes(state, {
      self: this.ports.self, members, voters: this.ports.voters?.() ?? members, contact: (id) => this.contactOf(id),
      views: readPeerViews(allDocs(this.ports.store, peerViewsCollection)), lastTransferAgoMs: this.ports.lastTransferAgoMs?.(),
    }, this.ports.health);
    this.report(d);
    // Addresses only once health has nothing to write: both are compare-and-sets on node records,
    // and the health write's event brings this pass back.
    if (d.changes.length === 0) {
      const mesh = allocateMeshAddresses(state, this.ports.meshCidr ?? meshCidrDefault);
      if (mesh.unplaced.length > 0) this.ports.log.warn(`mesh: no free address in ${this.ports.meshCidr ?? meshCidrDefault} for ${mesh.unplaced.length} nodes (${mesh.unplaced.join(', ')}); widen mesh.cidr`);
      d.changes.push(...mesh.changes);
    }
    const anyUnready = [...state.nodes.values()].some((x) => members.has(x.value.id) && x.value.state !== 'ready');
    const wake = anyUnready ? Math.min(recheckNodesMs, d.wakeInMs ?? recheckNodesMs) : d.wakeInMs;
    return { plan: { changes: d.changes, compares: [] }, wakeInMs: wake };
  }

  /**
   * What this leader knows of `id`: what its node hears (or, without a transport that tells,
   * its Raft silence counted from the start of these loops at the earliest: a follower hears no
   * Raft message from the other followers), and the node's own writes this run applied.
   */
  private contactOf(id: string): NodeContact {
    const now = this.ports.clock.now();
    const c = this.ports.peerContact?.(id);
    const wrote = this.ownWrites.get(id);
    const fromWrite = wrote === undefined ? undefined : now - wrote;
    const heard = c !== undefined ? c.heardAgoMs : this.ports.silentForMs(id);
    const heardAgoMs = heard === undefined ? fromWrite : Math.min(heard, fromWrite ?? heard);
    // Mute: what the node itself sent that reached this leader, a Raft message or a write of its
    // own, counted from these loops' start at the most (as a follower this node got no Raft
    // messages from the other followers). Only with a transport that tells the rest apart.
    // And from when it was last heard again after a sign that it may have restarted, at the most:
    // a restarted shoal is heard (its hello, its pings) a moment before its first Raft message,
    // which is no sign of muteness. The signs: a refused dial, a goodbye, the leader's connection
    // to it closed, or a silence of the down timeout. A gap between two pongs is none: a mute
    // node is heard only by the pong on the leader's connection, once a second, and on a busy
    // machine (or with a suspect timeout near the ping interval) such gaps pass the suspect
    // timeout again and again; counting from each would keep a mute node from ever being down.
    const raft = this.ports.silentForMs(id);
    const spoke = Math.min(raft ?? Number.POSITIVE_INFINITY, fromWrite ?? Number.POSITIVE_INFINITY);
    const mayHaveRestarted = heardAgoMs === undefined || heardAgoMs >= this.ports.health.downAfterMs
      || (c !== undefined && (c.refused || c.goodbye || c.link === 'closed' || c.link === 'refused'));
    const heardNow = heardAgoMs !== undefined && heardAgoMs < this.ports.health.suspectAfterMs;
    if (mayHaveRestarted && !heardNow) this.heardSince.delete(id);
    else if (heardNow && !this.heardSince.has(id)) this.heardSince.set(id, now - heardAgoMs);
    const since = this.heardSince.get(id);
    const heardForMs = since === undefined ? 0 : now - since;
    return {
      heardAgoMs, watchingForMs: c?.watchingForMs ?? now - this.startedAt, link: c?.link ?? 'unknown', goodbye: c?.goodbye ?? false,
      refused: c?.refused ?? false, ...(c !== undefined ? { muteMs: Math.min(spoke, now - this.startedAt, heardForMs) } : {}),
    };
  }

  /** Logs each change of a node's state and acts on a hand-over. */
  private report(d: HealthDecision): void {
    for (const v of d.verdicts) {
      const line = `node health: ${v.nodeId} ${v.from} -> ${v.judgement.transition}: ${v.judgement.reason}`;
      if (v.judgement.state === 'down') this.ports.log.warn(line);
      else (this.ports.log.info ?? this.ports.log.debug)(line);
    }
    if (d.transferTo === null || this.ports.transferLeadership === undefined || this.closed) return;
    this.ports.log.warn(`node health: a node is silent to this leader alone while ${d.transferTo} hears every member; handing leadership to ${d.transferTo}`);
    this.ports.transferLeadership(d.transferTo);
  }

  private tellVipMoves(): void {
    const moves = this.pendingVipMoves;
    this.pendingVipMoves = [];
    for (const m of moves) {
      this.ports.log.info?.(`vip: ${m.address} ${m.from ?? '(nobody)'} -> ${m.to ?? '(nobody)'} (${m.reason})`);
      this.ports.onVipMoved?.(m);
    }
  }

  /** Proposes the plan, fenced by the run's term; 'conflict' when what it read has changed. */
  private async write(plan: Plan, meta: PassMeta): Promise<Outcome> {
    for (const planned of toTransactions(plan)) {
      const { cmd: txn, featureLevel } = compatCommand(planned);
      const data = encodeCommand({ cmd: txn, ts: this.ports.logTimeNow(), fence: { term: this.term }, principal: 'shoal:leader' });
      this.counts.proposed++;
      const { result } = await this.ports.propose(data, this.term, meta, featureLevel);
      const r = result as CommandResult;
      if (!r.ok) {
        if (r.error.code === 'stale_term') throw new ShoalError('stale_term', r.error.message);
        if (r.error.code === 'revision_mismatch' || r.error.code === 'already_exists' || r.error.code === 'not_found') return 'conflict';
        throw new ShoalError('internal', `a leader loop's write was refused: ${r.error.code}: ${r.error.message}`);
      }
      if (r.kind === 'txn' && !r.succeeded) return 'conflict';
    }
    return 'done';
  }
}
