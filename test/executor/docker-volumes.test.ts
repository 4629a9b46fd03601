// Named volumes with options on a real Docker (issue 39's compose driver_opts; a daemon started
// here when none runs: test/executor/dockerd.ts; the local busybox image: test-image.ts). An
// agent on Docker runs a task whose spec mounts a volume with `type: tmpfs, device: tmpfs,
// o: size=1m` (the local driver's options, as an NFS share's would be, without needing a
// server): Docker holds the volume with exactly those options and the container sees a 1 MiB
// tmpfs there. A volume of that name made beforehand with other options fails the task with
// volume_options_differ (Docker would mount the old one silently), and no container is made.
// Run under the machine-wide lock (it starts containers).

import { randomBytes } from 'node:crypto';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DockerRuntime } from '../../src/executor/docker-runtime.ts';
import type { LogLine } from '../../src/executor/runtime.ts';
import { Agent } from '../../src/executor/agent.ts';
import { systemClock } from '../../src/executor/clock.ts';
import { ManualClock } from '../../src/executor/manual-clock.ts';
import { FakeStore, MemoryLog, spec as serviceSpec } from './harness.ts';
import { defaultSocketPath, ensureDockerd } from './dockerd.ts';
import { ensureTestImage, testImage } from './test-image.ts';

const run = randomBytes(4).toString('hex');
const raw = new Docker({ socketPath: defaultSocketPath });
const rt = new DockerRuntime({ env: {} });
const agentCluster = `volumes-${run}`;
const tmpfs = { type: 'tmpfs', device: 'tmpfs', o: 'size=1m' };
const made = `shoal-test-${run}-made`;
const preexisting = `shoal-test-${run}-preexisting`;

beforeAll(async () => {
  await ensureDockerd();
  await ensureTestImage();
}, 120_000);

afterAll(async () => {
  const ours = (await raw.listContainers({ all: true, filters: { label: ['io.shoal.cluster'] } })).filter((c) => c.Labels['io.shoal.cluster']?.startsWith(agentCluster) === true);
  await Promise.all(ours.map((c) => raw.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
  for (const v of [made, preexisting]) await raw.getVolume(v).remove().catch(() => undefined);
  await rt.close();
});

async function until(what: string, check: () => Promise<boolean> | boolean, deadlineMs = 60_000): Promise<void> {
  const end = Date.now() + deadlineMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** An agent of its own cluster per case, so one case's agent never removes another's container. */
function agentOn(store: FakeStore, cluster: string): Agent {
  const agent = new Agent({
    owner: { clusterId: cluster, nodeId: 'n1' }, view: store, writer: store.writerFor('n1'), caughtUp: () => store.caughtUp(),
    runtime: rt, clock: systemClock, log: new MemoryLog(),
  });
  agent.start();
  return agent;
}

async function logText(id: string): Promise<string[]> {
  const lines: LogLine[] = [];
  for await (const l of await rt.logs(id, { follow: false, tailLines: null, sinceMs: null })) lines.push(l);
  return lines.map((l) => l.text);
}

describe('an agent on Docker, a volume with options', () => {
  it('creates the volume with its options before the container, which sees a 1 MiB tmpfs there', async () => {
    const store = new FakeStore(new ManualClock());
    store.addNode('n1');
    store.addService(serviceSpec({
      image: testImage, command: ['sh', '-c', 'grep " /scratch " /proc/mounts; echo done; sleep 300'], stopGracePeriod: '1s',
      mounts: [{ type: 'volume', source: made, target: '/scratch', volumeOptions: tmpfs }],
    }));
    store.assign('t1', 'web', 'n1');
    const agent = agentOn(store, `${agentCluster}-made`);
    try {
      await until('the task runs', () => store.statuses.get('t1')?.state === 'running');
      const volume = await raw.getVolume(made).inspect();
      expect({ driver: volume.Driver, options: volume.Options }).toEqual({ driver: 'local', options: tmpfs });
      const id = store.statuses.get('t1')?.containerId ?? '';
      await until('the container printed its mount', async () => (await logText(id)).includes('done'));
      const [mountLine] = await logText(id);
      // "tmpfs /scratch tmpfs rw,relatime,size=1024k 0 0"
      expect(mountLine).toMatch(/^tmpfs \/scratch tmpfs \S*size=1024k/);
    } finally {
      await agent.close();
    }
  });

  it('fails the task with volume_options_differ when a volume of that name exists with other options, and makes no container', async () => {
    await raw.createVolume({ Name: preexisting, Driver: 'local', DriverOpts: { type: 'tmpfs', device: 'tmpfs', o: 'size=2m' } });
    const store = new FakeStore(new ManualClock());
    store.addNode('n1');
    store.addService(serviceSpec({
      image: testImage, command: ['sleep', '300'], stopGracePeriod: '1s',
      mounts: [{ type: 'volume', source: preexisting, target: '/scratch', volumeOptions: tmpfs }],
    }));
    store.assign('t2', 'web', 'n1');
    const agent = agentOn(store, `${agentCluster}-refused`);
    try {
      await until('the task fails', () => store.statuses.get('t2')?.state === 'failed');
      expect(store.statuses.get('t2')?.message).toBe(`volume_options_differ: the volume ${preexisting} exists on this node with device=tmpfs o=size=2m type=tmpfs, `
        + 'and the service asks for device=tmpfs o=size=1m type=tmpfs; Docker keeps a volume\'s first options, so the task is not started with the wrong storage. '
        + `Remove the volume on this node once no container uses it (docker volume rm ${preexisting}) and the task starts with a new one, or name another volume`);
      const containers = await raw.listContainers({ all: true, filters: { label: [`io.shoal.cluster=${agentCluster}-refused`] } });
      expect(containers).toEqual([]);
      // The volume is left as it was.
      expect((await raw.getVolume(preexisting).inspect()).Options).toEqual({ type: 'tmpfs', device: 'tmpfs', o: 'size=2m' });
    } finally {
      await agent.close();
    }
  });
});
