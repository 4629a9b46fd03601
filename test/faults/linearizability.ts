// A linearizability checker for register histories: Wing & Gong's search with Lowe's
// memoization ("Testing for linearizability", Lowe 2017; the algorithm Porcupine implements).
//
// Registers are independent, so a history is linearizable iff each key's sub-history is
// (P-compositionality); each key is searched on its own. Within a key, the search walks a list of
// call and return entries in time order. It may linearize any operation whose call comes before
// the first remaining return; reaching a return whose operation is not yet linearized means the
// choices so far were wrong, so it backtracks. A (linearized set, register value) pair already
// seen cannot lead anywhere new, so the search skips it. Search (below) adds reductions that keep
// the search small; a test checks it against brute force.
//
// Outcomes: `ok` operations must take effect inside their interval. `fail` writes and reads are
// dropped (they did nothing); a `fail` cas is a read that saw a value other than `from`. `info`
// and never-completed writes and cases ("maybe" operations) may take effect any time after their
// call, or never: they have no return entry, and the search ends as soon as every definite
// operation is placed (the rest can go last, which is the same as never). `info` reads constrain
// nothing and are dropped.
//
// A failure is narrowed down to the shortest failing prefix of the key's history, whose last
// return is the culprit's: prefixes of a linearizable history are linearizable, with operations
// pending at the cut counted as maybe ones.

import { performance } from 'node:perf_hooks';
import { SeededPrng } from '../../src/raft/prng.ts';
import { pairOperations, type HistoryEvent, type Operation } from './history.ts';

export interface CheckOptions {
  /** Budget for the whole check, narrowing down a failure included. Default: no limit. */
  timeoutMs?: number;
  /** Most configurations one search may remember, a few hundred bytes each, so that a hard
   *  history answers `unknown` instead of running out of memory. Default: 1,000,000, or 50 per
   *  operation on the key when that is more (a linearizable history needs about 15). */
  configurationsMax?: number;
}

const defaultConfigurationsMax = 1_000_000;
const defaultConfigurationsPerOp = 50;

export type CheckResult =
  | { ok: true }
  /**
   * `culprit`: the operation whose completion no order explains: the history up to its
   * completion is not linearizable, the history just before it is. `ops`: the culprit and the
   * operations around it, in invocation order.
   */
  | { ok: false; key: string; reason: string; culprit: Operation; ops: Operation[] }
  /** The search ran out of time, or of room for configurations (`search-limit`). */
  | { ok: 'unknown'; key: string; reason: 'timeout' | 'search-limit' };

/**
 * Checks that a history of register operations is linearizable, key by key, smallest key first.
 * A key found not linearizable is reported at once; a key the search gave up on is reported only
 * when no other key fails. Throws a HistoryError when the history breaks the recording rules
 * (see pairOperations).
 */
export function checkLinearizable(events: readonly HistoryEvent[], opts: CheckOptions = {}): CheckResult {
  const deadline = performance.now() + (opts.timeoutMs ?? Infinity);
  const byKey = new Map<string, Operation[]>();
  for (const op of pairOperations(events)) {
    const list = byKey.get(op.key);
    if (list === undefined) byKey.set(op.key, [op]);
    else list.push(op);
  }
  const keys = [...byKey.entries()].sort((x, y) => x[1].length - y[1].length);
  let unknown: CheckResult | undefined;
  for (const [key, ops] of keys) {
    const configurationsMax = opts.configurationsMax
      ?? Math.max(defaultConfigurationsMax, defaultConfigurationsPerOp * ops.length);
    const limits: Limits = { deadline, configurationsMax };
    const history = new KeyHistory(ops);
    // A value from nowhere fails without a search, which would have to be exhaustive to say so.
    const impossible = history.firstImpossibleReturn();
    if (impossible >= 0) return explainFailure(key, history, impossible + 1, -1, limits);
    const full = history.search(history.eventCount, limits);
    if (full.verdict === 'fail') return explainFailure(key, history, history.eventCount, full.furthestEvent, limits);
    if (full.verdict !== 'ok') unknown ??= { ok: 'unknown', key, reason: full.verdict };
  }
  return unknown ?? { ok: true };
}

