// The Docker runtime against a real daemon (started here when none runs: test/executor/dockerd.ts)
// with the local busybox image (test/executor/test-image.ts); nothing is pulled. Every container
// carries this run's label and is removed after each test, passed or failed.

import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import Docker from 'dockerode';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DockerRuntime } from '../../src/executor/docker-runtime.ts';
import { runtimeSettingsNone, RuntimeError, type ContainerInfo, type ContainerSpec, type Labels, type RuntimeEvent } from '../../src/executor/runtime.ts';
import { DockerodeNetworks } from '../../net/overlay-docker.ts';
import { bridgeName, dockerNetworkName } from '../../src/resources/overlay-names.ts';
import { defaultSocketPath, ensureDockerd } from './dockerd.ts';
import { SocketProxy } from './socket-proxy.ts';
import { ensureTestImage, removeTestTag, testImage } from './test-image.ts';

const run = randomBytes(4).toString('hex');
const runLabel = 'shoal.test.run';
const volumeName = `shoal-test-${run}-vol`;
const raw = new Docker({ socketPath: defaultSocketPath });
const tmp = mkdtempSync(path.join(os.tmpdir(), 'shoal-docker-test-'));
const runtimes: DockerRuntime[] = [];
const proxies: SocketProxy[] = [];
let seq = 0;

function runtime(opts: ConstructorParameters<typeof DockerRuntime>[0] = {}): DockerRuntime {
  const r = new DockerRuntime({ env: {}, ...opts });
  runtimes.push(r);
  return r;
}

function proxy(...args: ConstructorParameters<typeof SocketProxy>): SocketProxy {
  const p = new SocketProxy(...args);
  proxies.push(p);
  return p;
}

function spec(over: Partial<ContainerSpec> = {}): ContainerSpec {
  seq += 1;
  return {
    name: `shoal-test-${run}-${seq}`,
    image: testImage,
    command: ['sleep', '300'],
    args: null,
    env: {},
    user: null,
    limits: { cpuMillis: null, memoryBytes: null },
    ports: [],
    mounts: [],
    devices: [],
    capAdd: [],
    capDrop: [],
    privileged: false,
    hostNetwork: false, networks: [], dns: [], settings: runtimeSettingsNone(),
    healthCheck: null,
    stopSignal: 'SIGTERM',
    stopGracePeriodMs: 10_000,
    logs: { maxSizeBytes: 10 * 1024 * 1024, maxFiles: 3 },
    ...over,
    labels: { [runLabel]: run, ...over.labels },
  };
}

/** Polls `probe` until it returns a value other than undefined; fails after `deadlineMs`. */
async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, deadlineMs = 30_000): Promise<T> {
  const until = Date.now() + deadlineMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > until) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function waitForState(rt: DockerRuntime, id: string, ok: (i: ContainerInfo) => boolean, what: string): Promise<ContainerInfo> {
  return waitFor(what, async () => {
    const info = await rt.inspect(id);
    return info !== undefined && ok(info) ? info : undefined;
  });
}

async function rejection(p: Promise<unknown>): Promise<RuntimeError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(RuntimeError);
    return err as RuntimeError;
  }
  throw new Error('expected a rejection');
}

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

async function removeRunContainers(): Promise<void> {
  const list = await raw.listContainers({ all: true, filters: { label: [`${runLabel}=${run}`] } });
  await Promise.all(list.map((c) => raw.getContainer(c.Id).remove({ force: true, v: true }).catch(() => undefined)));
}

beforeAll(async () => {
  await ensureDockerd();
  await ensureTestImage();
}, 120_000);

afterEach(async () => {
  for (const p of proxies.splice(0)) await p.close();
  for (const r of runtimes.splice(0)) await r.close();
  await removeRunContainers();
});

afterAll(async () => {
  await removeRunContainers();
  await raw.getVolume(volumeName).remove().catch(() => undefined);
  rmSync(tmp, { recursive: true, force: true });
});

