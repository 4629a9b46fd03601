// The replicated volumes' routes (issue 41, docs/volumes.md) on a one-node cluster: the list and
// one volume's view (the newest complete copy, where, its age, diverged copies), an operator's
// restore (a version some node holds, or empty; refused with a task running, or for a version no
// node holds), and the increment route refusing a sender that is not the volume's writer, with
// no btrfs touched (the refusal comes first).

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeCommand, type JsonObject } from '../../fsm/index.ts';
import { incrementHeader } from '../../src/api/volume-routes.ts';
import { VolumeEngine } from '../../src/executor/volumes/volume-engine.ts';
import { tasksCollection } from '../../src/resources/collections.ts';
import { restoreWriter, volumesCollection, type VolumeRecord } from '../../src/resources/volumes.ts';
import { volumeTable, volumeText } from '../../src/cli/volume.ts';
import { singleNode, type SingleNode } from './single-node.ts';

const v = (seq: number, node: string, epoch = 0) => ({ seq, node, epoch });
const base: VolumeRecord = {
  name: 'pgdata', service: 'db', copies: 2, everyMs: 1000, sizeBytes: 256 * 1024 ** 2,
  eras: [{ node: 'n1', epoch: 0, fromSeq: 1, base: null }, { node: 'n2', epoch: 3, fromSeq: 4, base: v(3, 'n1') }],
  held: [
    { node: 'n2', version: v(2, 'n1'), atMs: 100 }, { node: 'n3', version: v(3, 'n1'), atMs: 200 },
    { node: 'n3', version: v(5, 'n2', 3), atMs: 300 }, { node: 'n1', version: v(4, 'n1'), atMs: 250 },
  ],
  lastError: null,
};

