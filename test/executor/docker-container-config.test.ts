import { describe, expect, it } from 'vitest';
import { dockerCreateOptions, networksToConnect } from '../../src/executor/docker-container-config.ts';
import { runtimeSettingsNone, type ContainerSpec } from '../../src/executor/runtime.ts';

const base: ContainerSpec = {
  name: 'shoal-web.1.t1', image: 'busybox:1.36', command: null, args: null, env: {}, user: null, labels: { 'shoal.task': 't1' },
  limits: { cpuMillis: null, memoryBytes: null }, ports: [], mounts: [], devices: [], capAdd: [], capDrop: [], privileged: false,
  hostNetwork: false, networks: [], dns: [], settings: runtimeSettingsNone(), healthCheck: null, stopSignal: 'SIGTERM', stopGracePeriodMs: 10_000, logs: { maxSizeBytes: 10_485_760, maxFiles: 3 },
};

describe('dockerCreateOptions', () => {
  it("leaves the image's entrypoint, command, user and health check alone when the spec has none", () => {
    const o = dockerCreateOptions(base);
    for (const k of ['Entrypoint', 'Cmd', 'User', 'Healthcheck', 'ExposedPorts'] as const) expect(o).not.toHaveProperty(k);
    for (const k of ['NanoCpus', 'Memory', 'PortBindings', 'NetworkMode'] as const) expect(o.HostConfig).not.toHaveProperty(k);
    expect(o).toMatchObject({ name: 'shoal-web.1.t1', Image: 'busybox:1.36', Env: [], Labels: { 'shoal.task': 't1' }, StopSignal: 'SIGTERM', StopTimeout: 10 });
    expect(o.HostConfig?.RestartPolicy).toEqual({ Name: 'no' });
    expect(o.HostConfig?.LogConfig).toEqual({ Type: 'json-file', Config: { 'max-size': '10485760', 'max-file': '3' } });
  });

  it('rounds the stop grace up to whole seconds for StopTimeout', () => {
    expect(dockerCreateOptions({ ...base, stopGracePeriodMs: 1 }).StopTimeout).toBe(1);
    expect(dockerCreateOptions({ ...base, stopGracePeriodMs: 0 }).StopTimeout).toBe(0);
  });

  it('publishes several host ports of one container port, per protocol', () => {
    const o = dockerCreateOptions({ ...base, ports: [
      { published: 80, target: 8080, protocol: 'tcp' }, { published: 8080, target: 8080, protocol: 'tcp' }, { published: 53, target: 53, protocol: 'udp' },
    ] });
    expect(o.ExposedPorts).toEqual({ '8080/tcp': {}, '53/udp': {} });
    expect(o.HostConfig?.PortBindings).toEqual({ '8080/tcp': [{ HostPort: '80' }, { HostPort: '8080' }], '53/udp': [{ HostPort: '53' }] });
  });

  it('exposes an ingress port but binds none: the routing mesh forwards it (issue 38)', () => {
    const o = dockerCreateOptions({ ...base, ports: [{ published: 8080, target: 80, protocol: 'tcp', mode: 'ingress' }, { published: 53, target: 53, protocol: 'udp', mode: 'ingress' }] });
    expect(o.ExposedPorts).toEqual({ '80/tcp': {}, '53/udp': {} });
    expect(o.HostConfig).not.toHaveProperty('PortBindings');
    const mixed = dockerCreateOptions({ ...base, ports: [{ published: 8080, target: 80, protocol: 'tcp', mode: 'ingress' }, { published: 9000, target: 9000, protocol: 'tcp' }] });
    expect(mixed.HostConfig?.PortBindings).toEqual({ '9000/tcp': [{ HostPort: '9000' }] });
  });

  it('publishes a port on one address of the node as Docker\'s HostIp, and on every address without one', () => {
    const o = dockerCreateOptions({ ...base, ports: [
      { published: 8080, target: 80, protocol: 'tcp', hostIp: '127.0.0.1' }, { published: 8443, target: 443, protocol: 'tcp' }, { published: 53, target: 53, protocol: 'udp', hostIp: 'fd00::1' },
    ] });
    expect(o.HostConfig?.PortBindings).toEqual({
      '80/tcp': [{ HostPort: '8080', HostIp: '127.0.0.1' }], '443/tcp': [{ HostPort: '8443' }], '53/udp': [{ HostPort: '53', HostIp: 'fd00::1' }],
    });
  });

  it('creates a container on its first overlay network with its address and DNS, and leaves the rest to connect', () => {
    const o = dockerCreateOptions({ ...base, networks: [{ name: 'back', address: '10.62.1.2' }, { name: 'front', address: '10.63.1.5' }], dns: ['10.62.1.1'] });
    expect(o.HostConfig?.NetworkMode).toBe('shoal-back');
    expect(o.HostConfig?.Dns).toEqual(['10.62.1.1']);
    expect(o.NetworkingConfig).toEqual({ EndpointsConfig: { 'shoal-back': { IPAMConfig: { IPv4Address: '10.62.1.2' } } } });
    expect(networksToConnect({ ...base, networks: [{ name: 'back', address: '10.62.1.2' }, { name: 'front', address: '10.63.1.5' }] }))
      .toEqual([{ network: 'shoal-front', endpoint: { IPAMConfig: { IPv4Address: '10.63.1.5' } } }]);
  });

  it('without networks sends no NetworkingConfig and no Dns; an address left to the runtime sends no IPAMConfig', () => {
    const o = dockerCreateOptions(base);
    expect(o).not.toHaveProperty('NetworkingConfig');
    expect(o.HostConfig).not.toHaveProperty('Dns');
    expect(networksToConnect(base)).toEqual([]);
    expect(dockerCreateOptions({ ...base, networks: [{ name: 'back', address: null }] }).NetworkingConfig).toEqual({ EndpointsConfig: { 'shoal-back': {} } });
  });

  it('sends no port bindings on the host network', () => {
    const o = dockerCreateOptions({ ...base, hostNetwork: true, ports: [{ published: 80, target: 80, protocol: 'tcp' }] });
    expect(o.HostConfig?.NetworkMode).toBe('host');
    expect(o).not.toHaveProperty('ExposedPorts');
    expect(o.HostConfig).not.toHaveProperty('PortBindings');
  });

  it('turns rotation off when the spec says a zero size', () => {
    expect(dockerCreateOptions({ ...base, logs: { maxSizeBytes: 0, maxFiles: 3 } }).HostConfig?.LogConfig).toEqual({ Type: 'json-file', Config: {} });
  });

  it('passes an empty argument list through (it clears the image command)', () => {
    expect(dockerCreateOptions({ ...base, command: ['/app'], args: [] })).toMatchObject({ Entrypoint: ['/app'], Cmd: [] });
  });
});

