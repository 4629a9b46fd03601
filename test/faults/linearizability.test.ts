// The linearizability checker and the history format, on hand-made histories and on large random
// ones from a simulated register. Each violation test must be caught, or a passing fault test
// would mean nothing; each correct history must pass, or the fault tests would cry wolf.

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { afterAll, describe, expect, it } from 'vitest';
import { SeededPrng } from '../../src/raft/prng.ts';
import {
  HistoryError, HistoryWriter, pairOperations, parseHistory, readHistory,
  type CompletionEvent, type HistoryEvent, type InvokeEvent, type Operation,
} from './history.ts';
import { checkLinearizable, describeOperation, type CheckResult } from './linearizability.ts';

// ---- A small language for hand-made histories. Times are [invoke, complete] in ms. ----

type Outcome = 'ok' | 'fail' | 'info';
type Span = [number, number];
type Pair = [InvokeEvent, CompletionEvent];

const w = (process: number, value: string, [t0, t1]: Span, outcome: Outcome = 'ok', key = 'k'): Pair => [
  { type: 'invoke', process, op: 'write', key, value, time: t0 },
  { type: outcome, process, op: 'write', key, value, time: t1 },
];
const r = (process: number, value: string | null, [t0, t1]: Span, key = 'k'): Pair => [
  { type: 'invoke', process, op: 'read', key, time: t0 },
  { type: 'ok', process, op: 'read', key, value, time: t1 },
];
const cas = (process: number, from: string | null, value: string, [t0, t1]: Span, outcome: Outcome, key = 'k'): Pair => [
  { type: 'invoke', process, op: 'cas', key, from, value, time: t0 },
  { type: outcome, process, op: 'cas', key, from, value, time: t1 },
];

/** The events of the given operations in time order (invocations first on ties). */
function history(...pairs: Pair[]): HistoryEvent[] {
  return pairs.flat().sort((x, y) => x.time - y.time || Number(x.type !== 'invoke') - Number(y.type !== 'invoke'));
}

function expectOk(result: CheckResult): void {
  expect(result.ok === true ? 'linearizable' : JSON.stringify(result, null, 2)).toBe('linearizable');
}

function expectViolation(result: CheckResult): Extract<CheckResult, { ok: false }> {
  if (result.ok !== false) throw new Error(`expected a violation, got ${JSON.stringify(result)}`);
  return result;
}

