// The Swarm comparison's own reading (bench/lib/swarm-parse.ts): which daemon events are tasks of
// either system and which slot they fill, the timeline built from them, and the figures taken from
// it (time below the wanted count, slots running twice, convergence), and the table's cells.

import { describe, expect, it } from 'vitest';
import { cell, convergedNow, duplicates, msBelow, parseDuBytes, parseEvent, parseSwarmNodes, ratioCell, Timeline } from '../../bench/lib/swarm-parse.ts';

const swarmTask = 'x9k2mq8r7t6y5u4i3o2p1a0sd';

function ev(action: string, id: string, attrs: Record<string, string>, ms: number): string {
  return JSON.stringify({ status: action, id, Type: 'container', Action: action, Actor: { ID: id, Attributes: attrs }, scope: 'local', time: Math.floor(ms / 1000), timeNano: ms * 1e6 });
}

const swarmAttrs = (service: string, slot: number): Record<string, string> => ({
  'com.docker.swarm.service.name': service, 'com.docker.swarm.task.id': swarmTask, name: `${service}.${slot}.${swarmTask}`, image: 'reg/bench/busybox:1',
});
const shoalAttrs = (service: string, slot: number): Record<string, string> => ({ 'io.shoal.service': service, 'io.shoal.slot': String(slot), 'io.shoal.task': `t-${slot}` });

describe('parseEvent', () => {
  it('reads a swarm task container: service, slot from the name, time from timeNano', () => {
    expect(parseEvent(ev('start', 'c1', swarmAttrs('bench_c', 12), 1_700_000_000_123))).toEqual({
      at: 1_700_000_000_123, action: 'start', id: 'c1', service: 'bench_c', slot: '12',
    });
  });

  it('reads a shoal task container by its labels', () => {
    expect(parseEvent(ev('die', 'c2', shoalAttrs('web', 3), 5_000))).toEqual({ at: 5_000, action: 'die', id: 'c2', service: 'web', slot: '3' });
  });

  it('falls back to the task id when a swarm name has no slot (a global service or a renamed container)', () => {
    expect(parseEvent(ev('start', 'c3', { 'com.docker.swarm.service.name': 'g', 'com.docker.swarm.task.id': 'tid', name: 'weird' }, 1))?.slot).toBe('tid');
  });

  it('ignores other actions, other containers, other types and lines that are not JSON', () => {
    expect(parseEvent(ev('create', 'c1', swarmAttrs('s', 1), 1))).toBeUndefined();
    expect(parseEvent(ev('start', 'c1', { name: 'registry' }, 1))).toBeUndefined();
    expect(parseEvent(JSON.stringify({ Type: 'network', Action: 'connect', Actor: { ID: 'n', Attributes: {} }, timeNano: 1 }))).toBeUndefined();
    expect(parseEvent('not json')).toBeUndefined();
    expect(parseEvent(JSON.stringify({ Type: 'container', Action: 'start', Actor: { ID: 'x', Attributes: shoalAttrs('s', 1) } }))).toBeUndefined();
  });
});

function timeline(events: Array<[string, string]>): Timeline {
  const tl = new Timeline();
  for (const [daemon, line] of events) {
    const e = parseEvent(line);
    if (e !== undefined) tl.add(daemon, e);
  }
  return tl;
}

describe('Timeline', () => {
  it('follows runs from start to die, per daemon', () => {
    const tl = timeline([
      ['n1', ev('start', 'a', shoalAttrs('web', 1), 100)],
      ['n2', ev('start', 'b', shoalAttrs('web', 2), 150)],
      ['n1', ev('die', 'a', shoalAttrs('web', 1), 300)],
      ['n1', ev('destroy', 'a', shoalAttrs('web', 1), 310)],
    ]);
    expect(tl.running('web').map((r) => r.id)).toEqual(['b']);
    expect(tl.runs.find((r) => r.id === 'a')?.end).toBe(300);
    expect(tl.endedWithin(0, 301).map((r) => r.id)).toEqual(['a']);
    expect(tl.startedSince('web', 120).map((r) => r.id)).toEqual(['b']);
  });

  it('ends the runs of a daemon that died, and reconciles with a listing once it is back', () => {
    const tl = timeline([
      ['n1', ev('start', 'a', shoalAttrs('web', 1), 100)],
      ['n1', ev('start', 'b', shoalAttrs('web', 2), 100)],
      ['n2', ev('start', 'c', shoalAttrs('web', 3), 100)],
    ]);
    tl.daemonLost('n1', 500);
    expect(tl.running().map((r) => r.id)).toEqual(['c']);
    tl.resync('n2', 600, [{ id: 'd', service: 'web', slot: '4', startedAt: 600 }]);
    expect(tl.running().map((r) => r.id)).toEqual(['d']);
    expect(tl.runs.find((r) => r.id === 'c')?.end).toBe(600);
  });

  it('is converged when every service runs its count and no slot twice', () => {
    const tl = timeline([
      ['n1', ev('start', 'a', shoalAttrs('web', 1), 1)],
      ['n2', ev('start', 'b', shoalAttrs('web', 1), 2)],
    ]);
    expect(convergedNow(tl, { web: 2 })).toBe(false);
    expect(convergedNow(tl, { web: 1 })).toBe(false);
    tl.add('n2', { at: 3, action: 'die', id: 'b', service: 'web', slot: '1' });
    tl.add('n2', { at: 3, action: 'start', id: 'c', service: 'web', slot: '2' });
    expect(convergedNow(tl, { web: 2 })).toBe(true);
    expect(convergedNow(tl, { web: 2, db: 1 })).toBe(false);
  });
});

