// shoal doc: read, write, list and watch documents through any node's client API.

import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { exitCodes, parse, UsageError } from './args.ts';
import { isClientFailure, reportFailure, request, resolveAddr, retryNotice, type FailureContext } from './client.ts';
import { commonFlags, docAnswerSchema, help, revFlag } from './doc-common.ts';
import { docLsCommand, docLsHelp, docWatchCommand, docWatchHelp } from './doc-watch.ts';
import { clientExitCodes, commonFlagsHelp, commonFlagsText, groupHelp, runGroup, type Group } from './group.ts';

const deleteAnswerSchema = z.object({ collection: z.string(), id: z.string(), rev: z.number().int() }).loose();

export const docGetHelp = `Usage: shoal doc get COLLECTION ID [--stale] [--addr HOST:PORT] [--json]

Prints a document (pretty JSON) and its revision. Reads are linearizable: the node confirms with
the leader that it has every committed write first. --stale reads the node's local copy instead
(works without a leader, may be behind).

Options:
  --stale            read the node's local copy (no leader needed; may be behind)
${commonFlagsHelp}

With --json prints {collection, id, rev, createRev, doc}.
${clientExitCodes} A missing document exits 1 (not_found).`;

export const docPutHelp = `Usage: shoal doc put COLLECTION ID (--data JSON | --file PATH | -) [--if-match REV | --if-absent]
                    [--idempotency-key KEY] [--addr HOST:PORT] [--json]

Creates or replaces a document. The body is a JSON object from --data, from a file, or from
standard input ('-'). Prints the new revision.

Options:
  --data JSON            the document, e.g. --data '{"image":"nginx"}'
  --file PATH            read the document from a file ('-' for standard input)
  -                      read the document from standard input
  --if-match REV         write only if the document is at revision REV (else exit 1: precondition_failed)
  --if-absent            write only if the document does not exist (else exit 1: precondition_failed)
  --idempotency-key KEY  retrying with the same key applies the write at most once; without it
                         a random key is used, and printed if the outcome is unknown
${commonFlagsText(23)}

Retries by itself (with the same key) while the cluster cannot serve (no leader, timeout), up to
4 attempts.
With --json prints {collection, id, rev, createRev, doc}.
${clientExitCodes}`;

export const docRmHelp = `Usage: shoal doc rm COLLECTION ID [--if-match REV] [--idempotency-key KEY] [--addr HOST:PORT] [--json]

Deletes a document. Prints the revision of the delete.

Options:
  --if-match REV         delete only if the document is at revision REV
  --idempotency-key KEY  as for 'shoal doc put'
${commonFlagsText(23)}

With --json prints {collection, id, rev}.
${clientExitCodes} A missing document exits 1 (not_found).`;

export const docGroup: Group = {
  name: 'doc',
  about: `Reads, writes, lists and watches documents. Any node answers; writes go to the leader.
Every document has rev (the log index of its last change) and createRev.`,
  subcommands: {
    get: { summary: 'print a document and its revision', help: docGetHelp, run: docGetCommand },
    put: { summary: 'create or replace a document (conditional with --if-match / --if-absent)', help: docPutHelp, run: docPutCommand },
    rm: { summary: 'delete a document', help: docRmHelp, run: docRmCommand },
    ls: { summary: 'list a collection (--all pages, --watch for changes after the listing)', help: docLsHelp, run: docLsCommand },
    watch: { summary: 'stream changes as they commit (reconnects, fails over to other nodes)', help: docWatchHelp, run: docWatchCommand },
  },
};

export const docHelps: Record<string, string> = { get: docGetHelp, put: docPutHelp, rm: docRmHelp, ls: docLsHelp, watch: docWatchHelp };

export const docGroupHelp = groupHelp(docGroup);

export function docCommand(argv: string[]): Promise<number> {
  return runGroup(docGroup, argv);
}

function docPath(positionals: string[], extra = 0): { collection: string; id: string } {
  const [collection, id, ...rest] = positionals;
  if (collection === undefined || id === undefined || rest.length > extra) {
    throw new UsageError(`expected COLLECTION ID${extra > 0 ? ' [-]' : ''}, got ${positionals.length === 0 ? 'nothing' : `'${positionals.join(' ')}'`}`);
  }
  return { collection, id };
}

const enc = (s: string): string => encodeURIComponent(s);

async function docGetCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...commonFlags, stale: { type: 'boolean', default: false } }, docGetHelp);
  if (values.help) return help(docGetHelp);
  const { collection, id } = docPath(positionals);
  const addr = resolveAddr(values.addr);
  const { body } = await request(addr, 'GET', `/v1/docs/${enc(collection)}/${enc(id)}`, docAnswerSchema, {
    query: { consistency: values.stale ? 'stale' : undefined }, retry: 'safe', onRetry: retryNotice('doc get'),
  });
  if (values.json) {
    console.log(JSON.stringify(body, null, 2));
  } else {
    console.log(`${body.collection}/${body.id}  rev ${body.rev}  (created at rev ${body.createRev})`);
    console.log(JSON.stringify(body.doc, null, 2));
  }
  return exitCodes.ok;
}

