// shoal secret: workload secrets (docs/resources.md, "Secrets"). create and set write a value read
// from a file or stdin (never from the command line, where it would stay in the shell's history
// and in `ps`); ls and inspect show metadata only (the API never answers a value); rm removes one
// that no service names.

import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { secretValueBytesMax } from '../resources/secrets.ts';
import { exitCodes, parse, UsageError } from './args.ts';
import { ApiError, CliFailure, request, resolveAddr, retryNotice } from './client.ts';
import { read } from './control-api.ts';
import { tableText } from './control-format.ts';
import { oneName } from './control-args.ts';
import { commonFlags, help } from './doc-common.ts';
import { clientExitCodes, commonFlagsHelp, commonFlagsText, groupHelp, runGroup, type Group } from './group.ts';
import {
  keyringCommand, recoveryKeyCommand, rotateKeyCommand, secretKeyringHelp, secretRecoveryKeyHelp, secretRotateKeyHelp,
} from './keyring.ts';

const secretViewSchema = z.object({
  name: z.string(), digest: z.string(), size: z.number(), version: z.number(), createdAt: z.number(), updatedAt: z.number(),
  rev: z.number(), usedBy: z.array(z.string()), usedByJobs: z.array(z.string()).default([]),
}).loose();
type SecretView = z.infer<typeof secretViewSchema>;
const listSchema = z.object({ items: z.array(secretViewSchema), rev: z.number() }).loose();
const oneSchema = z.object({ secret: secretViewSchema, rev: z.number() }).loose();
const writtenSchema = z.object({
  outcome: z.enum(['created', 'updated', 'unchanged']), rev: z.number().nullable(),
  secret: z.object({ name: z.string(), digest: z.string(), size: z.number(), version: z.number() }).loose(),
}).loose();
const removedSchema = z.object({ name: z.string(), removed: z.boolean(), rev: z.number().nullable() }).loose();

const secretPath = (name: string): string => `/v1/secrets/${encodeURIComponent(name)}`;

const valueFlagsHelp = `  --from-file FILE   read the value from FILE (its bytes, as they are)
  --from-stdin       read the value from standard input, to its end`;
const valueNote = `The value is at most ${secretValueBytesMax / 1024} KiB and is never taken from the command line (it would stay in
the shell's history and show in 'ps'). A value equal to the one stored changes nothing.`;

export const secretCreateHelp = `Usage: shoal secret create NAME (--from-file FILE | --from-stdin) [--addr HOST:PORT] [--json]

Creates a secret. Services name it in their spec (secrets: [NAME]); the node that runs a task
writes it to a file the container reads at /run/secrets/NAME. Refused when a secret of that
name exists (change it with 'shoal secret set').

Options:
${valueFlagsHelp}
${commonFlagsHelp}

${valueNote}
With --json prints {outcome, secret, rev} (PUT /v1/secrets/NAME): metadata, never the value.
${clientExitCodes} An existing secret exits 1 (already_exists); a value over the limit exits 1
(payload_too_large).`;

export const secretSetHelp = `Usage: shoal secret set NAME (--from-file FILE | --from-stdin) [--addr HOST:PORT] [--json]

Creates a secret or replaces its value. Tasks already running keep the value they were started
with; tasks started from now on (replacements, restarts by the leader, updates) get the new one.
To roll a new value out to every task at once, create a secret of a new name and apply the
services with it (as Docker Swarm requires).

Options:
${valueFlagsHelp}
${commonFlagsHelp}

${valueNote}
With --json prints {outcome: created|updated|unchanged, secret, rev} (PUT /v1/secrets/NAME).
${clientExitCodes} A value over the limit exits 1 (payload_too_large).`;

