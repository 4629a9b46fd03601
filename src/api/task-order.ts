// Current first: a service's tasks as an operator reads them, one row per slot: the task that is
// meant to run there now (running, pending, failing: desired running), then what that slot ran
// before (history, newest first), folded under it. Slots with a current task come first, in slot
// order; slots that only hold history (scaled down, a removed node's global slot) come after.
// The console's Services view and `shoal service ps` (without --all) both show this order.
// Pure: no clock, no store.

import { compareNatural, compareText } from '../base/order.ts';

/** What ordering needs of a task: the API's TaskItem, and the CLI's parse of it, both fit. */
export interface OrderedTask {
  id: string;
  service: string;
  slot: number | string;
  desired: string;
  observed: string;
  record: { createdAt: number; message: string | null; pendingReason: string | null; exitCode: number | null };
  report?: { message: string | null } | null | undefined;
}

export interface SlotRow<T extends OrderedTask = OrderedTask> {
  service: string;
  slot: number | string;
  /**
   * The tasks desired running in the slot, newest first (during a start-first update, the new and
   * the old one for a moment); when none is, the slot's newest task.
   */
  current: T[];
  /** The slot's other tasks, newest first: what `N earlier` unfolds. */
  earlier: T[];
  /** Some task of the slot is desired running. */
  live: boolean;
}

/** Slot keys compare as people count: 2 before 10; a global service's node ids as text. */
export function compareSlotKeys(a: number | string, b: number | string): number {
  return compareNatural(String(a), String(b));
}

function newestFirst(a: OrderedTask, b: OrderedTask): number {
  return b.record.createdAt - a.record.createdAt || compareText(a.id, b.id);
}

/** The slots of the given tasks (of one or more services), current ones first. */
export function slotRows<T extends OrderedTask>(tasks: readonly T[]): Array<SlotRow<T>> {
  const bySlot = new Map<string, T[]>();
  for (const t of tasks) {
    const key = `${t.service}\u0000${String(t.slot)}`;
    const list = bySlot.get(key);
    if (list === undefined) bySlot.set(key, [t]);
    else list.push(t);
  }
  const rows: Array<SlotRow<T>> = [];
  for (const list of bySlot.values()) {
    const sorted = [...list].sort(newestFirst);
    const running = sorted.filter((t) => t.desired === 'running');
    const current = running.length > 0 ? running : sorted.slice(0, 1);
    const first = sorted[0] as T;
    rows.push({ service: first.service, slot: first.slot, current, earlier: sorted.filter((t) => !current.includes(t)), live: running.length > 0 });
  }
  return rows.sort((a, b) => Number(b.live) - Number(a.live) || compareText(a.service, b.service) || compareSlotKeys(a.slot, b.slot));
}

/**
 * The tasks in current-first order: every slot's current tasks; with `all`, each slot's history
 * right under its current task.
 */
export function currentFirst<T extends OrderedTask>(tasks: readonly T[], all: boolean): T[] {
  return slotRows(tasks).flatMap((r) => (all ? [...r.current, ...r.earlier] : r.current));
}

/** Why a task is where it is, in a line: the scheduler's reason while pending, else its last message or exit code. */
export function taskMessage(t: OrderedTask): string {
  if (t.observed === 'pending' && t.record.pendingReason !== null) return `pending: ${t.record.pendingReason}`;
  const message = t.record.message ?? t.report?.message ?? null;
  if (t.record.exitCode !== null && message === null) return `exit ${t.record.exitCode}`;
  return message ?? '';
}
