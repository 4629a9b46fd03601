// Secrets in a real Docker container (a daemon started here when none runs: test/executor/dockerd.ts;
// the local busybox image: test/executor/test-image.ts): the files the agent writes
// (DiskSecretFiles) and the mounts it adds reach the container at /run/secrets/<target>, with
// their bytes and mode, read-only; and the whole path, an agent on Docker running a task whose
// spec names a secret, and removing the files with the container. Run under the machine-wide
// lock (it starts containers).

import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DockerRuntime } from '../../src/executor/docker-runtime.ts';
import { runtimeSettingsNone, type ContainerSpec, type LogLine } from '../../src/executor/runtime.ts';
import { DiskSecretFiles } from '../../src/executor/secret-files.ts';
import { Agent } from '../../src/executor/agent.ts';
import { systemClock } from '../../src/executor/clock.ts';
import { ManualClock } from '../../src/executor/manual-clock.ts';
import { FakeStore, MemoryLog, spec as serviceSpec } from './harness.ts';
import { defaultSocketPath, ensureDockerd } from './dockerd.ts';
import { ensureTestImage, testImage } from './test-image.ts';

const run = randomBytes(4).toString('hex');
const runLabel = 'shoal.test.run';
const raw = new Docker({ socketPath: defaultSocketPath });
// Secret files go on a tmpfs (the agent refuses a disk): /dev/shm, which the daemon sees too.
const tmp = mkdtempSync(path.join('/dev/shm', 'shoal-docker-secrets-'));
const rt = new DockerRuntime({ env: {} });

function spec(command: string[], mounts: ContainerSpec['mounts']): ContainerSpec {
  return {
    name: `shoal-test-${run}-secrets-${randomBytes(2).toString('hex')}`, image: testImage, command, args: null, env: {}, user: null,
    labels: { [runLabel]: run }, limits: { cpuMillis: null, memoryBytes: null }, ports: [], mounts, devices: [], capAdd: [], capDrop: [],
    privileged: false, hostNetwork: false, networks: [], dns: [], settings: runtimeSettingsNone(), healthCheck: null, stopSignal: 'SIGTERM', stopGracePeriodMs: 1000, logs: { maxSizeBytes: 1024 * 1024, maxFiles: 1 },
  };
}

/** Runs `command` in a container with `mounts` until it exits; answers its exit code and output. */
async function runToEnd(command: string[], mounts: ContainerSpec['mounts']): Promise<{ exitCode: number | null; out: string }> {
  const id = await rt.create(spec(command, mounts));
  await rt.start(id);
  const until = Date.now() + 30_000;
  for (;;) {
    const info = await rt.inspect(id);
    if (info?.state === 'exited') {
      const lines: LogLine[] = [];
      for await (const l of await rt.logs(id, { follow: false, tailLines: null, sinceMs: null })) lines.push(l);
      return { exitCode: info.exitCode, out: lines.map((l) => l.text).join('\n') };
    }
    if (Date.now() > until) throw new Error('the container did not exit');
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  await ensureDockerd();
  await ensureTestImage();
}, 120_000);

/** The agent's containers carry this cluster id, so no other test's (or node's) are touched. */
const agentCluster = `secrets-${run}`;

