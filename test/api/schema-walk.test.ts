// Walks every operation of the OpenAPI document the node serves (GET /docs) with requests the
// document itself says are wrong: methods a path does not take, bad percent-encodings, oversized
// path segments, URLs and bodies, and parameters, headers and bodies generated from each
// operation's schema with exactly one violation. Every answer must be a catalogued error with a
// requestId, of the class the violation calls for, and the store must not change.

import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiLimitsDefault, paramLengthMax } from '../../src/api/limits.ts';
import { catalogued } from './expect-error.ts';
import { invalid, isValid, valid, type Resolve, type Schema } from './json-schema-arb.ts';
import { singleNode, type SingleNode } from './single-node.ts';

interface Param { name: string; in: 'path' | 'query' | 'header'; required: boolean; schema: Schema }
interface Operation {
  path: string;
  method: string;
  parameters?: Param[];
  requestBody?: { required?: boolean; content: { 'application/json'?: { schema: Schema } } };
  'x-additional-query'?: boolean;
}
interface Request { method: string; url: string; headers: Record<string, string>; payload?: string; expect: 'bad_request' | 'uri_too_long' | 'payload_too_large' | '4xx' }

const bodyBytesMax = 64 * 1024;
let s: SingleNode;
let doc: { paths: Record<string, Record<string, Omit<Operation, 'path' | 'method'>>>; components: { schemas: Record<string, Schema> } };
let operations: Operation[];
const resolve: Resolve = (ref) => {
  const found = doc.components.schemas[ref.replace('#/components/schemas/', '')];
  if (found === undefined) throw new Error(`unknown $ref ${ref}`);
  return found;
};

beforeAll(async () => {
  s = await singleNode({ bodyBytesMax });
  await s.app.inject({ method: 'PUT', url: '/v1/docs/walk/seed', payload: { n: 1 } });
  doc = (await s.app.inject({ url: '/docs' })).json() as typeof doc;
  operations = Object.entries(doc.paths).flatMap(([path, item]) => Object.entries(item).map(([method, op]) => ({ ...op, path, method: method.toUpperCase() })));
});
afterAll(async () => { await s.close(); });

/** What must not change: the store's revision and documents, and the membership. */
function fingerprint(): string {
  return JSON.stringify([s.store.revision, s.store.stats(), s.node.membership.list()]);
}

/** Whether a parameter sent as text passes its schema the way the route reads it (numbers are coerced). */
function textIsValid(schema: Schema, text: string): boolean {
  if (schema.type === 'integer' || schema.type === 'number') {
    const n = text.trim() === '' ? 0 : Number(text);
    return isValid(schema, n, resolve);
  }
  return isValid(schema, text, resolve);
}

/** Whether some text breaks the schema (any string passes `{type: 'string'}`). */
function violableAsText(schema: Schema): boolean {
  if (schema.type !== 'string') return true;
  return 'const' in schema || Array.isArray(schema.enum) || typeof schema.maxLength === 'number' || (typeof schema.minLength === 'number' && schema.minLength > 0)
    || typeof schema.pattern === 'string' || Array.isArray(schema.allOf);
}

function urlOf(op: Operation, path: Record<string, string>, query: string[]): string {
  const p = op.path.replace(/\{(\w+)\}/g, (_m, name: string) => path[name] ?? 'x');
  return query.length > 0 ? `${p}?${query.join('&')}` : p;
}

function encode(v: string): string {
  try {
    return encodeURIComponent(v);
  } catch {
    return '%ED%A0%80';
  }
}

/** A request that is valid but for its path parameters (given encoded), query and headers. */
function requestArb(op: Operation): fc.Arbitrary<{ path: Record<string, string>; body?: string }> {
  const pathParams = (op.parameters ?? []).filter((p) => p.in === 'path');
  const path = fc.record(Object.fromEntries(pathParams.map((p) => [p.name, valid(p.schema, resolve).map((v) => encode(String(v)))])));
  const bodySchema = op.requestBody?.content['application/json']?.schema;
  if (bodySchema === undefined || op.requestBody?.required !== true) return path.map((pp) => ({ path: pp }));
  return fc.tuple(path, valid(bodySchema, resolve)).map(([pp, b]) => ({ path: pp, body: JSON.stringify(b) }));
}

