// Container logs and the image cleaner against a real Docker daemon (started here when none runs:
// test/executor/dockerd.ts), with the local busybox image (test/executor/test-image.ts) and images
// committed from it; nothing is pulled. Every container and image this file makes carries this
// run's label or tag and is removed afterwards, passed or failed (and so is the image of `shoal
// dev demo-image`, made here with the command as a user runs it).

import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import Docker from 'dockerode';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { demoImage } from '../../src/cli/dev-image.ts';
import { parseSpecs } from '../../src/resources/spec/documents.ts';
import { DockerRuntime } from '../../src/executor/docker-runtime.ts';
import { ImageCleaner } from '../../src/executor/image-cleaner.ts';
import { MemoryImageLedger } from '../../src/executor/image-ledger.ts';
import { ownerLabels } from '../../src/executor/labels.ts';
import { ManualClock } from '../../src/executor/manual-clock.ts';
import { runtimeSettingsNone, RuntimeError, type ContainerSpec, type LogLine, type LogOptions } from '../../src/executor/runtime.ts';
import { defaultSocketPath, ensureDockerd } from './dockerd.ts';
import { FakeStore, MemoryLog } from './harness.ts';
import { ensureTestImage, testImage } from './test-image.ts';

const run = randomBytes(4).toString('hex');
const runLabel = 'shoal.test.run';
const owner = { clusterId: `logs-test-${run}`, nodeId: 'n1' };
const raw = new Docker({ socketPath: defaultSocketPath });
const runtimes: DockerRuntime[] = [];
const images: string[] = [];
let seq = 0;

function runtime(): DockerRuntime {
  const r = new DockerRuntime({ env: {} });
  runtimes.push(r);
  return r;
}

function spec(over: Partial<ContainerSpec> = {}): ContainerSpec {
  seq += 1;
  return {
    name: `shoal-test-${run}-${seq}`, image: testImage, command: ['sleep', '300'], args: null, env: {}, user: null,
    limits: { cpuMillis: null, memoryBytes: null }, ports: [], mounts: [], devices: [], capAdd: [], capDrop: [], privileged: false,
    hostNetwork: false, networks: [], dns: [], settings: runtimeSettingsNone(), healthCheck: null, stopSignal: 'SIGKILL', stopGracePeriodMs: 1_000, logs: { maxSizeBytes: 1024 * 1024, maxFiles: 2 },
    ...over,
    labels: { [runLabel]: run, ...over.labels },
  };
}

async function removeRunContainers(): Promise<void> {
  const list = await raw.listContainers({ all: true, filters: { label: [`${runLabel}=${run}`] } });
  await Promise.all(list.map((c) => raw.getContainer(c.Id).remove({ force: true, v: true }).catch(() => undefined)));
}

/** A new image of its own (one tag, its own id), committed from the test image: as if pulled. */
async function makeImage(name: string): Promise<string> {
  const ref = `shoal-test/gc-${name}:${run}`;
  images.push(ref);
  const c = await raw.createContainer({ Image: testImage, Cmd: ['true'], Labels: { [runLabel]: run } });
  try {
    await c.commit({ repo: `shoal-test/gc-${name}`, tag: run, changes: `LABEL shoal.test.gc=${name}-${run}` });
  } finally {
    await c.remove({ force: true });
  }
  return ref;
}

async function imageThere(ref: string): Promise<boolean> {
  return raw.getImage(ref).inspect().then(() => true, (e: { statusCode?: number }) => {
    if (e.statusCode === 404) return false;
    throw e;
  });
}

async function readAll(rt: DockerRuntime, id: string, opts: Partial<LogOptions> = {}): Promise<LogLine[]> {
  const reader = await rt.logs(id, { follow: false, tailLines: null, sinceMs: null, ...opts });
  const out: LogLine[] = [];
  for await (const l of reader) out.push(l);
  return out;
}

async function waitFor(what: string, probe: () => Promise<boolean>, deadlineMs = 30_000): Promise<void> {
  const until = Date.now() + deadlineMs;
  while (!(await probe())) {
    if (Date.now() > until) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  await ensureDockerd();
  await ensureTestImage();
}, 120_000);

afterEach(async () => {
  for (const r of runtimes.splice(0)) await r.close();
  await removeRunContainers();
});

afterAll(async () => {
  await removeRunContainers();
  for (const ref of images) await raw.getImage(ref).remove({ force: true }).catch(() => undefined);
});