/** A one-line description of an operation, for failure reports. */
export function describeOperation(op: Operation): string {
  const q = (v: string | null | undefined): string => (v === null ? 'null' : JSON.stringify(v));
  const what = op.op === 'write' ? `write ${q(op.value)}`
    : op.op === 'cas' ? `cas ${q(op.from)} -> ${q(op.value)}`
    : op.outcome === 'ok' ? `read -> ${q(op.value)}` : 'read';
  const end = op.completeTime === undefined ? '...' : op.completeTime.toFixed(3);
  return `process ${op.process} ${what} on ${JSON.stringify(op.key)}: ${op.outcome} `
    + `[${op.invokeTime.toFixed(3)}, ${end}] (events ${op.invokeIndex}-${op.completeIndex ?? '...'})`;
}

// ---- Failure reports. ----

/** Most operations a failure report lists. */
const windowOpsMax = 40;
/** Operations completed before the culprit's call that a report lists. */
const precedingOpsMax = 5;
/** Writers of the value the culprit read or compared that a report lists. */
const writerOpsMax = 3;

/**
 * Bisects for the shortest failing prefix of the key's history (prefixes of a linearizable
 * history are linearizable), knowing the first `failing` events fail. The shortest one ends with
 * the return of the operation that no order can explain; the report names it and the operations
 * around it. `furthestEvent` is where the failing search stopped, or -1.
 */
function explainFailure(key: string, history: KeyHistory, failing: number, furthestEvent: number, limits: Limits): CheckResult {
  let good = 0;
  let bad = failing;
  let bisected = true;
  const probe = (limit: number): SearchOutcome['verdict'] => {
    const verdict = history.search(limit, limits).verdict;
    if (verdict === 'fail') bad = limit;
    else if (verdict === 'ok') good = limit;
    else bisected = false;
    return verdict;
  };
  // The search never gets past the shortest failing prefix's last return, and usually reaches
  // it; and the last return of a failing prefix is usually the culprit. Trying those first spares
  // most of the failing searches, which are exhaustive, so slow.
  const hint = furthestEvent + 1;
  if (hint > good && hint < bad) probe(hint);
  if (bisected && bad - 1 > good) probe(bad - 1);
  while (bisected && bad - good > 1) probe((good + bad) >>> 1);
  const prefix = history.events.slice(0, bad);
  const lastReturn = prefix.filter((e) => !e.call).pop();
  if (lastReturn === undefined) throw new Error('a failing prefix must contain a return');
  const culprit = history.ops[lastReturn.op] as Operation;
  const inPrefix = prefix.filter((e) => e.call).map((e) => history.ops[e.op] as Operation);
  let reason = `${describeOperation(culprit)} cannot be linearized: no order of the ${inPrefix.length} operations `
    + `invoked on this key before it returned explains it`;
  const wanted = culprit.op === 'read' ? culprit.value : culprit.op === 'cas' ? culprit.from : undefined;
  const wrote = (o: Operation): boolean => o.op !== 'read' && o.outcome !== 'fail' && o.value === wanted;
  if (wanted !== undefined && wanted !== null && !history.ops.some(wrote)) {
    reason += `; no operation on this key wrote ${JSON.stringify(wanted)}`;
  }
  if (!bisected) reason += ' (narrowing it down ran out of time or room: the culprit may be earlier)';
  return { ok: false, key, reason, culprit, ops: windowAround(culprit, wanted, inPrefix) };
}

/** The culprit, the last writers of the value it wanted, the operations just before it and
 *  those concurrent with it, at most windowOpsMax, in invocation order. */