describe('checkLinearizable on hand-made histories', () => {
  it('accepts sequential writes and reads, and a read of null before any write', () => {
    expectOk(checkLinearizable(history(
      r(1, null, [0, 1]), w(1, 'a', [2, 3]), r(2, 'a', [4, 5]), w(2, 'b', [6, 7]), r(1, 'b', [8, 9]),
    )));
    expectOk(checkLinearizable([]));
  });

  it('accepts concurrent writes observed in either order', () => {
    const writes = [w(1, 'a', [0, 10]), w(2, 'b', [0, 10]), r(3, 'a', [1, 9]), r(4, 'b', [2, 8])];
    expectOk(checkLinearizable(history(...writes, r(5, 'a', [11, 12]))));
    expectOk(checkLinearizable(history(...writes, r(5, 'b', [11, 12]))));
  });

  it('catches a stale read after a completed write', () => {
    const v = expectViolation(checkLinearizable(history(w(1, 'a', [0, 1]), w(2, 'b', [2, 3]), r(3, 'a', [4, 5]))));
    expect(v.key).toBe('k');
    expect(v.reason).toMatch(/^process 3 read -> "a"/);
    expect(v.ops.map((o) => o.process)).toEqual([1, 2, 3]);
  });

  it('catches a read of a value never written, and says so', () => {
    const v = expectViolation(checkLinearizable(history(w(1, 'a', [0, 1]), r(2, 'zzz', [2, 3]), w(1, 'b', [4, 5]))));
    expect(v.reason).toContain('no operation on this key wrote "zzz"');
    expect(v.ops.some((o) => o.op === 'read' && o.value === 'zzz')).toBe(true);
  });

  it('treats a value only a failed write carried as never written', () => {
    const v = expectViolation(checkLinearizable(history(w(1, 'a', [0, 1], 'fail'), r(2, 'a', [2, 3]))));
    expect(v.reason).toContain('no operation on this key wrote "a"');
  });

  it('catches reads going back in time while a write is in flight', () => {
    // Once a read has seen b, a later read may not see a: b's write has taken effect.
    expectViolation(checkLinearizable(history(
      w(1, 'a', [0, 1]), w(2, 'b', [2, 10]), r(3, 'b', [3, 4]), r(4, 'a', [5, 6]),
    )));
    // The same reads overlapping each other are fine: the read of a goes first.
    expectOk(checkLinearizable(history(
      w(1, 'a', [0, 1]), w(2, 'b', [2, 10]), r(3, 'b', [3, 6]), r(4, 'a', [4, 5]),
    )));
  });

  it('accepts correct cas outcomes', () => {
    expectOk(checkLinearizable(history(
      cas(1, null, 'a', [0, 1], 'ok'), cas(2, 'x', 'y', [2, 3], 'fail'), cas(1, 'a', 'b', [4, 5], 'ok'),
      cas(2, 'a', 'c', [6, 7], 'fail'), r(3, 'b', [8, 9]),
    )));
  });

  it('catches a cas that succeeded on the wrong value or failed on the right one', () => {
    expectViolation(checkLinearizable(history(w(1, 'a', [0, 1]), cas(2, 'b', 'c', [2, 3], 'ok'))));
    expectViolation(checkLinearizable(history(w(1, 'a', [0, 1]), cas(2, 'a', 'c', [2, 3], 'fail'))));
    // A successful swap is a write: a later read of the old value is stale.
    expectViolation(checkLinearizable(history(w(1, 'a', [0, 1]), cas(2, 'a', 'c', [2, 3], 'ok'), r(3, 'a', [4, 5]))));
  });

  it('lets a concurrent write explain a failed cas', () => {
    expectOk(checkLinearizable(history(w(1, 'a', [0, 1]), w(2, 'b', [2, 6]), cas(3, 'a', 'c', [3, 5], 'fail'))));
  });

  it('lets an info write take effect, late, or never', () => {
    const before = [w(1, 'a', [0, 1]), w(2, 'b', [2, 3], 'info')];
    expectOk(checkLinearizable(history(...before, r(3, 'b', [10, 11]))));
    expectOk(checkLinearizable(history(...before, r(3, 'a', [10, 11]))));
    // Long after the client gave up.
    expectOk(checkLinearizable(history(...before, r(3, 'a', [10, 11]), r(4, 'b', [12, 13]))));
  });

  it('catches an info write seen and then unseen', () => {
    const v = expectViolation(checkLinearizable(history(
      w(1, 'a', [0, 1]), w(2, 'b', [2, 3], 'info'), r(3, 'b', [10, 11]), r(4, 'a', [12, 13]),
    )));
    expect(v.reason).toMatch(/^process 4 read -> "a"/);
  });

  it('does not let an info write take effect before its invocation', () => {
    expectViolation(checkLinearizable(history(r(1, 'b', [0, 1]), w(2, 'b', [2, 3], 'info'))));
  });

  it('lets an info cas swap or not, but only from its expected value', () => {
    const before = [w(1, 'a', [0, 1]), cas(2, 'a', 'b', [2, 3], 'info')];
    expectOk(checkLinearizable(history(...before, r(3, 'b', [10, 11]))));
    expectOk(checkLinearizable(history(...before, r(3, 'a', [10, 11]))));
    expectViolation(checkLinearizable(history(w(1, 'x', [0, 1]), cas(2, 'a', 'b', [2, 3], 'info'), r(3, 'b', [10, 11]))));
  });

  it('treats an operation the history never completed as info', () => {
    const pending = w(2, 'b', [2, 3])[0];
    expectOk(checkLinearizable(history(w(1, 'a', [0, 1]), r(3, 'b', [10, 11])).concat(pending).sort((x, y) => x.time - y.time)));
  });

  it('ignores info and failed reads', () => {
    const infoRead: Pair = [
      { type: 'invoke', process: 2, op: 'read', key: 'k', time: 2 },
      { type: 'info', process: 2, op: 'read', key: 'k', time: 3, error: 'timeout' },
    ];
    expectOk(checkLinearizable(history(w(1, 'a', [0, 1]), infoRead, r(3, 'a', [4, 5]))));
  });

  it('checks keys independently and names the broken one', () => {
    const v = expectViolation(checkLinearizable(history(
      w(1, 'a', [0, 1], 'ok', 'k1'), r(2, 'a', [2, 3], 'k1'),
      w(3, 'a', [0, 1], 'ok', 'k2'), r(4, 'a', [2, 3], 'k1'), r(5, null, [4, 5], 'k2'),
      r(6, null, [0, 1], 'k3'),
    )));
    expect(v.key).toBe('k2');
    expect(v.ops.every((o) => o.key === 'k2')).toBe(true);
  });

  it('rejects histories that break the recording rules', () => {
    const [invoke, done] = w(1, 'a', [0, 1]);
    expect(() => checkLinearizable([done])).toThrow(HistoryError);
    expect(() => checkLinearizable([invoke, { ...invoke, time: 0.5 }])).toThrow(/previous operation is open/);
    expect(() => checkLinearizable([invoke, w(1, 'b', [0, 1])[1]])).toThrow(/does not match/);
    expect(() => checkLinearizable([invoke, { ...done, time: -1 }])).toThrow(/before its invoke/);
    const [i2, d2] = w(1, 'b', [2, 3], 'info');
    const [i3] = r(1, null, [4, 5]);
    expect(() => checkLinearizable([i2, d2, i3])).toThrow(/after an info/);
  });

  it('describes operations for reports', () => {
    const [op] = pairOperations(cas(7, null, 'v1', [1, 2.5], 'fail'));
    expect(op && describeOperation(op)).toBe('process 7 cas null -> "v1" on "k": fail [1.000, 2.500] (events 0-1)');
  });
});