describe('DockerRuntime: overlay networks', () => {
  // Two /24s of 10.250/16 picked by the run, so parallel runs on one daemon rarely meet.
  const third = (parseInt(run.slice(0, 2), 16) & 0xfe);
  const nets = [
    { name: `ovt-${run}-a`, subnet: `10.250.${third}.0/24`, gateway: `10.250.${third}.1` },
    { name: `ovt-${run}-b`, subnet: `10.250.${third + 1}.0/24`, gateway: `10.250.${third + 1}.1` },
  ];
  const docker = new DockerodeNetworks(defaultSocketPath);

  afterAll(async () => {
    await removeRunContainers();
    for (const n of await docker.list('test-' + run)) await docker.remove(n.id);
  });

  it('creates a container on its first network with its address and DNS, connected to the rest before it starts', async () => {
    for (const n of nets) {
      await docker.create({ name: dockerNetworkName(n.name), network: n.name, clusterId: 'test-' + run, bridge: bridgeName(n.name), subnet: n.subnet, gateway: n.gateway, internal: false, mtu: 1370 });
    }
    expect((await docker.list('test-' + run)).map((n) => n.network).sort()).toEqual(nets.map((n) => n.name));
    const rt = runtime();
    const a = `10.250.${third}.7`;
    const b = `10.250.${third + 1}.9`;
    const id = await rt.create(spec({ networks: [{ name: nets[0]?.name ?? '', address: a }, { name: nets[1]?.name ?? '', address: b }], dns: [nets[0]?.gateway ?? ''] }));
    const info = await raw.getContainer(id).inspect();
    expect(info.HostConfig.Dns).toEqual([nets[0]?.gateway]);
    const endpoints = info.NetworkSettings.Networks;
    expect(endpoints[dockerNetworkName(nets[0]?.name ?? '')]?.IPAMConfig?.IPv4Address).toBe(a);
    expect(endpoints[dockerNetworkName(nets[1]?.name ?? '')]?.IPAMConfig?.IPv4Address).toBe(b);
    await rt.start(id);
    const running = await raw.getContainer(id).inspect();
    expect(running.NetworkSettings.Networks[dockerNetworkName(nets[1]?.name ?? '')]?.IPAddress).toBe(b);
    const made = (await docker.list('test-' + run)).find((n) => n.network === nets[0]?.name);
    expect(await docker.attachedCount(made?.id ?? '')).toBe(1);
  });

  it('fails the create, and leaves no container, when a network to connect does not exist', async () => {
    const rt = runtime();
    const s = spec({ networks: [{ name: nets[0]?.name ?? '', address: null }, { name: `ovt-${run}-missing`, address: null }] });
    await expect(rt.create(s)).rejects.toMatchObject({ kind: 'failed', message: expect.stringContaining('does not exist on this node') });
    expect((await rt.list({ [runLabel]: run })).filter((c) => c.name === s.name)).toEqual([]);
  });
});

