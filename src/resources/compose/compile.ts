// A loaded compose model (load.ts) compiled into shoal's own resources: one Service per compose
// service (named STACK-service), one Network per compose network (STACK-net; a stack has a
// `default` network its services join unless they name others, so `db` resolves inside the
// stack as in Compose), and the secrets its files name (read by the caller, stored as shoal
// secrets, delivered as files under /run/secrets/). The documents are shoal's authoring
// vocabulary and go through the same strict reader as `shoal apply`, so a stack cannot say what
// an apply could not.
//
// Every field is honoured, warned or refused by name (fields.ts). Every problem is collected
// with its compose path (`services.web.ports[1]`), with a hint; nothing is compiled when there is
// any.

import { isIPv4 } from 'node:net';
import { cidrOf, cidrsOverlap, formatCidr, parseCidr, type Cidr } from '../address-cidr.ts';
import { parseSpecObjects, apiVersion } from '../spec/documents.ts';
import { parseConstraint } from '../spec/constraint.ts';
import { INVALID, Problems, describe, isPlainObject, keyPath, suggest, type Problem } from '../spec/reader.ts';
import { secretOwnerIdMax } from '../spec/service-spec.ts';
import { volumeOptions } from '../spec/service-fields.ts';
import { fixedAddressProblem } from '../spec/network-addresses.ts';
import { slicePrefixFor } from '../spec/network-reader.ts';
import type { SpecSet } from '../spec/documents.ts';
import { ShoalError } from '../../errors.ts';
import { deployFields, serviceFields, topFields, type Verdict } from './fields.ts';
import { asMap, listToMap, type Model } from './load.ts';
import { parseEnvFile, splitCommand, type Lookup } from './interpolate.ts';
import { asJobDocument, jobMode, refuseDependsOnJobs } from './job-mode.ts';
import { stackNamePattern, stackRefusal } from './refusal.ts';

export interface CompileInput {
  stack: string;
  model: Model;
  /** The caller's variables (environment list entries without a value, secrets from environment:). */
  lookup: Lookup;
  /** A file the model names (env_file, a secret's file:), as written; undefined when there is none. */
  readFile: (path: string) => Uint8Array | undefined;
  /** The cluster's networks (name to subnet): a stack network that exists keeps its subnet; new ones avoid all. */
  networks: ReadonlyMap<string, string>;
  /** Variables the files use without a default that are not set (load.ts): each a warning. */
  unset?: readonly string[];
}

export interface StackSecret {
  /** The shoal secret's name (STACK-name). */
  name: string;
  bytes: Uint8Array;
}

export interface Compiled {
  /** Shoal spec documents (Network, then Service), as `shoal apply` reads them. */
  documents: Record<string, unknown>[];
  set: SpecSet;
  /** Secrets the stack owns (created or updated with it). */
  secrets: StackSecret[];
  /** Secrets named `external: true`: must exist already; never removed with the stack. */
  externalSecrets: string[];
  /** Shoal service name to the compose service it came from. */
  services: Map<string, string>;
  /** Fields accepted with no effect, and other notes, with their paths. */
  warnings: Problem[];
  /** depends_on per shoal service: shoal service name to {dependency: condition}. */
  dependsOn: Record<string, Record<string, DependsCondition>>;
}

export type DependsCondition = 'service_started' | 'service_healthy' | 'service_completed_successfully';

/** The pool stack networks without `ipam` take their subnets from, in /20 blocks. */
export const stackSubnetPool = '10.208.0.0/12';
export const stackSubnetPrefix = 20;

