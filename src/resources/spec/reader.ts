// The strict reader the spec vocabulary is written in.
//
// A reader takes an unknown value and the path it was found at, and returns the normalized
// value or INVALID, having added every problem it found to the shared list. It never stops at
// the first problem: a person fixing a spec one error at a time learns the next only by
// applying again (the same promise mesh-host's declaration parser makes).
//
// A struct is a table of fields, and the table is the whole vocabulary of that struct: a key
// not in it is refused as an unknown field. There is no second list of what is allowed that
// could drift from what is read.
//
// Hand-written rather than zod because the messages and the paths are the product here
// (`services[1].update.parallelism: must be at least 1`), because checks across fields must run
// even when an unrelated field is wrong, and because quantities need exact parsing with hints.
// The stored (normalized) form is validated with zod (service-spec.ts).

import { assert } from '../../base/assert.ts';
import type { Parsed } from './quantity.ts';
import { specLimits } from './limits.ts';

export interface Problem {
  /** Where: `services[1].update.parallelism`, or `documents[3]` for a document of no known kind. */
  path: string;
  message: string;
}

export class Problems {
  readonly list: Problem[] = [];

  add(path: string, message: string): void {
    this.list.push({ path, message });
  }

  get count(): number {
    return this.list.length;
  }
}

export const INVALID: unique symbol = Symbol('invalid');
export type Read<T> = T | typeof INVALID;
export type Reader<T> = (value: unknown, at: string, problems: Problems) => Read<T>;

/** `at.key`, or `at["odd key"]` when the key is not a plain identifier. */
export function keyPath(at: string, key: string): string {
  const part = /^[A-Za-z_][A-Za-z0-9_-]*$/.test(key) ? key : JSON.stringify(key);
  if (at === '') return part;
  return part.startsWith('"') ? `${at}[${part}]` : `${at}.${part}`;
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** What a value is, for a message: "a string", "a list", "null". */
export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  if (typeof value === 'number') return `the number ${String(value)}`;
  if (typeof value === 'boolean') return `${String(value)} (a boolean)`;
  return `a ${typeof value}`;
}

export const string = (opts: { pattern?: RegExp; what?: string; maxChars?: number; nonEmpty?: boolean } = {}): Reader<string> =>
  (value, at, problems) => {
    if (typeof value !== 'string') {
      const quoteHint = typeof value === 'number' || typeof value === 'boolean' ? '; quote it in the file if text is meant (YAML reads 1.10 as the number 1.1, and true as a boolean)' : '';
      problems.add(at, `must be a string, not ${describe(value)}${quoteHint}`);
      return INVALID;
    }
    const maxChars = opts.maxChars ?? specLimits.stringCharsMax;
    if (value.length > maxChars) {
      problems.add(at, `is ${value.length} characters; at most ${maxChars}`);
      return INVALID;
    }
    if ((opts.nonEmpty ?? false) && value === '') {
      problems.add(at, 'must not be empty');
      return INVALID;
    }
    if (opts.pattern !== undefined && !opts.pattern.test(value)) {
      problems.add(at, `${JSON.stringify(value)} is not ${opts.what ?? 'valid'}`);
      return INVALID;
    }
    return value;
  };

export const boolean: Reader<boolean> = (value, at, problems) => {
  if (typeof value === 'boolean') return value;
  const hint = value === 'yes' || value === 'no' || value === 'true' || value === 'false' || value === 'on' || value === 'off'
    ? '; write true or false without quotes' : '';
  problems.add(at, `must be true or false, not ${describe(value)}${hint}`);
  return INVALID;
};

export const integer = (min: number, max: number): Reader<number> => (value, at, problems) => {
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    problems.add(at, `must be a whole number, not ${describe(value)}`);
    return INVALID;
  }
  if (value < min) {
    problems.add(at, `must be at least ${min}`);
    return INVALID;
  }
  if (value > max) {
    problems.add(at, `must be at most ${max}`);
    return INVALID;
  }
  return value;
};

export const oneOf = <T extends string>(choices: readonly T[]): Reader<T> => (value, at, problems) => {
  if (typeof value === 'string' && (choices as readonly string[]).includes(value)) return value as T;
  const shown = typeof value === 'string' ? JSON.stringify(value) : describe(value);
  problems.add(at, `${shown} is not one of ${choices.join(', ')}`);
  return INVALID;
};

/** A quantity (CPU, memory, duration) written as a number or a string, parsed by `parse`. */
export const quantity = (parse: (v: number | string) => Parsed<number>, min: number, max: number, show: (n: number) => string): Reader<number> =>
  (value, at, problems) => {
    if (typeof value !== 'number' && typeof value !== 'string') {
      problems.add(at, `must be a number or a string, not ${describe(value)}`);
      return INVALID;
    }
    const parsed = parse(value);
    if (!parsed.ok) {
      problems.add(at, parsed.message);
      return INVALID;
    }
    if (parsed.value < min) {
      problems.add(at, `must be at least ${show(min)}`);
      return INVALID;
    }
    if (parsed.value > max) {
      problems.add(at, `must be at most ${show(max)}`);
      return INVALID;
    }
    return parsed.value;
  };

