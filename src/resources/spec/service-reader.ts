// The Service kind: its field table (the whole authoring vocabulary of a service) and the
// checks that span fields. Checks across fields run on whatever fields did read, so a wrong
// image does not hide a port published twice.

import { contradiction, type Constraint } from './constraint.ts';
import { specLimits } from './limits.ts';
import {
  INVALID, Problems, boolean, defaultStruct, integer, list, nullable, oneOf, readFields, required, string, withDefault, type Fields, type Read,
} from './reader.ts';
import {
  argv, capability, checkVolumeOptionsAgree, constraint, device, disruption, dnsLabel, duration, env, healthCheck, image, logs, mount, placement, registryLogin, port, resources, restart,
  secretPath, secretRef, signal, update, user, resolvePortMode, type PortInput,
} from './service-fields.ts';
import { ingressNetworkName } from './ingress.ts';
import { canonicalRegistryHost } from '../registry-logins.ts';
import { isIngressPort, type DeviceSpec, type MountSpec, type SecretRefSpec, type ServiceSpec } from './service-spec.ts';
import { buildContainerSettings, checkContainerSettings, containerSettingsFields, type ContainerSettingsInput } from './container-settings.ts';
import { checkNetworkAliases, networkAliases } from './network-aliases.ts';
import { checkNetworkAddresses, networkAddresses } from './network-addresses.ts';

/** The authoring shape: input keys, normalized values. */
interface ServiceInput extends ContainerSettingsInput {
  name: string;
  image: string;
  registryLogin: string | null;
  command: string[] | null;
  args: string[] | null;
  env: Record<string, string>;
  user: string | null;
  mode: ServiceSpec['mode'];
  replicas: number;
  resources: ServiceSpec['resources'];
  constraints: Constraint[];
  placement: ServiceSpec['placement'];
  maxPerNode: number | null;
  ports: PortInput[];
  mounts: MountSpec[];
  devices: DeviceSpec[];
  capAdd: string[];
  capDrop: string[];
  privileged: boolean;
  hostNetwork: boolean;
  healthCheck: ServiceSpec['healthCheck'];
  stopSignal: string;
  stopGracePeriod: number;
  logs: ServiceSpec['logs'];
  restart: ServiceSpec['restart'];
  update: ServiceSpec['update'];
  disruption: ServiceSpec['disruption'];
  exclusive: boolean;
  secrets: SecretRefSpec[];
  networks: string[];
  networkAliases: Record<string, string[]>;
  networkAddresses: Record<string, string>;
}

const serviceFields: Fields<ServiceInput> = {
  name: required(dnsLabel),
  image: required(image),
  registryLogin: withDefault(nullable(registryLogin), () => null),
  command: withDefault(nullable(argv('entrypoint')), () => null),
  args: withDefault(nullable(list(string(), specLimits.argsItemsMax)), () => null),
  env: withDefault(env, () => ({})),
  user: withDefault(nullable(user), () => null),
  mode: withDefault(oneOf(['replicated', 'global'] as const), () => 'replicated'),
  replicas: withDefault(integer(0, specLimits.replicasMax), () => 1),
  resources: defaultStruct(resources),
  constraints: withDefault(list(constraint), () => []),
  placement: defaultStruct(placement),
  maxPerNode: withDefault(nullable(integer(1, specLimits.replicasMax)), () => null),
  ports: withDefault(list(port), () => []),
  mounts: withDefault(list(mount), () => []),
  devices: withDefault(list(device), () => []),
  capAdd: withDefault(list(capability), () => []),
  capDrop: withDefault(list(capability), () => []),
  privileged: withDefault(boolean, () => false),
  hostNetwork: withDefault(boolean, () => false),
  healthCheck: withDefault(nullable(healthCheck), () => null),
  stopSignal: withDefault(signal, () => 'SIGTERM'),
  stopGracePeriod: withDefault(duration(), () => 10_000),
  logs: defaultStruct(logs),
  restart: defaultStruct(restart),
  update: defaultStruct(update),
  disruption: withDefault(nullable(disruption), () => null),
  exclusive: withDefault(boolean, () => false),
  secrets: withDefault(list(secretRef), () => []),
  networks: withDefault(list(dnsLabel), () => []),
  networkAliases: withDefault(networkAliases, () => ({})),
  networkAddresses: withDefault(networkAddresses, () => ({})),
  ...containerSettingsFields,
};

