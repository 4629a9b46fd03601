// shoal node: the nodes of the control plane, named by name or id. ls and inspect read; drain,
// pause and activate set a node's availability; label sets and removes its labels.

import { nodesCollection, taskStatusCollection, tasksCollection } from '../resources/collections.ts';
import { formatCpu, formatMemory } from '../resources/spec/quantity.ts';
import { labelKeyPattern, labelValuePattern } from '../resources/spec/constraint.ts';
import { exitCodes, parse, UsageError } from './args.ts';
import { CliFailure, exitCodeOf, isClientFailure, request, resolveAddr, retryNotice } from './client.ts';
import { durationFlag, oneName } from './control-args.ts';
import { nodeDetailSchema, nodeListSchema, paths, read, serviceListSchema, writtenNodeSchema, type DrainBudget, type ServiceView, type TaskItem } from './control-api.ts';
import { jsonRendered, labelsText, nodeHead, nodeRows, serviceProgress, tableText, taskHead, taskRows } from './control-format.ts';
import { commonFlags, help } from './doc-common.ts';
import { clientExitCodes, commonFlagsHelp, commonFlagsText, groupHelp, runGroup, type Group } from './group.ts';
import { printList, watchList, type Rendered } from './list-watch.ts';
import { meshOf, meshText, ageText } from './node-mesh.ts';
import { nodeRmCommand, nodeRmHelp, nodeRotateKeyCommand, nodeRotateKeyHelp } from './node-actions.ts';

export const nodeLsHelp = `Usage: shoal node ls [--stale] [--watch] [--addr HOST:PORT] [--json]

Lists the nodes, sorted by name: id, state (ready, suspect, down: the leader's view from last
contact), availability (active, pause, drain: the operator's), container runtime, tasks desired
running on it, CPU and memory reserved of its capacity, labels, and shoal version.

When nodes take part in the WireGuard mesh, a second table follows: each node's mesh address
and endpoint, and per peer the age of the latest handshake and the bytes received and sent, as
the node last reported them (every mesh.reportIntervalMs). A peer with no handshake for more than
5 minutes is marked (!) and named in a line below the table (docs/network.md).

Options:
  --stale            read the node's local copy (no leader needed; may be behind)
  --watch            print the list again on every change, until Ctrl-C
${commonFlagsHelp}

With --json prints {items: [{id, name, rev, record, tasks, running, reserved}], rev} (GET /v1/nodes).
--watch prints the list again whenever it changes, until Ctrl-C (exit 0; exit 3 when no node
answered for 60 s). With --json --watch each printing is one line.
${clientExitCodes}`;

export const nodeInspectHelp = `Usage: shoal node inspect NODE [--stale] [--addr HOST:PORT] [--json]

Shows a node (by name or id): addresses, state, epoch, availability, runtime, capacity and what is
reserved of it, labels, and the tasks assigned to it.

Options:
  --stale            read the node's local copy (no leader needed; may be behind)
${commonFlagsHelp}

With --json prints {node, tasks, rev} (GET /v1/nodes/NODE).
${clientExitCodes} An unknown node exits 1 (not_found).`;

export const nodeDrainHelp = `Usage: shoal node drain NODE [--force] [--deadline DURATION] [--detach] [--addr HOST:PORT] [--json]

Drains a node: it takes no new tasks, and the leader moves its tasks to other nodes (a service
whose update order is start-first starts the new task before the old one stops). A stop-first
move takes a slot of its service down, so the leader makes it only as the service's disruption
budget allows (disruption.maxUnavailable, by default its update's parallelism), counting the
slots already unavailable for any reason: a node down, an update under way, a task starting.
It says, per service, what the budget allows now and what waits. A global service's task on the
node just stops (the node leaves its slots) and never waits. Waits until no task runs on it any
more, showing progress (and what waits for which budget), or until the deadline; the node stays
draining either way, and the leader goes on moving as the budgets allow. 'shoal node activate
NODE' undoes it (tasks are not moved back: see 'shoal service rebalance').

Options:
  --force                move every task at once, past the disruption budgets (recorded on each
                         service whose budget it exceeds, and as an event)
  --deadline DURATION    how long to wait for its tasks to move (default 5m)
  --detach               set it draining and return
${commonFlagsText(23)}

With --json prints {rev, node, budgets} and, after waiting, the services the moved tasks belong to.
Exit codes: 0 drained (or set draining, with --detach); 1 refused (not_found), or tasks still run
on it at the deadline (not_drained; disruption_budget when they wait for a disruption budget);
2 usage error; 3 no node answered, or the cluster cannot serve right now.`;

