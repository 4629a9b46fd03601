// Readers for a Service's container settings (ContainerSettings in service-spec.ts: issue 39's
// Compose fields), each a plain Docker create option, and the checks that span them. The
// defaults ask for nothing (the image's and the runtime's own); docs/resources.md lists them.

import { isIP } from 'node:net';
import { specLimits } from './limits.ts';
import { formatMemory, parseMemory } from './quantity.ts';
import {
  INVALID, boolean, describe, integer, isPlainObject, keyPath, list, nullable, quantity, required, string, struct, withDefault,
  type Fields, type Problems, type Reader,
} from './reader.ts';
import { absolutePath } from './service-fields.ts';
import type { ContainerSettings, ExtraHostSpec, MountSpec, TmpfsSpec, UlimitSpec } from './service-spec.ts';

/** The largest size of /dev/shm or of a tmpfs (a homelab node has less memory than this). */
const memoryFsBytesMax = 1024 ** 4;
const memoryFs = nullable(quantity(parseMemory, 4096, memoryFsBytesMax, formatMemory));

/** A hostname (RFC 1123 labels joined by dots): at most 63 characters, as Linux sethostname takes 64 with the NUL. */
export const hostname = string({
  pattern: /^(?=.{1,63}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/,
  what: 'a hostname (letters, digits and -, in labels joined by dots; at most 63 characters)',
});

const ipAddress: Reader<string> = (value, at, problems) => {
  const s = string()(value, at, problems);
  if (s === INVALID) return INVALID;
  if (isIP(s) === 0) {
    problems.add(at, `${JSON.stringify(s)} is not an IPv4 or IPv6 address`);
    return INVALID;
  }
  return s;
};

const domain = string({
  pattern: /^(?=.{1,253}$)[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9])?)*\.?$/,
  what: 'a domain name (example.com)',
});

const dnsOption = string({ pattern: /^[a-z][a-z0-9-]*(?::\d{1,5})?$/, what: 'a resolv.conf option (ndots:2, timeout:1, rotate, edns0, ...)' });

/** A tmpfs's mode: a quoted octal string ('1777'), as a secret's file mode (YAML 1.2 reads an unquoted 1777 as decimal). */
const tmpfsMode: Reader<number> = (value, at, problems) => {
  if (typeof value === 'number') {
    problems.add(at, `write the mode as a quoted octal string ('1777' or '0755'): YAML 1.2 reads an unquoted 1777 as the decimal ${value}`);
    return INVALID;
  }
  const s = string({ pattern: /^0?[0-7]{3,4}$/, what: "an octal mode such as '1777' or '0755'" })(value, at, problems);
  return s === INVALID ? INVALID : Number.parseInt(s, 8);
};

const tmpfsLong = struct<{ target: string; size: number | null; mode: number | null }, TmpfsSpec>({
  target: required(absolutePath('a container path')),
  size: withDefault(memoryFs, () => null),
  mode: withDefault(nullable(tmpfsMode), () => null),
}, (s) => ({ target: s.target, sizeBytes: s.size, mode: s.mode }));

/** A tmpfs: `{target, size?, mode?}`, or only the target path. */
export const tmpfs: Reader<TmpfsSpec> = (value, at, problems) => {
  if (typeof value !== 'string') return tmpfsLong(value, at, problems);
  const target = absolutePath('a container path')(value, at, problems);
  return target === INVALID ? INVALID : { target, sizeBytes: null, mode: null };
};

const extraHostLong = struct<ExtraHostSpec, ExtraHostSpec>({
  host: required(hostname),
  address: required(ipAddress),
}, (s) => s);

/** An /etc/hosts entry: `{host, address}`, or `host=address` (an IPv6 address needs the = form or the mapping). */
export const extraHost: Reader<ExtraHostSpec> = (value, at, problems) => {
  if (typeof value !== 'string') return extraHostLong(value, at, problems);
  const eq = value.indexOf('=');
  const sep = eq >= 0 ? eq : value.indexOf(':');
  if (sep <= 0) {
    problems.add(at, `${JSON.stringify(value)} is not host=address (or {host, address})`);
    return INVALID;
  }
  const address = value.slice(sep + 1).replace(/^\[(.*)\]$/, '$1');
  return extraHostLong({ host: value.slice(0, sep), address }, at, problems);
};

/** The limits Docker's --ulimit takes (setrlimit(2) without RLIMIT_, lower case). */
export const ulimitNames: readonly string[] = [
  'as', 'core', 'cpu', 'data', 'fsize', 'locks', 'memlock', 'msgqueue', 'nice', 'nofile', 'nproc', 'rss', 'rtprio', 'rttime', 'sigpending', 'stack',
];

