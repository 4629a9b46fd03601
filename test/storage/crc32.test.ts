import { describe, expect, it } from 'vitest';
import { crc32, crc32Table } from '../../src/storage/crc32.ts';

describe.each([['crc32', crc32], ['crc32Table', crc32Table]])('%s', (_name, crc) => {
  it('matches the IEEE check values', () => {
    const ascii = (s: string): Uint8Array => new TextEncoder().encode(s);
    expect(crc(new Uint8Array(0))).toBe(0);
    expect(crc(ascii('123456789'))).toBe(0xcbf43926);
    expect(crc(ascii('The quick brown fox jumps over the lazy dog'))).toBe(0x414fa339);
  });

  it('continues a running sum over split input', () => {
    const all = Uint8Array.from({ length: 1000 }, (_, i) => (i * 7) & 0xff);
    expect(crc(all.subarray(400), crc(all.subarray(0, 400)))).toBe(crc(all));
  });
});

describe('crc32 implementations', () => {
  it('the native and the table-driven one agree on random data and seeds', () => {
    let x = 12345;
    const next = (): number => { x = (x * 1103515245 + 12345) >>> 0; return x; };
    for (let round = 0; round < 200; round++) {
      const bytes = Uint8Array.from({ length: next() % 5000 }, () => next() & 0xff);
      const seed = round % 2 === 0 ? 0 : next();
      expect(crc32(bytes, seed)).toBe(crc32Table(bytes, seed));
    }
  });
});