const availabilityHelp = (verb: string, what: string): string => `Usage: shoal node ${verb} NODE [--addr HOST:PORT] [--json]

${what}

Options:
${commonFlagsText()}

With --json prints {rev, node} (rev is null when it already was).
${clientExitCodes} An unknown node exits 1 (not_found).`;

export const nodePauseHelp = availabilityHelp('pause', 'Pauses a node: it keeps the tasks it runs and takes no new ones. It stops no task, so it never\nasks the services\' disruption budgets and needs no --force (a drain does).');
export const nodeActivateHelp = availabilityHelp('activate', 'Makes a node active again after pause or drain: it takes new tasks. Tasks that moved away stay\nwhere they are (see \'shoal service rebalance\').');

const labelKeyRule = "A label key is 1 to 253 of letters, digits, '.', '_', '-' and '/', starting and ending with a letter or digit (disk, example.com/zone)";
const labelValueRule = "a value is up to 253 of letters, digits and . _ : / @ + - (no spaces, commas, quotes or parentheses, so constraints name it unquoted)";

/** Every bad key and value of a `node label` command line at once, each with the rule it breaks. */
export function labelProblems(set: Record<string, string>, remove: readonly string[]): string[] {
  const problems: string[] = [];
  for (const [k, v] of Object.entries(set)) {
    if (!labelKeyPattern.test(k)) problems.push(`label key '${k}' (in '${k}=${v}'): ${labelKeyRule.charAt(0).toLowerCase()}${labelKeyRule.slice(1)}`);
    if (!labelValuePattern.test(v)) problems.push(`label value '${v}' (of ${k}): ${labelValueRule}`);
  }
  for (const k of remove) if (!labelKeyPattern.test(k)) problems.push(`--remove '${k}': ${labelKeyRule.charAt(0).toLowerCase()}${labelKeyRule.slice(1)}`);
  return problems;
}

export const nodeLabelHelp = `Usage: shoal node label NODE [KEY=VALUE]... [--remove KEY]... [--addr HOST:PORT] [--json]

Sets and removes a node's labels (constraints such as 'node.labels.disk == ssd' and
placement.spreadOver match them). Other labels are kept. ${labelKeyRule}; ${labelValueRule}.

Options:
  --remove KEY       remove a label (repeat for several; a label that is not there is ignored)
${commonFlagsHelp}

With --json prints {rev, node}.
${clientExitCodes} An unknown node exits 1 (not_found); a bad key or value exits 2, before anything is sent.`;

export const nodeGroup: Group = {
  name: 'node',
  about: `Nodes of the control plane (every member that runs shoal registers itself), by name or id:
their state, what runs on them, and the operator's settings: availability and labels.`,
  subcommands: {
    ls: { summary: 'list nodes: state, availability, runtime, tasks, resources, labels', help: nodeLsHelp, run: nodeLsCommand },
    inspect: { summary: 'show a node and the tasks assigned to it', help: nodeInspectHelp, run: nodeInspectCommand },
    drain: { summary: 'move its tasks off and take no new ones; waits until they moved', help: nodeDrainHelp, run: nodeDrainCommand },
    pause: { summary: 'keep its tasks, take no new ones', help: nodePauseHelp, run: (argv) => availabilityCommand(argv, 'pause') },
    activate: { summary: 'take new tasks again (after pause or drain)', help: nodeActivateHelp, run: (argv) => availabilityCommand(argv, 'activate') },
    label: { summary: 'set and remove labels', help: nodeLabelHelp, run: nodeLabelCommand },
    'rotate-key': { summary: 'replace its WireGuard key pair (the mesh)', help: nodeRotateKeyHelp, run: nodeRotateKeyCommand },
    rm: { summary: 'remove the record of a node removed from the cluster', help: nodeRmHelp, run: nodeRmCommand },
  },
};

