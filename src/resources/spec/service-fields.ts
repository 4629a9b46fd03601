// Readers for the parts of a Service spec, each a closed vocabulary (see reader.ts). The
// defaults written here are the documented ones (docs/resources.md lists them; a test reads the
// smallest spec back and checks every default).

import { isIP } from 'node:net';
import { registryHostPattern } from '../registry-logins.ts';
import { parseConstraint, labelKeyPattern, type Constraint } from './constraint.ts';
import { specLimits } from './limits.ts';
import { formatCpu, formatMemory, parseCpu, parseDuration, parseMemory, renderDuration } from './quantity.ts';
import {
  INVALID, boolean, defaultStruct, describe, integer, isPlainObject, keyPath, list, nullable, oneOf, quantity, string, struct, withDefault,
  type Problems, type Read, type Reader, required,
} from './reader.ts';
import type {
  DeviceSpec, DisruptionSpec, HealthCheckSpec, LogSpec, MountSpec, ReplicateHooks, ReplicateSpec, PlacementSpec, PortSpec, ResourceAmounts, ResourceLimits, RestartPolicy, SecretRefSpec,
  UpdatePolicy,
} from './service-spec.ts';
import { secretOwnerIdMax, volumeOptionKeys } from './service-spec.ts';

const cpuMillisMax = 1024 * 1000;
const memoryBytesMax = 1024 ** 5;

export const cpu = (min: number): Reader<number> => quantity(parseCpu, min, cpuMillisMax, formatCpu);
export const memory = (min: number): Reader<number> => quantity(parseMemory, min, memoryBytesMax, formatMemory);
export const duration = (min = 0, max: number = specLimits.durationMsMax): Reader<number> => quantity(parseDuration, min, max, renderDuration);

export const dnsLabel = string({
  pattern: /^[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$/,
  what: 'a DNS label (lower-case letters, digits and -, starting with a letter, ending with a letter or digit, at most 63 characters)',
});

const component = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
const hostPart = '[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?';
const registry = `${hostPart}(?:\\.${hostPart})*(?::\\d{1,5})?`;
const imagePattern = new RegExp(`^(?:${registry}/)?${component}(?:/${component})*(?::[\\w][\\w.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$`);

export const image = string({
  pattern: imagePattern,
  what: 'an image reference ([registry/]name[:tag][@sha256:digest], the name in lower case)',
  maxChars: specLimits.imageCharsMax,
});

/** A registry login's host, as `shoal registry login` takes it (a DNS name or address, with a port). */
export const registryLogin = string({
  pattern: registryHostPattern,
  what: 'a registry host, as given to shoal registry login (ghcr.io, registry.lan:5000, docker.io)',
  maxChars: 253 + 6,
});

export const argv = (what: string): Reader<string[]> => (value, at, problems) => {
  const r = list(string(), specLimits.argsItemsMax)(value, at, problems);
  if (r !== INVALID && r.length === 0) {
    problems.add(at, `must not be empty; omit it to keep the image's ${what}`);
    return INVALID;
  }
  return r;
};

/** Environment variables: a mapping of names to strings. Numbers and booleans are refused (YAML reads 1.10 as 1.1). */
export const env: Reader<Record<string, string>> = (value, at, problems) => {
  if (!isPlainObject(value)) {
    problems.add(at, `must be a mapping of names to strings, not ${describe(value)}`);
    return INVALID;
  }
  const keys = Object.keys(value).sort();
  if (keys.length > specLimits.envEntriesMax) {
    problems.add(at, `has ${keys.length} entries; at most ${specLimits.envEntriesMax}`);
    return INVALID;
  }
  const out: Record<string, string> = {};
  let ok = true;
  const readValue = string();
  for (const key of keys) {
    const where = keyPath(at, key);
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) {
      problems.add(where, 'is not a variable name (letters, digits and _, not starting with a digit)');
      ok = false;
      continue;
    }
    if (key === '__proto__') {
      // An object cannot hold it as a plain key, and the store refuses it (fsm/README.md).
      problems.add(where, 'cannot be stored; choose another name');
      ok = false;
      continue;
    }
    const v = readValue(value[key], where, problems);
    if (v === INVALID) ok = false;
    else out[key] = v;
  }
  return ok ? out : INVALID;
};