afterAll(async () => {
  const ours = [...await raw.listContainers({ all: true, filters: { label: [`${runLabel}=${run}`] } }), ...await raw.listContainers({ all: true, filters: { label: [`io.shoal.cluster=${agentCluster}`] } })];
  await Promise.all(ours.map((c) => raw.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
  await rt.close();
  rmSync(tmp, { recursive: true, force: true });
});

describe('secrets in a Docker container', () => {
  it('reads each secret file at /run/secrets/<target> with its bytes and mode, and cannot write it', async () => {
    const files = new DiskSecretFiles(path.join(tmp, 'secrets'));
    const value = `s3cr3t-${run}`;
    const mounts = await files.write(`task-${run}`, [
      { target: 'db-password', mode: 0o400, bytes: Buffer.from(value) },
      { target: 'ca.pem', mode: 0o444, bytes: Buffer.from('cert') },
    ]);
    const r = await runToEnd(['sh', '-c', 'cat /run/secrets/db-password; echo; stat -c "%a %n" /run/secrets/db-password /run/secrets/ca.pem; (echo x >> /run/secrets/db-password) 2>/dev/null || echo read-only'], mounts);
    expect(r.exitCode).toBe(0);
    expect(r.out.split('\n')).toEqual([value, '400 /run/secrets/db-password', '444 /run/secrets/ca.pem', 'read-only']);
  });
});

async function until(what: string, check: () => Promise<boolean> | boolean, deadlineMs = 60_000): Promise<void> {
  const end = Date.now() + deadlineMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('an agent on Docker', () => {
  it('runs a task whose container reads its secret at /run/secrets/NAME, and removes the files with the container', async () => {
    const store = new FakeStore(new ManualClock());
    store.addNode('n1');
    const value = `agent-${run}-value`;
    const dir = path.join(tmp, 'agent-secrets');
    store.addService(serviceSpec({ image: testImage, command: ['sh', '-c', 'cat /run/secrets/db-password; echo; sleep 300'], secrets: ['db-password'], stopGracePeriod: '1s' }));
    store.assign('t1', 'web', 'n1');
    const agent = new Agent({
      owner: { clusterId: agentCluster, nodeId: 'n1' }, view: store, writer: store.writerFor('n1'), caughtUp: () => store.caughtUp(),
      runtime: rt, clock: systemClock, log: new MemoryLog(),
      secrets: {
        read: async (name) => (name === 'db-password' ? { ok: true, bytes: Buffer.from(value) } : { ok: false, wait: false, message: `no secret named ${name}` }),
        files: new DiskSecretFiles(dir),
      },
    });
    agent.start();
    try {
      await until('the task runs', () => store.statuses.get('t1')?.state === 'running');
      const id = store.statuses.get('t1')?.containerId ?? '';
      expect(readFileSync(path.join(dir, 't1', 'db-password'), 'utf8')).toBe(value);
      await until('the container printed its secret', async () => {
        const lines: LogLine[] = [];
        for await (const l of await rt.logs(id, { follow: false, tailLines: null, sinceMs: null })) lines.push(l);
        return lines.some((l) => l.text === value);
      });
      store.update('t1', { desired: 'shutdown' });
      await until('the container is removed', async () => (await rt.inspect(id)) === undefined);
      await until('its secret files are removed', () => readdirSync(dir).length === 0);
      expect(store.statuses.get('t1')?.state).toBe('shutdown');
    } finally {
      await agent.close();
    }
  });
});

describe('a file at an absolute path in a Docker container (issue 39: Compose configs anywhere)', () => {
  it('reads a config bind-mounted at /etc/app/app.conf, with its bytes and mode, and cannot write it', async () => {
    const files = new DiskSecretFiles(path.join(tmp, 'paths'));
    const mounts = await files.write(`task-${run}-paths`, [{ target: '/etc/app/app.conf', mode: 0o444, bytes: Buffer.from(`listen=${run}`) }]);
    const r = await runToEnd(['sh', '-c', 'cat /etc/app/app.conf; echo; stat -c "%a %n" /etc/app/app.conf; (echo x >> /etc/app/app.conf) 2>/dev/null || echo read-only'], mounts);
    expect(r.exitCode).toBe(0);
    expect(r.out.split('\n')).toEqual([`listen=${run}`, '444 /etc/app/app.conf', 'read-only']);
  });
});

describe('a secret file\'s owner in a Docker container (issue 39: compose uid/gid)', () => {
  it('a container running as user 999 reads its file of mode 0400 given to uid 999, and not one of root\'s', async () => {
    const files = new DiskSecretFiles(path.join(tmp, 'owners'));
    const mounts = await files.write(`task-${run}-owners`, [
      { target: 'mine', mode: 0o400, uid: 999, gid: 999, bytes: Buffer.from(`pw=${run}`) },
      { target: 'roots', mode: 0o400, bytes: Buffer.from('root only') },
    ]);
    const s = { ...spec(['sh', '-c', 'cat /run/secrets/mine; echo; stat -c "%u:%g %a" /run/secrets/mine; cat /run/secrets/roots 2>/dev/null || echo denied'], mounts), user: '999:999' };
    const id = await rt.create(s);
    await rt.start(id);
    const until = Date.now() + 30_000;
    for (;;) {
      const info = await rt.inspect(id);
      if (info?.state === 'exited') {
        const lines: LogLine[] = [];
        for await (const l of await rt.logs(id, { follow: false, tailLines: null, sinceMs: null })) lines.push(l);
        expect(info.exitCode).toBe(0);
        expect(lines.map((l) => l.text)).toEqual([`pw=${run}`, '999:999 400', 'denied']);
        return;
      }
      if (Date.now() > until) throw new Error('the container did not exit');
      await new Promise((r) => setTimeout(r, 100));
    }
  });
});
