// The wait after apply / service update / scale, fed task lists (converge-verdict.ts): a service
// whose tasks all fail the same way stops the wait early with its code and the reason; failures
// of different kinds, or a task that runs, keep it waiting; the progress names why tasks do not
// run. Pure: no cluster, no process.

import { describe, expect, it } from 'vitest';
import type { TaskItem } from '../../src/cli/control-api.ts';
import { failureKind, sameFailureAttempts, verdictOf } from '../../src/cli/converge-verdict.ts';
import { pull, task, view } from './service-views.ts';

const target = { name: 'web', specVersion: 1 };

/** `n` failed attempts of each slot, then optionally a retry under way. */
function failing(slots: number[], n: number, message = pull, retry = false): TaskItem[] {
  const out: TaskItem[] = [];
  for (let a = 0; a < n; a++) for (const s of slots) out.push(task(s, 'failed', message));
  if (retry) for (const s of slots) out.push(task(s, 'pending'));
  return out;
}

describe('the wait after a change', () => {
  it('stops early (tasks_failing) once every task failed the same way twice in a row, naming the reason', () => {
    expect(sameFailureAttempts).toBe(2);
    const v = verdictOf(target, { service: view(), tasks: failing([1, 2, 3], 2, pull, true) });
    expect(v.stop?.code).toBe('tasks_failing');
    expect(v.stop?.message).toContain('every task failed 2 times in a row, the same way: image_pull_failed: ');
    expect(v.stop?.message).toContain('repository does not exist');
    expect(v.stop?.message).toContain('shoal service rm web');
    expect(v.lines).toEqual(['web: 0/3 running', `  3 tasks failed: ${pull}`]);
  });

  it('keeps waiting after one failure of each (a retry may work), and says why they do not run', () => {
    const v = verdictOf(target, { service: view(), tasks: failing([1, 2, 3], 1, pull, true) });
    expect(v.stop).toBeNull();
    expect(v.lines).toEqual(['web: 0/3 running', `  3 tasks failed: ${pull}`]);
  });

  it('keeps waiting when the failures differ in kind, or one task runs', () => {
    const mixed = [...failing([1, 2], 2), ...failing([3], 2, 'exited with code 1')];
    const m = verdictOf(target, { service: view(), tasks: mixed });
    expect(m.stop).toBeNull();
    expect(m.lines).toEqual(['web: 0/3 running', `  2 tasks failed: ${pull}`, '  1 task failed: exited with code 1']);
    const oneRuns = verdictOf(target, { service: view({ running: 1, serving: 1 }), tasks: [...failing([1, 2], 3), task(3, 'running')] });
    expect(oneRuns.stop).toBeNull();
  });

  it('counts failures of the same kind as alike (exit codes, details), and stops at once when the restart policy gave up', () => {
    expect(failureKind('exited with code 137: OOM-killed')).toBe('exited with code 137');
    expect(failureKind('create failed: no such network')).toBe('create failed');
    expect(failureKind(`${pull}; not restarted: restart policy never`)).toBe('image_pull_failed');
    const never = [1, 2, 3].map((s) => task(s, 'failed', `image_pull_failed: node n${s} could not pull ghost:1; not restarted: restart policy never`));
    const v = verdictOf(target, { service: view(), tasks: never });
    expect(v.stop?.code).toBe('tasks_failing');
    expect(v.stop?.message).toContain('its restart policy tries no more');
    expect(v.stop?.message).not.toContain('not restarted');
  });

  it('does not stop for a slot not yet tried, nor for tasks of another spec version, nor for a pending task', () => {
    expect(verdictOf(target, { service: view(), tasks: failing([1, 2], 2) }).stop).toBeNull();
    const old = failing([1, 2, 3], 2).map((t) => ({ ...t, record: { ...t.record, specVersion: 2 } }));
    expect(verdictOf(target, { service: view(), tasks: old }).stop).toBeNull();
    const pending = [1, 2, 3].map((s) => task(s, 'pending', null, { record: { specVersion: 1, message: null, pendingReason: 'no nodes', createdAt: s, exitCode: null } }));
    expect(verdictOf(target, { service: view({ pending: 3, pendingReasons: ['3 nodes paused (n1, n2, n3)'] }), tasks: pending })).toMatchObject({
      stop: null, lines: ['web: 0/3 running; 3 pending: 3 nodes paused (n1, n2, n3)'],
    });
  });

  it('leaves out the slots scaled away, and shows a failing health check and what a starting task waits for', () => {
    const tasks = [
      ...failing([4, 5], 2), // scaled from 5 to 3: not wanted any more
      task(1, 'running'),
      task(2, 'starting', 'health check failing', { health: 'unhealthy' }),
      task(3, 'starting', null, { report: { message: 'waiting for network back' } }),
    ];
    const v = verdictOf(target, { service: view({ running: 1, serving: 1 }), tasks });
    expect(v.stop).toBeNull();
    expect(v.lines).toEqual(['web: 1/3 running', '  1 task running, health check failing', '  1 task starting: waiting for network back']);
  });

  it('fails at once (not_converged) when the service is removed, changed again or its update paused', () => {
    expect(verdictOf(target, undefined).stop).toEqual({ message: 'web was removed', code: 'not_converged' });
    expect(verdictOf(target, { service: view({}, { specVersion: 2 }), tasks: [] }).stop?.code).toBe('not_converged');
    expect(verdictOf(target, { service: view({}, { update: 'paused' }), tasks: [] }).stop?.message).toMatch(/update is paused/);
  });

  it('says converged when the status does', () => {
    expect(verdictOf(target, { service: view({ running: 3, serving: 3, converged: true }), tasks: [1, 2, 3].map((s) => task(s, 'running')) })).toMatchObject({ stop: null, converged: true, lines: ['web: 3/3 running'] });
  });
});