export const user = string({ pattern: /^[A-Za-z0-9_][A-Za-z0-9_.-]*(?::[A-Za-z0-9_][A-Za-z0-9_.-]*)?$/, what: 'a user (name, uid, or uid:gid)', maxChars: 64 });

export const constraint: Reader<Constraint> = (value, at, problems) => {
  const text = string({ nonEmpty: true, maxChars: 1024 })(value, at, problems);
  if (text === INVALID) return INVALID;
  const parsed = parseConstraint(text);
  if (!parsed.ok) {
    problems.add(at, parsed.message);
    return INVALID;
  }
  return parsed.constraint;
};

const amounts = struct<{ cpu: number; memory: number }, ResourceAmounts>({
  cpu: withDefault(cpu(0), () => 0),
  memory: withDefault(memory(0), () => 0),
}, (s) => ({ cpuMillis: s.cpu, memoryBytes: s.memory }));

const limits = struct<{ cpu: number | null; memory: number | null }, ResourceLimits>({
  cpu: withDefault(nullable(cpu(1)), () => null),
  memory: withDefault(nullable(memory(specLimits.memoryLimitBytesMin)), () => null),
}, (s) => ({ cpuMillis: s.cpu, memoryBytes: s.memory }));

export const resources = struct<{ reservations: ResourceAmounts; limits: ResourceLimits }, { reservations: ResourceAmounts; limits: ResourceLimits }>({
  reservations: defaultStruct(amounts),
  limits: defaultStruct(limits),
}, (s, at, problems) => {
  let ok = true;
  if (s.limits.cpuMillis !== null && s.limits.cpuMillis < s.reservations.cpuMillis) {
    problems.add(`${at}.limits.cpu`, `must be at least the reservation (${formatCpu(s.reservations.cpuMillis)})`);
    ok = false;
  }
  if (s.limits.memoryBytes !== null && s.limits.memoryBytes < s.reservations.memoryBytes) {
    problems.add(`${at}.limits.memory`, `must be at least the reservation (${formatMemory(s.reservations.memoryBytes)})`);
    ok = false;
  }
  return ok ? s : INVALID;
});

const labelKey = string({ pattern: labelKeyPattern, what: 'a label key' });

export const placement = struct<{ strategy: PlacementSpec['strategy']; spreadOver: string | null }, PlacementSpec>({
  strategy: withDefault(oneOf(['spread', 'binpack'] as const), () => 'spread'),
  spreadOver: withDefault(nullable((v, at, p) => labelKey(typeof v === 'string' ? v.replace(/^node\.labels\./, '') : v, at, p)), () => null),
}, (s, at, problems) => {
  if (s.strategy === 'binpack' && s.spreadOver !== null) {
    problems.add(`${at}.spreadOver`, 'spreads tasks, and binpack packs them; use one');
    return INVALID;
  }
  return s;
});

const portNumber = integer(1, 65535);
/** An IPv4 or IPv6 address of the node to publish on. */
const hostIp: Reader<string> = (value, at, problems) => {
  const s = string()(value, at, problems);
  if (s === INVALID) return INVALID;
  if (isIP(s) === 0) {
    problems.add(at, `${JSON.stringify(s)} is not an IPv4 or IPv6 address (leave hostIp out to publish on every address of the node)`);
    return INVALID;
  }
  return s;
};

/**
 * A port as written: its mode null when unwritten, which the service's reader resolves (ingress
 * for a replicated service, host for a global one or with hostNetwork: resolvePortMode).
 */
export interface PortInput extends Omit<PortSpec, 'mode'> {
  mode: 'ingress' | 'host' | null;
}

export const port = struct<{ published: number; target: number; protocol: PortSpec['protocol']; hostIp: string | null; mode: 'ingress' | 'host' | null }, PortInput>({
  published: required(portNumber),
  target: required(portNumber),
  protocol: withDefault(oneOf(['tcp', 'udp'] as const), () => 'tcp'),
  hostIp: withDefault(nullable(hostIp), () => null),
  mode: withDefault(nullable(oneOf(['ingress', 'host'] as const)), () => null),
}, (s) => ({ published: s.published, target: s.target, protocol: s.protocol, ...(s.hostIp !== null ? { hostIp: s.hostIp } : {}), mode: s.mode }));

