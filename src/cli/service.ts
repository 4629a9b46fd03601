// shoal service: the services of the control plane. ls, ps and inspect read; logs prints its
// tasks' logs; rm removes; scale, update, rollback and rebalance change a running service
// (service-change.ts).

import { stringify } from 'yaml';
import { servicesCollection, taskStatusCollection, tasksCollection } from '../resources/collections.ts';
import { renderService } from '../resources/spec/render.ts';
import { serviceSpecSchema } from '../resources/spec/service-spec.ts';
import { exitCodes, parse, UsageError } from './args.ts';
import { request, resolveAddr, retryNotice } from './client.ts';
import { paths, read, serviceDetailSchema, serviceListSchema } from './control-api.ts';
import { budgetLines, fittedTableText, jsonRendered, psHead, psRows, serviceHead, serviceProgress, serviceRows, tableText, terminalColumns } from './control-format.ts';
import { oneName } from './control-args.ts';
import { commonFlags, help } from './doc-common.ts';
import { clientExitCodes, commonFlagsHelp, commonFlagsText, groupHelp, runGroup, type Group } from './group.ts';
import { printList, watchList, type Rendered } from './list-watch.ts';
import { logsFlags, logsFlagsHelp, logsPaths, printLogs, sinceFlag, tailFlag } from './logs-stream.ts';
import {
  serviceRebalanceCommand, serviceRebalanceHelp, serviceRollbackCommand, serviceRollbackHelp, serviceScaleCommand, serviceScaleHelp,
  serviceUpdateCommand, serviceUpdateHelp,
} from './service-change.ts';
import { z } from 'zod';

const watchNote = `--watch prints the list again whenever it changes, until Ctrl-C (exit 0; exit 3 when no node
answered for 60 s). With --json --watch each printing is one line.`;

export const serviceLsHelp = `Usage: shoal service ls [--stale] [--watch] [--addr HOST:PORT] [--json]

Lists the services, sorted by name: mode, tasks running of those asked for (of the current spec,
on reachable nodes), and beside them how many serve during an update (whatever their spec), how
many last ran on a node that is suspect or down (unreachable), and how many wait for a node
(pending); image, spec version, the state of its rolling update, and the stack that deployed it
(shoal stack deploy; - for none).

Options:
  --stale            read the node's local copy (no leader needed; may be behind)
  --watch            print the list again on every change, until Ctrl-C
${commonFlagsHelp}

With --json prints {items: [{name, rev, record, status, stack}], rev} (GET /v1/services).
${watchNote}
${clientExitCodes}`;

export const servicePsHelp = `Usage: shoal service ps NAME [--all] [--no-trunc] [--stale] [--watch] [--addr HOST:PORT] [--json]

Lists a service's tasks, current first: one row per slot, its task desired running (running,
pending or failing), slots in order; slots that only hold history (scaled down) come after. Each
row: the task, its node, the state the leader wants (desired), the state it is in (observed: the
node's report merged with the leader's record), the spec version it runs, and why it waits when
it is pending (no node fits: the scheduler's reason), else its last message (none once it runs
as wanted: what it waited for is cleared). The tasks kept for history are counted on the last
line; --all lists them, each slot's under its current task, newest first. The console's
Services view shows the same order.
The message is cut with an ellipsis to fit the terminal's width (80 characters when the output is
not a terminal); --no-trunc prints it whole.

Options:
  --all              list every slot's earlier tasks too (history), under its current task
  --no-trunc         print each message whole
  --stale            read the node's local copy (no leader needed; may be behind)
  --watch            print the list again on every change, until Ctrl-C
${commonFlagsHelp}

With --json prints {service, tasks, rev} (GET /v1/services/NAME), every task, whatever --all.
${watchNote}
${clientExitCodes} An unknown service exits 1 (not_found).`;

