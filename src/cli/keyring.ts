// The commands of secrets at rest (docs/security.md, "Secrets at rest", "Autolock"):
//   shoal secret keyring        the cluster keys, who holds them, rotation and autolock
//   shoal secret rotate-key     re-wrap every secret's data key under a new cluster key; resumable
//   shoal secret recovery-key   a new recovery key, shown once
//   shoal cluster autolock      on (a new unlock key, shown once), off, or its status
//   shoal unlock                give a restarted, autolocked node its unlock key
// Keys are read from a file or stdin, never from the command line (the shell's history, `ps`).

import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline/promises';
import { z } from 'zod';
import { exitCodes, parse, UsageError } from './args.ts';
import { CliFailure, request, resolveAddr } from './client.ts';
import { durationFlag } from './control-args.ts';
import { tableText } from './control-format.ts';
import { commonFlags, help } from './doc-common.ts';
import { clientExitCodes, commonFlagsHelp } from './group.ts';

const rotationSchema = z.object({ id: z.string(), from: z.string(), to: z.string(), phase: z.enum(['adding', 'rewrapping']), startedAt: z.number(), startedBy: z.string() }).loose();
const keyringViewSchema = z.object({
  active: z.string(),
  keys: z.array(z.object({ id: z.string(), createdAt: z.number(), recoverable: z.boolean() }).loose()),
  recovery: z.object({ id: z.string(), createdAt: z.number() }).loose().nullable(),
  rotation: rotationSchema.nullable(),
  autolock: z.boolean(),
  scrubbedAt: z.number().nullable(),
  holders: z.array(z.object({ id: z.string(), name: z.string(), voter: z.boolean(), keys: z.array(z.string()), locked: z.boolean() }).loose()),
  secrets: z.record(z.string(), z.number()),
}).loose();
type KeyringView = z.infer<typeof keyringViewSchema>;
const keyringAnswer = z.object({
  keyring: keyringViewSchema.nullable(), node: z.object({ id: z.string(), holds: z.array(z.string()), locked: z.boolean() }).loose(), rev: z.number(),
}).loose();
const rotateAnswer = z.object({ did: z.enum(['started', 'nothing']), keyring: keyringViewSchema }).loose();
const recoveryAnswer = z.object({ recoveryKey: z.string(), id: z.string() }).loose();
const autolockAnswer = z.object({ autolock: z.boolean(), unlockKey: z.string().optional(), unlockKeyId: z.string().optional() }).loose();
const unlockAnswer = z.object({ node: z.string(), unlocked: z.boolean(), already: z.boolean() }).loose();

const pollMs = 500;

export const secretKeyringHelp = `Usage: shoal secret keyring [--addr HOST:PORT] [--json]

Shows the cluster keys that wrap the secrets' data keys (admin): the active one, which are sealed
to the recovery key, the recovery key's id, a rotation under way, whether autolock is on, how many
secrets each key wraps, and which voters hold each key (and whether they are locked). Never a key.

Options:
${commonFlagsHelp}

With --json prints {keyring: {active, keys, recovery, rotation, autolock, scrubbedAt, holders,
secrets}, node, rev} (GET /v1/keyring); keyring is null before the cluster reaches feature level 6.
${clientExitCodes}`;

export const secretRotateKeyHelp = `Usage: shoal secret rotate-key [--timeout DURATION] [--addr HOST:PORT] [--json]

Replaces the cluster key (admin) with no outage and no change to any value: the leader makes a new
key, every voter fetches it (sealed to its certificate), it becomes the key new secrets are
wrapped by, each secret's data key is re-wrapped under it (the encrypted value stays as it is;
running tasks are not touched, new ones read the secret as before), and the old key is deleted
from every voter. Each step waits for every voter, so every voter must be up. Interrupted
(Ctrl-C, a timeout, a crash, a leader change), run it again: it goes on where the cluster is.

Options:
  --timeout DURATION how long to wait for the rotation to finish (default 5m)
${commonFlagsHelp}

With --json prints the keyring at the end (as 'shoal secret keyring --json').
${clientExitCodes} A rotation not done within --timeout exits 3 (run it again to go on).`;