/** The stored port: ingress written only when it is (an absent mode reads as host, as records before the mesh). */
export function resolvePortMode(p: PortInput, service: { mode: 'replicated' | 'global'; hostNetwork: boolean }): PortSpec {
  const { mode, ...rest } = p;
  const ingress = mode === 'ingress' || (mode === null && service.mode === 'replicated' && !service.hostNetwork && p.hostIp === undefined);
  return ingress ? { ...rest, mode: 'ingress' } : rest;
}

/** An absolute path with no empty, `.` or `..` segments and no trailing slash. */
export function isCleanAbsolutePath(path: string): boolean {
  if (!path.startsWith('/') || path === '/') return path === '/';
  return path.slice(1).split('/').every((seg) => seg !== '' && seg !== '.' && seg !== '..');
}

export const absolutePath = (what: string, allowRoot = false): Reader<string> => (value, at, problems) => {
  const s = string({ nonEmpty: true, maxChars: 4096 })(value, at, problems);
  if (s === INVALID) return INVALID;
  if (!isCleanAbsolutePath(s) || (!allowRoot && s === '/')) {
    problems.add(at, `${JSON.stringify(s)} is not ${what} (an absolute path${allowRoot ? '' : ' other than /'}, without //, . or .. segments or a trailing /)`);
    return INVALID;
  }
  return s;
};

const volumeName = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

/** The longest value of a volume option (an NFS `o` with many options, a CIFS share). */
export const volumeOptionCharsMax = 1024;

/**
 * A named volume's options for Docker's `local` driver: `{type: nfs, o: "addr=10.0.0.5,rw",
 * device: ":/export"}`, `{type: tmpfs, device: tmpfs, o: size=64m}`, `{type: none, o: bind,
 * device: /srv/data}`. Only the keys that driver takes (anything else it would refuse at the
 * node); `type` and `device` go together (the driver mounts `device` as `type`).
 */
export const volumeOptions: Reader<Record<string, string>> = (value, at, problems) => {
  if (!isPlainObject(value)) {
    problems.add(at, `must be a mapping of the local volume driver's options (${volumeOptionKeys.join(', ')}), not ${describe(value)}`);
    return INVALID;
  }
  const out: Record<string, string> = {};
  let ok = true;
  for (const key of Object.keys(value).sort()) {
    const where = keyPath(at, key);
    if (!(volumeOptionKeys as readonly string[]).includes(key)) {
      problems.add(where, `is not an option of Docker's local volume driver, which takes ${volumeOptionKeys.join(', ')} (the mount's type, its device or share, and its mount options: o: "addr=10.0.0.5,rw")`);
      ok = false;
      continue;
    }
    const v = string({ nonEmpty: true, maxChars: volumeOptionCharsMax })(value[key], where, problems);
    if (v === INVALID) ok = false;
    else out[key] = v;
  }
  if (!ok) return INVALID;
  if (Object.keys(out).length === 0) {
    problems.add(at, 'is empty; omit it for a plain local volume, or give type, device and o');
    return INVALID;
  }
  if ((out.type === undefined) !== (out.device === undefined)) {
    problems.add(at, out.type === undefined
      ? 'gives device without type: the local driver mounts the device as a type (type: nfs, cifs, tmpfs, or none with o: bind)'
      : 'gives type without device: name what is mounted (device: ":/export" for NFS, "//host/share" for CIFS, tmpfs for a tmpfs, a host path with o: bind)');
    return INVALID;
  }
  return out;
};

/** The defaults of `replicate` (docs/volumes.md). */
export const replicateDefaults: ReplicateSpec = { copies: 2, everyMs: 30_000, sizeBytes: 1024 ** 3 };

/** The default bound of a replicated volume's hook. */
export const replicateHookTimeoutMsDefault = 30_000;

/** A hook's command: a non-empty argv (no shell: `[sh, -c, '...']` for one). */
const hookArgv: Reader<string[]> = (value, at, problems) => {
  const r = list(string(), specLimits.argsItemsMax)(value, at, problems);
  if (r !== INVALID && r.length === 0) {
    problems.add(at, 'a hook is a command as a list of arguments, e.g. [sqlite3, /data/app.db, ".backup /data/app.bak"]; omit it for none');
    return INVALID;
  }
  return r;
};

