// Reading compose files into one model, as `docker compose config` prints it: each file's YAML
// (anchors, aliases and merge keys `<<` allowed, as Compose files use them for shared blocks;
// aliases are capped against exponential expansion), interpolated with the variables, merged in
// the order given by the Compose Specification's merge rules, with the services of inactive
// profiles left out. Pure: files and variables come in through the input, so the API and the
// CLI read a stack the same way.
//
// Every problem of every file is collected with its path (`compose.yaml: services.web.image`);
// the caller refuses the whole stack when there is any.

import { parseDocument, isNode, visit } from 'yaml';
import { Problems, isPlainObject, keyPath, describe } from '../spec/reader.ts';
import { interpolate, parseEnvFile, type Lookup } from './interpolate.ts';

export interface ComposeFile {
  /** The file's name as the user gave it (shown in paths). */
  path: string;
  text: string;
}

export interface LoadInput {
  files: readonly ComposeFile[];
  /** The caller's environment (wins over `.env`). */
  env: Readonly<Record<string, string>>;
  /** The text of the `.env` beside the first file, if there is one. */
  dotEnv?: string | undefined;
  /** Profiles asked for (`--profile`); COMPOSE_PROFILES in the variables adds to them. */
  profiles?: readonly string[];
}

export type Model = Record<string, unknown>;

export interface Loaded {
  model: Model;
  /** Every variable the files used (so a client can send only those). */
  used: Set<string>;
  /** Profiles active, and services left out for their profiles. */
  profiles: string[];
  skipped: string[];
  /** Variables used without a default that are not set (read as empty strings, as Compose does). */
  unset: string[];
}

/** Aliases a file may use at most: enough for shared blocks, too few for a "billion laughs". */
export const aliasCountMax = 200;

export function loadCompose(input: LoadInput, problems: Problems): Loaded {
  const dot = input.dotEnv === undefined ? new Map<string, string>() : parseEnvFile(input.dotEnv, '.env', problems);
  const used = new Set<string>();
  const unset = new Set<string>();
  const lookup: Lookup = (name) => {
    used.add(name);
    return Object.hasOwn(input.env, name) ? input.env[name] : dot.get(name);
  };
  if (input.files.length === 0) problems.add('files', 'there are none; give at least one compose file (-c compose.yaml)');
  let model: Model = {};
  for (const file of input.files) {
    const value = readYaml(file, problems);
    if (value === null) continue;
    const interpolated = interpolateAll(value, lookup, file.path, '', problems, (n) => unset.add(n)) as Model;
    model = mergeTop(model, interpolated);
  }
  const profileVar = lookup('COMPOSE_PROFILES');
  const active = [...new Set([...(input.profiles ?? []), ...(profileVar === undefined || profileVar === '' ? [] : profileVar.split(',').map((p) => p.trim()).filter((p) => p !== ''))])].sort();
  const skipped = applyProfiles(model, active, problems);
  return { model, used, profiles: active, skipped, unset: [...unset].sort() };
}

function readYaml(file: ComposeFile, problems: Problems): Record<string, unknown> | null {
  const doc = parseDocument(file.text, { uniqueKeys: true, merge: true, prettyErrors: true, version: '1.2' });
  let ok = true;
  for (const e of doc.errors) {
    problems.add(file.path, `not valid YAML: ${(e.message.split('\n')[0] ?? e.message).replace(/:$/, '')}`);
    ok = false;
  }
  if (!ok) return null;
  visit(doc, (_key, node) => {
    if (isNode(node) && node.tag !== undefined && !node.tag.startsWith('tag:yaml.org,2002:')) {
      problems.add(file.path, `YAML tag ${node.tag} is refused (!reset and !override are not supported): write the merged value out in the last file`);
      ok = false;
    }
  });
  if (!ok) return null;
  let value: unknown;
  try {
    value = doc.toJS({ maxAliasCount: aliasCountMax });
  } catch (err) {
    problems.add(file.path, `not read: ${(err as Error).message}`);
    return null;
  }
  if (value === null || value === undefined) return {};
  if (!isPlainObject(value)) {
    problems.add(file.path, `must be a mapping (services:, networks:, ...), not ${describe(value)}`);
    return null;
  }
  return value;
}

/** Interpolates every string value (not keys); `x-` extension fields are left as written. */
function interpolateAll(value: unknown, lookup: Lookup, file: string, at: string, problems: Problems, onUnset: (name: string) => void): unknown {
  if (typeof value === 'string') return interpolate(value, lookup, `${file}: ${at}`, problems, onUnset) ?? value;
  if (Array.isArray(value)) return value.map((v, i) => interpolateAll(v, lookup, file, `${at}[${i}]`, problems, onUnset));
  if (isPlainObject(value)) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = k.startsWith('x-') ? v : interpolateAll(v, lookup, file, keyPath(at, k), problems, onUnset);
    return out;
  }
  return value;
}

// ---- merging (the Compose Specification, "Merge and override") ----

const topMaps = new Set(['services', 'networks', 'volumes', 'secrets', 'configs']);

function mergeTop(base: Model, over: Model): Model {
  const out: Model = { ...base };
  for (const [k, v] of Object.entries(over)) {
    if (topMaps.has(k) && isPlainObject(out[k]) && isPlainObject(v)) {
      const merged: Record<string, unknown> = { ...(out[k] as Record<string, unknown>) };
      for (const [name, item] of Object.entries(v)) {
        const prev = merged[name];
        merged[name] = k === 'services' && isPlainObject(prev) && isPlainObject(item) ? mergeService(prev, item) : isPlainObject(prev) && isPlainObject(item) ? mergeMap(prev, item, '') : item;
      }
      out[k] = merged;
    } else {
      out[k] = v;
    }
  }
  return out;
}