/** A DNS label from a compose name: lower case, `_` and `.` as `-`. Null when it cannot be one. */
export function labelOf(name: string): string | null {
  const s = name.toLowerCase().replace(/[_.]/g, '-');
  return /^[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$/.test(s) ? s : null;
}

class Ctx {
  readonly problems = new Problems();
  readonly warnings = new Problems();
  constructor(readonly input: CompileInput) {}
  refuse(at: string, message: string): void {
    this.problems.add(at, message);
  }
  warn(at: string, message: string): void {
    this.warnings.add(at, message);
  }
  /** Checks a mapping's keys against a vocabulary: unknown and refused fields are problems, warned ones warnings. */
  vet(value: Record<string, unknown>, at: string, table: Readonly<Record<string, Verdict>>): void {
    for (const key of Object.keys(value)) {
      if (key.startsWith('x-')) continue;
      const v = table[key];
      const where = keyPath(at, key);
      if (v === undefined) {
        const near = suggest(key, Object.keys(table));
        this.refuse(where, `unknown field${near === null ? '' : `; did you mean ${near}?`}`);
      } else if (v.kind === 'refused') this.refuse(where, `is not supported: ${v.reason}`);
      else if (v.kind === 'warned') this.warn(where, `accepted with no effect: ${v.reason}`);
    }
  }
  /** Keys of a sub-mapping that the mapping below does not read: unknown, with a suggestion. */
  only(value: Record<string, unknown>, at: string, known: readonly string[], notes: Readonly<Record<string, Verdict>> = {}): void {
    this.vet(value, at, { ...Object.fromEntries(known.map((k) => [k, { kind: 'honoured' } as Verdict])), ...notes });
  }
}

export function compileStack(input: CompileInput): Compiled {
  const ctx = new Ctx(input);
  const { model, stack } = input;
  if (!stackNamePattern.test(stack)) ctx.refuse('stack', `${JSON.stringify(stack)} is not a stack name (lower-case letters, digits and -, starting with a letter, at most 32 characters)`);
  ctx.vet(model, '', topFields);
  for (const name of input.unset ?? []) ctx.warn('variables', `${name} is not set: read as an empty string (set it in the environment or in the .env beside the compose file)`);
  if (typeof model.name === 'string' && model.name !== stack) ctx.warn('name', `the stack is named ${stack} (from the command line), not ${model.name}`);
  const services = mapping(ctx, model.services, 'services') ?? {};
  if (Object.keys(services).length === 0 && ctx.problems.count === 0) ctx.refuse('services', 'there are none; a stack runs at least one service');
  const networks = compileNetworks(ctx, model, services);
  const volumes = readVolumes(ctx, model);
  const secrets = readSecrets(ctx, model, 'secrets');
  const configs = readSecrets(ctx, model, 'configs');
  const serviceDocs: Record<string, unknown>[] = [];
  const names = new Map<string, string>();
  const dependsOn: Record<string, Record<string, DependsCondition>> = {};
  for (const [name, raw] of Object.entries(services)) {
    const at = keyPath('services', name);
    const label = labelOf(name);
    if (label === null) {
      ctx.refuse(at, `${JSON.stringify(name)} cannot be a DNS name; name the service with letters, digits, - or _, starting with a letter`);
      continue;
    }
    const shoalName = `${stack}-${label}`;
    if (shoalName.length > 63) {
      ctx.refuse(at, `${shoalName} is ${shoalName.length} characters; a service name (stack-service) is at most 63`);
      continue;
    }
    if (label !== name) ctx.warn(at, `resolves as ${label} on the stack's networks (a DNS name), and is the shoal service ${shoalName}`);
    const other = [...names.entries()].find(([n]) => n === shoalName);
    if (other !== undefined) ctx.refuse(at, `is the same service as ${other[1]} once made a DNS name (${shoalName})`);
    names.set(shoalName, name);
    if (!isPlainObject(raw)) {
      ctx.refuse(at, `must be a mapping, not ${describe(raw)}`);
      continue;
    }
    const doc = compileService(ctx, name, shoalName, raw, at, { networks, volumes, secrets, configs, services });
    if (doc !== null) serviceDocs.push(doc);
    const deps = readDependsOn(ctx, raw.depends_on, `${at}.depends_on`, services);
    refuseDependsOnJobs(ctx, Object.keys(deps), `${at}.depends_on`, services);
    if (Object.keys(deps).length > 0 && doc?.kind !== 'Job') dependsOn[shoalName] = Object.fromEntries(Object.entries(deps).map(([d, c]) => [`${stack}-${labelOf(d) ?? d}`, c]));
  }
  const networkDocs = [...networks.values()].filter((n) => n.doc !== null && n.used).map((n) => n.doc as Record<string, unknown>);
  const policyDocs = publishPolicy(stack, serviceDocs);
  const origins = [...networkDocs, ...serviceDocs, ...policyDocs];
  const documents = origins.map(({ 'x-compose': _origin, ...d }) => d);
  let set: SpecSet = { services: [], networks: [], firewallPolicies: [], jobs: [] };
  // Shoal's own reader checks the values (types, ranges, names); a resource whose compose fields
  // were already refused is not reported twice.
  const refusedAlready = (path: string): boolean => ctx.problems.list.some((p) => p.path === path || p.path.startsWith(`${path}.`) || p.path.startsWith(`${path}[`));
  try {
    if (documents.length > 0) set = parseSpecObjects(documents);
  } catch (err) {
    if (!(err instanceof ShoalError)) throw err;
    const list = (err.details?.problems ?? []) as Problem[];
    for (const p of list) {
      const at = composePath(p.path, origins);
      if (!refusedAlready(at.split(' ')[0] ?? at)) ctx.refuse(at, p.message);
    }
  }
  if (ctx.problems.count > 0) throw stackRefusal(ctx.problems.list, ctx.warnings.list);
  const usedSecrets = new Set([...set.services, ...set.jobs].flatMap((s) => s.secrets.map((r) => r.name)));
  const owned = [...secrets.values(), ...configs.values()].filter((s) => s.bytes !== null && usedSecrets.has(s.name));
  const external = [...secrets.values(), ...configs.values()].filter((s) => s.bytes === null && usedSecrets.has(s.name)).map((s) => s.name);
  return {
    documents, set, secrets: owned.map((s) => ({ name: s.name, bytes: s.bytes as Uint8Array })), externalSecrets: [...new Set(external)].sort(),
    services: names, warnings: ctx.warnings.list, dependsOn,
  };
}

/**
 * The published ports, opened to the outside as Compose publishes them: one FirewallPolicy
 * (STACK-published) with a publish rule per service that publishes ports. It matters only where
 * the firewall is on (docs/network.md); a service on the node's network needs none.
 */
function publishPolicy(stack: string, serviceDocs: readonly Record<string, unknown>[]): Record<string, unknown>[] {
  const publish = serviceDocs.flatMap((d) => {
    const ports = Array.isArray(d.ports) ? (d.ports as { published: number; protocol: string }[]) : [];
    if (ports.length === 0 || d.hostNetwork === true) return [];
    return [{ service: d.name, ports: [...new Set(ports.map((p) => `${p.published}/${p.protocol}`))] }];
  });
  return publish.length === 0 ? [] : [{ apiVersion, kind: 'FirewallPolicy', name: `${stack}-published`, publish, 'x-compose': 'services (ports)' }];
}


/** `services[2].env.X` of the documents as the compose path `services.web (env.X)`. */
function composePath(path: string, documents: readonly Record<string, unknown>[]): string {
  const m = /^(services|networks|firewallPolicies)\[(\d+)\](.*)$/.exec(path);
  if (m === null) return path;
  const docs = documents.filter((d) => d.kind === ({ services: 'Service', networks: 'Network', firewallPolicies: 'FirewallPolicy' } as Record<string, string>)[m[1] ?? '']);
  const doc = docs[Number(m[2])];
  const from = typeof doc?.['x-compose'] === 'string' ? doc['x-compose'] : String(doc?.name ?? path);
  const setting = /^\.([A-Za-z]+)(.*)$/.exec(m[3] ?? '');
  const composeField = setting !== null && doc?.kind === 'Service' ? settingFields[setting[1] ?? ''] : undefined;
  if (composeField !== undefined) return `${from}.${composeField}${setting?.[2] ?? ''}`;
  return m[3] === '' ? from : `${from} (as shoal's ${m[3]?.replace(/^\./, '')})`;
}

function mapping(ctx: Ctx, value: unknown, at: string): Record<string, unknown> | null {
  if (value === undefined || value === null) return null;
  if (!isPlainObject(value)) {
    ctx.refuse(at, `must be a mapping, not ${describe(value)}`);
    return null;
  }
  return value;
}

function str(ctx: Ctx, value: unknown, at: string): string | null {
  if (typeof value === 'string') return value;
  if (typeof value === 'number') return String(value);
  ctx.refuse(at, `must be a string, not ${describe(value)}`);
  return null;
}

function strList(ctx: Ctx, value: unknown, at: string): string[] | null {
  if (!Array.isArray(value)) {
    ctx.refuse(at, `must be a list, not ${describe(value)}`);
    return null;
  }
  const out: string[] = [];
  value.forEach((v, i) => {
    const s = str(ctx, v, `${at}[${i}]`);
    if (s !== null) out.push(s);
  });
  return out.length === value.length ? out : null;
}

// ---- networks ----

interface StackNetwork {
  /** The shoal network's name. */
  name: string;
  external: boolean;
  doc: Record<string, unknown> | null;
  used: boolean;
  /** Its subnet when the files give it (ipam) or the network is external (the cluster's); null when taken from the pool. */
  subnet: string | null;
}

function compileNetworks(ctx: Ctx, model: Model, services: Record<string, unknown>): Map<string, StackNetwork> {
  const out = new Map<string, StackNetwork>();
  const declared = mapping(ctx, model.networks, 'networks') ?? {};
  const taken: Cidr[] = [...ctx.input.networks.values()].map((s) => cidrOf(s));
  const wantsDefault = Object.values(services).some((s) => isPlainObject(s) && s.networks === undefined && s.network_mode === undefined);
  const keys = [...new Set([...Object.keys(declared), ...(wantsDefault ? ['default'] : [])])];
  const pending: { key: string; name: string; internal: boolean; at: string }[] = [];
  for (const key of keys) {
    const at = keyPath('networks', key);
    const raw = declared[key] ?? {};
    const n = raw === null ? {} : mapping(ctx, raw, at);
    if (n === null) continue;
    ctx.only(n, at, ['driver', 'external', 'internal', 'ipam', 'name', 'attachable'], {
      driver_opts: { kind: 'refused', reason: 'shoal networks are its own overlays; their driver takes no options' },
      enable_ipv6: { kind: 'refused', reason: 'shoal networks are IPv4' },
      enable_ipv4: { kind: 'warned', reason: 'shoal networks are IPv4' },
      labels: { kind: 'warned', reason: 'network labels are not kept' },
    });
    if (n.attachable !== undefined) ctx.warn(`${at}.attachable`, 'accepted with no effect: any shoal service may join a network');
    if (n.driver !== undefined && !['overlay', 'bridge'].includes(String(n.driver))) {
      ctx.refuse(`${at}.driver`, `${JSON.stringify(n.driver)} is not supported: a stack network is a shoal overlay network (remove driver, or write overlay)`);
    }
    if (n.external === true) {
      const name = typeof n.name === 'string' ? n.name : key;
      if (labelOf(name) !== name) ctx.refuse(at, `${JSON.stringify(name)} is not a shoal network name (a DNS label)`);
      out.set(key, { name, external: true, doc: null, used: false, subnet: ctx.input.networks.get(name) ?? null });
      continue;
    }
    if (n.external !== undefined && n.external !== false) ctx.refuse(`${at}.external`, `must be true or false, not ${describe(n.external)}`);
    const label = labelOf(typeof n.name === 'string' ? n.name : key);
    if (label === null) {
      ctx.refuse(at, `${JSON.stringify(key)} cannot be part of a network name (a DNS label)`);
      continue;
    }
    if (typeof n.name === 'string') ctx.warn(`${at}.name`, `the network is ${ctx.input.stack}-${label}: a stack's resources carry its name`);
    const name = `${ctx.input.stack}-${label}`;
    const internal = n.internal === true;
    const given = n.ipam === undefined ? null : ipamSubnet(ctx, n.ipam, `${at}.ipam`);
    let subnet = given;
    const existing = ctx.input.networks.get(name);
    if (subnet === null && existing !== undefined) subnet = existing;
    if (subnet !== null) {
      taken.push(cidrOf(subnet));
      out.set(key, { name, external: false, doc: { apiVersion, kind: 'Network', name, subnet, internal, 'x-compose': at }, used: false, subnet: given });
    } else {
      pending.push({ key, name, internal, at });
    }
  }
  for (const p of pending) {
    const subnet = freeSubnet(taken);
    if (subnet === null) {
      ctx.refuse(p.at, `no free /${stackSubnetPrefix} is left in ${stackSubnetPool} for it; give it a subnet (ipam: {config: [{subnet: 10.30.0.0/20}]})`);
      continue;
    }
    taken.push(cidrOf(subnet));
    out.set(p.key, { name: p.name, external: false, doc: { apiVersion, kind: 'Network', name: p.name, subnet, internal: p.internal, 'x-compose': p.at }, used: false, subnet: null });
  }
  return out;
}

/** The one subnet an `ipam` block gives, or null (with problems added for what shoal does not take). */
function ipamSubnet(ctx: Ctx, value: unknown, at: string): string | null {
  const ipam = mapping(ctx, value, at);
  if (ipam === null) return null;
  ctx.only(ipam, at, ['driver', 'config'], { options: { kind: 'refused', reason: 'shoal networks take no IPAM options' } });
  if (ipam.driver !== undefined && ipam.driver !== 'default') ctx.refuse(`${at}.driver`, 'shoal allocates the addresses itself: remove driver (or write default)');
  const cfg = Array.isArray(ipam.config) ? ipam.config : [];
  if (cfg.length > 1) ctx.refuse(`${at}.config`, 'a shoal network has one subnet; give one entry');
  const first: unknown = cfg[0];
  if (!isPlainObject(first)) return null;
  ctx.only(first, `${at}.config[0]`, ['subnet'], {
    ip_range: { kind: 'refused', reason: 'each node takes a slice of the subnet; shoal hands out the addresses' },
    gateway: { kind: 'refused', reason: 'each node is the gateway of its slice' },
    aux_addresses: { kind: 'refused', reason: 'shoal hands out every address of the subnet' },
  });
  const s = typeof first.subnet === 'string' ? parseCidr(first.subnet) : null;
  if (s !== null && s.ok) return formatCidr(s.cidr);
  ctx.refuse(`${at}.config[0].subnet`, s === null ? 'is required (an IPv4 block, 10.20.0.0/16)' : s.message);
  return null;
}

function freeSubnet(taken: readonly Cidr[]): string | null {
  const pool = cidrOf(stackSubnetPool);
  const step = 2 ** (32 - stackSubnetPrefix);
  for (let base = pool.base; base < pool.base + 2 ** (32 - pool.prefix); base += step) {
    const c: Cidr = { base, prefix: stackSubnetPrefix };
    if (!taken.some((t) => cidrsOverlap(t, c))) return formatCidr(c);
  }
  return null;
}

// ---- volumes, secrets, configs (top level) ----

interface StackVolume {
  source: string;
  /** `driver_opts` (the Service mount's volumeOptions); undefined: none. */
  options?: Record<string, string>;
}

function readVolumes(ctx: Ctx, model: Model): Map<string, StackVolume> {
  const out = new Map<string, StackVolume>();
  const declared = mapping(ctx, model.volumes, 'volumes') ?? {};
  for (const [key, raw] of Object.entries(declared)) {
    const at = keyPath('volumes', key);
    const v = raw === null ? {} : mapping(ctx, raw, at);
    if (v === null) continue;
    ctx.only(v, at, ['driver', 'external', 'name', 'driver_opts'], {
      labels: { kind: 'warned', reason: 'volume labels are not kept' },
    });
    if (v.driver !== undefined && v.driver !== 'local') ctx.refuse(`${at}.driver`, `${JSON.stringify(v.driver)} is not supported: a named volume is a node's local volume (remove driver, or write local)`);
    const name = typeof v.name === 'string' ? v.name : v.external === true ? key : `${ctx.input.stack}_${key}`;
    const options = v.driver_opts === undefined || v.driver_opts === null ? undefined : driverOpts(ctx, v.driver_opts, `${at}.driver_opts`, v.external === true);
    out.set(key, options === undefined ? { source: name } : { source: name, options });
  }
  return out;
}

/**
 * A volume's `driver_opts`: the local driver's options (numbers as strings, as Compose reads
 * them), checked by the Service's own reader (its keys, type and device together).
 */
function driverOpts(ctx: Ctx, value: unknown, at: string, external: boolean): Record<string, string> | undefined {
  if (external) {
    ctx.refuse(at, 'an external volume is made outside the stack, with its own options: drop driver_opts, or drop external: true so the nodes create it with these');
    return undefined;
  }
  const o = mapping(ctx, value, at);
  if (o === null) return undefined;
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(o)) out[k] = typeof v === 'number' ? String(v) : v as string;
  // Refused here, at the volume's path, so the services that mount it are not blamed for it.
  const read = volumeOptions(out, at, ctx.problems);
  return read === INVALID ? undefined : read;
}