export const serviceInspectHelp = `Usage: shoal service inspect NAME [--stale] [--addr HOST:PORT] [--json]

Shows a service: its status, spec version, rolling update, its disruption budget (the slots
unavailable now and why, how many more may go down, what waits for it, and what was forced past
it), and its spec with every default filled in (YAML, in the form 'shoal apply' reads back).

Options:
  --stale            read the node's local copy (no leader needed; may be behind)
${commonFlagsHelp}

With --json prints {service, tasks, rev} (GET /v1/services/NAME).
${clientExitCodes} An unknown service exits 1 (not_found).`;

export const serviceLogsHelp = `Usage: shoal service logs NAME [--follow] [--tail N] [--since DURATION] [--addr HOST:PORT] [--json]

Prints the logs of a service's running tasks, merged as the lines arrive, each line prefixed
by its task: '<service>.<slot>.<task>@<node> | '. Each task's log comes from the node that runs
it (as 'shoal task logs' does); a task whose log cannot be read (its node does not answer, it
has not started) gets one line saying why, and the others are printed all the same. The tasks
are those running when the command starts: with --follow, a task that starts later is not
added (run the command again).

Options:
${logsFlagsHelp}
${commonFlagsHelp}

With --json prints one object per line: {task, slot, node, at, stream, text}, or
{task, slot, node, error: {code, message}} for a task whose log cannot be read
(GET /v1/services/NAME/logs?format=json).
--follow runs until every container stops, or Ctrl-C (exit 0).
${clientExitCodes} An unknown service exits 1 (not_found); a task whose log
could not be read makes the exit 1 (3 when its node did not answer), after the others are printed.`;

export const serviceRmHelp = `Usage: shoal service rm NAME... [--addr HOST:PORT] [--json]

Removes services. Their tasks are shut down by the leader (the containers stop) and forgotten.

Options:
${commonFlagsText()}

With --json prints one {name, removed, rev} per service, as a list.
${clientExitCodes} An unknown service exits 1 (not_found); the ones before it are removed.`;

export const serviceGroup: Group = {
  name: 'service',
  about: `Services of the control plane: what runs, where, and changes to it. Create and change services
from spec files with 'shoal apply -f FILE'. docs/control-plane.md describes them.`,
  subcommands: {
    ls: { summary: 'list services with their tasks running and update state', help: serviceLsHelp, run: serviceLsCommand },
    ps: { summary: "list a service's tasks: slot, node, desired and observed state, why pending", help: servicePsHelp, run: servicePsCommand },
    inspect: { summary: 'show a service, its status and its full spec', help: serviceInspectHelp, run: serviceInspectCommand },
    logs: { summary: "print the logs of a service's running tasks, merged, each line prefixed by its task", help: serviceLogsHelp, run: serviceLogsCommand },
    rm: { summary: 'remove services (their tasks stop)', help: serviceRmHelp, run: serviceRmCommand },
    scale: { summary: 'set the number of replicas, and wait until they run', help: serviceScaleHelp, run: serviceScaleCommand },
    update: { summary: 'change a service from flags (--image, --replicas, --env), a rolling update', help: serviceUpdateHelp, run: serviceUpdateCommand },
    rollback: { summary: 'go back to the previous spec (a rolling update)', help: serviceRollbackHelp, run: serviceRollbackCommand },
    rebalance: { summary: 'move tasks off the fullest nodes, one at a time, so they spread again', help: serviceRebalanceHelp, run: serviceRebalanceCommand },
  },
};

export const serviceHelps: Record<string, string> = Object.fromEntries(Object.entries(serviceGroup.subcommands).map(([k, s]) => [k, s.help]));

export const serviceGroupHelp = groupHelp(serviceGroup);

export function serviceCommand(argv: string[]): Promise<number> {
  return runGroup(serviceGroup, argv);
}

const readFlags = { ...commonFlags, stale: { type: 'boolean', default: false }, watch: { type: 'boolean', default: false } } as const;
const serviceCollections = [servicesCollection, tasksCollection, taskStatusCollection];

