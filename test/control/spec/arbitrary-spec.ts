// fast-check arbitraries for normalized Service specs: every value the parser can produce,
// respecting the checks across fields (limits over reservations, distinct ports and paths,
// hostNetwork ports, disjoint capabilities, exclusive and stop-first, global without replicas,
// distinct secret targets).

import fc from 'fast-check';
import { parseConstraint } from '../../../src/resources/spec/constraint.ts';
import type { Constraint } from '../../../src/resources/spec/constraint.ts';
import type { ServiceSpec } from '../../../src/resources/spec/service-spec.ts';

const day = 86_400_000;
const constraintPool = ['node.labels.role == db', 'node.labels.zone in (a, b)', 'node.name != n3', 'node.id in (x1, x2, x3)', 'node.labels.disk != hdd', 'node.labels.example.com/gpu == yes'];
const constraints: Constraint[] = constraintPool.map((t) => {
  const r = parseConstraint(t);
  if (!r.ok) throw new Error(r.message);
  return r.constraint;
});
const caps = ['NET_ADMIN', 'SYS_TIME', 'MKNOD', 'CHOWN', 'NET_RAW', 'SYS_ADMIN', 'ALL'];

const argvArb = fc.array(fc.string({ maxLength: 8 }), { minLength: 1, maxLength: 3 });
const pathArb = fc.array(fc.stringMatching(/^[a-z0-9_-]{1,6}$/), { minLength: 1, maxLength: 3 }).map((segs) => `/${segs.join('/')}`);

const resourcesArb = fc.record({
  cpu: fc.nat({ max: 64_000 }), mem: fc.nat({ max: 2 ** 40 }),
  cpuExtra: fc.option(fc.nat({ max: 8000 })), memExtra: fc.option(fc.nat({ max: 2 ** 34 })),
}).map(({ cpu, mem, cpuExtra, memExtra }) => ({
  reservations: { cpuMillis: cpu, memoryBytes: mem },
  limits: {
    cpuMillis: cpuExtra === null ? null : Math.max(1, cpu + cpuExtra),
    memoryBytes: memExtra === null ? null : Math.max(6 * 1024 ** 2, mem + memExtra),
  },
}));

