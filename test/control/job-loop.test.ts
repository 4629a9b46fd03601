// The leader's job loop (src/control/job-loop.ts): scenarios, then the invariants over many seeds
// of a world with leader changes, lagging leaders, lost writes and frozen nodes (job-model.ts):
// never a run created twice for one scheduled time, never two attempts of a forbid (or replace)
// job running at once, never a possible run skipped.

import { describe, expect, it } from 'vitest';
import { reconcileJob } from '../../src/control/job-loop.ts';
import { jobRunsCollection, jobsCollection, newRun, runId, type JobRecord, type JobRunRecord } from '../../src/resources/jobs.ts';
import type { TaskRecord } from '../../src/resources/records.ts';
import { tasksCollection } from '../../src/resources/collections.ts';
import { JobWorld, jobSpecOf, prng, timesBetween } from './job-model.ts';

const t0 = Date.parse('2026-12-06T00:00:00Z');

const jobYaml = (extra = '', schedule = '@every 5s'): string => `apiVersion: shoal/v1
kind: Job
name: backup
image: busybox:local
command: ["sh", "-c", "echo hi"]
schedule: "${schedule}"
${extra}`;

function world(extra = '', schedule = '@every 5s'): JobWorld {
  const w = new JobWorld(prng(1), t0 + 1_000, ['n1', 'n2', 'n3']);
  w.addJob(jobSpecOf(jobYaml(extra, schedule)));
  w.leader = { term: 1, since: w.now, lagState: null };
  return w;
}

const runs = (w: JobWorld): JobRunRecord[] => [...w.coll(jobRunsCollection).values()].map((v) => v.value as JobRunRecord).sort((a, b) => a.scheduledAt - b.scheduledAt);
const tasks = (w: JobWorld): TaskRecord[] => [...w.coll(tasksCollection).values()].map((v) => v.value as TaskRecord);
const ctx = (w: JobWorld, ids = { n: 0 }) => ({ now: w.now, newTaskId: () => `x${++ids.n}`, exclusiveClearInMs: () => 0 });

/** Runs the world one second at a time with containers of a fixed length and exit code. */
function step(w: JobWorld, seconds: number, durationMs = 1_000, exitCode = 0): void {
  for (let i = 0; i < seconds; i++) {
    w.agents(() => durationMs, () => exitCode);
    w.nodeHealth();
    if (w.leader !== null) {
      const state = w.state();
      const d = reconcileJob(state, 'backup', ctx(w, { n: w.rev * 10 }));
      w.apply(d.plan);
      w.leaderPass('backup', false);
    }
    w.checkOverlap('backup');
    w.now += 1_000;
  }
}

