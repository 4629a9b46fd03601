// /v1/nodes: the nodes of the control plane (registered by their agents), each with what runs on
// it, named by id or name. The operator sets two fields: availability (active, pause: no new
// tasks, drain: its tasks are moved off by the orchestrator) and labels. Those writes are a
// compare-and-set on the node record's revision, since the node's agent (runtime status) and
// the leader (state, epoch) write other fields of the same record: a write that meets one of
// theirs reads the record again and reapplies only its own field.
//
// A drain moves the node's tasks, each move taking a slot of its service down: the answer says,
// per service with a task serving there, what its disruption budget allows now and what waits
// (the node is set draining either way; the leader makes the moves as the budgets allow). With
// `force`, the moves may go past the budgets, and each service whose budget they exceed records
// it (src/control/disruption-budget.ts). POST .../disruption asks the same of a drill (which takes
// the node away for a while, every task on it with it): refused with disruption_budget_exceeded
// when a budget does not allow it, unless forced.

import type { FastifyPluginAsync } from 'fastify';
import { deleteChange, putChange } from '../resources/changes.ts';
import { nodesCollection } from '../resources/collections.ts';
import type { NodeRecord } from '../resources/records.ts';
import { jsonEqual } from '../resources/spec/spec-change.ts';
import type { ControlState } from '../resources/state.ts';
import { ShoalError } from '../errors.ts';
import type { ApiContext } from './context.ts';
import { availabilityBody, disruptionBody, labelsBody, nodeParams, readOnlyQuery } from './control-schemas.ts';
import { findNode, nodeViews, readControl, readLocal, taskItem, type NodeView } from './control-views.ts';
import { decideAndWrite } from './control-write.ts';
import { forcedText, nodeLossVerdicts, withForced, type NodeLossVerdict } from '../control/disruption-budget.ts';
import { servicesCollection } from '../resources/collections.ts';
import { principalOf } from './write-path.ts';
import { noQuery } from './request-schemas.ts';
import { validate } from './validate.ts';
import { compareNatural, compareText } from '../base/order.ts';

function viewOf(state: ControlState, id: string): NodeView | null {
  return nodeViews(state).find((n) => n.id === id) ?? null;
}

/** Writes `change(record)` over the node `ref` names, unless it changes nothing. */
async function updateNode(ctx: ApiContext, req: Parameters<typeof decideAndWrite>[1], ref: string, what: string, change: (n: NodeRecord) => NodeRecord): Promise<{ rev: number | null; node: NodeView | null }> {
  const w = await decideAndWrite(ctx, req, what, (state) => {
    const n = findNode(state, ref);
    const next = change(n.value);
    if (jsonEqual(next, n.value)) return { plan: null, answer: n.value.id };
    return { plan: { changes: [putChange(nodesCollection, n.value.id, next, n.rev)], compares: [] }, answer: n.value.id };
  });
  return { rev: w.rev, node: viewOf(readLocal(ctx), w.answer) };
}

/** The forced disruptions a forced drain records: one per service whose budget its moves exceed. */
function forcedDrains(state: ControlState, verdicts: readonly NodeLossVerdict[], nodeId: string, now: number, by: string): ReturnType<typeof putChange>[] {
  const out: ReturnType<typeof putChange>[] = [];
  for (const x of verdicts) {
    const s = state.services.get(x.service);
    if (x.fits || x.forced || s === undefined) continue;
    const record = withForced(s.value, { cause: 'drain', nodeId, specVersion: null, at: now, by, message: forcedText(x.assessment, by) });
    out.push(putChange(servicesCollection, x.service, { ...record, updatedAt: now }, s.rev));
  }
  return out;
}

/** Per service a drain touches: its budget now, the moves it needs, and what waits (null: nothing, or forced). */
export interface DrainBudget {
  service: string;
  limit: string;
  maxUnavailable: number;
  unavailable: number;
  allowed: number;
  moves: number;
  forced: boolean;
  waiting: string | null;
}

function budgetAnswer(x: NodeLossVerdict, force: boolean): DrainBudget {
  const forced = !x.fits && (force || x.forced);
  return {
    service: x.service, limit: x.assessment.limit, maxUnavailable: x.assessment.maxUnavailable, unavailable: x.assessment.unavailable.length,
    allowed: x.assessment.allowed, moves: x.slots.length, forced, waiting: forced ? null : x.reason,
  };
}

/** May `ref` be taken away for a drill now: refused past a budget unless forced (then recorded on each service). */
async function drillCheck(ctx: ApiContext, req: Parameters<typeof decideAndWrite>[1], ref: string, force: boolean): Promise<Record<string, unknown>> {
  const w = await decideAndWrite(ctx, req, `a drill on node ${ref}`, (state) => {
    const n = findNode(state, ref);
    const verdicts = nodeLossVerdicts(state, n.value.id, { cause: 'drill', nodeId: n.value.id, nodeName: n.value.name });
    const over = verdicts.filter((x) => !x.fits);
    if (over.length > 0 && !force) {
      const waiting = verdicts.map((x) => budgetAnswer(x, false)).filter((b) => b.waiting !== null);
      throw new ShoalError('disruption_budget_exceeded', `a drill on ${n.value.name} would take ${over.length === 1 ? 'a service' : `${over.length} services`} past the disruption budget: ${over.map((x) => x.reason).join('; ')}. Wait until those slots serve again, or force it`, { node: n.value.id, services: waiting });
    }
    const now = ctx.node.logTimeNow();
    const by = principalOf(req);
    const changes = over.flatMap((x) => {
      const s = state.services.get(x.service);
      if (s === undefined) return [];
      const record = withForced(s.value, { cause: 'drill', nodeId: n.value.id, specVersion: null, at: now, by, message: forcedText(x.assessment, by) });
      return [putChange(servicesCollection, x.service, { ...record, updatedAt: now }, s.rev)];
    });
    return { plan: changes.length === 0 ? null : { changes, compares: [] }, answer: { id: n.value.id, name: n.value.name, verdicts } };
  });
  const budgets = w.answer.verdicts.map((x) => budgetAnswer(x, force));
  // allowed: every budget allows it without force.
  return { node: w.answer.id, name: w.answer.name, allowed: w.answer.verdicts.every((x) => x.fits), forced: budgets.some((b) => b.forced), budgets, rev: w.rev };
}