interface StackFile {
  /** The shoal secret's name. */
  name: string;
  /** The value, read by the caller; null for an external secret (it must exist). */
  bytes: Uint8Array | null;
}

function readSecrets(ctx: Ctx, model: Model, kind: 'secrets' | 'configs'): Map<string, StackFile> {
  const out = new Map<string, StackFile>();
  const declared = mapping(ctx, model[kind], kind) ?? {};
  for (const [key, raw] of Object.entries(declared)) {
    const at = keyPath(kind, key);
    const s = mapping(ctx, raw, at);
    if (s === null) {
      if (raw === null) ctx.refuse(at, 'must say where the value comes from: file:, environment:, content: or external: true');
      continue;
    }
    ctx.only(s, at, ['file', 'environment', 'external', 'name', 'content'], {
      driver: { kind: 'refused', reason: 'secrets are stored by shoal (encrypted in its store)' },
      driver_opts: { kind: 'refused', reason: 'secrets are stored by shoal (encrypted in its store)' },
      template_driver: { kind: 'refused', reason: 'the value is stored as the file says' },
      labels: { kind: 'warned', reason: 'labels are not kept' },
    });
    if (s.external === true) {
      const name = typeof s.name === 'string' ? s.name : key;
      if (labelOf(name) !== name) ctx.refuse(at, `${JSON.stringify(name)} is not a shoal secret name (a DNS label); create it with shoal secret create and name it here`);
      out.set(key, { name, bytes: null });
      continue;
    }
    const label = labelOf(key);
    if (label === null) {
      ctx.refuse(at, `${JSON.stringify(key)} cannot be part of a secret's name (a DNS label)`);
      continue;
    }
    const name = `${ctx.input.stack}-${label}`;
    const sources = ['file', 'environment', 'content'].filter((f) => s[f] !== undefined);
    if (sources.length !== 1) {
      ctx.refuse(at, sources.length === 0 ? 'must say where the value comes from: file:, environment:, content: or external: true' : `gives ${sources.join(' and ')}; give one`);
      continue;
    }
    let bytes: Uint8Array | null = null;
    if (typeof s.file === 'string') {
      bytes = ctx.input.readFile(s.file) ?? null;
      if (bytes === null) ctx.refuse(`${at}.file`, `${s.file} cannot be read (a path relative to the first compose file's folder)`);
    } else if (typeof s.environment === 'string') {
      const v = ctx.input.lookup(s.environment);
      if (v === undefined) ctx.refuse(`${at}.environment`, `the variable ${s.environment} is not set`);
      else bytes = Buffer.from(v, 'utf8');
    } else if (typeof s.content === 'string') {
      bytes = Buffer.from(s.content, 'utf8');
    } else {
      ctx.refuse(`${at}.${sources[0] ?? 'file'}`, 'must be a string');
    }
    if (bytes !== null) out.set(key, { name, bytes });
  }
  return out;
}

// ---- services ----

interface Tops {
  networks: Map<string, StackNetwork>;
  volumes: Map<string, StackVolume>;
  secrets: Map<string, StackFile>;
  configs: Map<string, StackFile>;
  services: Record<string, unknown>;
}

function compileService(ctx: Ctx, composeName: string, name: string, s: Record<string, unknown>, at: string, tops: Tops): Record<string, unknown> | null {
  ctx.vet(s, at, serviceFields);
  const doc: Record<string, unknown> = { apiVersion, kind: 'Service', name, 'x-compose': at };
  if (s.image === undefined) ctx.refuse(`${at}.image`, 'is required: a cluster runs images (build and push it, then name it here)');
  else doc.image = str(ctx, s.image, `${at}.image`);
  const argv = (field: 'command' | 'entrypoint'): string[] | null | undefined => {
    const v = s[field];
    if (v === undefined || v === null) return undefined;
    if (typeof v === 'string') {
      const parts = splitCommand(v);
      if (parts === null) ctx.refuse(`${at}.${field}`, 'has a quote that is not closed');
      return parts;
    }
    return strList(ctx, v, `${at}.${field}`);
  };
  const entrypoint = argv('entrypoint');
  const command = argv('command');
  if (entrypoint !== undefined && entrypoint !== null) {
    if (entrypoint.length === 0) ctx.refuse(`${at}.entrypoint`, 'an empty entrypoint is not supported; name the program to run');
    else doc.command = entrypoint;
  }
  if (command !== undefined && command !== null) doc.args = command;
  doc.env = environment(ctx, s, at);
  if (s.user !== undefined) doc.user = str(ctx, s.user, `${at}.user`);
  const deploy = mapping(ctx, s.deploy, `${at}.deploy`) ?? {};
  const replicas = compileDeploy(ctx, s, deploy, `${at}.deploy`, doc);
  if (s.container_name !== undefined) {
    if (doc.mode === 'global' || replicas !== 1) ctx.refuse(`${at}.container_name`, `a service of ${doc.mode === 'global' ? 'one task per node' : `${replicas} replicas`} cannot give one name to its containers; remove container_name (the service name resolves)`);
    else ctx.warn(`${at}.container_name`, 'accepted with no effect: shoal names the task\'s container; the service name resolves on the stack\'s networks');
  }
  doc.ports = compilePorts(ctx, s.ports, `${at}.ports`);
  doc.mounts = compileVolumes(ctx, s.volumes, `${at}.volumes`, tops.volumes);
  doc.devices = compileDevices(ctx, s.devices, `${at}.devices`);
  if (s.cap_add !== undefined) doc.capAdd = strList(ctx, s.cap_add, `${at}.cap_add`);
  if (s.cap_drop !== undefined) doc.capDrop = strList(ctx, s.cap_drop, `${at}.cap_drop`);
  if (s.privileged !== undefined) doc.privileged = s.privileged;
  compileNetworking(ctx, s, at, tops.networks, doc);
  if (s.healthcheck !== undefined) doc.healthCheck = compileHealthcheck(ctx, s.healthcheck, `${at}.healthcheck`);
  if (s.stop_signal !== undefined) doc.stopSignal = s.stop_signal;
  if (s.stop_grace_period !== undefined) doc.stopGracePeriod = s.stop_grace_period;
  compileRestart(ctx, s.restart, deploy.restart_policy, at, doc);
  if (s.logging !== undefined) doc.logs = compileLogging(ctx, s.logging, `${at}.logging`);
  doc.secrets = [
    ...compileSecretRefs(ctx, s.secrets, `${at}.secrets`, tops.secrets, 'secrets'),
    ...compileSecretRefs(ctx, s.configs, `${at}.configs`, tops.configs, 'configs'),
  ];
  compileContainerSettings(ctx, s, at, doc);
  compileDeployLabels(ctx, deploy.labels, `${at}.deploy.labels`, doc);
  void composeName;
  if (doc.mode !== jobMode) return doc;
  const restartAt = isPlainObject(s.deploy) && s.deploy.restart_policy !== undefined ? `${at}.deploy.restart_policy` : `${at}.restart`;
  return asJobDocument(ctx, doc, at, { hasDependsOn: s.depends_on !== undefined, restartAt });
}

