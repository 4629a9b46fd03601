// shoal volume ls | inspect NAME | restore NAME (--version V | --empty) | rm-copy NAME --node N
// --version V [--force]: replicated volumes (issue 41, docs/volumes.md): where each one's newest
// complete copy is and how old, every copy held (complete or diverged), an operator's restore
// (stop-first), and the removal of a copy (a diverged one; never the last complete one).

import { z } from 'zod';
import { exitCodes, parse, UsageError } from './args.ts';
import { request, resolveAddr, retryNotice } from './client.ts';
import { read } from './control-api.ts';
import { oneName } from './control-args.ts';
import { tableText } from './control-format.ts';
import { commonFlags, help } from './doc-common.ts';
import { clientExitCodes, commonFlagsHelp, groupHelp, runGroup, type Group } from './group.ts';
import { compareText } from '../base/order.ts';

const copySchema = z.object({ node: z.string(), version: z.string(), atMs: z.number(), state: z.string() }).loose();
const volumeSchema = z.object({
  name: z.string(), service: z.string(), copies: z.number(), everyMs: z.number(), sizeBytes: z.number(),
  writer: z.object({ node: z.string(), epoch: z.number() }).loose().nullable(),
  newest: z.object({ version: z.string(), nodes: z.array(z.string()), atMs: z.number(), ageMs: z.number() }).loose().nullable(),
  restoring: z.object({ version: z.string().nullable() }).loose().nullable(),
  lastError: z.object({ atMs: z.number(), message: z.string() }).loose().nullable(),
  held: z.array(copySchema), diverged: z.number(), rev: z.number(),
}).loose();
type VolumeItem = z.infer<typeof volumeSchema>;
const listSchema = z.object({ items: z.array(volumeSchema), rev: z.number() }).loose();
const restoredSchema = z.object({ volume: volumeSchema, restoring: z.string().nullable() }).loose();
const removedSchema = z.object({ volume: volumeSchema, removed: z.object({ node: z.string(), version: z.string(), state: z.string() }).loose() }).loose();

const readFlags = { ...commonFlags, stale: { type: 'boolean', default: false } } as const;

export const volumeLsHelp = `Usage: shoal volume ls [--stale] [--addr HOST:PORT] [--json]

Lists the replicated volumes (a volume mount with 'replicate' on an exclusive service,
docs/volumes.md): the service, the node writing it now, its newest complete copy, the nodes that
hold it and its age, and the last replication error. An age above a few intervals ('every')
means copies are not being made: the error says why.

Options:
  --stale            read the node's local copy (no leader needed; may be behind)
${commonFlagsHelp}

With --json prints {items: [VOLUME], rev} (GET /v1/volumes); VOLUME is as 'shoal volume inspect'
prints it.
${clientExitCodes}`;

export const volumeInspectHelp = `Usage: shoal volume inspect NAME [--stale] [--addr HOST:PORT] [--json]

Shows one replicated volume: its settings (copies, every, size), the node writing it, the newest
complete copy (version, holders, age), a restore waiting for the task's next start, the last
replication error, and every copy held: complete (of the volume's line, a failover may start
from it) or diverged (written by a writer that was replaced, or after the version an operator
restored: kept, never started from).

Options:
  --stale            read the node's local copy (no leader needed; may be behind)
${commonFlagsHelp}

With --json prints {name, service, copies, everyMs, sizeBytes, writer: {node, epoch} | null,
newest: {version, nodes, atMs, ageMs} | null, restoring: {version} | null, lastError:
{atMs, message} | null, held: [{node, version, atMs, state}], diverged, removing: [{node,
version}] (copies removed with rm-copy, not yet deleted by their node), rev}
(GET /v1/volumes/NAME).
${clientExitCodes}`;

