// shoal doc ls and shoal doc watch: listing a collection page by page, and following changes.
// `ls --watch` lists, then watches from the listing's revision, so no change falls in between.

import { z } from 'zod';
import { exitCodes, parse, UsageError } from './args.ts';
import { CliFailure, isClientFailure, reportFailure, request, resolveAddr, retryNotice } from './client.ts';
import { commonFlags, docAnswerSchema, help, revFlag } from './doc-common.ts';
import { clientExitCodes, commonFlagsHelp } from './group.ts';
import { table } from './cluster-view.ts';
import { followWatch, untilInterrupted, WatchLostError, type WatchEventView } from './watch-stream.ts';

const listPageSchema = z.object({ items: z.array(docAnswerSchema), rev: z.number().int(), next: z.string().nullable() }).loose();
type ListPage = z.infer<typeof listPageSchema>;

/** Pages followed by --all at most; a limit on everything. */
const pagesMax = 100_000;
const docPreviewChars = 60;

const watchExitCodes = `Exit codes: 0 stopped with Ctrl-C; 1 the cursor expired (events after --after are no longer kept:
list again) or the request was refused; 2 usage error; 3 no node answered for 60 s (the message
says the revision to resume from).`;

export const docLsHelp = `Usage: shoal doc ls COLLECTION [--prefix P] [--limit N] [--all] [--stale] [--watch]
                   [--addr HOST:PORT] [--json]

Lists the documents of a collection in id order: id, rev, createRev and the start of the document.

Options:
  --prefix P         only ids starting with P
  --limit N          page size, 1 to 1000 (default 100); without --all, only the first page
  --all              follow the pages to the end
  --stale            read the node's local copy (no leader needed; may be behind)
  --watch            after the listing, keep printing changes (from the listing's revision: no
                     change is missed between the listing and the watch) until Ctrl-C
${commonFlagsHelp}

With --json prints {items, rev, next}: pass rev to 'shoal doc watch --after' to see every later
change. With --json --watch the listing is one line, then one line per change (as doc watch).
${clientExitCodes}
With --watch it runs until Ctrl-C (exit 0); it exits 1 if the cluster no longer keeps the events
after the listing (list again), and 3 if no node answered for 60 s.`;

export const docWatchHelp = `Usage: shoal doc watch [--collection C] [--prefix P] [--after REV] [--addr HOST:PORT] [--json]

Prints changes as they commit, one line each: "REV TYPE COLLECTION/ID" (with --json, one JSON
object per line: {rev, type, collection, id, doc?, prevRev?}). Runs until Ctrl-C.

If the connection drops or the node dies, it reconnects after the last revision it printed,
trying the other members' APIs, and prints nothing twice. It gives up after 60 s without any
node answering.

Options:
  --collection C     only this collection
  --prefix P         only ids starting with P
  --after REV        start after revision REV (e.g. the rev of 'shoal doc ls --json');
                     default: changes from now on
${commonFlagsHelp}

${watchExitCodes}`;

function limitFlag(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < 1 || n > 1000) throw new UsageError(`--limit must be a page size from 1 to 1000, got '${value}'`);
  return n;
}

export async function docLsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {
    ...commonFlags, prefix: { type: 'string' }, limit: { type: 'string' }, all: { type: 'boolean', default: false },
    stale: { type: 'boolean', default: false }, watch: { type: 'boolean', default: false },
  }, docLsHelp);
  if (values.help) return help(docLsHelp);
  const [collection, ...extra] = positionals;
  if (collection === undefined || extra.length > 0) throw new UsageError(`expected one COLLECTION, got ${positionals.length === 0 ? 'nothing' : `'${positionals.join(' ')}'`}`);
  const limit = limitFlag(values.limit);
  const addr = resolveAddr(values.addr);
  const listing = await listAll(addr, collection, { prefix: values.prefix, limit, all: values.all, stale: values.stale });
  if (values.json) console.log(values.watch ? JSON.stringify(listing) : JSON.stringify(listing, null, 2));
  else printListing(collection, listing, values.all);
  if (!values.watch) return exitCodes.ok;
  // Pages read at later revisions may already show a change the watch replays: skip those.
  const listed = new Map(listing.items.map((d) => [d.id, d.rev]));
  if (!values.json) console.error(`watching ${collection} for changes after rev ${listing.rev} (Ctrl-C to stop)`);
  return follow('doc ls', values.json, {
    addr, collection, ...(values.prefix !== undefined ? { prefix: values.prefix } : {}), after: listing.rev,
    skip: (ev) => ev.type === 'put' && (listed.get(ev.id) ?? -1) >= ev.rev,
  });
}