describe('DockerRuntime: container lifecycle', () => {
  it('creates, starts, inspects, lists, stops and removes a busybox container', async () => {
    const rt = runtime();
    await rt.ping();
    expect(rt.kind).toBe('docker');
    const s = spec();
    const id = await rt.create(s);

    const created = await rt.inspect(id);
    expect(created).toMatchObject({ id, name: s.name, image: testImage, state: 'created', exitCode: null, startedAt: null, health: null, error: null });
    expect(created?.labels[runLabel]).toBe(run);

    await rt.start(id);
    await rt.start(id); // already running: resolves
    const running = await rt.inspect(id);
    expect(running?.state).toBe('running');
    expect(running?.startedAt).toEqual(expect.any(Number));
    expect((await rt.list({ [runLabel]: run })).map((c) => c.id)).toEqual([id]);

    // sleep is pid 1 and ignores SIGTERM, so this also shows SIGKILL after the grace period.
    await rt.stop(id, { signal: 'SIGTERM', graceMs: 300 });
    const stopped = await rt.inspect(id);
    expect(stopped).toMatchObject({ state: 'exited', exitCode: 137 });
    expect(stopped?.finishedAt).toBeGreaterThanOrEqual(stopped?.startedAt ?? Infinity);
    await rt.stop(id, { signal: 'SIGTERM', graceMs: 300 }); // already stopped: resolves

    await rt.remove(id);
    expect(await rt.inspect(id)).toBeUndefined();
    await rt.remove(id); // absent: resolves
    await rt.stop(id, { signal: 'SIGTERM', graceMs: 0 }); // absent: resolves
    expect(await rt.list({ [runLabel]: run })).toEqual([]);
  });

  it('runs a command in a running container (exec): its exit code and the tails of its output; a timeout is a timeout', async () => {
    const rt = runtime();
    const id = await rt.create(spec());
    await rt.start(id);
    const r = await rt.exec(id, ['sh', '-c', 'echo out; echo err >&2; exit 3'], 10_000);
    expect(r).toEqual({ exitCode: 3, stdout: 'out\n', stderr: 'err\n' });
    expect((await rt.exec(id, ['true'], 10_000)).exitCode).toBe(0);
    await expect(rt.exec(id, ['sleep', '5'], 300)).rejects.toMatchObject({ kind: 'timeout' });
    await rt.remove(id);
  });

  it('lists only containers carrying every label asked for', async () => {
    const rt = runtime();
    const a = await rt.create(spec({ labels: { 'shoal.node': 'n1', 'shoal.service': 'web' } }));
    const b = await rt.create(spec({ labels: { 'shoal.node': 'n1', 'shoal.service': 'db' } }));
    const c = await rt.create(spec({ labels: { 'shoal.node': 'n2', 'shoal.service': 'web' } }));
    const ids = async (labels: Labels): Promise<string[]> => (await rt.list({ [runLabel]: run, ...labels })).map((i) => i.id).sort();

    expect(await ids({})).toEqual([a, b, c].sort());
    expect(await ids({ 'shoal.node': 'n1' })).toEqual([a, b].sort());
    expect(await ids({ 'shoal.node': 'n1', 'shoal.service': 'web' })).toEqual([a]);
    expect(await ids({ 'shoal.node': 'n3' })).toEqual([]);
    expect((await rt.list({ [runLabel]: run, 'shoal.service': 'web' })).every((i) => i.labels['shoal.service'] === 'web')).toBe(true);
  });

  it('creates with restart policy no, the limits, ports, mounts, devices, capabilities, health check, stop settings and log rotation', async () => {
    const rt = runtime();
    const bindDir = mkdtempSync(path.join(tmp, 'bind-'));
    const [tcpPort, udpPort] = [await freePort(), await freePort()];
    const s = spec({
      command: ['sh', '-c'],
      args: ['echo started; exec sleep 300'],
      env: { GREETING: 'hello', MODE: 'a=b' },
      user: 'nobody',
      limits: { cpuMillis: 500, memoryBytes: 64 * 1024 * 1024 },
      ports: [{ published: tcpPort, target: 8080, protocol: 'tcp' }, { published: udpPort, target: 5353, protocol: 'udp' }],
      mounts: [
        { type: 'bind', source: bindDir, target: '/data', readOnly: true },
        { type: 'volume', source: volumeName, target: '/state', readOnly: false },
      ],
      devices: [{ hostPath: '/dev/null', containerPath: '/dev/radio', permissions: 'rw' }],
      capAdd: ['NET_ADMIN'],
      capDrop: ['MKNOD'],
      healthCheck: { command: ['true'], intervalMs: 5_000, timeoutMs: 2_000, retries: 4, startPeriodMs: 1_500 },
      stopSignal: 'SIGUSR1',
      stopGracePeriodMs: 12_500,
      logs: { maxSizeBytes: 1024 * 1024, maxFiles: 2 },
    });
    const id = await rt.create(s);
    await rt.start(id); // Docker takes the whole configuration
    const info = await raw.getContainer(id).inspect();
    const hc = info.HostConfig;

    expect(hc.RestartPolicy?.Name).toBe('no');
    expect(hc.NanoCpus).toBe(500_000_000);
    expect(hc.Memory).toBe(64 * 1024 * 1024);
    expect(hc.PortBindings).toEqual({ '8080/tcp': [{ HostIp: '', HostPort: String(tcpPort) }], '5353/udp': [{ HostIp: '', HostPort: String(udpPort) }] });
    expect(hc.Mounts).toEqual([
      { Type: 'bind', Source: bindDir, Target: '/data', ReadOnly: true },
      { Type: 'volume', Source: volumeName, Target: '/state' },
    ]);
    expect(hc.Devices).toEqual([{ PathOnHost: '/dev/null', PathInContainer: '/dev/radio', CgroupPermissions: 'rw' }]);
    expect(hc.CapAdd).toEqual(['NET_ADMIN']);
    expect(hc.CapDrop).toEqual(['MKNOD']);
    expect(hc.Privileged).toBe(false);
    expect(hc.LogConfig).toEqual({ Type: 'json-file', Config: { 'max-size': '1048576', 'max-file': '2' } });

    const cfg = info.Config as typeof info.Config & { Healthcheck?: Record<string, unknown>; StopSignal?: string; StopTimeout?: number; Entrypoint?: string[] };
    expect(cfg.Entrypoint).toEqual(['sh', '-c']);
    expect(cfg.Cmd).toEqual(['echo started; exec sleep 300']);
    expect(cfg.Env).toEqual(expect.arrayContaining(['GREETING=hello', 'MODE=a=b']));
    expect(cfg.User).toBe('nobody');
    expect(cfg.Labels).toEqual({ [runLabel]: run });
    expect(cfg.StopSignal).toBe('SIGUSR1');
    expect(cfg.StopTimeout).toBe(13);
    expect(cfg.Healthcheck).toEqual({ Test: ['CMD', 'true'], Interval: 5e9, Timeout: 2e9, Retries: 4, StartPeriod: 1.5e9 });
    expect(Object.keys(cfg.ExposedPorts ?? {}).sort()).toEqual(['5353/udp', '8080/tcp']);
    expect(info.Mounts.find((m) => m.Destination === '/data')?.RW).toBe(false);
  });

  it('creates privileged containers on the host network, without port bindings', async () => {
    const rt = runtime();
    const id = await rt.create(spec({ privileged: true, hostNetwork: true, ports: [{ published: 8081, target: 8081, protocol: 'tcp' }] }));
    const hc = (await raw.getContainer(id).inspect()).HostConfig;
    expect(hc.NetworkMode).toBe('host');
    expect(hc.Privileged).toBe(true);
    expect(hc.PortBindings ?? {}).toEqual({});
  });

  it('creates with the container settings, and the process sees each of them', async () => {
    const rt = runtime();
    // Each check prints its name when it fails; the container exits 0 only when all hold.
    const checks = [
      ['workingDir', '[ "$(pwd)" = /etc ]'], ['hostname', '[ "$(hostname)" = web-1 ]'], ['extraHosts', 'grep -q "10.0.0.5[[:space:]]*nas" /etc/hosts'],
      ['dnsSearch', 'grep -q "search lan" /etc/resolv.conf'], ['dnsOptions', 'grep -q "ndots:2" /etc/resolv.conf'], ['ulimits', '[ "$(ulimit -n)" = 1024 ]'],
      ['sysctls', '[ "$(cat /proc/sys/net/core/somaxconn)" = 1000 ]'], ['tmpfs', 'touch /run/x && grep -q " /run tmpfs .*size=65536k,mode=700" /proc/mounts'],
      ['readOnlyRootfs', '! touch /x 2>/dev/null'], ['shmSize', 'grep -q " /dev/shm tmpfs .*size=131072k" /proc/mounts'], ['init', '[ "$(cat /proc/1/comm)" != sh ]'],
    ];
    const id = await rt.create(spec({
      command: ['sh', '-c', `${checks.map(([name, test]) => `{ ${test ?? ''}; } || { echo FAILED ${name ?? ''}; fail=1; }`).join('; ')}; exit $fail`],
      settings: {
        ...runtimeSettingsNone(), workingDir: '/etc', hostname: 'web-1', init: true, readOnlyRootfs: true, shmSizeBytes: 128 * 1024 * 1024,
        tmpfs: [{ target: '/run', sizeBytes: 64 * 1024 * 1024, mode: 0o700 }], extraHosts: [{ host: 'nas', address: '10.0.0.5' }],
        dnsSearch: ['lan'], dnsOptions: ['ndots:2'], ulimits: [{ name: 'nofile', soft: 1024, hard: 2048 }], sysctls: { 'net.core.somaxconn': '1000' },
      },
      labels: { 'traefik.enable': 'true' },
    }));
    await rt.start(id);
    const done = await waitForState(rt, id, (i) => i.state === 'exited', 'the checks to finish');
    const log = (await raw.getContainer(id).logs({ stdout: true, stderr: true })).toString('utf8');
    expect(log).not.toContain('FAILED');
    expect(done.exitCode).toBe(0);
    expect((await raw.getContainer(id).inspect()).Config.Labels['traefik.enable']).toBe('true');
  });

  it('reports an exit code, and nothing restarts the container', async () => {
    const rt = runtime();
    const id = await rt.create(spec({ command: ['sh', '-c', 'exit 3'] }));
    await rt.start(id);
    const info = await waitForState(rt, id, (i) => i.state === 'exited', 'the container to exit');
    expect(info.exitCode).toBe(3);
    // Not compared with startedAt: Docker stamps the start after the process runs, so a
    // process that exits at once can show a finish a millisecond before its start.
    expect(info.finishedAt).toEqual(expect.any(Number));
    expect((await raw.getContainer(id).inspect()).RestartCount).toBe(0);
  });

  it('stops with the service signal within the grace period, and kills with SIGKILL after it', async () => {
    const rt = runtime();
    const trap = ['sh', '-c', 'trap "exit 7" USR1; while true; do sleep 0.1; done'];
    const graceful = await rt.create(spec({ command: trap }));
    const stubborn = await rt.create(spec({ command: trap }));
    await rt.start(graceful);
    await rt.start(stubborn);

    await rt.stop(graceful, { signal: 'SIGUSR1', graceMs: 60_000 });
    expect(await rt.inspect(graceful)).toMatchObject({ state: 'exited', exitCode: 7 });

    const paused = await rt.create(spec({ command: trap }));
    await rt.start(paused);
    await raw.getContainer(paused).pause();
    expect((await rt.inspect(paused))?.state).toBe('paused');
    await rt.stop(paused, { signal: 'SIGUSR1', graceMs: 60_000 });
    expect(await rt.inspect(paused)).toMatchObject({ state: 'exited', exitCode: 7 });

    // SIGTERM is not trapped and the shell is pid 1, so only the SIGKILL after the grace ends it.
    await rt.stop(stubborn, { signal: 'SIGTERM', graceMs: 500 });
    expect(await rt.inspect(stubborn)).toMatchObject({ state: 'exited', exitCode: 137 });
  });

  it('kills with a signal at once, and says not_found for a container that does not exist', async () => {
    const rt = runtime();
    const id = await rt.create(spec());
    await rt.start(id);
    await rt.kill(id, 'SIGKILL');
    const info = await waitForState(rt, id, (i) => i.state === 'exited', 'the killed container to exit');
    expect(info.exitCode).toBe(137);
    await rt.kill(id, 'SIGKILL'); // not running: resolves

    const missing = 'shoal-test-no-such-container';
    expect((await rejection(rt.kill(missing, 'SIGTERM'))).kind).toBe('not_found');
    expect((await rejection(rt.start(missing))).kind).toBe('not_found');
    expect(await rt.inspect(missing)).toBeUndefined();
  });

  it("fails with Docker's message when Docker refuses a container", async () => {
    const rt = runtime();
    const badMount = await rejection(rt.create(spec({ mounts: [{ type: 'bind', source: '/nonexistent/shoal', target: '/x', readOnly: false }] })));
    expect(badMount.kind).toBe('failed');
    expect(badMount.message).toMatch(/\/nonexistent\/shoal/);

    const noImage = await rejection(rt.create(spec({ image: 'shoal-test/absent:none' })));
    expect(noImage.kind).toBe('failed');
    expect(noImage.message).toMatch(/no such image/i);

    const id = await rt.create(spec({ devices: [{ hostPath: '/dev/shoal-no-such-device', containerPath: '/dev/x', permissions: 'r' }] }));
    const badDevice = await rejection(rt.start(id));
    expect(badDevice.kind).toBe('failed');
    expect(badDevice.message).toMatch(/shoal-no-such-device/);
  });
});