// ---- A brute-force reference, to check the search and its reductions against. ----

/** Whether some order of the operations explains them, trying every order (remembering only
 *  what failed). Definite operations must be placed, info ones may be, each after every
 *  operation that returned before it was invoked. Up to 30 operations. */
function bruteForceLinearizable(events: HistoryEvent[]): boolean {
  const ops = pairOperations(events).filter((o) => !(o.op === 'read' && o.outcome !== 'ok') && !(o.op === 'write' && o.outcome === 'fail'));
  const definite = (o: Operation): boolean => o.outcome === 'ok' || o.outcome === 'fail';
  const failed = new Set<string>();
  const search = (placed: number, value: string | null): boolean => {
    const isPlaced = (i: number): boolean => (placed & (1 << i)) !== 0;
    if (ops.every((o, i) => isPlaced(i) || !definite(o))) return true;
    const key = `${placed}:${value}`;
    if (failed.has(key)) return false;
    for (const [i, o] of ops.entries()) {
      if (isPlaced(i)) continue;
      const mustFollow = ops.some((x, j) => !isPlaced(j) && j !== i && definite(x) && x.completeTime !== undefined && x.completeTime < o.invokeTime);
      if (mustFollow) continue;
      let next: string | null | undefined;
      if (o.op === 'write') next = o.value;
      else if (o.op === 'read') next = o.value === value ? value : undefined;
      else if (o.outcome === 'ok') next = o.from === value ? o.value : undefined;
      else if (o.outcome === 'fail') next = o.from !== value ? value : undefined;
      else next = o.from === value ? o.value : value;
      if (next !== undefined && search(placed | (1 << i), next)) return true;
    }
    failed.add(key);
    return false;
  };
  return search(0, null);
}

/** The culprit's completion is the first event after which no order explains the history
 *  (events at one instant ordered as the checker does: invocations, then completions by
 *  invocation order). */
