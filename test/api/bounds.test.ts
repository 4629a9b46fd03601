// The API's bounds, each refused with a catalogued error and counted in /metrics: watch streams
// per node (503 overloaded) and per client address (429 too_many_requests), both with
// Retry-After; open connections (503 on the request of a connection past the bound, then closed);
// concurrent snapshot downloads (503), and the download streamed in the file format.

import { request, type IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { decodeSnapshotFile, encodeSnapshotFile, encodeSnapshotFileParts } from '../../src/node/recovery/snapshot-file.ts';
import { expectError } from './expect-error.ts';
import { singleNode, type SingleNode } from './single-node.ts';

let open: SingleNode | undefined;
const cleanups: (() => void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) c();
  await open?.close();
  open = undefined;
});

async function listening(limits: Parameters<typeof singleNode>[0]): Promise<{ s: SingleNode; port: number }> {
  const s = await singleNode(limits);
  open = s;
  const addr = await s.app.listen({ port: 0, host: '127.0.0.1' });
  return { s, port: Number(new URL(addr).port) };
}

interface Got { statusCode: number; headers: Record<string, unknown>; body: string; res: IncomingMessage }

/** A GET from a given local address; resolves at the response head (the body is read only for errors). */
function get(port: number, path: string, localAddress = '127.0.0.1'): Promise<Got> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, localAddress, agent: false }, (res) => {
      const got: Got = { statusCode: res.statusCode ?? 0, headers: res.headers, body: '', res };
      if (got.statusCode === 200) {
        cleanups.push(() => res.destroy());
        resolve(got);
        return;
      }
      res.on('data', (b: Buffer) => { got.body += b.toString(); });
      res.on('end', () => resolve(got));
    });
    req.on('error', reject);
    req.end();
  });
}

async function metric(s: SingleNode, line: string): Promise<number | undefined> {
  const text = (await s.app.inject({ url: '/metrics' })).body;
  const found = text.split('\n').find((l) => l.startsWith(`${line} `));
  return found === undefined ? undefined : Number(found.split(' ')[1]);
}

describe('watch streams', () => {
  it('refuses a client address past its share with 429 and the node past its bound with 503, both with Retry-After', async () => {
    const { s, port } = await listening({ limits: { watchStreamsMax: 3, watchStreamsPerClientMax: 2 } });
    for (let i = 0; i < 2; i++) expect((await get(port, '/v1/watch')).statusCode).toBe(200);
    const mine = await get(port, '/v1/watch');
    expect(expectError(mine, 'too_many_requests')).toMatchObject({ limit: 'watchStreamsPerClientMax', max: 2 });
    expect(mine.headers['retry-after']).toBe('1');
    // Another client address still has its share, until the node is full.
    expect((await get(port, '/v1/watch', '127.0.0.2')).statusCode).toBe(200);
    const full = await get(port, '/v1/watch', '127.0.0.3');
    expect(expectError(full, 'overloaded')).toMatchObject({ limit: 'watchStreamsMax', max: 3 });
    expect(full.headers['retry-after']).toBe('1');
    expect(await metric(s, 'shoal_api_watch_streams')).toBe(3);
    expect(await metric(s, 'shoal_api_refused_total{limit="watchStreamsPerClientMax"}')).toBe(1);
    expect(await metric(s, 'shoal_api_refused_total{limit="watchStreamsMax"}')).toBe(1);
    // A closed stream gives its slot back.
    cleanups.splice(0).forEach((c) => c());
    while ((await metric(s, 'shoal_api_watch_streams')) !== 0) await new Promise((r) => setImmediate(r));
    expect((await get(port, '/v1/watch')).statusCode).toBe(200);
  });
});

