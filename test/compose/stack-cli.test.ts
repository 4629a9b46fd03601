// shoal stack through main() in-process, against one node that runs the control plane on an
// in-memory runtime, on a real port: config (no cluster), deploy with .env, env_file and a secret
// file read by the CLI, the dry run of unchanged and changed files, ls, services, ps, rm; and a
// refusal printed with every path.

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/main.ts';
import { singleNode, type SingleNode } from '../api/single-node.ts';

interface Result { code: number; stdout: string; stderr: string }

const dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-stack-cli-'));
let solo: SingleNode;
let addr: string;

async function shoal(...args: string[]): Promise<Result> {
  let stdout = '';
  let stderr = '';
  const out = vi.spyOn(console, 'log').mockImplementation((...a: unknown[]) => { stdout += `${a.join(' ')}\n`; });
  const err = vi.spyOn(console, 'error').mockImplementation((...a: unknown[]) => { stderr += `${a.join(' ')}\n`; });
  try {
    return { code: await main(args), stdout, stderr };
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}

const file = (name: string, text: string): string => {
  const p = path.join(dir, name);
  writeFileSync(p, text);
  return p;
};

const composeText = (tag: string) => `
services:
  web:
    image: busybox:\${TAG:-${tag}}
    command: ["sleep", "3600"]
    env_file: web.env
    environment:
      GREETING: \${GREETING}
    tty: true
  db:
    image: busybox:1.36
    command: ["sleep", "3600"]
    secrets: [pw]
secrets:
  pw:
    file: ./pw.txt
`;

beforeAll(async () => {
  solo = await singleNode({ control: true });
  await solo.app.listen({ port: 0, host: '127.0.0.1' });
  const a = solo.app.server.address();
  if (a === null || typeof a !== 'object') throw new Error('no address');
  addr = `127.0.0.1:${a.port}`;
  for (let i = 0; i < 200 && !(await shoal('node', 'ls', '--json', '--addr', addr)).stdout.includes('"up"'); i++) await new Promise((r) => setTimeout(r, 25));
  file('.env', 'GREETING=hello from .env\n');
  file('web.env', 'FROM_FILE=yes\n');
  file('pw.txt', 'hunter2\n');
});

afterAll(async () => {
  await solo.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('shoal stack', () => {
  it('config prints the merged, interpolated model, and the shoal documents with --shoal', async () => {
    const c = file('compose.yaml', composeText('1.36'));
    const o = file('override.yaml', 'services:\n  web:\n    environment: {EXTRA: "1"}\n');
    const r = await shoal('stack', 'config', '-c', c, '-c', o);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('image: busybox:1.36');
    expect(r.stdout).toContain('GREETING: hello from .env');
    expect(r.stdout).toContain('EXTRA: "1"');
    const s = await shoal('stack', 'config', '-c', c, 'app', '--shoal', '--json');
    const docs = JSON.parse(s.stdout) as { kind: string; name: string; env?: Record<string, string> }[];
    expect(docs.map((d) => `${d.kind} ${d.name}`)).toEqual(['Network app-default', 'Service app-web', 'Service app-db']);
    expect(docs[1]?.env).toEqual({ FROM_FILE: 'yes', GREETING: 'hello from .env' });
    expect(s.stderr).toContain('warning: services.web.tty');
  });

  it('deploys, then a dry run reports no change, and a changed file exactly the change', async () => {
    const c = file('compose.yaml', composeText('1.36'));
    const r = await shoal('stack', 'deploy', '-c', c, 'app', '--addr', addr, '--timeout', '30s');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('network app-default: created\nsecret app-pw: created\nservice app-web: created\nservice app-db: created\n');
    expect(r.stdout).toMatch(/app-web: converged, 1\/1 running/);
    expect(r.stderr).toContain('warning: services.web.tty: accepted with no effect');
    const same = await shoal('stack', 'deploy', '-c', c, 'app', '--dry-run', '--addr', addr);
    expect(same.stdout).toBe('network app-default: unchanged\nsecret app-pw: unchanged\nservice app-web: unchanged\nservice app-db: unchanged\ndry run: no change\n');
    const changed = await shoal('stack', 'deploy', '-c', file('compose.yaml', composeText('1.37')), 'app', '--dry-run', '--addr', addr);
    expect(changed.stdout).toContain('service app-web: would be updated; a rolling update would replace 1 task(s)\n  image: "busybox:1.36" -> "busybox:1.37"\n');
    expect(changed.stdout).toContain('service app-db: unchanged');
  });

  it('lists stacks, their services and their tasks', async () => {
    const ls = await shoal('stack', 'ls', '--addr', addr);
    expect(ls.stdout).toMatch(/app\s+2\s+1\s+1\s+2\/2/);
    const services = await shoal('stack', 'services', 'app', '--addr', addr);
    expect(services.stdout).toContain('app-db');
    expect(services.stdout).toContain('app-web');
    // service ls names each service's stack, in the table and in the API's list.
    const svcLs = await shoal('service', 'ls', '--addr', addr);
    expect(svcLs.stdout.split('\n')[0]).toMatch(/UPDATE\s+STACK$/);
    expect(svcLs.stdout).toMatch(/app-db\s.*\sapp$/m);
    const svcJson = JSON.parse((await shoal('service', 'ls', '--json', '--addr', addr)).stdout) as { items: { name: string; stack: string | null }[] };
    expect(svcJson.items.map((i) => [i.name, i.stack])).toEqual([['app-db', 'app'], ['app-web', 'app']]);
    const ps = await shoal('stack', 'ps', 'app', '--json', '--addr', addr);
    expect((JSON.parse(ps.stdout) as { items: { service: string }[] }).items.map((t) => t.service).sort()).toEqual(['app-db', 'app-web']);
  });

  it('prints every problem of a refused stack with its path, and exits 1', async () => {
    const bad = file('bad.yaml', 'services:\n  web:\n    build: .\n    image: nginx:1\n    volumes: ["./html:/usr/share/nginx/html"]\n');
    const r = await shoal('stack', 'deploy', '-c', bad, 'bad', '--addr', addr);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('services.web.build: is not supported');
    expect(r.stderr).toContain('services.web.volumes[0]: the relative bind mount ./html');
  });

  it('rm removes what the stack made', async () => {
    const r = await shoal('stack', 'rm', 'app', '--addr', addr);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('service app-db: removed\nservice app-web: removed\nnetwork app-default: removed\nsecret app-pw: removed\n');
    expect((await shoal('stack', 'ls', '--json', '--addr', addr)).stdout).toContain('"items": []');
  });
});
