// One shape of 400 wherever the problem is found: details.problems with public paths (params,
// query, headers, body), whether the API's schemas or the store's own checks refused it, and a
// short message when a path is deep.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { docDepthMax, principalLengthMax } from '../../fsm/limits.ts';
import { expectError, problemPaths } from './expect-error.ts';
import { singleNode, type SingleNode } from './single-node.ts';

let s: SingleNode;
beforeAll(async () => { s = await singleNode(); });
afterAll(async () => { await s.close(); });

const put = (url: string, payload: unknown, headers: Record<string, string> = {}) =>
  s.app.inject({ method: 'PUT', url, payload: payload as object, headers });
const txn = (payload: unknown, headers: Record<string, string> = {}) => s.app.inject({ method: 'POST', url: '/v1/txn', payload: payload as object, headers });

function nested(depth: number): Record<string, unknown> {
  let v: Record<string, unknown> = { leaf: 1 };
  for (let i = 0; i < depth; i++) v = { a: v };
  return v;
}

describe('one shape of 400', () => {
  it('refuses If-Match 0 and a revision past 2^53 at headers.if-match, and changes nothing', async () => {
    const rev = s.store.revision;
    for (const value of ['0', '99999999999999999999999', '"0"']) {
      const details = expectError(await put('/v1/docs/c/x', {}, { 'if-match': value }), 'bad_request');
      expect(problemPaths(details), value).toEqual(['headers.if-match']);
      expectError(await s.app.inject({ method: 'DELETE', url: '/v1/docs/c/x', headers: { 'if-match': value } }), 'bad_request');
    }
    const noneOnDelete = expectError(await s.app.inject({ method: 'DELETE', url: '/v1/docs/c/x', headers: { 'if-none-match': '*' } }), 'bad_request');
    expect(problemPaths(noneOnDelete)).toEqual(['headers.if-none-match']);
    const both = expectError(await put('/v1/docs/c/x', {}, { 'if-match': '1', 'if-none-match': '*' }), 'bad_request');
    expect(problemPaths(both)).toEqual(['headers']);
    expect(s.store.revision).toBe(rev);
  });

  it('names the body path of a document nested past the limit, with a short message', async () => {
    const res = await put('/v1/docs/c/deep', nested(docDepthMax + 5));
    const details = expectError(res, 'bad_request');
    const [path = ''] = problemPaths(details);
    expect(path.startsWith('body.a.a.a.')).toBe(true);
    expect(path).not.toContain('cmd');
    const { message } = res.json() as { message: string };
    expect(message).toMatch(/^invalid request: body\.a\.a\.…\(\d+ more\)/);
    expect(message.length).toBeLessThan(200);
    const inTxn = expectError(await txn({ success: [{ op: 'put', collection: 'c', id: 'd', doc: nested(docDepthMax + 1) }] }), 'bad_request');
    expect(problemPaths(inTxn)[0]?.startsWith('body.success.0.doc.a.')).toBe(true);
  });

  it('names the txn op that touches a document twice in one branch', async () => {
    const details = expectError(await txn({ success: [
      { op: 'put', collection: 'c', id: 'twice', doc: {} }, { op: 'delete', collection: 'c', id: 'twice' },
    ] }), 'bad_request');
    expect(problemPaths(details)).toEqual(['body.success.1']);
  });

  it('names the principal header when it is longer than the limit', async () => {
    const h = { 'x-shoal-principal': 'p'.repeat(principalLengthMax + 1) };
    expect(problemPaths(expectError(await put('/v1/docs/c/x', {}, h), 'bad_request'))).toEqual(['headers.x-shoal-principal']);
    expect(problemPaths(expectError(await txn({}, h), 'bad_request'))).toEqual(['headers.x-shoal-principal']);
  });

  it('refuses txn revisions of 0 or past 2^53 in the body with their paths', async () => {
    const details = expectError(await txn({
      compare: [{ collection: 'c', id: 'x', target: 'rev', cmp: '=', value: 2 ** 53 }],
      success: [{ op: 'delete', collection: 'c', id: 'x', expect: { rev: 0 } }],
    }), 'bad_request');
    expect(problemPaths(details)).toEqual(expect.arrayContaining(['body.compare.0.value', 'body.success.0.expect.rev']));
  });

  it("says which key is not allowed when a body holds '__proto__'", async () => {
    for (const [payload, path] of [
      ['{"__proto__": {"admin": true}}', 'body.__proto__'],
      ['{"a": [1, {"__proto__": 1}]}', 'body.a.1.__proto__'],
      ['{"success": [{"op": "put", "collection": "c", "id": "x", "doc": {"__proto__": null}}]}', 'body.success.0.doc.__proto__'],
    ] as const) {
      const url = path.startsWith('body.success') ? '/v1/txn' : '/v1/docs/c/proto';
      const res = await s.app.inject({ method: url === '/v1/txn' ? 'POST' : 'PUT', url, payload, headers: { 'content-type': 'application/json' } });
      const details = expectError(res, 'bad_request');
      expect(problemPaths(details)).toEqual([path]);
      expect((res.json() as { message: string }).message).toContain("'__proto__' is not allowed");
    }
    // A key named constructor is data like any other.
    expect((await s.app.inject({ method: 'PUT', url: '/v1/docs/c/ctor', payload: '{"constructor": {"prototype": 1}}', headers: { 'content-type': 'application/json' } })).statusCode).toBe(200);
  });

  it('refuses a watch from a revision in the future with the current revision', async () => {
    const current = s.store.revision;
    for (const [url, headers, path] of [
      [`/v1/watch?after=${current + 1000}`, {}, 'query.after'],
      ['/v1/watch', { 'last-event-id': String(current + 1000) }, 'headers.last-event-id'],
    ] as const) {
      const details = expectError(await s.app.inject({ url, headers }), 'bad_request');
      expect(problemPaths(details)).toEqual([path]);
      expect(details.currentRev).toBe(current);
    }
  });
});
