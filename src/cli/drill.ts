// shoal drill: failover drills against the live cluster, with a report (docs/operations.md,
// "Failover drills"): leader-kill, leader-isolate, leader-pause, follower-pause, node-reboot,
// disk-stall, ls
// (the reports kept in the store), and schedule (one of them periodically: drill-schedule.ts).

import { z } from 'zod';
import { drillNames, drillReportSchema, type DrillName, type DrillReport } from '../node/drill/drill-report.ts';
import { drillSecondsMax } from '../node/drill/drill-actions.ts';
import { exitCodes, parse, UsageError } from './args.ts';
import { request, resolveAddr } from './client.ts';
import { table } from './cluster-view.ts';
import { commonFlags, help } from './doc-common.ts';
import { commonFlagsHelp, groupHelp, runGroup, type Group, type Subcommand } from './group.ts';
import { keepReport, runDrill } from './drill-run.ts';
import { drillRestoreCommand, drillRestoreHelp } from './drill-restore.ts';
import { getView } from './cluster-view.ts';
import { durationFlag } from './control-args.ts';
import { countMax, everyMsMax, everyMsMin, parseAt, runSchedule, type Schedule, type ScheduleEvent } from './drill-schedule.ts';

const what: Record<DrillName, string> = {
  'leader-kill': 'the leader exits abruptly; its service manager starts it again',
  'leader-isolate': "the leader's peer links are cut for --duration seconds (nftables, on the leader)",
  'leader-pause': 'the leader is stopped (SIGSTOP) for --duration seconds, then resumed',
  'follower-pause': 'a follower is stopped (SIGSTOP) for --duration seconds, then resumed',
  'node-reboot': 'a follower exits and stays off for --duration seconds, then starts (an emulated reboot)',
  'disk-stall': "every write to the leader's disk waits --duration seconds",
};

export const drillExitCodes = `Exit codes: 0 the drill passed (nothing lost, no read went backwards, nothing duplicated, no
peer message refused, the cluster recovered and its services came back);
1 it did not (the report says what), or the drill was refused (it would take the cluster below
quorum: --allow-outage; or a service past its disruption budget: disruption_budget_exceeded,
--force) or the target could not carry out the fault; 2 usage error; 3 no node
answered or the cluster had no leader to start from.`;

function runHelp(name: DrillName): string {
  return `Usage: shoal drill ${name} [--duration S] [--target NODE] [--recover-timeout S] [--allow-outage] [--force] [--budget-wait S] [--addr HOST:PORT] [--json]

Runs the drill against the live cluster: ${what[name]}. Meanwhile a probe writes and reads
through every node. Prints a report (time to a new leader, longest write gap, writes acknowledged
and lost, reads that went backwards, workloads restarted or duplicated, time until every service
is back at its replica count, when the target was declared down, peer messages refused) and
keeps it in the store (shoal drill ls).${name === 'node-reboot' ? `

The emulated reboot is shoal exiting on a machine that stays up, so its peer port refuses and
the leader reads it as a restart: a --duration past control.restartGraceMs (30 s by default) is
a node lost long enough for the leader to declare it down and replace its tasks on the other
nodes: the report says when, and how long until every service was back at its count.` : ''}

A drill takes the target away for a while, and every task on it with it: before the fault it asks
each service's disruption budget (disruption.maxUnavailable) whether that many of its slots may
go down on top of those already unavailable, and waits (--budget-wait) while one says no; then it
fails with disruption_budget_exceeded, having done nothing (at once when the target serves more
slots of a service than its whole budget: no wait would help). --force goes ahead anyway, and each
service it exceeds records it.

Options:
  --duration S         how long the fault lasts, in seconds (default 5; leader-kill has none)
  --target NODE        the member (name or id) to act on instead of the one the drill picks
  --recover-timeout S  how long to wait for recovery after the fault ends (default 60)
  --allow-outage       run even if taking the target away leaves less than a quorum
  --force              run even past the services' disruption budgets (recorded on each)
  --budget-wait S      how long to wait for the disruption budgets before the fault (default 60)
${commonFlagsHelp}

${drillExitCodes}`;
}

