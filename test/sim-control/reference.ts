// The reference store: a DocumentStore that applies every entry the moment it is appended, so it
// holds exactly what the cluster has committed, with no node's lag. Each entry's result is the
// committed result. The checkers that judge what took effect (fencing, placement) are fed here,
// in log order, with the world's own records beside each entry.

import { DocumentStore } from '../../fsm/index.ts';
import type { WatchEvent } from '../../fsm/types.ts';
import { auditCollection } from '../../fsm/audit.ts';
import { controlFeatureLevel, leasesCollection, nodesCollection, servicesCollection, taskStatusCollection, tasksCollection } from '../../src/resources/collections.ts';
import type { LeaseRecord } from '../../src/resources/lease.ts';
import type { Availability, NodeRecord, ServiceRecord, TaskRecord, TaskStatus } from '../../src/resources/records.ts';
import { BudgetChecker } from './checkers/budget.ts';
import { CasChecker, type WrittenDoc } from './checkers/cas.ts';
import { readCommitted, type CommittedView } from './checkers/committed-view.ts';
import type { PlacedRecord } from './checkers/containers.ts';
import { FencingChecker } from './checkers/fencing.ts';
import { HealthChecker, type HealthLimits } from './checkers/health.ts';
import { heldOn, PlacementChecker, type Amounts, type PlacementFact, type PlacementLimits } from './checkers/placement.ts';
import { describeOrigin } from './consensus.ts';
import { tookEffect, type LogEntry } from './log-entry.ts';
import type { SimStats } from './stats.ts';

/** What the world knows that the placement checker needs. */
export interface GroundTruth {
  availability(nodeId: string): Availability;
  capacity(nodeId: string): Amounts;
}

export class Reference {
  readonly store = new DocumentStore();
  /** Where each task was placed, as committed: node, epoch and term. */
  readonly placed = new Map<string, PlacedRecord>();
  private readonly fencing = new FencingChecker();
  private readonly cas = new CasChecker();
  readonly budget = new BudgetChecker();
  private readonly placement: PlacementChecker;
  private readonly health: HealthChecker;
  private readonly taskNode = new Map<string, string | null>();
  private readonly nodeEpoch = new Map<string, number>();
  private readonly updateState = new Map<string, string>();
  private events: WatchEvent[] = [];

  constructor(limits: PlacementLimits & { health: HealthLimits }, private readonly truth: GroundTruth, private readonly stats: SimStats) {
    this.placement = new PlacementChecker(limits);
    this.health = new HealthChecker(limits.health);
    this.store.subscribe((ev) => this.events.push(ev));
  }

  apply(e: LogEntry): void {
    this.stats.entries++;
    const beforeStop = this.budget.before(this.store, e.data);
    if (e.data !== null) e.result = this.store.apply({ index: e.index, term: e.term, data: e.data, logTimeMs: e.logTimeMs, featureLevel: controlFeatureLevel });
    const o = e.origin;
    if (beforeStop !== null && tookEffect(e.result)) {
      this.budget.after(beforeStop, this.store, `entry ${e.index} (${describeOrigin(o)})`);
      this.stats.budgetedStops = this.budget.counts.voluntary;
      this.stats.budgetAtLimit = this.budget.counts.atLimit;
    }
    this.fencing.observe({ index: e.index, term: e.term, decider: o.kind === 'loop' ? { node: o.node, term: o.term, key: o.key } : null, tookEffect: tookEffect(e.result) });
    this.count(e);
    const events = this.events.filter((ev) => ev.collection !== auditCollection);
    this.events = [];
    if (tookEffect(e.result)) this.checkCas(e, events);
    let view: CommittedView | null = null;
    for (const ev of events) {
      if (ev.collection === tasksCollection) {
        if (ev.type === 'delete') {
          this.taskNode.delete(ev.id);
          continue;
        }
        const t = ev.doc?.doc as unknown as TaskRecord;
        const before = this.taskNode.get(ev.id) ?? null;
        this.taskNode.set(ev.id, t.nodeId);
        if (t.nodeId === null || before !== null) continue;
        view ??= readCommitted(this.store);
        this.onPlacement(e, t, view);
      } else if (ev.collection === nodesCollection && ev.type === 'put') {
        const n = ev.doc?.doc as unknown as NodeRecord;
        this.cas.observeNode(e.index, n.id, n.epoch);
        if (n.epoch > (this.nodeEpoch.get(n.id) ?? 0)) {
          this.stats.nodesDeclaredDown++;
          if (o.kind === 'loop' && o.key === 'nodes') this.health.observe(e.index, n.id, `${o.node} in term ${o.term}`, o.health?.[n.id]);
        }
        this.nodeEpoch.set(n.id, n.epoch);
      } else if (ev.collection === servicesCollection && ev.type === 'put') {
        this.onService(ev.doc?.doc as unknown as ServiceRecord);
      }
    }
  }