describe('the volume routes', () => {
  let s: SingleNode;
  let dir: string;
  beforeAll(async () => {
    s = await singleNode();
    dir = await mkdtemp(join(tmpdir(), 'shoal-volume-routes-'));
    s.ctx.volumes = new VolumeEngine(dir);
  });
  afterAll(async () => {
    await s?.close();
    await rm(dir, { recursive: true, force: true });
  });

  async function put(collection: string, id: string, doc: unknown): Promise<void> {
    const { result } = await s.node.propose(encodeCommand({ cmd: { op: 'put', collection, id, doc: doc as JsonObject }, ts: Date.now(), principal: 'shoal:test' }), { featureLevel: 6 });
    expect((result as { ok: boolean }).ok).toBe(true);
  }

  it('lists a volume: its writer, its newest complete copy and where, the diverged copies', async () => {
    await put(volumesCollection, 'pgdata', base);
    const r = await s.app.inject({ method: 'GET', url: '/v1/volumes' });
    expect(r.statusCode).toBe(200);
    const [item] = r.json().items;
    expect(item).toMatchObject({
      name: 'pgdata', service: 'db', writer: { node: 'n2', epoch: 3 }, restoring: null, diverged: 1,
      newest: { version: 's5-e3-n2', nodes: ['n3'], atMs: 300 },
    });
    // n1's s4 was taken after n2 became the writer from s3: diverged, listed, never the newest.
    expect(item.held.find((c: { version: string }) => c.version === 's4-e0-n1')).toEqual({ node: 'n1', version: 's4-e0-n1', atMs: 250, state: 'diverged' });
    expect(item.newest.ageMs).toBeGreaterThan(0);
    const one = await s.app.inject({ method: 'GET', url: '/v1/volumes/pgdata' });
    expect({ ...one.json(), newest: { ...one.json().newest, ageMs: 0 } }).toEqual({ ...item, newest: { ...item.newest, ageMs: 0 } });
    const none = await s.app.inject({ method: 'GET', url: '/v1/volumes/nope' });
    expect(none.statusCode).toBe(404);
  });

  it('removes a diverged copy; keeps a complete one unless forced, and even forced the last complete copy and the era\'s only base', async () => {
    await put(volumesCollection, 'media', { ...base, name: 'media', service: 'media' });
    const rm = (body: Record<string, unknown>) => s.app.inject({ method: 'POST', url: '/v1/volumes/media/remove-copy', payload: body });
    const gone = await rm({ node: 'n1', version: 's4-e0-n1' });
    expect(gone.statusCode).toBe(200);
    expect(gone.json().removed).toEqual({ node: 'n1', version: 's4-e0-n1', state: 'diverged' });
    expect(gone.json().volume.diverged).toBe(0);
    expect(gone.json().volume.removing).toEqual([{ node: 'n1', version: 's4-e0-n1' }]);
    const stored = s.ctx.store.get(volumesCollection, 'media')?.doc as unknown as VolumeRecord;
    expect(stored.removing).toEqual([{ node: 'n1', version: v(4, 'n1') }]);
    expect(stored.held.some((c) => c.node === 'n1')).toBe(false);
    const again = await rm({ node: 'n1', version: 's4-e0-n1' });
    expect(again.statusCode).toBe(404);
    expect(again.json().message).toMatch(/removed already/);
    const kept = async (body: Record<string, unknown>, reason: string): Promise<void> => {
      const r = await rm(body);
      expect(r.statusCode, JSON.stringify(body)).toBe(409);
      expect(r.json()).toMatchObject({ code: 'volume_copy_kept', details: { reason } });
    };
    // n3's s5 is the newest complete copy and its only one; s3 the base of n2's era, only on n3.
    await kept({ node: 'n3', version: 's5-e3-n2' }, 'not_diverged');
    await kept({ node: 'n3', version: 's5-e3-n2', force: true }, 'last_complete');
    await kept({ node: 'n3', version: 's3-e0-n1', force: true }, 'era_base');
    await kept({ node: 'n2', version: 's2-e0-n1' }, 'not_diverged');
    const forced = await rm({ node: 'n2', version: 's2-e0-n1', force: true });
    expect(forced.statusCode).toBe(200);
    expect(forced.json().removed.state).toBe('complete');
    expect((await rm({ node: 'n9', version: 's5-e3-n2' })).statusCode).toBe(404);
    expect((await rm({ node: 'n3', version: 'newest' })).statusCode).toBe(400);
    expect((await s.app.inject({ method: 'POST', url: '/v1/volumes/nope/remove-copy', payload: { node: 'n3', version: 's5-e3-n2' } })).statusCode).toBe(404);
  });

  it('refuses a restore that names no version or both, a version that is not a name, or one no node holds', async () => {
    for (const body of [{}, { version: 's3-e0-n1', empty: true }]) {
      const r = await s.app.inject({ method: 'POST', url: '/v1/volumes/pgdata/restore', payload: body });
      expect(r.statusCode).toBe(400);
    }
    const bad = await s.app.inject({ method: 'POST', url: '/v1/volumes/pgdata/restore', payload: { version: 'latest' } });
    expect(bad.statusCode).toBe(400);
    const missing = await s.app.inject({ method: 'POST', url: '/v1/volumes/pgdata/restore', payload: { version: 's1-e0-n1' } });
    expect(missing.statusCode).toBe(409);
    expect(missing.json()).toMatchObject({ code: 'volume_no_copy', details: { newest: 's5-e3-n2', nodes: ['n3'] } });
  });

  it('restores an older version: it becomes the newest complete copy, later ones diverged, no writer until the task starts', async () => {
    const r = await s.app.inject({ method: 'POST', url: '/v1/volumes/pgdata/restore', payload: { version: 's3-e0-n1' } });
    expect(r.statusCode).toBe(200);
    expect(r.json()).toMatchObject({ restoring: 's3-e0-n1', volume: { writer: null, restoring: { version: 's3-e0-n1' }, newest: { version: 's3-e0-n1', nodes: ['n3'] } } });
    const rec = s.store.get(volumesCollection, 'pgdata')?.doc as unknown as VolumeRecord;
    expect(rec.eras.at(-1)).toEqual({ node: restoreWriter, epoch: 0, fromSeq: 4, base: v(3, 'n1') });
    const view = (await s.app.inject({ method: 'GET', url: '/v1/volumes/pgdata' })).json();
    expect(view.held.filter((c: { state: string }) => c.state === 'diverged').map((c: { version: string }) => c.version).sort()).toEqual(['s4-e0-n1', 's5-e3-n2']);
  });

  it('restores a diverged version when asked, and empty with --empty', async () => {
    const r = await s.app.inject({ method: 'POST', url: '/v1/volumes/pgdata/restore', payload: { version: 's5-e3-n2' } });
    expect(r.statusCode).toBe(200);
    expect(r.json().volume.newest.version).toBe('s5-e3-n2');
    const e = await s.app.inject({ method: 'POST', url: '/v1/volumes/pgdata/restore', payload: { empty: true } });
    expect(e.statusCode).toBe(200);
    expect(e.json()).toMatchObject({ restoring: null, volume: { writer: null, newest: null, restoring: { version: null } } });
    expect((s.store.get(volumesCollection, 'pgdata')?.doc as unknown as VolumeRecord).eras).toEqual([]);
  });

  it('refuses a restore while a task of the service runs on a ready node (stop-first)', async () => {
    await put(volumesCollection, 'pgdata', base);
    await put('shoal.nodes', 'n2', {
      id: 'n2', name: 'n2', addresses: { api: '127.0.0.1:2', peer: '127.0.0.1:3' }, capacity: { cpuMillis: 1000, memoryBytes: 1 << 30 }, labels: {},
      availability: 'active', state: 'ready', epoch: 3, runtime: { status: 'up', error: null }, softwareVersion: '0.0.0-test', mesh: null,
    });
    await put(tasksCollection, 't1', {
      id: 't1', service: 'db', slot: 1, specVersion: 1, nodeId: 'n2', desired: 'running', observed: 'running', assignedTerm: 1, nodeEpoch: 3, containerId: null,
      exitCode: null, message: null, pendingReason: null, attempt: 0, createdAt: 1, assignedAt: 1, startedAt: 1, finishedAt: null, updatedAt: 1,
    });
    const r = await s.app.inject({ method: 'POST', url: '/v1/volumes/pgdata/restore', payload: { version: 's3-e0-n1' } });
    expect(r.statusCode).toBe(409);
    expect(r.json()).toMatchObject({ code: 'volume_in_use', details: { service: 'db', tasks: ['t1'] } });
    expect((s.store.get(volumesCollection, 'pgdata')?.doc as unknown as VolumeRecord).eras).toEqual(base.eras);
  });

  it('the stream route takes ?parent: a version name other than the one asked for; a version not held is volume_no_copy', async () => {
    const get = (q: string) => s.app.inject({ method: 'GET', url: `/v1/volumes/pgdata/versions/s5-e3-n2/stream${q}` });
    expect((await get('?parent=s5-e3-n2')).json()).toMatchObject({ code: 'bad_request', message: expect.stringMatching(/other than the one asked for/) });
    expect((await get('?parent=latest')).statusCode).toBe(400);
    expect((await get('?other=1')).statusCode).toBe(400);
    for (const q of ['', '?parent=s3-e0-n1']) {
      const r = await get(q);
      expect(r.statusCode, q).toBe(409);
      expect(r.json()).toMatchObject({ code: 'volume_no_copy', details: { volume: 'pgdata', version: 's5-e3-n2' } });
    }
  });

  it('refuses an increment from a node that is not the volume\'s writer, and one without its offer', async () => {
    await put(volumesCollection, 'pgdata', base);
    const offer = { volume: 'pgdata', version: v(6, 'n1'), parent: v(4, 'n1'), sender: { node: 'n1', epoch: 0 }, bytes: 4, sha256: '0'.repeat(64) };
    const r = await s.app.inject({
      method: 'PUT', url: '/v1/volumes/pgdata/increments', payload: Buffer.from('abcd'),
      headers: { 'content-type': 'application/octet-stream', [incrementHeader]: Buffer.from(JSON.stringify(offer)).toString('base64url') },
    });
    expect(r.statusCode).toBe(409);
    expect(r.json()).toMatchObject({ code: 'volume_copy_refused', details: { reason: 'stale_epoch' } });
    expect(r.json().message).toMatch(/n1 \(epoch 0\) is not the writer of volume pgdata \(n2, epoch 3 is\)/);
    const noOffer = await s.app.inject({ method: 'PUT', url: '/v1/volumes/pgdata/increments', payload: Buffer.from('abcd'), headers: { 'content-type': 'application/octet-stream' } });
    expect(noOffer.statusCode).toBe(400);
    const wrongName = await s.app.inject({
      method: 'PUT', url: '/v1/volumes/other/increments', payload: Buffer.from('abcd'),
      headers: { 'content-type': 'application/octet-stream', [incrementHeader]: Buffer.from(JSON.stringify(offer)).toString('base64url') },
    });
    expect(wrongName.statusCode).toBe(400);
  });
});