/** `replicate.hooks`: `{before, after, timeout}`; at least one command. */
export const replicateHooks = struct<{ before: string[] | null; after: string[] | null; timeout: number }, ReplicateHooks>({
  before: withDefault(nullable(hookArgv), () => null),
  after: withDefault(nullable(hookArgv), () => null),
  timeout: withDefault(duration(specLimits.replicateHookTimeoutMsMin, specLimits.replicateHookTimeoutMsMax), () => replicateHookTimeoutMsDefault),
}, (s, at, problems) => {
  if (s.before === null && s.after === null) {
    problems.add(at, 'hooks name a command to run before the snapshot, after it, or both (before: [...], after: [...]); omit hooks for none');
    return INVALID;
  }
  return { ...(s.before !== null ? { before: s.before } : {}), ...(s.after !== null ? { after: s.after } : {}), timeoutMs: s.timeout };
});

/** A replicated volume's settings: `{copies, every, size}`, each defaulted. */
export const replicate = struct<{ copies: number; every: number; size: number; maxBandwidth: number | null; hooks: ReplicateHooks | null }, ReplicateSpec>({
  copies: withDefault(integer(1, specLimits.replicateCopiesMax), () => replicateDefaults.copies),
  every: withDefault(duration(specLimits.replicateEveryMsMin, specLimits.replicateEveryMsMax), () => replicateDefaults.everyMs),
  size: withDefault(memory(specLimits.replicateSizeBytesMin), () => replicateDefaults.sizeBytes),
  // Bytes per second to each holder, as a quantity (`10Mi`: 10 MiB/s); absent: unbounded.
  maxBandwidth: withDefault(nullable(memory(specLimits.replicateBandwidthMin)), () => null),
  hooks: withDefault(nullable(replicateHooks), () => null),
}, (s) => ({
  copies: s.copies, everyMs: s.every, sizeBytes: s.size, ...(s.maxBandwidth !== null ? { maxBandwidthBytes: s.maxBandwidth } : {}), ...(s.hooks !== null ? { hooks: s.hooks } : {}),
}));

export const mount = struct<{ type: MountSpec['type']; source: string; target: string; readOnly: boolean; volumeOptions: Record<string, string> | null; replicate: ReplicateSpec | null }, MountSpec>({
  type: required(oneOf(['bind', 'volume'] as const)),
  source: required(string({ nonEmpty: true, maxChars: 4096 })),
  target: required(absolutePath('a container path')),
  readOnly: withDefault(boolean, () => false),
  volumeOptions: withDefault(nullable(volumeOptions), () => null),
  replicate: withDefault(nullable(replicate), () => null),
}, (s, at, problems) => {
  const { replicate: rep, volumeOptions: opts, ...plain } = s;
  if (rep !== null && s.type !== 'volume') {
    problems.add(`${at}.replicate`, 'only a volume is replicated; a bind mount is a path of one node (use type: volume)');
    return INVALID;
  }
  if (rep !== null && s.readOnly) {
    problems.add(`${at}.replicate`, 'a replicated volume is written by its one task; a read-only mount of it would never change (drop readOnly or replicate)');
    return INVALID;
  }
  if (rep !== null && opts !== null) {
    problems.add(`${at}.replicate`, 'a replicated volume is shoal\'s own filesystem on the node, not a Docker volume driver\'s: it takes no volumeOptions (drop one of them)');
    return INVALID;
  }
  if (s.type === 'bind' && opts !== null) {
    problems.add(`${at}.volumeOptions`, 'a bind mount takes no volume options: they are a named volume\'s (type: volume)');
    return INVALID;
  }
  const checked = checkMountSource(plain, at, problems);
  if (checked === INVALID) return INVALID;
  return { ...checked, ...(opts !== null ? { volumeOptions: opts } : {}), ...(rep !== null ? { replicate: rep } : {}) };
});

function checkMountSource(s: MountSpec, at: string, problems: Problems): Read<MountSpec> {
  if (s.type === 'bind' && !isCleanAbsolutePath(s.source)) {
    problems.add(`${at}.source`, `${JSON.stringify(s.source)} is not an absolute host path (without //, . or .. segments or a trailing /)`);
    return INVALID;
  }
  if (s.type === 'volume' && !volumeName.test(s.source)) {
    problems.add(`${at}.source`, `${JSON.stringify(s.source)} is not a volume name (letters, digits, _ . -, starting with a letter or digit)`);
    return INVALID;
  }
  return s;
}

