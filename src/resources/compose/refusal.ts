// What the API says of a stack before its files are compiled: the names a stack may have, and the
// refusal that lists every problem of its files. Apart from compile.ts so that the stack routes
// need not load the compiler (and its readers) until a stack is deployed (issue 45).

import { ShoalError } from '../../errors.ts';
import type { Problem } from '../spec/reader.ts';

export const stackNamePattern = /^[a-z](?:[a-z0-9-]{0,30}[a-z0-9])?$/;

/** The refusal: the catalogue's bad_request with every problem (and the warnings, for context). */
export function stackRefusal(problems: readonly Problem[], warnings: readonly Problem[] = []): ShoalError {
  const lines = problems.map((p) => `  ${p.path}: ${p.message}`);
  return new ShoalError('bad_request', `the compose files are refused, and nothing was applied:\n${lines.join('\n')}`, {
    problems, ...(warnings.length > 0 ? { warnings } : {}),
  });
}