describe('DockerRuntime: health checks', () => {
  it('reports healthy for a check that passes and unhealthy for one that fails, in inspect and events', async () => {
    const rt = runtime();
    const events: RuntimeEvent[] = [];
    const errors: RuntimeError[] = [];
    const unsubscribe = rt.events({ [runLabel]: run }, (e) => events.push(e), (err) => errors.push(err));
    const check = { intervalMs: 200, timeoutMs: 2_000, retries: 2, startPeriodMs: 0 };
    const good = await rt.create(spec({ healthCheck: { command: ['true'], ...check } }));
    const bad = await rt.create(spec({ healthCheck: { command: ['false'], ...check } }));
    expect((await rt.inspect(good))?.health).toBeNull(); // Docker has no verdict before the start
    await rt.start(good);
    await rt.start(bad);

    expect((await waitForState(rt, good, (i) => i.health !== 'starting', 'a verdict on the passing check')).health).toBe('healthy');
    expect((await waitForState(rt, bad, (i) => i.health !== 'starting', 'a verdict on the failing check')).health).toBe('unhealthy');
    await waitFor('both health events', async () => (events.filter((e) => e.type === 'health').length >= 2 ? true : undefined));
    unsubscribe();
    expect(events.find((e) => e.type === 'health' && e.containerId === good)?.health).toBe('healthy');
    expect(events.find((e) => e.type === 'health' && e.containerId === bad)?.health).toBe('unhealthy');
    expect(errors).toEqual([]);
  });
});

