// Reading a whole apply: text (YAML or JSON, several documents) or already-decoded values into
// the normalized specs, all or nothing.
//
// Each document names its `apiVersion` (shoal/v1) and `kind`. The kinds table below is the
// whole vocabulary: a kind not in it cannot be applied. A kind is a reader and a line here,
// plus its list in SpecSet.
//
// Every problem in the input is reported at once, with its path; documents are indexed among
// those of their kind (`services[1]` is the second Service of the input, wherever it stands),
// and a document whose kind is unknown is named by its position (`documents[3]`). When
// anything is wrong nothing is returned: the caller writes nothing.

import { parseAllDocuments, parseDocument, visit, isAlias, isNode, type Document } from 'yaml';
import { ShoalError } from '../../errors.ts';
import { specLimits } from './limits.ts';
import { INVALID, Problems, describe, isPlainObject, suggest, type Problem, type Read } from './reader.ts';
import { readFirewallPolicy, readNetwork } from './network-reader.ts';
import type { FirewallPolicySpec, NetworkSpec } from './network-spec.ts';
import { readService } from './service-reader.ts';
import { readJob } from './job-reader.ts';
import type { JobSpec } from './job-spec.ts';
import type { ServiceSpec } from './service-spec.ts';
import { cidrOf, cidrsOverlap } from '../address-cidr.ts';

export const apiVersion = 'shoal/v1';

/** Everything one apply declares, by kind, in input order. */
export interface SpecSet {
  services: ServiceSpec[];
  networks: NetworkSpec[];
  firewallPolicies: FirewallPolicySpec[];
  jobs: JobSpec[];
}

interface KindReader<T> {
  /** The `kind:` of its documents. */
  kind: string;
  read(value: Record<string, unknown>, at: string, problems: Problems): Read<T>;
  /**
   * Its identity within the kind, read from the raw document so that a duplicate is reported
   * even when the documents have other problems; null when it is not there (the reader says so).
   */
  identity(value: Record<string, unknown>): string | null;
}

const kinds: { [P in keyof SpecSet]: KindReader<SpecSet[P][number]> } = {
  services: { kind: 'Service', read: readService, identity: nameOf },
  networks: { kind: 'Network', read: readNetwork, identity: nameOf },
  firewallPolicies: { kind: 'FirewallPolicy', read: readFirewallPolicy, identity: nameOf },
  jobs: { kind: 'Job', read: readJob, identity: nameOf },
};

function nameOf(v: Record<string, unknown>): string | null {
  return typeof v.name === 'string' ? v.name : null;
}

const kindNames = Object.values(kinds).map((k) => k.kind);

/**
 * Reads specs from a file's text. `format` defaults to YAML, which also reads JSON (JSON is
 * YAML 1.2); with `json` the text must be strict JSON (one document, or a list of them).
 * Throws ShoalError `bad_request` with `details.problems` ({path, message}[]) listing every
 * problem when anything is refused.
 */
export function parseSpecs(text: string, format: 'yaml' | 'json' = 'yaml'): SpecSet {
  const problems = new Problems();
  const values = format === 'json' ? decodeJson(text, problems) : decodeYaml(text, problems);
  if (problems.count > 0) throw refusal(problems.list);
  return parseSpecObjects(values);
}

/** Reads specs from decoded documents (a request body's list). Throws as `parseSpecs` does. */
export function parseSpecObjects(values: readonly unknown[]): SpecSet {
  const problems = new Problems();
  const out: SpecSet = { services: [], networks: [], firewallPolicies: [], jobs: [] };
  if (values.length === 0) problems.add('documents', 'there are none; an apply names at least one resource');
  if (values.length > specLimits.documentsMax) {
    problems.add('documents', `there are ${values.length}; at most ${specLimits.documentsMax} in one apply`);
    throw refusal(problems.list);
  }
  const seen: Seen = { counts: new Map(), identities: new Map(), indexes: new Map() };
  values.forEach((value, position) => readDocument(value, position, seen, out, problems));
  checkSubnetsApart(out.networks, seen.indexes, problems);
  checkJobNamesApart(out, seen.indexes, problems);
  if (problems.count > 0) throw refusal(problems.list);
  return out;
}

/** Two networks of one apply whose subnets overlap would hand out one address twice. */
function checkSubnetsApart(networks: readonly NetworkSpec[], indexes: ReadonlyMap<object, number>, problems: Problems): void {
  networks.forEach((n, i) => {
    const other = networks.find((m, k) => k < i && cidrsOverlap(cidrOf(m.subnet), cidrOf(n.subnet)));
    if (other === undefined) return;
    const j = indexes.get(other) ?? 0;
    problems.add(`networks[${indexes.get(n) ?? i}].subnet`, `${n.subnet} overlaps ${other.subnet} of networks[${j}] (${other.name}); subnets of networks never overlap`);
  });
}

/** A job's runs are tasks named by the job, as a service's are: the two never share a name. */
function checkJobNamesApart(out: SpecSet, indexes: ReadonlyMap<object, number>, problems: Problems): void {
  const services = new Map(out.services.map((s) => [s.name, indexes.get(s) ?? 0]));
  out.jobs.forEach((j, i) => {
    const k = services.get(j.name);
    if (k !== undefined) problems.add(`jobs[${indexes.get(j) ?? i}].name`, `${j.name} is already the name of services[${k}]; a job and a service never share a name`);
  });
}

