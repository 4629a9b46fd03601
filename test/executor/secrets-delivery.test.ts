// Delivering secrets to a task's container: the agent (memory runtime, fake store, manual clock)
// writes each secret the spec names before creating the container and mounts it read-only at
// /run/secrets/<target>; a missing secret fails the start with secret_unavailable; the files go
// once no container of the task is left; one that cannot be decrypted yet (an autolocked node)
// keeps the task waiting, `starting` with the reason, until it can. The files (DiskSecretFiles):
// on a tmpfs only, modes, directory, replacing, retaining, and the directory of an older release
// cleaned up.

import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Agent } from '../../src/executor/agent.ts';
import { ManualClock } from '../../src/executor/manual-clock.ts';
import { MemoryRuntime } from '../../src/executor/memory-runtime.ts';
import { checkTmpfs, DiskSecretFiles, MemorySecretFiles } from '../../src/executor/secret-files.ts';
import type { SecretDelivery, SecretRead } from '../../src/executor/secret-delivery.ts';
import { secretRetryMs } from '../../src/executor/agent.ts';
import type { ContainerSpec } from '../../src/executor/runtime.ts';
import { clusterId, FakeStore, MemoryLog, run, spec } from './harness.ts';

// The files must be on a tmpfs: /dev/shm is one on Linux.
const tmp = mkdtempSync(path.join('/dev/shm', 'shoal-secret-files-'));
const onDisk = mkdtempSync(path.join(os.tmpdir(), 'shoal-secret-legacy-'));
afterAll(() => {
  rmSync(tmp, { recursive: true, force: true });
  rmSync(onDisk, { recursive: true, force: true });
});

function setup(secrets: Record<string, Buffer>, delivery: 'memory' | 'none' = 'memory', waitFor?: { until: () => boolean }) {
  const clock = new ManualClock();
  const store = new FakeStore(clock);
  const runtime = new MemoryRuntime({ clock, images: ['busybox:local'] });
  const log = new MemoryLog();
  const files = new MemorySecretFiles();
  /** The mounts of each container created, by task. */
  const mounts = new Map<string, ContainerSpec['mounts']>();
  const create = runtime.create.bind(runtime);
  runtime.create = (s) => {
    mounts.set(s.labels['io.shoal.task'] ?? '', s.mounts);
    return create(s);
  };
  store.addNode('n1');
  const d: SecretDelivery = {
    read: async (name): Promise<SecretRead> => {
      const v = secrets[name];
      if (v === undefined) return { ok: false, wait: false, message: `no secret named ${name} in the store` };
      if (waitFor !== undefined && !waitFor.until()) return { ok: false, wait: true, message: `this node is autolocked and cannot decrypt secret ${name}` };
      // A copy, as the node's source decrypts a new one each time (the agent wipes it after writing the file).
      return { ok: true, bytes: Buffer.from(v) };
    },
    files,
  };
  const agent = new Agent({
    owner: { clusterId, nodeId: 'n1' }, view: store, writer: store.writerFor('n1'), caughtUp: () => store.caughtUp(),
    runtime, clock, log, ...(delivery === 'memory' ? { secrets: d } : {}),
  });
  agent.start();
  return { clock, store, runtime, log, files, agent, mounts };
}

