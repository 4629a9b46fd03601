// The pure parts of the drills: which ports an isolate cuts, the storage seam's stall, the
// workload comparison, the write-gap figure, the target and the quorum guard.

import { describe, expect, it } from 'vitest';
import { checkTolerance, pickTarget } from '../../src/cli/drill-cluster.ts';
import { longestGapMs } from '../../src/cli/drill-probe.ts';
import { compareWorkloads, type TaskSnapshot } from '../../src/cli/drill-workloads.ts';
import type { View } from '../../src/cli/cluster-view.ts';
import { portsToCut } from '../../src/node/drill/drill-actions.ts';
import { DrillStorage } from '../../src/node/drill/drill-storage.ts';
import { MemoryNodeStorage } from '../../src/node/node-storage.ts';

const members = [
  { id: 'a', name: 'n1', apiAddress: 'h1:7101', peerAddress: 'h1:7102' },
  { id: 'b', name: 'n2', apiAddress: 'h2:7101', peerAddress: 'h2:7102' },
  { id: 'c', name: 'n3', apiAddress: 'h3:7101', peerAddress: 'h3:7302' },
];

describe('portsToCut', () => {
  it('on its own machine: its own peer port and every member\'s, never the API port', () => {
    expect(portsToCut('0.0.0.0:7102', members)).toEqual([7102, 7302]);
  });
  it('on loopback: only its own peer port (the others share the interface)', () => {
    expect(portsToCut('127.0.0.1:40001', [{ ...members[0]!, peerAddress: '127.0.0.1:40002' }])).toEqual([40001]);
    expect(portsToCut('[::1]:40001', [])).toEqual([40001]);
  });
});

describe('DrillStorage', () => {
  it('holds writes back while a stall is on, and passes them through after', async () => {
    const storage = new DrillStorage(new MemoryNodeStorage());
    storage.stall(150);
    let done = false;
    const writing = storage.save({ entries: [{ index: 1, term: 1, type: 'normal', data: new Uint8Array() }] as never }, { sync: true }).then(() => { done = true; });
    await new Promise((r) => setTimeout(r, 50));
    expect(done).toBe(false);
    await writing;
    expect(storage.log.lastIndex()).toBe(1);
  });
});

const task = (id: string, slot: string, observed = 'running'): TaskSnapshot => ({ id, service: 'web', slot, observed });

describe('compareWorkloads', () => {
  it('counts a running task that is gone as restarted, and two running in one slot as duplicated', () => {
    const before = [task('t1', '1'), task('t2', '2'), task('t3', '3'), task('t9', '9', 'failed')];
    const after = [task('t1', '1'), task('t4', '2'), task('t3', '3'), task('t5', '3')];
    const c = compareWorkloads(before, after);
    expect(c).toMatchObject({ runningBefore: 3, runningAfter: 4, restarted: 1, duplicated: 1 });
    expect(c.notes.join('\n')).toContain('t2');
  });
  it('finds nothing when the same tasks run', () => {
    const same = [task('t1', '1'), task('t2', '2')];
    expect(compareWorkloads(same, same)).toMatchObject({ restarted: 0, duplicated: 0 });
  });
});

describe('longestGapMs', () => {
  it('measures between acknowledged writes, from and to the window\'s ends', () => {
    expect(longestGapMs([100, 150, 900, 950], 0, 1000)).toBe(750);
    expect(longestGapMs([], 0, 1000)).toBe(1000);
  });
});

function view(health: ('healthy' | 'unreachable')[]): View {
  return {
    clusterId: 'x', view: 'leader', node: 'a', leader: 'a', term: 2, commitIndex: 1, appliedIndex: 1, lastIndex: 1,
    members: members.slice(0, health.length).map((m, i) => ({ ...m, role: 'voter' as const, matchIndex: 1, lag: 0, rttMs: 1, softwareVersion: '1', health: health[i] ?? 'healthy' })),
  };
}

describe('pickTarget and checkTolerance', () => {
  it('acts on the leader for leader drills and disk-stall, on a follower otherwise, or on --target', () => {
    const v = view(['healthy', 'healthy', 'healthy']);
    expect(pickTarget(v, 'leader-kill', undefined).id).toBe('a');
    expect(pickTarget(v, 'disk-stall', undefined).id).toBe('a');
    expect(pickTarget(v, 'follower-pause', undefined).id).not.toBe('a');
    expect(pickTarget(v, 'node-reboot', 'n3').id).toBe('c');
    expect(() => pickTarget(v, 'node-reboot', 'n9')).toThrow(/no member 'n9'/);
  });
  it('refuses a drill that leaves less than a quorum, unless --allow-outage', () => {
    expect(() => checkTolerance(view(['healthy', 'healthy', 'healthy']), false)).not.toThrow();
    expect(() => checkTolerance(view(['healthy', 'healthy', 'unreachable']), false)).toThrow(/--allow-outage/);
    expect(() => checkTolerance(view(['healthy']), false)).toThrow(/quorum/);
    expect(() => checkTolerance(view(['healthy']), true)).not.toThrow();
  });
});