/** Per kind: how many documents so far, and which index declared each identity. */
interface Seen {
  counts: Map<string, number>;
  identities: Map<string, number>;
  /** Each spec read, to its index among the documents of its kind (for paths of checks across documents). */
  indexes: Map<object, number>;
}

function readDocument(value: unknown, position: number, seen: Seen, out: SpecSet, problems: Problems): void {
  const at = `documents[${position}]`;
  if (!isPlainObject(value)) {
    problems.add(at, `must be a mapping with apiVersion and kind, not ${describe(value)}`);
    return;
  }
  const { apiVersion: version, kind, ...fields } = value;
  const plural = (Object.keys(kinds) as (keyof SpecSet)[]).find((p) => kinds[p].kind === kind);
  if (plural === undefined) {
    problems.add(`${at}.kind`, unknownKind(kind));
    return;
  }
  const index = seen.counts.get(plural) ?? 0;
  seen.counts.set(plural, index + 1);
  const where = `${plural}[${index}]`;
  // Two documents of one kind with one identity: which one was meant cannot be guessed.
  const id = kinds[plural].identity(fields);
  if (id !== null) {
    const first = seen.identities.get(`${plural}/${id}`);
    if (first !== undefined) problems.add(`${where}.name`, `${id} is already declared by ${plural}[${first}]`);
    else seen.identities.set(`${plural}/${id}`, index);
  }
  if (version !== apiVersion) {
    const shown = version === undefined ? 'is required' : `${JSON.stringify(version)} is not a version this release speaks`;
    problems.add(`${where}.apiVersion`, `${shown}; write apiVersion: ${apiVersion}`);
  }
  const spec = kinds[plural].read(fields, where, problems);
  if (spec === INVALID) return;
  seen.indexes.set(spec, index);
  (out[plural] as object[]).push(spec);
}

function unknownKind(kind: unknown): string {
  const known = `${apiVersion} knows ${kindNames.join(', ')}`;
  if (kind === undefined) return `is required; ${known}`;
  if (typeof kind !== 'string') return `must be a string, not ${describe(kind)}; ${known}`;
  const near = suggest(kind, kindNames);
  return `unknown kind ${JSON.stringify(kind)}${near === null ? '' : `; did you mean ${near}?`} ${known}`;
}

/** The typed refusal: `bad_request`, every problem in `details.problems`, capped at problemsMax. */
export function refusal(all: readonly Problem[]): ShoalError {
  const shown = all.slice(0, specLimits.problemsMax);
  const more = all.length - shown.length;
  const lines = shown.map((p) => `  ${p.path}: ${p.message}`);
  if (more > 0) lines.push(`  ... and ${more} more`);
  return new ShoalError('bad_request', `the specs are refused, and nothing was applied:\n${lines.join('\n')}`, {
    problems: shown, ...(more > 0 ? { problemsNotShown: more } : {}),
  });
}

function decodeJson(text: string, problems: Problems): unknown[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    problems.add('documents', `not valid JSON: ${(err as Error).message}`);
    return [];
  }
  // JSON.parse keeps the last of two equal keys without a word; the YAML parser reports them.
  for (const e of parseDocument(text, { uniqueKeys: true, prettyErrors: true }).errors) {
    if (e.code === 'DUPLICATE_KEY') problems.add('documents', `not valid JSON here: ${firstLine(e.message)}`);
  }
  return Array.isArray(value) ? value : [value];
}

function decodeYaml(text: string, problems: Problems): unknown[] {
  const docs = parseAllDocuments(text, { uniqueKeys: true, merge: false, version: '1.2', schema: 'core', prettyErrors: true });
  if ('empty' in docs) for (const e of docs.errors) problems.add('documents', `not valid YAML: ${firstLine(e.message)}`);
  const values: unknown[] = [];
  docs.forEach((doc, position) => {
    const at = `documents[${position}]`;
    for (const e of doc.errors) problems.add(at, `not valid YAML: ${firstLine(e.message)}`);
    if (doc.errors.length > 0) return;
    if (!refuseSurprises(doc, at, problems)) return;
    const value: unknown = doc.toJS();
    // An empty document (a leading or trailing ---) declares nothing and is skipped.
    if (value === null) return;
    if (Array.isArray(value)) values.push(...(value as unknown[]));
    else values.push(value);
  });
  return values;
}

/**
 * Anchors, aliases and explicit tags are refused. An alias makes two services share one value,
 * so editing the anchor silently changes a service the reader was not looking at, and aliases
 * nest into exponential expansions ("billion laughs"). Explicit tags (`!!str`, `!custom`) change
 * how a scalar is read; quoting says the same thing plainly. Merge keys (`<<`) are off (they are
 * not YAML 1.2), so `<<` is an unknown field like any other.
 */
function refuseSurprises(doc: Document.Parsed, at: string, problems: Problems): boolean {
  let ok = true;
  visit(doc, (_key, node) => {
    if (isAlias(node)) {
      problems.add(at, `YAML alias *${node.source} is refused: write the value out (an alias makes services share values silently)`);
      ok = false;
    } else if (isNode(node) && node.anchor !== undefined) {
      problems.add(at, `YAML anchor &${node.anchor} is refused: write the value out (an alias makes services share values silently)`);
      ok = false;
    } else if (isNode(node) && node.tag !== undefined) {
      problems.add(at, `YAML tag ${node.tag} is refused: quote the value instead`);
      ok = false;
    }
  });
  return ok;
}

function firstLine(message: string): string {
  return (message.split('\n')[0] ?? message).replace(/:$/, '');
}