describe('DockerRuntime: events', () => {
  it('follows create, start, die (with the exit code) and destroy of the labelled containers only', async () => {
    const rt = runtime();
    const mine = { 'shoal.test.events': run };
    const events: RuntimeEvent[] = [];
    const errors: RuntimeError[] = [];
    const unsubscribe = rt.events({ [runLabel]: run, ...mine }, (e) => events.push(e), (err) => errors.push(err));

    const other = await rt.create(spec()); // not carrying `mine`
    const id = await rt.create(spec({ command: ['sh', '-c', 'sleep 0.2; exit 5'], labels: mine }));
    await rt.start(id);
    await waitForState(rt, id, (i) => i.state === 'exited', 'the container to exit');
    await rt.remove(id);
    await rt.remove(other);
    await waitFor('the destroy event', async () => (events.some((e) => e.type === 'destroy') ? true : undefined));
    unsubscribe();

    expect(events.map((e) => e.type)).toEqual(['create', 'start', 'die', 'destroy']);
    expect(events.every((e) => e.containerId === id && e.labels['shoal.test.events'] === run && !('name' in e.labels))).toBe(true);
    expect(events.find((e) => e.type === 'die')?.exitCode).toBe(5);
    expect(events.every((e, i) => i === 0 || e.at >= (events[i - 1]?.at ?? 0))).toBe(true);
    expect(errors).toEqual([]);
  });
});

