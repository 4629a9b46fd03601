// A ContainerSpec as Docker's create body (POST /containers/create). Pure: no I/O, so every
// field's translation is tested without a daemon.
//
// Choices, and why (docs/docker.md says the same for operators):
// - RestartPolicy `no`: shoal's agent restarts tasks itself, under the service's restart policy
//   and only when the store says the task is this node's. A Docker policy would restart a
//   container after a reboot before shoal has caught up with the cluster, which may have moved
//   the task elsewhere meanwhile: two copies of one slot.
// - Logs: json-file with rotation (`max-size`, `max-file`), whatever the daemon's default
//   driver is, so a chatty task cannot fill a node's SD card.
// - `command` and `args` follow Docker: setting the entrypoint clears the image's CMD, so with
//   `command` set and `args` null the container runs `command` alone (as `docker run
//   --entrypoint` and Compose's `entrypoint:` do).
// - Mounts go through the Mounts API, not Binds: a bind whose source does not exist is refused
//   instead of being created empty and owned by root; a named volume is created when missing.
// - No health check in the spec keeps the image's own HEALTHCHECK, as Docker and Swarm do.
// - Overlay networks: the container is created on the first (NetworkMode and its endpoint, with
//   the address from the network record); docker-runtime.ts connects the rest before the start
//   (Docker's create takes one endpoint before API 1.44). Its DNS server is the gateway of its
//   first network, where the node answers service names (net/service-dns.ts).

import type Docker from 'dockerode';
import { fenceMountPath, leaseFileOf } from './lease-file.ts';
import { dockerNetworkName } from '../resources/overlay-names.ts';
import { isIngressPort } from '../resources/spec/service-spec.ts';
import { labelKeys } from './labels.ts';
import type { ContainerNetwork, ContainerSpec } from './runtime.ts';

/** What the image runs when the spec does not say (its ENTRYPOINT and CMD), for the fence. */
export interface ImageCommand {
  entrypoint: string[] | null;
  cmd: string[] | null;
}

/**
 * An exclusive task's spec with its command run under the fence (lease-file.ts): the entrypoint
 * becomes `/bin/sh <fence> <lease file of its epoch> <argv>`, where argv is what Docker would
 * run (the spec's command, or the image's entrypoint, then the spec's args, or the image's CMD
 * when the spec sets neither, as Docker does), and the node's lease directory is mounted
 * read-only. `leaseDir` is the host path of that directory.
 */
export function fencedSpec(spec: ContainerSpec, leaseDir: string, image: ImageCommand): ContainerSpec {
  const epoch = Number(spec.labels[labelKeys.nodeEpoch]);
  if (!Number.isSafeInteger(epoch)) throw new Error(`assertion: exclusive container ${spec.name} has no node epoch label`);
  const entry = spec.command ?? image.entrypoint ?? [];
  const args = spec.args ?? (spec.command !== null ? [] : (image.cmd ?? []));
  const argv = [...entry, ...args];
  if (argv.length === 0) throw new Error(`exclusive container ${spec.name}: neither the spec nor the image says what to run`);
  return {
    ...spec,
    command: ['/bin/sh', `${fenceMountPath}/fence.sh`, leaseFileOf(fenceMountPath, epoch), ...argv],
    args: [],
    mounts: [...spec.mounts, { type: 'bind', source: leaseDir, target: fenceMountPath, readOnly: true }],
  };
}

const nsPerMs = 1_000_000;
const nanoCpusPerMilliCpu = 1_000_000;
const msPerSecond = 1_000;

/** The create body for `spec` (its `name` travels as the `name` query parameter). */
export function dockerCreateOptions(spec: ContainerSpec): Docker.ContainerCreateOptions {
  const ports = portConfig(spec);
  return {
    name: spec.name,
    Image: spec.image,
    ...(spec.command !== null ? { Entrypoint: spec.command } : {}),
    ...(spec.args !== null ? { Cmd: spec.args } : {}),
    Env: Object.entries(spec.env).map(([k, v]) => `${k}=${v}`),
    ...(spec.user !== null ? { User: spec.user } : {}),
    ...(spec.settings.workingDir !== null ? { WorkingDir: spec.settings.workingDir } : {}),
    ...(spec.settings.hostname !== null ? { Hostname: spec.settings.hostname } : {}),
    Labels: { ...spec.labels },
    ...(ports.exposed !== undefined ? { ExposedPorts: ports.exposed } : {}),
    ...(spec.healthCheck !== null ? { Healthcheck: healthConfig(spec.healthCheck) } : {}),
    StopSignal: spec.stopSignal,
    // Seconds, rounded up: used only when someone runs `docker stop` by hand (or the daemon
    // shuts down); shoal's own stop sends the signal and times the grace period itself.
    StopTimeout: Math.ceil(spec.stopGracePeriodMs / msPerSecond),
    HostConfig: hostConfig(spec, ports.bindings),
    ...(spec.networks[0] !== undefined ? { NetworkingConfig: { EndpointsConfig: { [dockerNetworkName(spec.networks[0].name)]: endpointConfig(spec.networks[0]) } } } : {}),
  };
}

/** The endpoint of one overlay network: its fixed address, or none for the runtime to choose. */
export function endpointConfig(n: ContainerNetwork): Docker.EndpointSettings {
  return n.address === null ? {} : { IPAMConfig: { IPv4Address: n.address } };
}

