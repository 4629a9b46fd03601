// Request validation: zod at the boundary, every problem reported at once in details.problems,
// with public paths (`params.id`, `headers.if-match`, `body.success.1.id`). The store's own
// refusals of a command (encodeCommand) are reported the same way, their internal paths
// (`cmd.expect.rev`) translated by the route that built the command.

import type { z } from 'zod';
import { ShoalError } from '../errors.ts';

export interface Problem {
  path: string;
  message: string;
}

export function problemsOf(issues: readonly z.core.$ZodIssue[], prefix: string): Problem[] {
  return issues.map((i) => {
    const keys = 'keys' in i && Array.isArray(i.keys) ? ` (${i.keys.join(', ')})` : '';
    return { path: [prefix, ...i.path.map(String)].filter((s) => s !== '').join('.'), message: `${messageOf(i)}${keys}` };
  });
}

/** zod's message, except for a record's key, where zod says only "Invalid key in record": the key's own rule instead. */
function messageOf(i: z.core.$ZodIssue): string {
  if (i.code !== 'invalid_key' || i.issues.length === 0) return i.message;
  return `the key ${JSON.stringify(String(i.path[i.path.length - 1] ?? ''))} is ${i.issues.map((inner) => inner.message).join('; ')}`;
}

/** Segments of a path kept in a message; a deeper path (a nested document) is shortened there. */
const messagePathSegmentsMax = 6;
/** Problems named in the message; details.problems has them all. */
const messageProblemsMax = 3;

/** A path for a one-line message: `body.a.a.a.…(60 more).a.b` rather than all 66 segments. */
export function shortPath(path: string): string {
  const segs = path.split('.');
  if (segs.length <= messagePathSegmentsMax) return path;
  const hidden = segs.length - 5;
  return [...segs.slice(0, 3), `…(${hidden} more)`, ...segs.slice(-2)].join('.');
}

/** The one shape of a 400: `invalid request: <first problems>` and every problem in details.problems. */
export function badRequest(problems: Problem[], extra: Record<string, unknown> = {}): ShoalError {
  const shown = problems.slice(0, messageProblemsMax).map((p) => `${shortPath(p.path)}: ${p.message}`).join('; ');
  const more = problems.length > messageProblemsMax ? ` (and ${problems.length - messageProblemsMax} more in details.problems)` : '';
  return new ShoalError('bad_request', `invalid request: ${shown}${more}`, { ...extra, problems });
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
  if (problems.length > 0) throw badRequest(problems);
  return out as T;
}

/** Translates a path in a stamped command (`cmd.doc.a`, `principal`) to where it came from in the request. */
export type CommandPathMap = (commandPath: string) => string;

/** Where the fields every write shares come from; `cmd` paths are left to the route. */
export function stampedPath(commandPath: string, cmdPath: (rest: string[]) => string): string {
  const [head = '', ...rest] = commandPath.split('.');
  if (head === 'principal') return 'headers.x-shoal-principal';
  if (head === 'idempotencyKey') return 'headers.idempotency-key';
  if (head === 'cmd') return cmdPath(rest);
  return 'body';
}