export const nodeHelps: Record<string, string> = Object.fromEntries(Object.entries(nodeGroup.subcommands).map(([k, s]) => [k, s.help]));
export const nodeGroupHelp = groupHelp(nodeGroup);

export function nodeCommand(argv: string[]): Promise<number> {
  return runGroup(nodeGroup, argv);
}

async function nodeLsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...commonFlags, stale: { type: 'boolean', default: false }, watch: { type: 'boolean', default: false } }, nodeLsHelp);
  if (values.help) return help(nodeLsHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const addr = resolveAddr(values.addr);
  const render = async (): Promise<Rendered> => {
    const body = await read(addr, paths.nodes, nodeListSchema, 'node ls', values.stale);
    if (values.json) return jsonRendered(body, values.watch, body.items);
    const text = body.items.length === 0 ? 'no nodes registered yet: nodes register once the cluster runs the control plane' : tableText(nodeHead, nodeRows(body.items)) + meshText(body.items, Date.now());
    return { text, rev: body.rev };
  };
  if (!values.watch) return printList(render);
  return watchList({ addr, collections: [nodesCollection, tasksCollection, taskStatusCollection], command: 'node ls', json: values.json, render });
}

async function nodeInspectCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...commonFlags, stale: { type: 'boolean', default: false } }, nodeInspectHelp);
  if (values.help) return help(nodeInspectHelp);
  const ref = oneName(positionals, 'NODE');
  const body = await read(resolveAddr(values.addr), paths.node(ref), nodeDetailSchema, 'node inspect', values.stale);
  if (values.json) {
    console.log(JSON.stringify(body, null, 2));
    return exitCodes.ok;
  }
  const n = body.node;
  const r = n.record;
  console.log(`node          ${n.name} (${n.id})   api ${r.addresses.api}   shoal ${r.softwareVersion}`);
  console.log(`state         ${r.state}   epoch ${r.epoch}   availability ${r.availability}`);
  console.log(`runtime       ${r.runtime.status}${r.runtime.error !== null ? `: ${r.runtime.error}` : ''}`);
  console.log(`reserved      ${formatCpu(n.reserved.cpuMillis)} of ${formatCpu(r.capacity.cpuMillis)}, ${formatMemory(n.reserved.memoryBytes)} of ${formatMemory(r.capacity.memoryBytes)}`);
  console.log(`labels        ${labelsText(r.labels)}`);
  const mesh = meshOf(n);
  if (mesh !== null) {
    console.log(`mesh          ${mesh.address ?? 'no address yet'}   endpoint ${mesh.endpoint}   ${mesh.peers.length} peers${mesh.reportedAt !== null ? `, reported ${ageText(Date.now() - mesh.reportedAt)}` : ''}`);
  }
  console.log(`tasks         ${n.tasks} desired running, ${n.running} running`);
  if (body.tasks.length > 0) console.log(tableText(taskHead, taskRows(body.tasks)));
  return exitCodes.ok;
}

async function setAvailability(addr: string, ref: string, availability: 'active' | 'pause' | 'drain', command: string, force = false): Promise<{ rev: number | null; node: { name: string } | null; budgets?: DrainBudget[] | undefined }> {
  const { body } = await request(addr, 'POST', `${paths.node(ref)}/availability`, writtenNodeSchema, { body: { availability, ...(force ? { force } : {}) }, retry: 'safe', onRetry: retryNotice(command) });
  return body;
}

