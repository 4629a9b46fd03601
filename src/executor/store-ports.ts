// The node agent's ports (src/executor/agent.ts) on a real node: its view of this node's applied
// store, and its writes through the log.
//
// Reports go to the agent's own documents (shoal.task-status/<task id>), in one transaction that
// compares this node's epoch in its record and that every reported task still exists: a report
// of an epoch the leader has since raised is refused whole (stale_epoch) and changes nothing,
// and no report outlives its task. The node's own record is registered here too (name,
// addresses, capacity, release) and its runtime status kept current, each as a compare-and-set
// on the record's revision, since the operator and the leader write other fields of it.

import os from 'node:os';
import type { DocumentStore } from '../../fsm/index.ts';
import { encodeCommand, type Compare, type Op } from '../../fsm/index.ts';
import type { CommandResult, JsonObject } from '../../fsm/types.ts';
import { ShoalError } from '../errors.ts';
import type { Proposer } from '../ports/proposer.ts';
import type { AgentAssignment, AgentView, AgentWriter, ImagePullUpdate, NodeAssignments, NodeRuntimeReport } from './agent.ts';
import { imagePullRequestSchema, imagePullsCollection, type ImagePullRequest } from '../resources/image-pulls.ts';
import { compatCommand, forOlderReaders } from '../resources/record-compat.ts';
import { isReservedCollection, leasesCollection, nodesCollection, servicesCollection, taskStatusCollection, tasksCollection } from '../resources/collections.ts';
import type { LeaseWriter } from './lease-keeper.ts';
import type { LeaseRecord } from '../resources/lease.ts';
import type { NodeMesh, NodeRecord, Platform, TaskStatus } from '../resources/records.ts';
import { featureLevelIngress, featureLevelSecretsAtRest } from '../base/feature-level.ts';
import { ControlStateReader, tasksOnNode, type Versioned } from '../resources/state.ts';
import { jobsCollection } from '../resources/jobs.ts';
import { volumesCollection } from '../resources/volumes.ts';
import { ownerOf } from '../resources/task-owner.ts';

/** Reports in one transaction at most: each has a compare that its task exists. */
export const reportsPerTxnMax = 100;

export class StoreAgentView implements AgentView {
  private readonly reader: ControlStateReader;

  constructor(private readonly store: DocumentStore) {
    this.reader = new ControlStateReader(store);
  }

  assignments(nodeId: string): NodeAssignments {
    const state = this.reader.read();
    const tasks: AgentAssignment[] = [];
    const pulls = state.imagePulls ?? new Map<string, Versioned<ImagePullRequest>>();
    for (const t of tasksOnNode(state, nodeId)) {
      const elsewhere = pulls.get(t.value.id)?.value.nodeId;
      tasks.push({
        task: t.value, service: ownerOf(state, t.value) ?? null, status: state.statuses.get(t.value.id)?.value ?? null,
        ...(elsewhere !== undefined && elsewhere !== nodeId ? { pullElsewhere: true } : {}),
      });
    }
    const imagePulls = [...pulls.values()].map((p) => p.value).filter((p) => p.nodeId === nodeId);
    return { node: state.nodes.get(nodeId)?.value ?? null, tasks, ...(imagePulls.length > 0 ? { imagePulls } : {}) };
  }

  subscribe(onChange: () => void): () => void {
    const offEvents = this.store.subscribe((ev) => {
      if (ev.collection === tasksCollection || ev.collection === nodesCollection || ev.collection === servicesCollection || ev.collection === jobsCollection || ev.collection === imagePullsCollection) onChange();
      // A replicated volume's new era lets a waiting task start (issue 41, volumes/task-volumes.ts).
      else if (ev.collection === volumesCollection) onChange();
    });
    const offRestore = this.store.subscribeRestore(() => onChange());
    return () => {
      offEvents();
      offRestore();
    };
  }
}

export interface NodeIdentity {
  id: string;
  name: string;
  apiAddress: string;
  peerAddress: string;
  softwareVersion: string;
  capacity: { cpuMillis: number; memoryBytes: number };
  labels: Record<string, string>;
  /** The machine's platform (machinePlatform()), written into the node's record from feature level 6. */
  platform?: Platform;
  /** Whether this node runs the routing mesh (NodeRecord.ingress), written into the node's record from feature level 6. */
  ingress?: boolean;
}

