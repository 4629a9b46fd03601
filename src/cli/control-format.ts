// How the control plane's resources are shown to people: table rows for services, tasks and
// nodes (names first, sorted by name; tasks by slot), and one-line summaries.

import { formatCpu, formatMemory } from '../resources/spec/quantity.ts';
import type { NodeView, ServiceView, TaskItem } from './control-api.ts';

/** Longest message shown in a table cell; --json has the whole text. */
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

export function cell(text: string | null | undefined): string {
  if (text === null || text === undefined || text === '') return '-';
  const one = text.replace(/\s+/g, ' ');
  return one.length > cellCharsMax ? `${one.slice(0, cellCharsMax - 1)}…` : one;
}

export function compareSlots(a: number | string, b: number | string): number {
  return String(a).localeCompare(String(b), undefined, { numeric: true });
}

/** `3/3`, or `2/3 (1 pending)`. */
export function replicasText(v: ServiceView): string {
  const s = v.status;
  return `${s.running}/${s.desired}${s.pending > 0 ? ` (${s.pending} pending)` : ''}`;
}

export function updateText(v: ServiceView): string {
  const u = v.record.updateStatus;
  return u.state === 'none' ? '-' : u.state;
}

export const serviceHead = ['NAME', 'MODE', 'REPLICAS', 'IMAGE', 'VERSION', 'UPDATE'];

export function serviceRows(items: readonly ServiceView[]): string[][] {
  return [...items].sort((a, b) => a.name.localeCompare(b.name)).map((v) => [
    v.name, v.record.spec.mode, replicasText(v), v.record.spec.image, String(v.record.specVersion), updateText(v),
  ]);
}

/** What to say about a task: why it is pending, else its last message. */
export function taskNote(t: TaskItem): string {
  if (t.observed === 'pending' && t.record.pendingReason !== null) return `pending: ${t.record.pendingReason}`;
  if (t.record.exitCode !== null && t.record.message === null) return `exit ${t.record.exitCode}`;
  return t.record.message ?? '';
}

export function observedText(t: TaskItem): string {
  return t.health !== null && t.observed === 'running' && t.health !== 'healthy' ? `running (${t.health})` : t.observed;
}

/** Slot order, the current task of a slot first, then its history. */
export function sortTasks(tasks: readonly TaskItem[]): TaskItem[] {
  return [...tasks].sort((a, b) => a.service.localeCompare(b.service) || compareSlots(a.slot, b.slot)
    || (a.desired === b.desired ? 0 : a.desired === 'running' ? -1 : 1) || b.record.createdAt - a.record.createdAt || a.id.localeCompare(b.id));
}

export const psHead = ['SLOT', 'TASK', 'NODE', 'DESIRED', 'OBSERVED', 'VERSION', 'MESSAGE'];

export function psRows(tasks: readonly TaskItem[]): string[][] {
  return sortTasks(tasks).map((t) => [
    String(t.slot), t.id, t.nodeName ?? t.nodeId ?? '-', t.desired, observedText(t), String(t.record.specVersion), cell(taskNote(t)),
  ]);
}

export const taskHead = ['SERVICE', 'SLOT', 'TASK', 'NODE', 'DESIRED', 'OBSERVED', 'MESSAGE'];

export function taskRows(tasks: readonly TaskItem[]): string[][] {
  return sortTasks(tasks).map((t) => [t.service, String(t.slot), t.id, t.nodeName ?? t.nodeId ?? '-', t.desired, observedText(t), cell(taskNote(t))]);
}

export function labelsText(labels: Record<string, string>): string {
  const pairs = Object.entries(labels).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `${k}=${v}`);
  return pairs.length === 0 ? '-' : pairs.join(',');
}

export const nodeHead = ['NAME', 'ID', 'STATE', 'AVAILABILITY', 'RUNTIME', 'TASKS', 'CPU', 'MEMORY', 'LABELS', 'VERSION'];

export function nodeRows(items: readonly NodeView[]): string[][] {
  return [...items].sort((a, b) => a.name.localeCompare(b.name) || a.id.localeCompare(b.id)).map((n) => [
    n.name, n.id, n.record.state, n.record.availability, n.record.runtime.status, String(n.tasks),
    `${formatCpu(n.reserved.cpuMillis)}/${formatCpu(n.record.capacity.cpuMillis)}`,
    `${formatMemory(n.reserved.memoryBytes)}/${formatMemory(n.record.capacity.memoryBytes)}`,
    cell(labelsText(n.record.labels)), n.record.softwareVersion,
  ]);
}

/** `web: 2/3 running, updating; 1 pending: no node has ...` */
export function serviceProgress(v: ServiceView): string {
  const s = v.status;
  const parts = [`${s.running}/${s.desired} running`];
  if (s.updating) parts.push(v.record.updateStatus.state);
  if (s.stopping > 0) parts.push(`${s.stopping} stopping`);
  const pending = s.pending > 0 ? `; ${s.pending} pending${s.pendingReasons.length > 0 ? `: ${s.pendingReasons.join('; ')}` : ''}` : '';
  return `${v.name}: ${parts.join(', ')}${pending}`;
}