export const secretRecoveryKeyHelp = `Usage: shoal secret recovery-key [--yes] [--addr HOST:PORT] [--json]

Makes a new recovery key (admin) and prints it, once: the leader seals every cluster key to it in
the keyring, so a snapshot taken from now on can be restored, with its secrets, on new machines
(shoal snapshot restore --recovery-key-file FILE). The previous recovery key still opens the
snapshots taken before; it does not open those taken after. Keep the key offline, apart from the
backups. A cluster founded by 'shoal init' got one then; others ('shoal dev', a config's
bootstrap list, clusters of a release before secrets at rest) have none until this is run.

Options:
  --yes              do not ask for confirmation (needed when not on a terminal)
${commonFlagsHelp}

With --json prints {recoveryKey, id}.
${clientExitCodes}`;

export const clusterAutolockHelp = `Usage: shoal cluster autolock (on [--new-key] | off | status) [--yes] [--addr HOST:PORT] [--json]

Autolock (admin; off by default). On: every voter seals the keys on its disk (the cluster keys and
the CA key) with an unlock key, printed once; a node that restarts then serves reads and writes
of the store but decrypts no secret and signs no certificate until 'shoal unlock' gives it the
key (or, with secrets.peerUnlock in its config, until an unlocked voter does). So a stolen disk
of a voter gives away no secret; the price is that a node that reboots unattended (a power cut)
runs the tasks that need a secret only once someone unlocks it. Off: every voter writes its keys
back in the clear (mode 0600). 'on' while it is on, or 'off' while it is off, is refused
(autolock_unchanged): nothing changes. The leader must be unlocked.

Options:
  --new-key          with on while it is on: replace the unlock key (printed once); each voter
                     seals its keys with the new one, after which the old one opens nothing
  --yes              do not ask for confirmation (needed for on and off when not on a terminal)
${commonFlagsHelp}

With --json prints {autolock, unlockKey?, unlockKeyId?} (POST /v1/cluster/autolock), or for
status {autolock, voters: [{name, id, locked}]}.
${clientExitCodes} Already on (without --new-key) or already off exits 1 (autolock_unchanged).`;

export const unlockHelp = `Usage: shoal unlock [--key-file FILE] [--addr HOST:PORT] [--json]

Unlocks an autolocked node (admin): gives the node at --addr the unlock key 'shoal cluster
autolock on' printed, read from FILE or, without --key-file, from standard input (typed on a
terminal). The node then decrypts secrets, hands keys to its peers and signs certificates again;
its tasks that were waiting for a secret start. Run it for each node that restarted.

Options:
  --key-file FILE    read the unlock key from FILE
${commonFlagsHelp}

With --json prints {node, unlocked, already}.
${clientExitCodes} A key that does not open the node's keys exits 1 (unlock_key_invalid).`;

async function confirm(question: string, yes: boolean): Promise<void> {
  if (yes) return;
  if (!process.stdin.isTTY) throw new UsageError(`${question}: give --yes to confirm (not on a terminal)`);
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const answer = (await rl.question(`${question} [y/N] `)).trim().toLowerCase();
    if (answer !== 'y' && answer !== 'yes') throw new CliFailure('not confirmed; nothing was changed', exitCodes.failed, 'not_confirmed');
  } finally {
    rl.close();
  }
}

function keyringText(k: KeyringView): string {
  const lines = [
    `active key   ${k.active}`,
    `recovery key ${k.recovery === null ? 'none (make one: shoal secret recovery-key)' : `${k.recovery.id}, made ${new Date(k.recovery.createdAt).toISOString()}`}`,
    `autolock     ${k.autolock ? 'on' : 'off'}`,
    `rotation     ${k.rotation === null ? 'none' : `${k.rotation.id}: ${k.rotation.from} -> ${k.rotation.to}, ${k.rotation.phase}`}`,
    '',
    tableText(['KEY', 'CREATED', 'RECOVERABLE', 'SECRETS'], k.keys.map((x) => [x.id + (x.id === k.active ? ' *' : ''), new Date(x.createdAt).toISOString(), x.recoverable ? 'yes' : 'no', String(k.secrets[x.id] ?? 0)])),
    '',
    tableText(['NODE', 'ID', 'ROLE', 'HOLDS', 'LOCKED'], k.holders.map((h) => [h.name, h.id, h.voter ? 'voter' : 'learner', h.keys.join(',') || '-', h.locked ? 'yes' : 'no'])),
  ];
  if ((k.secrets.plain ?? 0) > 0) lines.push('', `${k.secrets.plain} secret(s) not encrypted yet (the leader is encrypting them)`);
  return lines.join('\n');
}

