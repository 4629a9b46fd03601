// shoal doctor's job clock check (doctor-checks.ts jobClockCheck) on made-up leader reports:
// FAIL with the reason while the leader holds scheduled jobs, OK with the members' offsets
// otherwise, SKIP when the leader did not say.

import { describe, expect, it } from 'vitest';
import { jobClockCheck, type JobClockFacts } from '../../src/cli/doctor-checks.ts';

const names: Record<string, string> = { n1: 'pi-a', n2: 'pi-b', n3: 'pi-c' };
const nameOf = (id: string): string => names[id] ?? id;
const report = (extra: Partial<JobClockFacts> = {}): JobClockFacts => ({
  node: 'n1', leader: true, synchronized: true, skewMaxMs: 30_000, skewMs: 100,
  offsets: [{ node: 'n2', offsetMs: -150 }, { node: 'n3', offsetMs: null }], hold: null, ...extra,
});

describe('jobClockCheck', () => {
  it('OK: the members\' clocks as the leader measures them, unknown ones named', () => {
    const c = jobClockCheck(report(), nameOf);
    expect(c.status).toBe('ok');
    expect(c.message).toBe('leader pi-a fires scheduled jobs, synchronized; members\' clocks against it: pi-b -0.1 s; unknown: pi-c (limit 30 s from the median)');
  });

  it('OK with an unknown synchronization, which never holds', () => {
    expect(jobClockCheck(report({ synchronized: null }), nameOf).message).toMatch(/synchronization unknown/);
  });

  it('FAIL while held, with the leader\'s reason and what to do', () => {
    const c = jobClockCheck(report({ hold: 'this leader\'s clock is not synchronized (...)' }), nameOf);
    expect(c.status).toBe('fail');
    expect(c.message).toMatch(/^leader pi-a holds scheduled jobs: this leader's clock is not synchronized/);
    expect(c.fix).toMatch(/transfer-leader/);
  });

  it('SKIP when the leader did not say, or no longer leads', () => {
    expect(jobClockCheck(undefined, nameOf).status).toBe('skip');
    expect(jobClockCheck(report({ leader: false }), nameOf).status).toBe('skip');
  });
});