function windowAround(culprit: Operation, wanted: string | null | undefined, ops: Operation[]): Operation[] {
  const matters = ops.filter((o) => o.op === 'read' ? o.outcome === 'ok' : !(o.op === 'write' && o.outcome === 'fail'));
  const end = culprit.completeTime ?? Infinity;
  const writers = wanted === undefined ? []
    : matters.filter((o) => o.op !== 'read' && o.outcome !== 'fail' && o.value === wanted && o.invokeTime <= end);
  const preceding = matters
    .filter((o) => o.completeTime !== undefined && o.completeTime < culprit.invokeTime)
    .sort((x, y) => (y.completeTime ?? 0) - (x.completeTime ?? 0));
  const concurrent = matters
    .filter((o) => o.invokeTime <= end && (o.completeTime ?? Infinity) >= culprit.invokeTime)
    .sort((x, y) => Math.abs(x.invokeTime - culprit.invokeTime) - Math.abs(y.invokeTime - culprit.invokeTime));
  const chosen = new Set<Operation>([culprit, ...writers.slice(-writerOpsMax), ...preceding.slice(0, precedingOpsMax)]);
  for (const o of concurrent) {
    if (chosen.size >= windowOpsMax) break;
    chosen.add(o);
  }
  return [...chosen].sort((x, y) => x.invokeTime - y.invokeTime || x.invokeIndex - y.invokeIndex);
}

// ---- The register model. States are interned values: 0 is null. ----

const WRITE = 0;
const READ = 1;
const CAS = 2;
/** A cas whose compare failed: a read of anything but `from`. */
const CAS_FAILED = 3;
/** A cas of unknown outcome: swaps when the register holds `from`, else leaves it. */
const CAS_MAYBE = 4;
const REJECT = -1;

/** The register's value after the operation, or REJECT when the model forbids it. */
function step(kind: number, a: number, b: number, state: number): number {
  switch (kind) {
    case WRITE: return b;
    case READ: return state === a ? state : REJECT;
    case CAS: return state === a ? b : REJECT;
    case CAS_FAILED: return state !== a ? state : REJECT;
    default: return state === a ? b : state;
  }
}

// ---- One key's history: its events in time order, and problems built from prefixes of it. ----

interface Limits {
  deadline: number;
  configurationsMax: number;
}

interface SearchOutcome {
  verdict: 'ok' | 'fail' | 'timeout' | 'search-limit';
  /** With `fail`: the furthest return the search reached without getting past it, as an index
   *  into KeyHistory.events; -1 when none. explainFailure starts narrowing down from it. */
  furthestEvent: number;
}

interface EventRef {
  op: number;
  call: boolean;
  time: number;
}

class KeyHistory {
  /** Call and (for completed operations) return events, in time order; calls first on ties, so
   *  operations that touch at an instant count as concurrent rather than ordered. */
  readonly events: EventRef[] = [];
  private readonly values = new Map<string, number>();

  constructor(readonly ops: readonly Operation[]) {
    ops.forEach((op, i) => {
      this.events.push({ op: i, call: true, time: op.invokeTime });
      if (op.completeTime !== undefined) this.events.push({ op: i, call: false, time: op.completeTime });
    });
    this.events.sort((x, y) => x.time - y.time || Number(x.call === false) - Number(y.call === false) || x.op - y.op);
  }

  get eventCount(): number {
    return this.events.length;
  }

  /** Searches the prefix made of the first `eventLimit` events. */
  search(eventLimit: number, limits: Limits): SearchOutcome {
    return new Search(this.problem(eventLimit)).run(limits);
  }

  /**
   * The first return (an index into `events`) of a read or successful cas that wanted a value no
   * operation invoked by then carried; -1 when there is none. The history up to that return
   * fails. (A value carried only by a write that failed later is left to the search: the
   * history fails only once that write has failed.)
   */
  firstImpossibleReturn(): number {
    const firstWrite = new Map<string, number>();
    for (const op of this.ops) {
      if (op.op === 'read' || op.value === null || op.value === undefined) continue;
      firstWrite.set(op.value, Math.min(firstWrite.get(op.value) ?? Infinity, op.invokeTime));
    }
    return this.events.findIndex((e) => {
      const op = this.ops[e.op] as Operation;
      if (e.call || op.outcome !== 'ok' || op.op === 'write') return false;
      const wanted = op.op === 'read' ? op.value : op.from;
      return wanted !== null && wanted !== undefined && !((firstWrite.get(wanted) ?? Infinity) <= e.time);
    });
  }

  private intern(value: string | null | undefined): number {
    if (value === null || value === undefined) return 0;
    let id = this.values.get(value);
    if (id === undefined) {
      id = this.values.size + 1;
      this.values.set(value, id);
    }
    return id;
  }