/** One violation of the operation's parameters, headers or body, or an oversized part. */
function violationArb(op: Operation): fc.Arbitrary<Request> | undefined {
  const params = op.parameters ?? [];
  const bodySchema = op.requestBody?.content['application/json']?.schema;
  const json = { 'content-type': 'application/json' };
  const build = (base: { path: Record<string, string>; body?: string }, part: Partial<Request> & { query?: string[] }): Request => {
    const { query, ...rest } = part;
    const sent: Request = { method: op.method, url: urlOf(op, base.path, query ?? []), headers: base.body !== undefined ? json : {}, expect: 'bad_request', ...rest };
    // A generated value can make the URL longer than the limit, which the server checks before
    // anything else: then uri_too_long is the right refusal, whatever else is wrong.
    if (sent.expect === 'bad_request' && Buffer.byteLength(sent.url) > apiLimitsDefault.urlBytesMax) sent.expect = 'uri_too_long';
    return base.body !== undefined ? { payload: base.body, ...sent } : sent;
  };
  const kinds: fc.Arbitrary<Request>[] = [];
  for (const p of params.filter((x) => violableAsText(x.schema))) {
    const text = invalid(p.schema, resolve).map((v) => (typeof v === 'string' ? v : JSON.stringify(v))).filter((t) => !textIsValid(p.schema, t));
    if (p.in === 'path') {
      kinds.push(fc.tuple(requestArb(op), text).map(([b, t]) => build(b, {
        url: urlOf(op, { ...b.path, [p.name]: encode(t) }, []), expect: t === '' ? '4xx' : encode(t).length > paramLengthMax ? 'uri_too_long' : 'bad_request',
      })));
      kinds.push(fc.tuple(requestArb(op), fc.constantFrom('%ZZ', '%', 'a%2', '%ED%A0%80', '%C0%AF', '%FF')).map(([b, raw]) => build(b, { url: urlOf(op, { ...b.path, [p.name]: raw }, []) })));
      kinds.push(requestArb(op).map((b) => build(b, { url: urlOf(op, { ...b.path, [p.name]: 'x'.repeat(paramLengthMax + 1) }, []), expect: 'uri_too_long' })));
    } else if (p.in === 'query') {
      kinds.push(fc.tuple(requestArb(op), text).map(([b, t]) => build(b, { query: [`${p.name}=${encode(t)}`] })));
    } else {
      const headerText = text.filter((t) => /^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$/.test(t));
      kinds.push(fc.tuple(requestArb(op), headerText).map(([b, t]) => build(b, { headers: { ...(b.body !== undefined ? json : {}), [p.name]: t } })));
    }
  }
  if (op['x-additional-query'] === false) {
    kinds.push(requestArb(op).map((b) => build(b, { query: ['unexpectedParam=1'] })));
    kinds.push(requestArb(op).map((b) => build(b, { query: [`unexpectedParam=${'q'.repeat(apiLimitsDefault.urlBytesMax)}`], expect: 'uri_too_long' })));
  }
  if (bodySchema !== undefined) {
    kinds.push(fc.tuple(requestArb(op), invalid(bodySchema, resolve)).map(([b, bad]) => {
      // A wrong body longer than the body limit is refused for its length before it is read.
      const payload = JSON.stringify(bad);
      return build(b, { headers: json, payload, ...(Buffer.byteLength(payload) > bodyBytesMax ? { expect: 'payload_too_large' as const } : {}) });
    }));
    kinds.push(requestArb(op).map((b) => build(b, { headers: json, payload: JSON.stringify({ pad: 'x'.repeat(bodyBytesMax) }), expect: 'payload_too_large' })));
  }
  return kinds.length > 0 ? fc.oneof(...kinds) : undefined;
}

async function send(r: Request): Promise<void> {
  const before = fingerprint();
  const res = await s.app.inject({ method: r.method as 'GET', url: r.url, headers: r.headers, ...(r.payload !== undefined ? { payload: r.payload } : {}) });
  const where = `${r.method} ${r.url.slice(0, 200)} ${JSON.stringify(r.headers).slice(0, 200)} ${(r.payload ?? '').slice(0, 200)}`;
  expect(res.statusCode, where).toBeGreaterThanOrEqual(400);
  expect(res.statusCode, where).toBeLessThan(500);
  const body = catalogued(res);
  if (r.expect !== '4xx') expect(body.code, `${where}: ${res.body.slice(0, 300)}`).toBe(r.expect);
  expect(fingerprint(), where).toBe(before);
}

describe('every operation of the OpenAPI document, walked with wrong requests', () => {
  it('lists every route the server has, with every method', () => {
    expect(operations.length).toBeGreaterThanOrEqual(17);
    for (const op of operations) expect(op.path.startsWith('/'), op.path).toBe(true);
  });

  it('answers every method a path does not take with 405 and the methods it does take in Allow', async () => {
    const all = ['GET', 'HEAD', 'PUT', 'POST', 'DELETE', 'PATCH', 'OPTIONS'];
    for (const [path, item] of Object.entries(doc.paths)) {
      const taken = new Set(Object.keys(item).map((m) => m.toUpperCase()));
      if (taken.has('GET')) taken.add('HEAD');
      const url = path.replace(/\{\w+\}/g, 'x');
      for (const method of all.filter((m) => !taken.has(m))) {
        const res = await s.app.inject({ method: method as 'GET', url });
        expect(res.statusCode, `${method} ${url}`).toBe(405);
        expect(res.headers.allow, `${method} ${url}`).toBe([...taken].sort().join(', '));
        if (method !== 'HEAD') expect(catalogued(res).code).toBe('method_not_allowed');
      }
    }
  });

  it('takes no dot segment as a path parameter, which a URL would drop (/v1/nodes/./drain is /v1/nodes/drain)', async () => {
    const taking: string[] = [];
    for (const op of operations) {
      for (const p of (op.parameters ?? []).filter((x) => x.in === 'path')) {
        for (const dots of ['.', '..']) if (isValid(p.schema, dots, resolve)) taking.push(`${op.method} ${op.path} {${p.name}} = '${dots}'`);
      }
    }
    expect(taking).toEqual([]);
    // And the route refuses it as the schema says, rather than seeing another path.
    const res = await s.app.inject({ method: 'GET', url: '/v1/tasks/%2E%2E' });
    expect(catalogued(res).code).not.toBe('method_not_allowed');
  });

  it('refuses one violation of any part of any operation with the right catalogued error and changes nothing', async () => {
    const walked: string[] = [];
    for (const op of operations) {
      const violations = violationArb(op);
      if (violations === undefined) continue;
      walked.push(`${op.method} ${op.path}`);
      await fc.assert(fc.asyncProperty(violations, send), { numRuns: 60 });
    }
    // Every /v1 operation has something to get wrong; the probes, metrics and docs take anything.
    expect(walked.sort()).toEqual(operations.filter((op) => op.path.startsWith('/v1/')).map((op) => `${op.method} ${op.path}`).sort());
  });
});
