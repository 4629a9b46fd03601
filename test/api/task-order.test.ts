// Current first (src/api/task-order.ts): one row per slot, the task desired running first, the
// slot's history folded under it newest first, history-only slots last; `service ps` rows follow
// the same order, with history only when --all asks for it. Pure: no cluster.

import { describe, expect, it } from 'vitest';
import { psRows } from '../../src/cli/control-format.ts';
import { currentFirst, slotRows, taskMessage } from '../../src/api/task-order.ts';
import { task } from '../cli/service-views.ts';

describe('current first', () => {
  // A 3-replica service after two updates, then scaled down from 4: slot 4 is history only.
  const history = [
    task(1, 'shutdown'), task(2, 'shutdown'), task(3, 'shutdown'), task(4, 'shutdown'),
    task(1, 'shutdown'), task(2, 'failed', 'exit 1'), task(3, 'shutdown'),
  ];
  const current = [
    task(3, 'pending', null, { nodeId: null, nodeName: null }), task(1, 'running'), task(2, 'orphaned', 'its node n2 is down'),
  ];
  const pending = current[0];
  if (pending !== undefined) pending.record.pendingReason = '3 nodes without 2 GiB memory free';
  // The orphaned one is still desired running: the leader has not replaced it yet.
  const all = [...history, ...current];
  const shuffled = [...all].reverse();

  it('gives one row per slot, current tasks first in slot order, history-only slots last', () => {
    const rows = slotRows(shuffled);
    expect(rows.map((r) => r.slot)).toEqual([1, 2, 3, 4]);
    expect(rows.map((r) => r.current.map((t) => t.observed))).toEqual([['running'], ['orphaned'], ['pending'], ['shutdown']]);
    expect(rows.map((r) => r.live)).toEqual([true, true, true, false]);
    expect(rows.map((r) => r.earlier.length)).toEqual([2, 2, 2, 0]);
    // History is newest first: slot 2's failed task (the second update) before its first one.
    expect(rows[1]?.earlier.map((t) => t.observed)).toEqual(['failed', 'shutdown']);
  });

  it('orders a 10-slot service as people count (2 before 10)', () => {
    const many = [task(10, 'running'), task(2, 'running'), task(1, 'running')];
    expect(slotRows(many).map((r) => r.slot)).toEqual([1, 2, 10]);
  });

  it('lists only current tasks unless all, and then each slot\'s history under it', () => {
    expect(currentFirst(shuffled, false).map((t) => `${t.slot}:${t.observed}`)).toEqual(['1:running', '2:orphaned', '3:pending', '4:shutdown']);
    expect(currentFirst(shuffled, true).map((t) => `${t.slot}:${t.observed}`)).toEqual([
      '1:running', '1:shutdown', '1:shutdown', '2:orphaned', '2:failed', '2:shutdown', '3:pending', '3:shutdown', '3:shutdown', '4:shutdown',
    ]);
  });

  it('says why: the pending reason, the message, the exit code', () => {
    expect(pending !== undefined && taskMessage(pending)).toBe('pending: 3 nodes without 2 GiB memory free');
    expect(taskMessage(task(1, 'failed', null, { record: { specVersion: 1, message: null, pendingReason: null, createdAt: 0, exitCode: 137 } }))).toBe('exit 137');
    expect(taskMessage(task(1, 'orphaned', 'its node n2 is down'))).toBe('its node n2 is down');
  });

  it('gives service ps the same order: current rows only by default, all with --all', () => {
    expect(psRows(shuffled, false).map((r) => `${r[0]}:${r[4]}`)).toEqual(['1:running', '2:orphaned', '3:pending', '4:shutdown']);
    expect(psRows(shuffled, true)).toHaveLength(all.length);
  });
});