export const nodesRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  app.get('/v1/nodes', { config: { role: 'reader' } }, async (req) => {
    const v = validate({ query: [readOnlyQuery, req.query] });
    const state = await readControl(ctx, v.query.consistency);
    return { items: nodeViews(state), rev: state.revision };
  });

  app.get('/v1/nodes/:ref', { config: { role: 'reader' } }, async (req) => {
    const v = validate({ params: [nodeParams, req.params], query: [readOnlyQuery, req.query] });
    const state = await readControl(ctx, v.query.consistency);
    const n = findNode(state, v.params.ref);
    const tasks = [...state.tasks.values()].filter((t) => t.value.nodeId === n.value.id).map((t) => taskItem(state, t))
      .sort((a, b) => compareText(a.service, b.service) || compareNatural(String(a.slot), String(b.slot)) || a.record.createdAt - b.record.createdAt);
    return { node: viewOf(state, n.value.id), tasks, rev: state.revision };
  });

  // The record of a node that left the cluster for good (shoal cluster remove, dead member
  // cleanup, shoal recover): as `docker node rm`. A member's record is refused: its agent would
  // register it again, and its tasks are still its own.
  app.delete('/v1/nodes/:ref', { config: { role: 'admin' } }, async (req) => {
    const v = validate({ params: [nodeParams, req.params], query: [noQuery, req.query] });
    const w = await decideAndWrite(ctx, req, `removing node ${v.params.ref}`, (state) => {
      const n = findNode(state, v.params.ref);
      const { id, name } = n.value;
      if (!ctx.node.isRemoved(id)) {
        throw new ShoalError('resource_in_use', `node ${name} (${id}) is a member of the cluster (or was never removed from it); remove it first with: shoal cluster remove ${name}`, { node: id });
      }
      const running = [...state.tasks.values()].filter((t) => t.value.nodeId === id && t.value.desired === 'running');
      if (running.length > 0) {
        throw new ShoalError('resource_in_use', `node ${name} (${id}) still has ${running.length} task(s) the leader has not replaced yet (${running.slice(0, 3).map((t) => t.value.service).join(', ')}); retry in a moment`, { node: id, tasks: running.map((t) => t.value.id) });
      }
      return { plan: { changes: [deleteChange(nodesCollection, id, n.rev)], compares: [] }, answer: { id, name } };
    });
    return { ...w.answer, removed: true, rev: w.rev };
  });

  app.post('/v1/nodes/:ref/availability', { config: { role: 'operator' } }, async (req) => {
    const v = validate({ params: [nodeParams, req.params], query: [noQuery, req.query], body: [availabilityBody, req.body] });
    const { availability } = v.body;
    if (availability !== 'drain') return updateNode(ctx, req, v.params.ref, `setting node ${v.params.ref} to ${availability}`, (n) => ({ ...n, availability }));
    const force = v.body.force === true;
    const w = await decideAndWrite(ctx, req, `draining node ${v.params.ref}`, (state) => {
      const n = findNode(state, v.params.ref);
      const verdicts = nodeLossVerdicts(state, n.value.id, { cause: 'drain', nodeId: n.value.id, nodeName: n.value.name });
      const changes = n.value.availability === 'drain' ? [] : [putChange(nodesCollection, n.value.id, { ...n.value, availability }, n.rev)];
      if (force) changes.push(...forcedDrains(state, verdicts, n.value.id, ctx.node.logTimeNow(), principalOf(req)));
      return { plan: changes.length === 0 ? null : { changes, compares: [] }, answer: { id: n.value.id, verdicts } };
    });
    return { rev: w.rev, node: viewOf(readLocal(ctx), w.answer.id), budgets: w.answer.verdicts.map((x) => budgetAnswer(x, force)) };
  });

  app.post('/v1/nodes/:ref/disruption', { config: { role: 'operator' } }, async (req) => {
    const v = validate({ params: [nodeParams, req.params], query: [noQuery, req.query], body: [disruptionBody, req.body] });
    return drillCheck(ctx, req, v.params.ref, v.body.force === true);
  });

  app.post('/v1/nodes/:ref/labels', { config: { role: 'operator' } }, async (req) => {
    const v = validate({ params: [nodeParams, req.params], query: [noQuery, req.query], body: [labelsBody, req.body] });
    const { set = {}, remove = [] } = v.body;
    return updateNode(ctx, req, v.params.ref, `labelling node ${v.params.ref}`, (n) => {
      const labels: Record<string, string> = { ...n.labels, ...set };
      for (const k of remove) delete labels[k];
      return { ...n, labels: Object.fromEntries(Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) };
    });
  });
};
