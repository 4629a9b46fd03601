// A test's stand-in for the process's standard input (what `--password-stdin` and other CLI
// options read), restored after the call.

import { Readable } from 'node:stream';
import { vi } from 'vitest';

/** Runs `f` with `text` as the process's standard input. */
export async function withStdin<T>(text: string, f: () => Promise<T>): Promise<T> {
  const stdin = vi.spyOn(process, 'stdin', 'get').mockReturnValue(Readable.from([Buffer.from(text)]) as unknown as typeof process.stdin);
  try {
    return await f();
  } finally {
    stdin.mockRestore();
  }
}
