// Checks that a decoded value is plain JSON, measures it, freezes it and writes it canonically.
// Commands arrive as msgpack, which can carry more than JSON (dates, big integers, binary,
// maps); a document must be exactly what a JSON client could have sent, so that every node and
// every reader sees the same thing.

import { docDepthMax } from './limits.ts';
import type { JsonObject } from './types.ts';

export interface Issue {
  path: string;
  message: string;
}

function isPlainObject(v: object): boolean {
  const proto: unknown = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/**
 * Where checkJson is: the caller's path and the keys below it, kept as a stack and joined only
 * when an issue is reported (joining at every key cost a string per value of every document).
 */
interface At {
  base: string;
  keys: (string | number)[];
}

function pathOf(at: At, key?: string | number): string {
  const keys = key === undefined ? at.keys : [...at.keys, key];
  return keys.reduce<string>((path, k) => (path === '' ? String(k) : `${path}.${k}`), at.base);
}

/** Appends an issue for the first non-JSON part of `v` found; returns whether `v` is JSON. */
function checkJson(v: unknown, at: At, depth: number, issues: Issue[]): boolean {
  if (v === null || typeof v === 'string' || typeof v === 'boolean') return true;
  if (typeof v === 'number') {
    if (Number.isFinite(v)) return true;
    issues.push({ path: pathOf(at), message: 'numbers must be finite' });
    return false;
  }
  if (typeof v !== 'object') {
    issues.push({ path: pathOf(at), message: `a ${typeof v} is not a JSON value` });
    return false;
  }
  if (depth >= docDepthMax) {
    issues.push({ path: pathOf(at), message: `documents may nest at most ${docDepthMax} levels` });
    return false;
  }
  if (Array.isArray(v)) {
    if (Object.getPrototypeOf(v) !== Array.prototype) {
      issues.push({ path: pathOf(at), message: 'not a plain array' });
      return false;
    }
    for (let i = 0; i < v.length; i++) if (!checkChild(v[i], i, at, depth, issues)) return false;
    return true;
  }
  if (!isPlainObject(v)) {
    issues.push({ path: pathOf(at), message: 'not a plain JSON object (dates, maps, binary and class instances are not JSON)' });
    return false;
  }
  for (const k in v) {
    if (!Object.hasOwn(v, k)) continue;
    // msgpackr silently renames this key on decode, so a document holding it would not survive.
    if (k === '__proto__') {
      issues.push({ path: pathOf(at, k), message: "the key '__proto__' is not allowed" });
      return false;
    }
    if (!checkChild((v as Record<string, unknown>)[k], k, at, depth, issues)) return false;
  }
  return true;
}

function checkChild(child: unknown, key: string | number, at: At, depth: number, issues: Issue[]): boolean {
  at.keys.push(key);
  const ok = checkJson(child, at, depth + 1, issues);
  at.keys.pop();
  return ok;
}

/** Whether `v` is a JSON object (not an array, not null) made only of JSON values. */
export function checkJsonObject(v: unknown, path: string, issues: Issue[]): v is JsonObject {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    issues.push({ path, message: 'a document must be a JSON object' });
    return false;
  }
  return checkJson(v, { base: path, keys: [] }, 0, issues);
}

/**
 * Bytes of the document serialized as JSON (UTF-8). The value must already be checked. The
 * store carries the size measured at validation along with each document rather than caching
 * it by identity: a WeakMap over 100,000 documents costs more in GC than it saves.
 */
export function jsonBytes(v: JsonObject): number {
  // Buffer.byteLength counts in native code, about twice as fast as a loop over char codes here.
  return Buffer.byteLength(JSON.stringify(v), 'utf8');
}

/** Freezes a value and everything inside it (stops at parts already frozen). */
export function deepFreeze<T>(v: T): T {
  if (typeof v !== 'object' || v === null || Object.isFrozen(v)) return v;
  for (const child of Object.values(v)) deepFreeze(child);
  return Object.freeze(v);
}

/** JSON with object keys sorted (by UTF-16 code units) and no whitespace: equal values, equal text. */
export function canonicalJson(v: unknown): string {
  if (v === null || typeof v !== 'object') return JSON.stringify(v) ?? 'null';
  if (Array.isArray(v)) return `[${v.map((x) => (x === undefined ? 'null' : canonicalJson(x))).join(',')}]`;
  const keys = Object.keys(v).filter((k) => (v as Record<string, unknown>)[k] !== undefined).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson((v as Record<string, unknown>)[k])}`).join(',')}}`;
}
