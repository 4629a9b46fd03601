// shoal dev as a user runs it, with real processes (run under flock /tmp/shoal-heavy.lock): one
// dev cluster per data directory and set of ports, the second refused with where the first
// runs (and no data directory left by a refused one); `dev restart NODE`; a killed node reported
// as killed, with the command that starts it again; `dev stop`; nodes that stop by themselves
// when their supervisor is killed; and Debian's Prometheus scraping the nodes with the config
// docs/monitoring.md documents.

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import https from 'node:https';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { documentedScrapeConfig, localScrapeConfig, startPrometheus } from '../observability/prometheus.ts';

const bin = fileURLToPath(new URL('../../bin/shoal.js', import.meta.url));
const deadlineMs = 30_000;

interface Result { code: number; stdout: string; stderr: string }

function run(args: string[]): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bin, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => { stdout += b.toString(); });
    child.stderr.on('data', (b: Buffer) => { stderr += b.toString(); });
    const timer = setTimeout(() => child.kill('SIGKILL'), 90_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? -1, stdout, stderr });
    });
  });
}

/** `shoal dev ... --json`, read one event line at a time. */
function startDev(args: string[]): { pid: number; event: () => Promise<Record<string, unknown>>; exited: Promise<Result> } {
  const child = spawn(process.execPath, [bin, 'dev', ...args, '--json'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  let consumed = 0;
  child.stdout.on('data', (b: Buffer) => { stdout += b.toString(); });
  child.stderr.on('data', (b: Buffer) => { stderr += b.toString(); });
  const exited = new Promise<Result>((resolve) => child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr })));
  return {
    pid: child.pid ?? -1,
    exited,
    event: async () => {
      const deadline = Date.now() + deadlineMs;
      for (;;) {
        const nl = stdout.indexOf('\n', consumed);
        if (nl >= 0) {
          const line = stdout.slice(consumed, nl);
          consumed = nl + 1;
          return JSON.parse(line) as Record<string, unknown>;
        }
        if (Date.now() > deadline || child.exitCode !== null) throw new Error(`no event from shoal dev; stderr: ${stderr.slice(-3000)}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
  };
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/** A base port whose API and peer ports (base, base+1, base+100, base+101) are all free. */
async function freeBase(): Promise<number> {
  for (;;) {
    const base = 20_000 + Math.floor(Math.random() * 20_000);
    const all = await Promise.all([base, base + 1, base + 100, base + 101].map(portFree));
    if (all.every(Boolean)) return base;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function until(what: string, check: () => boolean): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`not within ${deadlineMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A GET over TLS trusting only the cluster CA (the credential's), as a browser that imported it would. */
function httpsGet(url: string, ca: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    https.get(url, { ca }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => { body += c; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    }).on('error', reject);
  });
}

interface Ready { event: 'ready'; dataDir: string; ingress: boolean; leader: string | null; console: string; credential: string; recoveryKey?: string; nodes: { name: string; id: string; api: string; pid: number; dir: string }[] }

describe('shoal dev', () => {
  it('refuses a second cluster on its data or ports, restarts a node, reports a killed one, stops on request', async () => {
    const root = mkdtempSync(path.join(os.tmpdir(), 'shoal-dev-'));
    const data = path.join(root, 'dev');
    const base = await freeBase();
    // A lock left by a supervisor that died long ago does not count.
    mkdirSync(data);
    writeFileSync(path.join(data, 'dev.lock'), JSON.stringify({ pid: 2 ** 22 + 7, dataDir: data, socket: path.join(data, 'dev.sock'), basePort: base, nodes: 2, startedAt: 'then' }));
    const dev = startDev(['--data', data, '--base-port', String(base), '--nodes', '2']);
    try {
      const ready = await dev.event() as unknown as Ready;
      expect(ready).toMatchObject({ event: 'ready', dataDir: data });
      expect(ready.nodes.map((n) => [n.name, n.api])).toEqual([['n1', `https://127.0.0.1:${base}`], ['n2', `https://127.0.0.1:${base + 1}`]]);
      // The admin credential is the context 'dev', current, where the CLI finds it ($SHOAL_CONFIG, set for every test file).
      expect(ready.credential).toBe(path.join(process.env.SHOAL_CONFIG ?? '', 'contexts', 'dev.json'));
      const status = await run(['status', '--addr', `127.0.0.1:${base}`, '--json']);
      expect(status.code, status.stderr).toBe(0);
      expect(ready.nodes.map((n) => n.name)).toContain(ready.leader);
      expect(ready.console).toBe(`https://127.0.0.1:${base}/ui/`);
      // The routing mesh is off: the nodes share one host, so they would share its one ingress table.
      expect(ready.ingress).toBe(false);
      // Each node runs on jemalloc, as the unit of `shoal install` would (.ci/run installs libjemalloc2).
      for (const n of ready.nodes) expect(readFileSync(`/proc/${n.pid}/maps`, 'utf8')).toContain('libjemalloc.so.2');
      for (const n of ready.nodes) expect(parseYaml(readFileSync(path.join(n.dir, 'shoal.yaml'), 'utf8'))).toMatchObject({ ingress: { enabled: false } });
      const consolePage = await httpsGet(ready.console, JSON.parse(readFileSync(ready.credential, 'utf8')).ca);
      expect(consolePage.status).toBe(200);
      expect(consolePage.body).toContain('/ui/app.js');
      // Founded here: the recovery key is shown, and whichever node leads wrote the keyring sealed to it.
      expect(ready.recoveryKey).toMatch(/^SHOAL-RECOVERY-1-/);
      let recovery: unknown = null;
      for (let i = 0; i < 50 && recovery === null; i++) {
        const k = await run(['secret', 'keyring', '--addr', `127.0.0.1:${base}`, '--json']);
        expect(k.code, k.stderr).toBe(0);
        recovery = (JSON.parse(k.stdout) as { keyring: { recovery: unknown } | null }).keyring?.recovery ?? null;
        if (recovery === null) await new Promise((r) => setTimeout(r, 100));
      }
      expect(recovery).not.toBeNull();
      // Written by the one that led; every node then deletes the founding keyring it was given.
      const pendingLeft = (): string[] => ready.nodes.filter((n) => existsSync(path.join(n.dir, 'keyring.pending.json'))).map((n) => n.name);
      for (let i = 0; i < 50 && pendingLeft().length > 0; i++) await new Promise((r) => setTimeout(r, 100));
      expect(pendingLeft()).toEqual([]);

      // Prometheus, set up as docs/monitoring.md says: a reader token, the cluster CA, its scrape job.
      const created = await run(['credential', 'create', '--principal', 'prometheus', '--role', 'reader', '--ttl', '366d', '--addr', `127.0.0.1:${base}`, '--json']);
      expect(created.code, created.stderr).toBe(0);
      const tokenFile = path.join(root, 'shoal-token');
      const caFile = path.join(root, 'shoal-ca.crt');
      writeFileSync(tokenFile, `${(JSON.parse(created.stdout) as { token: string }).token}\n`);
      writeFileSync(caFile, (JSON.parse(readFileSync(ready.credential, 'utf8')) as { ca: string }).ca);
      const targets = ready.nodes.map((n) => n.api.replace('https://', ''));
      const prometheus = await startPrometheus(localScrapeConfig(documentedScrapeConfig(), { targets, caFile, tokenFile }));
      try {
        expect((await prometheus.waitAllUp(targets.length)).map((t) => t.scrapeUrl).sort()).toEqual(targets.map((t) => `https://${t}/metrics`));
      } finally {
        await prometheus.stop();
      }

      const same = await run(['dev', '--data', data, '--base-port', String(base), '--nodes', '2', '--json']);
      expect(same.code).toBe(1);
      const refusal = JSON.parse(same.stderr) as { error: { code: string; message: string } };
      expect(refusal.error.code).toBe('already_running');
      expect(refusal.error.message).toContain(`already running from ${data} (supervisor pid ${dev.pid}`);
      expect(refusal.error.message).toContain(`npx shoal dev stop --data ${data}`);
      expect(refusal.error.message).toContain(`npx shoal dev restart n2 --data ${data}`);

      // Refused, for its ports or its flags: no data directory is left behind.
      const other = await run(['dev', '--data', path.join(root, 'other', 'dev'), '--base-port', String(base), '--nodes', '2']);
      expect(other.code).toBe(8);
      expect(other.stderr).toContain(`127.0.0.1:${base}`);
      expect(other.stderr).toContain(`they belong to the dev cluster running from ${data}`);
      expect(existsSync(path.join(root, 'other'))).toBe(false);
      const bad = await run(['dev', '--data', path.join(root, 'bad'), '--nodes', '9']);
      expect(bad.code).toBe(2);
      expect(existsSync(path.join(root, 'bad'))).toBe(false);

      const n2 = ready.nodes[1];
      if (n2 === undefined) throw new Error('no n2');
      const restarted = await run(['dev', 'restart', 'n2', '--data', data, '--json']);
      expect(restarted.code, restarted.stderr).toBe(0);
      const answer = JSON.parse(restarted.stdout) as { ok: boolean; event: string; node: string; pid: number };
      expect(answer).toMatchObject({ ok: true, event: 'restarted', node: 'n2' });
      expect(answer.pid).not.toBe(n2.pid);
      expect(alive(n2.pid)).toBe(false);
      expect(await dev.event()).toMatchObject({ event: 'restarted', node: 'n2', pid: answer.pid });

      process.kill(answer.pid, 'SIGKILL');
      const exited = await dev.event();
      expect(exited).toMatchObject({ event: 'exited', node: 'n2', code: null, signal: 'SIGKILL' });
      expect(exited.message).toContain('was killed by SIGKILL; the other nodes keep running');
      expect(exited.message).not.toContain('code null');
      // The command it prints works as printed: it names the data directory.
      expect(exited.message).toContain(`Start it again with: npx shoal dev restart n2 --data ${data}`);
      const again = await run(['dev', 'restart', 'n2', '--data', data]);
      expect(again.code, again.stderr).toBe(0);
      expect(again.stdout).toMatch(/^restarted n2 \(/);
      await dev.event();

      const unknown = await run(['dev', 'restart', 'n9', '--data', data]);
      expect(unknown.code).toBe(1);
      expect(unknown.stderr).toContain("no node 'n9' in this dev cluster; its nodes are n1, n2");

      const stop = await run(['dev', 'stop', '--data', data]);
      expect(stop.code, stop.stderr).toBe(0);
      expect(await dev.event()).toEqual({ event: 'stopped', exitCode: 0 });
      expect((await dev.exited).code).toBe(0);
      expect(existsSync(path.join(data, 'dev.lock'))).toBe(false);
    } finally {
      if (alive(dev.pid)) process.kill(dev.pid, 'SIGTERM');
      await dev.exited;
    }
  });

  it('its nodes stop by themselves when the supervisor is killed, and a stale lock is taken over', async () => {
    const data = path.join(mkdtempSync(path.join(os.tmpdir(), 'shoal-dev-')), 'dev');
    const base = await freeBase();
    const dev = startDev(['--data', data, '--base-port', String(base), '--nodes', '1']);
    const ready = await dev.event() as unknown as Ready;
    const pids = ready.nodes.map((n) => n.pid);
    process.kill(dev.pid, 'SIGKILL');
    await dev.exited;
    await until('the nodes of a killed supervisor exit', () => pids.every((p) => !alive(p)));
    const gone = await run(['dev', 'restart', 'n1', '--data', data]);
    expect(gone.code).toBe(3);
    expect(gone.stderr).toContain(`no dev cluster is running from ${data} (its supervisor is gone)`);
    expect(gone.stderr).toContain(`start one with: npx shoal dev --data ${data} --base-port ${base} --nodes 1`);
    const next = startDev(['--data', data, '--base-port', String(base), '--nodes', '1']);
    try {
      expect(await next.event()).toMatchObject({ event: 'ready', leader: 'n1' });
    } finally {
      process.kill(next.pid, 'SIGTERM');
      expect((await next.exited).code).toBe(0);
    }
  });
});