describe('the job loop', () => {
  it('creates one run per scheduled time, under an id derived from the time, and a second decision from the same state is refused', () => {
    const w = world();
    w.now = t0 + 5_000;
    const state = w.state();
    const a = reconcileJob(state, 'backup', ctx(w));
    const b = reconcileJob(state, 'backup', ctx(w, { n: 100 }));
    expect(w.apply(a.plan)).toBe(true);
    expect(w.apply(b.plan)).toBe(false);
    expect(runs(w).map((r) => r.id)).toEqual([runId('backup', t0 + 5_000, 'schedule')]);
    expect(runs(w)[0]?.state).toBe('running');
    expect(tasks(w)).toHaveLength(1);
    expect((w.coll(jobsCollection).get('backup')?.value as JobRecord).lastScheduledAt).toBe(t0 + 5_000);
    // Decided again at the same time from the new state: nothing more.
    expect(reconcileJob(w.state(), 'backup', ctx(w)).plan.changes.filter((c) => c.collection === jobRunsCollection)).toEqual([]);
  });

  it('runs each scheduled time once and keeps the history asked for', () => {
    const w = world('history: {succeeded: 2, failed: 1}');
    step(w, 29);
    const kept = runs(w);
    expect(kept.map((r) => r.state)).toEqual(['succeeded', 'succeeded']);
    expect(kept.map((r) => r.scheduledAt)).toEqual([t0 + 20_000, t0 + 25_000]);
    expect([...w.runCreations.values()].every((n) => n === 1)).toBe(true);
    expect(w.runCreations.size).toBe(5);
    // Finished attempts beyond the kept runs' last are reaped.
    expect(tasks(w).map((t) => t.slot).sort()).toEqual(kept.map((r) => r.id).sort());
  });

  it('forbid: a run longer than the interval is not started again meanwhile; the time waits and starts late', () => {
    const w = world();
    step(w, 14, 7_000);
    // The run of 5s runs 7s: the time 10s waits for it and starts at 12s (no deadline).
    expect(w.overlaps).toEqual([]);
    const r = runs(w);
    expect(r.map((x) => x.scheduledAt)).toEqual([t0 + 5_000, t0 + 10_000]);
    expect(r[1]?.createdAt).toBeGreaterThanOrEqual(t0 + 12_000);
  });

  it('forbid with startingDeadline: a time that cannot start within it is recorded missed', () => {
    const w = world('startingDeadline: 2s');
    step(w, 16, 9_000);
    const missed = runs(w).filter((r) => r.state === 'missed');
    expect(missed.map((r) => r.scheduledAt)).toContain(t0 + 10_000);
    expect(missed[0]?.message).toMatch(/startingDeadline 2s/);
    expect(w.overlaps).toEqual([]);
  });

  it('replace: the running attempt is stopped and the new run starts once it has', () => {
    const w = world('concurrency: replace');
    step(w, 12, 60_000);
    const r = runs(w);
    expect(r[0]?.state).toBe('cancelled');
    expect(r[0]?.message).toMatch(/replaced by backup-/);
    expect(r[1]?.state).toBe('running');
    expect(w.overlaps).toEqual([]);
  });

  it('allow: runs overlap', () => {
    const w = world('concurrency: allow');
    step(w, 12, 60_000);
    expect(runs(w).filter((r) => r.state === 'running')).toHaveLength(2);
  });

  it('backoffLimit: a failed attempt is retried under the same run id, then the run fails', () => {
    const w = world('backoffLimit: 1', '@every 1h');
    w.now = t0 + 3_600_000 - 1_000;
    step(w, 40, 1_000, 3);
    const r = runs(w);
    expect(r).toHaveLength(1);
    expect(r[0]?.attempts).toBe(2);
    expect(r[0]?.state).toBe('failed');
    expect(r[0]?.message).toMatch(/backoffLimit 1 reached/);
  });

  it('with no leader for a while, the latest time starts late and the earlier ones are recorded missed, once', () => {
    const w = world();
    step(w, 6);
    w.leader = null;
    step(w, 17);
    w.leader = { term: 2, since: w.now, lagState: null };
    step(w, 2);
    const r = runs(w);
    const missed = r.filter((x) => x.state === 'missed');
    expect(missed).toHaveLength(1);
    expect(missed[0]?.message).toMatch(/2 scheduled times/);
    expect(r[r.length - 1]?.scheduledAt).toBe(t0 + 20_000);
    expect([...w.runCreations.values()].every((n) => n === 1)).toBe(true);
  });

  it('an attempt lost with a frozen node is retried only after the node\'s lease has surely run out', () => {
    const w = world('', '@every 1h');
    w.now = t0 + 3_600_000 - 1_000;
    step(w, 3, 600_000);
    const first = tasks(w)[0];
    expect(first?.nodeId).not.toBeNull();
    const frozen = w.nodes.get(first?.nodeId as string);
    if (frozen !== undefined) frozen.frozen = true;
    step(w, 20, 600_000);
    expect(w.overlaps).toEqual([]);
    const r = runs(w);
    expect(r).toHaveLength(1);
    expect(r[0]?.attempts).toBe(2);
    expect(r[0]?.message).toMatch(/lost with its node/);
  });

  it('a manual run waits for a running one under forbid, then runs', () => {
    const w = world('', '@every 1h');
    w.now = t0 + 3_600_000 - 1_000;
    step(w, 2, 5_000);
    const job = w.coll(jobsCollection).get('backup')?.value as JobRecord;
    const manual = newRun(job, w.now, 'manual', w.now);
    w.put(jobRunsCollection, manual.id, manual);
    step(w, 14, 5_000);
    expect(w.overlaps).toEqual([]);
    expect(runs(w).map((r) => [r.cause, r.state])).toEqual([['schedule', 'succeeded'], ['manual', 'succeeded']]);
  });

  it('a leader whose clock is held fires no scheduled run, and says nothing is due until it may', () => {
    const w = world();
    w.now = t0 + 5_000;
    const held = reconcileJob(w.state(), 'backup', { ...ctx(w), clockHold: 'the clock is not synchronized' });
    expect(held.plan.changes).toEqual([]);
    expect(reconcileJob(w.state(), 'backup', { ...ctx(w), clockHold: null }).plan.changes.some((c) => c.collection === jobRunsCollection)).toBe(true);
  });

  it('a removed job: its runs are cancelled, its tasks stopped, then everything is deleted', () => {
    const w = world();
    step(w, 7, 60_000);
    w.coll(jobsCollection).delete('backup');
    step(w, 4, 60_000);
    expect(runs(w)).toEqual([]);
    expect(tasks(w)).toEqual([]);
  });
});

