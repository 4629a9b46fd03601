// Reading container logs without a daemon: Docker's multiplexed log frames decoded into lines
// however the socket cuts them, lines bounded in length, bytes that are not frames refused; and
// the memory runtime's logs (tail, since, follow until the container stops, a bounded queue).

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DockerLogDecoder, encodeLogFrame, LogFrameError, logLineBytesMax } from '../../src/executor/docker-log-frames.ts';
import { LogQueue } from '../../src/executor/log-queue.ts';
import { ManualClock } from '../../src/executor/manual-clock.ts';
import { MemoryRuntime } from '../../src/executor/memory-runtime.ts';
import { runtimeSettingsNone, type ContainerSpec, type LogLine, type LogReader } from '../../src/executor/runtime.ts';
import { flush } from './harness.ts';

const t0 = '2026-01-02T03:04:05.123456789Z';
const t0Ms = Date.parse(t0);

function decodeAll(chunks: Buffer[]): LogLine[] {
  const d = new DockerLogDecoder(() => 0);
  return [...chunks.flatMap((c) => d.push(c)), ...d.end()];
}

describe('DockerLogDecoder', () => {
  it('splits frames into lines of each stream, with the time Docker stamped', () => {
    const lines = decodeAll([
      encodeLogFrame('stdout', `${t0} hello\n`),
      encodeLogFrame('stderr', `${t0} oops\r\n`),
      encodeLogFrame('stdout', `${t0} two\nlines\n`),
    ]);
    expect(lines).toEqual([
      { stream: 'stdout', at: t0Ms, text: 'hello' },
      { stream: 'stderr', at: t0Ms, text: 'oops' },
      { stream: 'stdout', at: t0Ms, text: 'two' },
      { stream: 'stdout', at: t0Ms, text: 'lines' },
    ]);
  });

  it("joins Docker's partial messages into one line with the first piece's time, and gives a last line without newline at the end", () => {
    const later = '2026-01-02T03:04:06Z';
    const lines = decodeAll([encodeLogFrame('stdout', `${t0} abc`), encodeLogFrame('stdout', `${later} def\n`), encodeLogFrame('stdout', `${later} tail`)]);
    expect(lines).toEqual([{ stream: 'stdout', at: t0Ms, text: 'abcdef' }, { stream: 'stdout', at: Date.parse(later), text: 'tail' }]);
  });

  it('gives the same lines however the bytes are cut', () => {
    const frames = Buffer.concat([
      encodeLogFrame('stdout', `${t0} é ünïcode\n`), encodeLogFrame('stderr', `${t0} err\n`), encodeLogFrame('stdout', `${t0} x\ny\n`),
    ]);
    const whole = decodeAll([frames]);
    fc.assert(fc.property(fc.array(fc.integer({ min: 0, max: frames.length }), { maxLength: 12 }), (cuts) => {
      const at = [0, ...[...cuts].sort((a, b) => a - b), frames.length];
      const chunks = at.slice(1).map((end, i) => frames.subarray(at[i], end));
      expect(decodeAll(chunks)).toEqual(whole);
    }));
  });

  it(`cuts a line longer than ${logLineBytesMax} bytes into pieces of at most that`, () => {
    const long = 'x'.repeat(logLineBytesMax * 2 + 10);
    const lines = decodeAll([encodeLogFrame('stdout', `${t0} ${long}\n`)]);
    expect(lines.map((l) => l.text.length)).toEqual([logLineBytesMax, logLineBytesMax, 10]);
  });

  it('refuses bytes that are not log frames: an unknown stream, an oversized frame', () => {
    const bad = Buffer.from(`${t0} written with a TTY\n`);
    expect(() => new DockerLogDecoder(() => 0).push(bad)).toThrow(LogFrameError);
    const huge = Buffer.alloc(8);
    huge[0] = 1;
    huge.writeUInt32BE(0xffffffff, 4);
    expect(() => new DockerLogDecoder(() => 0).push(huge)).toThrow(/at most/);
  });
});

describe('LogQueue', () => {
  it('drops the oldest unread lines past its bound and ends with the error it was given', async () => {
    const q = new LogQueue(2);
    for (const text of ['a', 'b', 'c']) q.push({ stream: 'stdout', at: 0, text });
    const err = new Error('broke');
    q.end(err as never);
    const got: string[] = [];
    await expect((async () => { for await (const l of q) got.push(l.text); })()).rejects.toBe(err);
    expect(got).toEqual(['b', 'c']);
    expect(q.dropped).toBe(1);
  });
});

function cspec(name: string): ContainerSpec {
  return {
    name, image: 'busybox:local', command: null, args: null, env: {}, user: null, labels: {},
    limits: { cpuMillis: null, memoryBytes: null }, ports: [], mounts: [], devices: [], capAdd: [], capDrop: [], privileged: false,
    hostNetwork: false, networks: [], dns: [], settings: runtimeSettingsNone(), healthCheck: null, stopSignal: 'SIGTERM', stopGracePeriodMs: 1000, logs: { maxSizeBytes: 1024, maxFiles: 1 },
  };
}

async function texts(r: LogReader): Promise<string[]> {
  const out: string[] = [];
  for await (const l of r) out.push(`${l.stream}:${l.text}`);
  return out;
}

describe('MemoryRuntime logs', () => {
  it('reads all, the tail, or since a time; follows until the container stops', async () => {
    const clock = new ManualClock();
    const rt = new MemoryRuntime({ clock, images: ['busybox:local'] });
    const id = await rt.create(cspec('a'));
    await rt.start(id);
    rt.writeLog(id, 'stdout', 'one\ntwo');
    clock.advance(1_000);
    const mid = clock.wallNow();
    rt.writeLog(id, 'stderr', 'three');
    const all = { follow: false, tailLines: null, sinceMs: null };
    expect(await texts(await rt.logs(id, all))).toEqual(['stdout:shoal memory runtime: container started', 'stdout:one', 'stdout:two', 'stderr:three']);
    expect(await texts(await rt.logs(id, { ...all, tailLines: 2 }))).toEqual(['stdout:two', 'stderr:three']);
    expect(await texts(await rt.logs(id, { ...all, tailLines: 0 }))).toEqual([]);
    expect(await texts(await rt.logs(id, { ...all, sinceMs: mid }))).toEqual(['stderr:three']);

    const follow = await rt.logs(id, { follow: true, tailLines: 1, sinceMs: null });
    const got: string[] = [];
    const done = (async () => { for await (const l of follow) got.push(l.text); })();
    rt.writeLog(id, 'stdout', 'four');
    await flush();
    expect(got).toEqual(['three', 'four']);
    rt.exit(id, 3);
    await done;
    expect(got).toEqual(['three', 'four', 'shoal memory runtime: container exited with code 3']);
    await expect(rt.logs('nope', all)).rejects.toMatchObject({ kind: 'not_found' });
  });

  it('ends a follow quietly when the reader closes it', async () => {
    const clock = new ManualClock();
    const rt = new MemoryRuntime({ clock, images: ['busybox:local'] });
    const id = await rt.create(cspec('b'));
    await rt.start(id);
    const follow = await rt.logs(id, { follow: true, tailLines: 0, sinceMs: null });
    const done = texts(follow);
    await flush();
    follow.close();
    expect(await done).toEqual([]);
  });
});
