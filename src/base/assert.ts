// Assertions for programmer errors. They are never compiled out: a broken invariant in the
// consensus core must stop the process rather than corrupt the replicated log.

export class AssertionError extends Error {
  constructor(message: string) {
    super(`assertion failed: ${message}`);
    this.name = 'AssertionError';
  }
}

export function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new AssertionError(message);
}
