// The one JSON body parser. fastify's default answers a body holding a `__proto__` key with "not
// valid JSON"; this one says which key is not allowed and where, as the store would for a
// document. JSON.parse defines such a key as an own property (it never sets a prototype), so the
// check after parsing is safe.

import type { FastifyInstance } from 'fastify';
import { ShoalError } from '../errors.ts';
import { badRequest } from './validate.ts';

/** The path of the first own `__proto__` key in a parsed JSON value, if any (iterative: bodies may nest deeply). */
export function protoKeyPath(value: unknown): string | undefined {
  const stack: [unknown, string][] = [[value, 'body']];
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    const [v, path] = top;
    if (typeof v !== 'object' || v === null) continue;
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push([v[i], `${path}.${i}`]);
      continue;
    }
    if (Object.hasOwn(v, '__proto__')) return `${path}.__proto__`;
    const keys = Object.keys(v);
    for (let i = keys.length - 1; i >= 0; i--) {
      const k = keys[i] as string;
      stack.push([(v as Record<string, unknown>)[k], `${path}.${k}`]);
    }
  }
  return undefined;
}

export function parseJsonBody(text: string): unknown {
  if (text.trim() === '') throw badRequest([{ path: 'body', message: 'the body is empty; send a JSON value, or no content-type' }]);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    const message = `the body is not valid JSON: ${(err as Error).message}`;
    throw new ShoalError('bad_request', message, { problems: [{ path: 'body', message }] });
  }
  const at = protoKeyPath(value);
  if (at !== undefined) throw badRequest([{ path: at, message: "the key '__proto__' is not allowed" }]);
  return value;
}

/** Replaces fastify's JSON parser; fastify still applies bodyLimit before it. */
export function useJsonBodyParser(app: FastifyInstance): void {
  app.removeContentTypeParser(['application/json', 'text/plain']);
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    try {
      done(null, parseJsonBody(body as string));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
}
