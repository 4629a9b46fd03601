// shoal credential create --ttl and ls's EXPIRES column, against a single node listening on
// loopback (in this process); the --ttl forms and their bounds.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inProcess } from '../cli/in-process.ts';
import { listeningSingleNode, type SingleNode } from './single-node.ts';
import { credentialTtlFlag, expiresCell } from '../../src/cli/credential.ts';
import { durationFlag } from '../../src/cli/control-args.ts';

let n: SingleNode;
let addr: string;

beforeAll(async () => {
  ({ n, addr } = await listeningSingleNode());
});
afterAll(async () => {
  await n.close();
});

const dayMs = 86_400_000;

describe('shoal credential --ttl', () => {
  it('reads days, the durations token create takes, and never; 90 days without the flag', () => {
    expect(credentialTtlFlag(undefined)).toBe(90 * dayMs);
    expect(credentialTtlFlag('7d')).toBe(7 * dayMs);
    expect(credentialTtlFlag('1d12h')).toBe(36 * 3_600_000);
    expect(credentialTtlFlag('36h')).toBe(36 * 3_600_000);
    expect(credentialTtlFlag('never')).toBeNull();
  });

  it('takes days in every duration flag (shoal token create --ttl 30d, as its help says)', () => {
    expect(durationFlag('30d', '--ttl', '1h')).toBe(30 * dayMs);
    expect(durationFlag(undefined, '--ttl', '1h')).toBe(3_600_000);
    expect(() => durationFlag('1d2d', '--ttl', '1h')).toThrow(/--ttl: .*units d, h, m, s, ms/);
  });

  it('refuses what is not a duration, or outside 1m..366d, as a usage error', () => {
    for (const bad of ['forever', '90', '30s', '367d', '1dx', '0']) expect(() => credentialTtlFlag(bad), bad).toThrow(/--ttl/);
  });

  it('create --ttl sets the expiry, --ttl never makes none, and ls shows both', async () => {
    const made = await inProcess('credential', 'create', '--principal', 'ci', '--role', 'reader', '--ttl', '2d', '--json', '--addr', addr);
    expect(made.code, made.stderr).toBe(0);
    const body = JSON.parse(made.stdout) as { id: string; createdAtMs: number; expiresAtMs: number };
    expect(body.expiresAtMs - body.createdAtMs).toBe(2 * dayMs);
    const forever = await inProcess('credential', 'create', '--principal', 'scraper', '--role', 'reader', '--ttl', 'never', '--addr', addr);
    expect(forever.stdout).toMatch(/never expires/);
    const ls = await inProcess('credential', 'ls', '--addr', addr);
    expect(ls.code).toBe(0);
    const lines = ls.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^ID\s+PRINCIPAL\s+ROLE\s+CREATED BY\s+CREATED\s+EXPIRES\s+LABEL$/);
    expect(lines.find((l) => l.startsWith(body.id))).toContain(new Date(body.expiresAtMs).toISOString());
    expect(lines.find((l) => l.includes('scraper'))).toMatch(/\snever(\s|$)/);
  });

  it('a --ttl out of bounds exits 2 and sends nothing', async () => {
    const before = n.store.revision;
    const r = await inProcess('credential', 'create', '--principal', 'ci', '--role', 'reader', '--ttl', '400d', '--json', '--addr', addr);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--ttl must be from 1m to 366d/);
    expect(n.store.revision).toBe(before);
  });

  it('EXPIRES says never, the time, or expired', () => {
    expect(expiresCell({ expiresAtMs: null, expired: false })).toBe('never');
    expect(expiresCell({ expiresAtMs: 0, expired: false })).toBe('1970-01-01T00:00:00.000Z');
    expect(expiresCell({ expiresAtMs: 0, expired: true })).toBe('expired 1970-01-01T00:00:00.000Z');
  });
});
