// shoal credential create|ls|revoke: bearer tokens for callers without a client certificate
// (scripts, CI, a Prometheus scraper). Admin only (POST/GET/DELETE /v1/credentials). A token is
// printed once; `create --out FILE` writes it as a credential file the CLI can use (with the CA
// and addresses of the credential that created it). A token expires (--ttl, default 90d).

import { z } from 'zod';
import { clientRoles } from '../security/roles.ts';
import { exitCodes, parse, UsageError } from './args.ts';
import { durationFlag } from './control-args.ts';
import { request, resolveAddr, retryNotice } from './client.ts';
import { activeCredential, writeCredential } from './credential-file.ts';
import { tableText } from './control-format.ts';
import { commonFlags, help } from './doc-common.ts';
import { clientExitCodes, commonFlagsHelp, groupHelp, runGroup, type Group } from './group.ts';

const credentialSchema = z.object({
  id: z.string(), principal: z.string(), role: z.enum(clientRoles), createdBy: z.string(), createdAtMs: z.number(), label: z.string().nullable(), rev: z.number(),
  // A node of the release before expiry answers without these: its tokens never expire.
  expiresAtMs: z.number().nullable().default(null), expired: z.boolean().default(false),
}).loose();
/** The lifetime asked for without --ttl (the API's default too) and the longest one it takes. */
const ttlDefault = '90d';
const ttlMaxDays = 366;
const dayMs = 86_400_000;

/** --ttl: 'never' (null: the token never expires), or a duration as every --ttl takes it ('90d', '7d12h', '36h'), in milliseconds. */
export function credentialTtlFlag(value: string | undefined): number | null {
  const text = value ?? ttlDefault;
  if (text === 'never') return null;
  const ms = durationFlag(text, '--ttl', ttlDefault);
  if (ms < 60_000 || ms > ttlMaxDays * dayMs) throw new UsageError(`--ttl must be from 1m to ${ttlMaxDays}d, or 'never'; got '${text}'`);
  return ms;
}

const createdSchema = credentialSchema.extend({ token: z.string() });
const listSchema = z.object({ items: z.array(credentialSchema), rev: z.number() }).loose();
const revokedSchema = z.object({ id: z.string(), revoked: z.literal(true), rev: z.number() }).loose();

export const credentialCreateHelp = `Usage: shoal credential create --principal NAME --role admin|operator|reader [--ttl DURATION]
                         [--label TEXT] [--out FILE] [--addr HOST:PORT] [--json]

Creates a bearer token for NAME with the role (docs/security.md has what each role may do) and
prints it once: the cluster keeps only its SHA-256. Send it as 'Authorization: Bearer TOKEN'.
It stops working when its time is up (401 unauthenticated, reason token_expired): make a new
one then. Admin only.

Options:
  --principal NAME   who the token stands for (audit records and writes name it)
  --role ROLE        admin, operator or reader
  --ttl DURATION     how long it works: days and/or h, m, s (90d, 36h, 7d12h; default ${ttlDefault},
                     at most ${ttlMaxDays}d), or 'never' for a token that never expires
  --label TEXT       a note shown by 'shoal credential ls'
  --out FILE         also write a credential file holding the token, the cluster CA and the API
                     addresses (from the credential in use), for 'shoal --credential FILE'
${commonFlagsHelp}

${clientExitCodes} A caller that is not admin exits 1 (forbidden).`;

export const credentialLsHelp = `Usage: shoal credential ls [--addr HOST:PORT] [--json]

Lists the bearer tokens: id, principal, role, who created it and when, when it expires ('never'
for one made with --ttl never or by a release before tokens expired; 'expired' once it has),
label. Never the secrets. Admin only.

Options:
${commonFlagsHelp}

${clientExitCodes}`;

export const credentialRevokeHelp = `Usage: shoal credential revoke ID [--addr HOST:PORT] [--json]

Revokes a bearer token (ID from 'shoal credential ls'): every node refuses it once it has
applied the revocation. Admin only.

Options:
${commonFlagsHelp}

${clientExitCodes} An unknown ID exits 1 (not_found).`;

export const credentialGroup: Group = {
  name: 'credential',
  about: 'Bearer tokens for the client API (client certificates are made by shoal dev and shoal init).',
  subcommands: {
    create: { summary: 'create a bearer token for a principal and role (printed once)', help: credentialCreateHelp, run: createCommand },
    ls: { summary: 'list bearer tokens (never their secrets)', help: credentialLsHelp, run: lsCommand },
    revoke: { summary: 'revoke a bearer token', help: credentialRevokeHelp, run: revokeCommand },
  },
};
export const credentialGroupHelp = groupHelp(credentialGroup);

