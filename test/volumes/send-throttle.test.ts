// replicate.maxBandwidth on the path that carries increments to holders (sendIncrement in
// src/api/volume-routes.ts): the PUT's body is the stream paced by the throttle, on a manual
// clock: sending `size` bytes at `rate` waits at least (size - one chunk) / rate in all, and the
// holder gets the bytes unchanged; without a bandwidth nothing waits.

import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { sendIncrement } from '../../src/api/volume-routes.ts';

const chunkBytes = 64 * 1024;
const chunks = Array.from({ length: 16 }, (_, i) => Buffer.alloc(chunkBytes, i));
const size = chunks.length * chunkBytes;
const offer = { volume: 'pgdata', version: { seq: 2, node: 'n1', epoch: 1 }, parent: null, sender: { node: 'n1', epoch: 1 }, bytes: size, sha256: '0'.repeat(64) };

function setup() {
  let now = 0;
  const waits: number[] = [];
  const received: Buffer[] = [];
  const clock = { now: () => now, sleep: async (ms: number) => { waits.push(ms); now += ms; } };
  const peer = {
    fetch: async (_addr: string, _path: string, init: RequestInit = {}) => {
      for await (const c of init.body as unknown as Readable) received.push(c as Buffer);
      return new Response(null, { status: 204 });
    },
  };
  return { clock, peer, waits, received, elapsedMs: () => now };
}

describe('sendIncrement with a bandwidth', () => {
  it('paces the PUT body to maxBandwidth: at least (size - a chunk) / rate, the bytes unchanged', async () => {
    const s = setup();
    const rate = 256 * 1024;
    await sendIncrement(s.peer, '127.0.0.1:1', offer, Readable.from(chunks), rate, s.clock);
    expect(Buffer.concat(s.received)).toEqual(Buffer.concat(chunks));
    expect(s.elapsedMs()).toBeGreaterThanOrEqual(((size - chunkBytes) / rate) * 1000);
  });

  it('does not wait without one', async () => {
    const s = setup();
    await sendIncrement(s.peer, '127.0.0.1:1', offer, Readable.from(chunks), undefined, s.clock);
    expect(Buffer.concat(s.received)).toEqual(Buffer.concat(chunks));
    expect(s.waits).toEqual([]);
  });
});