function environment(ctx: Ctx, s: Record<string, unknown>, at: string): Record<string, string> {
  const out: Record<string, string> = {};
  if (s.env_file !== undefined) {
    const files = typeof s.env_file === 'string' ? [s.env_file] : Array.isArray(s.env_file) ? s.env_file : null;
    if (files === null) ctx.refuse(`${at}.env_file`, `must be a file name or a list of them, not ${describe(s.env_file)}`);
    (files ?? []).forEach((f: unknown, i) => {
      const where = typeof s.env_file === 'string' ? `${at}.env_file` : `${at}.env_file[${i}]`;
      const path = typeof f === 'string' ? f : isPlainObject(f) && typeof f.path === 'string' ? f.path : null;
      const required = !(isPlainObject(f) && f.required === false);
      if (isPlainObject(f)) ctx.only(f, where, ['path', 'required', 'format']);
      if (path === null) {
        ctx.refuse(where, 'must be a file name, or {path, required}');
        return;
      }
      const bytes = ctx.input.readFile(path);
      if (bytes === undefined) {
        if (required) ctx.refuse(where, `${path} cannot be read (a path relative to the first compose file's folder; required: false if it may be missing)`);
        return;
      }
      for (const [k, v] of parseEnvFile(Buffer.from(bytes).toString('utf8'), `${where} (${path})`, ctx.problems)) out[k] = v;
    });
  }
  if (s.environment !== undefined) {
    if (!isPlainObject(s.environment) && !Array.isArray(s.environment)) ctx.refuse(`${at}.environment`, `must be a mapping or a list of KEY=VALUE, not ${describe(s.environment)}`);
    if (Array.isArray(s.environment)) {
      s.environment.forEach((e, i) => {
        if (typeof e !== 'string') ctx.refuse(`${at}.environment[${i}]`, `must be KEY=VALUE, not ${describe(e)}`);
      });
    }
    for (const [k, v] of Object.entries(asMap(s.environment))) {
      if (v === null || v === undefined) {
        const from = ctx.input.lookup(k);
        if (from === undefined) ctx.warn(`${at}.environment.${k}`, `has no value and ${k} is not set in the environment: left out`);
        else out[k] = from;
      } else if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') out[k] = String(v);
      else ctx.refuse(keyPath(`${at}.environment`, k), `must be a string, a number or a boolean, not ${describe(v)}`);
    }
  }
  return out;
}

/** Compose's byte values (`512m`, `1g`, `2048k`, `100000`) as bytes: b, k, m, g, t are powers of 1024. */
export function composeBytes(value: unknown): number | null {
  if (typeof value === 'number' && Number.isInteger(value) && value >= 0) return value;
  if (typeof value !== 'string') return null;
  const m = /^(\d+(?:\.\d+)?)\s*([bkmgt]?)i?b?$/i.exec(value.trim());
  if (m === null) return null;
  const pow = ['b', 'k', 'm', 'g', 't'].indexOf((m[2] ?? '').toLowerCase() || 'b');
  return Math.round(Number(m[1]) * 1024 ** pow);
}

function bytesAt(ctx: Ctx, value: unknown, at: string): number | null {
  const n = composeBytes(value);
  if (n === null) ctx.refuse(at, `${typeof value === 'string' ? JSON.stringify(value) : describe(value)} is not a byte value (512m, 1g, 2048k or a number of bytes)`);
  return n;
}

function compileDeploy(ctx: Ctx, s: Record<string, unknown>, d: Record<string, unknown>, at: string, doc: Record<string, unknown>): number {
  ctx.vet(d, at, deployFields);
  const mode = d.mode ?? 'replicated';
  if (mode !== 'replicated' && mode !== 'global') {
    if (mode === jobMode) doc.mode = jobMode;
    else ctx.refuse(`${at}.mode`, mode === 'global-job' ? 'global-job (one run per node) is not supported: a shoal job runs one task per run; write a replicated-job per node, each constrained with node.hostname' : `${JSON.stringify(mode)} is not one of replicated, global, ${jobMode}`);
  }
  if (doc.mode !== jobMode) doc.mode = mode === 'global' ? 'global' : 'replicated';
  let replicas = 1;
  if (d.replicas !== undefined) {
    if (typeof d.replicas === 'number') replicas = d.replicas;
    doc.replicas = d.replicas;
    if (s.scale !== undefined) ctx.warn(`${at.replace(/\.deploy$/, '')}.scale`, 'deploy.replicas is given too, and wins');
  } else if (s.scale !== undefined) {
    if (typeof s.scale === 'number') replicas = s.scale;
    doc.replicas = s.scale;
  }
  if (mode === 'global') delete doc.replicas;
  const resources: Record<string, Record<string, unknown>> = { reservations: {}, limits: {} };
  if (s.cpus !== undefined) resources.limits!.cpu = String(s.cpus);
  if (s.mem_limit !== undefined) resources.limits!.memory = bytesAt(ctx, s.mem_limit, `${at.replace(/\.deploy$/, '')}.mem_limit`);
  if (s.mem_reservation !== undefined) resources.reservations!.memory = bytesAt(ctx, s.mem_reservation, `${at.replace(/\.deploy$/, '')}.mem_reservation`);
  const res = mapping(ctx, d.resources, `${at}.resources`);
  if (res !== null) {
    ctx.only(res, `${at}.resources`, ['limits', 'reservations']);
    for (const part of ['limits', 'reservations'] as const) {
      const r = mapping(ctx, res[part], `${at}.resources.${part}`);
      if (r === null) continue;
      ctx.only(r, `${at}.resources.${part}`, ['cpus', 'memory'], {
        pids: { kind: 'refused', reason: 'shoal\'s Service has no process limit yet' },
        devices: { kind: 'refused', reason: 'shoal\'s Service has no device reservations (GPUs) yet; name a device under devices:' },
        generic_resources: { kind: 'refused', reason: 'shoal schedules CPU and memory only' },
      });
      if (r.cpus !== undefined) resources[part]!.cpu = String(r.cpus);
      if (r.memory !== undefined) resources[part]!.memory = bytesAt(ctx, r.memory, `${at}.resources.${part}.memory`);
    }
  }
  doc.resources = resources;
  const placement = mapping(ctx, d.placement, `${at}.placement`);
  if (placement !== null) {
    ctx.only(placement, `${at}.placement`, ['constraints', 'preferences', 'max_replicas_per_node']);
    if (placement.constraints !== undefined) {
      const list = strList(ctx, placement.constraints, `${at}.placement.constraints`) ?? [];
      doc.constraints = list.map((c, i) => constraintOf(ctx, c, `${at}.placement.constraints[${i}]`));
    }
    if (placement.max_replicas_per_node !== undefined) doc.maxPerNode = placement.max_replicas_per_node;
    if (placement.preferences !== undefined) {
      const prefs = Array.isArray(placement.preferences) ? placement.preferences : [];
      if (prefs.length > 1) ctx.refuse(`${at}.placement.preferences`, 'shoal spreads over one node label; give one preference');
      const p: unknown = prefs[0];
      if (isPlainObject(p) && typeof p.spread === 'string' && p.spread.startsWith('node.labels.')) doc.placement = { strategy: 'spread', spreadOver: p.spread.slice('node.labels.'.length) };
      else if (prefs.length > 0) ctx.refuse(`${at}.placement.preferences[0]`, 'write {spread: node.labels.KEY}');
    }
  }
  const update = mapping(ctx, d.update_config, `${at}.update_config`);
  if (update !== null) doc.update = compileUpdate(ctx, update, `${at}.update_config`, replicas);
  if (d.rollback_config !== undefined) ctx.warn(`${at}.rollback_config`, 'a rollback replaces tasks at update_config\'s pace (shoal has one update policy)');
  if (d.endpoint_mode !== undefined && d.endpoint_mode !== 'dnsrr') {
    if (d.endpoint_mode === 'vip') ctx.warn(`${at}.endpoint_mode`, 'vip: shoal has no per-service virtual IP; the name resolves to the tasks\' addresses (as dnsrr)');
    else ctx.refuse(`${at}.endpoint_mode`, `${JSON.stringify(d.endpoint_mode)} is not one of vip, dnsrr`);
  }
  return mode === 'global' ? 0 : replicas;
}