export function credentialCommand(argv: string[]): Promise<number> {
  return runGroup(credentialGroup, argv);
}

async function createCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {
    ...commonFlags, principal: { type: 'string' }, role: { type: 'string' }, ttl: { type: 'string' }, label: { type: 'string' }, out: { type: 'string' },
  }, credentialCreateHelp);
  if (values.help) return help(credentialCreateHelp);
  const missing = (['principal', 'role'] as const).filter((k) => values[k] === undefined).map((k) => `--${k}`);
  if (missing.length > 0) throw new UsageError(`missing ${missing.join(' and ')}`);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const role = values.role ?? '';
  if (!(clientRoles as readonly string[]).includes(role)) throw new UsageError(`--role must be one of ${clientRoles.join(', ')}, got '${role}'`);
  const ttlMs = credentialTtlFlag(values.ttl);
  const addr = resolveAddr(values.addr);
  const base = activeCredential();
  if (values.out !== undefined && base === null) throw new UsageError('--out needs a credential in use (its CA and addresses go into the new file)');
  const { body } = await request(addr, 'POST', '/v1/credentials', createdSchema, {
    body: { principal: values.principal, role, ttlMs, ...(values.label !== undefined ? { label: values.label } : {}) }, retry: 'not-applied', onRetry: retryNotice('credential create'),
  });
  if (values.out !== undefined && base !== null) {
    writeCredential(values.out, { version: 1, clusterId: base.clusterId, ca: base.ca, addresses: base.addresses, principal: body.principal, role: body.role, token: body.token });
  }
  if (values.json) console.log(JSON.stringify({ ...body, ...(values.out !== undefined ? { file: values.out } : {}) }));
  else console.log(`created credential ${body.id} for ${body.principal} (${body.role}), ${expiryText(body)}\ntoken (shown once): ${body.token}${values.out !== undefined ? `\nwritten to ${values.out}` : ''}`);
  return exitCodes.ok;
}

function expiryText(c: { expiresAtMs: number | null }): string {
  return c.expiresAtMs === null ? 'never expires' : `expires ${new Date(c.expiresAtMs).toISOString()}`;
}

/** The EXPIRES column: the time, 'expired <time>' once past, or 'never'. */
export function expiresCell(c: { expiresAtMs: number | null; expired: boolean }): string {
  if (c.expiresAtMs === null) return 'never';
  const at = new Date(c.expiresAtMs).toISOString();
  return c.expired ? `expired ${at}` : at;
}

async function lsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, commonFlags, credentialLsHelp);
  if (values.help) return help(credentialLsHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const { body } = await request(resolveAddr(values.addr), 'GET', '/v1/credentials', listSchema, { retry: 'safe', onRetry: retryNotice('credential ls') });
  if (values.json) {
    console.log(JSON.stringify(body));
    return exitCodes.ok;
  }
  const rows = body.items.map((c) => [c.id, c.principal, c.role, c.createdBy, new Date(c.createdAtMs).toISOString(), expiresCell(c), c.label ?? '']);
  console.log(tableText(['ID', 'PRINCIPAL', 'ROLE', 'CREATED BY', 'CREATED', 'EXPIRES', 'LABEL'], rows));
  return exitCodes.ok;
}

async function revokeCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, commonFlags, credentialRevokeHelp);
  if (values.help) return help(credentialRevokeHelp);
  if (positionals.length !== 1) throw new UsageError(positionals.length === 0 ? 'missing ID (from shoal credential ls)' : `expected one ID, got '${positionals.join(' ')}'`);
  const id = positionals[0] ?? '';
  if (!/^[0-9a-f]{16}$/.test(id)) throw new UsageError(`ID must be 16 hex digits (from shoal credential ls), got '${id}'`);
  const { body } = await request(resolveAddr(values.addr), 'DELETE', `/v1/credentials/${id}`, revokedSchema, { retry: 'not-applied', onRetry: retryNotice('credential revoke') });
  if (values.json) console.log(JSON.stringify(body));
  else console.log(`revoked credential ${body.id} (rev ${body.rev})`);
  return exitCodes.ok;
}