export const serviceSpecArb: fc.Arbitrary<ServiceSpec> = fc.record({
  name: fc.stringMatching(/^[a-z][a-z0-9-]{0,10}[a-z0-9]$/),
  image: fc.constantFrom('busybox:local', 'ghcr.io/o/app:1.2', 'registry.lan:5000/x/y', `nginx@sha256:${'a'.repeat(64)}`),
  registryLogin: fc.constantFrom(null, 'ghcr.io', 'registry.lan:5000'),
  command: fc.option(argvArb),
  args: fc.option(fc.array(fc.string({ maxLength: 8 }), { maxLength: 3 })),
  env: fc.dictionary(fc.stringMatching(/^[A-Z_][A-Z0-9_]{0,6}$/), fc.string({ maxLength: 10 }), { maxKeys: 4 }),
  user: fc.option(fc.constantFrom('nobody', '1000', '1000:1000')),
  global: fc.boolean(),
  replicas: fc.nat({ max: 50 }),
  resources: resourcesArb,
  constraintPicks: fc.subarray(constraints),
  binpack: fc.boolean(),
  spreadOver: fc.option(fc.constantFrom('rack', 'room', 'example.com/zone')),
  maxPerNode: fc.option(fc.integer({ min: 1, max: 10 })),
  portNumbers: fc.uniqueArray(fc.integer({ min: 1, max: 65535 }), { maxLength: 3 }),
  udp: fc.boolean(),
  hostIp: fc.option(fc.constantFrom('127.0.0.1', '192.168.1.5', 'fd00::1'), { nil: undefined }),
  hostNetwork: fc.boolean(),
  mountTargets: fc.uniqueArray(pathArb, { maxLength: 3 }),
  bind: fc.boolean(),
  readOnly: fc.boolean(),
  devicePaths: fc.uniqueArray(pathArb, { maxLength: 2 }),
  perms: fc.constantFrom('r', 'rw', 'rwm', 'm', 'wm'),
  capsSplit: fc.shuffledSubarray(caps).chain((picked) => fc.nat({ max: picked.length }).map((k) => [picked.slice(0, k).sort(), picked.slice(k).sort()] as const)),
  privileged: fc.boolean(),
  healthCheck: fc.option(fc.record({
    command: argvArb, intervalMs: fc.integer({ min: 100, max: day }), timeoutMs: fc.integer({ min: 100, max: day }),
    retries: fc.integer({ min: 1, max: 1000 }), startPeriodMs: fc.nat({ max: day }),
  })),
  stopSignal: fc.constantFrom('SIGTERM', 'SIGINT', 'SIGQUIT', 'SIGKILL'),
  stopGracePeriodMs: fc.nat({ max: day }),
  logs: fc.record({ maxSizeBytes: fc.integer({ min: 1024, max: 2 ** 40 }), maxFiles: fc.integer({ min: 1, max: 100 }) }),
  restartDelay: fc.nat({ max: day }),
  restartExtra: fc.nat({ max: day }),
  condition: fc.constantFrom('always', 'on-failure', 'never'),
  maxAttempts: fc.option(fc.integer({ min: 1, max: 1000 })),
  update: fc.record({
    parallelism: fc.integer({ min: 1, max: 100 }), delayMs: fc.nat({ max: day }), monitorMs: fc.nat({ max: day }),
    failureAction: fc.constantFrom('pause', 'rollback'), order: fc.constantFrom('stop-first', 'start-first'),
  }),
  disruption: fc.option(fc.oneof(
    fc.record({ maxUnavailable: fc.nat({ max: 100 }), unit: fc.constant('slots' as const) }),
    fc.record({ maxUnavailable: fc.nat({ max: 100 }), unit: fc.constant('percent' as const) }),
  )),
  exclusive: fc.boolean(),
  secrets: fc.uniqueArray(fc.record({
    name: fc.stringMatching(/^[a-z][a-z0-9-]{0,6}[a-z0-9]$/),
    // A file name under /run/secrets/, or an absolute path (under /conf.d, which no mount or tmpfs target here can be).
    target: fc.oneof(fc.stringMatching(/^[A-Za-z0-9_-][A-Za-z0-9._-]{0,8}$/), fc.stringMatching(/^[A-Za-z0-9_-][A-Za-z0-9._-]{0,8}$/).map((n) => `/conf.d/${n}`)),
    mode: fc.constantFrom(0o400, 0o440, 0o444, 0o600, 0),
    // The file's owner: left out at 0 (root), as the reader writes it.
    uid: fc.constantFrom(0, 1000, 65534),
    gid: fc.constantFrom(0, 101, 0xfffffffe),
  }).map(({ uid, gid, ...r }) => ({ ...r, ...(uid !== 0 ? { uid } : {}), ...(gid !== 0 ? { gid } : {}) })), { maxLength: 3, selector: (r) => r.target }),
  networks: fc.uniqueArray(fc.constantFrom('backend', 'frontend', 'iot'), { maxLength: 3 }),
  aliases: fc.uniqueArray(fc.constantFrom('db', 'cache', 'www-1'), { maxLength: 2 }),
  fixedAddress: fc.option(fc.constantFrom('10.20.0.50', '10.20.3.7'), { nil: undefined }),
  settings: fc.record({
    workingDir: fc.option(fc.oneof(pathArb, fc.constant('/'))),
    hostname: fc.option(fc.constantFrom('web', 'web-1.lan', 'A1')),
    init: fc.boolean(),
    readOnlyRootfs: fc.boolean(),
    shmSizeBytes: fc.option(fc.integer({ min: 4096, max: 2 ** 36 })),
    tmpfs: fc.uniqueArray(fc.record({
      target: pathArb.map((p) => `/tmpfs${p}`), sizeBytes: fc.option(fc.integer({ min: 4096, max: 2 ** 36 })), mode: fc.option(fc.constantFrom(0o1777, 0o755, 0o700)),
    }), { maxLength: 3, selector: (t) => t.target }),
    extraHosts: fc.array(fc.record({ host: fc.constantFrom('db', 'nas.lan'), address: fc.constantFrom('10.0.0.2', '::1', 'fd00::5') }), { maxLength: 2 }),
    dns: fc.array(fc.constantFrom('1.1.1.1', '9.9.9.9', '2606:4700::1111'), { maxLength: 3 }),
    dnsSearch: fc.array(fc.constantFrom('lan', 'example.com'), { maxLength: 2 }),
    dnsOptions: fc.array(fc.constantFrom('ndots:2', 'rotate', 'timeout:1'), { maxLength: 2 }),
    ulimits: fc.uniqueArray(fc.record({ name: fc.constantFrom('nofile', 'nproc', 'memlock', 'core'), soft: fc.nat({ max: 1 << 20 }), extra: fc.nat({ max: 1 << 20 }), unlimited: fc.boolean() }), { maxLength: 3, selector: (u) => u.name }),
    sysctls: fc.dictionary(fc.constantFrom('net.core.somaxconn', 'kernel.shmmax', 'fs.mqueue.msg_max', 'net.ipv4.ip_forward'), fc.constantFrom('1', '1024', '0 1 2'), { maxKeys: 3 }),
    labels: fc.dictionary(fc.constantFrom('traefik.enable', 'com.example/team', 'a'), fc.string({ maxLength: 12 }), { maxKeys: 3 }),
  }),
}).map((r): ServiceSpec => ({
  name: r.name,
  image: r.image,
  registryLogin: r.registryLogin,
  command: r.command,
  args: r.args,
  env: r.env,
  user: r.user,
  mode: r.global ? 'global' : 'replicated',
  replicas: r.global ? null : r.replicas,
  resources: r.resources,
  constraints: r.constraintPicks,
  placement: { strategy: r.binpack ? 'binpack' : 'spread', spreadOver: r.binpack ? null : r.spreadOver },
  maxPerNode: r.global ? null : r.maxPerNode,
  ports: r.portNumbers.map((p, i) => ({
    published: p, target: r.hostNetwork ? p : ((p + i) % 65535) + 1, protocol: r.udp ? 'udp' : 'tcp', ...(r.hostIp !== undefined ? { hostIp: r.hostIp } : {}),
  })),
  mounts: r.mountTargets.map((t, i) => ({ type: r.bind ? 'bind' : 'volume', source: r.bind ? `/srv${t}` : `vol${i}`, target: t, readOnly: r.readOnly })),
  devices: r.devicePaths.map((p) => ({ hostPath: `/dev${p}`, containerPath: p, permissions: r.perms })),
  capAdd: [...r.capsSplit[0]],
  capDrop: [...r.capsSplit[1]],
  privileged: r.privileged,
  hostNetwork: r.hostNetwork,
  healthCheck: r.healthCheck,
  stopSignal: r.stopSignal,
  stopGracePeriodMs: r.stopGracePeriodMs,
  logs: r.logs,
  restart: { condition: r.condition, delayMs: r.restartDelay, maxDelayMs: Math.min(day, r.restartDelay + r.restartExtra), maxAttempts: r.maxAttempts },
  update: { ...r.update, order: r.exclusive ? 'stop-first' : r.update.order },
  disruption: r.disruption,
  exclusive: r.exclusive,
  secrets: r.secrets,
  networks: r.hostNetwork ? [] : [...r.networks].sort(),
  // Aliases on the first network written, when there is one (none equal to the service's name).
  networkAliases: r.hostNetwork || r.networks[0] === undefined || r.aliases.filter((a) => a !== r.name).length === 0 ? {}
    : { [r.networks[0]]: r.aliases.filter((a) => a !== r.name).sort() },
  // A fixed address on the first network, for a service of one replica replaced stop-first.
  networkAddresses: r.hostNetwork || r.networks[0] === undefined || r.fixedAddress === undefined || r.global || r.replicas > 1
    || (r.exclusive ? 'stop-first' : r.update.order) !== 'stop-first' ? {} : { [r.networks[0]]: r.fixedAddress },
  workingDir: r.settings.workingDir,
  hostname: r.settings.hostname,
  init: r.settings.init,
  readOnlyRootfs: r.settings.readOnlyRootfs,
  shmSizeBytes: r.settings.shmSizeBytes,
  tmpfs: [...r.settings.tmpfs].sort((a, b) => (a.target < b.target ? -1 : 1)),
  extraHosts: r.settings.extraHosts,
  dns: !r.hostNetwork && r.networks.length > 0 ? r.settings.dns.slice(0, 2) : r.settings.dns,
  dnsSearch: r.settings.dnsSearch,
  dnsOptions: r.settings.dnsOptions,
  ulimits: [...r.settings.ulimits].sort((a, b) => (a.name < b.name ? -1 : 1)).map((u) => ({ name: u.name, soft: u.soft, hard: u.unlimited ? -1 : u.soft + u.extra })),
  sysctls: Object.fromEntries(Object.entries(r.settings.sysctls).filter(([k]) => !(r.hostNetwork && k.startsWith('net.'))).sort(([a], [b]) => (a < b ? -1 : 1))),
  labels: r.settings.labels,
}));
