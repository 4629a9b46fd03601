// `shoal serve --peers`: the hint list is HOST:PORT addresses, and a bad one is a usage error
// (exit 2) before anything starts.

import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/cli/args.ts';
import { parsePeers, serveHelp } from '../../src/cli/serve.ts';

describe('shoal serve --peers', () => {
  it('takes a comma-separated list of HOST:PORT', () => {
    expect(parsePeers('10.0.0.2:7200, n3.lan:7200,[::1]:7200')).toEqual(['10.0.0.2:7200', 'n3.lan:7200', '[::1]:7200']);
  });

  it.each([
    ['', /at least one/],
    ['10.0.0.2', /HOST:PORT/],
    ['10.0.0.2:7200,n3:99999', /n3:99999.*port/],
    [Array.from({ length: 33 }, (_, i) => `h${i}:1`).join(','), /at most 32/],
  ])('refuses %j', (value, message) => {
    expect(() => parsePeers(value)).toThrow(UsageError);
    expect(() => parsePeers(value)).toThrow(message);
  });

  it('is in the help', () => {
    expect(serveHelp).toContain('--peers');
  });
});
