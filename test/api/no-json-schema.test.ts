// fastify's JSON-schema compilers are replaced (src/api/no-json-schema.ts): shoal validates with
// zod, and a route that declares a fastify schema fails when registered, saying what to do.

import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { noJsonSchemaCompilers } from '../../src/api/no-json-schema.ts';

describe('noJsonSchemaCompilers', () => {
  it('refuses a route with a body schema when the server gets ready, naming the route and zod', async () => {
    const app = Fastify({ schemaController: noJsonSchemaCompilers });
    app.post('/v1/things', { schema: { body: { type: 'object' } } }, async () => ({}));
    await expect(app.ready()).rejects.toThrow(/POST \/v1\/things declares a fastify JSON schema for validation; shoal compiles none: validate the input with zod/);
    await app.close();
  });

  it('refuses a route with a response schema, for serialisation', async () => {
    const app = Fastify({ schemaController: noJsonSchemaCompilers });
    app.get('/v1/things', { schema: { response: { 200: { type: 'object' } } } }, async () => ({}));
    await expect(app.ready()).rejects.toThrow(/GET \/v1\/things declares a fastify JSON schema for serialisation/);
    await app.close();
  });

  it('serves routes without a schema, errors included', async () => {
    const app = Fastify({ schemaController: noJsonSchemaCompilers });
    app.get('/ok', async () => ({ ok: true }));
    app.get('/bad', async () => { throw Object.assign(new Error('nope'), { statusCode: 400 }); });
    const ok = await app.inject({ method: 'GET', url: '/ok' });
    expect(ok.json()).toEqual({ ok: true });
    const bad = await app.inject({ method: 'GET', url: '/bad' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({ message: 'nope' });
    await app.close();
  });
});