function expectCulprit(events: HistoryEvent[], culprit: Operation): void {
  const ops = pairOperations(events);
  const rank = (i: number): [number, number, number] => {
    const e = events[i] as HistoryEvent;
    const op = ops.findIndex((o) => o.invokeIndex === i || o.completeIndex === i);
    return [e.time, e.type === 'invoke' ? 0 : 1, op];
  };
  const before = (x: [number, number, number], y: [number, number, number]): boolean =>
    x[0] < y[0] || (x[0] === y[0] && (x[1] < y[1] || (x[1] === y[1] && x[2] < y[2])));
  const last = rank(culprit.completeIndex ?? -1);
  const upTo = events.filter((e, i) => e.type !== 'info' && (before(rank(i), last) || i === culprit.completeIndex));
  const justBefore = upTo.filter((e) => e !== events[culprit.completeIndex ?? -1]);
  expect(bruteForceLinearizable(upTo)).toBe(false);
  expect(bruteForceLinearizable(justBefore)).toBe(true);
}

/** A small random history on one key, linearizable or not, with ties and every outcome. */
function smallRandomHistory(prng: SeededPrng, opsMax: number): HistoryEvent[] {
  const values = ['a', 'b', 'c'];
  const pick = (): string => values[prng.nextInt(values.length)] ?? 'a';
  const pickOrNull = (): string | null => (prng.chance(0.25) ? null : pick());
  const pairs: Pair[] = [];
  const count = 2 + prng.nextInt(opsMax - 1);
  for (let p = 0; p < count; p++) {
    const t0 = prng.nextInt(2 * count);
    const span: Span = [t0, t0 + prng.nextInt(5)];
    const roll = prng.nextFloat();
    const outcome: Outcome = prng.chance(0.2) ? 'info' : prng.chance(0.15) ? 'fail' : 'ok';
    if (roll < 0.35) pairs.push(w(p, pick(), span, outcome));
    else if (roll < 0.75) pairs.push(outcome === 'ok' ? r(p, pickOrNull(), span) : w(p, pick(), span, 'fail'));
    else pairs.push(cas(p, pickOrNull(), pick(), span, outcome));
  }
  return history(...pairs);
}

/**
 * Runs the checker and the brute force on one history: they must agree, and on a violation the
 * checker must name the right culprit. Returns whether the history is linearizable.
 */
function agreesWithBruteForce(i: number, events: HistoryEvent[]): boolean {
  const expected = bruteForceLinearizable(events);
  const result = checkLinearizable(events);
  if ((result.ok === true) !== expected) {
    throw new Error(`history ${i}: checker says ${JSON.stringify(result)}, brute force says ${expected}\n`
      + events.map((e) => JSON.stringify(e)).join('\n'));
  }
  if (!expected) expectCulprit(events, expectViolation(result).culprit);
  return expected;
}

/** Checks `count` random histories against brute force; returns how many were linearizable. */
function compareWithBruteForce(seed: number, count: number, opsMax: number): number {
  const prng = new SeededPrng(seed);
  let linearizable = 0;
  for (let i = 0; i < count; i++) {
    const events = smallRandomHistory(prng, opsMax);
    if (agreesWithBruteForce(i, events)) linearizable++;
  }
  return linearizable;
}

describe('checkLinearizable against brute force', () => {
  // Both verdicts must be well represented, or the comparison would prove little.
  it('agrees on 3,000 random histories of up to 7 operations, and names the right culprit', () => {
    const linearizable = compareWithBruteForce(2024, 3000, 7);
    expect(linearizable).toBeGreaterThan(600);
    expect(linearizable).toBeLessThan(2400);
  });

  it('agrees on 300 random histories of up to 16 operations', () => {
    const linearizable = compareWithBruteForce(2025, 300, 16);
    expect(linearizable).toBeGreaterThan(30);
    expect(linearizable).toBeLessThan(270);
  });
});

// ---- Random histories from a simulated register. ----

interface GenOptions {
  seed: number;
  ops: number;
  processes: number;
  keys: string[];
  /** Share of operations that time out and are recorded as info. */
  infoRate: number;
}