describe('shoal volume ls and inspect', () => {
  const item = {
    name: 'pgdata', service: 'db', copies: 2, everyMs: 30_000, sizeBytes: 1024 ** 3, writer: { node: 'n2', epoch: 3 },
    newest: { version: 's5-e3-n2', nodes: ['n1', 'n3'], atMs: 0, ageMs: 12_000 }, restoring: null, lastError: { atMs: 1, message: 'n1: volume_copy_refused: no_parent' },
    held: [{ node: 'n3', version: 's5-e3-n2', atMs: 0, state: 'complete' }, { node: 'n1', version: 's4-e0-n1', atMs: 0, state: 'diverged' }], diverged: 1, rev: 7,
  };

  it('lists the writer, newest copy, where, its age, the interval and the last error', () => {
    const lines = volumeTable([item]).split('\n');
    expect(lines[0]).toMatch(/^NAME\s+SERVICE\s+WRITER\s+NEWEST\s+ON\s+AGE\s+COPIES\s+LAST ERROR$/);
    expect(lines[1]).toMatch(/^pgdata\s+db\s+n2\s+s5-e3-n2\s+n1,n3\s+12s\s+2 every 30s\s+n1: volume_copy_refused: no_parent$/);
    expect(volumeTable([{ ...item, writer: null, newest: null, restoring: { version: null } }])).toMatch(/- \(restoring empty\)/);
  });

  it('inspects one with every copy, complete or diverged', () => {
    const text = volumeText(item);
    expect(text).toContain('newest:    s5-e3-n2 on n1, n3, 12s old');
    expect(text).toMatch(/s4-e0-n1\s+n1\s+diverged/);
  });
});
