// shoal secret against one node's API (in-process CLI, listening API): the value goes in from a
// file or stdin, and nothing the commands print holds it.

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { inProcess } from '../cli/in-process.ts';
import { singleNode, type SingleNode } from './single-node.ts';

const value = `pa55-${Math.random().toString(36).slice(2)}`;
const tmp = mkdtempSync(path.join(os.tmpdir(), 'shoal-secret-cli-'));
const file = path.join(tmp, 'db-password');
let s: SingleNode;
let addr: string[];

beforeAll(async () => {
  s = await singleNode({ control: true });
  const address = await s.app.listen({ port: 0, host: '127.0.0.1' });
  addr = ['--addr', address.replace('http://', '')];
  writeFileSync(file, value);
});
afterAll(async () => {
  await s.close();
  rmSync(tmp, { recursive: true, force: true });
});

const shoal = (...args: string[]) => inProcess('secret', ...args, ...addr);

describe('shoal secret', () => {
  it('creates from a file, refuses to create it again, and sets it from stdin', async () => {
    const created = await shoal('create', 'db-password', '--from-file', file);
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toMatch(/^created secret db-password: \d+ bytes, version 1, sha256:/);
    const again = await shoal('create', 'db-password', '--from-file', file, '--json');
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('already_exists');
    const stdin = vi.spyOn(process, 'stdin', 'get').mockReturnValue(Readable.from([Buffer.from(`${value}-2`)]) as unknown as typeof process.stdin);
    try {
      const set = await shoal('set', 'db-password', '--from-stdin', '--json');
      expect(set.code, set.stderr).toBe(0);
      expect(JSON.parse(set.stdout)).toMatchObject({ outcome: 'updated', secret: { version: 2, size: value.length + 2 } });
    } finally {
      stdin.mockRestore();
    }
  });

  it('shows metadata in ls and inspect, never the value', async () => {
    for (const args of [['ls'], ['ls', '--json'], ['inspect', 'db-password'], ['inspect', 'db-password', '--json']]) {
      const r = await shoal(...args);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain('db-password');
      expect(r.stdout).not.toContain(value);
      expect(r.stdout).not.toContain(Buffer.from(value).toString('base64').slice(0, 12));
    }
    expect((await shoal('inspect', 'db-password')).stdout).toMatch(/version {2}2\n/);
  });

  it('removes it, and says an unknown one is not found', async () => {
    expect((await shoal('rm', 'db-password')).stdout).toBe('removed secret db-password\n');
    const gone = await shoal('inspect', 'db-password', '--json');
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain('not_found');
  });
});