export const secretLsHelp = `Usage: shoal secret ls [--stale] [--addr HOST:PORT] [--json]

Lists the secrets, sorted by name: size, version, the start of the value's SHA-256 digest, when
the value last changed (log time) and the services whose specs name it. Never the value.

Options:
  --stale            read the node's local copy (no leader needed; may be behind)
${commonFlagsHelp}

With --json prints {items: [{name, digest, size, version, createdAt, updatedAt, rev, usedBy, usedByJobs}], rev}
(GET /v1/secrets).
${clientExitCodes}`;

export const secretInspectHelp = `Usage: shoal secret inspect NAME [--stale] [--addr HOST:PORT] [--json]

Shows a secret's metadata: size, version, the value's SHA-256 digest (compare it with
'sha256sum FILE'), times, and the services whose specs name it. The value itself is never shown:
the API does not answer it to anyone.

Options:
  --stale            read the node's local copy (no leader needed; may be behind)
${commonFlagsHelp}

With --json prints {secret, rev} (GET /v1/secrets/NAME).
${clientExitCodes} An unknown secret exits 1 (not_found).`;

export const secretRmHelp = `Usage: shoal secret rm NAME... [--addr HOST:PORT] [--json]

Removes secrets. A secret that a service's spec names (or its previous spec, which a rollback
returns to) is not removed: apply the services without it first.

Options:
${commonFlagsText()}

With --json prints one {name, removed, rev} per secret, as a list.
${clientExitCodes} An unknown secret exits 1 (not_found); one in use exits 1 (resource_in_use,
naming the services and jobs); the ones before it are removed.`;

export const secretGroup: Group = {
  name: 'secret',
  about: `Workload secrets: values written here and read by services' containers as files under
/run/secrets/, never shown by the API, kept encrypted in the cluster's log and snapshots.
docs/resources.md ("Secrets") and docs/security.md ("Secrets at rest") describe them.`,
  subcommands: {
    create: { summary: 'create a secret from a file or stdin', help: secretCreateHelp, run: (argv) => secretWriteCommand(argv, 'create') },
    set: { summary: "create a secret or replace its value (new tasks get it)", help: secretSetHelp, run: (argv) => secretWriteCommand(argv, 'set') },
    ls: { summary: 'list secrets: size, version, digest, the services using each (never values)', help: secretLsHelp, run: secretLsCommand },
    inspect: { summary: "show a secret's metadata (never its value)", help: secretInspectHelp, run: secretInspectCommand },
    rm: { summary: 'remove secrets no service uses', help: secretRmHelp, run: secretRmCommand },
    keyring: { summary: 'the cluster keys that encrypt them, who holds them, rotation, autolock (admin)', help: secretKeyringHelp, run: keyringCommand },
    'rotate-key': { summary: 're-wrap every data key under a new cluster key, no outage (admin; resumable)', help: secretRotateKeyHelp, run: rotateKeyCommand },
    'recovery-key': { summary: 'make a new recovery key, shown once: restores the secrets of a snapshot (admin)', help: secretRecoveryKeyHelp, run: recoveryKeyCommand },
  },
};

export const secretGroupHelp = groupHelp(secretGroup);

export function secretCommand(argv: string[]): Promise<number> {
  return runGroup(secretGroup, argv);
}

const writeFlags = { ...commonFlags, 'from-file': { type: 'string' }, 'from-stdin': { type: 'boolean', default: false } } as const;

async function readStdin(): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of process.stdin) {
    const b = Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk));
    size += b.length;
    if (size > secretValueBytesMax) throw new CliFailure(`standard input holds more than ${secretValueBytesMax} bytes; a secret holds at most that`, exitCodes.failed, 'payload_too_large');
    chunks.push(b);
  }
  return Buffer.concat(chunks);
}

function readValueFile(file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new CliFailure(`cannot read ${file}: ${(err as Error).message}`, exitCodes.failed);
  }
}