async function serviceLsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, readFlags, serviceLsHelp);
  if (values.help) return help(serviceLsHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const addr = resolveAddr(values.addr);
  const render = async (): Promise<Rendered> => {
    const body = await read(addr, paths.services, serviceListSchema, 'service ls', values.stale);
    if (values.json) return jsonRendered(body, values.watch, body.items);
    const text = body.items.length === 0 ? 'no services; create one with: shoal apply -f FILE' : tableText(serviceHead, serviceRows(body.items));
    return { text, rev: body.rev };
  };
  if (!values.watch) return printList(render);
  return watchList({ addr, collections: serviceCollections, command: 'service ls', json: values.json, render });
}

async function servicePsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...readFlags, 'no-trunc': { type: 'boolean', default: false }, all: { type: 'boolean', default: false } }, servicePsHelp);
  if (values.help) return help(servicePsHelp);
  const name = oneName(positionals);
  const addr = resolveAddr(values.addr);
  const render = async (): Promise<Rendered> => {
    const body = await read(addr, paths.service(name), serviceDetailSchema, 'service ps', values.stale);
    if (values.json) return jsonRendered(body, values.watch, [body.service.record, body.service.status, body.tasks]);
    const rows = psRows(body.tasks, values.all);
    const table = fittedTableText(psHead, rows, terminalColumns(), values['no-trunc']);
    const hidden = body.tasks.length - rows.length;
    const lines = [serviceProgress(body.service), ...(body.tasks.length > 0 ? [table] : []),
      ...(hidden > 0 ? [`${hidden} earlier ${hidden === 1 ? 'task' : 'tasks'} (history): --all lists them`] : [])];
    return { text: lines.join('\n'), rev: body.rev };
  };
  if (!values.watch) return printList(render);
  return watchList({ addr, collections: serviceCollections, command: 'service ps', json: values.json, render });
}

async function serviceInspectCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...commonFlags, stale: { type: 'boolean', default: false } }, serviceInspectHelp);
  if (values.help) return help(serviceInspectHelp);
  const name = oneName(positionals);
  const body = await read(resolveAddr(values.addr), paths.service(name), serviceDetailSchema, 'service inspect', values.stale);
  if (values.json) {
    console.log(JSON.stringify(body, null, 2));
    return exitCodes.ok;
  }
  const r = body.service.record;
  const u = r.updateStatus;
  console.log(`service  ${r.name}   rev ${body.service.rev}`);
  console.log(`status   ${serviceProgress(body.service)}${body.service.status.converged ? ' (converged)' : ''}`);
  console.log(`spec     version ${r.specVersion}${r.previousSpecVersion !== null ? ` (previous: ${r.previousSpecVersion}, 'shoal service rollback ${r.name}' goes back to it)` : ''}`);
  console.log(`update   ${u.state}${u.message !== null ? `: ${u.message}` : ''}`);
  for (const line of budgetLines(body.service)) console.log(line);
  const spec = serviceSpecSchema.safeParse(r.spec);
  console.log('---');
  process.stdout.write(stringify(spec.success ? renderService(spec.data) : r.spec));
  return exitCodes.ok;
}

async function serviceLogsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, logsFlags, serviceLogsHelp);
  if (values.help) return help(serviceLogsHelp);
  const name = oneName(positionals);
  return printLogs({
    addr: resolveAddr(values.addr), path: logsPaths.service(name), follow: values.follow, tailLines: tailFlag(values.tail),
    sinceMs: sinceFlag(values.since), json: values.json, command: 'service logs', service: name,
  });
}

const removedSchema = z.object({ name: z.string(), removed: z.boolean(), rev: z.number().nullable() }).loose();

async function serviceRmCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, commonFlags, serviceRmHelp);
  if (values.help) return help(serviceRmHelp);
  if (positionals.length === 0) throw new UsageError('expected NAME... (the services to remove)');
  const addr = resolveAddr(values.addr);
  const out: unknown[] = [];
  for (const name of positionals) {
    const { body } = await request(addr, 'DELETE', paths.service(name), removedSchema, { retry: 'not-applied', onRetry: retryNotice('service rm') });
    out.push(body);
    if (!values.json) console.log(`removed ${name}; its tasks are being shut down`);
  }
  if (values.json) console.log(JSON.stringify(out, null, 2));
  return exitCodes.ok;
}