/** -1 is unlimited, as Docker and Compose write it. */
const ulimitValue = integer(-1, Number.MAX_SAFE_INTEGER);

const ulimitPair = struct<{ soft: number; hard: number }, { soft: number; hard: number }>({
  soft: required(ulimitValue),
  hard: required(ulimitValue),
}, (s, at, problems) => {
  const unlimited = (n: number): number => (n === -1 ? Number.POSITIVE_INFINITY : n);
  if (unlimited(s.soft) > unlimited(s.hard)) {
    problems.add(`${at}.soft`, `is above hard (${s.hard}); the soft limit is at most the hard one`);
    return INVALID;
  }
  return s;
});

/** `ulimits: {nofile: {soft: 1024, hard: 4096}, nproc: 512}`: a number sets both. Sorted by name. */
export const ulimits: Reader<UlimitSpec[]> = (value, at, problems) => {
  const entries = mappingEntries(value, at, problems, ulimitNames.length);
  if (entries === INVALID) return INVALID;
  const out: UlimitSpec[] = [];
  let ok = true;
  for (const [name, v] of entries) {
    const where = keyPath(at, name);
    if (!ulimitNames.includes(name)) {
      problems.add(where, `${JSON.stringify(name)} is not a limit the runtime sets (${ulimitNames.join(', ')})`);
      ok = false;
      continue;
    }
    const pair = typeof v === 'number' ? ulimitValue(v, where, problems) : ulimitPair(v, where, problems);
    if (pair === INVALID) ok = false;
    else out.push(typeof pair === 'number' ? { name, soft: pair, hard: pair } : { name, ...pair });
  }
  return ok ? out : INVALID;
};

/**
 * Sysctls a container may set: those of the namespaces it has its own of (network, IPC). Docker
 * refuses the rest at create time, and they would change the node for every workload.
 */
export function containerSysctl(key: string): boolean {
  return key.startsWith('net.') || key.startsWith('kernel.shm') || key.startsWith('kernel.msg') || key === 'kernel.sem' || key.startsWith('fs.mqueue.');
}

/** `sysctls: {net.core.somaxconn: 1024}`: values strings or whole numbers. Keys sorted. */
export const sysctls: Reader<Record<string, string>> = (value, at, problems) => {
  const entries = mappingEntries(value, at, problems, specLimits.listItemsMax);
  if (entries === INVALID) return INVALID;
  const out: Record<string, string> = {};
  let ok = true;
  for (const [key, v] of entries) {
    const where = keyPath(at, key);
    if (!/^[a-z0-9_]+(?:[./][A-Za-z0-9_-]+)+$/.test(key)) {
      problems.add(where, 'is not a sysctl name (net.core.somaxconn)');
      ok = false;
    } else if (!containerSysctl(key)) {
      problems.add(where, `${key} is not namespaced: a container may set only net.*, kernel.shm*, kernel.msg*, kernel.sem and fs.mqueue.* (set it on the node instead)`);
      ok = false;
    } else if (typeof v === 'number' && Number.isInteger(v)) out[key] = String(v);
    else {
      const s = string({ nonEmpty: true, maxChars: 1024 })(v, where, problems);
      if (s === INVALID) ok = false;
      else out[key] = s;
    }
  }
  return ok ? out : INVALID;
};

/** Label key prefixes shoal keeps for itself: its containers are found and read by them (src/executor/labels.ts). */
export const reservedLabelPrefixes: readonly string[] = ['io.shoal.', 'shoal.'];

const labelKey = /^[A-Za-z0-9](?:[A-Za-z0-9._/@-]{0,253}[A-Za-z0-9])?$/;

/** Container labels: a mapping of keys to strings, none under shoal's own prefixes. Keys sorted. */
export const labels: Reader<Record<string, string>> = (value, at, problems) => {
  const entries = mappingEntries(value, at, problems, specLimits.envEntriesMax);
  if (entries === INVALID) return INVALID;
  const out: Record<string, string> = {};
  let ok = true;
  const readValue = string({ maxChars: 4096 });
  for (const [key, v] of entries) {
    const where = keyPath(at, key);
    const reserved = reservedLabelPrefixes.find((p) => key.toLowerCase().startsWith(p));
    if (!labelKey.test(key) || key === '__proto__') {
      problems.add(where, 'is not a label key (letters, digits and . _ - / @ inside, at most 255 characters)');
      ok = false;
    } else if (reserved !== undefined) {
      problems.add(where, `is under ${reserved}, which shoal keeps for its own labels (it finds and reads its containers by them); choose another key`);
      ok = false;
    } else {
      const s = readValue(v, where, problems);
      if (s === INVALID) ok = false;
      else out[key] = s;
    }
  }
  return ok ? out : INVALID;
};

