// Pull before stop across nodes (issue 40; the contract in src/resources/image-pulls.ts): the
// orchestrator asks here before it stops a task for a stop-first replacement. When the
// replacement would be placed on another node than the task's (the scheduler, asked now with the
// task's resources freed, says where), the stop waits until that node has pulled the new image:
// the slot is down for the stop and the start, not the download. On the task's own node the
// agent pulls before it stops (agent.ts, prePull) and nothing waits here.
//
// Bounded: the stop goes on once the node answers (present, or failed: the replacement's own pull
// then reports the registry's answer and counts for apply's "stop waiting" rule), once it is no
// longer ready and active or its epoch moved, or after imagePullWaitMs since the request.

import { deleteChange, putChange, type Change } from '../resources/changes.ts';
import { imagePullsCollection, imagePullWaitMs, isPullSettled, type ImagePullRequest } from '../resources/image-pulls.ts';
import { specForTask, type ServiceRecord, type TaskRecord } from '../resources/records.ts';
import { registryHostFor } from '../resources/registry-logins.ts';
import type { ServiceSpec } from '../resources/spec/service-spec.ts';
import type { ControlState, Versioned } from '../resources/state.ts';
import { ownerOf } from '../resources/task-owner.ts';
import { isTerminal, viewOf, type TaskView } from '../resources/task-view.ts';
import { schedule } from './scheduler/schedule.ts';
import type { TaskWithSpec } from './scheduler/types.ts';

/** One service pass's questions "may this task stop now?", and the requests they write. */
export class ImagePullGate {
  /** Tasks whose stop waits this pass: their requests stay. */
  readonly held = new Set<string>();
  readonly changes: Change[] = [];
  /** When a wait ends by itself (imagePullWaitMs), or null. */
  wakeAt: number | null = null;

  constructor(private readonly state: ControlState, private readonly svc: ServiceRecord, private readonly now: number) {}

  /** Whether the stop of `task`, replaced by a task of spec version `target`, must wait for a pull elsewhere. */
  mustWait(task: TaskRecord, target: number): boolean {
    const spec = specOfVersion(this.svc, target);
    if (spec === null || task.nodeId === null) return false;
    const cur = this.state.imagePulls?.get(task.id);
    if (cur !== undefined && cur.value.image === spec.image) return this.waitFor(cur.value);
    const nodeId = replacementNode(this.state, this.svc, task, target);
    // Nowhere, or where the task runs: the agent there pulls before its stop.
    if (nodeId === null || nodeId === task.nodeId) return false;
    const node = this.state.nodes.get(nodeId)?.value;
    if (node === undefined) return false;
    const request: ImagePullRequest = {
      taskId: task.id, service: this.svc.name, nodeId, nodeEpoch: node.epoch, image: spec.image, pullsWith: registryHostFor(spec),
      requestedAt: this.now, state: 'requested', message: null, updatedAt: this.now,
    };
    this.changes.push(putChange(imagePullsCollection, task.id, request, cur?.rev ?? null));
    this.hold(task.id, this.now + imagePullWaitMs);
    return true;
  }

  private waitFor(r: ImagePullRequest): boolean {
    if (isPullSettled(r)) return false;
    const node = this.state.nodes.get(r.nodeId)?.value;
    // A node that can no longer take the replacement: nothing to wait for.
    if (node === undefined || node.state !== 'ready' || node.availability !== 'active' || node.epoch !== r.nodeEpoch) return false;
    const until = r.requestedAt + imagePullWaitMs;
    if (this.now >= until) return false;
    this.hold(r.taskId, until);
    return true;
  }

  private hold(taskId: string, until: number): void {
    this.held.add(taskId);
    if (this.wakeAt === null || until < this.wakeAt) this.wakeAt = until;
  }
}

function specOfVersion(svc: ServiceRecord, version: number): ServiceSpec | null {
  if (version === svc.specVersion) return svc.spec;
  return version === svc.previousSpecVersion ? svc.previousSpec : null;
}

/**
 * Where the scheduler would place a replacement of `old` running spec version `target` now, with
 * `old`'s resources freed; null when nowhere. The placement pass decides again once the new task
 * exists (from the same state, as a rule the same node).
 */
export function replacementNode(state: ControlState, svc: ServiceRecord, old: TaskRecord, target: number): string | null {
  const spec = specOfVersion(svc, target);
  if (spec === null) return null;
  const placed: TaskWithSpec[] = [];
  for (const t of state.tasks.values()) {
    if (t.value.id === old.id || t.value.desired !== 'running' || t.value.nodeId === null || isTerminal(viewOf(state, t))) continue;
    const owner = ownerOf(state, t.value);
    const s = owner === undefined ? null : specForTask(owner, t.value) ?? owner.spec;
    if (s !== null) placed.push({ task: t.value, spec: s, ...platformsOf(owner, s) });
  }
  const probe: TaskRecord = { ...old, id: `${old.id}~replacement`, specVersion: target, nodeId: null, observed: 'pending', desired: 'running' };
  const nodes = [...state.nodes.values()].map((n) => n.value);
  const r = schedule({ nodes, tasks: placed, pending: [{ task: probe, spec, ...platformsOf(svc, spec) }], ...(state.voters !== undefined ? { voters: state.voters } : {}) });
  return r.placements[0]?.nodeId ?? null;
}

function platformsOf(owner: ServiceRecord | undefined, spec: ServiceSpec): Pick<TaskWithSpec, 'platforms'> {
  const platforms = owner?.imagePlatforms?.find((p) => p.image === spec.image)?.platforms;
  return platforms !== undefined ? { platforms } : {};
}

/**
 * The requests of a service's tasks that are done with (deleted), keeping those whose stop waits
 * (`held`, written or kept this pass) and those of a task still stopping (its node's agent reads
 * that the pull is elsewhere and does not pull the image itself).
 */
export function settledRequests(state: ControlState, service: string, tasks: readonly { rec: TaskRecord; view: TaskView; deleted: boolean }[], held: ReadonlySet<string>): Change[] {
  const byId = new Map(tasks.map((t) => [t.rec.id, t]));
  const out: Change[] = [];
  for (const [id, r] of state.imagePulls ?? new Map<string, Versioned<ImagePullRequest>>()) {
    if (r.value.service !== service || held.has(id)) continue;
    const t = byId.get(id);
    if (t !== undefined && !t.deleted && t.rec.desired === 'shutdown' && !isTerminal(t.view)) continue;
    out.push(deleteChange(imagePullsCollection, id, r.rev));
  }
  return out;
}