  /**
   * The search problem for a prefix. An operation whose return falls outside the prefix is
   * pending there, so it counts as `info`: the prefix of a linearizable history is then
   * linearizable, which lets explainFailure bisect.
   */
  private problem(eventLimit: number): Problem {
    const returned = new Set<number>();
    const called: number[] = [];
    for (let r = 0; r < eventLimit; r++) {
      const e = this.events[r] as EventRef;
      if (e.call) called.push(e.op);
      else returned.add(e.op);
    }
    const definite: ModelOp[] = [];
    const maybe: ModelOp[] = [];
    for (const i of called) {
      const m = this.modelOp(i, returned.has(i));
      if (m !== undefined) (m.definite ? definite : maybe).push(m);
    }
    return buildProblem(definite, maybe, this.events.slice(0, eventLimit));
  }

  private modelOp(i: number, returned: boolean): ModelOp | undefined {
    const op = this.ops[i] as Operation;
    const outcome = returned ? op.outcome : 'pending';
    const a = this.intern(op.op === 'cas' ? op.from : op.value);
    const b = this.intern(op.value);
    if (op.op === 'read') return outcome === 'ok' ? { source: i, kind: READ, a, b, definite: true } : undefined;
    if (outcome === 'ok') return { source: i, kind: op.op === 'write' ? WRITE : CAS, a, b, definite: true };
    if (outcome === 'fail') return op.op === 'cas' ? { source: i, kind: CAS_FAILED, a, b, definite: true } : undefined;
    return { source: i, kind: op.op === 'write' ? WRITE : CAS_MAYBE, a, b, definite: false };
  }
}

interface ModelOp {
  /** Index into KeyHistory.ops. */
  source: number;
  kind: number;
  a: number;
  b: number;
  definite: boolean;
}

/**
 * Flat arrays for the search. Operations are numbered definite first, then maybe ones; entries
 * are numbered in time order, so comparing entry numbers compares times.
 */
interface Problem {
  ops: ModelOp[];
  definiteCount: number;
  /** Per entry: its operation's number, and 1 for a call. */
  entryOp: Int32Array;
  entryIsCall: Uint8Array;
  /** Per entry: its index in KeyHistory.events. */
  entryEvent: Int32Array;
  /** Per operation: its return entry, or -1 for maybe operations. */
  returnEntry: Int32Array;
  /** Interned values are below this. */
  valueCount: number;
}

function buildProblem(definite: ModelOp[], maybe: ModelOp[], events: EventRef[]): Problem {
  const ops = [...definite, ...maybe];
  const number = new Map<number, number>();
  ops.forEach((m, n) => number.set(m.source, n));
  const entryOp: number[] = [];
  const entryIsCall: number[] = [];
  const entryEvent: number[] = [];
  const returnEntry = new Int32Array(ops.length).fill(-1);
  events.forEach((e, i) => {
    const n = number.get(e.op);
    if (n === undefined || (!e.call && n >= definite.length)) return;
    if (!e.call) returnEntry[n] = entryOp.length;
    entryOp.push(n);
    entryIsCall.push(e.call ? 1 : 0);
    entryEvent.push(i);
  });
  return {
    ops, definiteCount: definite.length, returnEntry,
    valueCount: 1 + ops.reduce((max, m) => Math.max(max, m.a, m.b), 0),
    entryOp: Int32Array.from(entryOp), entryIsCall: Uint8Array.from(entryIsCall), entryEvent: Int32Array.from(entryEvent),
  };
}

// ---- The search. ----

/** Checks the clock once per this many steps. */
const clockCheckSteps = 1024;

/** Zobrist keys, two words per operation, shared by all searches. */
let zobrist = new Uint32Array(0);
function zobristKeys(count: number): Uint32Array {
  if (zobrist.length < 2 * count) {
    const prng = new SeededPrng(0x11ea);
    zobrist = new Uint32Array(Math.max(2 * count, 2 * zobrist.length));
    for (let i = 0; i < zobrist.length; i++) zobrist[i] = prng.nextUint32();
  }
  return zobrist;
}