interface GenOp {
  key: string;
  op: 'write' | 'read' | 'cas';
  from: string | null;
  value: string | null;
  call: number;
  ret: number;
  /** When it takes effect; undefined for an info operation that never does. */
  at: number | undefined;
  info: boolean;
  process: number;
  ok: boolean;
}

/**
 * A linearizable history by construction: each operation takes effect on a real register at a
 * random point inside its interval (an info one at a random point after its invocation, or never),
 * and its outcome is what the register did.
 */
function generateHistory(o: GenOptions): { events: HistoryEvent[]; ops: GenOp[] } {
  const prng = new SeededPrng(o.seed);
  const free = new Array<number>(o.processes).fill(0);
  const pid = Array.from({ length: o.processes }, (_, i) => i);
  let nextPid = o.processes;
  const lastWritten = new Map<string, string[]>();
  const ops: GenOp[] = [];
  for (let i = 0; i < o.ops; i++) {
    const slot = free.indexOf(Math.min(...free));
    const call = (free[slot] ?? 0) + prng.nextFloat() * 0.5;
    const ret = call + 0.05 + prng.nextFloat() * (prng.chance(0.05) ? 30 : 3);
    const key = o.keys[prng.nextInt(o.keys.length)] ?? 'k';
    const info = prng.chance(o.infoRate);
    const roll = prng.nextFloat();
    const recent = lastWritten.get(key) ?? [];
    const op: GenOp = roll < 0.4 ? { op: 'write', from: null, value: `v${i}` } as GenOp
      : roll < 0.85 ? { op: 'read', from: null, value: null } as GenOp
      : { op: 'cas', from: recent[prng.nextInt(recent.length + 1)] ?? null, value: `v${i}` } as GenOp;
    if (op.op !== 'read') lastWritten.set(key, [...recent.slice(-2), op.value as string]);
    const at = !info ? call + prng.nextFloat() * (ret - call)
      : prng.chance(0.5) ? call + prng.nextFloat() * (ret - call) * 20 : undefined;
    ops.push({ ...op, key, call, ret, at, info, process: pid[slot] ?? 0, ok: true });
    free[slot] = ret;
    if (info) pid[slot] = nextPid++;
  }
  const register = new Map<string, string | null>();
  for (const op of ops.filter((x) => x.at !== undefined).sort((x, y) => (x.at ?? 0) - (y.at ?? 0))) {
    const current = register.get(op.key) ?? null;
    if (op.op === 'read') op.value = current;
    else if (op.op === 'write' || current === op.from) register.set(op.key, op.value);
    else op.ok = false;
  }
  return { events: eventsOf(ops), ops };
}

function eventsOf(ops: GenOp[]): HistoryEvent[] {
  const events: HistoryEvent[] = [];
  for (const op of ops) {
    const base = { process: op.process, key: op.key };
    const args = op.op === 'write' ? { op: 'write' as const, value: op.value as string }
      : op.op === 'cas' ? { op: 'cas' as const, from: op.from, value: op.value as string } : { op: 'read' as const };
    events.push({ type: 'invoke', ...base, ...args, time: op.call, node: `n${op.process % 3}` });
    const time = op.ret;
    if (op.info) events.push({ type: 'info', ...base, ...args, time });
    else if (!op.ok) events.push({ type: 'fail', ...base, ...args, time });
    else if (args.op === 'read') events.push({ type: 'ok', ...base, ...args, value: op.value, time });
    else events.push({ type: 'ok', ...base, ...args, time });
  }
  return events.sort((x, y) => x.time - y.time);
}

/** Replaces the value an ok read returned; the history's events are rebuilt. */
function corruptRead(ops: GenOp[], read: GenOp, value: string): HistoryEvent[] {
  return eventsOf(ops.map((o) => (o === read ? { ...o, value } : o)));
}

/**
 * A read that completed after a write of y that itself followed a completed write of x, with x:
 * returning x from that read is stale whatever the order of everything else, since every value
 * is written once.
 */
