// A small deterministic 64-bit digest (two independent 32-bit FNV-1a style lanes) for entries and
// state machine states. Checkers compare digests, so they must be cheap and stable across runs;
// collision resistance against an adversary is not needed.

import type { Entry } from '../../src/raft/types.ts';

const lane1Basis = 0x811c9dc5;
const lane2Basis = 0x050c5d1f;
const prime = 0x01000193;

export interface Hash64 {
  a: number;
  b: number;
}

export const initialHash = (): Hash64 => ({ a: lane1Basis, b: lane2Basis });

function mixByte(h: Hash64, byte: number): void {
  h.a = Math.imul(h.a ^ byte, prime) >>> 0;
  h.b = Math.imul(h.b ^ ((byte + 0x5b) & 0xff), prime) >>> 0;
}

function mixUint32(h: Hash64, n: number): void {
  mixByte(h, n & 0xff);
  mixByte(h, (n >>> 8) & 0xff);
  mixByte(h, (n >>> 16) & 0xff);
  mixByte(h, (n >>> 24) & 0xff);
}

function mixString(h: Hash64, s: string): void {
  for (let i = 0; i < s.length; i++) mixUint32(h, s.charCodeAt(i));
}

function mixBytes(h: Hash64, bytes: Uint8Array): void {
  mixUint32(h, bytes.length);
  for (let i = 0; i < bytes.length; i++) mixByte(h, bytes[i] as number);
}

export const hashToString = (h: Hash64): string => `${h.a.toString(16)}.${h.b.toString(16)}`;

/** Digest of an entry's whole identity: kind, index, term and payload. */
export function entryDigest(e: Entry): string {
  const h = initialHash();
  mixUint32(h, e.index);
  mixUint32(h, e.term);
  if (e.kind === 'normal') {
    mixByte(h, 1);
    mixBytes(h, e.data);
  } else {
    mixByte(h, 2);
    mixString(h, JSON.stringify(e.change));
  }
  return hashToString(h);
}

/** The next link of a hash chain: the digest of (previous state, entry digest). */
export function chain(prev: Hash64, digest: string): Hash64 {
  const h = { a: prev.a, b: prev.b };
  mixString(h, digest);
  return h;
}