  /** The CAS checker: what a loop or an agent decided on still held when its entry applied. */
  private checkCas(e: LogEntry, events: readonly WatchEvent[]): void {
    const o = e.origin;
    const written = (ev: WatchEvent): WrittenDoc => ({ collection: ev.collection, id: ev.id, prevRev: ev.prevRev ?? null });
    if (o.kind === 'loop') {
      this.cas.observeDecision({ index: e.index, decider: `loop ${o.node}/t${o.term} ${o.key}`, readRevision: o.readRevision, writes: events.map(written) });
      return;
    }
    if (o.kind !== 'agent') return;
    const own = events.filter((ev) => ev.collection === nodesCollection);
    if (own.length > 0) this.cas.observeDecision({ index: e.index, decider: `agent ${o.node}`, readRevision: o.readRevision, writes: own.map(written) });
    const epochOf = (id: string): number | null => (this.store.get(nodesCollection, id)?.doc as unknown as NodeRecord | undefined)?.epoch ?? null;
    for (const ev of events) {
      if (ev.type !== 'put') continue;
      if (ev.collection === taskStatusCollection) {
        const s = ev.doc?.doc as unknown as TaskStatus;
        const task = { id: s.taskId, exists: this.store.get(tasksCollection, s.taskId) !== undefined };
        this.cas.observeReport({ index: e.index, node: s.nodeId, what: `report on task ${s.taskId}`, epoch: s.nodeEpoch, committedEpoch: epochOf(s.nodeId), task });
      } else if (ev.collection === leasesCollection) {
        const l = ev.doc?.doc as unknown as LeaseRecord;
        this.cas.observeReport({ index: e.index, node: l.nodeId, what: 'lease renewal', epoch: l.epoch, committedEpoch: epochOf(l.nodeId) });
      }
    }
  }

  private onPlacement(e: LogEntry, t: TaskRecord, view: CommittedView): void {
    const nodeId = t.nodeId as string;
    this.stats.placements++;
    this.placed.set(t.id, { nodeId, epoch: t.nodeEpoch ?? -1, term: t.assignedTerm ?? -1 });
    const o = e.origin;
    this.placement.observe({
      index: e.index, taskId: t.id, nodeId,
      decision: o.kind === 'loop' ? { node: o.node, term: o.term, decidedAtMs: o.decidedAtMs, loopsRunningMs: o.loopsRunningMs, silenceMs: o.silenceMs } : null,
      availability: this.truth.availability(nodeId), capacity: this.truth.capacity(nodeId), held: heldOn(view, nodeId),
      taskEpoch: t.nodeEpoch, committed: committedNode(view, nodeId),
    });
  }

  private onService(svc: ServiceRecord): void {
    const before = this.updateState.get(svc.name);
    const now = svc.updateStatus.state;
    this.updateState.set(svc.name, now);
    if (before === now) return;
    if (now === 'paused' || now === 'rollback-paused') this.stats.updatesPaused++;
    if (now === 'rolled-back') this.stats.updatesRolledBack++;
    if (now === 'completed') this.stats.updatesCompleted++;
  }

  private count(e: LogEntry): void {
    const r = e.result;
    if (r === null) return;
    if (e.origin.kind === 'loop') {
      if (!r.ok && r.error.code === 'stale_term') this.stats.staleTermRefused++;
      if (r.ok && r.kind === 'txn' && !r.succeeded) this.stats.loopConflicts++;
      if (!r.ok && (r.error.code === 'revision_mismatch' || r.error.code === 'already_exists' || r.error.code === 'not_found')) this.stats.loopWritesRefused++;
    } else if (e.origin.kind === 'agent' && r.ok && r.kind === 'txn' && !r.succeeded) {
      this.stats.reportsRefused++;
    }
  }
}

function committedNode(view: CommittedView, id: string): PlacementFact['committed'] {
  const n = view.nodes.get(id);
  return n === undefined ? null : { state: n.state, availability: n.availability, epoch: n.epoch };
}