/** A mapping's entries, keys sorted; a problem when it is not a mapping or has too many. */
function mappingEntries(value: unknown, at: string, problems: Problems, max: number): Array<[string, unknown]> | typeof INVALID {
  if (!isPlainObject(value)) {
    problems.add(at, `must be a mapping, not ${describe(value)}`);
    return INVALID;
  }
  const keys = Object.keys(value).sort();
  if (keys.length > max) {
    problems.add(at, `has ${keys.length} entries; at most ${max}`);
    return INVALID;
  }
  return keys.map((k) => [k, value[k]]);
}

/** The authoring fields of the container settings: the stored ones, the size under its input name (`shmSize`). */
export type ContainerSettingsInput = Omit<ContainerSettings, 'shmSizeBytes'> & { shmSize: number | null };

export const containerSettingsFields: Fields<ContainerSettingsInput> = {
  workingDir: withDefault(nullable(absolutePath('a working directory', true)), () => null),
  hostname: withDefault(nullable(hostname), () => null),
  init: withDefault(boolean, () => false),
  readOnlyRootfs: withDefault(boolean, () => false),
  shmSize: withDefault(memoryFs, () => null),
  tmpfs: withDefault(list(tmpfs), () => []),
  extraHosts: withDefault(list(extraHost), () => []),
  dns: withDefault(list(ipAddress, 3), () => []),
  dnsSearch: withDefault(list(domain, 6), () => []),
  dnsOptions: withDefault(list(dnsOption), () => []),
  ulimits: withDefault(ulimits, () => []),
  sysctls: withDefault(sysctls, () => ({})),
  labels: withDefault(labels, () => ({})),
};

/**
 * Checks across the settings and the rest of the spec: tmpfs targets distinct and not a mount's
 * target; with the node's network namespace (hostNetwork) the runtime refuses net.* sysctls (a
 * hostname, name servers and /etc/hosts entries it takes: the container keeps its own UTS
 * namespace and files); on networks at most two name servers.
 */
export function checkContainerSettings(
  s: Partial<ContainerSettingsInput>, rest: { mounts?: readonly MountSpec[]; hostNetwork?: boolean; networks?: readonly string[] }, at: string, problems: Problems,
): void {
  const { mounts, hostNetwork } = rest;
  // The runtime's resolver forwards to three servers at most, and on a network the node's service resolver is one.
  if ((rest.networks?.length ?? 0) > 0 && (s.dns?.length ?? 0) > 2) {
    problems.add(`${at}.dns`, 'on a network the node\'s service resolver is the first of at most three name servers; give at most 2');
  }
  const seen = new Map<string, string>((mounts ?? []).map((m, i) => [m.target, `mounts[${i}]`]));
  (s.tmpfs ?? []).forEach((t, i) => {
    const first = seen.get(t.target);
    if (first !== undefined) problems.add(`${at}.tmpfs[${i}]`, `${t.target} is already the target of ${first}`);
    else seen.set(t.target, `tmpfs[${i}]`);
  });
  if (hostNetwork === true) {
    for (const key of Object.keys(s.sysctls ?? {})) {
      if (key.startsWith('net.')) problems.add(keyPath(`${at}.sysctls`, key), 'a service with hostNetwork shares the node\'s network namespace, where a container may not set net.* sysctls; drop hostNetwork or the sysctl');
    }
  }
}

/** The stored form of the settings (tmpfs sorted by target). */
export function buildContainerSettings(s: ContainerSettingsInput): ContainerSettings {
  return {
    workingDir: s.workingDir,
    hostname: s.hostname,
    init: s.init,
    readOnlyRootfs: s.readOnlyRootfs,
    shmSizeBytes: s.shmSize,
    tmpfs: [...s.tmpfs].sort((a, b) => (a.target < b.target ? -1 : a.target > b.target ? 1 : 0)),
    extraHosts: s.extraHosts,
    dns: s.dns,
    dnsSearch: s.dnsSearch,
    dnsOptions: s.dnsOptions,
    ulimits: s.ulimits,
    sysctls: s.sysctls,
    labels: s.labels,
  };
}
