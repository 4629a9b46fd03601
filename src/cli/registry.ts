// shoal registry: registry logins (docs/docker.md, "Private registries"). login stores a user name
// and password for a registry host, the password as a secret (encrypted at rest), sent only to
// the node that pulls an image from that registry for a task; logout removes it; ls lists the
// logins (never a password). The password is never taken from the command line.

import { createInterface } from 'node:readline';
import { Writable } from 'node:stream';
import { z } from 'zod';
import { registryHostPattern, registryPasswordBytesMax } from '../resources/registry-logins.ts';
import { exitCodes, parse, UsageError } from './args.ts';
import { CliFailure, request, resolveAddr, retryNotice } from './client.ts';
import { read } from './control-api.ts';
import { tableText } from './control-format.ts';
import { commonFlags, help } from './doc-common.ts';
import { clientExitCodes, commonFlagsHelp, commonFlagsText, groupHelp, runGroup, type Group } from './group.ts';

const loginViewSchema = z.object({ host: z.string(), username: z.string(), createdAt: z.number(), updatedAt: z.number(), rev: z.number() }).loose();
const listSchema = z.object({ items: z.array(loginViewSchema), rev: z.number() }).loose();
const writtenSchema = z.object({
  outcome: z.enum(['created', 'updated', 'unchanged']), rev: z.number().nullable(), login: z.object({ host: z.string(), username: z.string() }).loose(),
}).loose();
const removedSchema = z.object({ host: z.string(), removed: z.boolean(), rev: z.number().nullable() }).loose();

const registryPath = (host: string): string => `/v1/registries/${encodeURIComponent(host)}`;

export const registryLoginHelp = `Usage: shoal registry login HOST [--username USER] [--password-stdin] [--addr HOST:PORT] [--json]

Stores a login for the registry HOST (ghcr.io, registry.lan:5000; docker.io for Docker Hub).
A node that pulls an image from HOST for a task sends it (Docker's X-Registry-Auth); a service
may name another login with 'registryLogin: HOST'. The password is kept as a secret: encrypted
in the cluster's log and snapshots, handed only to the node that pulls for a task that needs it,
never shown by the API, never logged; the audit log records who logged in, not the password.
Logging in again replaces the login; tasks started from then on use the new one.

Options:
  --username USER    the registry user (asked for when omitted and stdin is a terminal)
  --password-stdin   read the password (or token) from standard input, to its end (one
                     trailing newline dropped); without it, it is asked for on a terminal
${commonFlagsHelp}

The password is at most ${registryPasswordBytesMax / 1024} KiB and never taken from the command line.
With --json prints {outcome: created|updated|unchanged, login: {host, username, ...}, rev}
(PUT /v1/registries/HOST).
${clientExitCodes}`;

export const registryLogoutHelp = `Usage: shoal registry logout HOST [--addr HOST:PORT] [--json]

Removes the login for HOST and its password. Pulls from HOST go without credentials from then
on (tasks already running are not touched).

Options:
${commonFlagsText()}

With --json prints {host, removed, rev} (DELETE /v1/registries/HOST).
${clientExitCodes} A host with no login exits 1 (not_found).`;

export const registryLsHelp = `Usage: shoal registry ls [--stale] [--addr HOST:PORT] [--json]

Lists the registry logins, sorted by host: the user name and when it last changed. Never a
password.

Options:
  --stale            read the node's local copy (no leader needed; may be behind)
${commonFlagsHelp}

With --json prints {items: [{host, username, createdAt, updatedAt, rev}], rev} (GET /v1/registries).
${clientExitCodes}`;

export const registryGroup: Group = {
  name: 'registry',
  about: `Logins to private image registries: the credentials nodes send when they pull a task's
image. docs/docker.md ("Private registries") describes them.`,
  subcommands: {
    login: { summary: 'store a registry login (password from stdin or a prompt, kept encrypted)', help: registryLoginHelp, run: registryLoginCommand },
    logout: { summary: 'remove a registry login', help: registryLogoutHelp, run: registryLogoutCommand },
    ls: { summary: 'list registry logins (host and user, never passwords)', help: registryLsHelp, run: registryLsCommand },
  },
};

export const registryGroupHelp = groupHelp(registryGroup);