function constraintOf(ctx: Ctx, text: string, at: string): string {
  const m = /^\s*(node\.[A-Za-z0-9_.\-/]+|engine\.labels\.\S+)\s*(==|!=)\s*(.+?)\s*$/.exec(text);
  if (m === null) return text;
  const [, subject = '', op = '', value = ''] = m;
  if (subject === 'node.hostname') return `node.name ${op} ${value}`;
  // node.role and node.platform.os/.arch are shoal's too (constraint.ts: a manager is a raft voter,
  // a worker a learner; Swarm's x86_64/aarch64 read as amd64/arm64); the service reader checks the values.
  if (subject.startsWith('engine.labels.')) {
    ctx.refuse(at, `${subject} is not supported: shoal's constraints name node.labels.KEY, node.name, node.id, node.role or node.platform.os/.arch; give the nodes a label (shoal node update --label) and constrain on it`);
    return `${subject} ${op} ${value}`;
  }
  const mapped = `${subject} ${op} ${value}`;
  // Said here, at the Compose path, rather than at the spec's: a role or platform no node has.
  const parsed = parseConstraint(mapped);
  if (!parsed.ok && (subject === 'node.role' || subject.startsWith('node.platform.'))) ctx.refuse(at, parsed.message);
  return parsed.ok ? parsed.constraint.text : mapped;
}

function compileUpdate(ctx: Ctx, u: Record<string, unknown>, at: string, replicas: number): Record<string, unknown> {
  ctx.only(u, at, ['parallelism', 'delay', 'failure_action', 'monitor', 'order'], {
    max_failure_ratio: { kind: 'warned', reason: 'shoal stops at the first failed batch (failure_action)' },
  });
  const out: Record<string, unknown> = {};
  if (u.parallelism !== undefined) out.parallelism = u.parallelism === 0 ? Math.max(1, replicas) : u.parallelism;
  if (u.delay !== undefined) out.delay = u.delay;
  if (u.monitor !== undefined) out.monitor = u.monitor;
  if (u.order !== undefined) out.order = u.order;
  if (u.failure_action !== undefined) {
    if (u.failure_action === 'continue') ctx.refuse(`${at}.failure_action`, 'continue is not supported: a failed batch pauses or rolls back the update (write pause or rollback)');
    else out.failureAction = u.failure_action;
  }
  return out;
}

function compileRestart(ctx: Ctx, restart: unknown, policy: unknown, at: string, doc: Record<string, unknown>): void {
  if (policy !== undefined) {
    const p = mapping(ctx, policy, `${at}.deploy.restart_policy`);
    if (p === null) return;
    ctx.only(p, `${at}.deploy.restart_policy`, ['condition', 'delay', 'max_attempts'], {
      window: { kind: 'warned', reason: 'a restart counts as failed when the task exits non-zero; there is no window' },
    });
    const condition = p.condition === undefined || p.condition === 'any' ? 'always' : p.condition === 'none' ? 'never' : p.condition;
    if (!['always', 'never', 'on-failure'].includes(String(condition))) ctx.refuse(`${at}.deploy.restart_policy.condition`, `${JSON.stringify(p.condition)} is not one of none, on-failure, any`);
    doc.restart = { condition, ...(p.delay !== undefined ? { delay: p.delay } : {}), ...(p.max_attempts !== undefined ? { maxAttempts: p.max_attempts } : {}) };
    if (restart !== undefined) ctx.warn(`${at}.restart`, 'deploy.restart_policy is given too, and wins');
    return;
  }
  if (restart === undefined) return;
  const r = restart === false ? 'no' : restart;
  if (r === 'no') doc.restart = { condition: 'never' };
  else if (r === 'always' || r === 'unless-stopped') doc.restart = { condition: 'always' };
  else if (typeof r === 'string' && /^on-failure(:\d+)?$/.test(r)) {
    const n = r.split(':')[1];
    doc.restart = { condition: 'on-failure', ...(n !== undefined ? { maxAttempts: Number(n) } : {}) };
  } else ctx.refuse(`${at}.restart`, `${typeof r === 'string' ? JSON.stringify(r) : describe(r)} is not one of "no", always, on-failure[:N], unless-stopped`);
}

function compileLogging(ctx: Ctx, value: unknown, at: string): Record<string, unknown> | undefined {
  const l = mapping(ctx, value, at);
  if (l === null) return undefined;
  ctx.only(l, at, ['driver', 'options']);
  if (l.driver !== undefined && l.driver !== 'json-file' && l.driver !== 'local') {
    ctx.refuse(`${at}.driver`, `${JSON.stringify(l.driver)} is not supported: shoal keeps each task's logs on its node (json-file); read them with shoal service logs`);
  }
  const o = mapping(ctx, l.options, `${at}.options`) ?? {};
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) {
    if (k === 'max-size') out.maxSize = bytesAt(ctx, v, `${at}.options.max-size`);
    else if (k === 'max-file') out.maxFiles = typeof v === 'string' ? Number(v) : v;
    else ctx.warn(keyPath(`${at}.options`, k), 'accepted with no effect: shoal sets max-size and max-file only');
  }
  return out;
}

function compileHealthcheck(ctx: Ctx, value: unknown, at: string): Record<string, unknown> | null | undefined {
  const h = mapping(ctx, value, at);
  if (h === null) return undefined;
  ctx.only(h, at, ['test', 'interval', 'timeout', 'retries', 'start_period', 'disable'], {
    start_interval: { kind: 'warned', reason: 'checks run at interval during the start period too' },
  });
  if (h.disable === true) return null;
  let command: string[] | null = null;
  if (typeof h.test === 'string') command = ['/bin/sh', '-c', h.test];
  else if (Array.isArray(h.test)) {
    const t = h.test.map(String);
    if (t[0] === 'NONE') return null;
    if (t[0] === 'CMD') command = t.slice(1);
    else if (t[0] === 'CMD-SHELL') command = ['/bin/sh', '-c', t.slice(1).join(' ')];
    else ctx.refuse(`${at}.test`, 'a list starts with CMD, CMD-SHELL or NONE');
  } else if (h.test === undefined) {
    ctx.refuse(`${at}.test`, 'is required: shoal runs the check the file names (the image\'s HEALTHCHECK is not read)');
  } else {
    ctx.refuse(`${at}.test`, `must be a string or a list, not ${describe(h.test)}`);
  }
  return {
    ...(command !== null ? { command } : {}),
    ...(h.interval !== undefined ? { interval: h.interval } : {}),
    ...(h.timeout !== undefined ? { timeout: h.timeout } : {}),
    ...(h.retries !== undefined ? { retries: h.retries } : {}),
    ...(h.start_period !== undefined ? { startPeriod: h.start_period } : {}),
  };
}

interface PortOut { published: number; target: number; protocol: string; hostIp?: string; mode?: 'ingress' | 'host' }

function compilePorts(ctx: Ctx, value: unknown, at: string): PortOut[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
    ctx.refuse(at, `must be a list, not ${describe(value)}`);
    return [];
  }
  const out: PortOut[] = [];
  value.forEach((p, i) => out.push(...port(ctx, p, `${at}[${i}]`)));
  return out;
}

function range(text: string): [number, number] | null {
  const m = /^(\d+)(?:-(\d+))?$/.exec(text);
  if (m === null) return null;
  const a = Number(m[1]);
  const b = m[2] === undefined ? a : Number(m[2]);
  return b >= a ? [a, b] : null;
}

const allAddresses = new Set(['', '0.0.0.0', '::', '[::]']);

/** `[HOST_IP:][NODE_PORT:]CONTAINER_PORT[/PROTOCOL]` in its parts; null when it has too many. */
function shortPort(p: string): { hostIp: string; published: string | null; target: string; protocol: string } | null {
  let rest = p;
  let protocol = 'tcp';
  let hostIp = '';
  const slash = rest.lastIndexOf('/');
  if (slash >= 0) {
    protocol = rest.slice(slash + 1);
    rest = rest.slice(0, slash);
  }
  const v6 = /^\[([^\]]*)\]:(.*)$/.exec(rest);
  if (v6 !== null) {
    hostIp = v6[1] ?? '';
    rest = v6[2] ?? '';
  }
  const parts = rest.split(':');
  if (parts.length > 3) return null;
  if (parts.length === 3) hostIp = parts[0] ?? '';
  const published = parts.length >= 2 ? parts[parts.length - 2] ?? '' : '';
  return { hostIp, published: published === '' ? null : published, target: parts[parts.length - 1] ?? '', protocol };
}