/** Sequences written as KEY=VALUE lists or mappings, merged as mappings. */
const asMapFields = new Set(['environment', 'labels', 'extra_hosts', 'sysctls', 'annotations']);
/** Sequences merged keeping one entry per key (the later wins). */
const uniqueBy: Record<string, (v: unknown) => string> = {
  ports: (v) => JSON.stringify(v),
  volumes: (v) => volumeTarget(v) ?? JSON.stringify(v),
  secrets: (v) => (typeof v === 'string' ? v : isPlainObject(v) ? String(v.target ?? v.source) : JSON.stringify(v)),
  configs: (v) => (typeof v === 'string' ? v : isPlainObject(v) ? String(v.target ?? v.source) : JSON.stringify(v)),
  devices: (v) => (typeof v === 'string' ? v.split(':')[1] ?? v : JSON.stringify(v)),
  expose: (v) => String(v), dns: (v) => String(v), dns_search: (v) => String(v), tmpfs: (v) => String(v),
  cap_add: (v) => String(v), cap_drop: (v) => String(v), env_file: (v) => JSON.stringify(v), profiles: (v) => String(v), security_opt: (v) => String(v),
};
/** Replaced, never appended. */
const replaced = new Set(['command', 'entrypoint']);

function mergeService(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) {
    const prev = out[k];
    if (prev === undefined || replaced.has(k)) out[k] = v;
    else if (asMapFields.has(k)) out[k] = { ...asMap(prev), ...asMap(v) };
    else if (k === 'networks' || k === 'depends_on') out[k] = mergeMap(listToMap(prev), listToMap(v), '');
    else if (uniqueBy[k] !== undefined && Array.isArray(prev) && Array.isArray(v)) out[k] = unique([...prev, ...(v as unknown[])], uniqueBy[k]);
    else if (isPlainObject(prev) && isPlainObject(v)) out[k] = mergeMap(prev, v, k);
    else out[k] = v;
  }
  return out;
}

function mergeMap(base: Record<string, unknown>, over: Record<string, unknown>, at: string): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) {
    const prev = out[k];
    const here = at === '' ? k : `${at}.${k}`;
    if (here === 'healthcheck.test') out[k] = v;
    else if (isPlainObject(prev) && isPlainObject(v)) out[k] = mergeMap(prev, v, here);
    else if (Array.isArray(prev) && Array.isArray(v)) out[k] = unique([...prev, ...(v as unknown[])], (x) => JSON.stringify(x));
    else out[k] = v;
  }
  return out;
}

function unique(items: unknown[], key: (v: unknown) => string): unknown[] {
  const byKey = new Map<string, unknown>();
  for (const item of items) {
    const k = key(item);
    byKey.delete(k);
    byKey.set(k, item);
  }
  return [...byKey.values()];
}

/** `environment: [A=1, B]` or `{A: 1}` as a mapping (a bare `B` is null: taken from the environment). */
export function asMap(value: unknown): Record<string, unknown> {
  if (isPlainObject(value)) return value;
  if (!Array.isArray(value)) return {};
  const out: Record<string, unknown> = {};
  for (const item of value) {
    if (typeof item !== 'string') continue;
    const eq = item.search(/[=:]/);
    const sep = item.indexOf('=');
    const at = sep >= 0 ? sep : eq;
    if (at < 0) out[item] = null;
    else out[item.slice(0, at)] = item.slice(at + 1);
  }
  return out;
}

/** `networks: [a, b]` / `depends_on: [db]` as a mapping of names to {} . */
export function listToMap(value: unknown): Record<string, unknown> {
  if (isPlainObject(value)) return value;
  if (!Array.isArray(value)) return {};
  return Object.fromEntries(value.filter((v) => typeof v === 'string').map((v) => [v as string, {}]));
}

/** The container path of a `volumes` entry, short (`src:/path:ro`) or long ({target}). */
export function volumeTarget(v: unknown): string | null {
  if (isPlainObject(v)) return typeof v.target === 'string' ? v.target : null;
  if (typeof v !== 'string') return null;
  const parts = v.split(':');
  return parts.length === 1 ? parts[0] ?? null : parts[1] ?? null;
}

// ---- profiles ----

function applyProfiles(model: Model, active: readonly string[], problems: Problems): string[] {
  const services = model.services;
  if (!isPlainObject(services)) return [];
  const skipped: string[] = [];
  const profilesOf = new Map<string, string[]>();
  for (const [name, svc] of Object.entries(services)) {
    if (!isPlainObject(svc) || svc.profiles === undefined) continue;
    if (!Array.isArray(svc.profiles) || svc.profiles.some((p) => typeof p !== 'string')) {
      problems.add(`services.${name}.profiles`, `must be a list of profile names, not ${describe(svc.profiles)}`);
      continue;
    }
    profilesOf.set(name, svc.profiles as string[]);
    if (!(svc.profiles as string[]).some((p) => active.includes(p))) skipped.push(name);
  }
  for (const name of skipped) delete services[name];
  for (const [name, svc] of Object.entries(services)) {
    if (!isPlainObject(svc)) continue;
    for (const dep of Object.keys(listToMap(svc.depends_on))) {
      if (skipped.includes(dep)) {
        problems.add(`services.${name}.depends_on.${dep}`, `${dep} is left out: none of its profiles (${(profilesOf.get(dep) ?? []).join(', ')}) is active; add --profile ${(profilesOf.get(dep) ?? [])[0] ?? ''}`);
      }
    }
  }
  return skipped.sort();
}