export const volumeRestoreHelp = `Usage: shoal volume restore NAME (--version VERSION | --empty) [--addr HOST:PORT] [--json]

Makes the next start of the volume's task begin from VERSION (a version some node holds
completely, as 'shoal volume inspect NAME' lists them, e.g. s12-e3-n2), or from an empty
volume with --empty. Stop-first: refused (volume_in_use) while the service has a task running;
stop it with 'shoal service scale SERVICE 0', restore, then scale it back to 1.

The versions after VERSION (and with --empty, every copy) become diverged: kept on their nodes,
never started from. --empty is the only way a task whose volume held data starts on an empty
one: use it when no copy is left and the service must run anyway, knowing its data is lost.

Options:
  --version VERSION  the version to restore
  --empty            start from an empty volume
${commonFlagsHelp}

With --json prints {volume: VOLUME, restoring: VERSION | null} (POST /v1/volumes/NAME/restore).
${clientExitCodes}`;

export const volumeRmCopyHelp = `Usage: shoal volume rm-copy NAME --node NODE --version VERSION [--force] [--addr HOST:PORT] [--json]

Removes NODE's copy VERSION of the volume (as 'shoal volume inspect NAME' lists the copies): the
store forgets it at once, and the node deletes its files when it next looks (at once when it is
up; when it comes back otherwise). Meant for diverged copies (a replaced writer's late versions,
or those after a restored version), which shoal keeps until the operator removes them.

A complete copy (of the volume's line: a failover may start from it) is refused
(volume_copy_kept, not_diverged) unless --force. Even with --force, the only complete copy of
the newest version (last_complete) and the only copy of the version the current writer starts
from (era_base) are kept: nothing removes the last complete copy of a volume. Holders drop old
complete versions by themselves (they keep the last 3); --force is for freeing a node's disk.

Options:
  --node NODE        the node that holds the copy
  --version VERSION  the copy's version, e.g. s12-e3-n2
  --force            also a complete copy (never the last complete one)
${commonFlagsHelp}

With --json prints {volume: VOLUME, removed: {node, version, state}} (POST
/v1/volumes/NAME/remove-copy).
${clientExitCodes}`;

export const volumeGroup: Group = {
  name: 'volume',
  about: `Replicated volumes: a volume of an exclusive service copied to other nodes every interval,
so that a failed-over task starts from the newest copy (docs/volumes.md).`,
  subcommands: {
    ls: { summary: 'list the replicated volumes: writer, newest copy, where, age, error', help: volumeLsHelp, run: volumeLsCommand },
    inspect: { summary: 'one volume: settings, newest copy, every copy held (complete or diverged)', help: volumeInspectHelp, run: volumeInspectCommand },
    restore: { summary: 'the next start restores --version V, or starts --empty (stop-first)', help: volumeRestoreHelp, run: volumeRestoreCommand },
    'rm-copy': { summary: 'remove a node\'s copy: a diverged one, or --force a complete one (never the last)', help: volumeRmCopyHelp, run: volumeRmCopyCommand },
  },
};

export const volumeGroupHelp = groupHelp(volumeGroup);

export function volumeCommand(argv: string[]): Promise<number> {
  return runGroup(volumeGroup, argv);
}

function age(ms: number): string {
  const s = Math.round(ms / 1000);
  return s < 120 ? `${s}s` : s < 7200 ? `${Math.round(s / 60)}m` : `${Math.round(s / 3600)}h`;
}

function every(ms: number): string {
  return ms % 3_600_000 === 0 ? `${ms / 3_600_000}h` : ms % 60_000 === 0 ? `${ms / 60_000}m` : `${ms / 1000}s`;
}

/** The table `volume ls` prints (exported for its test). */
export function volumeTable(items: readonly VolumeItem[]): string {
  const rows = [...items].sort((a, b) => compareText(a.name, b.name)).map((v) => [
    v.name, v.service, v.writer === null ? (v.restoring !== null ? `- (restoring ${v.restoring.version ?? 'empty'})` : '-') : v.writer.node,
    v.newest === null ? '-' : v.newest.version, v.newest === null ? '-' : v.newest.nodes.join(','), v.newest === null ? '-' : age(v.newest.ageMs),
    `${v.copies} every ${every(v.everyMs)}`, v.lastError === null ? '-' : v.lastError.message.slice(0, 60),
  ]);
  return tableText(['NAME', 'SERVICE', 'WRITER', 'NEWEST', 'ON', 'AGE', 'COPIES', 'LAST ERROR'], rows);
}