function port(ctx: Ctx, p: unknown, at: string): PortOut[] {
  let mode: 'ingress' | 'host' | null = null;
  let hostIp = '';
  let published: string | null;
  let target: string;
  let protocol = 'tcp';
  if (typeof p === 'number') {
    published = null;
    target = String(p);
  } else if (typeof p === 'string') {
    const short = shortPort(p);
    if (short === null) {
      ctx.refuse(at, `${JSON.stringify(p)} is not a port ([HOST_IP:]NODE_PORT:CONTAINER_PORT[/PROTOCOL])`);
      return [];
    }
    ({ hostIp, published, target, protocol } = short);
  } else if (isPlainObject(p)) {
    ctx.only(p, at, ['target', 'published', 'protocol', 'host_ip', 'mode', 'name'], {
      app_protocol: { kind: 'warned', reason: 'informational' },
    });
    // The Service's ports[].mode: ingress (the routing mesh, the default of a replicated service) or host.
    if (p.mode === 'ingress' || p.mode === 'host') mode = p.mode;
    else if (p.mode !== undefined) ctx.refuse(`${at}.mode`, `${JSON.stringify(p.mode)} is not one of host, ingress`);
    target = String(p.target ?? '');
    published = p.published === undefined ? null : String(p.published);
    protocol = p.protocol === undefined ? 'tcp' : String(p.protocol);
    hostIp = p.host_ip === undefined ? '' : String(p.host_ip);
  } else {
    ctx.refuse(at, `must be a port (a string, a number or a mapping), not ${describe(p)}`);
    return [];
  }
  // One address of the node (the Service's ports[].hostIp, feature level 6); the spec reader checks it is one.
  const onAddress = allAddresses.has(hostIp) ? {} : { hostIp: hostIp.replace(/^\[(.*)\]$/, '$1') };
  if (protocol !== 'tcp' && protocol !== 'udp') {
    ctx.refuse(at, `${JSON.stringify(protocol)} is not tcp or udp`);
    return [];
  }
  const t = range(target);
  if (t === null) {
    ctx.refuse(at, `${JSON.stringify(target)} is not a container port or range (80, 8000-8010)`);
    return [];
  }
  if (published === null) {
    ctx.refuse(at, `publishes container port ${target} on a port the runtime would choose: name the node port (${target}:${target}), or remove it (services on the stack's networks reach every port)`);
    return [];
  }
  const h = range(published);
  if (h === null) {
    ctx.refuse(at, `${JSON.stringify(published)} is not a node port or range (8080, 8000-8010)`);
    return [];
  }
  if (h[1] - h[0] !== t[1] - t[0]) {
    ctx.refuse(at, `the node ports ${published} and the container ports ${target} are ranges of different sizes`);
    return [];
  }
  const out: PortOut[] = [];
  for (let k = 0; k <= t[1] - t[0]; k++) out.push({ published: h[0] + k, target: t[0] + k, protocol, ...onAddress, ...(mode !== null ? { mode } : {}) });
  return out;
}

interface MountIn { type: string; source: string; target: string; readOnly: boolean }

/** A `volumes` entry in the short syntax (`source:target[:ro]`); null when refused. */
function shortMount(ctx: Ctx, v: string, where: string): MountIn | null {
  const parts = v.split(':');
  if (parts.length === 1) {
    ctx.refuse(where, `${JSON.stringify(v)} is an anonymous volume: name it (data:${v}) and declare it under volumes:, so each task finds it again`);
    return null;
  }
  const source = parts[0] ?? '';
  let readOnly = false;
  for (const opt of (parts[2] ?? '').split(',').filter((o) => o !== '')) {
    if (opt === 'ro') readOnly = true;
    else if (opt === 'rw') readOnly = false;
    else if (['z', 'Z', 'cached', 'delegated', 'consistent', 'nocopy'].includes(opt)) ctx.warn(where, `accepted with no effect: the option ${opt} is not passed to the runtime`);
    else ctx.refuse(where, `${JSON.stringify(opt)} is not supported: a mount takes ro or rw (bind propagation, such as rslave, is not passed to the runtime)`);
  }
  const type = source.startsWith('/') || source.startsWith('.') || source.startsWith('~') ? 'bind' : 'volume';
  return { type, source, target: parts[1] ?? '', readOnly };
}

/** A `volumes` entry in the long syntax; null when refused. */
function longMount(ctx: Ctx, v: Record<string, unknown>, where: string): MountIn | null {
  ctx.only(v, where, ['type', 'source', 'target', 'read_only'], {
    bind: { kind: 'warned', reason: 'bind options (propagation, create_host_path, selinux) are not passed to the runtime' },
    volume: { kind: 'warned', reason: 'volume options (nocopy, subpath) are not passed to the runtime' },
    consistency: { kind: 'warned', reason: 'a macOS setting; no effect on Linux' },
    tmpfs: { kind: 'refused', reason: 'write the tmpfs under the service\'s tmpfs: instead (tmpfs: ["/path:size=64m,mode=1777"])' },
  });
  const type = String(v.type ?? 'volume');
  if (type === 'tmpfs') {
    ctx.refuse(`${where}.type`, 'tmpfs is not supported here: write it under the service\'s tmpfs: instead (tmpfs: ["/path:size=64m,mode=1777"])');
    return null;
  }
  if (type === 'npipe' || type === 'cluster' || type === 'image') {
    ctx.refuse(`${where}.type`, `${type} is not supported: shoal mounts bind paths and named volumes (shoal's Service has no ${type} mounts yet)`);
    return null;
  }
  if (type !== 'bind' && type !== 'volume') {
    ctx.refuse(`${where}.type`, `${JSON.stringify(type)} is not one of volume, bind`);
    return null;
  }
  if (v.source === undefined || v.source === '') {
    ctx.refuse(`${where}.source`, 'is required: name the volume (declared under volumes:) or the absolute host path');
    return null;
  }
  return { type, source: String(v.source), target: String(v.target ?? ''), readOnly: v.read_only === true };
}

function compileVolumes(ctx: Ctx, value: unknown, at: string, volumes: Map<string, StackVolume>): Record<string, unknown>[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
    ctx.refuse(at, `must be a list, not ${describe(value)}`);
    return [];
  }
  const out: Record<string, unknown>[] = [];
  value.forEach((v, i) => {
    const where = `${at}[${i}]`;
    if (typeof v !== 'string' && !isPlainObject(v)) {
      ctx.refuse(where, `must be a string or a mapping, not ${describe(v)}`);
      return;
    }
    const m = typeof v === 'string' ? shortMount(ctx, v, where) : longMount(ctx, v, where);
    if (m === null) return;
    if (m.source === '') {
      ctx.refuse(where, `${JSON.stringify(v)} has no source (is a variable it names not set?)`);
      return;
    }
    if (m.type === 'bind') {
      if (!m.source.startsWith('/')) {
        ctx.refuse(where, `the relative bind mount ${m.source} names a path on the machine that runs the CLI, which the nodes do not have: for files, use a configs: or secrets: entry; for data, a named volume; or an absolute path on the nodes with a placement constraint`);
        return;
      }
      out.push({ type: 'bind', source: m.source.replace(/\/+$/, '') || '/', target: m.target, readOnly: m.readOnly });
      return;
    }
    const vol = volumes.get(m.source);
    if (vol === undefined) {
      ctx.refuse(where, `names the volume ${m.source}, which is not declared under volumes: (add volumes: {${m.source}: {}})`);
      return;
    }
    out.push({ type: 'volume', source: vol.source, target: m.target, readOnly: m.readOnly, ...(vol.options === undefined ? {} : { volumeOptions: vol.options }) });
  });
  return out;
}

function compileDevices(ctx: Ctx, value: unknown, at: string): Record<string, unknown>[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
    ctx.refuse(at, `must be a list, not ${describe(value)}`);
    return [];
  }
  return value.flatMap((d, i): Record<string, unknown>[] => {
    const where = `${at}[${i}]`;
    if (isPlainObject(d)) {
      ctx.only(d, where, ['source', 'target', 'permissions']);
      return [{ hostPath: d.source, ...(d.target !== undefined ? { containerPath: d.target } : {}), ...(d.permissions !== undefined ? { permissions: d.permissions } : {}) }];
    }
    if (typeof d !== 'string') {
      ctx.refuse(where, `must be HOST[:CONTAINER[:PERMISSIONS]], not ${describe(d)}`);
      return [];
    }
    if (!d.startsWith('/')) {
      ctx.refuse(where, `${JSON.stringify(d)}: CDI device names are not supported; name the device's path under /dev/`);
      return [];
    }
    const [host, container, perms] = d.split(':');
    return [{ hostPath: host, ...(container !== undefined ? { containerPath: container } : {}), ...(perms !== undefined ? { permissions: perms } : {}) }];
  });
}