async function readKeyring(addr: string): Promise<z.infer<typeof keyringAnswer>> {
  return (await request(addr, 'GET', '/v1/keyring', keyringAnswer, { retry: 'safe' })).body;
}

export async function keyringCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, commonFlags, secretKeyringHelp);
  if (values.help) return help(secretKeyringHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const body = await readKeyring(resolveAddr(values.addr));
  if (values.json) console.log(JSON.stringify(body, null, 2));
  else console.log(body.keyring === null ? 'no keyring yet: the cluster runs below feature level 6 (a member runs an older release), or reached it a moment ago' : keyringText(body.keyring));
  return exitCodes.ok;
}

/** What a rotation waits for now, in words. */
function rotationProgress(k: KeyringView, to: string): string {
  const r = k.rotation;
  if (r === null) return k.active === to ? `done: every data key is wrapped by ${to}` : 'done';
  if (r.phase === 'adding') {
    const waiting = k.holders.filter((h) => h.voter && (h.locked || !h.keys.includes(r.to))).map((h) => `${h.name}${h.locked ? ' (locked: shoal unlock)' : ''}`);
    return `rotation ${r.id}: voters fetch key ${r.to}${waiting.length > 0 ? `; waiting for ${waiting.join(', ')}` : ''}`;
  }
  const left = Object.entries(k.secrets).filter(([id]) => id !== r.to).reduce((n, [, c]) => n + c, 0);
  return `rotation ${r.id}: re-wrapping data keys under ${r.to}: ${left} left`;
}

export async function rotateKeyCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...commonFlags, timeout: { type: 'string' } }, secretRotateKeyHelp);
  if (values.help) return help(secretRotateKeyHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const timeoutMs = durationFlag(values.timeout, '--timeout', '5m');
  const addr = resolveAddr(values.addr);
  const log = (line: string): void => { if (values.json) console.error(line); else console.log(line); };
  const started = (await request(addr, 'POST', '/v1/keyring/rotate', rotateAnswer, { body: {}, retry: 'not-applied' })).body;
  const r = started.keyring.rotation;
  if (r === null) throw new CliFailure('the leader answered without a rotation under way; run the command again', exitCodes.failed);
  log(started.did === 'started' ? `rotation ${r.id} started: key ${r.from} -> ${r.to}` : `resuming rotation ${r.id} (key ${r.from} -> ${r.to}), at ${r.phase}`);
  const deadline = Date.now() + timeoutMs;
  let shown = '';
  for (;;) {
    const k = (await readKeyring(addr)).keyring;
    if (k === null) throw new CliFailure('the keyring is gone (a restored store?); nothing more to do', exitCodes.failed);
    const text = rotationProgress(k, r.to);
    if (text !== shown) log(text);
    shown = text;
    if (k.rotation === null) {
      if (values.json) console.log(JSON.stringify({ keyring: k }, null, 2));
      return exitCodes.ok;
    }
    if (Date.now() > deadline) {
      throw new CliFailure(`the rotation is not done after ${timeoutMs / 1000} s (${text}); nothing is lost: bring those voters up, or unlock them, and run 'shoal secret rotate-key' again to go on`, exitCodes.unavailable, 'timeout');
    }
    await new Promise((res) => setTimeout(res, pollMs));
  }
}

