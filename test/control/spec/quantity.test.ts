import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  formatCpu, formatMemory, parseCpu, parseDuration, parseMemory, renderCpu, renderDuration, renderMemory,
} from '../../../src/resources/spec/quantity.ts';

const value = <T>(r: { ok: true; value: T } | { ok: false; message: string }): T | string => (r.ok ? r.value : `error: ${r.message}`);

describe('parseCpu', () => {
  it.each([
    ['500m', 500], ['0.5', 500], [0.5, 500], ['2', 2000], [2, 2000], ['1.5', 1500], ['0.001', 1], ['1500m', 1500], ['0', 0], [0.7, 700],
  ] as const)('%s is %d millicores', (input, millis) => {
    expect(value(parseCpu(input))).toBe(millis);
  });

  it.each([['0.0005', 'finer than one millicore'], ['1.5m', 'finer than one millicore'], ['two', 'not a CPU quantity'], ['-1', 'not a CPU quantity'], [1e-7, 'not a CPU quantity'], ['1 cpu', 'not a CPU quantity']] as const)(
    '%s is refused (%s)', (input, why) => {
      expect(value(parseCpu(input))).toContain(why);
    });
});

describe('parseMemory', () => {
  it.each([
    ['512Mi', 512 * 1024 ** 2], ['1Gi', 1024 ** 3], ['256M', 256e6], ['1.5Gi', 1.5 * 1024 ** 3], [1073741824, 1073741824],
    ['1073741824', 1073741824], ['10k', 10_000], ['2Ki', 2048], ['1T', 1e12], ['1Ti', 1024 ** 4], ['0', 0], ['0.7M', 700_000],
  ] as const)('%s is %d bytes', (input, bytes) => {
    expect(value(parseMemory(input))).toBe(bytes);
  });

  it.each([
    ['12 parsecs', 'not a memory quantity'], ['512m', 'ambiguous'], ['1g', 'ambiguous'], ['1K', 'ambiguous'], ['512MB', 'without the "B"'],
    ['1GiB', 'without the "B"'], ['1.1Ki', 'not a whole number of bytes'], [1.5, 'not a whole number of bytes'], ['1Pi', 'not one of'],
    ['-5Mi', 'not a memory quantity'], ['99999999999999999999', 'too large'],
  ] as const)('%s is refused (%s)', (input, why) => {
    expect(value(parseMemory(input))).toContain(why);
  });
});

describe('parseDuration', () => {
  it.each([
    ['10s', 10_000], ['1m30s', 90_000], ['500ms', 500], ['1h', 3_600_000], ['2h45m', 9_900_000], ['1.5s', 1500], ['0', 0], [0, 0], ['0s', 0], ['5m5ms', 300_005],
  ] as const)('%s is %d ms', (input, ms) => {
    expect(value(parseDuration(input))).toBe(ms);
  });

  it.each([[10, 'no unit'], ['10', 'no unit'], ['10 s', 'not a duration'], ['1d', 'not a duration'], ['10us', 'not a duration'], ['0.5ms', 'finer than one millisecond'], ['s', 'not a duration']] as const)(
    '%s is refused (%s)', (input, why) => {
      expect(value(parseDuration(input))).toContain(why);
    });
});

describe('rendering', () => {
  it('formats for people', () => {
    expect(formatMemory(2 * 1024 ** 3)).toBe('2 GiB');
    expect(formatMemory(1.5 * 1024 ** 3)).toBe('1.5 GiB');
    expect(formatMemory(300)).toBe('300 bytes');
    expect(formatCpu(500)).toBe('0.5 CPU');
    expect(formatCpu(2000)).toBe('2 CPUs');
  });

  it('renders exactly what parses back', () => {
    fc.assert(fc.property(fc.nat({ max: 2 ** 50 }), (bytes) => value(parseMemory(renderMemory(bytes))) === bytes));
    fc.assert(fc.property(fc.nat({ max: 1_024_000 }), (millis) => value(parseCpu(renderCpu(millis))) === millis));
    fc.assert(fc.property(fc.nat({ max: 86_400_000 }), (ms) => value(parseDuration(renderDuration(ms))) === ms));
    expect(renderDuration(90_000)).toBe('1m30s');
    expect(renderMemory(512 * 1024 ** 2)).toBe('512Mi');
    expect(renderCpu(1500)).toBe('1500m');
  });
});
