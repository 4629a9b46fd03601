// What the node records in each normal log entry, and the one total function that decodes it.
//
// An entry's bytes come from a proposer (any member, forwarded through the leader), so they are
// untrusted: a bug, a version skew or a hostile member can put anything there, and every node
// applies the same entry, again on every restart. So decoding never throws and never guesses:
//
// - bytes that are not an envelope this release can read are `invalid`: applied as a no-op with
//   an `invalid_command` result, identically on every node;
// - a well-formed envelope that needs a feature level above what this build supports, or is of a
//   kind this build does not know, is `newer`: it comes from a newer release, and applying it as a
//   no-op would let old and new nodes diverge, so the node stops applying (upgrade_required).
//
// Envelope fields (msgpack map; the first release wrote only p, s and d):
//   p  proposer incarnation (node id / boot id), so the proposer can answer its caller
//   s  the proposer's sequence number
//   k  the kind: absent for a state-machine command, 'fl' for a feature-level change
//   d  the state machine's command bytes (kind absent)
//   l  the feature level to commit (kind 'fl')
//   f  the feature level the entry needs (absent: 1)
//   t  log time in ms, stamped by the leader that appended the entry (feature level 2)
//   e  the term the proposer stepped it into its core in (feature level 3): applied only in an
//      entry of that term

import { Packr } from 'msgpackr';
import { featureLevelMax } from '../base/feature-level.ts';

const packr = new Packr({ useRecords: false });

/** Longest proposer incarnation accepted: a node id (at most 64) and a boot id. */
const incarnationLengthMax = 128;

export interface CommandEnvelope {
  kind: 'command';
  proposer: string;
  seq: number;
  data: Uint8Array;
  /** Log time stamped by the leader (feature level 2); absent in entries of the first release. */
  logTimeMs?: number;
  /** The proposer's term (feature level 3): the entry applies only if it is of that term. */
  proposerTerm?: number;
}

export interface FeatureLevelEnvelope {
  kind: 'featureLevel';
  proposer: string;
  seq: number;
  level: number;
}

export type DecodedEntry =
  | CommandEnvelope
  | FeatureLevelEnvelope
  | { kind: 'invalid'; reason: string }
  | { kind: 'newer'; reason: string; level: number };

export interface EncodeCommandOptions {
  /** The feature level the command needs; stamped only above 1, so level-1 entries stay as the first release wrote them. */
  featureLevel?: number;
  logTimeMs?: number;
  proposerTerm?: number;
}

export function encodeCommandEnvelope(proposer: string, seq: number, data: Uint8Array, opts: EncodeCommandOptions = {}): Uint8Array {
  const env: Record<string, unknown> = { p: proposer, s: seq, d: data };
  if (opts.featureLevel !== undefined && opts.featureLevel > 1) env.f = opts.featureLevel;
  if (opts.logTimeMs !== undefined) env.t = opts.logTimeMs;
  if (opts.proposerTerm !== undefined) env.e = opts.proposerTerm;
  // A copy: msgpackr returns a view of its shared buffer, and the log keeps an entry until
  // compaction, so a view would keep that whole buffer (hundreds of KiB) alive with it.
  return new Uint8Array(packr.pack(env));
}

export function encodeFeatureLevelEnvelope(proposer: string, seq: number, level: number): Uint8Array {
  // A feature-level entry needs level 2 itself: a first-release node must never be sent one,
  // and the leader proposes it only when every member supports the level it names.
  return new Uint8Array(packr.pack({ p: proposer, s: seq, k: 'fl', l: level, f: Math.max(2, level) }));
}

/**
 * Re-stamps the log time of a command envelope (the leader does, for proposals forwarded by
 * followers, whose clocks it does not trust). Returns undefined when `bytes` is not a command
 * envelope; the entry is then appended as it is and decodes as whatever it is.
 */