/** What `volume inspect` prints (exported for its test). */
export function volumeText(v: VolumeItem): string {
  const lines = [
    `volume:    ${v.name} (service ${v.service})`,
    `settings:  ${v.copies} copies, every ${every(v.everyMs)}, size ${Math.round(v.sizeBytes / 1024 ** 2)} MiB`,
    `writer:    ${v.writer === null ? '-' : `${v.writer.node} (epoch ${v.writer.epoch})`}`,
    `newest:    ${v.newest === null ? '- (no complete copy)' : `${v.newest.version} on ${v.newest.nodes.join(', ')}, ${age(v.newest.ageMs)} old`}`,
    ...(v.restoring !== null ? [`restoring: ${v.restoring.version ?? 'an empty volume'} at the task's next start`] : []),
    `error:     ${v.lastError === null ? '-' : v.lastError.message}`,
    '',
  ];
  const rows = v.held.map((c) => [c.version, c.node, c.state, new Date(c.atMs).toISOString()]);
  return `${lines.join('\n')}${rows.length === 0 ? 'no copies held' : tableText(['VERSION', 'NODE', 'STATE', 'RECORDED'], rows)}`;
}

async function volumeLsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, readFlags, volumeLsHelp);
  if (values.help) return help(volumeLsHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const body = await read(resolveAddr(values.addr), '/v1/volumes', listSchema, 'volume ls', values.stale);
  if (values.json) console.log(JSON.stringify(body, null, 2));
  else if (body.items.length === 0) console.log('no replicated volumes; give a volume mount of an exclusive service \'replicate\' (docs/volumes.md)');
  else console.log(volumeTable(body.items));
  return exitCodes.ok;
}

async function volumeInspectCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, readFlags, volumeInspectHelp);
  if (values.help) return help(volumeInspectHelp);
  const name = oneName(positionals, 'volume NAME');
  const body = await read(resolveAddr(values.addr), `/v1/volumes/${encodeURIComponent(name)}`, volumeSchema, 'volume inspect', values.stale);
  console.log(values.json ? JSON.stringify(body, null, 2) : volumeText(body));
  return exitCodes.ok;
}

const restoreFlags = { ...commonFlags, version: { type: 'string' }, empty: { type: 'boolean', default: false } } as const;

async function volumeRestoreCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, restoreFlags, volumeRestoreHelp);
  if (values.help) return help(volumeRestoreHelp);
  const name = oneName(positionals, 'volume NAME');
  if ((values.version === undefined) === !values.empty) throw new UsageError('give one of --version VERSION (as shoal volume inspect lists them) or --empty');
  const body = values.empty ? { empty: true } : { version: values.version };
  const { body: out } = await request(resolveAddr(values.addr), 'POST', `/v1/volumes/${encodeURIComponent(name)}/restore`, restoredSchema, { body, retry: 'not-applied', onRetry: retryNotice('volume restore') });
  if (values.json) console.log(JSON.stringify(out, null, 2));
  else console.log(`volume ${name}: the next start of service ${out.volume.service}'s task ${out.restoring === null ? 'starts on an empty volume (every old copy is kept, diverged)' : `restores ${out.restoring}`}; scale it back up to start it`);
  return exitCodes.ok;
}

const rmCopyFlags = { ...commonFlags, node: { type: 'string' }, version: { type: 'string' }, force: { type: 'boolean', default: false } } as const;

async function volumeRmCopyCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, rmCopyFlags, volumeRmCopyHelp);
  if (values.help) return help(volumeRmCopyHelp);
  const name = oneName(positionals, 'volume NAME');
  if (values.node === undefined || values.version === undefined) throw new UsageError('give --node NODE and --version VERSION (as shoal volume inspect NAME lists the copies)');
  const body = { node: values.node, version: values.version, ...(values.force ? { force: true } : {}) };
  const { body: out } = await request(resolveAddr(values.addr), 'POST', `/v1/volumes/${encodeURIComponent(name)}/remove-copy`, removedSchema, { body, retry: 'not-applied', onRetry: retryNotice('volume rm-copy') });
  if (values.json) console.log(JSON.stringify(out, null, 2));
  else console.log(`volume ${name}: ${out.removed.state} copy ${out.removed.version} on ${out.removed.node} removed; the node deletes its files when it next looks`);
  return exitCodes.ok;
}