/** `web: 2 tasks to move, 1 may go now (maxUnavailable 1, 0 unavailable)`, or why they wait, or that they were forced. */
export function drainBudgetLine(b: DrainBudget): string {
  const head = `${b.service}: ${b.moves} task${b.moves === 1 ? '' : 's'} to move`;
  if (b.forced) return `${head}, past the disruption budget (${b.limit}): forced`;
  if (b.waiting !== null) return `${head}; ${b.waiting}`;
  return `${head} within its disruption budget (${b.limit})`;
}

async function availabilityCommand(argv: string[], verb: 'pause' | 'activate'): Promise<number> {
  const text = verb === 'pause' ? nodePauseHelp : nodeActivateHelp;
  const { values, positionals } = parse(argv, commonFlags, text);
  if (values.help) return help(text);
  const ref = oneName(positionals, 'NODE');
  const body = await setAvailability(resolveAddr(values.addr), ref, verb === 'pause' ? 'pause' : 'active', `node ${verb}`);
  if (values.json) console.log(JSON.stringify(body, null, 2));
  else console.log(`${body.node?.name ?? ref}: ${verb === 'pause' ? 'paused (keeps its tasks, takes no new ones)' : 'active (takes new tasks)'}${body.rev === null ? ' (it already was)' : ''}`);
  return exitCodes.ok;
}

const terminal = new Set(['failed', 'shutdown', 'orphaned']);

/** Tasks still on the node: desired running, or not yet stopped. */
function left(tasks: readonly TaskItem[]): TaskItem[] {
  return tasks.filter((t) => t.desired === 'running' || !terminal.has(t.observed));
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const drainPollMs = 500;

async function nodeDrainCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {
    ...commonFlags, deadline: { type: 'string' }, detach: { type: 'boolean', default: false }, force: { type: 'boolean', default: false },
  }, nodeDrainHelp);
  if (values.help) return help(nodeDrainHelp);
  const ref = oneName(positionals, 'NODE');
  const deadlineMs = durationFlag(values.deadline, '--deadline', '5m');
  const addr = resolveAddr(values.addr);
  const set = await setAvailability(addr, ref, 'drain', 'node drain', values.force);
  const name = set.node?.name ?? ref;
  if (!values.json) {
    console.log(`${name}: draining (takes no new tasks; its tasks move to other nodes)`);
    for (const b of set.budgets ?? []) console.log(`  ${drainBudgetLine(b)}`);
  }
  if (values.detach) {
    if (values.json) console.log(JSON.stringify(set, null, 2));
    return exitCodes.ok;
  }
  const deadline = Date.now() + deadlineMs;
  const services = await waitDrained(addr, ref, name, deadline, values.json);
  const moved = await waitPlaced(addr, services, deadline, name);
  if (values.json) console.log(JSON.stringify({ ...set, services: moved }, null, 2));
  else {
    console.log(`${name}: drained, no task runs there any more`);
    for (const s of moved) console.log(`  ${serviceProgress(s)}`);
  }
  return exitCodes.ok;
}

/** Every task running, or pending because no node fits (the scheduler's reason is known). */
function settled(v: ServiceView): boolean {
  const s = v.status;
  const waiting = s.pending > 0 && s.pendingReasons.length > 0;
  return !s.updating && s.stopping === 0 && s.tasks === s.desired && s.running + (waiting ? s.pending : 0) === s.tasks;
}

/** Polls until the replacements of the drained node's tasks run elsewhere (or cannot be placed). */
async function waitPlaced(addr: string, names: ReadonlySet<string>, deadline: number, node: string): Promise<ServiceView[]> {
  for (;;) {
    const list = await read(addr, paths.services, serviceListSchema, 'node drain');
    const moved = list.items.filter((s) => names.has(s.name));
    if (moved.every(settled)) return moved;
    if (Date.now() > deadline) {
      throw new CliFailure(`${node} is drained, but its tasks' replacements do not all run yet at the deadline:\n  ${moved.map(serviceProgress).join('\n  ')}`, exitCodes.failed, 'not_drained');
    }
    await sleep(drainPollMs);
  }
}