function compileNetworking(ctx: Ctx, s: Record<string, unknown>, at: string, networks: Map<string, StackNetwork>, doc: Record<string, unknown>): void {
  if (s.network_mode !== undefined) {
    const mode = String(s.network_mode);
    if (mode === 'host') doc.hostNetwork = true;
    else if (mode.startsWith('service:') || mode.startsWith('container:')) {
      ctx.refuse(`${at}.network_mode`, `${mode} is not supported: a task cannot share another's network stack (its tasks may run on other nodes); put both on the stack's network, where names resolve`);
    } else if (mode === 'bridge') ctx.warn(`${at}.network_mode`, 'bridge: the task is on the runtime\'s default network, where stack names do not resolve');
    else if (mode === 'none') ctx.refuse(`${at}.network_mode`, 'none is not supported: shoal\'s Service always has a network');
    else ctx.refuse(`${at}.network_mode`, `${JSON.stringify(mode)} is not one of host, bridge`);
    if (s.networks !== undefined) ctx.refuse(`${at}.networks`, 'a service with network_mode joins no network; remove one of them');
    doc.networks = [];
    return;
  }
  const named = s.networks === undefined ? { default: null } : Array.isArray(s.networks) ? listToMap(s.networks) : mapping(ctx, s.networks, `${at}.networks`) ?? {};
  const out: string[] = [];
  const aliases: Record<string, string[]> = {};
  const addresses: Record<string, string> = {};
  for (const [key, opts] of Object.entries(named)) {
    const where = keyPath(`${at}.networks`, key);
    const net = networks.get(key);
    if (net === undefined) {
      ctx.refuse(where, `the network ${key} is not declared under networks:`);
      continue;
    }
    net.used = true;
    out.push(net.name);
    if (opts === null || opts === undefined) continue;
    const o = mapping(ctx, opts, where);
    if (o === null) continue;
    ctx.only(o, where, ['aliases', 'ipv4_address'], {
      ipv6_address: { kind: 'refused', reason: 'shoal networks are IPv4' },
      link_local_ips: { kind: 'refused', reason: 'shoal hands out the addresses' },
      mac_address: { kind: 'refused', reason: 'shoal hands out the addresses' },
      driver_opts: { kind: 'refused', reason: 'shoal networks take no options' },
      priority: { kind: 'warned', reason: 'the order of a task\'s networks is shoal\'s' },
      gw_priority: { kind: 'warned', reason: 'the order of a task\'s networks is shoal\'s' },
    });
    const named = o.aliases === undefined || o.aliases === null ? [] : compileAliases(ctx, o.aliases, `${where}.aliases`, String(doc.name));
    if (named.length > 0) aliases[net.name] = [...new Set([...(aliases[net.name] ?? []), ...named])];
    if (o.ipv4_address !== undefined && o.ipv4_address !== null) {
      const address = fixedAddress(ctx, o.ipv4_address, `${where}.ipv4_address`, net, doc);
      if (address !== null) addresses[net.name] = address;
    }
  }
  doc.networks = out;
  if (Object.keys(aliases).length > 0) doc.networkAliases = aliases;
  if (Object.keys(addresses).length > 0) doc.networkAddresses = addresses;
}

/**
 * A service's `ipv4_address` on a network (the Service's networkAddresses): an IPv4 address a
 * task may hold in the network's explicit subnet, for a service of one replica replaced
 * stop-first; null when refused. That no other service fixes it is checked at deploy.
 */
function fixedAddress(ctx: Ctx, value: unknown, at: string, net: StackNetwork, doc: Record<string, unknown>): string | null {
  const address = str(ctx, value, at);
  if (address === null) return null;
  if (!isIPv4(address)) {
    ctx.refuse(at, `${JSON.stringify(address)} is not an IPv4 address (shoal networks are IPv4)`);
    return null;
  }
  if (net.subnet === null && net.external) {
    ctx.refuse(at, `the external network ${net.name} does not exist, so its subnet is not known: create it first (shoal apply a Network), or drop ipv4_address`);
    return null;
  }
  if (net.subnet === null) {
    ctx.refuse(at, `the network ${net.name} takes its subnet from shoal's pool, so no address in it can be chosen in advance: give the network a subnet (ipam: {config: [{subnet: 10.30.0.0/24}]}) and pick the address in it`);
    return null;
  }
  const wrong = fixedAddressProblem({ name: net.name, subnet: net.subnet, slicePrefix: slicePrefixFor(cidrOf(net.subnet).prefix) }, address);
  if (wrong !== null) {
    ctx.refuse(at, wrong);
    return null;
  }
  const update = doc.update as { order?: unknown } | undefined;
  const refusal = doc.mode === 'global' ? 'a global service runs a task on every node, and one address can be only one task\'s: make it replicated with one replica, or drop ipv4_address'
    : doc.mode === jobMode ? `a ${jobMode}'s runs are not a name others reach at an address: drop ipv4_address, or make it a service`
      : typeof doc.replicas === 'number' && doc.replicas > 1 ? `the service has ${doc.replicas} replicas, and one address can be only one task's: run one replica, or drop ipv4_address (the service's name resolves to every task)`
        : update?.order === 'start-first' ? 'a service with a fixed address is updated stop-first (its new task takes the address once the old one gave it back): drop update_config.order: start-first, or ipv4_address'
          : null;
  if (refusal !== null) {
    ctx.refuse(at, refusal);
    return null;
  }
  return address;
}

