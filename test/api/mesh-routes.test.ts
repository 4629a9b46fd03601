// POST /v1/mesh/rotate-key on one node (src/api/mesh-routes.ts): it asks the node's mesh agent
// for a new key and answers the new public key; a node without a mesh answers not_found; a body
// or query it does not know is refused before anything changes.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError } from './expect-error.ts';
import { singleNode, type SingleNode } from './single-node.ts';

let s: SingleNode;
beforeAll(async () => { s = await singleNode(); });
afterAll(async () => { await s.close(); });

const rotate = (payload?: object, url = '/v1/mesh/rotate-key') => s.app.inject({ method: 'POST', url, ...(payload !== undefined ? { payload } : {}) });

describe('POST /v1/mesh/rotate-key', () => {
  it('answers not_found on a node that takes no part in the mesh', async () => {
    s.ctx.mesh = undefined;
    expect(expectError(await rotate({}), 'not_found')).toMatchObject({ node: s.node.id });
  });

  it('rotates through the node\'s agent and answers the new public key; refuses what it does not know', async () => {
    let calls = 0;
    s.ctx.mesh = { rotateKey: async () => { calls++; return `key${calls}`; } };
    const res = await rotate({});
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ node: s.node.id, publicKey: 'key1' });
    expect((await rotate()).statusCode).toBe(200);
    expectError(await rotate({ privateKey: 'x' }), 'bad_request');
    expectError(await rotate({}, '/v1/mesh/rotate-key?now=1'), 'bad_request');
    expect(calls).toBe(2);
  });

  it('passes on the agent\'s refusal (no quorum: nothing changed)', async () => {
    const { ShoalError } = await import('../../src/errors.ts');
    s.ctx.mesh = { rotateKey: async () => { throw new ShoalError('no_leader', 'the cluster has no leader right now; nothing was changed, retry shortly'); } };
    expectError(await rotate({}), 'no_leader');
  });
});