/** Configurations seen with one set of definite operations and one register value. */
interface Seen {
  state: number;
  hash2: number;
  /** The definite bitset's words below `low` are all ones; the `length` words from `low` on
   *  are in the definite pool at `words`, and the rest are zeros. */
  low: number;
  words: number;
  length: number;
  /** Where in the maybe pool the sets of maybe operations linearized along with them are. */
  maybeSets: number[];
  /** The next configurations in the same slot of `seen`. */
  next: Seen | undefined;
}

/**
 * Depth-first search over linearization points with backtracking: Lowe's Algorithm 1 with its
 * configuration cache, and three refinements that keep the search small.
 *
 * - A read (or failed cas) that the register's value allows is linearized at once, without
 *   trying alternatives: it changes nothing and every operation that must precede it already
 *   has, so any linearization that places it later can place it now.
 * - Other candidates are tried in the order of their returns, the one due first first, so an
 *   operation with a long interval is placed late, where it is needed, instead of early and then
 *   undone across every operation since.
 * - Maybe operations are optional (one never linearized is one placed last), so a configuration
 *   is pruned when one with the same definite operations and value, and a subset of its maybe
 *   operations, was seen; and a maybe operation is placed only when some operation left could
 *   tell it from never happening.
 *
 * Entries live in doubly linked lists ("dancing links"): linearizing an operation unlinks its
 * call and return in O(1), and backtracking relinks them in reverse order. Definite entries are in
 * the main list, maybe operations' calls in a second one.
 */
class Search {
  private readonly next: Int32Array;
  private readonly prev: Int32Array;
  private readonly head: number;
  private readonly maybeHead: number;
  private readonly definiteBits: Uint32Array;
  private readonly maybeBits: Uint32Array;
  /** All words below `low` are full; none above `high` has a bit set. */
  private low = 0;
  private high = -1;
  private hash1 = 0;
  private hash2 = 0;
  private readonly seen = new Map<number, Seen>();
  private readonly definitePool = new WordPool();
  private readonly maybePool = new WordPool();
  private readonly keys: Uint32Array;
  private definiteLeft: number;
  /** The path, one frame per linearized operation: its entry, the register's value before it,
   *  and the candidates of the configuration it was chosen in (cand[frameCandPos..frameCandEnd)
   *  are those not tried yet). A forced frame had no alternatives: backtracking past it fails the
   *  configuration before it as well. */
  private depth = 0;
  private readonly frameEntry: Int32Array;
  private readonly frameState: Int32Array;
  private readonly frameCandPos: Int32Array;
  private readonly frameCandEnd: Int32Array;
  private readonly frameForced: Uint8Array;
  /** A stack of candidate lists, one per configuration on the path, the current one on top. */
  private cand = new Int32Array(1024);
  private candPos = 0;
  private candEnd = 0;
  /** Per value: operations not yet linearized that need the register to hold it (reads, cases),
   *  and failed cases that need it to hold anything else. A maybe operation is worth placing
   *  only when it makes one of them possible. */
  private readonly wanted: Int32Array;
  private readonly unwanted: Int32Array;
  /** Per value: maybe operations not yet linearized that would write it. */
  private readonly producers: Int32Array;
  /** Maybe operations not yet linearized whose value is wanted: the sum over values v with
   *  wanted[v] > 0 of producers[v]. With none, and no failed cas waiting for a change, no maybe
   *  operation is worth offering. */
  private usefulMaybe = 0;
  /** Per value: the stamp of the last collectCandidates that saw a candidate read want it. */
  private readonly readWants: Int32Array;
  private readStamp = 0;
  /** The furthest first return of the main list of any configuration collected. */
  private furthest = -1;
  /** Configurations remembered in `seen`, counting each set of maybe operations. */
  private configurations = 0;