const goArchitectures: Readonly<Record<string, Platform>> = {
  x64: { os: 'linux', architecture: 'amd64' },
  arm64: { os: 'linux', architecture: 'arm64', variant: 'v8' },
  arm: { os: 'linux', architecture: 'arm', variant: 'v7' },
  ia32: { os: 'linux', architecture: '386' },
  ppc64: { os: 'linux', architecture: 'ppc64le' },
  s390x: { os: 'linux', architecture: 's390x' },
  riscv64: { os: 'linux', architecture: 'riscv64' },
};

/** This machine's platform as image indexes name it (Node's `x64` is `amd64`); undefined for one they do not name. */
export function machinePlatform(arch: string = process.arch, platform: string = process.platform): Platform | undefined {
  const p = goArchitectures[arch];
  return p === undefined || platform !== 'linux' ? undefined : { ...p };
}

/** The machine's capacity: its cores and memory, unless the config says otherwise. */
export function machineCapacity(override: { cpuMillis?: number; memoryBytes?: number } = {}): { cpuMillis: number; memoryBytes: number } {
  return { cpuMillis: override.cpuMillis ?? os.availableParallelism() * 1000, memoryBytes: override.memoryBytes ?? os.totalmem() };
}

export class StoreAgentWriter implements AgentWriter, LeaseWriter {
  /** `featureLevel`: the cluster's committed level; the platform is written only from level 6, which older members read. */
  constructor(private readonly node: Proposer, private readonly store: DocumentStore, private readonly me: NodeIdentity, private readonly featureLevel: () => number = () => 0) {}

  async reportTaskStatus(statuses: TaskStatus[]): Promise<void> {
    for (let i = 0; i < statuses.length; i += reportsPerTxnMax) await this.reportBatch(statuses.slice(i, i + reportsPerTxnMax));
  }

  private async reportBatch(statuses: TaskStatus[]): Promise<void> {
    const epochs = new Set(statuses.map((s) => s.nodeEpoch));
    if (epochs.size !== 1) throw new ShoalError('internal', 'one report batch must be of one epoch');
    const epoch = statuses[0]?.nodeEpoch ?? 0;
    const compare: Compare[] = [{ collection: nodesCollection, id: this.me.id, target: 'value', path: 'epoch', cmp: '=', value: epoch }];
    for (const s of statuses) compare.push({ collection: tasksCollection, id: s.taskId, target: 'exists', cmp: '=', value: true });
    const success: Op[] = statuses.map((s) => ({ op: 'put', collection: taskStatusCollection, id: s.taskId, doc: s as unknown as JsonObject }));
    const r = await this.propose({ op: 'txn', compare, success, failure: [] });
    if (r.ok && r.kind === 'txn' && !r.succeeded) {
      const node = this.store.get(nodesCollection, this.me.id)?.doc as { epoch?: unknown } | undefined;
      if (node?.epoch !== epoch) throw new ShoalError('stale_epoch', `this node's epoch is ${String(node?.epoch)}, the reports are of epoch ${epoch}`);
      // A task was deleted meanwhile: report the others.
      const alive = statuses.filter((s) => this.store.get(tasksCollection, s.taskId) !== undefined);
      if (alive.length > 0 && alive.length < statuses.length) await this.reportBatch(alive);
    }
  }

