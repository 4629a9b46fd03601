// The image cleaner on the memory runtime and a fake store, time moved by hand: it removes an
// image shoal pulled once no task of its node has used it for the grace period, and never an
// image the operator loaded, pinned, or one a task or any container still uses. The ledger keeps
// what shoal pulled across restarts; image references compare as Docker resolves them.

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Agent } from '../../src/executor/agent.ts';
import { ImageCleaner } from '../../src/executor/image-cleaner.ts';
import { FileImageLedger, MemoryImageLedger, type ImageLedger } from '../../src/executor/image-ledger.ts';
import { normalizeImageRef } from '../../src/executor/image-ref.ts';
import { ManualClock } from '../../src/executor/manual-clock.ts';
import { MemoryRuntime } from '../../src/executor/memory-runtime.ts';
import { runtimeSettingsNone, type ContainerSpec } from '../../src/executor/runtime.ts';
import { clusterId, FakeStore, flush, MemoryLog, run, spec } from './harness.ts';

const graceMs = 60_000;
const tmp = mkdtempSync(path.join(os.tmpdir(), 'shoal-image-cleaner-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function setup(opts: { images?: string[]; pinned?: string[]; ledger?: ImageLedger } = {}) {
  const clock = new ManualClock();
  const store = new FakeStore(clock);
  store.addNode('n1');
  const runtime = new MemoryRuntime({ clock, images: opts.images ?? [], pullAny: true });
  const log = new MemoryLog();
  const cleaner = new ImageCleaner({
    owner: { clusterId, nodeId: 'n1' }, view: store, runtime, clock, log, ledger: opts.ledger ?? new MemoryImageLedger(), graceMs, pinned: opts.pinned ?? [],
    caughtUp: () => store.caughtUp(),
  });
  /** The agent pulled `ref` (the runtime has it now) and told the cleaner. */
  const pulled = async (ref: string): Promise<void> => {
    const pull = runtime.ensureImage(ref, 1_000);
    await flush();
    clock.advance(0); // the memory runtime's pull takes pullDelayMs (0) on the clock
    expect(await pull).toBe('pulled');
    cleaner.notePulled(ref);
  };
  return { clock, store, runtime, log, cleaner, pulled };
}

/** A container of someone else on the same daemon (no shoal labels). */
function foreign(image: string): ContainerSpec {
  return {
    name: `other-${image}`, image, command: null, args: null, env: {}, user: null, labels: { owner: 'operator' },
    limits: { cpuMillis: null, memoryBytes: null }, ports: [], mounts: [], devices: [], capAdd: [], capDrop: [], privileged: false,
    hostNetwork: false, networks: [], dns: [], settings: runtimeSettingsNone(), healthCheck: null, stopSignal: 'SIGTERM', stopGracePeriodMs: 1000, logs: { maxSizeBytes: 1024, maxFiles: 1 },
  };
}

describe('ImageCleaner', () => {
  it('removes an image shoal pulled once unused for the grace period, not before', async () => {
    const { clock, runtime, cleaner, log, pulled } = setup();
    await pulled('reg.example/app:1');
    expect(await cleaner.sweep()).toEqual({ removed: [], forgotten: [], refused: [] }); // unused from now
    clock.advance(graceMs - 1);
    expect((await cleaner.sweep()).removed).toEqual([]);
    expect(runtime.hasImage('reg.example/app:1')).toBe(true);
    clock.advance(1);
    expect((await cleaner.sweep()).removed).toEqual(['reg.example/app:1']);
    expect(runtime.hasImage('reg.example/app:1')).toBe(false);
    expect(cleaner.trackedRefs()).toEqual([]);
    expect(log.matching(/removed image reg\.example\/app:1/)).toHaveLength(1);
  });

  it('removes nothing without a quorum, and once the store has caught up removes what is due', async () => {
    const { clock, store, runtime, cleaner, pulled } = setup();
    await pulled('reg.example/app:1');
    await cleaner.sweep();
    clock.advance(graceMs);
    store.quorum = false;
    await expect(cleaner.sweep()).rejects.toThrow(/no_leader/);
    expect(runtime.hasImage('reg.example/app:1')).toBe(true);
    // The store was behind: a task it did not show yet uses the image, and keeps it.
    store.quorum = true;
    store.addService(spec({ image: 'reg.example/app:1' }));
    store.assign('t1', 'web', 'n1');
    store.lagging.add('t1');
    expect((await cleaner.sweep()).removed).toEqual([]);
    expect(store.barriers).toBe(2);
    expect(runtime.hasImage('reg.example/app:1')).toBe(true);
  });

  it('never removes an image that was on the node already (preloaded by the operator)', async () => {
    const { clock, runtime, cleaner } = setup({ images: ['preloaded/app:1'] });
    expect(await runtime.ensureImage('preloaded/app:1', 1_000)).toBe('present');
    // The agent tells the cleaner only of pulls; nothing is tracked.
    await cleaner.sweep();
    clock.advance(graceMs * 10);
    expect(await cleaner.sweep()).toEqual({ removed: [], forgotten: [], refused: [] });
    expect(runtime.hasImage('preloaded/app:1')).toBe(true);
  });

  it('never removes a pinned image, compared as Docker resolves names', async () => {
    const { clock, runtime, cleaner, pulled } = setup({ pinned: ['nginx', 'reg.example/keep:2'] });
    await pulled('docker.io/library/nginx:latest');
    await pulled('reg.example/keep:2');
    await pulled('reg.example/drop:2');
    await cleaner.sweep();
    clock.advance(graceMs);
    expect((await cleaner.sweep()).removed).toEqual(['reg.example/drop:2']);
    expect(runtime.hasImage('docker.io/library/nginx:latest')).toBe(true);
    expect(runtime.hasImage('reg.example/keep:2')).toBe(true);
    expect(cleaner.trackedRefs()).toEqual(['docker.io/library/nginx:latest', 'reg.example/keep:2']);
  });

  it('keeps an image a task of this node uses, and starts its grace once the task is gone', async () => {
    const { clock, store, runtime, cleaner, pulled } = setup();
    await pulled('reg.example/web:3');
    store.addService(spec({ image: 'reg.example/web:3' }));
    store.assign('t1', 'web', 'n1');
    await cleaner.sweep();
    clock.advance(graceMs * 2);
    expect((await cleaner.sweep()).removed).toEqual([]);
    store.tasks.delete('t1');
    await cleaner.sweep(); // unused from here
    clock.advance(graceMs - 1);
    expect((await cleaner.sweep()).removed).toEqual([]);
    clock.advance(1);
    expect((await cleaner.sweep()).removed).toEqual(['reg.example/web:3']);
    expect(runtime.hasImage('reg.example/web:3')).toBe(false);
  });

  it('keeps an image another container uses (the runtime refuses), and tries again after another grace', async () => {
    const { clock, runtime, cleaner, pulled } = setup();
    await pulled('reg.example/shared:1');
    await runtime.create(foreign('reg.example/shared:1'));
    await cleaner.sweep();
    clock.advance(graceMs);
    expect(await cleaner.sweep()).toEqual({ removed: [], forgotten: [], refused: ['reg.example/shared:1'] });
    expect(runtime.hasImage('reg.example/shared:1')).toBe(true);
    expect(cleaner.trackedRefs()).toEqual(['reg.example/shared:1']);
    clock.advance(graceMs - 1);
    expect(await cleaner.sweep()).toEqual({ removed: [], forgotten: [], refused: [] });
  });

  it('forgets an image removed or re-tagged outside shoal, and then never removes it', async () => {
    const { clock, runtime, cleaner, pulled } = setup();
    await pulled('reg.example/a:1');
    await pulled('reg.example/b:1');
    await cleaner.sweep(); // learns the image ids
    await runtime.removeImage('reg.example/a:1'); // by hand
    runtime.addImage('reg.example/b:1'); // rebuilt under the same tag: a new image
    expect((await cleaner.sweep()).forgotten.sort()).toEqual(['reg.example/a:1', 'reg.example/b:1']);
    clock.advance(graceMs * 2);
    expect((await cleaner.sweep()).removed).toEqual([]);
    expect(runtime.hasImage('reg.example/b:1')).toBe(true);
  });

  it('sweeps by itself on its timer once started, and stops when closed', async () => {
    const { clock, runtime, cleaner, pulled } = setup();
    await pulled('reg.example/timer:1');
    cleaner.start();
    await run(clock, graceMs + graceMs / 2, 1_000);
    expect(runtime.hasImage('reg.example/timer:1')).toBe(false);
    await pulled('reg.example/timer:2');
    await cleaner.close();
    await run(clock, graceMs * 3, 1_000);
    expect(runtime.hasImage('reg.example/timer:2')).toBe(true);
  });

  it("learns of the agent's pulls, and only of pulls", async () => {
    const clock = new ManualClock();
    const store = new FakeStore(clock);
    store.addNode('n1');
    const runtime = new MemoryRuntime({ clock, images: ['here/app:1'], pullAny: true });
    const log = new MemoryLog();
    const cleaner = new ImageCleaner({ owner: { clusterId, nodeId: 'n1' }, view: store, runtime, clock, log, ledger: new MemoryImageLedger(), graceMs, pinned: [] });
    const agent = new Agent({
      owner: { clusterId, nodeId: 'n1' }, view: store, writer: store.writerFor('n1'), caughtUp: () => store.caughtUp(), runtime, clock, log,
      onImagePulled: (image) => cleaner.notePulled(image),
    });
    agent.start();
    try {
      store.addService(spec({ name: 'pulled', image: 'reg.example/pulled:1' }));
      store.addService(spec({ name: 'here', image: 'here/app:1' }));
      store.assign('t1', 'pulled', 'n1');
      store.assign('t2', 'here', 'n1');
      await run(clock, 2_000);
      expect(runtime.all().filter((c) => c.state === 'running')).toHaveLength(2);
      expect(cleaner.trackedRefs()).toEqual(['reg.example/pulled:1']);
    } finally {
      await agent.close();
    }
  });
});

describe('FileImageLedger', () => {
  it('keeps what shoal pulled across a restart', async () => {
    const file = path.join(tmp, 'pulled.json');
    const a = setup({ ledger: new FileImageLedger(file, () => undefined) });
    await a.pulled('reg.example/kept:1');
    expect(JSON.parse(readFileSync(file, 'utf8'))).toMatchObject({ version: 1, images: [{ ref: 'reg.example/kept:1', imageId: null }] });
    const warnings: string[] = [];
    const b = setup({ images: ['reg.example/kept:1'], ledger: new FileImageLedger(file, (m) => warnings.push(m)) });
    expect(b.cleaner.trackedRefs()).toEqual(['reg.example/kept:1']);
    await b.cleaner.sweep();
    b.clock.advance(graceMs);
    expect((await b.cleaner.sweep()).removed).toEqual(['reg.example/kept:1']);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({ version: 1, images: [] });
    expect(warnings).toEqual([]);
  });

  it('starts afresh, with a warning, from a file that is not a ledger; a missing file is an empty one', () => {
    const file = path.join(tmp, 'bad.json');
    writeFileSync(file, '{"version": 1, "images": [{"ref": ""}]}');
    const warnings: string[] = [];
    expect(new FileImageLedger(file, (m) => warnings.push(m)).load()).toEqual([]);
    expect(warnings).toEqual([expect.stringMatching(/not a list of pulled images/)]);
    expect(new FileImageLedger(path.join(tmp, 'absent.json'), (m) => warnings.push(m)).load()).toEqual([]);
    expect(warnings).toHaveLength(1);
  });
});

describe('normalizeImageRef', () => {
  it.each([
    ['nginx', 'nginx:latest'],
    ['nginx:1.25', 'nginx:1.25'],
    ['docker.io/library/nginx', 'nginx:latest'],
    ['index.docker.io/library/nginx:1', 'nginx:1'],
    ['docker.io/me/app', 'me/app:latest'],
    ['reg.example:5000/app', 'reg.example:5000/app:latest'],
    ['reg.example:5000/app:2', 'reg.example:5000/app:2'],
    ['nginx@sha256:abc', 'nginx@sha256:abc'],
    ['nginx:1.25@sha256:abc', 'nginx@sha256:abc'],
    ['library/nginx', 'nginx:latest'],
  ])('%s is %s', (ref, familiar) => {
    expect(normalizeImageRef(ref)).toBe(familiar);
  });
});
