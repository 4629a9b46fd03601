// Typed errors the document store throws. Results of commands are never thrown: apply() returns
// them (see CommandResult). These are for the read side and for encoding and decoding commands.

import { ShoalError } from '../src/errors.ts';
import type { Issue } from './json-value.ts';

/** A command (or a read's arguments) is malformed; details.issues lists every problem found. */
export class InvalidCommandError extends ShoalError {
  constructor(message: string, readonly issues: Issue[]) {
    super('bad_request', message, { issues });
    this.name = 'InvalidCommandError';
  }
}

/**
 * A watch cursor is older than the retained events. `oldestRev` is the oldest revision whose
 * events are all still held: eventsSince(oldestRev - 1) is the oldest call that succeeds. The
 * client must list again and watch from the list's revision.
 */
export class CursorExpiredError extends ShoalError {
  constructor(readonly afterRev: number, readonly oldestRev: number) {
    super('cursor_expired', `events after rev ${afterRev} are no longer retained; the oldest complete rev is ${oldestRev}: list again and watch from the list's rev`, { afterRev, oldestRev });
    this.name = 'CursorExpiredError';
  }
}

/** Snapshot data the store cannot read: damaged (storage_corrupt) or from an unknown format. */
export class SnapshotFormatError extends ShoalError {
  constructor(code: 'storage_corrupt' | 'storage_format', message: string, details?: Record<string, unknown>) {
    super(code, message, details);
    this.name = 'SnapshotFormatError';
  }
}
