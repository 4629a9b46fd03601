// How the control plane's resources are shown to people: table rows for services, tasks and
// nodes (names first, sorted by name; tasks by slot), and one-line summaries.

import { formatCpu, formatMemory } from '../resources/spec/quantity.ts';
import type { NodeView, ServiceView, TaskItem } from './control-api.ts';
import { compareSlotKeys, currentFirst } from '../api/task-order.ts';
import { stackOfSource } from '../resources/stacks.ts';
import { compareText } from '../base/order.ts';

/** Longest message shown in a table cell when the output is not a terminal; --no-trunc and --json show the whole text. */
const cellCharsMax = 80;

/** A table as text: columns padded to their widest cell, two spaces apart. */
export function tableText(head: string[], rows: string[][]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]): string => cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ').trimEnd();
  return [line(head), ...rows.map(line)].join('\n');
}

/** The JSON of a list: pretty once, one line per printing under --watch; `key` leaves the revision out. */
export function jsonRendered(body: { rev: number }, watch: boolean, content: unknown): { text: string; rev: number; key: string } {
  return { text: watch ? JSON.stringify(body) : JSON.stringify(body, null, 2), rev: body.rev, key: JSON.stringify(content) };
}

/** A table cell: one line, `-` when empty, at most `max` characters (null: whole). */
export function cell(text: string | null | undefined, max: number | null = cellCharsMax): string {
  if (text === null || text === undefined || text === '') return '-';
  const one = text.replace(/\s+/g, ' ').trim();
  return max === null ? one : shorten(one, max);
}

/** `text` in at most `max` characters, ending with an ellipsis when cut, at the end of a word when one ends near the cut. */
export function shorten(text: string, max: number): string {
  if (text.length <= max) return text;
  if (max <= 1) return '…'.slice(0, Math.max(0, max));
  const cut = text.slice(0, max - 1);
  const space = cut.lastIndexOf(' ');
  return `${(space >= Math.floor(max * 0.6) ? cut.slice(0, space) : cut).trimEnd()}…`;
}

/** The narrowest the last column of a fitted table gets, however narrow the terminal. */
const lastColumnCharsMin = 20;

/**
 * The table with its last column (a message) fitted to `columns` characters, each cut with an
 * ellipsis; `columns` null: the column is capped at 80 characters (output that is not a
 * terminal); `noTrunc`: nothing is cut (`--no-trunc`).
 */
export function fittedTableText(head: string[], rows: string[][], columns: number | null, noTrunc = false): string {
  const last = head.length - 1;
  let max: number | null = noTrunc ? null : cellCharsMax;
  if (!noTrunc && columns !== null) {
    const others = head.slice(0, last).map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
    max = Math.max(lastColumnCharsMin, columns - others.reduce((a, w) => a + w + 2, 0));
  }
  return tableText(head, rows.map((r) => r.map((c, i) => (i === last ? cell(c, max) : c))));
}

/** The terminal's width when standard output is one (else $COLUMNS, else null). */
export function terminalColumns(): number | null {
  if (process.stdout.isTTY && process.stdout.columns > 0) return process.stdout.columns;
  const env = Number(process.env.COLUMNS);
  return Number.isInteger(env) && env > 0 ? env : null;
}

/** `3/3`; `2/3 (1 unreachable, 1 pending)`; during an update `1/3 (3 serving)`, the old tasks counted in serving. */
export function replicasText(v: ServiceView): string {
  const s = v.status;
  const extra: string[] = [];
  if (s.serving !== undefined && s.serving !== s.running) extra.push(`${s.serving} serving`);
  if ((s.unreachable ?? 0) > 0) extra.push(`${s.unreachable} unreachable`);
  if (s.pending > 0) extra.push(`${s.pending} pending`);
  return `${s.running}/${s.desired}${extra.length > 0 ? ` (${extra.join(', ')})` : ''}`;
}

export function updateText(v: ServiceView): string {
  const u = v.record.updateStatus;
  return u.state === 'none' ? '-' : u.state;
}

export const serviceHead = ['NAME', 'MODE', 'REPLICAS', 'IMAGE', 'VERSION', 'UPDATE', 'STACK'];

export function serviceRows(items: readonly ServiceView[]): string[][] {
  return [...items].sort((a, b) => compareText(a.name, b.name)).map((v) => [
    // The stack from the record's source, so a server of an earlier release (no `stack` in its view) lists it too.
    v.name, v.record.spec.mode, replicasText(v), v.record.spec.image, String(v.record.specVersion), updateText(v), stackOfSource(typeof v.record.source === 'string' ? v.record.source : null) ?? '-',
  ]);
}

/** What to say about a task: why it is pending, else its last message (the agent's, until the leader copied it). */
export function taskNote(t: TaskItem): string {
  if (t.observed === 'pending' && t.record.pendingReason !== null) return `pending: ${t.record.pendingReason}`;
  const message = t.record.message ?? t.report?.message ?? null;
  if (t.record.exitCode !== null && message === null) return `exit ${t.record.exitCode}`;
  return message ?? '';
}

export function observedText(t: TaskItem): string {
  return t.health !== null && t.observed === 'running' && t.health !== 'healthy' ? `running (${t.health})` : t.observed;
}