/** The overlay networks to `docker network connect` after the create, before the start. */
export function networksToConnect(spec: ContainerSpec): Array<{ network: string; endpoint: Docker.EndpointSettings }> {
  return spec.networks.slice(1).map((n) => ({ network: dockerNetworkName(n.name), endpoint: endpointConfig(n) }));
}

function hostConfig(spec: ContainerSpec, portBindings: Record<string, Array<{ HostPort: string; HostIp?: string }>> | undefined): Docker.HostConfig {
  return {
    RestartPolicy: { Name: 'no' },
    ...(spec.limits.cpuMillis !== null ? { NanoCpus: spec.limits.cpuMillis * nanoCpusPerMilliCpu } : {}),
    ...(spec.limits.memoryBytes !== null ? { Memory: spec.limits.memoryBytes } : {}),
    ...(portBindings !== undefined ? { PortBindings: portBindings } : {}),
    Mounts: spec.mounts.map((m) => ({ Type: m.type, Source: m.source, Target: m.target, ReadOnly: m.readOnly })),
    Devices: spec.devices.map((d) => ({ PathOnHost: d.hostPath, PathInContainer: d.containerPath, CgroupPermissions: d.permissions })),
    CapAdd: [...spec.capAdd],
    CapDrop: [...spec.capDrop],
    Privileged: spec.privileged,
    ...(spec.hostNetwork ? { NetworkMode: 'host' } : spec.networks[0] !== undefined ? { NetworkMode: dockerNetworkName(spec.networks[0].name) } : {}),
    ...(spec.dns.length > 0 ? { Dns: [...spec.dns] } : {}),
    LogConfig: { Type: 'json-file', Config: logConfig(spec.logs.maxSizeBytes, spec.logs.maxFiles) },
    ...settingsConfig(spec.settings),
  };
}

/** The container settings (issue 39's Compose fields); each left out at its default, so the daemon's own applies. */
function settingsConfig(s: ContainerSpec['settings']): Docker.HostConfig {
  return {
    ...(s.init ? { Init: true } : {}),
    ...(s.readOnlyRootfs ? { ReadonlyRootfs: true } : {}),
    ...(s.shmSizeBytes !== null ? { ShmSize: s.shmSizeBytes } : {}),
    ...(s.tmpfs.length > 0 ? { Tmpfs: Object.fromEntries(s.tmpfs.map((t) => [t.target, tmpfsOptions(t)])) } : {}),
    // host:address; Docker splits at the first colon, so an IPv6 address needs no brackets.
    ...(s.extraHosts.length > 0 ? { ExtraHosts: s.extraHosts.map((h) => `${h.host}:${h.address}`) } : {}),
    ...(s.dnsSearch.length > 0 ? { DnsSearch: [...s.dnsSearch] } : {}),
    ...(s.dnsOptions.length > 0 ? { DnsOptions: [...s.dnsOptions] } : {}),
    ...(s.ulimits.length > 0 ? { Ulimits: s.ulimits.map((u) => ({ Name: u.name, Soft: u.soft, Hard: u.hard })) } : {}),
    ...(Object.keys(s.sysctls).length > 0 ? { Sysctls: { ...s.sysctls } } : {}),
  };
}

/** A tmpfs's mount options as Docker's --tmpfs takes them (`size=67108864,mode=1777`); empty: the defaults. */
function tmpfsOptions(t: ContainerSpec['settings']['tmpfs'][number]): string {
  return [
    ...(t.sizeBytes !== null ? [`size=${t.sizeBytes}`] : []),
    ...(t.mode !== null ? [`mode=${t.mode.toString(8)}`] : []),
  ].join(',');
}

/** json-file rotation. A zero size means "no rotation" in the spec; Docker wants both keys absent then. */
function logConfig(maxSizeBytes: number, maxFiles: number): Record<string, string> {
  if (maxSizeBytes <= 0) return {};
  return { 'max-size': String(maxSizeBytes), 'max-file': String(maxFiles) };
}

function healthConfig(h: NonNullable<ContainerSpec['healthCheck']>): Docker.HealthConfig {
  return {
    Test: ['CMD', ...h.command],
    Interval: h.intervalMs * nsPerMs,
    Timeout: h.timeoutMs * nsPerMs,
    Retries: h.retries,
    StartPeriod: h.startPeriodMs * nsPerMs,
  };
}

/**
 * Exposed ports and host bindings, keyed `<target>/<protocol>`. With host networking the
 * container binds the node's ports itself and Docker would drop bindings, so none are sent.
 * Ingress ports are exposed but never bound: the routing mesh's table forwards them on every
 * node (net/ingress-render.ts), and a binding would add Docker's own DNAT for the same port.
 */
function portConfig(spec: ContainerSpec): {
  exposed: Record<string, Record<string, never>> | undefined;
  bindings: Record<string, Array<{ HostPort: string; HostIp?: string }>> | undefined;
} {
  if (spec.hostNetwork || spec.ports.length === 0) return { exposed: undefined, bindings: undefined };
  const exposed: Record<string, Record<string, never>> = {};
  const bindings: Record<string, Array<{ HostPort: string; HostIp?: string }>> = {};
  for (const p of spec.ports) {
    const key = `${p.target}/${p.protocol}`;
    exposed[key] = {};
    if (isIngressPort(p)) continue;
    (bindings[key] ??= []).push({ HostPort: String(p.published), ...(p.hostIp !== undefined ? { HostIp: p.hostIp } : {}) });
  }
  return { exposed, bindings: Object.keys(bindings).length > 0 ? bindings : undefined };
}
