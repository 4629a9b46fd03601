// The shape every error answer has: {code, message, requestId, retryable, details?}, a code from
// the catalog, and the catalog's status and retryability.

import { expect } from 'vitest';
import { errorCatalog, type ErrorCode } from '../../src/errors.ts';

export interface Answer {
  statusCode: number;
  body: string;
  headers: Record<string, unknown>;
}

export interface ErrorAnswer {
  code: string;
  message: string;
  requestId: string;
  retryable: boolean;
  details?: Record<string, unknown>;
}

/** Parses an error answer and checks it is catalogued, whatever its code. */
export function catalogued(res: Answer): ErrorAnswer {
  const body = JSON.parse(res.body) as ErrorAnswer;
  expect(Object.keys(body).sort(), res.body).toEqual(expect.arrayContaining(['code', 'message', 'requestId', 'retryable']));
  expect(Object.keys(body).every((k) => ['code', 'message', 'requestId', 'retryable', 'details'].includes(k)), res.body).toBe(true);
  expect(Object.hasOwn(errorCatalog, body.code), `${body.code} is catalogued`).toBe(true);
  const entry = errorCatalog[body.code as ErrorCode];
  expect(res.statusCode, res.body).toBe(entry.status);
  expect(body.retryable).toBe(entry.retryable);
  expect(typeof body.requestId === 'string' && body.requestId.length > 0).toBe(true);
  expect(body.message.length).toBeGreaterThan(0);
  return body;
}

/** Checks the answer is the given catalogued error and returns its details. */
export function expectError(res: Answer, code: ErrorCode): Record<string, unknown> {
  const body = catalogued(res);
  expect(body.code, res.body).toBe(code);
  return body.details ?? {};
}

/** The paths in a 400's details.problems. */
export function problemPaths(details: Record<string, unknown>): string[] {
  return (details.problems as { path: string }[]).map((p) => p.path);
}
