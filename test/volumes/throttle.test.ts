// replicate.maxBandwidth's stream (src/executor/volumes/throttle.ts) on a manual clock: the
// bytes pass unchanged, each chunk held until the bandwidth allows the bytes before it.

import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { throttle } from '../../src/executor/volumes/throttle.ts';

describe('throttle', () => {
  it('holds each chunk until the bytes before it were allowed, and passes the bytes unchanged', async () => {
    let now = 0;
    const waits: number[] = [];
    const clock = { now: () => now, sleep: async (ms: number) => { waits.push(ms); now += ms; } };
    const chunks = [Buffer.alloc(1000, 1), Buffer.alloc(1000, 2), Buffer.alloc(500, 3), Buffer.alloc(10, 4)];
    const out: Buffer[] = [];
    for await (const c of Readable.from(chunks).pipe(throttle(1000, clock))) out.push(c as Buffer);
    expect(Buffer.concat(out)).toEqual(Buffer.concat(chunks));
    // 1000 B/s: the second chunk waits for the first second, the third for 2 s in all, the fourth for 2.5 s.
    expect(waits).toEqual([1000, 1000, 500]);
  });

  it('refuses a bandwidth that is not a positive number', () => {
    expect(() => throttle(0)).toThrow(/positive number of bytes per second/);
  });
});
