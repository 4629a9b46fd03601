// shoal ca rotate: replaces the cluster CA without an outage (docs/security.md, "Rotating the
// CA"). The leader does each phase; this command asks it to move on until the rotation is done,
// shows who it waits for, and keeps the credential file it runs with working: it pins the CAs the
// cluster trusts as they change, and renews a client certificate under the new CA before the old
// one is retired.

import { createInterface } from 'node:readline/promises';
import { z } from 'zod';
import { issuerIn, leafOf, splitPem } from '../security/ca-bundle.ts';
import { exitCodes, parse, UsageError } from './args.ts';
import { ApiError, CliFailure, request, resolveAddr } from './client.ts';
import { durationFlag } from './control-args.ts';
import { activeCredential, activeCredentialFile, reloadActiveCredential, writeCredential } from './credential-file.ts';
import { commonFlags, help } from './doc-common.ts';
import { clientExitCodes, commonFlagsHelp, groupHelp, runGroup, type Group } from './group.ts';

export const caRotateHelp = `Usage: shoal ca rotate [--yes] [--timeout DURATION] [--addr HOST:PORT] [--json]
       shoal ca rotate --status [--addr HOST:PORT] [--json]

Replaces the cluster CA (admin), with no outage: run it when a machine that held the CA key is
gone (shoal cluster remove says so) or the key may have leaked. The leader makes a new CA and a
certificate of the new CA's key signed by the old one, then, phase by phase, every node follows:
  add      every node trusts the old and the new CA; voters receive the new CA key
  reissue  every node renews its certificate under the new CA
  retire   every node trusts the new CA only; the old CA key is deleted from every voter
  done
Each phase waits until every member has reported it, so every member must be up. Interrupted
(Ctrl-C, a timeout, a leader change), run it again: it resumes where the cluster is.

Join tokens made before the rotation work until retire, then are refused (token_invalid, reason
ca_rotated): make new ones. The credential file this command runs with is kept working: its
pinned CA follows the cluster's, and its admin client certificate is renewed under the new CA.
Other credential files pin the old CA: before retire, 'shoal ca rotate --status --credential
FILE' (any role) pins the new CA in FILE too, and renews an admin's client certificate. After
retire, a file still pinning only the old CA, or holding a client certificate of the old CA, is
refused: log in again (shoal login, with a token from shoal token create --role client).

Options:
  --yes              do not ask for confirmation (scripts; needed when not on a terminal)
  --status           show the rotation (phase, who it waits for) and change nothing but the
                     credential file's pinned CA
  --timeout DURATION how long to wait for the rotation to finish (default 10m)
${commonFlagsHelp}

With --json prints {rotation: {id, phase, oldFingerprint, newFingerprint, waiting: [...]}, ...}.
${clientExitCodes} A rotation not done within --timeout exits 3; run the command again to resume.`;

const waitingSchema = z.object({ id: z.string(), name: z.string(), why: z.string() });
const viewSchema = z.object({
  id: z.string(), phase: z.enum(['add', 'reissue', 'retire', 'done']), oldFingerprint: z.string(), newFingerprint: z.string(),
  startedBy: z.string(), startedAtMs: z.number(), phaseAtMs: z.number(), waiting: z.array(waitingSchema),
}).loose();
const statusSchema = z.object({ rotation: viewSchema.nullable(), trusted: z.array(z.string()), caPem: z.string() }).loose();
const stepSchema = z.object({ rotation: viewSchema.nullable(), did: z.enum(['started', 'advanced', 'nothing']) }).loose();
const clientCertSchema = z.object({ certPem: z.string() }).loose();
type View = z.infer<typeof viewSchema>;

const pollMs = 1_000;
const phaseText: Record<View['phase'], string> = {
  add: 'every node trusts the old and the new CA; voters receive the new CA key',
  reissue: 'every node renews its certificate under the new CA',
  retire: 'every node trusts the new CA only; the old CA key is deleted',
  done: 'the new CA is the only one',
};

/**
 * Keeps this run's credential file working: pins what the cluster trusts now (read over TLS
 * verified by the current pin), and from reissue on renews a client certificate of the old CA.
 */
async function followCredential(addr: string, status: z.infer<typeof statusSchema>, log: (line: string) => void): Promise<void> {
  const cred = activeCredential();
  const file = activeCredentialFile();
  if (cred === null || file === undefined) return;
  let next = cred;
  if (cred.ca !== status.caPem) next = { ...next, ca: status.caPem };
  // A client certificate of the old CA is refused once it is retired: swap it during reissue.
  // Only an admin may ask for one (POST /v1/ca/client-cert); the others log in again after the rotation.
  if (cred.cert !== undefined && cred.role === 'admin' && status.rotation?.phase === 'reissue' && !issuedByLast(cred.cert, status.caPem)) {
    log('renewing this credential\'s client certificate under the new CA');
    const { createCsr } = await import('../security/csr.ts');
    const { csrPem, keyPem } = await createCsr(cred.principal);
    const res = await request(addr, 'POST', '/v1/ca/client-cert', clientCertSchema, { body: { csr: csrPem } });
    next = { ...next, cert: leafOf(res.body.certPem), key: keyPem };
  }
  if (next === cred) return;
  writeCredential(file, next);
  reloadActiveCredential();
}