  constructor(private readonly p: Problem) {
    const m = p.entryOp.length;
    const n = p.ops.length;
    this.head = m;
    this.maybeHead = m + 2;
    this.next = new Int32Array(m + 4);
    this.prev = new Int32Array(m + 4);
    // Sentinels: head m, tail m+1, maybe head m+2, maybe tail m+3.
    let last = m;
    let lastMaybe = m + 2;
    for (let e = 0; e < m; e++) {
      if ((p.entryOp[e] as number) >= p.definiteCount) lastMaybe = this.link(lastMaybe, e);
      else last = this.link(last, e);
    }
    this.link(last, m + 1);
    this.link(lastMaybe, m + 3);
    this.definiteBits = new Uint32Array(Math.ceil(p.definiteCount / 32));
    this.maybeBits = new Uint32Array(Math.ceil((n - p.definiteCount) / 32));
    this.keys = zobristKeys(p.definiteCount);
    this.definiteLeft = p.definiteCount;
    this.frameEntry = new Int32Array(n);
    this.frameState = new Int32Array(n);
    this.frameCandPos = new Int32Array(n);
    this.frameCandEnd = new Int32Array(n);
    this.frameForced = new Uint8Array(n);
    this.wanted = new Int32Array(p.valueCount);
    this.unwanted = new Int32Array(p.valueCount);
    this.producers = new Int32Array(p.valueCount);
    this.readWants = new Int32Array(p.valueCount);
    for (let i = 0; i < n; i++) this.countWants(i, 1);
  }

  run(limits: Limits): SearchOutcome {
    let state = 0;
    let steps = 0;
    let fresh = true;
    for (;;) {
      if (this.definiteLeft === 0) return this.outcome('ok');
      if (++steps % clockCheckSteps === 0) {
        if (performance.now() > limits.deadline) return this.outcome('timeout');
        if (this.configurations > limits.configurationsMax) return this.outcome('search-limit');
      }
      if (fresh) {
        fresh = false;
        const read = this.collectCandidates(state);
        if (read >= 0 && this.maybeMark(this.p.entryOp[read] as number, state)) {
          this.choose(read, state, true);
          fresh = true;
          continue;
        }
        // Else a forced read led to a configuration seen before, and this one fails: it has no
        // candidates, so the search backtracks.
      }
      if (this.candPos < this.candEnd) {
        const c = this.cand[this.candPos++] as number;
        const after = this.tryStep(c, state);
        if (after !== REJECT && this.maybeMark(this.p.entryOp[c] as number, after)) {
          this.choose(c, state, false);
          state = after;
          fresh = true;
        }
        continue;
      }
      if (!this.backtrack()) return this.outcome('fail');
      state = this.frameState[this.depth] as number;
    }
  }

  private outcome(verdict: SearchOutcome['verdict']): SearchOutcome {
    const furthestEvent = this.furthest < 0 ? -1 : this.p.entryEvent[this.furthest] as number;
    return { verdict, furthestEvent };
  }

  /**
   * Pushes the candidates of the current configuration as the new top list: the calls before the
   * first return of the main list, by return, then the maybe operations called before that
   * return when any is worth placing. Returns a read-like candidate the register's value allows
   * instead, pushing nothing, when there is one; else -1.
   */
  private collectCandidates(state: number): number {
    const p = this.p;
    const base = this.candEnd;
    const stamp = ++this.readStamp;
    let e = this.next[this.head] as number;
    for (; p.entryIsCall[e] === 1; e = this.next[e] as number) {
      const op = p.ops[p.entryOp[e] as number] as ModelOp;
      if (op.kind === READ || op.kind === CAS_FAILED) {
        if (step(op.kind, op.a, op.b, state) !== REJECT) {
          this.candEnd = this.candPos = base;
          return e;
        }
        if (op.kind === READ) this.readWants[op.a] = stamp;
        continue;
      }
      this.pushCandidate(e);
    }
    if (e < this.head && e > this.furthest) this.furthest = e;
    this.sortCandidates(base, this.candEnd, stamp);
    if (this.usefulMaybe > 0 || (this.unwanted[state] as number) > 0) {
      // Entry numbers follow time, and the maybe tail sentinel is above every entry.
      for (let m = this.next[this.maybeHead] as number; m < e; m = this.next[m] as number) this.pushCandidate(m);
    }
    this.candPos = base;
    return -1;
  }