describe('dockerCreateOptions: the container settings', () => {
  it('sends none of them at their defaults, so the daemon and the image decide', () => {
    const o = dockerCreateOptions(base);
    for (const k of ['WorkingDir', 'Hostname'] as const) expect(o).not.toHaveProperty(k);
    for (const k of ['Init', 'ReadonlyRootfs', 'ShmSize', 'Tmpfs', 'ExtraHosts', 'DnsSearch', 'DnsOptions', 'Ulimits', 'Sysctls'] as const) expect(o.HostConfig).not.toHaveProperty(k);
  });

  it('carries each setting to its Docker option', () => {
    const o = dockerCreateOptions({
      ...base,
      dns: ['10.62.1.1', '1.1.1.1'],
      settings: {
        workingDir: '/srv/app', hostname: 'web-1.lan', init: true, readOnlyRootfs: true, shmSizeBytes: 256 * 1024 ** 2,
        tmpfs: [{ target: '/run', sizeBytes: 64 * 1024 ** 2, mode: 0o1777 }, { target: '/tmp', sizeBytes: null, mode: null }],
        extraHosts: [{ host: 'nas', address: '10.0.0.5' }, { host: 'v6', address: 'fd00::5' }],
        dnsSearch: ['lan'], dnsOptions: ['ndots:2'],
        ulimits: [{ name: 'nofile', soft: 1024, hard: 4096 }, { name: 'nproc', soft: -1, hard: -1 }],
        sysctls: { 'net.core.somaxconn': '1024' },
      },
    });
    expect(o).toMatchObject({ WorkingDir: '/srv/app', Hostname: 'web-1.lan' });
    expect(o.HostConfig).toMatchObject({
      Init: true, ReadonlyRootfs: true, ShmSize: 268_435_456,
      Tmpfs: { '/run': 'size=67108864,mode=1777', '/tmp': '' },
      ExtraHosts: ['nas:10.0.0.5', 'v6:fd00::5'],
      Dns: ['10.62.1.1', '1.1.1.1'], DnsSearch: ['lan'], DnsOptions: ['ndots:2'],
      Ulimits: [{ Name: 'nofile', Soft: 1024, Hard: 4096 }, { Name: 'nproc', Soft: -1, Hard: -1 }],
      Sysctls: { 'net.core.somaxconn': '1024' },
    });
    // The settings leave the rest of the host config as it was.
    expect(o.HostConfig?.RestartPolicy).toEqual({ Name: 'no' });
  });
});
