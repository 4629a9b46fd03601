// Contexts: the credentials of several clusters kept side by side by name, as `docker context`
// and `kubectl config` keep theirs. In the config directory ($SHOAL_CONFIG, else
// ~/.config/shoal):
//
//   contexts/NAME.json   one credential file per context (credential-format.ts), mode 0600
//   config.json          {"version": 1, "currentContext": "NAME"}: the one used by default
//   credential.json      the single credential of releases before contexts: listed as the
//                        context `default` (current when config.json names none), and moved to
//                        contexts/ the first time a context is added, so it is never lost
//
// Adding a context never replaces another cluster's: a name taken by another cluster gets a
// suffix (`home-2`). It replaces a context of the same cluster, and one a `shoal dev` made from
// the same data directory (that directory now holds a new cluster; the old one is gone).

import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { ShoalError } from '../errors.ts';
import { clusterIdIn, credentialFileName, writeCredential, type CredentialFile } from './credential-format.ts';

export const contextsDirName = 'contexts';
export const contextConfigFileName = 'config.json';
/** The name the credential.json of before contexts goes by. */
export const legacyContextName = 'default';
export const contextNamePattern = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;
export const contextNameRule = "1 to 63 of letters, digits, '.', '_' and '-', starting with a letter or digit";

export type ConfigSource = '$SHOAL_CONFIG' | '~/.config/shoal';

/** ~/.config/shoal, or $XDG_CONFIG_HOME/shoal. */
export function homeConfigDir(): string {
  const base = process.env.XDG_CONFIG_HOME || path.join(os.homedir(), '.config');
  return path.join(base, 'shoal');
}

/** Where the contexts live: $SHOAL_CONFIG (a directory), else ~/.config/shoal. */
export function configDir(): { dir: string; source: ConfigSource } {
  const dir = process.env.SHOAL_CONFIG;
  return dir !== undefined && dir !== '' ? { dir, source: '$SHOAL_CONFIG' } : { dir: homeConfigDir(), source: '~/.config/shoal' };
}

export interface ContextEntry {
  name: string;
  file: string;
  /** The credential.json of before contexts, listed as `default` until a context is added. */
  legacy: boolean;
}

const contextConfigSchema = z.object({
  version: z.literal(1),
  currentContext: z.string().regex(contextNamePattern).optional(),
}).strict();
type ContextConfig = z.infer<typeof contextConfigSchema>;

function readContextConfig(dir: string): ContextConfig {
  const file = path.join(dir, contextConfigFileName);
  if (!existsSync(file)) return { version: 1 };
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new ShoalError('config_invalid', `cannot read ${file}: ${(err as Error).message}; fix it, or remove it and pick a context with 'shoal context use NAME'`, { file });
  }
  const parsed = contextConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.') || '(top level)'}: ${i.message}`).join('; ');
    throw new ShoalError('config_invalid', `${file} is invalid (${problems}): it holds {"version": 1, "currentContext": "NAME"}; fix it, or remove it and run 'shoal context use NAME'`, { file });
  }
  return parsed.data;
}

function writeContextConfig(dir: string, config: ContextConfig): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = path.join(dir, contextConfigFileName);
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, file);
}

const contextFile = (dir: string, name: string): string => path.join(dir, contextsDirName, `${name}.json`);