  private pushCandidate(e: number): void {
    if (this.candEnd === this.cand.length) {
      const bigger = new Int32Array(2 * this.cand.length);
      bigger.set(this.cand);
      this.cand = bigger;
    }
    this.cand[this.candEnd++] = e;
  }

  /**
   * Orders definite candidates: first those that write a value a waiting read wants (stamped in
   * readWants), then by return. Insertion sort: lists are about as long as the concurrency.
   */
  private sortCandidates(from: number, to: number, stamp: number): void {
    const cand = this.cand;
    const key = (e: number): number => {
      const n = this.p.entryOp[e] as number;
      const op = this.p.ops[n] as ModelOp;
      const ret = this.p.returnEntry[n] as number;
      return this.readWants[op.b] === stamp ? ret : ret + this.p.entryOp.length;
    };
    for (let i = from + 1; i < to; i++) {
      const e = cand[i] as number;
      const k = key(e);
      let j = i - 1;
      while (j >= from && key(cand[j] as number) > k) {
        cand[j + 1] = cand[j] as number;
        j--;
      }
      cand[j + 1] = e;
    }
  }

  /** The register value after the candidate's operation; REJECT when the model forbids it, or
   *  when it is a maybe operation that no remaining operation could tell from never happening. */
  private tryStep(e: number, state: number): number {
    const n = this.p.entryOp[e] as number;
    const op = this.p.ops[n] as ModelOp;
    const after = step(op.kind, op.a, op.b, state);
    if (n < this.p.definiteCount || after === REJECT) return after;
    return after !== state && ((this.wanted[after] as number) > 0 || (this.unwanted[state] as number) > 0) ? after : REJECT;
  }

  /** Linearizes the entry's operation, which maybeMark has marked, from the register at `state`. */
  private choose(e: number, state: number, forced: boolean): void {
    const d = this.depth++;
    this.frameEntry[d] = e;
    this.frameState[d] = state;
    this.frameCandPos[d] = this.candPos;
    this.frameCandEnd[d] = this.candEnd;
    this.frameForced[d] = forced ? 1 : 0;
    this.lift(e);
    const n = this.p.entryOp[e] as number;
    if (n < this.p.definiteCount) this.definiteLeft--;
    this.countWants(n, -1);
  }

  /** Undoes choices up to and including the last unforced one, whose frame is then at `depth`
   *  and whose remaining candidates are on top; false when none is left. */
  private backtrack(): boolean {
    while (this.depth > 0) {
      const d = --this.depth;
      const e = this.frameEntry[d] as number;
      const n = this.p.entryOp[e] as number;
      this.toggle(n);
      this.unlift(e);
      if (n < this.p.definiteCount) this.definiteLeft++;
      this.countWants(n, 1);
      this.candPos = this.frameCandPos[d] as number;
      this.candEnd = this.frameCandEnd[d] as number;
      if (this.frameForced[d] === 0) return true;
    }
    return false;
  }

  /** Counts operation n in (delta 1) or out of (delta -1) the wants of the operations left. */
  private countWants(n: number, delta: number): void {
    const op = this.p.ops[n] as ModelOp;
    if (op.kind === CAS_FAILED) {
      this.unwanted[op.a] = (this.unwanted[op.a] as number) + delta;
    } else if (op.kind !== WRITE) {
      const was = (this.wanted[op.a] as number) > 0;
      this.wanted[op.a] = (this.wanted[op.a] as number) + delta;
      const is = (this.wanted[op.a] as number) > 0;
      if (was !== is) this.usefulMaybe += (is ? 1 : -1) * (this.producers[op.a] as number);
    }
    if (n >= this.p.definiteCount) {
      this.producers[op.b] = (this.producers[op.b] as number) + delta;
      if ((this.wanted[op.b] as number) > 0) this.usefulMaybe += delta;
    }
  }

  private link(a: number, b: number): number {
    this.next[a] = b;
    this.prev[b] = a;
    return b;
  }

  private unlink(e: number): void {
    this.next[this.prev[e] as number] = this.next[e] as number;
    this.prev[this.next[e] as number] = this.prev[e] as number;
  }

  private relink(e: number): void {
    this.next[this.prev[e] as number] = e;
    this.prev[this.next[e] as number] = e;
  }