describe('figures from the runs', () => {
  const tl = timeline([
    ['n1', ev('start', 'a1', shoalAttrs('web', 1), 0)],
    ['n1', ev('start', 'a2', shoalAttrs('web', 2), 0)],
    // slot 1 replaced stop-first: down from 1000 to 1500
    ['n1', ev('die', 'a1', shoalAttrs('web', 1), 1000)],
    ['n2', ev('start', 'b1', shoalAttrs('web', 1), 1500)],
    // slot 2 replaced start-first: running twice from 2000 to 2200
    ['n3', ev('start', 'c2', shoalAttrs('web', 2), 2000)],
    ['n1', ev('die', 'a2', shoalAttrs('web', 2), 2200)],
  ]);

  it('counts the time below the wanted count within a window', () => {
    expect(msBelow(tl.runs, 'web', 2, 0, 3000)).toBe(500);
    expect(msBelow(tl.runs, 'web', 2, 1200, 3000)).toBe(300);
    expect(msBelow(tl.runs, 'web', 3, 0, 3000)).toBe(3000 - 200);
    expect(msBelow(tl.runs, 'other', 1, 0, 100)).toBe(100);
  });

  it('counts a replacement that starts as the old container dies as no gap and no duplicate', () => {
    const t = timeline([
      ['n1', ev('start', 'x', shoalAttrs('s', 1), 0)],
      ['n1', ev('die', 'x', shoalAttrs('s', 1), 100)],
      ['n2', ev('start', 'y', shoalAttrs('s', 1), 100)],
    ]);
    expect(msBelow(t.runs, 's', 1, 0, 200)).toBe(0);
    expect(duplicates(t.runs, 0, 200).count).toBe(0);
  });

  it('finds slots running twice at once, within the window only', () => {
    expect(duplicates(tl.runs, 0, 3000)).toEqual({ count: 1, slots: ['web#2'] });
    expect(duplicates(tl.runs, 2200, 3000)).toEqual({ count: 0, slots: [] });
  });
});

describe('Swarm answers and the table', () => {
  it('reads GET /nodes', () => {
    expect(parseSwarmNodes([
      { ID: 'n1', Status: { State: 'ready' }, Spec: { Availability: 'active' }, ManagerStatus: { Leader: true, Reachability: 'reachable' } },
      { ID: 'n2', Status: { State: 'down' }, Spec: { Availability: 'drain' }, ManagerStatus: { Reachability: 'unreachable' } },
      { ID: 'n3', Status: { State: 'ready' }, Spec: { Availability: 'active' } },
    ])).toEqual([
      { id: 'n1', state: 'ready', availability: 'active', leader: true, reachability: 'reachable' },
      { id: 'n2', state: 'down', availability: 'drain', leader: false, reachability: 'unreachable' },
      { id: 'n3', state: 'ready', availability: 'active', leader: false, reachability: undefined },
    ]);
    expect(() => parseSwarmNodes({ message: 'This node is not a swarm manager.' })).toThrow(/not a list/);
  });

  it('writes median (range), ratios of medians and sizes', () => {
    expect(cell([300, 100, 200])).toBe('200 (100–300)');
    expect(cell([1234.5])).toBe('1,235');
    expect(cell([Number.NaN])).toBe('–');
    expect(cell([0.5, 1.5], 2)).toBe('1.00 (0.50–1.50)');
    expect(ratioCell([100, 200, 300], [400])).toBe('0.50');
    expect(ratioCell([0, 0], [0])).toBe('=');
    expect(ratioCell([1], [0])).toBe('∞');
    expect(ratioCell([], [1])).toBe('–');
    expect(parseDuBytes('123456\t/tmp/x\n')).toBe(123456);
    expect(() => parseDuBytes('du: cannot access')).toThrow(/du/);
  });
});
