// The error catalog (src/errors.ts) and docs/errors.md list the same codes with the same status
// and retryability, both ways.

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { errorCatalog } from '../src/errors.ts';

function documented(): Map<string, { status: number; retryable: boolean }> {
  const text = readFileSync(new URL('../docs/errors.md', import.meta.url), 'utf8');
  const rows = new Map<string, { status: number; retryable: boolean }>();
  for (const m of text.matchAll(/^\| `([a-z_]+)` \| (\d{3}) \| (yes|no) \|/gm)) {
    rows.set(m[1] as string, { status: Number(m[2]), retryable: m[3] === 'yes' });
  }
  return rows;
}

describe('error catalog', () => {
  it('documents every code in the catalog with its status and retryability', () => {
    const docs = documented();
    for (const [code, e] of Object.entries(errorCatalog)) {
      expect(docs.get(code), `docs/errors.md is missing ${code}`).toEqual({ status: e.status, retryable: e.retryable });
    }
  });

  it('documents no code that the catalog lacks', () => {
    for (const code of documented().keys()) expect(Object.keys(errorCatalog), `${code} is documented but not in src/errors.ts`).toContain(code);
  });
});
