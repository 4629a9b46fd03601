// shoal audit ls against a single node listening on loopback (in this process): the table, the
// principal filter, --json lines, and --watch printing a record written after the listing.

import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { inProcess } from '../cli/in-process.ts';
import { listeningSingleNode, type SingleNode } from './single-node.ts';

let n: SingleNode;
let addr: string;

beforeAll(async () => {
  ({ n, addr } = await listeningSingleNode());
  for (const [id, who] of [['a', 'alice'], ['b', 'bob']] as const) {
    const res = await n.app.inject({ method: 'PUT', url: `/v1/docs/apps/${id}`, payload: { id }, headers: { 'x-shoal-principal': who, 'x-shoal-role': 'operator' } });
    expect(res.statusCode).toBe(200);
  }
});
afterAll(async () => {
  await n.close();
});

const until = async (what: string, check: () => boolean): Promise<void> => {
  for (let i = 0; i < 1000 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
  if (!check()) throw new Error(`timed out waiting for ${what}`);
};

describe('shoal audit ls', () => {
  it('prints the records as a table with each caller\'s role, and one principal\'s with --principal', async () => {
    const all = await inProcess('audit', 'ls', '--addr', addr);
    expect(all.code).toBe(0);
    const lines = all.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^TIME\s+INDEX\s+PRINCIPAL\s+ROLE\s+OP\s+RESULT\s+RESOURCES$/);
    expect(lines.slice(1).map((l) => l.split(/\s+/).slice(2))).toEqual([['alice', 'operator', 'put', 'ok', 'apps/a'], ['bob', 'operator', 'put', 'ok', 'apps/b']]);
    const bob = await inProcess('audit', 'ls', '--principal', 'bob', '--json', '--addr', addr);
    expect(bob.stdout.trim().split('\n').map((l) => (JSON.parse(l) as { principal: string }).principal)).toEqual(['bob']);
  });

  it('--limit stops after N', async () => {
    const one = await inProcess('audit', 'ls', '--limit', '1', '--json', '--addr', addr);
    expect(one.stdout.trim().split('\n')).toHaveLength(1);
  });

  it('--watch prints a record written after the listing', async () => {
    const done = inProcess('audit', 'ls', '--watch', '--json', '--principal', 'carol', '--addr', addr);
    // The listing is empty (carol wrote nothing yet); once the watch stream is open, she writes.
    await until('the watch stream', () => n.ctx.streams.size > 0);
    await n.app.inject({ method: 'PUT', url: '/v1/docs/apps/c', payload: {}, headers: { 'x-shoal-principal': 'carol', 'x-shoal-role': 'operator' } });
    // console.log is inProcess's spy while the command runs: stop it once it printed the record.
    const printed = (): boolean => vi.mocked(console.log).mock.calls.some((c) => String(c[0]).includes('carol'));
    await until('the record printed', printed);
    process.emit('SIGINT');
    const r = await done;
    expect(r.code).toBe(0);
    expect(r.stdout.trim().split('\n').map((l) => (JSON.parse(l) as { resources: string[] }).resources)).toEqual([['apps/c']]);
  });
});