describe('DockerRuntime: images', () => {
  it('resolves without a registry for an image present on the node, under any of its tags', async () => {
    const rt = runtime();
    await rt.ensureImage(testImage, 10_000);
    const alias = `shoal-test/busybox:alias-${run}`;
    await ensureTestImage([alias]);
    try {
      await rt.ensureImage(alias, 10_000);
    } finally {
      await removeTestTag(alias);
    }
    expect(await raw.getImage(alias).inspect().then(() => 'present', (e: { statusCode?: number }) => e.statusCode)).toBe(404);
  });

  it('fails with image_pull_failed, with Docker\'s reason, for a registry nothing listens on', async () => {
    const err = await rejection(runtime().ensureImage(`127.0.0.1:${await freePort()}/nope:1`, 120_000));
    expect(err.kind).toBe('image_pull_failed');
    expect(err.message).toMatch(/connection refused/i); // Docker's reason, not our timeout
  });

  it('fails with image_pull_failed when the pull does not finish within its timeout', async () => {
    // A registry that accepts connections and never answers.
    const silent = net.createServer(() => undefined);
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    try {
      const port = (silent.address() as net.AddressInfo).port;
      const err = await rejection(runtime().ensureImage(`127.0.0.1:${port}/slow:1`, 1_000));
      expect(err.kind).toBe('image_pull_failed');
      expect(err.message).toMatch(/not pulled within 1000 ms/);
    } finally {
      silent.close();
      silent.unref();
    }
  });
});

