// /v1/tasks: the tasks of every service (read only: the leader's loops write them), each with its
// merged observed state (task-view.ts) and its node's name; filtered by service, node (id or
// name) and observed state, in pages by task id.

import type { FastifyPluginAsync } from 'fastify';
import type { ControlState } from '../resources/state.ts';
import { ShoalError } from '../errors.ts';
import type { ApiContext } from './context.ts';
import { readOnlyQuery, taskParams, tasksQuery } from './control-schemas.ts';
import { findNode, readControl, taskItem, type TaskItem } from './control-views.ts';
import { validate } from './validate.ts';

/** The node id a filter means: a node's id or name, or the id of a node that left but still has tasks. */
function nodeFilter(state: ControlState, ref: string): string {
  if ([...state.tasks.values()].some((t) => t.value.nodeId === ref)) return ref;
  return findNode(state, ref).value.id;
}

export const tasksRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  app.get('/v1/tasks', { config: { role: 'reader' } }, async (req) => {
    const v = validate({ query: [tasksQuery, req.query] });
    const q = v.query;
    const state = await readControl(ctx, q.consistency);
    const nodeId = q.node === undefined ? undefined : nodeFilter(state, q.node);
    const ids = [...state.tasks.keys()].filter((id) => q.after === undefined || id > q.after).sort();
    const items: TaskItem[] = [];
    let next: string | null = null;
    for (const id of ids) {
      const t = state.tasks.get(id);
      if (t === undefined) continue;
      if (q.service !== undefined && t.value.service !== q.service) continue;
      if (nodeId !== undefined && t.value.nodeId !== nodeId) continue;
      const item = taskItem(state, t);
      if (q.state !== undefined && item.observed !== q.state) continue;
      if (items.length === q.limit) {
        next = items[items.length - 1]?.id ?? null;
        break;
      }
      items.push(item);
    }
    return { items, rev: state.revision, next };
  });

  app.get('/v1/tasks/:id', { config: { role: 'reader' } }, async (req) => {
    const v = validate({ params: [taskParams, req.params], query: [readOnlyQuery, req.query] });
    const state = await readControl(ctx, v.query.consistency);
    const t = state.tasks.get(v.params.id);
    if (t === undefined) throw new ShoalError('not_found', `no task ${v.params.id}; list them with: shoal task ls`, { task: v.params.id });
    return { task: taskItem(state, t), rev: state.revision };
  });
};
