// A normalized spec written back in the authoring vocabulary, every field explicit: what
// `service inspect` can print and what `apply` reads back into the very same spec
// (parseSpecObjects([renderService(s)]) equals s; a property test holds it to that).

import { renderCpu, renderDuration, renderMemory } from './quantity.ts';
import { apiVersion } from './documents.ts';
import type { MountSpec, ReplicateSpec, SecretRefSpec, ServiceSpec } from './service-spec.ts';

const nullableRender = <T>(v: T | null, render: (t: T) => string): string | null => (v === null ? null : render(v));

export function renderService(s: ServiceSpec): Record<string, unknown> {
  return {
    apiVersion,
    kind: 'Service',
    name: s.name,
    image: s.image,
    ...(s.registryLogin !== null ? { registryLogin: s.registryLogin } : {}),
    command: s.command,
    args: s.args,
    env: s.env,
    user: s.user,
    mode: s.mode,
    ...(s.mode === 'replicated' ? { replicas: s.replicas } : {}),
    resources: {
      reservations: { cpu: renderCpu(s.resources.reservations.cpuMillis), memory: renderMemory(s.resources.reservations.memoryBytes) },
      limits: { cpu: nullableRender(s.resources.limits.cpuMillis, renderCpu), memory: nullableRender(s.resources.limits.memoryBytes, renderMemory) },
    },
    constraints: s.constraints.map((c) => c.text),
    placement: { strategy: s.placement.strategy, spreadOver: s.placement.spreadOver },
    maxPerNode: s.maxPerNode,
    // The mode always written: an unwritten one reads as ingress for a replicated service.
    ports: s.ports.map((p) => ({ ...p, mode: p.mode ?? 'host' })),
    mounts: s.mounts.map(renderMount),
    devices: s.devices,
    capAdd: s.capAdd,
    capDrop: s.capDrop,
    privileged: s.privileged,
    hostNetwork: s.hostNetwork,
    healthCheck: s.healthCheck === null ? null : {
      command: s.healthCheck.command,
      interval: renderDuration(s.healthCheck.intervalMs),
      timeout: renderDuration(s.healthCheck.timeoutMs),
      retries: s.healthCheck.retries,
      startPeriod: renderDuration(s.healthCheck.startPeriodMs),
    },
    stopSignal: s.stopSignal,
    stopGracePeriod: renderDuration(s.stopGracePeriodMs),
    logs: { maxSize: renderMemory(s.logs.maxSizeBytes), maxFiles: s.logs.maxFiles },
    restart: {
      condition: s.restart.condition,
      delay: renderDuration(s.restart.delayMs),
      maxDelay: renderDuration(s.restart.maxDelayMs),
      maxAttempts: s.restart.maxAttempts,
    },
    update: {
      parallelism: s.update.parallelism,
      delay: renderDuration(s.update.delayMs),
      monitor: renderDuration(s.update.monitorMs),
      failureAction: s.update.failureAction,
      order: s.update.order,
    },
    disruption: s.disruption === null ? null : { maxUnavailable: s.disruption.unit === 'percent' ? `${s.disruption.maxUnavailable}%` : s.disruption.maxUnavailable },
    exclusive: s.exclusive,
    secrets: s.secrets.map(renderSecretRef),
    networks: s.networks, networkAliases: s.networkAliases, networkAddresses: s.networkAddresses,
    workingDir: s.workingDir,
    hostname: s.hostname,
    init: s.init,
    readOnlyRootfs: s.readOnlyRootfs,
    shmSize: nullableRender(s.shmSizeBytes, renderMemory),
    tmpfs: s.tmpfs.map((t) => ({ target: t.target, size: nullableRender(t.sizeBytes, renderMemory), mode: t.mode === null ? null : t.mode.toString(8).padStart(4, '0') })),
    extraHosts: s.extraHosts,
    dns: s.dns,
    dnsSearch: s.dnsSearch,
    dnsOptions: s.dnsOptions,
    ulimits: Object.fromEntries(s.ulimits.map((u) => [u.name, { soft: u.soft, hard: u.hard }])),
    sysctls: s.sysctls,
    labels: s.labels,
  };
}

/** A mount as written: a replicated volume's interval and size as quantities. */
function renderMount(m: MountSpec): Record<string, unknown> {
  if (m.replicate === undefined) return { ...m };
  const r = m.replicate;
  return { ...m, replicate: { copies: r.copies, every: renderDuration(r.everyMs), size: renderMemory(r.sizeBytes), ...(r.maxBandwidthBytes !== undefined ? { maxBandwidth: renderMemory(r.maxBandwidthBytes) } : {}), ...(r.hooks !== undefined ? { hooks: renderHooks(r.hooks) } : {}) } };
}

/** A replicated volume's hooks as written: the timeout as a duration. */
function renderHooks(h: NonNullable<ReplicateSpec['hooks']>): Record<string, unknown> {
  return { ...(h.before !== undefined ? { before: h.before } : {}), ...(h.after !== undefined ? { after: h.after } : {}), timeout: renderDuration(h.timeoutMs) };
}

/** A secret reference as written: the mode in octal; uid and gid only when not 0 (root). */
function renderSecretRef(r: SecretRefSpec): Record<string, string | number> {
  return { name: r.name, target: r.target, mode: `0${r.mode.toString(8).padStart(3, '0')}`, ...(r.uid ? { uid: r.uid } : {}), ...(r.gid ? { gid: r.gid } : {}) };
}
