// shoal token: join tokens. create prints one (the only time its secret is shown); ls lists them
// with their state and what each was used for; revoke stops one from being used.

import { z } from 'zod';
import { exitCodes, parse, UsageError } from './args.ts';
import { request, resolveAddr } from './client.ts';
import { durationFlag } from './control-args.ts';
import { commonFlags, help } from './doc-common.ts';
import { clientExitCodes, commonFlagsHelp, groupHelp, runGroup, type Group } from './group.ts';
import { clientRoles, tokenRoles, tokenUsesMax } from '../security/tokens.ts';

export const tokenCreateHelp = `Usage: shoal token create --role voter|learner|client [--ttl DURATION] [--uses N] [--label K=V ...] [--client-role ROLE] [--addr HOST:PORT] [--json]

Makes a join token and prints it: SHOAL1-<SHA-256 of the cluster CA>-<id>.<secret>. Give it to
the machine that joins ('shoal join ADDR --token T', or 'shoal login ADDR --token T' for a
client token). Only a hash of the secret is kept, so the token is shown this once.

  voter    the node joins as a learner and is made a voter once it has caught up (autopilot)
  learner  the node joins as a learner and stays one (promote it with 'shoal cluster promote')
  client   exchanged by 'shoal login' for a client certificate with --client-role

Options:
  --role ROLE           voter, learner or client (required)
  --ttl DURATION        how long it may be used (default 1h; at most 30d)
  --uses N              how many times it may be used (default 1; at most ${tokenUsesMax})
  --label K=V           a label kept with the token, shown by 'shoal token ls' (repeatable)
  --client-role ROLE    for a client token: admin, operator or reader (default reader)
${commonFlagsHelp}

With --json prints {token, id, role, expiresAtMs, usesLeft, ...}.
${clientExitCodes}`;

export const tokenLsHelp = `Usage: shoal token ls [--addr HOST:PORT] [--json]

Lists the join tokens: id, role, state (active, used, expired, revoked), uses left, expiry,
labels, and what each was redeemed for (node or client name, when, from which address).

Options:
${commonFlagsHelp}

With --json prints {items: [...]} (GET /v1/tokens).
${clientExitCodes}`;

export const tokenRevokeHelp = `Usage: shoal token revoke ID [--addr HOST:PORT] [--json]

Revokes a join token: it can no longer be used. Its record stays, so 'shoal token ls' still shows
what it was used for. Nodes that already joined with it stay members (remove them with
'shoal cluster remove').

Options:
${commonFlagsHelp}

${clientExitCodes} An unknown id exits 1 (not_found).`;

const redemption = z.object({ atMs: z.number(), subject: z.string(), name: z.string(), from: z.string() });
const tokenView = z.object({
  id: z.string(), role: z.string(), clientRole: z.string().optional(), state: z.string(), createdAtMs: z.number(), expiresAtMs: z.number(),
  usesMax: z.number(), usesLeft: z.number(), labels: z.record(z.string(), z.string()), createdBy: z.string(), revoked: z.boolean(), redemptions: z.array(redemption),
}).loose();
const created = tokenView.extend({ token: z.string() });

function labelsFlag(values: string[]): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const v of values) {
    const eq = v.indexOf('=');
    if (eq <= 0) throw new UsageError(`--label must be KEY=VALUE, got '${v}'`);
    labels[v.slice(0, eq)] = v.slice(eq + 1);
  }
  return labels;
}

async function createCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {
    ...commonFlags, role: { type: 'string' }, ttl: { type: 'string' }, uses: { type: 'string' },
    label: { type: 'string', multiple: true, default: [] }, 'client-role': { type: 'string' },
  }, tokenCreateHelp);
  if (values.help) return help(tokenCreateHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const role = values.role;
  if (role === undefined) throw new UsageError('missing --role voter|learner|client');
  if (!(tokenRoles as readonly string[]).includes(role)) throw new UsageError(`--role must be voter, learner or client, got '${role}'`);
  const clientRole = values['client-role'];
  if (clientRole !== undefined && (role !== 'client' || !(clientRoles as readonly string[]).includes(clientRole))) {
    throw new UsageError(`--client-role is admin, operator or reader, and only with --role client; got '${clientRole}' with --role ${role}`);
  }
  const uses = values.uses === undefined ? 1 : Number(values.uses);
  if (!Number.isInteger(uses) || uses < 1 || uses > tokenUsesMax) throw new UsageError(`--uses must be a whole number from 1 to ${tokenUsesMax}, got '${values.uses}'`);
  const ttlMs = durationFlag(values.ttl, '--ttl', '1h');
  const body = { role, ttlMs, uses, labels: labelsFlag(values.label), ...(clientRole !== undefined ? { clientRole } : {}) };
  const res = await request(resolveAddr(values.addr), 'POST', '/v1/tokens', created, { body });
  if (values.json) console.log(JSON.stringify(res.body, null, 2));
  else {
    console.log(res.body.token);
    console.error(`token ${res.body.id}: ${role}${clientRole !== undefined ? ` (${clientRole})` : ''}, ${uses} use${uses === 1 ? '' : 's'}, expires ${new Date(res.body.expiresAtMs).toISOString()}`);
  }
  return exitCodes.ok;
}

async function lsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, commonFlags, tokenLsHelp);
  if (values.help) return help(tokenLsHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const res = await request(resolveAddr(values.addr), 'GET', '/v1/tokens', z.object({ items: z.array(tokenView) }), { retry: 'safe' });
  if (values.json) {
    console.log(JSON.stringify(res.body, null, 2));
    return exitCodes.ok;
  }
  const rows = res.body.items.map((t) => [
    t.id, t.role + (t.clientRole !== undefined ? `(${t.clientRole})` : ''), t.state, `${t.usesLeft}/${t.usesMax}`, new Date(t.expiresAtMs).toISOString(),
    Object.entries(t.labels).map(([k, v]) => `${k}=${v}`).join(',') || '-', t.redemptions.map((r) => r.name).join(',') || '-',
  ]);
  const head = ['ID', 'ROLE', 'STATE', 'USES', 'EXPIRES', 'LABELS', 'USED BY'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  for (const r of [head, ...rows]) console.log(r.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ').trimEnd());
  return exitCodes.ok;
}

async function revokeCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, commonFlags, tokenRevokeHelp);
  if (values.help) return help(tokenRevokeHelp);
  const [id, ...extra] = positionals;
  if (id === undefined) throw new UsageError('missing the token ID (shoal token ls lists them)');
  if (extra.length > 0) throw new UsageError(`unexpected argument '${extra.join(' ')}'`);
  const res = await request(resolveAddr(values.addr), 'DELETE', `/v1/tokens/${encodeURIComponent(id)}`, tokenView);
  if (values.json) console.log(JSON.stringify(res.body, null, 2));
  else console.log(`revoked token ${res.body.id}`);
  return exitCodes.ok;
}

export const tokenGroup: Group = {
  name: 'token',
  about: 'Join tokens: make one for a machine that joins (shoal join) or a client that logs in (shoal login), list them, revoke one.',
  subcommands: {
    create: { summary: 'make a join token and print it', help: tokenCreateHelp, run: createCommand },
    ls: { summary: 'list join tokens, their state and what they were used for', help: tokenLsHelp, run: lsCommand },
    revoke: { summary: 'revoke a join token', help: tokenRevokeHelp, run: revokeCommand },
  },
};

export const tokenGroupHelp = groupHelp(tokenGroup);

export function tokenCommand(argv: string[]): Promise<number> {
  return runGroup(tokenGroup, argv);
}