/**
 * Mounts of one volume agree on its options: the node creates the volume once, so two mounts of
 * it (in one service, or a job's) with other options could not both be honoured.
 */
export function checkVolumeOptionsAgree(mounts: readonly MountSpec[] | undefined, at: string, problems: Problems): void {
  const first = new Map<string, { i: number; key: string }>();
  (mounts ?? []).forEach((m, i) => {
    if (m.type !== 'volume') return;
    const key = JSON.stringify(m.volumeOptions ?? null);
    const seen = first.get(m.source);
    if (seen === undefined) first.set(m.source, { i, key });
    else if (seen.key !== key) problems.add(`${at}[${i}].volumeOptions`, `the volume ${m.source} is mounted by [${seen.i}] with other options; a node creates a volume once: give every mount of it the same volumeOptions`);
  });
}

const permissions: Reader<string> = (value, at, problems) => {
  const s = string()(value, at, problems);
  if (s === INVALID) return INVALID;
  const letters = [...s];
  if (letters.length === 0 || letters.some((c) => !'rwm'.includes(c)) || new Set(letters).size !== letters.length) {
    problems.add(at, `${JSON.stringify(s)} is not device permissions (some of r, w, m, each once)`);
    return INVALID;
  }
  return ['r', 'w', 'm'].filter((c) => letters.includes(c)).join('');
};

export const device = struct<{ hostPath: string; containerPath: string | null; permissions: string }, DeviceSpec>({
  hostPath: required((v, at, p) => {
    const s = absolutePath('a device path')(v, at, p);
    if (s !== INVALID && !s.startsWith('/dev/')) {
      p.add(at, `${JSON.stringify(s)} is not under /dev/`);
      return INVALID;
    }
    return s;
  }),
  containerPath: withDefault(nullable(absolutePath('a container path')), () => null),
  permissions: withDefault(permissions, () => 'rwm'),
}, (s) => ({ hostPath: s.hostPath, containerPath: s.containerPath ?? s.hostPath, permissions: s.permissions }));

/** Linux capabilities (capabilities(7)), without the CAP_ prefix. */
export const capabilityNames: ReadonlySet<string> = new Set([
  'ALL', 'AUDIT_CONTROL', 'AUDIT_READ', 'AUDIT_WRITE', 'BLOCK_SUSPEND', 'BPF', 'CHECKPOINT_RESTORE', 'CHOWN', 'DAC_OVERRIDE',
  'DAC_READ_SEARCH', 'FOWNER', 'FSETID', 'IPC_LOCK', 'IPC_OWNER', 'KILL', 'LEASE', 'LINUX_IMMUTABLE', 'MAC_ADMIN', 'MAC_OVERRIDE',
  'MKNOD', 'NET_ADMIN', 'NET_BIND_SERVICE', 'NET_BROADCAST', 'NET_RAW', 'PERFMON', 'SETFCAP', 'SETGID', 'SETPCAP', 'SETUID',
  'SYS_ADMIN', 'SYS_BOOT', 'SYS_CHROOT', 'SYS_MODULE', 'SYS_NICE', 'SYS_PACCT', 'SYS_PTRACE', 'SYS_RAWIO', 'SYS_RESOURCE',
  'SYS_TIME', 'SYS_TTY_CONFIG', 'SYSLOG', 'WAKE_ALARM',
]);

export const capability: Reader<string> = (value, at, problems) => {
  const s = string()(value, at, problems);
  if (s === INVALID) return INVALID;
  const name = s.toUpperCase().replace(/^CAP_/, '');
  if (!capabilityNames.has(name)) {
    problems.add(at, `${JSON.stringify(s)} is not a Linux capability (NET_ADMIN, SYS_TIME, ... or ALL; see capabilities(7))`);
    return INVALID;
  }
  return name;
};

const signals = ['SIGHUP', 'SIGINT', 'SIGQUIT', 'SIGABRT', 'SIGKILL', 'SIGUSR1', 'SIGUSR2', 'SIGTERM', 'SIGWINCH', 'SIGPWR'];

export const signal: Reader<string> = (value, at, problems) => {
  const s = string()(value, at, problems);
  if (s === INVALID) return INVALID;
  const name = s.toUpperCase().startsWith('SIG') ? s.toUpperCase() : `SIG${s.toUpperCase()}`;
  if (!signals.includes(name)) {
    problems.add(at, `${JSON.stringify(s)} is not a stop signal shoal sends (${signals.join(', ')})`);
    return INVALID;
  }
  return name;
};

