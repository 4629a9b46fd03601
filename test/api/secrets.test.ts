// /v1/secrets through inject() on one node that runs the control plane: a value goes in and
// never comes out. Every read path that can hand out a document of shoal.secrets (the typed
// routes, /v1/docs get and list, /v1/txn, /v1/watch, /v1/events, a service's spec) is checked
// not to carry the value's bytes, as text or as base64; a secret is refused at apply while
// missing and at removal while a service or a job names it.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { secretsCollection } from '../../src/resources/collections.ts';
import { secretValueBytesMax } from '../../src/resources/secrets.ts';
import { expectError, problemPaths } from './expect-error.ts';
import { singleNode, type SingleNode } from './single-node.ts';

const plain = `hunter2-${Math.random().toString(36).slice(2)}-sesame`;
const bytes = Buffer.concat([Buffer.from(plain), Buffer.from([0, 255, 10])]);
/** Every form the value could leak in. */
const forms = [plain, bytes.toString('base64'), Buffer.from(plain).toString('base64'), Buffer.from(plain).toString('hex')];

let s: SingleNode;
beforeAll(async () => { s = await singleNode({ control: true, bodyBytesMax: 256 * 1024 }); });
afterAll(async () => { await s.close(); });

const put = (name: string, payload: object) => s.app.inject({ method: 'PUT', url: `/v1/secrets/${name}`, payload });
const apply = (text: string) => s.app.inject({ method: 'POST', url: '/v1/apply', payload: { text } });
const serviceYaml = (name: string, secrets: string) => `apiVersion: shoal/v1\nkind: Service\nname: ${name}\nimage: busybox:local\ncommand: ["sleep", "3600"]\nsecrets: ${secrets}\n`;

function expectNoValue(text: string): void {
  for (const f of forms) expect(text.includes(f), `the answer holds the value (${f.slice(0, 12)}…): ${text.slice(0, 400)}`).toBe(false);
}

async function getText(url: string): Promise<string> {
  const res = await s.app.inject({ url });
  expect(res.statusCode, res.body).toBe(200);
  return res.body;
}

/** The text of a server-sent event stream, read until `needle` appears. */
async function streamUntil(address: string, path: string, needle: string): Promise<string> {
  const ctrl = new AbortController();
  const res = await fetch(`${address}${path}`, { signal: ctrl.signal });
  expect(res.status).toBe(200);
  const reader = res.body!.getReader();
  let text = '';
  while (!text.includes(needle)) text += new TextDecoder().decode((await reader.read()).value);
  ctrl.abort();
  return text;
}

