// Workloads before and after a drill, from the API's tasks view: a task running before that no
// longer runs after was restarted (replaced by another task, or its container stopped), and a
// service slot with more than one running task after is duplicated (a task started elsewhere
// while the old one kept running: what fencing must prevent).

export interface TaskSnapshot {
  id: string;
  service: string;
  slot: string;
  observed: string;
}

export interface WorkloadChange {
  runningBefore: number;
  runningAfter: number;
  restarted: number;
  duplicated: number;
  /** The first few restarted or duplicated tasks, in words. */
  notes: string[];
}

const notesMax = 5;

export function compareWorkloads(before: readonly TaskSnapshot[], after: readonly TaskSnapshot[]): WorkloadChange {
  const runningBefore = before.filter((t) => t.observed === 'running');
  const runningAfter = after.filter((t) => t.observed === 'running');
  const afterIds = new Set(runningAfter.map((t) => t.id));
  const notes: string[] = [];
  const restarted = runningBefore.filter((t) => !afterIds.has(t.id));
  for (const t of restarted.slice(0, notesMax)) notes.push(`task ${t.id} (${t.service} slot ${t.slot}) ran before and does not run after`);
  const bySlot = new Map<string, number>();
  for (const t of runningAfter) bySlot.set(`${t.service}\u0000${t.slot}`, (bySlot.get(`${t.service}\u0000${t.slot}`) ?? 0) + 1);
  let duplicated = 0;
  for (const [key, n] of bySlot) {
    if (n < 2) continue;
    duplicated += n - 1;
    const [service, slot] = key.split('\u0000');
    if (notes.length < notesMax * 2) notes.push(`${service} slot ${slot} runs ${n} tasks at once`);
  }
  return { runningBefore: runningBefore.length, runningAfter: runningAfter.length, restarted: restarted.length, duplicated, notes };
}