/** What the disruption budgets of these services hold back now (the services' status). */
async function budgetWaits(addr: string, names: ReadonlySet<string>): Promise<string[]> {
  if (names.size === 0) return [];
  const list = await read(addr, paths.services, serviceListSchema, 'node drain');
  return list.items.filter((s) => names.has(s.name)).flatMap((s) => (s.status.disruption?.waiting ? [s.status.disruption.waiting] : []));
}

/** Polls until no task is left on the node; returns the services its tasks belonged to. */
async function waitDrained(addr: string, ref: string, name: string, deadline: number, json: boolean): Promise<Set<string>> {
  const services = new Set<string>();
  let said = '';
  for (;;) {
    try {
      const body = await read(addr, paths.node(ref), nodeDetailSchema, 'node drain');
      for (const t of body.tasks) services.add(t.service);
      const rest = left(body.tasks);
      if (rest.length === 0) return services;
      const waits = await budgetWaits(addr, new Set(rest.map((t) => t.service)));
      const line = `${name}: ${rest.length} task${rest.length === 1 ? '' : 's'} left: ${rest.slice(0, 5).map((t) => `${t.service}.${String(t.slot)} ${t.observed}`).join(', ')}${rest.length > 5 ? ', ...' : ''}${waits.map((w) => `\n    ${w}`).join('')}`;
      if (!json && line !== said) console.error(`  ${line}`);
      said = line;
      if (Date.now() > deadline) {
        if (waits.length > 0) {
          throw new CliFailure(`${line}\nat the deadline; it stays draining, and the leader moves them as the budgets allow (see: shoal service inspect ${[...new Set(rest.map((t) => t.service))][0] ?? 'NAME'}). To go past the budgets: shoal node drain ${name} --force`, exitCodes.failed, 'disruption_budget');
        }
        throw new CliFailure(`${line} at the deadline; it stays draining, and the leader keeps moving them (see: shoal node inspect ${name})`, exitCodes.failed, 'not_drained');
      }
    } catch (err) {
      if (!isClientFailure(err) || err instanceof CliFailure || exitCodeOf(err) !== exitCodes.unavailable || Date.now() > deadline) throw err;
    }
    await sleep(drainPollMs);
  }
}

async function nodeLabelCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...commonFlags, remove: { type: 'string', multiple: true } }, nodeLabelHelp);
  if (values.help) return help(nodeLabelHelp);
  const [ref, ...pairs] = positionals;
  if (ref === undefined) throw new UsageError('expected NODE [KEY=VALUE]... [--remove KEY]...');
  const set: Record<string, string> = {};
  for (const kv of pairs) {
    const eq = kv.indexOf('=');
    if (eq <= 0) throw new UsageError(`expected KEY=VALUE, got '${kv}' (remove a label with --remove KEY)`);
    set[kv.slice(0, eq)] = kv.slice(eq + 1);
  }
  const remove = values.remove ?? [];
  if (pairs.length === 0 && remove.length === 0) throw new UsageError('nothing to change: give KEY=VALUE pairs and/or --remove KEY');
  const problems = labelProblems(set, remove);
  if (problems.length > 0) throw new UsageError(problems.length === 1 ? problems[0] ?? '' : `${problems.length} problems:\n${problems.map((p) => `  ${p}`).join('\n')}`);
  const { body } = await request(resolveAddr(values.addr), 'POST', `${paths.node(ref)}/labels`, writtenNodeSchema, { body: { set, remove }, retry: 'safe', onRetry: retryNotice('node label') });
  if (values.json) console.log(JSON.stringify(body, null, 2));
  else console.log(`${body.node?.name ?? ref}: labels ${body.node === null ? '?' : labelsText(body.node.record.labels)}${body.rev === null ? ' (unchanged)' : ''}`);
  return exitCodes.ok;
}