export function registryCommand(argv: string[]): Promise<number> {
  return runGroup(registryGroup, argv);
}

const loginFlags = { ...commonFlags, username: { type: 'string' }, 'password-stdin': { type: 'boolean', default: false } } as const;

function oneHost(positionals: readonly string[]): string {
  if (positionals.length !== 1) throw new UsageError('expected one HOST (the registry: ghcr.io, registry.lan:5000)');
  const host = positionals[0] ?? '';
  if (!registryHostPattern.test(host)) throw new UsageError(`'${host}' is not a registry host: give it as docker login takes it (ghcr.io, registry.lan:5000), without a scheme or a path`);
  return host;
}

async function readStdinPassword(): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of process.stdin) {
    const b = Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk));
    size += b.length;
    if (size > registryPasswordBytesMax + 2) throw new CliFailure(`standard input holds more than ${registryPasswordBytesMax} bytes; a password is at most that`, exitCodes.failed, 'payload_too_large');
    chunks.push(b);
  }
  const text = Buffer.concat(chunks).toString('utf8').replace(/\r?\n$/, '');
  if (text === '') throw new CliFailure('standard input held no password', exitCodes.failed);
  return text;
}

/** Asks on the terminal; with `hidden`, what is typed is not echoed. */
async function ask(question: string, hidden: boolean): Promise<string> {
  let muted = false;
  const output = new Writable({
    write(chunk: Buffer, _enc, done) {
      if (!muted) process.stderr.write(chunk);
      done();
    },
  });
  const rl = createInterface({ input: process.stdin, output, terminal: true });
  try {
    const answer = new Promise<string>((resolve) => rl.question(question, resolve));
    muted = hidden;
    const text = await answer;
    if (hidden) process.stderr.write('\n');
    return text;
  } finally {
    rl.close();
  }
}

async function registryLoginCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, loginFlags, registryLoginHelp);
  if (values.help) return help(registryLoginHelp);
  const host = oneHost(positionals);
  const tty = process.stdin.isTTY;
  if (!values['password-stdin'] && !tty) throw new UsageError('standard input is not a terminal: give the password with --password-stdin');
  let username = values.username;
  if (username === undefined) {
    if (values['password-stdin'] || !tty) throw new UsageError('give the user with --username USER (the password comes from standard input)');
    username = await ask('Username: ', false);
  }
  if (username === '') throw new UsageError('the user name is empty');
  const password = values['password-stdin'] ? await readStdinPassword() : await ask('Password: ', true);
  if (password === '') throw new UsageError('the password is empty');
  const { body } = await request(resolveAddr(values.addr), 'PUT', registryPath(host), writtenSchema, {
    body: { username, password }, retry: 'not-applied', onRetry: retryNotice('registry login'),
  });
  if (values.json) console.log(JSON.stringify(body, null, 2));
  else console.log(`${body.outcome === 'unchanged' ? 'already logged in' : body.outcome === 'created' ? 'logged in' : 'login replaced'}: ${body.login.username} at ${body.login.host}`);
  return exitCodes.ok;
}

async function registryLogoutCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, commonFlags, registryLogoutHelp);
  if (values.help) return help(registryLogoutHelp);
  const host = oneHost(positionals);
  const { body } = await request(resolveAddr(values.addr), 'DELETE', registryPath(host), removedSchema, { retry: 'not-applied', onRetry: retryNotice('registry logout') });
  if (values.json) console.log(JSON.stringify(body, null, 2));
  else console.log(`logged out of ${body.host}`);
  return exitCodes.ok;
}

const readFlags = { ...commonFlags, stale: { type: 'boolean', default: false } } as const;

async function registryLsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, readFlags, registryLsHelp);
  if (values.help) return help(registryLsHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const body = await read(resolveAddr(values.addr), '/v1/registries', listSchema, 'registry ls', values.stale);
  if (values.json) console.log(JSON.stringify(body, null, 2));
  else if (body.items.length === 0) console.log('no registry logins; add one with: shoal registry login HOST --username USER --password-stdin');
  else console.log(tableText(['HOST', 'USER', 'UPDATED'], body.items.map((l) => [l.host, l.username, new Date(l.updatedAt).toISOString()])));
  return exitCodes.ok;
}
