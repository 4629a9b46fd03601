// GET /ui serves the built console with its security headers and ETags, says plainly when the
// node has no build, and the routes the Documents view browses with answer from the store.

import { cpSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consoleRoutes } from '../../src/api/console-routes.ts';
import { singleNode, type SingleNode } from '../api/single-node.ts';
import { builtConsole } from './console-build.ts';

describe('GET /ui', () => {
  it('redirects /ui to /ui/ and serves the page, script and style with a strict CSP and ETags', async () => {
    const app = Fastify();
    await app.register(consoleRoutes, { dirs: [await builtConsole()] });
    const redirect = await app.inject({ method: 'GET', url: '/ui' });
    expect(redirect.statusCode).toBe(308);
    expect(redirect.headers.location).toBe('/ui/');
    const page = await app.inject({ method: 'GET', url: '/ui/' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toContain('text/html');
    expect(page.body).toContain('<script type="module" src="/ui/app.js">');
    expect(page.headers['content-security-policy']).toContain("script-src 'self'");
    expect(page.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(page.headers['x-frame-options']).toBe('DENY');
    const script = await app.inject({ method: 'GET', url: '/ui/app.js' });
    expect(script.headers['content-type']).toContain('text/javascript');
    expect(script.body.length).toBeGreaterThan(1000);
    // Nothing is fetched from elsewhere at run time: no absolute URL to another host in the bundle's imports.
    expect(script.body).not.toMatch(/import\s*[^;]*["']https?:/);
    const again = await app.inject({ method: 'GET', url: '/ui/app.js', headers: { 'if-none-match': String(script.headers.etag) } });
    expect(again.statusCode).toBe(304);
    const css = await app.inject({ method: 'GET', url: '/ui/app.css' });
    expect(css.body).toContain('prefers-color-scheme: dark');
    await app.close();
  });

  it('answers not_found saying how to build when the node has no console build', async () => {
    const app = Fastify();
    await app.register(consoleRoutes, { dirs: [mkdtempSync(path.join(os.tmpdir(), 'no-console-'))] });
    // consoleRoutes throws a ShoalError; the bare fastify here answers it as a 500 with its message.
    const page = await app.inject({ method: 'GET', url: '/ui/' });
    expect(page.body).toContain('npm run build');
    await app.close();
  });

  it('takes a build missing a file (one being written) for no build, and serves it once whole', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'half-console-'));
    writeFileSync(path.join(dir, 'index.html'), '<script src="/ui/app.js"></script>');
    const app = Fastify();
    await app.register(consoleRoutes, { dirs: [dir] });
    expect((await app.inject({ method: 'GET', url: '/ui/' })).body).toContain('npm run build');
    cpSync(await builtConsole(), dir, { recursive: true });
    const page = await app.inject({ method: 'GET', url: '/ui/' });
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('/ui/app.js');
    await app.close();
  });

  it('passes over a folder with index.html alone (src/console/, for a node run from the sources) to the build after it', async () => {
    const sources = mkdtempSync(path.join(os.tmpdir(), 'console-sources-'));
    writeFileSync(path.join(sources, 'index.html'), '<script src="/ui/app.js"></script>');
    const app = Fastify();
    await app.register(consoleRoutes, { dirs: [sources, await builtConsole()] });
    const script = await app.inject({ method: 'GET', url: '/ui/app.js' });
    expect(script.statusCode).toBe(200);
    await app.close();
  });
});

describe('the Documents view\'s routes', () => {
  let n: SingleNode;
  beforeAll(async () => {
    process.env.SHOAL_CONSOLE_DIR = await builtConsole();
    n = await singleNode();
  });
  afterAll(async () => {
    delete process.env.SHOAL_CONSOLE_DIR;
    await n.close();
  });

  it('lists the collections with their document counts, and a document\'s retained changes', async () => {
    for (const [id, v] of [['a', 1], ['b', 1], ['a', 2]] as const) {
      const put = await n.app.inject({ method: 'PUT', url: `/v1/docs/plants/${id}`, payload: { v } });
      expect(put.statusCode).toBe(200);
    }
    await n.app.inject({ method: 'PUT', url: '/v1/docs/rooms/kitchen', payload: { lit: true } });
    const del = await n.app.inject({ method: 'DELETE', url: '/v1/docs/plants/a' });
    expect(del.statusCode).toBe(200);
    const cols = await n.app.inject({ method: 'GET', url: '/v1/collections' });
    expect(cols.statusCode).toBe(200);
    const names = (cols.json() as { items: Array<{ name: string; documents: number }> }).items;
    expect(names.find((c) => c.name === 'plants')?.documents).toBe(1);
    expect(names.find((c) => c.name === 'rooms')?.documents).toBe(1);
    const h = await n.app.inject({ method: 'GET', url: '/v1/docs/plants/a/history' });
    expect(h.statusCode).toBe(200);
    const items = (h.json() as { items: Array<{ type: string; doc?: { v: number } }> }).items;
    expect(items.map((i) => [i.type, i.doc?.v])).toEqual([['put', 1], ['put', 2], ['delete', undefined]]);
  });

  it('refuses a bad collection name and an unknown query parameter with bad_request', async () => {
    const bad = await n.app.inject({ method: 'GET', url: '/v1/docs/Bad%20Name/x/history' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().code).toBe('bad_request');
    const extra = await n.app.inject({ method: 'GET', url: '/v1/collections?x=1' });
    expect(extra.statusCode).toBe(400);
  });

  it('never shows a secret\'s value in its history', async () => {
    const value = 'correct-horse-battery-staple';
    const put = await n.app.inject({ method: 'PUT', url: '/v1/secrets/db-password', payload: { value } });
    expect(put.statusCode).toBe(200);
    const h = await n.app.inject({ method: 'GET', url: '/v1/docs/shoal.secrets/db-password/history' });
    expect(h.statusCode).toBe(200);
    expect((h.json() as { items: unknown[] }).items).toHaveLength(1);
    expect(h.body).not.toContain(value);
    expect(h.body).not.toContain(Buffer.from(value).toString('base64'));
  });

  it('serves the console from the node\'s own API', async () => {
    const page = await n.app.inject({ method: 'GET', url: '/ui/' });
    expect(page.statusCode).toBe(200);
  });
});