export async function recoveryKeyCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...commonFlags, yes: { type: 'boolean', default: false } }, secretRecoveryKeyHelp);
  if (values.help) return help(secretRecoveryKeyHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  await confirm('make a new recovery key (snapshots taken from now on open only with it)?', values.yes);
  const { body } = await request(resolveAddr(values.addr), 'POST', '/v1/keyring/recovery-key', recoveryAnswer, { body: {}, retry: 'not-applied' });
  if (values.json) console.log(JSON.stringify(body, null, 2));
  else console.log(`recovery key ${body.id} (shown this once; nothing keeps it). Store it offline, apart from your backups:\n\n  ${body.recoveryKey}\n`);
  return exitCodes.ok;
}

export async function autolockCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...commonFlags, yes: { type: 'boolean', default: false }, 'new-key': { type: 'boolean', default: false } }, clusterAutolockHelp);
  if (values.help) return help(clusterAutolockHelp);
  const [what, ...extra] = positionals;
  if (what === undefined || extra.length > 0 || !['on', 'off', 'status'].includes(what)) throw new UsageError('expected one of on, off, status');
  const addr = resolveAddr(values.addr);
  if (what === 'status') {
    const k = (await readKeyring(addr)).keyring;
    const out = { autolock: k?.autolock ?? false, voters: (k?.holders ?? []).filter((h) => h.voter).map((h) => ({ name: h.name, id: h.id, locked: h.locked })) };
    if (values.json) console.log(JSON.stringify(out, null, 2));
    else console.log(`autolock ${out.autolock ? 'on' : 'off'}${out.voters.length > 0 ? `\n${tableText(['VOTER', 'ID', 'LOCKED'], out.voters.map((v) => [v.name, v.id, v.locked ? 'yes' : 'no']))}` : ''}`);
    return exitCodes.ok;
  }
  const on = what === 'on';
  const newKey = values['new-key'];
  if (newKey && !on) throw new UsageError('--new-key goes with on');
  await confirm(newKey ? 'replace the unlock key (the old one stops opening the voters\' keys)?' : on ? 'turn autolock on (a restarted voter then waits for shoal unlock before it decrypts secrets or signs certificates)?' : 'turn autolock off (voters keep their keys on disk in the clear, mode 0600)?', values.yes);
  const { body } = await request(addr, 'POST', '/v1/cluster/autolock', autolockAnswer, { body: { on, ...(newKey ? { newKey } : {}) }, retry: 'not-applied' });
  if (values.json) console.log(JSON.stringify(body, null, 2));
  else if (body.unlockKey !== undefined) {
    console.log(`autolock is on (unlock key ${body.unlockKeyId}). The unlock key, shown this once (nothing keeps it); a restarted voter needs it (shoal unlock --addr NODE):\n\n  ${body.unlockKey}\n`);
  } else console.log('autolock is off: the voters write their keys back in the clear (mode 0600)');
  return exitCodes.ok;
}

async function readUnlockKey(file: string | undefined): Promise<string> {
  if (file !== undefined) {
    try {
      return readFileSync(file, 'utf8').trim();
    } catch (err) {
      throw new CliFailure(`cannot read ${file}: ${(err as Error).message}`, exitCodes.failed);
    }
  }
  if (process.stdin.isTTY) {
    const rl = createInterface({ input: process.stdin, output: process.stderr });
    try {
      return (await rl.question('unlock key: ')).trim();
    } finally {
      rl.close();
    }
  }
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)));
  return Buffer.concat(chunks).toString('utf8').trim();
}

export async function unlockCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...commonFlags, 'key-file': { type: 'string' } }, unlockHelp);
  if (values.help) return help(unlockHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}' (the key is read from --key-file or stdin, never from the command line)`);
  const addr = resolveAddr(values.addr);
  const unlockKey = await readUnlockKey(values['key-file']);
  if (unlockKey === '') throw new UsageError('no unlock key given (--key-file FILE, or on standard input)');
  const { body } = await request(addr, 'POST', '/v1/unlock', unlockAnswer, { body: { unlockKey }, retry: 'not-applied' });
  if (values.json) console.log(JSON.stringify(body, null, 2));
  else console.log(body.already ? `node ${body.node} was not locked` : `node ${body.node} is unlocked: it decrypts secrets and signs certificates again`);
  return exitCodes.ok;
}
