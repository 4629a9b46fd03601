// What a credential file holds and how it is read and written. A credential names one cluster
// (its id and its CA, pinned: the only trust root the CLI accepts a node's certificate from), the
// nodes' API addresses, who the holder is, and either a client certificate and key or a bearer
// token. Contexts (contexts.ts) are credential files too; how the CLI picks one is
// credential-file.ts. A file a person wrote by hand is refused with the file, each field that is
// wrong, and what that field must hold.

import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { ShoalError } from '../errors.ts';
import { hostPortSchema } from '../base/host-port.ts';
import { clientRoles } from '../security/roles.ts';

export const credentialFileName = 'credential.json';

const pem = (label: string) => z.string().regex(new RegExp(`-----BEGIN ${label}-----`), `not PEM text with a -----BEGIN ${label}----- block`);

export const credentialFileSchema = z.object({
  version: z.literal(1),
  clusterId: z.string().min(1),
  /** The cluster CA certificate: the only trust root. */
  ca: pem('CERTIFICATE'),
  /** The nodes' client API addresses; the first is the default --addr. */
  addresses: z.array(hostPortSchema).min(1).max(64),
  principal: z.string().min(1),
  role: z.enum(clientRoles),
  cert: pem('CERTIFICATE').optional(),
  key: pem('PRIVATE KEY').optional(),
  token: z.string().regex(/^shoal_[0-9a-f]{16}\.[A-Za-z0-9_-]{43}$/, 'not a bearer token').optional(),
  /** The data directory of the `shoal dev` cluster it was made for: a later `shoal dev` there replaces its context. */
  devDataDir: z.string().min(1).optional(),
}).strict().superRefine((c, ctx) => {
  const withCert = c.cert !== undefined && c.key !== undefined;
  const withToken = c.token !== undefined;
  if (withCert === withToken || (c.cert === undefined) !== (c.key === undefined)) {
    ctx.addIssue({ code: 'custom', path: [], message: 'a credential holds either cert and key, or token (not both, not neither)' });
  }
});
export type CredentialFile = z.infer<typeof credentialFileSchema>;

/** What each field must hold, in the words a person fixing the file needs. */
const fieldExpectations: Readonly<Record<string, string>> = {
  version: 'the number 1',
  clusterId: "the cluster's id, a string ('shoal status' prints it)",
  ca: "the cluster CA certificate as PEM text, \"-----BEGIN CERTIFICATE-----\\n...\" (a member's DATA/tls/ca.crt)",
  addresses: 'a list of 1 to 64 client API addresses as "HOST:PORT" strings, e.g. ["10.0.0.1:7100"]',
  principal: 'who you are, a non-empty string (the CN of the certificate, or the principal of the token)',
  role: `one of ${clientRoles.join(', ')}`,
  cert: 'a client certificate as PEM text, "-----BEGIN CERTIFICATE-----\\n..."',
  key: 'the certificate\'s private key as PEM text, "-----BEGIN PRIVATE KEY-----\\n..."',
  token: "a bearer token, shoal_<16 hex digits>.<43 letters, digits, '-' or '_'> ('shoal credential create' prints one)",
  devDataDir: 'the data directory of a shoal dev cluster, a string',
};

const fieldsText = 'version, clusterId, ca, addresses, principal, role, and either cert and key or token';

function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'string') return `the string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`;
  return typeof value === 'object' ? 'an object' : `${typeof value} ${String(value)}`;
}

function valueAt(raw: unknown, at: readonly PropertyKey[]): unknown {
  let v = raw;
  for (const k of at) v = typeof v === 'object' && v !== null ? (v as Record<PropertyKey, unknown>)[k] : undefined;
  return v;
}

/** One line per problem: the field, what is wrong, and what the field must hold. */
export function credentialProblems(raw: unknown, issues: readonly z.core.$ZodIssue[]): string[] {
  return issues.map((i) => {
    const where = i.path.length > 0 ? i.path.map(String).join('.') : '(top level)';
    const field = String(i.path[0] ?? '');
    const expected = fieldExpectations[field];
    if (i.code === 'unrecognized_keys') return `${where}: unknown field${i.keys.length === 1 ? '' : 's'} ${i.keys.join(', ')}; a credential holds ${fieldsText}`;
    if (i.path.length === 0 && i.code === 'invalid_type') return `(top level): expected a JSON object with ${fieldsText}, got ${kindOf(raw)}`;
    if (expected === undefined) return `${where}: ${i.message}`;
    const value = valueAt(raw, i.path);
    if (value === undefined && i.path.length === 1) return `${where}: missing; expected ${expected}`;
    if (i.code === 'invalid_type' || i.code === 'invalid_value') return `${where}: expected ${expected}, got ${kindOf(value)}`;
    return `${where}: ${i.message}; expected ${expected}`;
  });
}

/**
 * Reads and checks a credential file. `label` says how the CLI came to it (`--credential`,
 * `context home`), for the message.
 */
export function readCredentialFile(file: string, label: string): CredentialFile {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new ShoalError('config_invalid', `cannot read the credential ${file} (${label}): ${(err as Error).message}`, { file });
  }
  const parsed = credentialFileSchema.safeParse(raw);
  if (!parsed.success) {
    const problems = credentialProblems(raw, parsed.error.issues).map((p) => `  ${p}`).join('\n');
    throw new ShoalError('config_invalid', `the credential ${file} (${label}) is invalid:\n${problems}\n  (shoal login, init and dev write credential files; docs/security.md, "The credential file", shows one)`, { file });
  }
  return parsed.data;
}

/** The cluster id of the credential in `file`, or undefined when there is none or it does not read. */
export function clusterIdIn(file: string): { clusterId: string; devDataDir?: string } | undefined {
  if (!existsSync(file)) return undefined;
  try {
    const c = credentialFileSchema.parse(JSON.parse(readFileSync(file, 'utf8')));
    return { clusterId: c.clusterId, ...(c.devDataDir !== undefined ? { devDataDir: c.devDataDir } : {}) };
  } catch {
    return undefined;
  }
}

/**
 * The credential already in `file` when it is another cluster's and names an address beyond
 * loopback (a real cluster's; a `shoal dev` cluster's also stays in its data directory): moved
 * aside to `credential.<its cluster id>.json` rather than lost. Returns where, or undefined.
 */
function keepOtherCluster(file: string, clusterId: string): string | undefined {
  if (!existsSync(file)) return undefined;
  let old: CredentialFile;
  try {
    old = credentialFileSchema.parse(JSON.parse(readFileSync(file, 'utf8')));
  } catch {
    return undefined;
  }
  const loopback = (a: string): boolean => /^(127\.|localhost:|\[::1\]:)/.test(a);
  if (old.clusterId === clusterId || old.addresses.every(loopback)) return undefined;
  const base = file.endsWith('.json') ? file.slice(0, -'.json'.length) : file;
  let kept = `${base}.${old.clusterId}.json`;
  if (existsSync(kept)) kept = `${base}.${old.clusterId}.${Date.now()}.json`;
  renameSync(file, kept);
  return kept;
}

/**
 * Writes the credential (0600, whole or not at all). Another cluster's credential in its place
 * is kept beside it (keepOtherCluster), and standard error says where.
 */
export function writeCredential(file: string, credential: CredentialFile): void {
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const kept = keepOtherCluster(file, credential.clusterId);
  if (kept !== undefined) process.stderr.write(`${file} held the credential of another cluster; kept it as ${kept} (use it with --credential ${kept})\n`);
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(credentialFileSchema.parse(credential), null, 2)}\n`, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, file);
}