async function listAll(addr: string, collection: string, o: { prefix: string | undefined; limit: number | undefined; all: boolean; stale: boolean }): Promise<ListPage> {
  const items: ListPage['items'] = [];
  let rev: number | undefined;
  let after: string | undefined;
  for (let page = 0; page < pagesMax; page++) {
    const { body } = await request(addr, 'GET', `/v1/docs/${encodeURIComponent(collection)}`, listPageSchema, {
      query: { prefix: o.prefix, limit: o.limit, after, consistency: o.stale ? 'stale' : undefined }, retry: 'safe', onRetry: retryNotice('doc ls'),
    });
    items.push(...body.items);
    // The first page's revision: watching after it misses nothing that any page missed.
    rev ??= body.rev;
    if (!o.all || body.next === null) return { items, rev, next: body.next };
    after = body.next;
  }
  throw new CliFailure(`stopped after ${pagesMax} pages of ${collection}; narrow the listing with --prefix`, exitCodes.failed);
}

function preview(doc: unknown): string {
  const s = JSON.stringify(doc);
  return s.length > docPreviewChars ? `${s.slice(0, docPreviewChars - 1)}…` : s;
}

function printListing(collection: string, l: ListPage, all: boolean): void {
  if (l.items.length === 0) {
    console.log(`no documents in ${collection} (rev ${l.rev})`);
  } else {
    table(['ID', 'REV', 'CREATED', 'DOCUMENT'], l.items.map((d) => [d.id, String(d.rev), String(d.createRev), preview(d.doc)]));
    console.log(`${l.items.length} document${l.items.length === 1 ? '' : 's'} at rev ${l.rev}`);
  }
  if (l.next !== null && !all) console.log(`more documents follow '${l.next}': add --all to list them all`);
}

export async function docWatchCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {
    ...commonFlags, collection: { type: 'string' }, prefix: { type: 'string' }, after: { type: 'string' },
  }, docWatchHelp);
  if (values.help) return help(docWatchHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'; use --collection C`);
  const after = revFlag(values.after, '--after');
  const addr = resolveAddr(values.addr);
  return follow('doc watch', values.json, {
    addr, ...(values.collection !== undefined ? { collection: values.collection } : {}),
    ...(values.prefix !== undefined ? { prefix: values.prefix } : {}), ...(after !== undefined ? { after } : {}),
  });
}

export function formatEvent(ev: WatchEventView): string {
  return `${ev.rev} ${ev.type.padEnd(6)} ${ev.collection}/${ev.id}`;
}

interface FollowArgs {
  addr: string;
  collection?: string;
  prefix?: string;
  after?: number;
  skip?: (ev: WatchEventView) => boolean;
}

async function follow(command: string, json: boolean, a: FollowArgs): Promise<number> {
  const stop = untilInterrupted();
  try {
    await followWatch({
      addr: a.addr, signal: stop.signal,
      ...(a.collection !== undefined ? { collection: a.collection } : {}), ...(a.prefix !== undefined ? { prefix: a.prefix } : {}),
      ...(a.after !== undefined ? { after: a.after } : {}),
      onEvent: (ev) => {
        if (a.skip?.(ev) === true) return;
        console.log(json ? JSON.stringify(ev) : formatEvent(ev));
      },
      onNotice: (m) => console.error(`shoal ${command}: ${m}`),
    });
    return exitCodes.ok;
  } catch (err) {
    if (err instanceof WatchLostError) {
      const resume = ['shoal doc watch', ...(a.collection !== undefined ? ['--collection', a.collection] : []), ...(a.prefix !== undefined ? ['--prefix', a.prefix] : []),
        ...(err.after !== undefined ? ['--after', String(err.after)] : []), '--addr', 'HOST:PORT'].join(' ');
      return reportFailure(command, new CliFailure(`${err.message}\n  ${err.after !== undefined ? `every change up to rev ${err.after} was printed; ` : ''}when a node is back, resume with: ${resume}`, exitCodes.unavailable, 'watch_lost'), json);
    }
    if (isClientFailure(err)) return reportFailure(command, err, json, a.collection !== undefined ? { collection: a.collection } : {});
    throw err;
  } finally {
    stop.dispose();
  }
}
