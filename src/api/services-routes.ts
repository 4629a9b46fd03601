// /v1/services: the services, each with its status (desired and running tasks, converged or not)
// and, one at a time, its tasks with their merged observed state. Writes: remove, scale, roll
// back to the previous spec, and one step of a rebalance (rebalance.ts). Each write is a
// compare-and-set on the records it read, proposed at the control plane's feature level
// (control-write.ts). Creating and changing specs is POST /v1/apply.

import type { FastifyPluginAsync } from 'fastify';
import { planApply } from '../control/apply.ts';
import { planRemove } from '../control/apply.ts';
import { merge, putChange } from '../resources/changes.ts';
import { rollbackIngressPlan } from '../control/ingress-apply.ts';
import { ingressPortsCollection } from '../resources/ingress-ports.ts';
import { servicesCollection } from '../resources/collections.ts';
import { rollback } from '../control/rolling-update.ts';
import { forceUpdate } from '../control/apply.ts';
import { principalOf } from './write-path.ts';
import { tasksOf, type ControlState } from '../resources/state.ts';
import { ShoalError } from '../errors.ts';
import type { ApiContext } from './context.ts';
import { forceBody, readOnlyQuery, scaleBody, serviceParams } from './control-schemas.ts';
import { findService, readControl, readLocal, serviceView, taskItem, type ServiceView } from './control-views.ts';
import { decideAndWrite } from './control-write.ts';
import { planRebalance, rebalancePlan, type NodeCount } from './rebalance.ts';
import { badRequest, validate } from './validate.ts';
import { noQuery } from './request-schemas.ts';
import { compareText } from '../base/order.ts';

/** The service as it is on this node once a write has applied here (null if it is gone). */
function after(ctx: ApiContext, name: string): ServiceView | null {
  const state = readLocal(ctx);
  const s = state.services.get(name);
  return s === undefined ? null : serviceView(state, s, ctx.node.logTimeNow());
}

function serviceList(state: ControlState, now: number): ServiceView[] {
  return [...state.services.values()].map((s) => serviceView(state, s, now)).sort((a, b) => compareText(a.name, b.name));
}

export interface RebalanceAnswer {
  state: 'moved' | 'balanced' | 'settling' | 'waiting';
  reason: string;
  moved: { task: string; slot: number | string; from: { id: string; name: string }; to: { id: string; name: string } } | null;
  counts: NodeCount[];
  rev: number | null;
  /** The move went past the service's disruption budget (force: true). */
  forced: boolean;
}

export const servicesRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  app.get('/v1/services', { config: { role: 'reader' } }, async (req) => {
    const v = validate({ query: [readOnlyQuery, req.query] });
    const state = await readControl(ctx, v.query.consistency);
    return { items: serviceList(state, ctx.node.logTimeNow()), rev: state.revision };
  });

  app.get('/v1/services/:name', { config: { role: 'reader' } }, async (req) => {
    const v = validate({ params: [serviceParams, req.params], query: [readOnlyQuery, req.query] });
    const state = await readControl(ctx, v.query.consistency);
    const s = findService(state, v.params.name);
    return { service: serviceView(state, s, ctx.node.logTimeNow()), tasks: tasksOf(state, s.value.name).map((t) => taskItem(state, t)), rev: state.revision };
  });

  app.delete('/v1/services/:name', { config: { role: 'operator' } }, async (req) => {
    const v = validate({ params: [serviceParams, req.params], query: [noQuery, req.query] });
    const w = await decideAndWrite(ctx, req, `removing service ${v.params.name}`, (state) => {
      findService(state, v.params.name);
      return { plan: planRemove(state, v.params.name) ?? null, answer: null };
    });
    return { name: v.params.name, removed: true, rev: w.rev };
  });

  app.post('/v1/services/:name/scale', { config: { role: 'operator' } }, async (req) => {
    const v = validate({ params: [serviceParams, req.params], query: [noQuery, req.query], body: [scaleBody, req.body] });
    const w = await decideAndWrite(ctx, req, `scaling service ${v.params.name}`, (state) => {
      const s = findService(state, v.params.name);
      if (s.value.spec.mode === 'global') {
        throw badRequest([{ path: 'body.replicas', message: `${s.value.name} is a global service (one task on each eligible node); it has no replica count. Change its constraints, or apply it as replicated` }]);
      }
      const planned = planApply(state, [{ ...s.value.spec, replicas: v.body.replicas }], ctx.node.logTimeNow());
      return { plan: planned.plan, answer: planned.services[0]?.outcome ?? 'unchanged' };
    });
    return { outcome: w.answer, rev: w.rev, service: after(ctx, v.params.name) };
  });

  app.post('/v1/services/:name/rollback', { config: { role: 'operator' } }, async (req) => {
    const v = validate({ params: [serviceParams, req.params], query: [noQuery, req.query], body: [forceBody, req.body] });
    const w = await decideAndWrite(ctx, req, `rolling back service ${v.params.name}`, (state) => {
      const s = findService(state, v.params.name);
      if (s.value.previousSpec === null) {
        throw badRequest([{ path: 'params.name', message: `${s.value.name} has no previous spec to roll back to (its spec never changed in a way that replaced tasks)` }]);
      }
      const now = ctx.node.logTimeNow();
      const back = rollback(s.value, now, `rolled back by hand from spec version ${s.value.specVersion}`);
      const record = { ...(v.body?.force === true ? forceUpdate(state, back, now, principalOf(req)) : back), updatedAt: now };
      // The ports it brings back: one ingress port per cluster, as at apply (another service may have taken one since).
      const claims = rollbackIngressPlan(state, back.spec, (id) => ctx.store.get(ingressPortsCollection, id), now);
      return { plan: merge({ changes: [putChange(servicesCollection, s.value.name, record, s.rev)], compares: [] }, claims), answer: record.specVersion };
    });
    return { specVersion: w.answer, rev: w.rev, service: after(ctx, v.params.name) };
  });

  app.post('/v1/services/:name/rebalance', { config: { role: 'operator' } }, async (req): Promise<RebalanceAnswer> => {
    const v = validate({ params: [serviceParams, req.params], query: [noQuery, req.query], body: [forceBody, req.body] });
    const w = await decideAndWrite(ctx, req, `rebalancing service ${v.params.name}`, (state) => {
      const s = findService(state, v.params.name);
      const step = planRebalance(state, s.value, { force: v.body?.force === true });
      return { plan: rebalancePlan(state, s, step, ctx.node.logTimeNow(), principalOf(req)), answer: step };
    });
    const step = w.answer;
    if (step.state === 'moved' && step.move === null) throw new ShoalError('internal', 'a move without a task');
    return {
      state: step.state, reason: step.reason, counts: step.counts, rev: w.rev, forced: step.forced,
      moved: step.move === null ? null : {
        task: step.move.task.value.id, slot: step.move.task.value.slot, from: { id: step.move.from.id, name: step.move.from.name }, to: { id: step.move.to.id, name: step.move.to.name },
      },
    };
  });
};
