// The autopilot (src/node/autopilot.ts) keeps no timer where it has nothing to watch (issue 45):
// on a follower, or on a leader with only voters and no dead member cleanup. A change of leader or
// an applied membership change that gives it a learner to watch starts its rounds at once.

import { EventEmitter } from 'node:events';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DocumentStore } from '../../fsm/index.ts';
import { Autopilot } from '../../src/node/autopilot.ts';

describe('the autopilot\'s rounds', () => {
  beforeEach(() => { vi.useFakeTimers(); });
  afterEach(() => { vi.useRealTimers(); });

  it('run only while this node leads with a learner to watch', () => {
    const wake = Object.assign(new EventEmitter(), {
      isLeader: false, learners: [] as string[],
      confState: () => ({ learners: wake.learners, learnersNext: [], votersOutgoing: [] }),
    });
    const pilot = new Autopilot({ node: {} as never, wake, store: new DocumentStore(), log: { info: () => {}, warn: () => {}, debug: () => {}, error: () => {} } as never });
    pilot.start();
    expect(vi.getTimerCount()).toBe(0);
    wake.isLeader = true;
    wake.emit('leaderChange');
    expect(vi.getTimerCount()).toBe(0);
    wake.learners = ['n4'];
    wake.emit('applied');
    expect(vi.getTimerCount()).toBe(1);
    pilot.close();
    expect(vi.getTimerCount()).toBe(0);
  });
});
