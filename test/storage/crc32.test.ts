import { describe, expect, it } from 'vitest';
import { crc32 } from '../../src/storage/crc32.ts';

describe('crc32', () => {
  it('matches the IEEE check values', () => {
    const ascii = (s: string): Uint8Array => new TextEncoder().encode(s);
    expect(crc32(new Uint8Array(0))).toBe(0);
    expect(crc32(ascii('123456789'))).toBe(0xcbf43926);
    expect(crc32(ascii('The quick brown fox jumps over the lazy dog'))).toBe(0x414fa339);
  });

  it('continues a running sum over split input', () => {
    const all = Uint8Array.from({ length: 1000 }, (_, i) => (i * 7) & 0xff);
    expect(crc32(all.subarray(400), crc32(all.subarray(0, 400)))).toBe(crc32(all));
  });
});