const lsHelp = `Usage: shoal drill ls [--limit N] [--addr HOST:PORT] [--json]

Lists the drill reports kept in the store, newest first (GET /v1/drills).

Options:
  --limit N          at most N reports (default 20)
${commonFlagsHelp}

Exit codes: 0 listed; 1 the request was refused; 2 usage error; 3 no node answered.`;

const scheduleHelp = `Usage: shoal drill schedule KIND --every DURATION [--at HH:MM] [--count N] [--duration S] [--target NODE] [--recover-timeout S] [--allow-outage] [--addr HOST:PORT] [--json]

Runs the drill KIND (${drillNames.join(', ')}) periodically, for game days,
until stopped (Ctrl-C, SIGTERM) or --count drills have run. At each tick it looks at the cluster
first and skips the tick, saying why, when the cluster has no leader, a member is not healthy, or
the drill would cost the quorum or a service's disruption budget (no --force here); otherwise it
runs the drill as 'shoal drill KIND' does, prints the report and keeps it in the store (shoal
drill ls). Ticks never overlap and missed ones are not caught up. Keep it running under a
service manager (docs/operations.md, "Drills on a schedule"). A stop signal during a drill lets the drill finish and keep its report; a second one
exits at once.

Options:
  --every DURATION     the period: 30m, 24h, 168h (units ms, s, m, h; at least 1m)
  --at HH:MM           line the ticks up with this local time (--every 24h --at 03:00: every day
                       at 03:00); without it the first tick is one period after the start
  --count N            stop after N drills have run (skipped ticks do not count)
  --duration S, --target NODE, --recover-timeout S, --allow-outage
                       passed to each drill, as for 'shoal drill KIND'
${commonFlagsHelp}

With --json, prints one JSON object per line: {"event":"next","at"}, {"event":"skipped","at",
"reason"}, {"event":"ran","at","report","kept"} or {"event":"failed","at","error"}.
Exit codes: 0 every drill that ran passed (or none ran); 1 a drill failed or could not be carried
out (the schedule goes on until it ends); 2 usage error.`;

function countFlag(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < 1 || n > countMax) throw new UsageError(`--count takes a whole number from 1 to ${countMax}, got '${value}'`);
  return n;
}

function scheduleFlags(values: { every?: string; at?: string }): Schedule {
  if (values.every === undefined) throw new UsageError('--every is required: how often to run the drill (e.g. 24h)');
  const everyMs = durationFlag(values.every, '--every', '0');
  if (everyMs < everyMsMin || everyMs > everyMsMax) throw new UsageError(`--every takes a period from 1m to ${everyMsMax / 3_600_000}h, got '${values.every}'`);
  return { everyMs, ...(values.at !== undefined ? { at: parseAt(values.at) } : {}) };
}

function printScheduleEvent(ev: ScheduleEvent, name: string, json: boolean): void {
  if (json) {
    console.log(JSON.stringify(ev));
    return;
  }
  const when = new Date(ev.at).toLocaleString();
  if (ev.event === 'next') console.error(`shoal drill schedule: next ${name} at ${when}`);
  else if (ev.event === 'skipped') console.error(`shoal drill schedule: skipped the ${name} of ${when}: ${ev.reason}`);
  else if (ev.event === 'failed') console.error(`shoal drill schedule: the ${name} of ${when} could not be carried out: ${ev.error}`);
  else {
    console.log(formatReport(ev.report));
    if (!ev.kept) console.error(`shoal drill schedule: the report could not be kept in the store (${ev.notKept ?? 'unknown'}); it is printed here only`);
  }
}

