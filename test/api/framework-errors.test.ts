// Answers fastify and Node give before a route runs go through the catalog too: a bad URL, a
// wrong method, an over-long URL or path segment, over-large headers (which Node's HTTP parser
// answers itself, so these are sent over a real socket).

import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { paramLengthMax } from '../../src/api/limits.ts';
import { catalogued, expectError } from './expect-error.ts';
import { singleNode, type SingleNode } from './single-node.ts';

let s: SingleNode;
let port: number;
beforeAll(async () => {
  s = await singleNode();
  const addr = await s.app.listen({ port: 0, host: '127.0.0.1' });
  port = Number(new URL(addr).port);
});
afterAll(async () => { await s.close(); });

/** Sends raw bytes and reads the whole answer (the server closes the connection after it). */
function rawRequest(text: string): Promise<{ statusCode: number; headers: Record<string, string>; body: string }> {
  return new Promise((resolve, reject) => {
    const sock = connect(port, '127.0.0.1');
    let data = '';
    sock.on('data', (b: Buffer) => { data += b.toString('utf8'); });
    sock.on('error', reject);
    sock.on('close', () => {
      const [head = '', body = ''] = data.split('\r\n\r\n');
      const [status = '', ...lines] = head.split('\r\n');
      const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
      resolve({ statusCode: Number(status.split(' ')[1]), headers, body });
    });
    sock.end(text);
  });
}

describe('bad URLs', () => {
  it('answers a stray % and an encoded lone surrogate in a path with bad_request', async () => {
    for (const url of ['/v1/docs/c/%ZZ', '/v1/docs/c/a%', '/v1/docs/c/%ED%A0%80', '/v1/docs/c%ZZ', '/v1/docs/c/%C0%AF']) {
      const details = expectError(await s.app.inject({ url }), 'bad_request');
      expect(details.problems, url).toBeDefined();
    }
  });

  it('answers a path segment longer than the longest URL-encoded id with uri_too_long', async () => {
    expectError(await s.app.inject({ url: `/v1/docs/c/${'x'.repeat(paramLengthMax + 1)}` }), 'uri_too_long');
  });

  it('answers a URL longer than urlBytesMax with uri_too_long, on a route and off one', async () => {
    expectError(await s.app.inject({ url: `/v1/docs/c?prefix=${'p'.repeat(9000)}` }), 'uri_too_long');
    expectError(await s.app.inject({ url: `/nowhere/${'x'.repeat(9000)}` }), 'uri_too_long');
  });
});

describe('wrong methods', () => {
  it('answers a method an existing path does not take with 405 and the methods it takes in Allow', async () => {
    const cases: [string, string, string][] = [
      ['POST', '/v1/docs/c/x', 'DELETE, GET, HEAD, PUT'],
      ['PATCH', '/v1/docs/c', 'GET, HEAD'],
      ['GET', '/v1/txn', 'POST'],
      ['DELETE', '/v1/watch', 'GET, HEAD'],
      ['PUT', '/v1/cluster/members', 'POST'],
      ['GET', '/v1/cluster/members/n1/promote', 'POST'],
      ['POST', '/healthz', 'GET, HEAD'],
      ['OPTIONS', '/metrics', 'GET, HEAD'],
    ];
    for (const [method, url, allow] of cases) {
      const res = await s.app.inject({ method: method as 'GET', url });
      const details = expectError(res, 'method_not_allowed');
      expect(res.headers.allow, `${method} ${url}`).toBe(allow);
      expect(details.allow).toEqual(allow.split(', '));
    }
    expectError(await s.app.inject({ method: 'POST', url: '/v1/nothing' }), 'not_found');
  });
});

describe('what Node answers before fastify', () => {
  it('answers headers over 16 KiB with headers_too_large, as JSON with a requestId', async () => {
    const res = await rawRequest(`GET /healthz HTTP/1.1\r\nhost: x\r\nx-big: ${'h'.repeat(20 * 1024)}\r\n\r\n`);
    expect(res.headers['content-type']).toMatch(/application\/json/);
    expectError(res, 'headers_too_large');
  });

  it('answers a request line over 16 KiB with uri_too_long', async () => {
    expectError(await rawRequest(`GET /v1/docs/c?prefix=${'p'.repeat(20 * 1024)} HTTP/1.1\r\nhost: x\r\n\r\n`), 'uri_too_long');
  });

  it('answers bytes that are not HTTP with bad_request', async () => {
    catalogued(await rawRequest('HELLO THERE\r\n\r\n'));
    expectError(await rawRequest('GET / HTTP/1.1\r\nbad header line\r\n\r\n'), 'bad_request');
  });
});