/** Slot order, the current task of a slot first, then its history. */
export function sortTasks(tasks: readonly TaskItem[]): TaskItem[] {
  return [...tasks].sort((a, b) => compareText(a.service, b.service) || compareSlotKeys(a.slot, b.slot)
    || (a.desired === b.desired ? 0 : a.desired === 'running' ? -1 : 1) || b.record.createdAt - a.record.createdAt || compareText(a.id, b.id));
}

export const psHead = ['SLOT', 'TASK', 'NODE', 'DESIRED', 'OBSERVED', 'VERSION', 'MESSAGE'];

/**
 * The rows of `service ps`, each message whole (on one line): fittedTableText cuts them to the
 * terminal. Current first (src/api/task-order.ts): each slot's task desired running, slots in
 * order; with `all`, each slot's earlier tasks right under it.
 */
export function psRows(tasks: readonly TaskItem[], all = true): string[][] {
  return currentFirst(tasks, all).map((t) => [
    String(t.slot), t.id, t.nodeName ?? t.nodeId ?? '-', t.desired, observedText(t), String(t.record.specVersion), cell(taskNote(t), null),
  ]);
}

export const taskHead = ['SERVICE', 'SLOT', 'TASK', 'NODE', 'DESIRED', 'OBSERVED', 'MESSAGE'];

export function taskRows(tasks: readonly TaskItem[]): string[][] {
  return sortTasks(tasks).map((t) => [t.service, String(t.slot), t.id, t.nodeName ?? t.nodeId ?? '-', t.desired, observedText(t), cell(taskNote(t))]);
}

export function labelsText(labels: Record<string, string>): string {
  const pairs = Object.entries(labels).sort(([a], [b]) => compareText(a, b)).map(([k, v]) => `${k}=${v}`);
  return pairs.length === 0 ? '-' : pairs.join(',');
}

export const nodeHead = ['NAME', 'ID', 'STATE', 'AVAILABILITY', 'RUNTIME', 'TASKS', 'CPU', 'MEMORY', 'LABELS', 'VERSION'];

export function nodeRows(items: readonly NodeView[]): string[][] {
  return [...items].sort((a, b) => compareText(a.name, b.name) || compareText(a.id, b.id)).map((n) => [
    n.name, n.id, n.record.state, n.record.availability, n.record.runtime.status, String(n.tasks),
    `${formatCpu(n.reserved.cpuMillis)}/${formatCpu(n.record.capacity.cpuMillis)}`,
    `${formatMemory(n.reserved.memoryBytes)}/${formatMemory(n.record.capacity.memoryBytes)}`,
    cell(labelsText(n.record.labels)), n.record.softwareVersion,
  ]);
}

/**
 * `web: 2/3 running, 1 on an unreachable node; 1 pending: no node has ...`. While old tasks still
 * serve (an update), the tasks of the new spec and the serving ones are counted apart:
 * `web: 2/5 new (spec version 3), 5 serving, updating`.
 */
export function serviceProgress(v: ServiceView): string {
  const s = v.status;
  const split = s.serving !== undefined && (s.updating || s.serving !== s.running);
  const parts = split ? [`${s.running}/${s.desired} new (spec version ${v.record.specVersion})`, `${s.serving} serving`] : [`${s.running}/${s.desired} running`];
  const unreachable = s.unreachable ?? 0;
  if (unreachable > 0) parts.push(`${unreachable} on ${unreachable === 1 ? 'an unreachable node' : 'unreachable nodes'}`);
  const u = v.record.updateStatus.state;
  if (s.updating) parts.push(u === 'rolling-back' ? 'rolling back' : 'updating');
  else if (u === 'paused' || u === 'rollback-paused') parts.push(u === 'paused' ? 'update paused' : 'rollback paused');
  if (s.stopping > 0) parts.push(`${s.stopping} stopping`);
  const pending = s.pending > 0 ? `; ${s.pending} pending${s.pendingReasons.length > 0 ? `: ${s.pendingReasons.join('; ')}` : ''}` : '';
  const waiting = s.disruption?.waiting ?? null;
  return `${v.name}: ${parts.join(', ')}${pending}${waiting === null ? '' : `; ${waiting}`}`;
}

/** `budget   maxUnavailable 1: 1 slot unavailable (slot 3: node n2 down); 0 more may go down now`, then each forced disruption. */
export function budgetLines(v: ServiceView): string[] {
  const d = v.status.disruption;
  if (d === undefined) return [];
  const n = d.unavailable.length;
  const named = d.unavailable.slice(0, 3).map((u) => `slot ${u.slot}: ${u.why}`).join('; ');
  const lines = [`budget   ${d.limit}: ${n} slot${n === 1 ? '' : 's'} unavailable${n === 0 ? '' : ` (${named}${n > 3 ? '; ...' : ''})`}; ${d.allowed} more may go down now`];
  if (d.waiting !== null) lines.push(`         ${d.waiting}`);
  for (const f of d.forced) lines.push(`forced   ${f.cause}${f.nodeId !== null ? ` of ${f.nodeId}` : ''}${f.specVersion !== null ? ` to spec version ${f.specVersion}` : ''}: ${f.message}`);
  return lines;
}
