// A fixed address on a real Docker network (issue 39's compose ipv4_address): the allocator gives
// the task of node n1 (slice 0 of the /16) an address in another slice, as it does for a service
// that fixes one, and the node's Docker network (made as the overlay agent makes it: the whole
// subnet, n1's gateway) takes a container at exactly that address. Run under the machine-wide
// lock (it starts a container and makes a Docker network).

import { randomBytes } from 'node:crypto';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DockerRuntime } from '../../src/executor/docker-runtime.ts';
import { runtimeSettingsNone, type ContainerSpec, type LogLine } from '../../src/executor/runtime.ts';
import { DockerodeNetworks } from '../../net/overlay-docker.ts';
import { allocate, gatewayOf } from '../../src/resources/address-allocator.ts';
import { bridgeName, dockerNetworkName } from '../../src/resources/overlay-names.ts';
import type { NetworkSpec } from '../../src/resources/spec/network-spec.ts';
import { defaultSocketPath, ensureDockerd } from './dockerd.ts';
import { ensureTestImage, testImage } from './test-image.ts';

const run = randomBytes(4).toString('hex');
const raw = new Docker({ socketPath: defaultSocketPath });
const rt = new DockerRuntime({ env: {} });
const docker = new DockerodeNetworks(defaultSocketPath);
const cluster = `fixed-${run}`;
const net: NetworkSpec = { name: `fxa-${run}`, subnet: '10.249.0.0/16', internal: false, slicePrefix: 24 };

beforeAll(async () => {
  await ensureDockerd();
  await ensureTestImage();
}, 120_000);

afterAll(async () => {
  const ours = await raw.listContainers({ all: true, filters: { label: [`shoal.test.run=${run}`] } });
  await Promise.all(ours.map((c) => raw.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
  for (const n of await docker.list(cluster)) await docker.remove(n.id);
  await rt.close();
});

describe('a fixed address on Docker', () => {
  it('runs the task at its fixed address from another node\'s slice, on its own node\'s Docker network', async () => {
    const { allocation } = allocate(net, { slices: {}, addresses: {} }, ['n1', 'n2'], [{ id: 't1', nodeId: 'n1', live: true, fixed: '10.249.7.50' }], ['10.249.7.50']);
    expect(allocation).toEqual({ slices: { n1: 0, n2: 1 }, addresses: { t1: '10.249.7.50' } });
    await docker.create({ name: dockerNetworkName(net.name), network: net.name, clusterId: cluster, bridge: bridgeName(net.name), subnet: net.subnet, gateway: gatewayOf(net, 0), internal: false, mtu: 1370 });
    const spec: ContainerSpec = {
      name: `shoal-test-${run}-fixed`, image: testImage, command: ['sh', '-c', 'hostname -i; echo done; sleep 300'], args: null, env: {}, user: null,
      labels: { 'shoal.test.run': run }, limits: { cpuMillis: null, memoryBytes: null }, ports: [], mounts: [], devices: [], capAdd: [], capDrop: [],
      privileged: false, hostNetwork: false, networks: [{ name: net.name, address: allocation.addresses.t1 ?? null }], dns: [], settings: runtimeSettingsNone(),
      healthCheck: null, stopSignal: 'SIGKILL', stopGracePeriodMs: 0, logs: { maxSizeBytes: 1024 * 1024, maxFiles: 1 },
    };
    const id = await rt.create(spec);
    await rt.start(id);
    const running = await raw.getContainer(id).inspect();
    expect(running.NetworkSettings.Networks[dockerNetworkName(net.name)]?.IPAddress).toBe('10.249.7.50');
    const end = Date.now() + 30_000;
    let lines: string[] = [];
    while (!lines.includes('done')) {
      if (Date.now() > end) throw new Error('the container did not print its address');
      await new Promise((r) => setTimeout(r, 100));
      const got: LogLine[] = [];
      for await (const l of await rt.logs(id, { follow: false, tailLines: null, sinceMs: null })) got.push(l);
      lines = got.map((l) => l.text.trim());
    }
    // Inside, the container has that address.
    expect(lines[0]).toBe('10.249.7.50');
  });
});