export function restampLogTime(bytes: Uint8Array, logTimeMs: number): Uint8Array | undefined {
  const value = unpack(bytes);
  if (!isPlainObject(value) || value.k !== undefined || !(value.d instanceof Uint8Array)) return undefined;
  return new Uint8Array(packr.pack({ ...value, t: logTimeMs }));
}

/**
 * Decodes a normal entry's bytes. Total: never throws, whatever the bytes. `levelMax` is the
 * highest feature level the caller can apply (tests lower it to play an older release).
 */
export function decodeEntry(bytes: Uint8Array, levelMax = featureLevelMax): DecodedEntry {
  const value = unpack(bytes);
  if (value === undefined) return { kind: 'invalid', reason: 'not valid msgpack' };
  if (!isPlainObject(value)) return { kind: 'invalid', reason: 'not an envelope (a msgpack map)' };
  const head = checkHead(value);
  if (typeof head === 'string') return { kind: 'invalid', reason: head };
  if (head.level > levelMax) {
    return { kind: 'newer', level: head.level, reason: `the entry needs feature level ${head.level}; this build supports up to ${levelMax}` };
  }
  const kind = value.k;
  if (kind === undefined) return decodeCommand(value, head);
  if (kind === 'fl') return decodeFeatureLevel(value, head, levelMax);
  if (typeof kind === 'string' && kind.length <= 16) return { kind: 'newer', level: head.level, reason: `unknown entry kind '${kind}'` };
  return { kind: 'invalid', reason: 'the entry kind is not a short string' };
}

interface Head {
  proposer: string;
  seq: number;
  level: number;
}

function checkHead(v: Record<string, unknown>): Head | string {
  const { p, s, f } = v;
  if (typeof p !== 'string' || p.length === 0 || p.length > incarnationLengthMax) return 'the proposer (p) is not a short string';
  if (typeof s !== 'number' || !Number.isSafeInteger(s) || s < 0) return 'the sequence number (s) is not a non-negative integer';
  if (f !== undefined && (typeof f !== 'number' || !Number.isSafeInteger(f) || f < 1)) return 'the feature level (f) is not a positive integer';
  return { proposer: p, seq: s, level: f ?? 1 };
}

function decodeCommand(v: Record<string, unknown>, head: Head): DecodedEntry {
  const { d, t, e } = v;
  if (!(d instanceof Uint8Array)) return { kind: 'invalid', reason: 'the command (d) is not bytes' };
  if (t !== undefined && (typeof t !== 'number' || !Number.isSafeInteger(t) || t < 0)) return { kind: 'invalid', reason: 'the log time (t) is not a non-negative integer' };
  if (e !== undefined && (typeof e !== 'number' || !Number.isSafeInteger(e) || e < 1)) return { kind: 'invalid', reason: 'the proposer term (e) is not a positive integer' };
  return {
    kind: 'command', proposer: head.proposer, seq: head.seq, data: d,
    ...(t !== undefined ? { logTimeMs: t } : {}), ...(e !== undefined ? { proposerTerm: e } : {}),
  };
}

function decodeFeatureLevel(v: Record<string, unknown>, head: Head, levelMax: number): DecodedEntry {
  const { l } = v;
  if (typeof l !== 'number' || !Number.isSafeInteger(l) || l < 1) return { kind: 'invalid', reason: 'the feature level (l) is not a positive integer' };
  if (l > levelMax) return { kind: 'newer', level: l, reason: `the cluster moves to feature level ${l}; this build supports up to ${levelMax}` };
  return { kind: 'featureLevel', proposer: head.proposer, seq: head.seq, level: l };
}

function unpack(bytes: Uint8Array): unknown {
  try {
    // Through a new view: msgpackr caches a DataView on what it decodes, and the log keeps `bytes`.
    return packr.unpack(bytes.subarray());
  } catch {
    return undefined;
  }
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v) || v instanceof Uint8Array) return false;
  const proto: unknown = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}
