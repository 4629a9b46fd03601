// One id rule on every path an id takes: a URL path segment, a txn body, list prefix and cursor,
// watch prefix. Every id that can be written can be read, listed and deleted through the URL,
// and every id one path refuses, every other path refuses too.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idLengthMax } from '../../fsm/limits.ts';
import { expectError, problemPaths } from './expect-error.ts';
import { singleNode, type SingleNode } from './single-node.ts';

let s: SingleNode;
beforeAll(async () => { s = await singleNode(); });
afterAll(async () => { await s.close(); });

const url = (id: string) => `/v1/docs/ids/${encodeURIComponent(id)}`;
const txnPut = (id: string) => s.app.inject({ method: 'POST', url: '/v1/txn', payload: { success: [{ op: 'put', collection: 'ids', id, doc: { id } }] } });

/** Legal ids at and around the limits: long ones in one- to four-byte characters. */
const legal = ['x'.repeat(101), 'y'.repeat(200), 'z'.repeat(idLengthMax), 'é'.repeat(idLengthMax), '€'.repeat(idLengthMax), '😀'.repeat(idLengthMax), 'sp ace%?#&=+', '\u00a0nbsp'];
/** Control characters (C0, DEL, C1), lone surrogates (only through the body: a URL cannot carry them), '/' and length. */
const controls = ['\u0000', 'a\nb', 'tab\t', 'cr\r', 'del\u007f', 'c1\u0085', '\u009f', 'esc\u001b'];
const illegalInBody = [...controls, '\ud800', 'a\udfff', 'a/b', 'x'.repeat(idLengthMax + 1), '😀'.repeat(idLengthMax + 1), ''];

describe('the id rule on every path', () => {
  it('writes, reads, lists and deletes ids up to 256 characters of any width through the URL and the txn body', async () => {
    for (const id of legal) {
      const put = await s.app.inject({ method: 'PUT', url: url(id), payload: { id } });
      expect(put.statusCode, `${id.slice(0, 10)}: ${put.body.slice(0, 200)}`).toBe(200);
      expect((await s.app.inject({ url: url(id) })).json()).toMatchObject({ id, doc: { id } });
      const listed = (await s.app.inject({ url: `/v1/docs/ids?prefix=${encodeURIComponent(id)}` })).json() as { items: { id: string }[] };
      expect(listed.items.map((d) => d.id)).toContain(id);
      expect((await s.app.inject({ url: `/v1/docs/ids?after=${encodeURIComponent(id)}` })).statusCode).toBe(200);
      expect((await s.app.inject({ method: 'DELETE', url: url(id) })).statusCode).toBe(200);
      // The same id through the txn body, then read and deleted through the URL.
      expect((await txnPut(id)).statusCode).toBe(200);
      expect((await s.app.inject({ url: url(id) })).statusCode).toBe(200);
      expect((await s.app.inject({ method: 'DELETE', url: url(id) })).statusCode).toBe(200);
    }
  });

  it('refuses control characters, lone surrogates, / and over-long ids in the txn body, at their path', async () => {
    const rev = s.store.revision;
    for (const id of illegalInBody) {
      const details = expectError(await txnPut(id), 'bad_request');
      expect(problemPaths(details), JSON.stringify(id)).toEqual(['body.success.0.id']);
    }
    expect(s.store.revision).toBe(rev);
  });

  it('refuses the same ids in the URL, the list prefix and cursor, and the watch prefix', async () => {
    const rev = s.store.revision;
    for (const id of [...controls, 'x'.repeat(idLengthMax + 1), '😀'.repeat(idLengthMax + 1)]) {
      const where = JSON.stringify(id.slice(0, 10));
      expect(problemPaths(expectError(await s.app.inject({ method: 'PUT', url: url(id), payload: {} }), 'bad_request')), where).toEqual(['params.id']);
      expect(problemPaths(expectError(await s.app.inject({ url: url(id) }), 'bad_request')), where).toEqual(['params.id']);
      expectError(await s.app.inject({ method: 'DELETE', url: url(id) }), 'bad_request');
      const q = encodeURIComponent(id);
      expect(problemPaths(expectError(await s.app.inject({ url: `/v1/docs/ids?prefix=${q}&after=${q}` }), 'bad_request')), where).toEqual(['query.prefix', 'query.after']);
      expect(problemPaths(expectError(await s.app.inject({ url: `/v1/watch?prefix=${q}` }), 'bad_request')), where).toEqual(['query.prefix']);
    }
    // A '/' cannot be in a path segment unencoded; encoded it reaches the id rule.
    expect(problemPaths(expectError(await s.app.inject({ url: '/v1/docs/ids/a%2Fb' }), 'bad_request'))).toEqual(['params.id']);
    expect(s.store.revision).toBe(rev);
  });
});
