// undici (the HTTP client behind fetch(), 750 KiB of code) loaded on first use, not when a process
// starts (issue 45): only its Agent is needed, for fetch() to another node or the CLI's requests
// with the cluster CA and a client certificate.

import type * as Undici from 'undici';

/**
 * The undici module. From the sources Node gives a CommonJS package's named exports; in the
 * bundle (scripts/bundle.mjs) import() of one yields its module.exports as `default` only.
 */
export async function loadUndici(): Promise<typeof Undici> {
  const m = (await import('undici')) as typeof Undici & { default?: typeof Undici };
  return m.default ?? m;
}