describe('agent: secrets', () => {
  it('writes the files before creating the container, mounted read-only at /run/secrets/<target>, and removes them with the container', async () => {
    const value = Buffer.from([1, 2, 3, 0, 255]);
    const { clock, store, runtime, files, agent, mounts } = setup({ db: value, tls: Buffer.from('key') });
    store.addService(spec({ command: ['sleep', '3600'], secrets: ['db', { name: 'tls', target: 'server.key', mode: '0440' }] }));
    store.assign('t1', 'web', 'n1');
    await run(clock, 1000);
    const [c] = runtime.all();
    expect(c?.state).toBe('running');
    expect(mounts.get('t1')).toEqual([
      { type: 'bind', source: 'memory:secrets/t1/db', target: '/run/secrets/db', readOnly: true },
      { type: 'bind', source: 'memory:secrets/t1/server.key', target: '/run/secrets/server.key', readOnly: true },
    ]);
    expect(files.read('t1', 'db')).toMatchObject({ mode: 0o400, bytes: Uint8Array.from(value) });
    expect(files.read('t1', 'server.key')).toMatchObject({ mode: 0o440 });
    store.update('t1', { desired: 'shutdown' });
    await run(clock, 1000);
    expect(runtime.all()).toEqual([]);
    expect(files.taskIds()).toEqual([]);
    await agent.close();
  });

  it('fails the start with secret_unavailable when a secret is not in the store, and creates nothing', async () => {
    const { clock, store, runtime, files, agent } = setup({ db: Buffer.from('x') });
    store.addService(spec({ command: ['sleep', '3600'], secrets: ['db', 'api-token'] }));
    store.assign('t1', 'web', 'n1');
    await run(clock, 1000);
    expect(runtime.all()).toEqual([]);
    expect(store.statuses.get('t1')).toMatchObject({ state: 'failed', containerId: null });
    expect(store.statuses.get('t1')?.message).toMatch(/^secret_unavailable: no secret named api-token in the store/);
    expect(files.taskIds()).toEqual([]);
    await agent.close();
  });

  it('keeps a task waiting, starting with the reason, while its secret cannot be decrypted, and starts it once it can', async () => {
    let unlocked = false;
    const { clock, store, runtime, files, agent, log } = setup({ db: Buffer.from('pw') }, 'memory', { until: () => unlocked });
    store.addService(spec({ command: ['sleep', '3600'], secrets: ['db'] }));
    store.assign('t1', 'web', 'n1');
    await run(clock, 3 * secretRetryMs);
    expect(runtime.all()).toEqual([]);
    expect(store.statuses.get('t1')).toMatchObject({ state: 'starting' });
    expect(store.statuses.get('t1')?.message).toMatch(/^waiting for secrets: this node is autolocked and cannot decrypt secret db/);
    // Logged once, not at every try.
    expect(log.lines.filter((l) => l.includes('waits: waiting for secrets')).length).toBe(1);
    unlocked = true;
    await run(clock, secretRetryMs + 1000);
    expect(runtime.all().map((c) => c.state)).toEqual(['running']);
    expect(store.statuses.get('t1')).toMatchObject({ state: 'running' });
    expect(files.read('t1', 'db')?.bytes).toEqual(Uint8Array.from(Buffer.from('pw')));
    await agent.close();
  });

  it('reads a registry login\'s password only to pull: a locked node starts a task whose image it has, and waits for one it must pull', async () => {
    const reads: string[] = [];
    const clock = new ManualClock();
    const store = new FakeStore(clock);
    const runtime = new MemoryRuntime({ clock, images: ['reg.home:5000/app:1'] });
    store.addNode('n1');
    const d: SecretDelivery = {
      read: async (name): Promise<SecretRead> => {
        reads.push(name);
        return { ok: false, wait: true, message: 'this node is autolocked' };
      },
      files: new MemorySecretFiles(),
    };
    const agent = new Agent({
      owner: { clusterId, nodeId: 'n1' }, view: store, writer: store.writerFor('n1'), caughtUp: () => store.caughtUp(),
      runtime, clock, log: new MemoryLog(), secrets: d,
      registryLogins: { login: (host) => (host === 'reg.home:5000' ? { host, secret: 'shoal-registry-reg-home-5000', username: 'me' } : undefined) },
    });
    agent.start();
    store.addService(spec({ image: 'reg.home:5000/app:1', command: ['sleep', '3600'] }));
    store.assign('t1', 'web', 'n1');
    await run(clock, 2000);
    expect(store.statuses.get('t1')).toMatchObject({ state: 'running' });
    expect(reads).toEqual([]);
    store.addService(spec({ name: 'api', image: 'reg.home:5000/app:2', command: ['sleep', '3600'] }));
    store.assign('t2', 'api', 'n1');
    await run(clock, 2000);
    expect(store.statuses.get('t2')).toMatchObject({ state: 'starting' });
    expect(store.statuses.get('t2')?.message).toMatch(/^waiting for registry credentials/);
    expect(reads).toContain('shoal-registry-reg-home-5000');
    await agent.close();
  });

  it('fails the start when the agent delivers no secrets, and runs a task without secrets as before', async () => {
    const { clock, store, runtime, agent, mounts } = setup({}, 'none');
    store.addService(spec({ name: 'web', command: ['sleep', '3600'], secrets: ['db'] }));
    store.addService(spec({ name: 'plain', command: ['sleep', '3600'] }));
    store.assign('t1', 'web', 'n1');
    store.assign('t2', 'plain', 'n1');
    await run(clock, 1000);
    expect(store.statuses.get('t1')?.message).toMatch(/^secret_unavailable: this node's agent delivers no secrets/);
    expect(runtime.all().map((c) => [c.labels['io.shoal.task'], c.state])).toEqual([['t2', 'running']]);
    expect(mounts.get('t2')).toEqual([]);
    await agent.close();
  });
});

describe('DiskSecretFiles', () => {
  const dir = path.join(tmp, 'secrets');
  const files = new DiskSecretFiles(dir);
  const mode = (p: string) => statSync(p).mode & 0o777;

  it('writes each file with its mode in a directory only the node reads, and answers the mounts', async () => {
    const mounts = await files.write('t1', [{ target: 'db', mode: 0o400, bytes: Buffer.from('pw') }, { target: 'ca.pem', mode: 0o444, bytes: Buffer.from('cert') }]);
    expect(mounts).toEqual([
      { type: 'bind', source: path.join(dir, 't1', 'db'), target: '/run/secrets/db', readOnly: true },
      { type: 'bind', source: path.join(dir, 't1', 'ca.pem'), target: '/run/secrets/ca.pem', readOnly: true },
    ]);
    expect(readFileSync(path.join(dir, 't1', 'db'), 'utf8')).toBe('pw');
    expect([mode(dir), mode(path.join(dir, 't1')), mode(path.join(dir, 't1', 'db')), mode(path.join(dir, 't1', 'ca.pem'))]).toEqual([0o700, 0o700, 0o400, 0o444]);
  });

  it('replaces what a task had, and keeps only the tasks it is told to', async () => {
    await files.write('t1', [{ target: 'other', mode: 0o400, bytes: Buffer.from('new') }]);
    expect(readdirSync(path.join(dir, 't1'))).toEqual(['other']);
    await files.write('t2', []);
    expect(await files.retain(new Set(['t2']))).toEqual(['t1']);
    expect(readdirSync(dir)).toEqual(['t2']);
    expect(await new DiskSecretFiles(path.join(tmp, 'never-made')).retain(new Set())).toEqual([]);
  });

  it('writes only to a tmpfs: a directory on a disk is refused, naming the setting', async () => {
    await expect(checkTmpfs(tmp)).resolves.toBeUndefined();
    const disk = new DiskSecretFiles(path.join(onDisk, 'shoal-n1'));
    if ((await import('node:fs')).statfsSync(onDisk).type !== 0x01021994) {
      await expect(disk.write('t1', [{ target: 'db', mode: 0o400, bytes: Buffer.from('pw') }])).rejects.toThrow(/is not on a tmpfs.*secrets.tmpfsDir/);
      expect(readdirSync(onDisk)).toEqual([]);
    }
  });

  it('cleans up the files an older release wrote in the data directory, with their containers', async () => {
    const legacy = path.join(onDisk, 'secrets');
    const { mkdirSync, writeFileSync } = await import('node:fs');
    mkdirSync(path.join(legacy, 'old-task'), { recursive: true });
    mkdirSync(path.join(legacy, 'still-running'), { recursive: true });
    writeFileSync(path.join(legacy, 'old-task', 'db'), 'plain');
    const both = new DiskSecretFiles(path.join(tmp, 'with-legacy'), legacy);
    expect(await both.retain(new Set(['still-running']))).toEqual(['old-task']);
    expect(readdirSync(legacy)).toEqual(['still-running']);
  });

  it('never builds a path out of the directory from a task id or a target', async () => {
    await expect(files.write('..', [])).rejects.toThrow(/cannot name a file/);
    await expect(files.write('t3', [{ target: '../escape', mode: 0o400, bytes: Buffer.from('x') }])).rejects.toThrow(/cannot name a file/);
  });
});

describe('secrets at absolute paths (issue 39: Compose configs anywhere)', () => {
  it('the agent mounts a file with an absolute target read-only at that path, beside /run/secrets/ ones', async () => {
    const { clock, store, runtime, files, agent, mounts } = setup({ conf: Buffer.from('listen 80;'), db: Buffer.from('pw') });
    store.addService(spec({ command: ['sleep', '3600'], secrets: [{ name: 'conf', target: '/etc/nginx/nginx.conf', mode: '0444' }, 'db'] }));
    store.assign('t1', 'web', 'n1');
    await run(clock, 1000);
    expect(runtime.all()[0]?.state).toBe('running');
    expect(mounts.get('t1')).toEqual([
      { type: 'bind', source: 'memory:secrets/t1/+paths/0', target: '/etc/nginx/nginx.conf', readOnly: true },
      { type: 'bind', source: 'memory:secrets/t1/db', target: '/run/secrets/db', readOnly: true },
    ]);
    expect(files.read('t1', '/etc/nginx/nginx.conf')).toMatchObject({ mode: 0o444, bytes: Uint8Array.from(Buffer.from('listen 80;')) });
    await agent.close();
  });

  it('DiskSecretFiles writes an absolute target under +paths/ (no file name target can be there), with its mode', async () => {
    const dir = path.join(tmp, 'paths');
    const disk = new DiskSecretFiles(dir);
    const mounts = await disk.write('t1', [
      { target: '/etc/app/app.conf', mode: 0o444, bytes: Buffer.from('a=1') },
      { target: 'paths', mode: 0o400, bytes: Buffer.from('x') },
      { target: '/srv/b.yml', mode: 0o440, bytes: Buffer.from('b: 2') },
    ]);
    expect(mounts).toEqual([
      { type: 'bind', source: path.join(dir, 't1', '+paths', '0'), target: '/etc/app/app.conf', readOnly: true },
      { type: 'bind', source: path.join(dir, 't1', 'paths'), target: '/run/secrets/paths', readOnly: true },
      { type: 'bind', source: path.join(dir, 't1', '+paths', '1'), target: '/srv/b.yml', readOnly: true },
    ]);
    expect(readFileSync(path.join(dir, 't1', '+paths', '1'), 'utf8')).toBe('b: 2');
    expect([mode(path.join(dir, 't1', '+paths')), mode(path.join(dir, 't1', '+paths', '0')), mode(path.join(dir, 't1', '+paths', '1'))]).toEqual([0o700, 0o444, 0o440]);
    await expect(disk.write('t2', [{ target: '/etc/../x', mode: 0o400, bytes: Buffer.from('') }])).rejects.toThrow(/not a clean path/);
  });
});

const mode = (p: string): number => statSync(p).mode & 0o777;

describe('a secret file\'s owner (issue 39: compose uid/gid)', () => {
  it('the agent writes the file with the reference\'s uid and gid (the memory store records them); root\'s are left unsaid', async () => {
    const { clock, store, runtime, files, agent } = setup({ db: Buffer.from('pw'), conf: Buffer.from('a=1') });
    store.addService(spec({ command: ['sleep', '3600'], secrets: [{ name: 'db', uid: 999, gid: 1000, mode: '0400' }, { name: 'conf', target: '/etc/app.conf', gid: 101, mode: '0440' }, { name: 'db', target: 'root-db' }] }));
    store.assign('t1', 'web', 'n1');
    await run(clock, 1000);
    expect(runtime.all()[0]?.state).toBe('running');
    expect(files.read('t1', 'db')).toMatchObject({ uid: 999, gid: 1000, mode: 0o400 });
    expect(files.read('t1', '/etc/app.conf')).toMatchObject({ gid: 101, mode: 0o440 });
    expect(files.read('t1', '/etc/app.conf')?.uid).toBeUndefined();
    const rootFile = files.read('t1', 'root-db');
    expect([rootFile?.uid, rootFile?.gid]).toEqual([undefined, undefined]);
    await agent.close();
  });

  // Changing a file's owner needs root, as the agent runs.
  it('DiskSecretFiles gives each file its owner (the agent runs as root) and its mode; a file of root stays root\'s', async () => {
    const dir = path.join(tmp, 'owners');
    const disk = new DiskSecretFiles(dir);
    await disk.write('t1', [
      { target: 'db', mode: 0o400, uid: 999, gid: 1000, bytes: Buffer.from('pw') },
      { target: '/etc/app.conf', mode: 0o440, gid: 101, bytes: Buffer.from('a=1') },
      { target: 'plain', mode: 0o400, bytes: Buffer.from('x') },
    ]);
    const owner = (p: string): [number, number, number] => {
      const st = statSync(p);
      return [st.uid, st.gid, st.mode & 0o777];
    };
    const root = statSync(dir);
    expect(owner(path.join(dir, 't1', 'db'))).toEqual([999, 1000, 0o400]);
    expect(owner(path.join(dir, 't1', '+paths', '0'))).toEqual([root.uid, 101, 0o440]);
    expect(owner(path.join(dir, 't1', 'plain'))).toEqual([root.uid, root.gid, 0o400]);
  });
});