export const list = <T>(item: Reader<T>, maxItems: number = specLimits.listItemsMax): Reader<T[]> => (value, at, problems) => {
  if (!Array.isArray(value)) {
    problems.add(at, `must be a list, not ${describe(value)}`);
    return INVALID;
  }
  if (value.length > maxItems) {
    problems.add(at, `has ${value.length} items; at most ${maxItems}`);
    return INVALID;
  }
  const out: T[] = [];
  let ok = true;
  value.forEach((v: unknown, i) => {
    const r = item(v, `${at}[${i}]`, problems);
    if (r === INVALID) ok = false;
    else out.push(r);
  });
  return ok ? out : INVALID;
};

/** A value that may be written as `null` to say "none" explicitly. */
export const nullable = <T>(read: Reader<T>): Reader<T | null> => (value, at, problems) =>
  value === null ? null : read(value, at, problems);

export interface Field<T> {
  read: Reader<T>;
  /** Absent: refused (required), or the default. A struct's default is the struct read from `{}`. */
  absent: { required: true } | { required: false; value: () => T };
}

export const required = <T>(read: Reader<T>): Field<T> => ({ read, absent: { required: true } });
export const withDefault = <T>(read: Reader<T>, value: () => T): Field<T> => ({ read, absent: { required: false, value } });
/** A nested struct whose absence means every one of its defaults. */
export const defaultStruct = <T>(read: Reader<T>): Field<T> => ({
  read,
  absent: {
    required: false,
    value: () => {
      const r = read({}, '', new Problems());
      assert(r !== INVALID, 'a struct with required fields cannot default to {}');
      return r;
    },
  },
});

export type Fields<S> = { [K in keyof S]-?: Field<S[K]> };

export interface FieldsRead<S> {
  /** Every field that was read successfully (or defaulted); invalid fields are absent. */
  values: Partial<S>;
  /** The keys the input actually had (some checks depend on what was written, not defaulted). */
  written: Set<string>;
  ok: boolean;
}

/** Reads a mapping by its field table: unknown keys, missing required fields and bad values are all reported. */
export function readFields<S>(value: unknown, at: string, problems: Problems, fields: Fields<S>): FieldsRead<S> | typeof INVALID {
  if (!isPlainObject(value)) {
    problems.add(at, `must be a mapping, not ${describe(value)}`);
    return INVALID;
  }
  const known = Object.keys(fields);
  // A key whose value is undefined (possible only from JavaScript callers; JSON and YAML have no
  // undefined) is absent.
  const given = Object.keys(value).filter((k) => value[k] !== undefined);
  let ok = true;
  for (const key of given) {
    if (Object.hasOwn(fields, key)) continue;
    const near = suggest(key, known);
    problems.add(keyPath(at, key), `unknown field${near === null ? '' : `; did you mean ${near}?`}`);
    ok = false;
  }
  const values: Partial<S> = {};
  for (const key of known as (keyof S & string)[]) {
    const field = fields[key];
    if (!Object.hasOwn(value, key) || value[key] === undefined) {
      if (field.absent.required) {
        problems.add(keyPath(at, key), 'is required');
        ok = false;
      } else {
        values[key] = field.absent.value();
      }
      continue;
    }
    const r = field.read(value[key], keyPath(at, key), problems);
    if (r === INVALID) ok = false;
    else values[key] = r;
  }
  return { values, written: new Set(given), ok };
}

/** A struct reader: the fields, then `build` (and any checks across fields) once every field read. */
export const struct = <S, T>(fields: Fields<S>, build: (s: S, at: string, problems: Problems) => Read<T>): Reader<T> =>
  (value, at, problems) => {
    const r = readFields(value, at, problems, fields);
    if (r === INVALID || !r.ok) return INVALID;
    return build(r.values as S, at, problems);
  };

/** The known name closest to a mistyped one (case, `_` and `-` ignored, or two edits away). */
export function suggest(key: string, known: readonly string[]): string | null {
  const squash = (s: string): string => s.toLowerCase().replace(/[_-]/g, '');
  let best: string | null = null;
  let bestDistance = 3;
  for (const k of known) {
    if (squash(k) === squash(key)) return k;
    const d = editDistance(key.toLowerCase(), k.toLowerCase(), bestDistance);
    if (d < bestDistance) {
      best = k;
      bestDistance = d;
    }
  }
  return best;
}

function editDistance(a: string, b: string, cap: number): number {
  if (Math.abs(a.length - b.length) >= cap) return cap;
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      cur.push(Math.min((prev[j] ?? 0) + 1, (cur[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + cost));
    }
    prev = cur;
  }
  return prev[b.length] ?? cap;
}