/** Every context, sorted by name. */
export function listContexts(dir: string): ContextEntry[] {
  const sub = path.join(dir, contextsDirName);
  const names = existsSync(sub)
    ? readdirSync(sub).filter((f) => f.endsWith('.json')).map((f) => f.slice(0, -'.json'.length)).filter((n) => contextNamePattern.test(n))
    : [];
  const entries: ContextEntry[] = names.map((name) => ({ name, file: contextFile(dir, name), legacy: false }));
  const legacy = path.join(dir, credentialFileName);
  if (existsSync(legacy) && !names.includes(legacyContextName)) entries.push({ name: legacyContextName, file: legacy, legacy: true });
  return entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

export function contextNamed(dir: string, name: string): ContextEntry | undefined {
  return listContexts(dir).find((c) => c.name === name);
}

/** The context config.json names, else the legacy credential.json, else none. */
export function currentContext(dir: string): ContextEntry | undefined {
  const named = readContextConfig(dir).currentContext;
  const all = listContexts(dir);
  const found = named === undefined ? undefined : all.find((c) => c.name === named);
  return found ?? all.find((c) => c.legacy);
}

export function checkContextName(name: string): void {
  if (!contextNamePattern.test(name)) throw new ShoalError('config_invalid', `'${name}' is not a context name: a context name is ${contextNameRule}`, { name });
}

/** Makes `name` the current context. */
export function useContext(dir: string, name: string): ContextEntry {
  const entry = contextNamed(dir, name);
  if (entry === undefined) throw new ShoalError('not_found', `no context '${name}' in ${dir}`, { name });
  writeContextConfig(dir, { ...readContextConfig(dir), version: 1, currentContext: entry.name });
  return entry;
}

/** Deletes a context's credential file; the current one leaves no context current. */
export function removeContext(dir: string, name: string): { entry: ContextEntry; wasCurrent: boolean } {
  const entry = contextNamed(dir, name);
  if (entry === undefined) throw new ShoalError('not_found', `no context '${name}' in ${dir}`, { name });
  const wasCurrent = currentContext(dir)?.name === entry.name;
  rmSync(entry.file, { force: true });
  const config = readContextConfig(dir);
  if (config.currentContext === entry.name) writeContextConfig(dir, { version: 1 });
  return { entry, wasCurrent };
}

/** A context name made from free text (a host name, a node name): what the rule does not take becomes '-'. */
export function contextNameFrom(text: string): string {
  const safe = text.replace(/[^A-Za-z0-9._-]+/g, '-').replace(/^[^A-Za-z0-9]+/, '').slice(0, 63).replace(/[-.]+$/, '');
  return safe === '' ? 'cluster' : safe;
}

export interface AddedContext {
  name: string;
  file: string;
  /** A context of the same cluster (or the same dev directory) was there and was replaced. */
  replaced: boolean;
  /** The name asked for, when another cluster's context holds it (so `name` has a suffix). */
  taken?: string;
  /** Where the credential.json of before contexts went, when this add moved it. */
  migrated?: ContextEntry;
}

/** Moves the credential.json of before contexts into contexts/, so that adding one never hides it. */
function migrateLegacy(dir: string): ContextEntry | undefined {
  const legacy = listContexts(dir).find((c) => c.legacy);
  if (legacy === undefined || clusterIdIn(legacy.file) === undefined) return undefined;
  const wasCurrent = currentContext(dir)?.legacy === true;
  let name = legacyContextName;
  for (let i = 2; existsSync(contextFile(dir, name)); i++) name = `${legacyContextName}-${i}`;
  mkdirSync(path.join(dir, contextsDirName), { recursive: true, mode: 0o700 });
  renameSync(legacy.file, contextFile(dir, name));
  if (wasCurrent) writeContextConfig(dir, { version: 1, currentContext: name });
  return { name, file: contextFile(dir, name), legacy: false };
}

/** Whether the context in `file` may be replaced by `credential`: the same cluster, or the same dev directory. */
function replaceable(file: string, credential: CredentialFile): boolean {
  const old = clusterIdIn(file);
  if (old === undefined) return false;
  return old.clusterId === credential.clusterId || (credential.devDataDir !== undefined && old.devDataDir === credential.devDataDir);
}

/** Adds `credential` as a context named `name` (or `name-2`, ... when another cluster's holds it) and makes it current. */
export function addContext(dir: string, credential: CredentialFile, name: string): AddedContext {
  checkContextName(name);
  const migrated = migrateLegacy(dir);
  let chosen = name;
  for (let i = 2; existsSync(contextFile(dir, chosen)) && !replaceable(contextFile(dir, chosen), credential); i++) chosen = `${name.slice(0, 58)}-${i}`;
  const file = contextFile(dir, chosen);
  const replaced = existsSync(file);
  writeCredential(file, credential);
  writeContextConfig(dir, { version: 1, currentContext: chosen });
  return { name: chosen, file, replaced, ...(chosen !== name ? { taken: name } : {}), ...(migrated !== undefined ? { migrated } : {}) };
}