/** The names of the authoring fields of a Service (for docs and tests). */
export const serviceFieldNames: readonly string[] = Object.keys(serviceFields);

/** Reads one Service document (without apiVersion and kind) found at `at` (`services[2]`). */
export function readService(value: unknown, at: string, problems: Problems): Read<ServiceSpec> {
  const r = readFields(value, at, problems, serviceFields);
  if (r === INVALID) return INVALID;
  const s = r.values;
  const before = problems.count;
  checkMode(s, r.written, at, problems);
  checkPorts(s, at, problems);
  checkDistinct(s.mounts, (m) => m.target, `${at}.mounts`, 'target', problems);
  checkVolumeOptionsAgree(s.mounts, `${at}.mounts`, problems);
  checkDistinct(s.devices, (d) => d.containerPath, `${at}.devices`, 'containerPath', problems);
  checkDistinct(s.secrets, (r) => secretPath(r.target), `${at}.secrets`, 'target', problems);
  checkSecretPaths(s, at, problems);
  checkCapabilities(s, at, problems);
  checkDistinct(s.networks, (n) => n, `${at}.networks`, '', problems);
  if (s.hostNetwork === true && (s.networks?.length ?? 0) > 0) {
    problems.add(`${at}.networks`, 'a service with hostNetwork uses the node\'s own network and cannot join overlay networks; drop hostNetwork or networks');
  }
  checkContainerSettings(s, s, at, problems);
  checkNetworkAliases(s.networkAliases, s, at, problems);
  checkNetworkAddresses(s, at, problems);
  if (s.constraints !== undefined) {
    const clash = contradiction(s.constraints);
    if (clash !== null) problems.add(`${at}.constraints`, `${clash}, so no node could ever take a task`);
  }
  checkReplicatedMounts(s, at, problems);
  if (s.exclusive === true && s.update?.order === 'start-first') {
    problems.add(`${at}.update.order`, 'an exclusive service is always updated stop-first (two of its tasks must never run at once)');
  }
  if (!r.ok || problems.count > before) return INVALID;
  return build(s as ServiceInput);
}

/**
 * A replicated volume has one writer (docs/volumes.md): only an exclusive service, which never
 * runs two tasks at once, may replicate one, and it has one task; a volume name is replicated
 * by one mount.
 */
function checkReplicatedMounts(s: Partial<ServiceInput>, at: string, problems: Problems): void {
  (s.mounts ?? []).forEach((m, i) => {
    if (m.replicate === undefined) return;
    const where = `${at}.mounts[${i}].replicate`;
    if (s.exclusive !== true) {
      problems.add(where, 'only an exclusive service may replicate a volume: two tasks writing one replicated volume would diverge (set exclusive: true, or drop replicate)');
    } else if (s.mode === 'global' || (s.replicas !== undefined && s.replicas > 1)) {
      problems.add(where, 'a replicated volume has one writer: the service must run one task (mode: replicated, replicas: 1)');
    }
    const twice = (s.mounts ?? []).findIndex((o) => o.type === 'volume' && o.source === m.source);
    if (twice !== i) problems.add(where, `volume ${m.source} is already mounted by mounts[${twice}]; a replicated volume is mounted once`);
  });
}

function checkMode(s: Partial<ServiceInput>, written: Set<string>, at: string, problems: Problems): void {
  if (s.mode !== 'global') return;
  if (written.has('replicas')) {
    problems.add(`${at}.replicas`, 'a global service runs one task on each eligible node; remove replicas, or use mode: replicated');
  }
  if (written.has('maxPerNode') && s.maxPerNode !== null) {
    problems.add(`${at}.maxPerNode`, 'a global service runs one task per node already; remove maxPerNode');
  }
}