describe('DockerRuntime: Docker unavailable', () => {
  it('says unavailable on every call when the socket does not exist', async () => {
    const rt = runtime({ socketPath: path.join(tmp, 'absent.sock') });
    // Each call's refusal is taken at once (a refusal left waiting while an earlier one is
    // awaited would be an unhandled rejection), then checked in turn.
    const refusals = [rt.ping(), rt.list({}), rt.inspect('x'), rt.create(spec()), rt.start('x'), rt.stop('x', { signal: 'SIGTERM', graceMs: 0 }),
      rt.kill('x', 'SIGTERM'), rt.remove('x'), rt.ensureImage(testImage, 1_000)].map((p) => rejection(p));
    for (const err of await Promise.all(refusals)) {
      expect(err.kind, err.message).toBe('unavailable');
      expect(err.message).toMatch(/absent\.sock/);
    }
    const err = await new Promise<RuntimeError>((resolve) => rt.events({}, () => undefined, resolve));
    expect(err.kind).toBe('unavailable');
  });

  it('says unavailable while a proxy to Docker is closed, breaks the event stream, and answers again once it reopens', async () => {
    const p = proxy({ socketPath: path.join(tmp, `proxy-${run}.sock`) }, defaultSocketPath);
    await p.open();
    const rt = runtime({ socketPath: path.join(tmp, `proxy-${run}.sock`) });
    await rt.ping();
    const broken = new Promise<RuntimeError>((resolve) => rt.events({ [runLabel]: run }, () => undefined, resolve));
    const id = await rt.create(spec());

    await p.close();
    const err = await broken;
    expect(err.kind).toBe('unavailable');
    expect((await rejection(rt.ping())).kind).toBe('unavailable');
    expect((await rejection(rt.inspect(id))).kind).toBe('unavailable');

    await p.open();
    await rt.ping();
    expect((await rt.list({ [runLabel]: run })).map((c) => c.id)).toEqual([id]);
    const events: RuntimeEvent[] = [];
    const unsubscribe = rt.events({ [runLabel]: run }, (e) => events.push(e), () => undefined);
    await rt.start(id);
    await waitFor('the start event after recovery', async () => (events.some((e) => e.type === 'start' && e.containerId === id) ? true : undefined));
    unsubscribe();
  });

  it('says timeout for a daemon that accepts and never answers, and unavailable from ping', async () => {
    const p = proxy({ socketPath: path.join(tmp, `hung-${run}.sock`) }, defaultSocketPath, { hang: true });
    await p.open();
    const rt = runtime({ socketPath: path.join(tmp, `hung-${run}.sock`), callTimeoutMs: 300, pingTimeoutMs: 300 });
    expect((await rejection(rt.inspect('x'))).kind).toBe('timeout');
    expect((await rejection(rt.list({}))).kind).toBe('timeout');
    expect((await rejection(rt.ping())).kind).toBe('unavailable');
  });

  it('is unavailable after close(), which is idempotent and ends event streams quietly', async () => {
    const rt = runtime();
    const errors: RuntimeError[] = [];
    rt.events({ [runLabel]: run }, () => undefined, (e) => errors.push(e));
    await rt.close();
    await rt.close();
    expect((await rejection(rt.ping())).kind).toBe('unavailable');
    expect(errors).toEqual([]);
  });
});

describe('DockerRuntime: DOCKER_HOST', () => {
  it('honours unix:// and tcp:// addresses when no socket path is configured', async () => {
    await runtime({ env: { DOCKER_HOST: `unix://${defaultSocketPath}` } }).ping();
    const tcp = proxy({ tcpPort: 0 }, defaultSocketPath);
    await tcp.open();
    const rt = runtime({ env: { DOCKER_HOST: `tcp://127.0.0.1:${tcp.port}` } });
    expect(rt.endpoint).toEqual({ kind: 'tcp', host: '127.0.0.1', port: tcp.port });
    await rt.ping();
    const id = await rt.create(spec());
    expect((await rt.inspect(id))?.state).toBe('created');
  });

  it('lets a configured socket path win over DOCKER_HOST, in the process environment too', async () => {
    const rt = runtime({ socketPath: '/run/other.sock', env: { DOCKER_HOST: 'tcp://10.0.0.1:2375' } });
    expect(rt.endpoint).toEqual({ kind: 'unix', socketPath: '/run/other.sock' });

    // dockerode reads process.env itself; the configured path must still be the one used.
    const saved = process.env.DOCKER_HOST;
    process.env.DOCKER_HOST = 'tcp://127.0.0.1:1';
    let configured: DockerRuntime;
    try {
      configured = runtime({ socketPath: defaultSocketPath, env: process.env });
    } finally {
      if (saved === undefined) delete process.env.DOCKER_HOST;
      else process.env.DOCKER_HOST = saved;
    }
    await configured.ping();
  });
});