function staleCandidate(ops: GenOp[], prng: SeededPrng): { read: GenOp; stale: string } {
  const writes = ops.filter((o) => o.op === 'write' && !o.info);
  const reads = ops.filter((o) => o.op === 'read' && !o.info);
  for (let tries = 0; tries < 1000; tries++) {
    const read = reads[prng.nextInt(reads.length)] as GenOp;
    const y = writes.find((wy) => wy.key === read.key && wy.ret < read.call && writes.some((wx) => wx.key === read.key && wx.ret < wy.call));
    const x = y && writes.find((wx) => wx.key === read.key && wx.ret < y.call);
    if (x) return { read, stale: x.value as string };
  }
  throw new Error('no stale candidate');
}

/** Simulated histories, most with one read or cas argument changed to another value written:
 *  near misses, where the search has to look deep before it answers. */
function compareNearMisses(seed: number, count: number, ops: number): number {
  const prng = new SeededPrng(seed);
  let linearizable = 0;
  for (let i = 0; i < count; i++) {
    const gen = generateHistory({ seed: prng.nextUint32(), ops, processes: 4, keys: ['k'], infoRate: 0.15 });
    const written = gen.ops.filter((o) => o.op !== 'read').map((o) => o.value);
    const victims = gen.ops.filter((o) => o.op !== 'write' && !o.info);
    const victim = victims[prng.nextInt(victims.length + 1)];
    const other = written[prng.nextInt(written.length + 1)] ?? null;
    const events = victim === undefined ? gen.events
      : eventsOf(gen.ops.map((o) => (o !== victim ? o : o.op === 'read' ? { ...o, value: other } : { ...o, from: other })));
    if (agreesWithBruteForce(i, events)) linearizable++;
  }
  return linearizable;
}

describe('checkLinearizable against brute force on near misses', () => {
  it('agrees on 300 simulated histories of 16 operations, most with one value changed', () => {
    const linearizable = compareNearMisses(77, 300, 16);
    expect(linearizable).toBeGreaterThan(60);
    expect(linearizable).toBeLessThan(240);
  });
});

describe('checkLinearizable on simulated registers', () => {
  const seeds = [1, 2, 3, 4, 5];

  it.each(seeds)('accepts 2,000 operations by 8 processes on one key (seed %i)', (seed) => {
    const { events } = generateHistory({ seed, ops: 2000, processes: 8, keys: ['k'], infoRate: 0.01 });
    expectOk(checkLinearizable(events, { timeoutMs: 20_000 }));
  });

  it.each(seeds)('accepts 2,000 operations by 8 processes on 3 keys (seed %i)', (seed) => {
    const { events } = generateHistory({ seed, ops: 2000, processes: 8, keys: ['a', 'b', 'c'], infoRate: 0.02 });
    expectOk(checkLinearizable(events, { timeoutMs: 20_000 }));
  });

  it.each(seeds)('catches one read corrupted to a value never written (seed %i)', (seed) => {
    const { ops } = generateHistory({ seed, ops: 2000, processes: 8, keys: ['k'], infoRate: 0.01 });
    const reads = ops.filter((o) => o.op === 'read' && !o.info);
    const read = reads[new SeededPrng(seed).nextInt(reads.length)] as GenOp;
    const v = expectViolation(checkLinearizable(corruptRead(ops, read, 'never-written'), { timeoutMs: 20_000 }));
    expect(v.reason).toMatch(new RegExp(`^process ${read.process} read -> "never-written"`));
    expect(v.ops.length).toBeLessThanOrEqual(40);
  });

  it.each(seeds)('catches one read corrupted to a stale value (seed %i)', (seed) => {
    const { ops } = generateHistory({ seed, ops: 2000, processes: 8, keys: ['k'], infoRate: 0.01 });
    const { read, stale } = staleCandidate(ops, new SeededPrng(seed));
    const v = expectViolation(checkLinearizable(corruptRead(ops, read, stale), { timeoutMs: 20_000 }));
    expect(v.ops.some((o) => o.process === read.process && o.op === 'read' && o.value === stale)).toBe(true);
  });

  it('checks 5,000 operations by 10 processes on one key within seconds', () => {
    const { events } = generateHistory({ seed: 42, ops: 5000, processes: 10, keys: ['k'], infoRate: 0.01 });
    const start = performance.now();
    expectOk(checkLinearizable(events, { timeoutMs: 20_000 }));
    expect(performance.now() - start).toBeLessThan(10_000);
  });

  it('answers unknown when the time budget or the room for configurations runs out', () => {
    const { events } = generateHistory({ seed: 7, ops: 2000, processes: 8, keys: ['k'], infoRate: 0.01 });
    expect(checkLinearizable(events, { timeoutMs: 0 })).toEqual({ ok: 'unknown', key: 'k', reason: 'timeout' });
    expect(checkLinearizable(events, { configurationsMax: 100 })).toEqual({ ok: 'unknown', key: 'k', reason: 'search-limit' });
  });

  it('still reports a broken key after giving up on another', () => {
    const hard = generateHistory({ seed: 7, ops: 2000, processes: 8, keys: ['a'], infoRate: 0.01 }).events;
    const { ops } = generateHistory({ seed: 8, ops: 2500, processes: 8, keys: ['b'], infoRate: 0.01 });
    const read = ops.find((o) => o.op === 'read' && !o.info && o.call > 100) as GenOp;
    const broken = corruptRead(ops, read, 'never-written').map((e) => ({ ...e, process: e.process + 10_000 }));
    const merged = [...hard, ...broken].sort((x, y) => x.time - y.time);
    const v = expectViolation(checkLinearizable(merged, { configurationsMax: 100 }));
    expect(v.key).toBe('b');
    expect(v.culprit.process).toBe(read.process + 10_000);
  });
});