function checkPorts(s: Partial<ServiceInput>, at: string, problems: Problems): void {
  const seen = new Map<string, number>();
  (s.ports ?? []).forEach((p, i) => {
    const key = `${p.published}/${p.protocol}`;
    const first = seen.get(key);
    if (first !== undefined) {
      problems.add(`${at}.ports[${i}].published`, `${key} is already published by ports[${first}]; a node port can be published once`);
    } else {
      seen.set(key, i);
    }
    if (s.hostNetwork === true && p.published !== p.target) {
      problems.add(`${at}.ports[${i}].published`, `with hostNetwork the container binds the node's port itself, so published must equal target (${p.target})`);
    }
    if (p.mode === 'ingress' && s.hostNetwork === true) {
      problems.add(`${at}.ports[${i}].mode`, 'a container on the node\'s own network has no overlay address for the routing mesh to forward to; use mode: host, or drop hostNetwork');
    }
    if (p.mode === 'ingress' && p.hostIp !== undefined) {
      problems.add(`${at}.ports[${i}].hostIp`, 'an ingress port is open on every address of every node; hostIp publishes on one address of the task\'s node: use mode: host with it, or drop hostIp');
    }
  });

}

function checkDistinct<T>(items: readonly T[] | undefined, key: (t: T) => string, at: string, field: string, problems: Problems): void {
  const seen = new Map<string, number>();
  (items ?? []).forEach((item, i) => {
    const k = key(item);
    const first = seen.get(k);
    const where = field === '' ? `${at}[${i}]` : `${at}[${i}].${field}`;
    if (first !== undefined) problems.add(where, `${k} is already given by ${at.split('.').pop() ?? ''}[${first}]`);
    else seen.set(k, i);
  });
}

function checkCapabilities(s: Partial<ServiceInput>, at: string, problems: Problems): void {
  for (const [field, caps] of [['capAdd', s.capAdd], ['capDrop', s.capDrop]] as const) {
    checkDistinct(caps, (c) => c, `${at}.${field}`, '', problems);
  }
  const added = new Set(s.capAdd ?? []);
  (s.capDrop ?? []).forEach((c, i) => {
    if (added.has(c)) problems.add(`${at}.capDrop[${i}]`, `${c} is also in capAdd; a capability is added or dropped, not both`);
  });
}

function build(s: ServiceInput): ServiceSpec {
  const ports = s.ports.map((p) => resolvePortMode(p, s));
  // Every task with an ingress port joins the implicit network `ingress` (the mesh forwards to its address there).
  const networks = ports.some(isIngressPort) ? [...new Set([...s.networks, ingressNetworkName])] : s.networks;
  return {
    name: s.name,
    image: s.image,
    registryLogin: s.registryLogin === null ? null : canonicalRegistryHost(s.registryLogin),
    command: s.command,
    args: s.args,
    env: s.env,
    user: s.user,
    mode: s.mode,
    replicas: s.mode === 'global' ? null : s.replicas,
    resources: s.resources,
    constraints: s.constraints,
    placement: s.placement,
    maxPerNode: s.mode === 'global' ? null : s.maxPerNode,
    ports,
    mounts: s.mounts,
    devices: s.devices,
    capAdd: [...s.capAdd].sort(),
    capDrop: [...s.capDrop].sort(),
    privileged: s.privileged,
    hostNetwork: s.hostNetwork,
    healthCheck: s.healthCheck,
    stopSignal: s.stopSignal,
    stopGracePeriodMs: s.stopGracePeriod,
    logs: s.logs,
    restart: s.restart,
    update: s.update,
    disruption: s.disruption,
    exclusive: s.exclusive,
    secrets: s.secrets,
    networks: [...networks].sort(),
    networkAliases: s.networkAliases,
    networkAddresses: s.networkAddresses,
    ...buildContainerSettings(s),
  };
}

/** A secret's file at an absolute path is not also a mount's or a tmpfs's target (the runtime would take one of them). */
export function checkSecretPaths(
  s: { mounts?: readonly { target: string }[]; tmpfs?: readonly { target: string }[]; secrets?: readonly { target: string }[] }, at: string, problems: Problems,
): void {
  const taken = new Map<string, string>([
    ...(s.mounts ?? []).map((m, i): [string, string] => [m.target, `mounts[${i}]`]),
    ...(s.tmpfs ?? []).map((t, i): [string, string] => [t.target, `tmpfs[${i}]`]),
  ]);
  (s.secrets ?? []).forEach((r, i) => {
    const other = taken.get(secretPath(r.target));
    if (other !== undefined) problems.add(`${at}.secrets[${i}].target`, `${secretPath(r.target)} is already the target of ${other}; give the file another path`);
  });
}