  /**
   * The state of a pull the leader asked of this node (image-pulls.ts): one transaction comparing
   * the node's epoch and the request's revision, so it changes only the request it was about (the
   * same image, this node, this epoch). A request gone or replaced meanwhile is left alone.
   */
  async reportImagePull(u: ImagePullUpdate): Promise<void> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const doc = this.store.get(imagePullsCollection, u.taskId);
      const cur = doc === undefined ? undefined : imagePullRequestSchema.safeParse(doc.doc).data;
      if (doc === undefined || cur === undefined || cur.nodeId !== this.me.id || cur.image !== u.image || cur.nodeEpoch !== u.nodeEpoch) return;
      const next: ImagePullRequest = { ...cur, state: u.state, message: u.message };
      const r = await this.propose({
        op: 'txn',
        compare: [
          { collection: nodesCollection, id: this.me.id, target: 'value', path: 'epoch', cmp: '=', value: u.nodeEpoch },
          { collection: imagePullsCollection, id: u.taskId, target: 'rev', cmp: '=', value: doc.rev },
        ],
        success: [{ op: 'put', collection: imagePullsCollection, id: u.taskId, doc: next as unknown as JsonObject }], failure: [],
      });
      if (!r.ok) throw new ShoalError('internal', `the pull's report was refused: ${r.error.code}: ${r.error.message}`);
      if (r.kind !== 'txn' || r.succeeded) return;
    }
    throw new ShoalError('timeout', `could not report the pull of ${u.image}: its request kept changing`);
  }

  /**
   * Renews this node's exclusive-task lease: one transaction comparing the node's epoch, putting
   * `shoal.leases/<node id>` with the next sequence number. Resolves only once it committed and
   * applied; rejects with stale_epoch when the epoch was raised (the lease is not renewed).
   */
  async renewLease(renewal: { epoch: number; leaseMs: number }): Promise<void> {
    const cur = this.store.get(leasesCollection, this.me.id)?.doc as { seq?: unknown } | undefined;
    const seq = typeof cur?.seq === 'number' ? cur.seq + 1 : 0;
    const doc: LeaseRecord = { nodeId: this.me.id, epoch: renewal.epoch, seq, leaseMs: renewal.leaseMs };
    const r = await this.propose({
      op: 'txn', compare: [{ collection: nodesCollection, id: this.me.id, target: 'value', path: 'epoch', cmp: '=', value: renewal.epoch }],
      success: [{ op: 'put', collection: leasesCollection, id: this.me.id, doc: doc as unknown as JsonObject }], failure: [],
    });
    if (!r.ok) throw new ShoalError('internal', `the lease renewal was refused: ${r.error.code}: ${r.error.message}`);
    if (r.kind === 'txn' && !r.succeeded) throw new ShoalError('stale_epoch', `this node's epoch is no longer ${renewal.epoch}`);
  }

  /** Registers or refreshes this node's record with the runtime's status; a CAS, retried on conflict. */
  async reportNodeRuntime(report: NodeRuntimeReport): Promise<void> {
    await this.updateOwnRecord((cur) => ({ ...cur, runtime: { status: report.status, error: report.error } }));
  }

  /** Changes this node's mesh fields (net/mesh-agent.ts); a CAS, retried on conflict. */
  async updateMesh(change: (cur: NodeMesh | null) => NodeMesh | null): Promise<void> {
    await this.updateOwnRecord((cur) => ({ ...cur, mesh: change(cur.mesh ?? null) }));
  }

  /** Makes sure this node's record exists and names its current addresses, capacity and release. */
  async register(): Promise<void> {
    await this.updateOwnRecord((cur) => cur);
  }

  private async updateOwnRecord(change: (cur: NodeRecord) => NodeRecord): Promise<void> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const doc = this.store.get(nodesCollection, this.me.id);
      const cur = (doc?.doc as unknown as NodeRecord | undefined) ?? this.fresh();
      const platform = this.me.platform !== undefined && this.featureLevel() >= featureLevelSecretsAtRest ? { platform: this.me.platform } : {};
      const ingress = this.me.ingress !== undefined && this.featureLevel() >= featureLevelIngress ? { ingress: this.me.ingress } : {};
      const next = change({
        ...cur, name: this.me.name, addresses: { api: this.me.apiAddress, peer: this.me.peerAddress },
        capacity: this.me.capacity, softwareVersion: this.me.softwareVersion, ...platform, ...ingress,
      });
      const written = forOlderReaders(nodesCollection, next as unknown as JsonObject);
      if (doc !== undefined && JSON.stringify(written) === JSON.stringify(doc.doc)) return;
      const r = await this.propose({
        op: 'put', collection: nodesCollection, id: this.me.id, doc: written,
        expect: doc === undefined ? { absent: true } : { rev: doc.rev },
      });
      if (r.ok) return;
      if (r.error.code !== 'revision_mismatch' && r.error.code !== 'already_exists') throw new ShoalError(r.error.code === 'invalid_command' ? 'internal' : 'bad_request', r.error.message);
    }
    throw new ShoalError('timeout', 'could not update this node\'s record: it kept changing');
  }

  private fresh(): NodeRecord {
    return {
      id: this.me.id, name: this.me.name, addresses: { api: this.me.apiAddress, peer: this.me.peerAddress }, capacity: this.me.capacity,
      labels: this.me.labels, availability: 'active', state: 'ready', epoch: 0, runtime: { status: 'unknown', error: null }, softwareVersion: this.me.softwareVersion,
      mesh: null,
    };
  }

  private async propose(cmd: Parameters<typeof encodeCommand>[0]['cmd']): Promise<CommandResult> {
    const compat = compatCommand(cmd);
    const data = encodeCommand({ cmd: compat.cmd, ts: Date.now(), principal: `shoal:agent:${this.me.id}` });
    const { result } = await this.node.propose(data, { featureLevel: compat.featureLevel });
    return result as CommandResult;
  }
}

export { isReservedCollection };