describe('DockerRuntime: logs', () => {
  it("reads a container's stdout and stderr as lines, with Docker's times; tail and since select", async () => {
    const rt = runtime();
    const id = await rt.create(spec({ command: ['sh', '-c', 'echo out1; sleep 0.3; echo err1 >&2; sleep 0.3; echo out2; sleep 1; echo late; exec sleep 300'] }));
    // Pauses between the lines: stdout and stderr are two pipes, and Docker orders lines of the
    // two only by when it read them (the same instant read in either order).
    const before = Date.now();
    await rt.start(id);
    await waitFor('four lines', async () => (await readAll(rt, id)).length === 4);
    const lines = await readAll(rt, id);
    expect(lines.map((l) => `${l.stream}:${l.text}`)).toEqual(['stdout:out1', 'stderr:err1', 'stdout:out2', 'stdout:late']);
    // Docker's clock and ours are the same machine's; a second's slack covers its rounding.
    expect(lines.every((l) => l.at >= before - 1_000 && l.at <= Date.now() + 1_000)).toBe(true);
    expect((await readAll(rt, id, { tailLines: 2 })).map((l) => l.text)).toEqual(['out2', 'late']);
    expect(await readAll(rt, id, { tailLines: 0 })).toEqual([]);
    const lateAt = lines[3]?.at ?? 0;
    expect((await readAll(rt, id, { sinceMs: lateAt })).map((l) => l.text)).toEqual(['late']);
  });

  it('follows new lines until the container exits; a reader that closes ends quietly', async () => {
    const rt = runtime();
    const id = await rt.create(spec({ command: ['sh', '-c', 'echo first; sleep 1; echo second; exit 0'] }));
    await rt.start(id);
    const got = (await readAll(rt, id, { follow: true })).map((l) => l.text);
    expect(got).toEqual(['first', 'second']);

    const quiet = await rt.create(spec());
    await rt.start(quiet);
    const reader = await rt.logs(quiet, { follow: true, tailLines: null, sinceMs: null });
    const done = (async () => { for await (const l of reader) void l; return 'ended'; })();
    reader.close();
    expect(await done).toBe('ended');
  });

  it('says not_found for a container that does not exist', async () => {
    const err = await runtime().logs('shoal-test-no-such-container', { follow: false, tailLines: null, sinceMs: null }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RuntimeError);
    expect(err).toMatchObject({ kind: 'not_found' });
  });
});

describe('ImageCleaner on Docker', () => {
  it('removes an unused image shoal pulled, and keeps a pinned one and ones containers use', async () => {
    const rt = runtime();
    const [unused, pinned, ours, foreign] = [await makeImage('unused'), await makeImage('pinned'), await makeImage('ours'), await makeImage('foreign')];
    // A container of this node (the cleaner's own check) and one of someone else (Docker refuses).
    await rt.create(spec({ image: ours, labels: ownerLabels(owner) }));
    await rt.create(spec({ image: foreign }));
    const clock = new ManualClock();
    const store = new FakeStore(clock);
    store.addNode('n1');
    const graceMs = 60_000;
    const cleaner = new ImageCleaner({ owner, view: store, runtime: rt, clock, log: new MemoryLog(), ledger: new MemoryImageLedger(), graceMs, pinned: [pinned] });
    for (const ref of [unused, pinned, ours, foreign]) cleaner.notePulled(ref);

    expect(await cleaner.sweep()).toEqual({ removed: [], forgotten: [], refused: [] });
    clock.advance(graceMs);
    const outcome = await cleaner.sweep();
    expect(outcome).toEqual({ removed: [unused], forgotten: [], refused: [foreign] });
    expect(await imageThere(unused)).toBe(false);
    for (const kept of [pinned, ours, foreign, testImage]) expect(await imageThere(kept), kept).toBe(true);
    expect(cleaner.trackedRefs()).toEqual([foreign, ours, pinned].sort());
  });
});

describe('shoal dev demo-image', () => {
  const bin = fileURLToPath(new URL('../../bin/shoal.js', import.meta.url));
  const demo = (): Record<string, unknown> => {
    const r = spawnSync(process.execPath, [bin, 'dev', 'demo-image', '--json'], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, DOCKER_HOST: '' } });
    expect(r.status, r.stderr).toBe(0);
    return JSON.parse(r.stdout) as Record<string, unknown>;
  };

  it('imports the image docs/examples/web-local.yaml names, once, and the example\'s command runs in it', async () => {
    await raw.getImage(demoImage).remove({ force: true }).catch(() => undefined);
    try {
      expect(demo()).toMatchObject({ image: demoImage, outcome: 'imported', example: 'docs/examples/web-local.yaml' });
      expect(demo()).toMatchObject({ image: demoImage, outcome: 'present' });
      const [web] = parseSpecs(readFileSync(new URL('../../docs/examples/web-local.yaml', import.meta.url), 'utf8')).services;
      expect(web?.image).toBe(demoImage);
      const rt = runtime();
      const id = await rt.create(spec({ image: demoImage, command: web?.command ?? null, args: web?.args ?? null, stopSignal: 'SIGKILL' }));
      await rt.start(id);
      // Still running a moment later: `sleep` is there (a missing command exits at once).
      await new Promise((r) => setTimeout(r, 300));
      expect(await rt.inspect(id)).toMatchObject({ state: 'running', image: demoImage });
    } finally {
      await removeRunContainers();
      await raw.getImage(demoImage).remove({ force: true }).catch(() => undefined);
    }
  });
});
