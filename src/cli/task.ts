// shoal task ls: the tasks of every service (or of one service, one node, one state), with their
// node, desired and observed state, and why a pending task waits. shoal task logs: one task's
// container log, from whatever node runs it.

import { taskStatusCollection, tasksCollection } from '../resources/collections.ts';
import { exitCodes, parse, UsageError } from './args.ts';
import { CliFailure, resolveAddr } from './client.ts';
import { paths, read, taskPageSchema, type TaskItem } from './control-api.ts';
import { jsonRendered, tableText, taskHead, taskRows } from './control-format.ts';
import { oneName } from './control-args.ts';
import { commonFlags, help } from './doc-common.ts';
import { clientExitCodes, commonFlagsHelp, groupHelp, runGroup, type Group } from './group.ts';
import { printList, watchList, type Rendered } from './list-watch.ts';
import { logsFlags, logsFlagsHelp, logsPaths, printLogs, sinceFlag, tailFlag } from './logs-stream.ts';

/** Pages of GET /v1/tasks followed at most (each up to 10,000 tasks). */
const pagesMax = 100;
const states = ['pending', 'assigned', 'starting', 'running', 'failed', 'shutdown', 'orphaned'];

export const taskLsHelp = `Usage: shoal task ls [--service NAME] [--node NODE] [--state STATE] [--stale] [--watch]
                    [--addr HOST:PORT] [--json]

Lists tasks, by service and slot: the task, its node, the state the leader wants (desired), the
state it is in (observed), and why it waits when pending, else its last message. Finished tasks
are kept for a while (two per slot) so that what happened can be seen.

Options:
  --service NAME     only this service's tasks
  --node NODE        only the tasks assigned to this node (name or id)
  --state STATE      only tasks observed in this state: ${states.join(', ')}
  --stale            read the node's local copy (no leader needed; may be behind)
  --watch            print the list again on every change, until Ctrl-C
${commonFlagsHelp}

With --json prints {items, rev} (GET /v1/tasks, every page).
--watch prints the list again whenever it changes, until Ctrl-C (exit 0; exit 3 when no node
answered for 60 s). With --json --watch each printing is one line.
${clientExitCodes} An unknown --node exits 1 (not_found).`;

export const taskLogsHelp = `Usage: shoal task logs TASK [--follow] [--tail N] [--since DURATION] [--addr HOST:PORT] [--json]

Prints a task's container log (TASK is its id, from 'shoal task ls' or 'shoal service ps'), from
whichever node runs it: the node asked reads it from its container runtime, or from the node
that runs the task, through that node's API. The container's stdout goes to stdout and its
stderr to stderr. Logs are kept as the service's spec says (logs.maxSize x logs.maxFiles per
container) and go when the container is removed.

Options:
${logsFlagsHelp}
${commonFlagsHelp}

With --json prints one object per line: {at, stream, text} (at: wall-clock ms; stream: stdout
or stderr), as GET /v1/tasks/TASK/logs?format=json sends them.
--follow runs until the container stops, or Ctrl-C (exit 0).
${clientExitCodes} A task that never ran (pending, or its start failed)
exits 1 (task_not_started); one whose container was removed exits 1 (not_found); one whose node
does not answer exits 3 (node_unreachable).`;

export const taskGroup: Group = {
  name: 'task',
  about: 'Tasks of the control plane: one slot of a service each, placed on a node by the leader.',
  subcommands: {
    ls: { summary: 'list tasks (of a service, a node, a state) with their node and state', help: taskLsHelp, run: taskLsCommand },
    logs: { summary: "print a task's container log, from whichever node runs it (--follow for new lines)", help: taskLogsHelp, run: taskLogsCommand },
  },
};

export const taskHelps: Record<string, string> = { ls: taskLsHelp, logs: taskLogsHelp };
export const taskGroupHelp = groupHelp(taskGroup);

export function taskCommand(argv: string[]): Promise<number> {
  return runGroup(taskGroup, argv);
}

async function taskLsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {
    ...commonFlags, service: { type: 'string' }, node: { type: 'string' }, state: { type: 'string' },
    stale: { type: 'boolean', default: false }, watch: { type: 'boolean', default: false },
  }, taskLsHelp);
  if (values.help) return help(taskLsHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'; filter with --service, --node, --state`);
  if (values.state !== undefined && !states.includes(values.state)) throw new UsageError(`--state must be one of ${states.join(', ')}, got '${values.state}'`);
  const addr = resolveAddr(values.addr);
  const render = async (): Promise<Rendered> => {
    const body = await allTasks(addr, { service: values.service, node: values.node, state: values.state }, values.stale);
    if (values.json) return jsonRendered(body, values.watch, body.items);
    return { text: body.items.length === 0 ? 'no tasks' : tableText(taskHead, taskRows(body.items)), rev: body.rev };
  };
  if (!values.watch) return printList(render);
  return watchList({ addr, collections: [tasksCollection, taskStatusCollection], command: 'task ls', json: values.json, render });
}

async function taskLogsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, logsFlags, taskLogsHelp);
  if (values.help) return help(taskLogsHelp);
  const id = oneName(positionals, 'TASK');
  return printLogs({
    addr: resolveAddr(values.addr), path: logsPaths.task(id), follow: values.follow, tailLines: tailFlag(values.tail),
    sinceMs: sinceFlag(values.since), json: values.json, command: 'task logs',
  });
}

/** Every page of GET /v1/tasks; the revision is the first page's (a watch after it misses nothing). */
async function allTasks(addr: string, filter: { service: string | undefined; node: string | undefined; state: string | undefined }, stale: boolean): Promise<{ items: TaskItem[]; rev: number }> {
  const items: TaskItem[] = [];
  let rev: number | undefined;
  let after: string | undefined;
  for (let page = 0; page < pagesMax; page++) {
    const body = await read(addr, paths.tasks, taskPageSchema, 'task ls', stale, { ...filter, after });
    items.push(...body.items);
    rev ??= body.rev;
    if (body.next === null) return { items, rev };
    after = body.next;
  }
  throw new CliFailure(`stopped after ${pagesMax} pages of tasks; narrow the listing with --service or --node`, exitCodes.failed);
}