describe('job invariants over many seeds', () => {
  const seeds = Number(process.env.JOB_SEEDS ?? 30);
  it(`holds for ${seeds} seeds: no run twice, no overlap under forbid, no possible run skipped`, () => {
    for (let seed = 1; seed <= seeds; seed++) {
      const failure = runSeed(seed);
      expect(failure, `seed ${seed}`).toBe(null);
    }
  });
});

/** One seeded run; returns what broke, or null. */
function runSeed(seed: number): string | null {
  const random = prng(seed);
  const concurrency = (['forbid', 'replace', 'forbid'] as const)[seed % 3] ?? 'forbid';
  const deadline = seed % 4 === 0 ? 'startingDeadline: 3s' : '';
  const w = new JobWorld(random, t0 + 1_000, ['n1', 'n2', 'n3']);
  w.addJob(jobSpecOf(jobYaml(`concurrency: ${concurrency}\nbackoffLimit: 2\n${deadline}`)));
  let leaderBackAt = w.now;
  const leaderAt = new Set<number>();
  const busyAt = new Set<number>();
  const firstStates = new Map<string, string>();
  for (let i = 0; i < 240; i++) {
    if (w.leader !== null && random() < 0.03) {
      w.leader = null;
      leaderBackAt = w.now + Math.floor(random() * 9) * 1_000;
    } else if (w.leader === null && w.now >= leaderBackAt) {
      w.leader = { term: ++w.term, since: w.now, lagState: null };
    }
    if (random() < 0.02) {
      const ids = [...w.nodes.keys()];
      const n = w.nodes.get(ids[Math.floor(random() * ids.length)] ?? 'n1');
      if (n !== undefined && !n.frozen) n.frozen = true;
    }
    for (const n of w.nodes.values()) if (n.frozen && random() < 0.1) n.frozen = false;
    const before = runsOf(w);
    if (before.some((r) => r.state === 'pending' || r.state === 'running') || w.running.size > 0) busyAt.add(w.now);
    w.agents(() => 1_000 + Math.floor(random() * 8) * 1_000, () => (random() < 0.2 ? 1 : 0));
    w.nodeHealth();
    if (w.leader !== null) {
      leaderAt.add(w.now);
      w.leaderPass('backup', random() < 0.3);
    }
    for (const r of runsOf(w)) if (!firstStates.has(r.id)) firstStates.set(r.id, r.state);
    w.checkOverlap('backup');
    w.now += 1_000;
  }
  const twice = [...w.runCreations].filter(([, n]) => n > 1);
  if (twice.length > 0) return `runs created twice: ${twice.map(([id]) => id).join(', ')}`;
  if (w.overlaps.length > 0) return `two attempts ran at once: ${w.overlaps[0] ?? ''}`;
  // Possible: a leader ran the loop for the four seconds from the time, with nothing of the job
  // running at it, and a node unfrozen: the run must have been created to start, not missed.
  for (const t of timesBetween('@every 5s', t0 + 2_000, w.now - 10_000)) {
    const possible = [0, 1_000, 2_000, 3_000].every((d) => leaderAt.has(t + d)) && !busyAt.has(t) && !busyAt.has(t + 1_000);
    if (!possible) continue;
    const id = runId('backup', t, 'schedule');
    const first = firstStates.get(id);
    if (first === undefined || first === 'missed') return `the possible run at ${new Date(t).toISOString()} was ${first ?? 'never created'}`;
  }
  return null;
}

function runsOf(w: JobWorld): JobRunRecord[] {
  return [...w.coll(jobRunsCollection).values()].map((v) => v.value as JobRunRecord);
}

describe('the job loop\'s wake-ups', () => {
  it('a yearly job is looked at again within a minute (a timer of months would overflow)', () => {
    const w = world('', '@yearly');
    const d = reconcileJob(w.state(), 'backup', ctx(w));
    expect(d.wakeInMs).toBe(60_000);
    const soon = world('', '@every 5s');
    expect(reconcileJob(soon.state(), 'backup', ctx(soon)).wakeInMs).toBe(4_000);
  });
});