describe('connections', () => {
  it('answers a request on a connection past connectionsMax with 503 overloaded and closes it', async () => {
    const { s, port } = await listening({ limits: { connectionsMax: 2 } });
    const held: Socket[] = [];
    for (let i = 0; i < 2; i++) {
      const sock = connect(port, '127.0.0.1');
      held.push(sock);
      cleanups.push(() => sock.destroy());
      // Answered, so the server counts it before the next one connects.
      await new Promise<void>((resolve) => {
        sock.once('data', () => resolve());
        sock.write('GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n');
      });
    }
    const excess = await new Promise<string>((resolve) => {
      const sock = connect(port, '127.0.0.1');
      let data = '';
      sock.on('data', (b: Buffer) => { data += b.toString(); });
      sock.on('close', () => resolve(data));
      sock.write('GET /v1/docs/c HTTP/1.1\r\nhost: x\r\n\r\n');
    });
    expect(excess).toMatch(/^HTTP\/1.1 503/);
    expect(excess.toLowerCase()).toContain('connection: close');
    expect(excess.toLowerCase()).toContain('retry-after: 1');
    const body = JSON.parse(excess.slice(excess.indexOf('\r\n\r\n') + 4)) as { code: string; details: { limit: string } };
    expect(body).toMatchObject({ code: 'overloaded', details: { limit: 'connectionsMax' } });
    expect(await metric(s, 'shoal_api_refused_total{limit="connectionsMax"}')).toBe(1);
    // Once a held connection closes, a new one is served.
    held[0]?.destroy();
    while ((await metric(s, 'shoal_api_connections')) !== 1) await new Promise((r) => setImmediate(r));
    expect((await get(port, '/healthz')).statusCode).toBe(200);
  });
});

describe('snapshot downloads', () => {
  it('streams a snapshot file that decodes to the store, and refuses a download past snapshotDownloadsMax', async () => {
    const { s, port } = await listening({ bodyBytesMax: 1024 * 1024, limits: { snapshotDownloadsMax: 1 } });
    // Several megabytes, so that an unread download cannot finish into the socket buffers.
    for (let t = 0; t < 6; t++) {
      const success = Array.from({ length: 100 }, (_, i) => ({ op: 'put', collection: 'big', id: `t${t}-${i}`, doc: { pad: 'x'.repeat(8000) } }));
      expect((await s.app.inject({ method: 'POST', url: '/v1/txn', payload: { success } })).statusCode).toBe(200);
    }
    const first = await get(port, '/v1/cluster/snapshot');
    expect(first.statusCode).toBe(200);
    first.res.pause();
    expect(await metric(s, 'shoal_api_snapshot_downloads')).toBe(1);
    const second = await get(port, '/v1/cluster/snapshot');
    expect(expectError(second, 'overloaded')).toMatchObject({ limit: 'snapshotDownloadsMax', max: 1 });
    expect(second.headers['retry-after']).toBe('1');
    const chunks: Buffer[] = [];
    first.res.on('data', (b: Buffer) => chunks.push(b));
    const ended = new Promise((r) => first.res.on('end', r));
    first.res.resume();
    await ended;
    const bytes = Buffer.concat(chunks);
    expect(bytes.length).toBe(Number(first.headers['content-length']));
    const file = decodeSnapshotFile(bytes, 'download');
    expect(file.index).toBe(s.node.appliedIndex);
    expect(Buffer.from(file.app).equals(Buffer.from(s.store.snapshot()))).toBe(true);
    while ((await metric(s, 'shoal_api_snapshot_downloads')) !== 0) await new Promise((r) => setImmediate(r));
    expect((await get(port, '/v1/cluster/snapshot')).statusCode).toBe(200);
  });
});

describe('encodeSnapshotFileParts', () => {
  it('gives the same bytes as encodeSnapshotFile, pausing between slices', async () => {
    const s = await singleNode();
    open = s;
    for (let i = 0; i < 20; i++) await s.app.inject({ method: 'PUT', url: `/v1/docs/c/d${i}`, payload: { i } });
    const meta = { clusterId: 'test-cluster', index: s.node.appliedIndex, term: s.node.currentTerm, members: s.node.membership.list() };
    let pauses = 0;
    const pause = async (): Promise<void> => { pauses++; };
    const parts = await encodeSnapshotFileParts(meta, await s.store.snapshotInSlices(pause), pause, 64);
    expect(Buffer.concat(parts).equals(Buffer.from(encodeSnapshotFile({ ...meta, app: s.store.snapshot() })))).toBe(true);
    expect(pauses).toBeGreaterThan(1);
  });
});
