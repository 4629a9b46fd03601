// /v1/nodes: the nodes of the control plane (registered by their agents), each with what runs on
// it, named by id or name. The operator sets two fields: availability (active, pause: no new
// tasks, drain: its tasks are moved off by the orchestrator) and labels. Those writes are a
// compare-and-set on the node record's revision, since the node's agent (runtime status) and
// the leader (state, epoch) write other fields of the same record: a write that meets one of
// theirs reads the record again and reapplies only its own field.

import type { FastifyPluginAsync } from 'fastify';
import { deleteChange, putChange } from '../resources/changes.ts';
import { nodesCollection } from '../resources/collections.ts';
import type { NodeRecord } from '../resources/records.ts';
import { jsonEqual } from '../resources/spec/spec-change.ts';
import type { ControlState } from '../resources/state.ts';
import { ShoalError } from '../errors.ts';
import type { ApiContext } from './context.ts';
import { availabilityBody, labelsBody, nodeParams, readOnlyQuery } from './control-schemas.ts';
import { findNode, nodeViews, readControl, readLocal, taskItem, type NodeView } from './control-views.ts';
import { decideAndWrite } from './control-write.ts';
import { noQuery } from './request-schemas.ts';
import { validate } from './validate.ts';

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
      .sort((a, b) => a.service.localeCompare(b.service) || String(a.slot).localeCompare(String(b.slot), undefined, { numeric: true }) || a.record.createdAt - b.record.createdAt);
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
    return updateNode(ctx, req, v.params.ref, `setting node ${v.params.ref} to ${availability}`, (n) => ({ ...n, availability }));
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
