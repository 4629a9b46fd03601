// The identity of a request for idempotency: two commands with equal content (whatever the key
// order or encoding) have equal fingerprints. SHA-256 is deterministic, so using node:crypto
// here keeps apply() a pure function of the log.

import { createHash } from 'node:crypto';
import type { Command } from './command.ts';
import { canonicalJson } from './json-value.ts';

export function requestFingerprint(cmd: Command): string {
  return createHash('sha256').update(canonicalJson(cmd)).digest('hex');
}