export const healthCheck = struct<{ command: string[]; interval: number; timeout: number; retries: number; startPeriod: number }, HealthCheckSpec>({
  command: required(argv('health check')),
  interval: withDefault(duration(specLimits.healthCheckIntervalMsMin), () => 30_000),
  timeout: withDefault(duration(specLimits.healthCheckIntervalMsMin), () => 30_000),
  retries: withDefault(integer(1, specLimits.retriesMax), () => 3),
  startPeriod: withDefault(duration(), () => 0),
}, (s) => ({ command: s.command, intervalMs: s.interval, timeoutMs: s.timeout, retries: s.retries, startPeriodMs: s.startPeriod }));

export const logs = struct<{ maxSize: number; maxFiles: number }, LogSpec>({
  maxSize: withDefault(memory(specLimits.logFileBytesMin), () => 10 * 1024 * 1024),
  maxFiles: withDefault(integer(1, specLimits.logFilesMax), () => 3),
}, (s) => ({ maxSizeBytes: s.maxSize, maxFiles: s.maxFiles }));

const restartDelayMsDefault = 5_000;
const restartMaxDelayMsDefault = 300_000;

export const restart = struct<{ condition: RestartPolicy['condition']; delay: number; maxDelay: number | null; maxAttempts: number | null }, RestartPolicy>({
  condition: withDefault(oneOf(['always', 'on-failure', 'never'] as const), () => 'always'),
  delay: withDefault(duration(), () => restartDelayMsDefault),
  maxDelay: withDefault(nullable(duration()), () => null),
  maxAttempts: withDefault(nullable(integer(1, specLimits.retriesMax)), () => null),
}, (s, at, problems) => {
  if (s.maxDelay !== null && s.maxDelay < s.delay) {
    problems.add(`${at}.maxDelay`, `must be at least delay (${renderDuration(s.delay)})`);
    return INVALID;
  }
  // Unwritten, the cap is 5m, or the delay itself when that is longer (never below what was asked).
  const maxDelayMs = s.maxDelay ?? Math.max(restartMaxDelayMsDefault, s.delay);
  return { condition: s.condition, delayMs: s.delay, maxDelayMs, maxAttempts: s.maxAttempts };
});

export const update = struct<{ parallelism: number; delay: number; monitor: number; failureAction: UpdatePolicy['failureAction']; order: UpdatePolicy['order'] }, UpdatePolicy>({
  parallelism: withDefault(integer(1, specLimits.replicasMax), () => 1),
  delay: withDefault(duration(), () => 0),
  monitor: withDefault(duration(), () => 5_000),
  failureAction: withDefault(oneOf(['pause', 'rollback'] as const), () => 'pause'),
  order: withDefault(oneOf(['stop-first', 'start-first'] as const), () => 'stop-first'),
}, (s) => ({ parallelism: s.parallelism, delayMs: s.delay, monitorMs: s.monitor, failureAction: s.failureAction, order: s.order }));

/**
 * `maxUnavailable`: a whole number of slots (`2`), or a percentage of the service's slots as a
 * string (`'25%'`, YAML reads `25%` unquoted as that string too).
 */
const maxUnavailable: Reader<Pick<DisruptionSpec, 'maxUnavailable' | 'unit'>> = (value, at, problems) => {
  if (typeof value === 'number') {
    const n = integer(0, specLimits.replicasMax)(value, at, problems);
    return n === INVALID ? INVALID : { maxUnavailable: n, unit: 'slots' };
  }
  const m = typeof value === 'string' ? /^(\d{1,3})%$/.exec(value.trim()) : null;
  if (m === null) {
    problems.add(at, `must be a whole number of slots (2) or a percentage of the service's slots ('25%'), not ${typeof value === 'string' ? JSON.stringify(value) : describe(value)}`);
    return INVALID;
  }
  const percent = Number(m[1]);
  if (percent > 100) {
    problems.add(at, `${percent}% is more than all of the service's slots; at most 100%`);
    return INVALID;
  }
  return { maxUnavailable: percent, unit: 'percent' };
};

