// The pure parts of the drills: which ports an isolate cuts, the storage seam's stall, the hold
// of a rebooted node's next start, the workload comparison, the write-gap figure, the target and
// the quorum guard, the refused peer messages counted over a drill, and the printed report.

import { describe, expect, it } from 'vitest';
import { mkdtempSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { actionOf, checkTolerance, pickTarget, refusalsBetween } from '../../src/cli/drill-cluster.ts';
import { formatReport } from '../../src/cli/drill.ts';
import type { DrillReport } from '../../src/node/drill/drill-report.ts';
import { drillHoldFile, holdLeftMs, waitOutDrillHold, writeDrillHold } from '../../src/node/drill/drill-hold.ts';
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
    expect(pickTarget(v, 'leader-pause', undefined).id).toBe('a');
    expect(actionOf('leader-pause', 4)).toEqual({ action: 'pause', seconds: 4 });
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

describe('the hold of a rebooted node\'s next start', () => {
  it('waits what is left of the outage, never more than a drill\'s longest fault, and nothing for a bad file', () => {
    expect(holdLeftMs(JSON.stringify({ untilMs: 10_000, drill: 'node-reboot' }), 4_000)).toBe(6_000);
    expect(holdLeftMs(JSON.stringify({ untilMs: 10_000, drill: 'node-reboot' }), 12_000)).toBe(0);
    expect(holdLeftMs(JSON.stringify({ untilMs: 10_000_000, drill: 'node-reboot' }), 0)).toBe(600_000);
    expect(holdLeftMs('{"untilMs": "soon"}', 0)).toBe(0);
    expect(holdLeftMs('not json', 0)).toBe(0);
  });
  it('a start waits it out, says so, and removes the file; the next start does not wait', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'shoal-hold-'));
    try {
      writeDrillHold(dir, 5_000, 'node-reboot');
      const slept: number[] = [];
      const said: string[] = [];
      const ports = { now: () => 2_000, sleep: async (ms: number) => { slept.push(ms); }, log: { info: (m: string) => said.push(m), warn: (m: string) => said.push(m) } };
      await waitOutDrillHold(dir, ports.log, ports);
      expect(slept).toEqual([3_000]);
      expect(said.join('\n')).toContain('3.0 s more');
      expect(existsSync(drillHoldFile(dir))).toBe(false);
      await waitOutDrillHold(dir, ports.log, ports);
      expect(slept).toEqual([3_000]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('refusalsBetween', () => {
  it('counts what a member refused since the first scrape; a counter that went down is a restarted process\'s', () => {
    expect(refusalsBetween({ wrongSender: 2, misaddressed: 0 }, { wrongSender: 5, misaddressed: 1 })).toEqual({ wrongSender: 3, misaddressed: 1 });
    expect(refusalsBetween({ wrongSender: 4, misaddressed: 1 }, { wrongSender: 1, misaddressed: 1 })).toEqual({ wrongSender: 1, misaddressed: 0 });
    expect(refusalsBetween(undefined, { wrongSender: 1, misaddressed: 2 })).toEqual({ wrongSender: 1, misaddressed: 2 });
  });
});

describe('formatReport', () => {
  const report: DrillReport = {
    id: 'drill-x-1', drill: 'node-reboot', startedAt: '2026-12-01T00:00:00.000Z', target: { id: 'c', name: 'n3' }, faultSeconds: 20,
    leaderBefore: 'a', leaderAfter: 'a', newLeaderMs: null, longestWriteGapMs: 300,
    writes: { attempted: 540, acknowledged: 531, checked: 268, failed: 9, lost: 0 }, reads: { done: 260, failed: 1, backwards: 0 },
    workloads: { runningBefore: 3, runningAfter: 3, restarted: 1, duplicated: 0 }, servicesBackMs: 16_400, targetDownMs: 15_200,
    recovered: true, recoveryMs: 22_000, peerMessagesRefused: { wrongSender: 0, misaddressed: 0 }, problems: [], ok: true,
  };
  it('says how many acknowledged writes were checked, the same count the progress line names', () => {
    expect(formatReport(report)).toContain('531 acknowledged (268 creates, each checked on every node), 9 failed');
  });
  it('says when the target was declared down, and the refused peer messages', () => {
    const text = formatReport(report);
    expect(text).toContain('declared down after 15.20 s (its tasks replaced)');
    expect(text).toContain('services back       16.40 s');
    expect(text).toContain('0 refused as wrong_sender, 0 as misaddressed');
    expect(formatReport({ ...report, targetDownMs: null })).toContain('not declared down');
  });
  it('reads a report kept before those fields existed', () => {
    const { targetDownMs: _d, peerMessagesRefused: _p, ...old } = report;
    const text = formatReport({ ...old, writes: { attempted: 1, acknowledged: 1, failed: 0, lost: 0 } });
    expect(text).not.toContain('declared down');
    expect(text).toContain('1 acknowledged, 0 failed');
  });
});