/** The first SIGINT/SIGTERM stops the schedule after the drill under way; a second exits at once. */
function stopOnSignals(): { signal: AbortSignal; release(): void } {
  const ctl = new AbortController();
  const onSignal = (sig: NodeJS.Signals): void => {
    if (ctl.signal.aborted) process.exit(128 + (sig === 'SIGINT' ? 2 : 15));
    console.error('shoal drill schedule: stopping (after the drill under way, if any; again to exit at once)');
    ctl.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return { signal: ctl.signal, release: () => { process.off('SIGINT', onSignal); process.off('SIGTERM', onSignal); } };
}

async function scheduleCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {
    ...commonFlags, every: { type: 'string' }, at: { type: 'string' }, count: { type: 'string' }, duration: { type: 'string' }, target: { type: 'string' },
    'recover-timeout': { type: 'string' }, 'allow-outage': { type: 'boolean', default: false },
  }, scheduleHelp);
  if (values.help) return help(scheduleHelp);
  const [kind, ...extra] = positionals;
  if (kind === undefined) throw new UsageError(`missing the drill to schedule: one of ${drillNames.join(', ')}`);
  if (!(drillNames as readonly string[]).includes(kind)) throw new UsageError(`unknown drill '${kind}': one of ${drillNames.join(', ')}`);
  if (extra.length > 0) throw new UsageError(`unexpected argument '${extra.join(' ')}'`);
  const name = kind as DrillName;
  const schedule = scheduleFlags(values);
  const count = countFlag(values.count);
  const seconds = secondsFlag(values.duration, '--duration', 5);
  const recoverTimeoutMs = secondsFlag(values['recover-timeout'], '--recover-timeout', 60) * 1000;
  const addr = resolveAddr(values.addr);
  const stop = stopOnSignals();
  try {
    const result = await runSchedule(schedule, { ...(count !== undefined ? { count } : {}), allowOutage: values['allow-outage'] }, {
      now: () => Date.now(),
      sleep: (ms, signal) => new Promise((resolve) => {
        const t = setTimeout(done, Math.min(ms, 2 ** 31 - 1));
        function done(): void { clearTimeout(t); signal.removeEventListener('abort', done); resolve(); }
        signal.addEventListener('abort', done, { once: true });
      }),
      view: () => getView(addr),
      run: () => runDrill({
        addr, drill: name, seconds, recoverTimeoutMs, allowOutage: values['allow-outage'], ...(values.target !== undefined ? { target: values.target } : {}),
        onProgress: (line) => { if (!values.json) console.error(`shoal drill: ${line}`); },
      }),
      keep: async (report) => keepReport([{ apiAddress: addr }, ...(await getView(addr).catch(() => undefined))?.members ?? []], report),
      emit: (ev) => printScheduleEvent(ev, name, values.json),
    }, stop.signal);
    if (!values.json) console.error(`shoal drill schedule: ${result.ran} run, ${result.failed} failed, ${result.skipped} skipped`);
    return result.failed > 0 ? exitCodes.failed : exitCodes.ok;
  } finally {
    stop.release();
  }
}

function secondsFlag(value: string | undefined, flag: string, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0 || n > drillSecondsMax) throw new UsageError(`${flag} takes seconds from 0 to ${drillSecondsMax}, got '${value}'`);
  return n;
}

const ms = (v: number | null): string => (v === null ? '-' : `${(v / 1000).toFixed(2)} s`);

export function formatReport(r: DrillReport): string {
  const lines = [
    `drill ${r.drill} on ${r.target.name} (${r.target.id}), ${r.startedAt}${r.faultSeconds !== null ? `, fault ${r.faultSeconds} s` : ''}: ${r.ok ? 'PASSED' : 'FAILED'}`,
    `  leader              ${r.leaderBefore ?? '-'} -> ${r.leaderAfter ?? '-'}`,
    `  time to new leader  ${r.newLeaderMs === null ? 'no election' : ms(r.newLeaderMs)}`,
    `  longest write gap   ${ms(r.longestWriteGapMs)}`,
    `  writes              ${r.writes.acknowledged} acknowledged${r.writes.checked !== undefined ? ` (${r.writes.checked} creates, each checked on every node)` : ''}, ${r.writes.failed} failed (outcome unknown or refused), ${r.writes.lost} lost`,
    `  reads               ${r.reads.done} done, ${r.reads.failed} failed, ${r.reads.backwards} went backwards`,
    `  workloads           ${r.workloads.runningBefore} running before, ${r.workloads.runningAfter} after, ${r.workloads.restarted} restarted, ${r.workloads.duplicated} duplicated`,
    `  services back       ${r.servicesBackMs === null ? 'not within the timeout' : ms(r.servicesBackMs)}`,
    ...(r.targetDownMs !== undefined ? [`  target down         ${r.targetDownMs === null ? 'not declared down' : `declared down after ${ms(r.targetDownMs)} (its tasks replaced)`}`] : []),
    `  target recovered    ${r.recovered ? `after ${ms(r.recoveryMs)}` : 'no'}`,
    ...(r.peerMessagesRefused !== undefined ? [`  peer messages       ${r.peerMessagesRefused.wrongSender} refused as wrong_sender, ${r.peerMessagesRefused.misaddressed} as misaddressed`] : []),
  ];
  for (const p of r.problems) lines.push(`  ! ${p}`);
  return lines.join('\n');
}

