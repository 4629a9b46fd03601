// Request validation: zod at the boundary, every problem reported at once in details.problems.

import type { z } from 'zod';
import { ShoalError } from '../errors.ts';

export interface Problem {
  path: string;
  message: string;
}

export function problemsOf(issues: readonly z.core.$ZodIssue[], prefix: string): Problem[] {
  return issues.map((i) => {
    const keys = 'keys' in i && Array.isArray(i.keys) ? ` (${i.keys.join(', ')})` : '';
    return { path: [prefix, ...i.path.map(String)].filter((s) => s !== '').join('.'), message: `${i.message}${keys}` };
  });
}

/** Validates several parts of a request together so that one answer lists every problem. */
export function validate<T extends Record<string, unknown>>(parts: { [K in keyof T]: [z.ZodType<T[K]>, unknown] }): T {
  const problems: Problem[] = [];
  const out: Record<string, unknown> = {};
  for (const [name, [schema, value]] of Object.entries(parts) as [string, [z.ZodType, unknown]][]) {
    const r = schema.safeParse(value);
    if (r.success) out[name] = r.data;
    else problems.push(...problemsOf(r.error.issues, name));
  }
  if (problems.length > 0) {
    const summary = problems.map((p) => `${p.path}: ${p.message}`).join('; ');
    throw new ShoalError('bad_request', `invalid request: ${summary}`, { problems });
  }
  return out as T;
}