/** A network's `aliases`: DNS labels (the Service's networkAliases); the service's own name and repeats are dropped with a warning. */
function compileAliases(ctx: Ctx, value: unknown, at: string, shoalName: string): string[] {
  const list = strList(ctx, value, at);
  if (list === null) return [];
  const out: string[] = [];
  list.forEach((alias, i) => {
    const where = `${at}[${i}]`;
    if (!/^[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$/.test(alias)) {
      const hint = /^[A-Za-z](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/.test(alias) ? ` (write it in lower case: ${alias.toLowerCase()}; names match without regard to case)` : '';
      ctx.refuse(where, `${JSON.stringify(alias)} is not a DNS label (lower-case letters, digits and -, starting with a letter, at most 63 characters): shoal answers an alias as one name on the network, not a domain${hint}`);
    } else if (alias === shoalName) ctx.warn(where, `accepted with no effect: ${alias} is the service's own name`);
    else if (out.includes(alias)) ctx.warn(where, `accepted with no effect: ${alias} is given twice`);
    else out.push(alias);
  });
  return out;
}

function compileSecretRefs(ctx: Ctx, value: unknown, at: string, declared: Map<string, StackFile>, kind: 'secrets' | 'configs'): Record<string, unknown>[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
    ctx.refuse(at, `must be a list, not ${describe(value)}`);
    return [];
  }
  return value.flatMap((r, i): Record<string, unknown>[] => {
    const where = `${at}[${i}]`;
    const long = isPlainObject(r) ? r : null;
    const source = typeof r === 'string' ? r : long !== null && typeof long.source === 'string' ? long.source : null;
    if (source === null) {
      ctx.refuse(where, `must be a ${kind === 'secrets' ? 'secret' : 'config'}'s name or {source, target, mode, uid, gid}`);
      return [];
    }
    if (long !== null) ctx.only(long, where, ['source', 'target', 'mode', 'uid', 'gid']);
    const found = declared.get(source);
    if (found === undefined) {
      ctx.refuse(where, `names ${source}, which is not declared under ${kind}:`);
      return [];
    }
    let target = long !== null && typeof long.target === 'string' ? long.target : source;
    if (kind === 'configs' && (long === null || long.target === undefined)) target = `/${source}`;
    if (kind === 'configs' && !target.startsWith('/')) {
      // Compose reads a config's relative target against the container's working directory, which shoal does not know.
      ctx.refuse(`${where}.target`, `${target}: a config's target is an absolute path in the container (target: /etc/app/${target}); a relative one depends on the image's working directory`);
      return [];
    }
    // A file directly under /run/secrets/ is a plain secret file (readable by any release); any
    // other absolute path is delivered there by a read-only bind mount (feature level 6).
    if (/^\/run\/secrets\/[^/]+$/.test(target)) target = target.slice('/run/secrets/'.length);
    // The file's owner and group (compose writes them as strings, "1000"): numbers, as in the
    // container; a user's name would need the image's /etc/passwd.
    const owner: Record<string, number> = {};
    for (const id of ['uid', 'gid'] as const) {
      const v = long?.[id];
      if (v === undefined) continue;
      const text = typeof v === 'number' || typeof v === 'string' ? String(v).trim() : null;
      if (text === null || !/^\d{1,10}$/.test(text) || Number(text) > secretOwnerIdMax) {
        ctx.refuse(`${where}.${id}`, `${JSON.stringify(v)} is not a numeric ${id === 'uid' ? 'user' : 'group'} id (0 to ${secretOwnerIdMax}); write the number, as in the container's /etc/${id === 'uid' ? 'passwd' : 'group'}`);
        return [];
      }
      if (Number(text) !== 0) owner[id] = Number(text);
    }
    let mode: string | undefined;
    if (long?.mode !== undefined) {
      const m = long.mode;
      mode = typeof m === 'number' ? `0${/^[0-7]+$/.test(String(m)) ? String(m) : m.toString(8)}` : String(m);
    }
    return [{ name: found.name, target, ...(mode !== undefined ? { mode: mode.replace(/^0*(?=[0-7]{3}$)/, '0') } : {}), ...owner }];
  });
}

function readDependsOn(ctx: Ctx, value: unknown, at: string, services: Record<string, unknown>): Record<string, DependsCondition> {
  if (value === undefined) return {};
  if (!Array.isArray(value) && !isPlainObject(value)) {
    ctx.refuse(at, `must be a list of services or a mapping, not ${describe(value)}`);
    return {};
  }
  const out: Record<string, DependsCondition> = {};
  for (const [dep, opts] of Object.entries(listToMap(value))) {
    const where = keyPath(at, dep);
    if (!Object.hasOwn(services, dep)) {
      const near = suggest(dep, Object.keys(services));
      ctx.refuse(where, `no service ${dep} in the stack${near === null ? '' : `; did you mean ${near}?`}`);
      continue;
    }
    let condition: DependsCondition = 'service_started';
    if (isPlainObject(opts)) {
      ctx.only(opts, where, ['condition', 'required', 'restart']);
      if (opts.condition !== undefined) {
        if (['service_started', 'service_healthy', 'service_completed_successfully'].includes(String(opts.condition))) condition = opts.condition as DependsCondition;
        else ctx.refuse(`${where}.condition`, `${JSON.stringify(opts.condition)} is not one of service_started, service_healthy, service_completed_successfully`);
      }
      if (condition === 'service_healthy') {
        const d = services[dep];
        if (!isPlainObject(d) || !isPlainObject(d.healthcheck) || d.healthcheck.disable === true) {
          ctx.refuse(`${where}.condition`, `service_healthy needs a healthcheck on ${dep} (shoal does not read the image's HEALTHCHECK)`);
        }
      }
    }
    out[dep] = condition;
  }
  return out;
}

// ---- container settings (issue 39) ----

/** Shoal's container settings and the compose field each comes from: a problem shoal's reader finds is reported at the compose field. */
const settingFields: Readonly<Record<string, string>> = {
  workingDir: 'working_dir', hostname: 'hostname', init: 'init', readOnlyRootfs: 'read_only', shmSize: 'shm_size', tmpfs: 'tmpfs',
  extraHosts: 'extra_hosts', dns: 'dns', dnsSearch: 'dns_search', dnsOptions: 'dns_opt', ulimits: 'ulimits', sysctls: 'sysctls', labels: 'labels',
};

/**
 * working_dir, hostname, init, read_only, shm_size, tmpfs, extra_hosts, dns, dns_search, dns_opt,
 * ulimits, sysctls and labels, as shoal's container settings. Compose's spellings are turned into
 * shoal's here; the values are checked by shoal's own reader (container-settings.ts), whose
 * problems come back with the compose path.
 */
function compileContainerSettings(ctx: Ctx, s: Record<string, unknown>, at: string, doc: Record<string, unknown>): void {
  if (s.working_dir !== undefined) doc.workingDir = str(ctx, s.working_dir, `${at}.working_dir`);
  if (s.hostname !== undefined) doc.hostname = str(ctx, s.hostname, `${at}.hostname`);
  if (s.init !== undefined) doc.init = s.init;
  if (s.read_only !== undefined) doc.readOnlyRootfs = s.read_only;
  if (s.shm_size !== undefined) doc.shmSize = bytesAt(ctx, s.shm_size, `${at}.shm_size`);
  if (s.tmpfs !== undefined) doc.tmpfs = compileTmpfs(ctx, s.tmpfs, `${at}.tmpfs`);
  if (s.extra_hosts !== undefined) doc.extraHosts = compileExtraHosts(ctx, s.extra_hosts, `${at}.extra_hosts`);
  if (s.dns !== undefined) doc.dns = oneOrList(ctx, s.dns, `${at}.dns`);
  if (s.dns_search !== undefined) doc.dnsSearch = oneOrList(ctx, s.dns_search, `${at}.dns_search`);
  if (s.dns_opt !== undefined) doc.dnsOptions = strList(ctx, s.dns_opt, `${at}.dns_opt`);
  if (s.ulimits !== undefined) doc.ulimits = s.ulimits;
  if (s.sysctls !== undefined) doc.sysctls = keyValues(ctx, s.sysctls, `${at}.sysctls`, false);
  if (s.labels !== undefined) doc.labels = keyValues(ctx, s.labels, `${at}.labels`, true);
}

/**
 * `deploy.labels`: Swarm's service labels. shoal keeps no labels on a service apart from its
 * containers', so they go onto the tasks' containers with `labels` (a proxy reading Docker labels,
 * such as Traefik's docker provider, sees them, as Traefik's swarm provider saw them on the
 * service). A key both give keeps `labels`' value, with a warning when the values differ.
 */
function compileDeployLabels(ctx: Ctx, value: unknown, at: string, doc: Record<string, unknown>): void {
  if (value === undefined) return;
  const fromDeploy = keyValues(ctx, value, at, true);
  const own = isPlainObject(doc.labels) ? doc.labels : {};
  for (const [k, v] of Object.entries(fromDeploy)) {
    if (k in own && own[k] !== v) ctx.warn(`${at}.${k}`, `labels gives ${k} too, with another value, and wins on the containers`);
  }
  doc.labels = { ...fromDeploy, ...own };
}

/** A string, or a list of them (Compose's dns and dns_search take either). */
function oneOrList(ctx: Ctx, value: unknown, at: string): string[] | null {
  return typeof value === 'string' ? [value] : strList(ctx, value, at);
}

/** `tmpfs: /run` or `[/run, "/tmp:size=64m,mode=1777"]`: size and mode are the options shoal passes. */
function compileTmpfs(ctx: Ctx, value: unknown, at: string): Array<string | Record<string, unknown>> {
  const items = typeof value === 'string' ? [value] : strList(ctx, value, at) ?? [];
  const out: Array<string | Record<string, unknown>> = [];
  items.forEach((item, i) => {
    const where = typeof value === 'string' ? at : `${at}[${i}]`;
    const colon = item.indexOf(':');
    const target = colon < 0 ? item : item.slice(0, colon);
    if (colon < 0) {
      out.push(target);
      return;
    }
    const entry: Record<string, unknown> = { target };
    for (const opt of item.slice(colon + 1).split(',').filter((o) => o !== '')) {
      const [key, v] = opt.split('=', 2);
      if (key === 'size' && v !== undefined) entry.size = bytesAt(ctx, v, where);
      else if (key === 'mode' && v !== undefined && /^[0-7]{3,4}$/.test(v)) entry.mode = v;
      else if (key === 'mode') ctx.refuse(where, `mode=${v ?? ''} is not an octal mode (1777, 0755)`);
      else ctx.refuse(where, `the tmpfs option ${JSON.stringify(opt)} is not supported: shoal passes size=BYTES and mode=OCTAL`);
    }
    out.push(entry);
  });
  return out;
}

/** `extra_hosts: ["nas:10.0.0.5", "v6=::1"]` or `{nas: 10.0.0.5}` (a list of addresses: one line each). */
function compileExtraHosts(ctx: Ctx, value: unknown, at: string): unknown[] {
  if (Array.isArray(value)) return value;
  const m = mapping(ctx, value, at);
  if (m === null) return [];
  return Object.entries(m).flatMap(([host, addr]) => (Array.isArray(addr) ? addr : [addr]).map((address: unknown) => ({ host, address })));
}

/**
 * A mapping, or a list of KEY=VALUE (`labels`, `sysctls`). Label values are strings in Docker:
 * numbers and booleans are written as text; a sysctl's value keeps its number for shoal's reader.
 */
function keyValues(ctx: Ctx, value: unknown, at: string, asText: boolean): Record<string, unknown> {
  if (!isPlainObject(value) && !Array.isArray(value)) {
    ctx.refuse(at, `must be a mapping or a list of KEY=VALUE, not ${describe(value)}`);
    return {};
  }
  // A label may be written without a value (KEY alone: empty); a sysctl may not.
  const pair = (e: unknown): e is string => typeof e === 'string' && (asText || e.includes('='));
  if (Array.isArray(value)) {
    value.forEach((e, i) => {
      if (!pair(e)) ctx.refuse(`${at}[${i}]`, `must be KEY=VALUE, not ${typeof e === 'string' ? JSON.stringify(e) : describe(e)}`);
    });
  }
  const split = (e: string): readonly [string, string] => (e.includes('=') ? [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)] : [e, '']);
  const entries = Array.isArray(value) ? value.filter(pair).map(split) : Object.entries(value);
  const out: Record<string, unknown> = {};
  for (const [k, v] of entries) {
    if (v === null || v === undefined) out[k] = '';
    else out[k] = asText && (typeof v === 'number' || typeof v === 'boolean') ? String(v) : v;
  }
  return out;
}