async function secretWriteCommand(argv: string[], verb: 'create' | 'set'): Promise<number> {
  const usage = verb === 'create' ? secretCreateHelp : secretSetHelp;
  const { values, positionals } = parse(argv, writeFlags, usage);
  if (values.help) return help(usage);
  const name = oneName(positionals);
  const fromFile = values['from-file'];
  if ((fromFile === undefined) === !values['from-stdin']) throw new UsageError('give the value with --from-file FILE or --from-stdin, exactly one of them');
  const addr = resolveAddr(values.addr);
  if (verb === 'create' && await exists(addr, name)) {
    throw new CliFailure(`a secret named '${name}' exists already; change its value with: shoal secret set ${name} --from-file FILE`, exitCodes.failed, 'already_exists');
  }
  const value = fromFile !== undefined ? readValueFile(fromFile) : await readStdin();
  const { body } = await request(addr, 'PUT', secretPath(name), writtenSchema, {
    body: { valueBase64: value.toString('base64') }, retry: 'not-applied', onRetry: retryNotice(`secret ${verb}`),
  });
  if (values.json) console.log(JSON.stringify(body, null, 2));
  else console.log(`${body.outcome} secret ${name}: ${body.secret.size} bytes, version ${body.secret.version}, ${body.secret.digest.slice(0, 19)}…`);
  return exitCodes.ok;
}

async function exists(addr: string, name: string): Promise<boolean> {
  try {
    await read(addr, secretPath(name), oneSchema, 'secret create');
    return true;
  } catch (err) {
    if (err instanceof ApiError && err.code === 'not_found') return false;
    throw err;
  }
}

const readFlags = { ...commonFlags, stale: { type: 'boolean', default: false } } as const;

function rows(items: readonly SecretView[]): string[][] {
  return items.map((s) => [s.name, String(s.size), String(s.version), s.digest.slice(0, 19), new Date(s.updatedAt).toISOString(), [...s.usedBy, ...s.usedByJobs.map((j) => `job/${j}`)].join(',') || '-']);
}

async function secretLsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, readFlags, secretLsHelp);
  if (values.help) return help(secretLsHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const body = await read(resolveAddr(values.addr), '/v1/secrets', listSchema, 'secret ls', values.stale);
  if (values.json) console.log(JSON.stringify(body, null, 2));
  else console.log(body.items.length === 0 ? 'no secrets; create one with: shoal secret create NAME --from-file FILE' : tableText(['NAME', 'BYTES', 'VERSION', 'DIGEST', 'UPDATED', 'USED BY'], rows(body.items)));
  return exitCodes.ok;
}

async function secretInspectCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, readFlags, secretInspectHelp);
  if (values.help) return help(secretInspectHelp);
  const name = oneName(positionals);
  const body = await read(resolveAddr(values.addr), secretPath(name), oneSchema, 'secret inspect', values.stale);
  if (values.json) {
    console.log(JSON.stringify(body, null, 2));
    return exitCodes.ok;
  }
  const s = body.secret;
  console.log([
    `secret   ${s.name}   rev ${s.rev}`, `size     ${s.size} bytes`, `version  ${s.version}`, `digest   ${s.digest}`,
    `created  ${new Date(s.createdAt).toISOString()}`, `updated  ${new Date(s.updatedAt).toISOString()}`,
    `used by  ${s.usedBy.length === 0 ? 'no service' : s.usedBy.join(', ')}`,
    `jobs     ${s.usedByJobs.length === 0 ? 'none' : s.usedByJobs.join(', ')}`,
  ].join('\n'));
  return exitCodes.ok;
}

async function secretRmCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, commonFlags, secretRmHelp);
  if (values.help) return help(secretRmHelp);
  if (positionals.length === 0) throw new UsageError('expected NAME... (the secrets to remove)');
  const addr = resolveAddr(values.addr);
  const out: unknown[] = [];
  for (const name of positionals) {
    const { body } = await request(addr, 'DELETE', secretPath(name), removedSchema, { retry: 'not-applied', onRetry: retryNotice('secret rm') });
    out.push(body);
    if (!values.json) console.log(`removed secret ${name}`);
  }
  if (values.json) console.log(JSON.stringify(out, null, 2));
  return exitCodes.ok;
}
