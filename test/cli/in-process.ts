// Runs the shoal command in this process, capturing what it prints (console.log is stdout,
// console.error is stderr), for the CLI tests that need no separate process.

import { vi } from 'vitest';
import { main } from '../../src/cli/main.ts';

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export async function inProcess(...args: string[]): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  const out = vi.spyOn(console, 'log').mockImplementation((...a: unknown[]) => { stdout += `${a.join(' ')}\n`; });
  const err = vi.spyOn(console, 'error').mockImplementation((...a: unknown[]) => { stderr += `${a.join(' ')}\n`; });
  try {
    return { code: await main(args), stdout, stderr };
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}
