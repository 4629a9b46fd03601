// shoal audit ls [--principal P] [--limit N] [--watch]: the audit records (docs/security.md,
// "Audit"), oldest first, from GET /v1/audit (admin only). --watch prints the kept records, then
// each new one as it is written, following GET /v1/watch?collection=shoal.audit from the listing's
// revision (watch-stream.ts reconnects and fails over), until Ctrl-C.

import { z } from 'zod';
import { exitCodes, parse, UsageError } from './args.ts';
import { CliFailure, isClientFailure, reportFailure, request, resolveAddr, retryNotice } from './client.ts';
import { tableText } from './control-format.ts';
import { commonFlags, help } from './doc-common.ts';
import { clientExitCodes, commonFlagsHelp, groupHelp, runGroup, type Group } from './group.ts';
import { followWatch, untilInterrupted, WatchLostError, type WatchEventView } from './watch-stream.ts';

const auditCollection = 'shoal.audit';
/** Records asked for per request (the server's page limit). */
const pageLimitMax = 1000;

const recordSchema = z.object({
  id: z.string(), principal: z.string(), op: z.string(), resources: z.array(z.string()), resourceCount: z.number(),
  result: z.string(), term: z.number(), index: z.number(), timeMs: z.number(),
  // Written from feature level 5 only: older records have no role.
  role: z.string().optional(),
}).loose();
type AuditRecordView = z.infer<typeof recordSchema>;
const pageSchema = z.object({ items: z.array(recordSchema), next: z.number().nullable(), rev: z.number() }).loose();

export const auditLsHelp = `Usage: shoal audit ls [--principal P] [--limit N] [--watch] [--addr HOST:PORT] [--json]

Lists the audit records, oldest first: one for each client mutation (a put, delete or txn,
and the control plane's writes made for a client), whether it was applied or refused, with who
made it (the principal of its credential) and with which role (admin, operator or reader; '-'
for records written before the cluster ran at feature level 5), what, on which documents, the
result ('ok' or the error code), and its log index, term and log time. The node's own writes are
not recorded. Records are kept for a bounded window (10,000 records, 7 days of log time). Admin
only; written only once the cluster runs at feature level 4 (docs/security.md, "Audit").

Options:
  --principal P      only P's records
  --limit N          at most N records (default: every kept one)
  --watch            then print each new record as it is written, until Ctrl-C
${commonFlagsHelp}

${clientExitCodes}
A caller that is not admin exits 1 (forbidden). A watch that loses every node exits 3; one that
falls behind the changes the cluster keeps exits 1 (cursor_expired): run it again.`;

export const auditGroup: Group = {
  name: 'audit',
  about: 'The audit records of client mutations (admin).',
  subcommands: {
    ls: { summary: 'list audit records (who changed what, with the result); --watch to follow', help: auditLsHelp, run: lsCommand },
  },
};
export const auditGroupHelp = groupHelp(auditGroup);

export function auditCommand(argv: string[]): Promise<number> {
  return runGroup(auditGroup, argv);
}

function limitFlag(v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 1) throw new UsageError(`--limit must be a positive integer, got '${v}'`);
  return n;
}

function row(r: AuditRecordView): string[] {
  const more = r.resourceCount > r.resources.length ? ` (+${r.resourceCount - r.resources.length} more)` : '';
  return [new Date(r.timeMs).toISOString(), String(r.index), r.principal, r.role ?? '-', r.op, r.result, `${r.resources.join(',')}${more}`];
}

const head = ['TIME', 'INDEX', 'PRINCIPAL', 'ROLE', 'OP', 'RESULT', 'RESOURCES'];

interface Listed {
  items: AuditRecordView[];
  rev: number;
}

async function listAll(addr: string, principal: string | undefined, limit: number | undefined): Promise<Listed> {
  const items: AuditRecordView[] = [];
  let after: number | null | undefined;
  let rev = 0;
  do {
    const want = Math.min(pageLimitMax, limit === undefined ? pageLimitMax : limit - items.length);
    const q = new URLSearchParams({ limit: String(want) });
    if (after !== undefined && after !== null) q.set('after', String(after));
    if (principal !== undefined) q.set('principal', principal);
    const { body } = await request(addr, 'GET', `/v1/audit?${q.toString()}`, pageSchema, { retry: 'safe', onRetry: retryNotice('audit ls') });
    items.push(...body.items);
    rev = body.rev;
    after = body.next;
  } while (after !== null && (limit === undefined || items.length < limit));
  return { items, rev };
}

async function lsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...commonFlags, principal: { type: 'string' }, limit: { type: 'string' }, watch: { type: 'boolean', default: false } }, auditLsHelp);
  if (values.help) return help(auditLsHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const limit = limitFlag(values.limit);
  const addr = resolveAddr(values.addr);
  const listed = await listAll(addr, values.principal, limit);
  if (values.json) for (const r of listed.items) console.log(JSON.stringify(r));
  else console.log(tableText(head, listed.items.map(row)));
  if (!values.watch) return exitCodes.ok;
  return follow(addr, listed.rev, values.principal, values.json);
}

/** Prints each record written after `after`, one line each, until Ctrl-C (exit 0). */
async function follow(addr: string, after: number, principal: string | undefined, json: boolean): Promise<number> {
  const stop = untilInterrupted();
  if (!json) console.error(`watching for new records after rev ${after} (Ctrl-C to stop)`);
  const onEvent = (ev: WatchEventView): void => {
    if (ev.type !== 'put' || ev.doc === undefined) return;
    const r = recordSchema.safeParse({ id: ev.id, ...ev.doc.doc });
    if (!r.success || (principal !== undefined && r.data.principal !== principal)) return;
    console.log(json ? JSON.stringify(r.data) : row(r.data).join('  '));
  };
  try {
    await followWatch({ addr, collection: auditCollection, after, signal: stop.signal, onEvent, onNotice: (m) => { if (!json) console.error(`shoal audit ls: ${m}`); } });
    return exitCodes.ok;
  } catch (err) {
    if (err instanceof WatchLostError) return reportFailure('audit ls', new CliFailure(err.message, exitCodes.unavailable, 'watch_lost'), json);
    if (isClientFailure(err)) return reportFailure('audit ls', err, json);
    throw err;
  } finally {
    stop.dispose();
  }
}
