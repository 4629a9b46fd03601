// Frames on the wire: msgpack (msgpackr) without its record extension, so every frame is
// plain msgpack any implementation can read, and a Uint8Array travels as msgpack bin.
//
// A WebSocket message carries one frame, or from protocol 2 on (BATCH_PROTOCOL_VERSION)
// several frames back to back: a msgpack sequence, with no header or count of its own.

import { Packr } from 'msgpackr';
import { frameSchema, type Frame, type OutgoingFrame } from './frames.ts';
import { validateMessage } from './validate-message.ts';

/** The first protocol version in which a WebSocket message may hold several frames. */
export const BATCH_PROTOCOL_VERSION = 2;

const packr = new Packr({ useRecords: false, moreTypes: false });

/**
 * The returned buffer may be a view into a shared buffer of msgpackr's; msgpackr never writes
 * over a result it has handed out, so it can wait in a queue.
 */
export function encodeFrame(frame: OutgoingFrame): Uint8Array {
  return packr.pack(frame);
}

type DecodeResult = { ok: true; frame: Frame } | { ok: false; error: string };
export type DecodeManyResult = { ok: true; frames: Frame[] } | { ok: false; error: string };

/**
 * One or more frames back to back. All or nothing: one malformed frame fails the whole
 * message, so a receiver never acts on part of a batch. Never throws.
 */
export function decodeFrames(bytes: Uint8Array): DecodeManyResult {
  let values: unknown[];
  try {
    values = packr.unpackMultiple(bytes) as unknown[];
  } catch (err) {
    return { ok: false, error: `not msgpack: ${(err as Error).message}` };
  }
  const frames = new Array<Frame>(values.length);
  for (let i = 0; i < values.length; i++) {
    const d = validateFrame(values[i]);
    if (!d.ok) return { ok: false, error: values.length === 1 ? d.error : `frame ${i + 1} of ${values.length}: ${d.error}` };
    frames[i] = d.frame;
  }
  return { ok: true, frames };
}

/** 'msg' frames, nearly all the traffic, skip zod for the equivalent hand-written check. */
function validateFrame(value: unknown): DecodeResult {
  if (typeof value === 'object' && value !== null && !Array.isArray(value) && (value as { t?: unknown }).t === 'msg') {
    const checked = validateMessage((value as { m?: unknown }).m);
    if (!checked.ok) return { ok: false, error: summarizeIssues([{ path: ['m', ...checked.path], message: checked.error }]) };
    return { ok: true, frame: { t: 'msg', m: checked.message } };
  }
  const parsed = frameSchema.safeParse(value);
  if (!parsed.success) return { ok: false, error: summarizeIssues(parsed.error.issues) };
  return { ok: true, frame: parsed.data };
}

function summarizeIssues(issues: readonly { path: readonly PropertyKey[]; message: string }[]): string {
  const shown = issues.slice(0, 3).map((i) => `${i.path.map(String).join('.') || '(frame)'}: ${i.message}`);
  if (issues.length > 3) shown.push(`and ${issues.length - 3} more`);
  return `invalid frame: ${shown.join('; ')}`;
}