/** Whether `certPem` comes from the last CA of the bundle (the new one during a rotation). */
function issuedByLast(certPem: string, bundlePem: string): boolean {
  const cas = splitPem(bundlePem);
  const last = cas[cas.length - 1];
  return last !== undefined && issuerIn(certPem, last) !== undefined;
}

async function confirm(): Promise<void> {
  if (!process.stdin.isTTY) throw new CliFailure('refusing: no confirmation. This replaces the cluster CA; pass --yes to confirm when not on a terminal', exitCodes.failed, 'not_confirmed');
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const typed = (await rl.question('Replace the cluster CA? Every member must be up. Type yes to go on: ')).trim();
    if (typed !== 'yes') throw new CliFailure('not confirmed; nothing was changed', exitCodes.failed, 'not_confirmed');
  } finally {
    rl.close();
  }
}

function describe(v: View | null): string {
  if (v === null) return 'no CA rotation has been run in this cluster';
  const lines = [`rotation ${v.id}: phase ${v.phase} (${phaseText[v.phase]})`, `  old CA ${v.oldFingerprint}`, `  new CA ${v.newFingerprint}`];
  for (const w of v.waiting) lines.push(`  waiting for ${w.name} (${w.id}): ${w.why}`);
  return lines.join('\n');
}

async function status(addr: string): Promise<z.infer<typeof statusSchema>> {
  return (await request(addr, 'GET', '/v1/ca/rotation', statusSchema, { retry: 'safe' })).body;
}

/** One round: follow the credential, then ask the leader to move on. Retryable refusals are waited out. */
async function round(addr: string, log: (line: string) => void): Promise<{ view: View | null; did: string }> {
  await followCredential(addr, await status(addr), log);
  try {
    const res = await request(addr, 'POST', '/v1/ca/rotate', stepSchema, { body: {} });
    return { view: res.body.rotation, did: res.body.did };
  } catch (err) {
    // Another admin's step landing first (revision_mismatch) skipped nothing: look again.
    if (err instanceof ApiError && (err.body.retryable === true || err.body.code === 'revision_mismatch')) {
      log(`the cluster cannot take the step now (${err.body.code}: ${err.body.message}); retrying`);
      return { view: (await status(addr)).rotation, did: 'nothing' };
    }
    throw err;
  }
}

async function rotateCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...commonFlags, yes: { type: 'boolean', default: false }, status: { type: 'boolean', default: false }, timeout: { type: 'string' } }, caRotateHelp);
  if (values.help) return help(caRotateHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  if (values.status && (values.yes || values.timeout !== undefined)) throw new UsageError('--status takes no --yes or --timeout');
  const timeoutMs = durationFlag(values.timeout, '--timeout', '10m');
  const addr = resolveAddr(values.addr);
  let last = '';
  // Progress, each line once in a row (a retried step says so once, not every second).
  const log = (line: string): void => {
    if (!values.json && line !== last) console.log(line);
    last = line;
  };
  if (values.status) {
    const s = await status(addr);
    await followCredential(addr, s, log);
    if (values.json) console.log(JSON.stringify({ rotation: s.rotation, trusted: s.trusted }, null, 2));
    else console.log(describe(s.rotation));
    return exitCodes.ok;
  }
  const before = (await status(addr)).rotation;
  if (before === null || before.phase === 'done') {
    if (!values.yes) await confirm();
  } else log(`resuming rotation ${before.id} at phase ${before.phase}`);
  return await drive(addr, timeoutMs, values.json, log, before?.phase === 'done' ? before.id : undefined);
}

/** Steps until the rotation is done; `finished` is a rotation done before this run (not the one it drives). */
async function drive(addr: string, timeoutMs: number, json: boolean, log: (line: string) => void, finished: string | undefined): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let shown = '';
  for (;;) {
    const { view, did } = await round(addr, log);
    const text = describe(view);
    if (text !== shown) log(text);
    shown = text;
    // Until this run's step started a new one, the cluster still shows the last rotation, done.
    if (view !== null && view.phase === 'done' && view.id !== finished && did !== 'started') {
      await followCredential(addr, await status(addr), log);
      if (json) console.log(JSON.stringify({ rotation: view }, null, 2));
      else log(`the cluster CA is now ${view.newFingerprint}; make new join tokens (shoal token create)`);
      return exitCodes.ok;
    }
    if (Date.now() > deadline) {
      throw new CliFailure(`the CA rotation is not done after ${timeoutMs / 1000} s (phase ${view?.phase ?? 'none'}${view !== null && view.waiting.length > 0 ? `; waiting for ${view.waiting.map((w) => w.name).join(', ')}` : ''}); nothing is lost: bring those members up (or remove them) and run 'shoal ca rotate' again to resume`, exitCodes.unavailable, 'timeout');
    }
    await new Promise((r) => setTimeout(r, pollMs));
  }
}

export const caGroup: Group = {
  name: 'ca',
  about: 'The cluster CA: replace it with a new one, with no outage (rotate).',
  subcommands: {
    rotate: { summary: 'replace the cluster CA (admin); --status shows a rotation', help: caRotateHelp, run: rotateCommand },
  },
};

export const caGroupHelp = groupHelp(caGroup);

export function caCommand(argv: string[]): Promise<number> {
  return runGroup(caGroup, argv);
}
