// DELETE /v1/nodes/{ref} (shoal node rm) on one node (no leader loops, so nothing replaces the
// task below meanwhile): the record of a node removed from the cluster goes; a member's record,
// or one with a task still desired running on it, is refused with resource_in_use and stays.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodesCollection, tasksCollection } from '../../src/resources/collections.ts';
import { proposeCommand } from '../../src/api/token-routes.ts';
import type { JsonObject } from '../../fsm/types.ts';
import { node, task } from '../control/fixtures.ts';
import { expectError } from './expect-error.ts';
import { singleNode, type SingleNode } from './single-node.ts';

let s: SingleNode;
const removedIds = new Set(['gone', 'busy']);
beforeAll(async () => {
  s = await singleNode();
  // Two nodes that left the cluster: the Raft node's removed list is what the route asks.
  const isRemoved = s.node.isRemoved.bind(s.node);
  s.node.isRemoved = (id: string) => removedIds.has(id) || isRemoved(id);
  for (const id of [...removedIds, s.node.id]) {
    const put = await proposeCommand(s.ctx, 'test', { op: 'put', collection: nodesCollection, id, doc: node(id, { state: 'down' }) as unknown as JsonObject });
    expect(put.ok).toBe(true);
  }
  const t = task('t-busy', { service: 'web', nodeId: 'busy', desired: 'running', observed: 'running' });
  expect((await proposeCommand(s.ctx, 'test', { op: 'put', collection: tasksCollection, id: t.id, doc: t as unknown as JsonObject })).ok).toBe(true);
});
afterAll(async () => { await s.close(); });

const rm = (ref: string) => s.app.inject({ method: 'DELETE', url: `/v1/nodes/${ref}` });

describe('DELETE /v1/nodes/{ref}', () => {
  it('removes the record of a node removed from the cluster', async () => {
    const res = await rm('gone');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ id: 'gone', name: 'gone', removed: true });
    expect(s.store.get(nodesCollection, 'gone')).toBeUndefined();
    expectError(await rm('gone'), 'not_found');
  });

  it('refuses a member\'s record, saying to remove the member first', async () => {
    const err = expectError(await rm(s.node.id), 'resource_in_use');
    expect(err).toMatchObject({ node: s.node.id });
    expect(s.store.get(nodesCollection, s.node.id)).toBeDefined();
  });

  it('refuses a removed node that still has a task desired running', async () => {
    const err = expectError(await rm('busy'), 'resource_in_use');
    expect(err).toMatchObject({ node: 'busy', tasks: ['t-busy'] });
    expect(s.store.get(nodesCollection, 'busy')).toBeDefined();
  });
});