function readStdin(): string {
  try {
    return readFileSync(0, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read the document from standard input: ${(err as Error).message}`);
  }
}

/** The document from exactly one of --data, --file, '-'; must be a JSON object. */
function documentFrom(data: string | undefined, file: string | undefined, stdin: boolean): Record<string, unknown> {
  const sources = [data !== undefined, file !== undefined, stdin].filter(Boolean).length;
  if (sources !== 1) throw new UsageError(`give the document in exactly one way: --data JSON, --file PATH, or - (standard input)`);
  let text: string;
  let where: string;
  if (data !== undefined) {
    text = data;
    where = '--data';
  } else if (file !== undefined && file !== '-') {
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      throw new UsageError(`cannot read --file ${file}: ${(err as Error).message}`);
    }
    where = file;
  } else {
    text = readStdin();
    where = 'standard input';
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new UsageError(`the document in ${where} is not valid JSON: ${(err as Error).message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new UsageError(`the document in ${where} must be a JSON object ({...}), got ${Array.isArray(value) ? 'an array' : value === null ? 'null' : typeof value}`);
  }
  return value as Record<string, unknown>;
}

/** Runs a write; on failure reports it with the command line that retries it safely. */
async function write<T>(command: string, json: boolean, ctx: FailureContext, fn: () => Promise<T>): Promise<T | number> {
  try {
    return await fn();
  } catch (err) {
    if (!isClientFailure(err)) throw err;
    return reportFailure(command, err, json, ctx);
  }
}

function shellQuote(s: string): string {
  return /^[A-Za-z0-9._/:=@%+-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

async function docPutCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {
    ...commonFlags, data: { type: 'string' }, file: { type: 'string' }, 'if-match': { type: 'string' },
    'if-absent': { type: 'boolean', default: false }, 'idempotency-key': { type: 'string' },
  }, docPutHelp);
  if (values.help) return help(docPutHelp);
  const stdin = positionals[2] === '-';
  if (positionals.length === 3 && !stdin) throw new UsageError(`unexpected argument '${positionals[2]}'; give the document with --data, --file or -`);
  const { collection, id } = docPath(positionals, 1);
  const ifMatch = revFlag(values['if-match'], '--if-match');
  if (ifMatch !== undefined && values['if-absent']) throw new UsageError('--if-match and --if-absent cannot be combined');
  const doc = documentFrom(values.data, values.file, stdin);
  const addr = resolveAddr(values.addr);
  const key = values['idempotency-key'] ?? randomUUID();
  const headers: Record<string, string> = { 'idempotency-key': key };
  if (ifMatch !== undefined) headers['if-match'] = String(ifMatch);
  if (values['if-absent']) headers['if-none-match'] = '*';
  const retryLine = ['shoal doc put', collection, id, '--data', JSON.stringify(doc), ...(ifMatch !== undefined ? ['--if-match', String(ifMatch)] : []),
    ...(values['if-absent'] ? ['--if-absent'] : []), '--idempotency-key', key, '--addr', addr].map((s, i) => (i === 0 ? s : shellQuote(s))).join(' ');
  const answer = await write('doc put', values.json, { idempotencyKey: key, retryCommand: retryLine, ifAbsent: values['if-absent'] }, () => request(addr, 'PUT', `/v1/docs/${enc(collection)}/${enc(id)}`, docAnswerSchema, {
    body: doc, headers, retry: 'safe', onRetry: retryNotice('doc put'),
  }));
  if (typeof answer === 'number') return answer;
  const replayed = answer.headers.get('idempotent-replayed') === 'true';
  if (values.json) console.log(JSON.stringify(answer.body, null, 2));
  else console.log(`put ${answer.body.collection}/${answer.body.id} rev ${answer.body.rev}${answer.body.createRev === answer.body.rev ? ' (created)' : ''}${replayed ? ' (already applied earlier with this idempotency key)' : ''}`);
  return exitCodes.ok;
}

async function docRmCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...commonFlags, 'if-match': { type: 'string' }, 'idempotency-key': { type: 'string' } }, docRmHelp);
  if (values.help) return help(docRmHelp);
  const { collection, id } = docPath(positionals);
  const ifMatch = revFlag(values['if-match'], '--if-match');
  const addr = resolveAddr(values.addr);
  const key = values['idempotency-key'] ?? randomUUID();
  const headers: Record<string, string> = { 'idempotency-key': key };
  if (ifMatch !== undefined) headers['if-match'] = String(ifMatch);
  const retryLine = ['shoal doc rm', collection, id, ...(ifMatch !== undefined ? ['--if-match', String(ifMatch)] : []), '--idempotency-key', key, '--addr', addr]
    .map((s, i) => (i === 0 ? s : shellQuote(s))).join(' ');
  const answer = await write('doc rm', values.json, { idempotencyKey: key, retryCommand: retryLine }, () => request(addr, 'DELETE', `/v1/docs/${enc(collection)}/${enc(id)}`, deleteAnswerSchema, {
    headers, retry: 'safe', onRetry: retryNotice('doc rm'),
  }));
  if (typeof answer === 'number') return answer;
  if (values.json) console.log(JSON.stringify(answer.body, null, 2));
  else console.log(`deleted ${answer.body.collection}/${answer.body.id} at rev ${answer.body.rev}`);
  return exitCodes.ok;
}