async function drillCommand(name: DrillName, argv: string[]): Promise<number> {
  const text = runHelp(name);
  const { values, positionals } = parse(argv, {
    ...commonFlags, duration: { type: 'string' }, target: { type: 'string' }, 'recover-timeout': { type: 'string' },
    'allow-outage': { type: 'boolean', default: false }, force: { type: 'boolean', default: false }, 'budget-wait': { type: 'string' },
  }, text);
  if (values.help) return help(text);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const addr = resolveAddr(values.addr);
  const report = await runDrill({
    addr, drill: name, seconds: secondsFlag(values.duration, '--duration', 5),
    recoverTimeoutMs: secondsFlag(values['recover-timeout'], '--recover-timeout', 60) * 1000,
    allowOutage: values['allow-outage'], ...(values.target !== undefined ? { target: values.target } : {}),
    force: values.force, budgetWaitMs: values['budget-wait'] === undefined ? 60_000 : secondsFlag(values['budget-wait'], '--budget-wait', 60) * 1000,
    onProgress: (line) => { if (!values.json) console.error(`shoal drill: ${line}`); },
  });
  const notKept = await keepReport([{ apiAddress: addr }, ...(await getView(addr).catch(() => undefined))?.members ?? []], report);
  if (notKept !== undefined) console.error(`shoal drill: the report could not be kept in the store (${notKept}); it is printed here only`);
  console.log(values.json ? JSON.stringify(report, null, 2) : formatReport(report));
  return report.ok ? exitCodes.ok : exitCodes.failed;
}

const listSchema = z.object({ items: z.array(drillReportSchema), rev: z.number() }).loose();

async function lsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...commonFlags, limit: { type: 'string' } }, lsHelp);
  if (values.help) return help(lsHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const limit = values.limit === undefined ? 20 : Number(values.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new UsageError(`--limit takes a whole number from 1 to 1000, got '${values.limit}'`);
  const res = await request(resolveAddr(values.addr), 'GET', '/v1/drills', listSchema, { query: { limit }, retry: 'safe', timeoutMs: 10_000 });
  if (values.json) {
    console.log(JSON.stringify(res.body.items, null, 2));
    return exitCodes.ok;
  }
  if (res.body.items.length === 0) {
    console.error('no drill reports kept yet; run one with: shoal drill leader-kill');
    return exitCodes.ok;
  }
  table(['STARTED', 'DRILL', 'TARGET', 'RESULT', 'NEW LEADER', 'WRITE GAP', 'LOST', 'BACKWARDS', 'SERVICES BACK'], res.body.items.map((r) => [
    r.startedAt, r.drill, r.target.name, r.ok ? 'passed' : 'FAILED', ms(r.newLeaderMs), ms(r.longestWriteGapMs), String(r.writes.lost), String(r.reads.backwards), ms(r.servicesBackMs),
  ]));
  return exitCodes.ok;
}

const subcommands: Record<string, Subcommand> = Object.fromEntries([
  ...drillNames.map((name) => [name, { summary: what[name], help: runHelp(name), run: (argv: string[]) => drillCommand(name, argv) }] as const),
  ['ls', { summary: 'the drill reports kept in the store, newest first', help: lsHelp, run: lsCommand }] as const,
  ['schedule', { summary: 'run one drill periodically (game days), keeping each report', help: scheduleHelp, run: scheduleCommand }] as const,
  // Backups (issue 43): a restore drill, on this machine, of a backup.
  ['restore', { summary: 'restore a backup into a scratch node here and check its services and secrets came back', help: drillRestoreHelp, run: drillRestoreCommand }] as const,
]);

export const drillGroup: Group = {
  name: 'drill',
  about: `Failover drills against the live cluster: each injects one fault through the target node's own
API (no SSH), runs a probe of writes and reads through every node meanwhile, and prints and keeps
a report. docs/operations.md, "Failover drills".`,
  subcommands,
};

export const drillGroupHelp = groupHelp(drillGroup);

export function drillGroupCommand(argv: string[]): Promise<number> {
  return runGroup(drillGroup, argv);
}