describe('PUT /v1/secrets/{name}', () => {
  it('creates a secret and answers its metadata, never its value', async () => {
    const res = await put('db-password', { valueBase64: bytes.toString('base64') });
    expect(res.statusCode, res.body).toBe(200);
    expectNoValue(res.body);
    const a = res.json() as { outcome: string; secret: Record<string, unknown>; rev: number };
    expect(a.outcome).toBe('created');
    expect(a.secret).toMatchObject({ name: 'db-password', size: bytes.length, version: 1 });
    expect(a.secret.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(Object.keys(a.secret)).not.toContain('value');
  });

  it('changes nothing for the same value, and raises the version for another', async () => {
    const same = (await put('db-password', { valueBase64: bytes.toString('base64') })).json() as { outcome: string; rev: number | null; secret: { version: number } };
    expect(same).toMatchObject({ outcome: 'unchanged', rev: null, secret: { version: 1 } });
    await put('db-password', { value: 'other' });
    const back = (await put('db-password', { valueBase64: bytes.toString('base64') })).json() as { outcome: string; secret: { version: number } };
    expect(back).toMatchObject({ outcome: 'updated', secret: { version: 3 } });
  });

  it('refuses a value over the limit with payload_too_large, and a body with both or neither form', async () => {
    const details = expectError(await put('big', { valueBase64: Buffer.alloc(secretValueBytesMax + 1).toString('base64') }), 'payload_too_large');
    expect(details).toMatchObject({ limit: 'secretValueBytesMax', max: secretValueBytesMax });
    expect((await put('exact', { valueBase64: Buffer.alloc(secretValueBytesMax, 7).toString('base64') })).statusCode).toBe(200);
    expectError(await put('both', { value: 'a', valueBase64: 'YQ==' }), 'bad_request');
    expectError(await put('neither', {}), 'bad_request');
    expect(problemPaths(expectError(await put('bad64', { valueBase64: 'not base64!' }), 'bad_request'))).toEqual(['body.valueBase64']);
    expect(problemPaths(expectError(await put('Bad_Name', { value: 'a' }), 'bad_request'))).toEqual(['params.name']);
  });

  it('is reserved: /v1/docs and /v1/txn refuse to write shoal.secrets', async () => {
    const details = expectError(await s.app.inject({ method: 'PUT', url: `/v1/docs/${secretsCollection}/x`, payload: { value: 'eA==' } }), 'bad_request');
    expect(JSON.stringify(details)).toContain('PUT /v1/secrets/{name}');
    expectError(await s.app.inject({ method: 'POST', url: '/v1/txn', payload: { success: [{ op: 'delete', collection: secretsCollection, id: 'db-password' }] } }), 'bad_request');
  });
});

describe('the value never comes out', () => {
  it('not from the typed reads', async () => {
    const one = await getText('/v1/secrets/db-password');
    expectNoValue(one);
    expect(JSON.parse(one)).toMatchObject({ secret: { name: 'db-password', size: bytes.length, usedBy: [] } });
    const list = await getText('/v1/secrets');
    expectNoValue(list);
    expect((JSON.parse(list) as { items: { name: string }[] }).items.map((i) => i.name)).toContain('db-password');
    expectError(await s.app.inject({ url: '/v1/secrets/nope' }), 'not_found');
  });

  it('not in the store in any form: it holds the value encrypted (feature level 6)', async () => {
    const doc = s.store.get(secretsCollection, 'db-password')?.doc ?? {};
    expectNoValue(JSON.stringify(doc));
    expect(Object.keys(doc)).not.toContain('value');
    expect(doc.sealed).toMatchObject({ alg: 'aes-256-gcm', key: { alg: 'x25519-hkdf-sha256-aes-256-gcm' } });
    expectNoValue(JSON.stringify(s.store.eventsSince(0)));
  });

  it('not from /v1/docs, read or listed, not even sealed', async () => {
    const one = await getText(`/v1/docs/${secretsCollection}/db-password`);
    expectNoValue(one);
    const doc = (JSON.parse(one) as { doc: Record<string, unknown> }).doc;
    expect(doc).toMatchObject({ name: 'db-password', size: bytes.length });
    expect(Object.keys(doc)).not.toContain('sealed');
    expectNoValue(await getText(`/v1/docs/${secretsCollection}`));
    expectNoValue(await getText(`/v1/docs/${secretsCollection}?consistency=stale&prefix=db`));
  });

  it('not from /v1/txn', async () => {
    const res = await s.app.inject({ method: 'POST', url: '/v1/txn', payload: {
      compare: [{ collection: secretsCollection, id: 'db-password', target: 'exists', cmp: '=', value: true }], success: [{ op: 'put', collection: 't', id: 'a', doc: {} }],
    } });
    expect(res.statusCode, res.body).toBe(200);
    expectNoValue(res.body);
  });

  it('not from /v1/watch (the backlog and live events, filtered by collection or not) or /v1/events', async () => {
    const address = await s.app.listen({ port: 0, host: '127.0.0.1' });
    const live = streamUntil(address, `/v1/watch?collection=${secretsCollection}&after=0`, '"id":"live-one"');
    const all = streamUntil(address, '/v1/watch?after=0', '"id":"marker"');
    await new Promise((r) => setTimeout(r, 50));
    expect((await put('live-one', { valueBase64: bytes.toString('base64') })).statusCode).toBe(200);
    await s.app.inject({ method: 'PUT', url: '/v1/docs/w/marker', payload: {} });
    for (const text of [await live, await all]) {
      expect(text).toContain(`"collection":"${secretsCollection}"`);
      expectNoValue(text);
    }
    expectNoValue(await streamUntil(address, '/v1/events?after=0', 'event: sync'));
  });
});

describe('services that use a secret', () => {
  it('refuses an apply that names a secret that does not exist, at its path', async () => {
    const res = await apply(serviceYaml('app', '[db-password, {name: missing, target: m}]'));
    expect(problemPaths(expectError(res, 'bad_request'))).toEqual(['services[0].secrets[1].name']);
    expect((res.json() as { message: string }).message).toContain('no secret named "missing"');
    expectError(await s.app.inject({ url: '/v1/services/app' }), 'not_found');
  });

  it('shows the references in the service, never the value', async () => {
    expect((await apply(serviceYaml('app', '[db-password]'))).statusCode).toBe(200);
    const text = await getText('/v1/services/app');
    expectNoValue(text);
    expect((JSON.parse(text) as { service: { record: { spec: { secrets: unknown } } } }).service.record.spec.secrets).toEqual([{ name: 'db-password', target: 'db-password', mode: 0o400 }]);
    expectNoValue(await getText('/v1/services'));
    expect(JSON.parse(await getText('/v1/secrets/db-password'))).toMatchObject({ secret: { usedBy: ['app'] } });
  });

  it('refuses to remove a secret a service names (its previous spec too) with resource_in_use', async () => {
    expect(expectError(await s.app.inject({ method: 'DELETE', url: '/v1/secrets/db-password' }), 'resource_in_use')).toMatchObject({ services: ['app'] });
    // Applied without it, the previous spec (kept for rollback) still names it.
    expect((await apply(serviceYaml('app', '[]'))).statusCode).toBe(200);
    expect(expectError(await s.app.inject({ method: 'DELETE', url: '/v1/secrets/db-password' }), 'resource_in_use')).toMatchObject({ services: ['app'] });
    expect((await s.app.inject({ method: 'DELETE', url: '/v1/services/app' })).statusCode).toBe(200);
    const res = await s.app.inject({ method: 'DELETE', url: '/v1/secrets/db-password' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ name: 'db-password', removed: true });
    expectError(await s.app.inject({ url: '/v1/secrets/db-password' }), 'not_found');
    expectError(await s.app.inject({ method: 'DELETE', url: '/v1/secrets/db-password' }), 'not_found');
  });

  it('refuses to remove a secret a job names, and lists the job in its view', async () => {
    expect((await put('chore-token', { value: 'job-only' })).statusCode).toBe(200);
    const job = { apiVersion: 'shoal/v1', kind: 'Job', name: 'nightly', image: 'busybox:local', command: ['true'], secrets: ['chore-token'] };
    const applied = await s.app.inject({ method: 'POST', url: '/v1/apply', payload: { documents: [job] } });
    expect(applied.statusCode, applied.body).toBe(200);
    expect(JSON.parse(await getText('/v1/secrets/chore-token'))).toMatchObject({ secret: { usedBy: [], usedByJobs: ['nightly'] } });
    const refused = expectError(await s.app.inject({ method: 'DELETE', url: '/v1/secrets/chore-token' }), 'resource_in_use');
    expect(refused).toMatchObject({ services: [], jobs: ['nightly'] });
    expect((await s.app.inject({ method: 'DELETE', url: '/v1/jobs/nightly' })).statusCode).toBe(200);
    expect((await s.app.inject({ method: 'DELETE', url: '/v1/secrets/chore-token' })).statusCode).toBe(200);
  });
});
