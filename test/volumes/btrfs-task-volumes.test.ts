// Preparing a task's replicated volume on real btrfs (issue 41, task-volumes.ts): the record
// must name this node, in its epoch, the writer; a first era starts empty; a restart within the
// era keeps the data; an era on another node restores its base there; a restart in place with
// a new epoch keeps the live volume; an era restored empty sets the old data aside, kept.
// Needs root and btrfs-progs.

import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EngineTaskVolumes } from '../../src/executor/volumes/task-volumes.ts';
import { VolumeEngine } from '../../src/executor/volumes/volume-engine.ts';
import type { MountSpec } from '../../src/resources/spec/service-spec.ts';
import type { VolumeRecord } from '../../src/resources/volumes.ts';

const size = 160 * 1024 * 1024;
const mount: MountSpec = { type: 'volume', source: 'hass', target: '/config', readOnly: false, replicate: { copies: 1, everyMs: 1000, sizeBytes: size } };
let base: string;
let a: VolumeEngine;
let b: VolumeEngine;
let rec: VolumeRecord;

beforeAll(async () => {
  base = await mkdtemp(join(tmpdir(), 'shoal-task-volumes-'));
  a = new VolumeEngine(join(base, 'a'));
  b = new VolumeEngine(join(base, 'b'));
  rec = { name: 'hass', service: 'hass', copies: 1, everyMs: 1000, sizeBytes: size, eras: [], held: [], lastError: null };
});

afterAll(async () => {
  for (const e of [a, b]) await e.unmount('hass').catch(() => undefined);
  await rm(base, { recursive: true, force: true });
});

describe('a task\'s replicated volume', () => {
  const onA = () => new EngineTaskVolumes(a, () => rec);
  const onB = () => new EngineTaskVolumes(b, () => rec);

  it('waits until the record names this node and epoch the writer', async () => {
    expect(await onA().prepare({ id: 'a', epoch: 1 }, [mount])).toEqual({ ok: false, wait: true, message: 'waiting for volume hass\'s record to name this node (epoch 1) its writer' });
    rec = { ...rec, eras: [{ node: 'a', epoch: 0, fromSeq: 1, base: null }] };
    expect(await onA().prepare({ id: 'a', epoch: 1 }, [mount])).toMatchObject({ ok: false, wait: true });
  });

  it('starts a first era empty, binds the live volume, and keeps its data on a restart within the era', async () => {
    rec = { ...rec, eras: [{ node: 'a', epoch: 1, fromSeq: 1, base: null }] };
    const plain: MountSpec = { type: 'volume', source: 'other', target: '/other', readOnly: false };
    const r = await onA().prepare({ id: 'a', epoch: 1 }, [mount, plain]);
    expect(r).toEqual({ ok: true, mounts: [{ type: 'bind', source: a.livePath('hass'), target: '/config', readOnly: false }, plain] });
    await writeFile(join(a.livePath('hass'), 'configuration.yaml'), 'v1\n');
    expect((await onA().prepare({ id: 'a', epoch: 1 }, [mount])).ok).toBe(true);
    expect(await readFile(join(a.livePath('hass'), 'configuration.yaml'), 'utf8')).toBe('v1\n');
  });

  it('restores the era\'s base on the node that takes over, and fails when that node lacks it', async () => {
    await a.snapshot('hass', { seq: 1, node: 'a', epoch: 1 });
    rec = { ...rec, eras: [...rec.eras, { node: 'b', epoch: 3, fromSeq: 2, base: { seq: 1, node: 'a', epoch: 1 } }] };
    const lacking = await onB().prepare({ id: 'b', epoch: 3 }, [mount]);
    expect(lacking).toMatchObject({ ok: false, wait: false, message: expect.stringMatching(/^volume_no_copy: /) });
    const inc = await a.makeIncrement('hass', { seq: 1, node: 'a', epoch: 1 }, null, { node: 'a', epoch: 1 });
    await b.receive(inc, size, a.body(inc), () => null);
    await a.release(inc);
    expect((await onB().prepare({ id: 'b', epoch: 3 }, [mount])).ok).toBe(true);
    expect(await readFile(join(b.livePath('hass'), 'configuration.yaml'), 'utf8')).toBe('v1\n');
  });

  it('keeps the live volume on a restart in place with a new epoch; an empty restore sets the data aside', async () => {
    await writeFile(join(b.livePath('hass'), 'configuration.yaml'), 'v2\n');
    rec = { ...rec, eras: [...rec.eras, { node: 'b', epoch: 4, fromSeq: 2, base: { seq: 1, node: 'a', epoch: 1 } }] };
    expect((await onB().prepare({ id: 'b', epoch: 4 }, [mount])).ok).toBe(true);
    expect(await readFile(join(b.livePath('hass'), 'configuration.yaml'), 'utf8')).toBe('v2\n');
    // The operator restored it empty (no era), and the task was placed on a again.
    rec = { ...rec, eras: [{ node: 'a', epoch: 2, fromSeq: 2, base: null }] };
    expect((await onA().prepare({ id: 'a', epoch: 2 }, [mount])).ok).toBe(true);
    expect(await readdir(a.livePath('hass'))).toEqual([]);
    expect(await a.diverged('hass')).toEqual(['live-1']);
  });
});