export const disruption = struct<{ maxUnavailable: Pick<DisruptionSpec, 'maxUnavailable' | 'unit'> }, DisruptionSpec>({
  maxUnavailable: required(maxUnavailable),
}, (s) => ({ maxUnavailable: s.maxUnavailable.maxUnavailable, unit: s.maxUnavailable.unit }));

/** A secret's name: a DNS label, as a service's (src/resources/secrets.ts). */
const secretName = dnsLabel;

/** A file name under /run/secrets/: no `/`, not `.` or `..`, at most 255 bytes. */
const secretFileName = /^(?!\.\.?$)[A-Za-z0-9._-]{1,255}$/;

/** Container paths a secret's file may not be put at: the kernel's and the runtime's own file systems. */
const secretTargetReserved = ['/proc', '/sys', '/dev'];

/**
 * A secret's target: a file name under /run/secrets/, or (feature level 6, issue 39's configs) an
 * absolute container path where the file is bind-mounted read-only.
 */
const secretTarget: Reader<string> = (value, at, problems) => {
  const s = string({ nonEmpty: true, maxChars: 4096 })(value, at, problems);
  if (s === INVALID) return INVALID;
  if (!s.startsWith('/')) {
    if (secretFileName.test(s)) return s;
    problems.add(at, `${JSON.stringify(s)} is not a file name under /run/secrets/ (letters, digits, . _ -; no /; not . or ..) nor an absolute container path`);
    return INVALID;
  }
  if (!isCleanAbsolutePath(s) || s === '/') {
    problems.add(at, `${JSON.stringify(s)} is not an absolute container path for the file (without //, . or .. segments or a trailing /; not /)`);
    return INVALID;
  }
  const reserved = secretTargetReserved.find((r) => s === r || s.startsWith(`${r}/`));
  if (reserved !== undefined) {
    problems.add(at, `${s} is under ${reserved}, which the runtime mounts itself; put the file elsewhere`);
    return INVALID;
  }
  return s;
};

/** Where a secret reference's file appears in the container: /run/secrets/<target>, or the absolute target itself. */
export function secretPath(target: string): string {
  return target.startsWith('/') ? target : `/run/secrets/${target}`;
}

/**
 * Permission bits as a quoted octal string ('0400', '0440'): YAML 1.2 reads an unquoted 0440 as
 * the decimal number 440, which as a mode means something else entirely, so numbers are refused.
 */
const fileMode: Reader<number> = (value, at, problems) => {
  if (typeof value === 'number') {
    problems.add(at, `write the mode as a quoted octal string ('0${value.toString(8).slice(-3)}' or '0440'): YAML 1.2 reads an unquoted 0440 as the decimal 440`);
    return INVALID;
  }
  const s = string({ pattern: /^0?[0-7]{3}$/, what: "an octal file mode such as '0400' or '0440'" })(value, at, problems);
  return s === INVALID ? INVALID : Number.parseInt(s, 8);
};

/** A secret file's owner or group: a number (a name would need the image's /etc/passwd, which the agent does not read). */
const secretOwnerId = integer(0, secretOwnerIdMax);

const secretRefLong = struct<{ name: string; target: string | null; mode: number; uid: number; gid: number }, SecretRefSpec>({
  name: required(secretName),
  target: withDefault(nullable(secretTarget), () => null),
  mode: withDefault(fileMode, () => secretFileModeDefault),
  // Feature level 6 (issue 39's compose uid/gid): the file's owner; 0 (root) is left out of the spec.
  uid: withDefault(secretOwnerId, () => 0),
  gid: withDefault(secretOwnerId, () => 0),
}, (s) => ({ name: s.name, target: s.target ?? s.name, mode: s.mode, ...(s.uid !== 0 ? { uid: s.uid } : {}), ...(s.gid !== 0 ? { gid: s.gid } : {}) }));

/** The file mode of a secret whose reference gives none: read by the file's owner only. */
export const secretFileModeDefault = 0o400;

/** A secret reference: `{name, target?, mode?, uid?, gid?}`, or only the name (as Compose's short form). */
export const secretRef: Reader<SecretRefSpec> = (value, at, problems) => {
  if (typeof value !== 'string') return secretRefLong(value, at, problems);
  const name = secretName(value, at, problems);
  return name === INVALID ? INVALID : { name, target: name, mode: secretFileModeDefault };
};