// ---- The file format. ----

describe('history files', () => {
  const dir = mkdtempSync(join(tmpdir(), 'shoal-history-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('round-trip through the writer and the parser', () => {
    const path = join(dir, 'round-trip.jsonl');
    const events = history(w(1, 'a', [0, 1]), r(2, 'a', [2, 3]), cas(3, 'a', 'b', [4, 5], 'info'));
    const writer = HistoryWriter.open(path);
    for (const e of events) writer.append(e);
    writer.close();
    writer.close();
    expect(writer.count).toBe(6);
    expect(() => writer.append(events[0] as HistoryEvent)).toThrow(/after close/);
    expect(readHistory(path)).toEqual({ events, errors: [] });
    expect(readFileSync(path, 'utf8').split('\n')[0]).toBe('{"type":"invoke","process":1,"op":"write","key":"k","value":"a","time":0}');
  });

  it('refuses to write an invalid event', () => {
    const writer = HistoryWriter.open(join(dir, 'invalid.jsonl'));
    const bad = { type: 'ok', process: 1, op: 'read', key: 'k', time: 1 } as unknown as HistoryEvent;
    expect(() => writer.append(bad)).toThrow(TypeError);
    writer.close();
  });

  it('reports the line numbers of malformed lines and keeps the rest', () => {
    const path = join(dir, 'malformed.jsonl');
    writeFileSync(path, [
      '{"type":"invoke","process":1,"op":"write","key":"k","value":"a","time":0,"node":"n1"}',
      '{"type":"ok","process":1,"op":"write","key":"k","value":"a","time":1}',
      '{"type":"invoke","process":2,"op":"read","key":"k","time":2',
      '',
      '{"type":"ok","process":2,"op":"read","key":"k","time":3}',
      '{"type":"done","process":2,"op":"read","key":"k","time":3}',
      '{"type":"invoke","process":2,"op":"read","key":"k","time":2,"colour":"red"}',
      '{"type":"invoke","process":-1,"op":"read","key":"k","time":2}',
      '{"type":"ok","process":2,"op":"read","key":"k","value":null,"time":3}',
      '',
    ].join('\n'));
    const parsed = readHistory(path);
    expect(parsed.errors.map((e) => e.line)).toEqual([3, 5, 6, 7, 8]);
    expect(parsed.errors[0]?.message).toMatch(/^not JSON/);
    expect(parsed.errors[1]?.message).toMatch(/value/);
    expect(parsed.events).toHaveLength(3);
    expect(parseHistory('').events).toEqual([]);
  });
});
