// A replicated volume's hooks (src/executor/volumes/hooks.ts, replicator.ts): run through the
// runtime port (a fake exec) in the running container of the volume's service on this node, and
// around the snapshot: before it, after it; a hook failing, timing out or finding no container
// fails the round with volume_hook_failed naming the hook, its exit code and stderr's tail.

import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ShoalError } from '../../src/errors.ts';
import { runtimeHooks } from '../../src/executor/volumes/hooks.ts';
import { replicateOnce } from '../../src/executor/volumes/replicator.ts';
import type { VolumeEngine } from '../../src/executor/volumes/volume-engine.ts';
import { labelKeys } from '../../src/executor/labels.ts';
import { RuntimeError, type ContainerInfo, type ExecResult, type Labels } from '../../src/executor/runtime.ts';
import type { VolumeRecord, VolumeVersion } from '../../src/resources/volumes.ts';

const owner = { clusterId: 'c1', nodeId: 'n1' };
const container = (id: string, state: ContainerInfo['state'], labels: Labels): ContainerInfo => ({ id, name: id, image: 'x', labels, state, exitCode: null, startedAt: null, finishedAt: null, health: null, error: null });

function fakeRuntime(answer: (id: string, argv: readonly string[], timeoutMs: number) => Promise<ExecResult>) {
  const execs: string[] = [];
  const listed: Labels[] = [];
  return {
    execs, listed,
    runtime: {
      list: async (labels: Labels) => {
        listed.push(labels);
        return [container('old', 'exited', labels), container('live', 'running', labels)];
      },
      exec: async (id: string, argv: readonly string[], timeoutMs: number) => {
        execs.push(`${id}: ${argv.join(' ')} (${timeoutMs})`);
        return answer(id, argv, timeoutMs);
      },
    },
  };
}

async function failure(p: Promise<unknown>): Promise<ShoalError> {
  const err = await p.then(() => null, (e: unknown) => e);
  expect(err).toBeInstanceOf(ShoalError);
  return err as ShoalError;
}

describe('hooks through the runtime port', () => {
  it('run argv in the running container of the service on this node', async () => {
    const f = fakeRuntime(async () => ({ exitCode: 0, stdout: '', stderr: '' }));
    await runtimeHooks(f.runtime, owner)('db', 'before', ['sqlite3', '/data/app.db', '.backup /data/app.bak'], 30_000);
    expect(f.execs).toEqual(['live: sqlite3 /data/app.db .backup /data/app.bak (30000)']);
    expect(f.listed).toEqual([{ [labelKeys.cluster]: 'c1', [labelKeys.node]: 'n1', [labelKeys.service]: 'db' }]);
  });

  it('fail with volume_hook_failed naming the hook, its exit code and stderr\'s tail; on a timeout; without a running container', async () => {
    const bad = fakeRuntime(async () => ({ exitCode: 3, stdout: '', stderr: `${'x'.repeat(1000)}\nError: database is locked\n` }));
    const e = await failure(runtimeHooks(bad.runtime, owner)('db', 'before', ['sqlite3', '/data/app.db', '.backup b'], 30_000));
    expect(e.code).toBe('volume_hook_failed');
    expect(e.message).toMatch(/^the before hook \["sqlite3","\/data\/app.db","\.backup b"\] of service db exited 3: x+\nError: database is locked; no version was sent this round$/);
    expect(e.details).toMatchObject({ phase: 'before', exitCode: 3 });
    expect(String(e.details?.stderr).length).toBeLessThanOrEqual(400);
    const slow = fakeRuntime(async () => { throw new RuntimeError('timeout', 'exec: no answer'); });
    expect((await failure(runtimeHooks(slow.runtime, owner)('db', 'after', ['sync'], 5_000))).message).toMatch(/the after hook \["sync"\] of service db did not end within 5000 ms/);
    const none = { list: async () => [container('old', 'exited', {})], exec: async () => ({ exitCode: 0, stdout: '', stderr: '' }) };
    expect((await failure(runtimeHooks(none, owner)('db', 'before', ['sync'], 5_000))).message).toMatch(/found no running container of the task on this node/);
  });
});

describe('the writer\'s pass with hooks', () => {
  const rec: VolumeRecord = { name: 'pgdata', service: 'db', copies: 1, everyMs: 1000, sizeBytes: 1 << 30, eras: [{ node: 'n1', epoch: 2, fromSeq: 1, base: null }], held: [], lastError: null };
  function setup(failing: string | null) {
    const calls: string[] = [];
    const engine = {
      versions: async () => [] as VolumeVersion[],
      snapshot: async (_n: string, v: VolumeVersion) => { calls.push(`snapshot s${v.seq}`); },
      makeIncrement: async (volume: string, version: VolumeVersion, parent: VolumeVersion | null, sender: { node: string; epoch: number }) => ({ volume, version, parent, sender, bytes: 1, sha256: '0'.repeat(64), file: '/dev/null' }),
      body: () => { const p = new PassThrough(); p.end(); return p; },
      release: async () => undefined,
      drop: async () => undefined,
    } as unknown as VolumeEngine;
    const ports = {
      record: () => rec, holderCandidates: () => ['n2'], recordHeld: async () => undefined, recordError: async () => undefined,
      send: async (to: string) => { calls.push(`send ${to}`); },
      runHook: async (phase: string, argv: readonly string[], timeoutMs: number) => {
        calls.push(`${phase} ${argv.join(' ')} (${timeoutMs})`);
        if (phase === failing) throw new ShoalError('volume_hook_failed', `the ${phase} hook failed`);
      },
    };
    return { calls, run: () => replicateOnce(engine, ports, 'pgdata', { node: 'n1', epoch: 2 }, { before: ['flush'], after: ['resume'], timeoutMs: 30_000 }) };
  }

  it('runs before, then the snapshot, then after, then sends', async () => {
    const s = setup(null);
    await s.run();
    expect(s.calls).toEqual(['before flush (30000)', 'snapshot s1', 'after resume (30000)', 'send n2']);
  });

  it('takes no snapshot when before fails, and sends nothing when after fails', async () => {
    const b = setup('before');
    expect((await failure(b.run())).code).toBe('volume_hook_failed');
    expect(b.calls).toEqual(['before flush (30000)']);
    const a = setup('after');
    expect((await failure(a.run())).code).toBe('volume_hook_failed');
    expect(a.calls).toEqual(['before flush (30000)', 'snapshot s1', 'after resume (30000)']);
  });
});