  private lift(e: number): void {
    this.unlink(e);
    const r = this.p.returnEntry[this.p.entryOp[e] as number] as number;
    if (r >= 0) this.unlink(r);
  }

  private unlift(e: number): void {
    const r = this.p.returnEntry[this.p.entryOp[e] as number] as number;
    if (r >= 0) this.relink(r);
    this.relink(e);
  }

  /** Flips operation n's bit, and for a definite one its share of the hash and the low and high marks. */
  private toggle(n: number): void {
    const d = this.p.definiteCount;
    if (n >= d) {
      const i = n - d;
      this.maybeBits[i >>> 5] = ((this.maybeBits[i >>> 5] as number) ^ (1 << (i & 31))) >>> 0;
      return;
    }
    const bits = this.definiteBits;
    const w = n >>> 5;
    bits[w] = ((bits[w] as number) ^ (1 << (n & 31))) >>> 0;
    this.hash1 = (this.hash1 ^ (this.keys[2 * n] as number)) >>> 0;
    this.hash2 = (this.hash2 ^ (this.keys[2 * n + 1] as number)) >>> 0;
    if (bits[w] !== 0) this.high = Math.max(this.high, w);
    else while (this.high >= 0 && bits[this.high] === 0) this.high--;
    if (bits[w] !== 0xffffffff) this.low = Math.min(this.low, w);
    else while (this.low < bits.length && bits[this.low] === 0xffffffff) this.low++;
  }

  /**
   * Marks operation n linearized, leaving the register at `state`. Returns false, and unmarks it,
   * when the configuration is subsumed by one seen before: same definite operations, same value,
   * and a subset of its maybe operations. Every configuration seen either is on the current path
   * or led nowhere.
   */
  private maybeMark(n: number, state: number): boolean {
    this.toggle(n);
    const slot = (this.hash1 ^ Math.imul(state + 1, 0x9e3779b1)) >>> 0;
    const first = this.seen.get(slot);
    let same = first;
    while (same !== undefined && !this.sameDefinite(same, state)) same = same.next;
    if (same === undefined) {
      const length = Math.max(0, this.high + 1 - this.low);
      same = {
        state, hash2: this.hash2, low: this.low, length, maybeSets: [], next: first,
        words: this.definitePool.store(this.definiteBits, this.low, this.low + length),
      };
      this.seen.set(slot, same);
    } else if (same.maybeSets.some((m) => this.maybeIncludes(m))) {
      this.toggle(n);
      return false;
    }
    same.maybeSets.push(this.maybePool.store(this.maybeBits, 0, this.maybeBits.length));
    this.configurations++;
    return true;
  }

  private sameDefinite(s: Seen, state: number): boolean {
    if (s.state !== state || s.hash2 !== this.hash2 || s.low !== this.low) return false;
    if (s.length !== Math.max(0, this.high + 1 - this.low)) return false;
    for (let i = 0; i < s.length; i++) if (this.definitePool.at(s.words + i) !== this.definiteBits[this.low + i]) return false;
    return true;
  }

  /** Whether the current maybe set includes the one stored at `m`. */
  private maybeIncludes(m: number): boolean {
    for (let i = 0; i < this.maybeBits.length; i++) {
      if ((this.maybePool.at(m + i) & ~(this.maybeBits[i] as number)) !== 0) return false;
    }
    return true;
  }
}

/** Bitset words of remembered configurations, back to back in one growing array: a typed array
 *  per configuration would cost more in its header than in its bits. */
class WordPool {
  private words = new Uint32Array(1024);
  private used = 0;

  /** Appends src[from..to) and returns where it starts. */
  store(src: Uint32Array, from: number, to: number): number {
    const at = this.used;
    if (at + to - from > this.words.length) {
      const bigger = new Uint32Array(Math.max(2 * this.words.length, at + to - from));
      bigger.set(this.words.subarray(0, at));
      this.words = bigger;
    }
    this.words.set(src.subarray(from, to), at);
    this.used += to - from;
    return at;
  }

  at(i: number): number {
    return this.words[i] as number;
  }
}
