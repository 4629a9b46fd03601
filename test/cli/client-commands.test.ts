// The client commands (doc, cluster, snapshot) as a user runs them: the CLI as a child process
// against one in-process node listening on a real port. Help texts, usage errors and the error
// mapping run in-process through main() (a spawn costs 1-2 s); so do the SSE parser and the
// watch follower's resume logic, against a scripted server.

import { featureLevelMax } from '../../src/base/feature-level.ts';
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ApiError, CliFailure, exitCodeOf, reportFailure, UnreachableError, type FailureContext } from '../../src/cli/client.ts';
import { clusterHelps } from '../../src/cli/cluster.ts';
import { docHelps } from '../../src/cli/doc.ts';
import { snapshotHelps } from '../../src/cli/snapshot.ts';
import { SseParser } from '../../src/api/sse-parser.ts';
import { followWatch, type WatchEventView } from '../../src/cli/watch-stream.ts';
import { loadConfig } from '../../src/server/config.ts';
import { startNode } from '../../src/server/server.ts';
import { decodeSnapshotFile } from '../../src/node/recovery/snapshot-file.ts';
import { singleNode, type SingleNode } from '../api/single-node.ts';
import { freePort } from '../../bench/lib/proc.ts';
import { inProcess } from './in-process.ts';
import { useCredentialFlag } from '../../src/cli/credential-file.ts';

const bin = fileURLToPath(new URL('../../bin/shoal.js', import.meta.url));

interface Result { code: number; stdout: string; stderr: string }

const run = (args: string[], opts: { input?: string } = {}): Promise<Result> => new Promise((resolve, reject) => {
  const env = { ...process.env };
  delete env.SHOAL_ADDR;
  const child = spawn(process.execPath, [bin, ...args], { stdio: ['pipe', 'pipe', 'pipe'], env });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (b: Buffer) => { stdout += b.toString(); });
  child.stderr.on('data', (b: Buffer) => { stderr += b.toString(); });
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  child.on('error', reject);
  child.on('close', (code) => {
    clearTimeout(timer);
    resolve({ code: code ?? -1, stdout, stderr });
  });
  child.stdin.end(opts.input ?? '');
});

/** A long-running command; `line()` waits for its next line of standard output. */
function start(args: string[]): { line: () => Promise<string>; stop: () => Promise<Result> } {
  const child = spawn(process.execPath, [bin, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  let consumed = 0;
  const waiters: (() => void)[] = [];
  child.stdout.on('data', (b: Buffer) => {
    stdout += b.toString();
    for (const w of waiters.splice(0)) w();
  });
  child.stderr.on('data', (b: Buffer) => { stderr += b.toString(); });
  const closed = new Promise<Result>((resolve) => child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr })));
  return {
    line: async () => {
      const deadline = Date.now() + 20_000;
      for (;;) {
        const nl = stdout.indexOf('\n', consumed);
        if (nl >= 0) {
          const l = stdout.slice(consumed, nl);
          consumed = nl + 1;
          return l;
        }
        if (Date.now() > deadline || child.exitCode !== null) throw new Error(`no line from shoal ${args.join(' ')}; stderr: ${stderr}`);
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 200);
        });
      }
    },
    stop: () => {
      child.kill('SIGTERM');
      return closed;
    },
  };
}

/** main() in-process, with what it prints. */

const silent = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} };

let solo: SingleNode;
let addr: string;

beforeAll(async () => {
  solo = await singleNode();
  await solo.app.listen({ port: 0, host: '127.0.0.1' });
  const a = solo.app.server.address();
  if (a === null || typeof a !== 'object') throw new Error('no address');
  addr = `127.0.0.1:${a.port}`;
});

afterAll(async () => {
  await solo.close();
});

describe('shoal doc', () => {
  it('puts (from stdin), gets, lists and removes a document with --json', async () => {
    const put = await run(['doc', 'put', 'people', 'alice', '-', '--addr', addr, '--json'], { input: '{"age": 7}' });
    expect(put.code, put.stderr).toBe(0);
    const written = JSON.parse(put.stdout) as { rev: number; createRev: number; doc: unknown };
    expect(written.doc).toEqual({ age: 7 });
    expect(written.createRev).toBe(written.rev);

    const get = await run(['doc', 'get', 'people', 'alice', '--addr', addr, '--json']);
    expect(get.code, get.stderr).toBe(0);
    expect(JSON.parse(get.stdout)).toMatchObject({ collection: 'people', id: 'alice', rev: written.rev, doc: { age: 7 } });

    const ls = await run(['doc', 'ls', 'people', '--addr', addr, '--json']);
    expect(ls.code, ls.stderr).toBe(0);
    const page = JSON.parse(ls.stdout) as { items: { id: string; rev: number }[]; rev: number; next: string | null };
    expect(page.items.map((d) => [d.id, d.rev])).toEqual([['alice', written.rev]]);
    expect(page.rev).toBeGreaterThanOrEqual(written.rev);
    expect(page.next).toBeNull();

    const rm = await run(['doc', 'rm', 'people', 'alice', '--if-match', String(written.rev), '--addr', addr, '--json']);
    expect(rm.code, rm.stderr).toBe(0);
    expect((JSON.parse(rm.stdout) as { rev: number }).rev).toBeGreaterThan(written.rev);

    const gone = await run(['doc', 'get', 'people', 'alice', '--addr', addr]);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain('not_found');
    expect(gone.stderr).toContain('people/alice');
  });

  it('put --if-match with a stale revision exits 1, prints precondition_failed and the current rev', async () => {
    const first = await solo.app.inject({ method: 'PUT', url: '/v1/docs/people/bob', payload: { v: 1 } });
    const rev = (first.json() as { rev: number }).rev;
    await solo.app.inject({ method: 'PUT', url: '/v1/docs/people/bob', payload: { v: 2 } });
    const r = await run(['doc', 'put', 'people', 'bob', '--data', '{"v":3}', '--if-match', String(rev), '--addr', addr]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('precondition_failed');
    expect(r.stderr).toMatch(/--if-match \d+/);
    expect(solo.store.get('people', 'bob')?.doc).toEqual({ v: 2 });
  });

  it('exits 3 and says what to do when no node answers', async () => {
    const r = await run(['doc', 'get', 'people', 'alice', '--addr', `127.0.0.1:${await freePort()}`]);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('cannot reach');
    expect(r.stderr).toContain('--addr');
  });

  it('doc watch --json prints one JSON object per change', async () => {
    const after = solo.store.revision;
    const w = start(['doc', 'watch', '--collection', 'watched', '--after', String(after), '--addr', addr, '--json']);
    try {
      await solo.app.inject({ method: 'PUT', url: '/v1/docs/other/x', payload: { skip: true } });
      const put = await solo.app.inject({ method: 'PUT', url: '/v1/docs/watched/w1', payload: { n: 1 } });
      await solo.app.inject({ method: 'DELETE', url: '/v1/docs/watched/w1' });
      const ev1 = JSON.parse(await w.line()) as WatchEventView;
      expect(ev1).toMatchObject({ type: 'put', collection: 'watched', id: 'w1', rev: (put.json() as { rev: number }).rev });
      const ev2 = JSON.parse(await w.line()) as WatchEventView;
      expect(ev2).toMatchObject({ type: 'delete', collection: 'watched', id: 'w1' });
      expect(ev2.rev).toBeGreaterThan(ev1.rev);
    } finally {
      const end = await w.stop();
      expect(end.code, end.stderr).toBe(0);
    }
  });

  it('doc ls --watch lists, then prints the changes after the listing', async () => {
    await solo.app.inject({ method: 'PUT', url: '/v1/docs/lw/a', payload: { n: 1 } });
    const w = start(['doc', 'ls', 'lw', '--watch', '--addr', addr, '--json']);
    try {
      const listing = JSON.parse(await w.line()) as { items: { id: string }[]; rev: number };
      expect(listing.items.map((d) => d.id)).toEqual(['a']);
      const put = await solo.app.inject({ method: 'PUT', url: '/v1/docs/lw/b', payload: { n: 2 } });
      const ev = JSON.parse(await w.line()) as WatchEventView;
      expect(ev).toMatchObject({ type: 'put', id: 'b', rev: (put.json() as { rev: number }).rev });
    } finally {
      await w.stop();
    }
  });

  it('refuses bad command lines with exit 2 before sending anything', async () => {
    const noDoc = await inProcess('doc', 'put', 'people', 'x', '--addr', addr);
    expect(noDoc.code).toBe(2);
    expect(noDoc.stderr).toContain('--data');
    expect((await inProcess('doc', 'put', 'people', 'x', '--data', '[1]', '--addr', addr)).code).toBe(2);
    expect((await inProcess('doc', 'put', 'people', 'x', '--data', '{', '--addr', addr)).code).toBe(2);
    expect((await inProcess('doc', 'put', 'people', 'x', '--data', '{}', '--if-match', 'abc', '--addr', addr)).code).toBe(2);
    expect((await inProcess('doc', 'put', 'people', 'x', '--data', '{}', '--if-match', '3', '--if-absent', '--addr', addr)).code).toBe(2);
    expect((await inProcess('doc', 'ls', 'people', '--limit', '0', '--addr', addr)).code).toBe(2);
    expect((await inProcess('doc', 'get', 'people', '--addr', addr)).code).toBe(2);
    expect((await inProcess('doc', 'get', 'people', 'x', '--addr', 'nowhere')).code).toBe(2);
    expect((await inProcess('doc', 'frobnicate')).code).toBe(2);
    expect((await inProcess('cluster', 'add', '--id', 'x', '--addr', addr)).code).toBe(2);
  });

  it('maps an API bad_request to exit 1 and lists every problem', async () => {
    const r = await inProcess('doc', 'put', 'Not A Collection', 'x', '--data', '{}', '--addr', addr);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('bad_request');
    expect(r.stderr).toContain('- params.collection:');
    const j = await inProcess('doc', 'put', 'Not A Collection', 'x', '--data', '{}', '--addr', addr, '--json');
    expect(j.code).toBe(1);
    const body = JSON.parse(j.stderr) as { error: { code: string; details: { problems: unknown[] } }; exitCode: number };
    expect(body.error.code).toBe('bad_request');
    expect(body.error.details.problems.length).toBeGreaterThan(0);
    expect(body.exitCode).toBe(1);
  });

  it('follows --all pages and --if-absent refuses an existing document', async () => {
    for (const id of ['p1', 'p2', 'p3']) await solo.app.inject({ method: 'PUT', url: `/v1/docs/paged/${id}`, payload: {} });
    const one = await inProcess('doc', 'ls', 'paged', '--limit', '2', '--addr', addr, '--json');
    expect((JSON.parse(one.stdout) as { items: unknown[]; next: string | null }).next).toBe('p2');
    const all = await inProcess('doc', 'ls', 'paged', '--limit', '2', '--all', '--addr', addr, '--json');
    expect((JSON.parse(all.stdout) as { items: { id: string }[] }).items.map((d) => d.id)).toEqual(['p1', 'p2', 'p3']);
    const exists = await inProcess('doc', 'put', 'paged', 'p1', '--data', '{}', '--if-absent', '--addr', addr);
    expect(exists.code).toBe(1);
    expect(exists.stderr).toContain('precondition_failed');
  });
});

describe('shoal cluster', () => {
  it('members --json lists the member with its role and addresses', async () => {
    const r = await run(['cluster', 'members', '--addr', addr, '--json']);
    expect(r.code, r.stderr).toBe(0);
    const members = JSON.parse(r.stdout) as { id: string; name: string; role: string; apiAddress: string; peerAddress: string; health: string }[];
    expect(members).toEqual([expect.objectContaining({ id: 'solo', name: 'solo', role: 'voter', peerAddress: 'memory:solo', health: 'healthy' })]);
  });

  it('adds a learner (--force: nothing runs at its address) and removes it by name; refuses unknown members and a transfer with no other voter', async () => {
    const add = await inProcess('cluster', 'add', '--id', 'learner1', '--name', 'l1', '--peer', '127.0.0.1:7999', '--api', '127.0.0.1:7998', '--force', '--addr', addr);
    expect(add.code, add.stderr).toBe(0);
    expect(add.stdout).toContain('added l1 (learner1) as a learner');
    expect(add.stdout).toContain('shoal cluster promote l1');
    expect(solo.node.membership.get('learner1')).toBeDefined();
    const again = await inProcess('cluster', 'add', '--id', 'learner1', '--name', 'l1', '--peer', '127.0.0.1:7999', '--api', '127.0.0.1:7998', '--force', '--addr', addr);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('already_exists');
    const rm = await inProcess('cluster', 'remove', 'l1', '--addr', addr);
    expect(rm.code, rm.stderr).toBe(0);
    expect(rm.stdout).toMatch(/^removed l1 \(learner1\) from the cluster/);
    expect(rm.stdout).toContain('voters now: solo (quorum 1)');
    expect(solo.node.membership.get('learner1')).toBeUndefined();
    const unknown = await inProcess('cluster', 'promote', 'nobody', '--addr', addr);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('not_found');
    expect(unknown.stderr).toContain('shoal cluster members');
    const transfer = await inProcess('cluster', 'transfer-leader', '--addr', addr);
    expect(transfer.code).toBe(1);
    expect(transfer.stderr).toContain('no other voter');
  });

  it('cluster status is shoal status', async () => {
    const r = await inProcess('cluster', 'status', '--addr', addr, '--json');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ clusterId: 'test-cluster', leader: 'solo', node: 'solo', softwareVersion: '0.0.0-test' });
    const text = await inProcess('cluster', 'status', '--addr', addr);
    expect(text.stdout).toContain('(answered by solo, shoal 0.0.0-test)');
    expect(text.stdout).toMatch(/^NAME +ID +ROLE +API +MATCH +LAG +RTT MS +VERSION +HEALTH$/m);
    // The committed feature level and what each member's build supports (a rolling upgrade's gauge).
    const view = JSON.parse(r.stdout) as { featureLevel: number; members: { featureLevelMax: number | null }[] };
    expect(view.members[0]?.featureLevelMax).toBe(featureLevelMax);
    expect(view.featureLevel).toBeGreaterThanOrEqual(1);
    expect(text.stdout).toMatch(new RegExp(`^feature level ${view.featureLevel}`, 'm'));
  });
});

describe('shoal snapshot', () => {
  // A restore writes an admin credential for the new cluster where the CLI looks. Keep it out of
  // the other tests' $SHOAL_CONFIG: found there, it would send their calls to the plain-HTTP test
  // node over HTTPS.
  const sharedConfig = process.env.SHOAL_CONFIG;
  beforeAll(() => {
    process.env.SHOAL_CONFIG = mkdtempSync(path.join(os.tmpdir(), 'shoal-config-restore-'));
  });
  afterAll(() => {
    process.env.SHOAL_CONFIG = sharedConfig;
    useCredentialFlag(undefined);
  });

  it('saves a snapshot, restores it into a NEW cluster that serves the same documents and revisions', async () => {
    const put = await solo.app.inject({ method: 'PUT', url: '/v1/docs/keep/k1', payload: { kept: true } });
    const keptRev = (put.json() as { rev: number }).rev;
    const dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-snap-'));
    const file = path.join(dir, 'backup.snap');

    const save = await run(['snapshot', 'save', file, '--addr', addr, '--json']);
    expect(save.code, save.stderr).toBe(0);
    const saved = JSON.parse(save.stdout) as { bytes: number; index: number; clusterId: string; documents: number };
    expect(saved.clusterId).toBe('test-cluster');
    expect(saved.index).toBeGreaterThanOrEqual(keptRev);
    const bytes = readFileSync(file);
    expect(bytes.length).toBe(saved.bytes);
    expect(decodeSnapshotFile(bytes, file).index).toBe(saved.index);

    const data = path.join(dir, 'restored');
    const api = `127.0.0.1:${await freePort()}`;
    const restore = await run(['snapshot', 'restore', file, '--data', data, '--name', 'r1', '--api', api, '--peer', `127.0.0.1:${await freePort()}`]);
    expect(restore.code, restore.stderr).toBe(0);
    expect(restore.stdout).toContain(`documents at index ${saved.index} into a NEW cluster`);
    expect(restore.stdout).toContain('(the old cluster was test-cluster)');
    expect(restore.stdout).toContain(`shoal serve --config ${path.join(data, 'shoal.yaml')}`);
    // Added as the context named after the node, made current (src/cli/contexts.ts).
    expect(existsSync(path.join(process.env.SHOAL_CONFIG ?? '', 'contexts', 'r1.json'))).toBe(true);

    const twice = await inProcess('snapshot', 'restore', file, '--data', data, '--name', 'r1');
    expect(twice.code).toBe(1);
    expect(twice.stderr).toContain('already initialized');

    // The restored node serves HTTPS like any node; this test reads it over plain HTTP (the opt-in).
    const restored = loadConfig(path.join(data, 'shoal.yaml'));
    const running = await startNode({ ...restored, api: { ...restored.api, insecureLoopback: true } }, silent);
    try {
      const deadline = Date.now() + 15_000;
      while (!running.node.isLeader && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(running.node.isLeader).toBe(true);
      const doc = await (await fetch(`http://${api}/v1/docs/keep/k1`)).json() as { rev: number; doc: unknown };
      expect(doc).toMatchObject({ rev: keptRev, doc: { kept: true } });
      const view = await (await fetch(`http://${api}/v1/cluster`)).json() as { clusterId: string; members: { name: string }[] };
      expect(view.clusterId).not.toBe('test-cluster');
      expect(view.members.map((m) => m.name)).toEqual(['r1']);
      const next = await fetch(`http://${api}/v1/docs/keep/k2`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: '{}' });
      expect((await next.json() as { rev: number }).rev).toBeGreaterThan(saved.index);
      // The restored node starts from the snapshot, and its metrics say so.
      const metrics = await (await fetch(`http://${api}/metrics`)).text();
      expect(metrics).toMatch(new RegExp(`^shoal_raft_snapshot_index ${saved.index}$`, 'm'));
      expect(metrics).toContain('# TYPE shoal_snapshot_duration_seconds histogram');
    } finally {
      await running.stop();
    }
  });

  it('refuses a damaged snapshot file and writes nothing', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-snap-'));
    const file = path.join(dir, 'bad.snap');
    writeFileSync(file, 'SHOALBAK\0\0\0\0garbage');
    const r = await inProcess('snapshot', 'restore', file, '--data', path.join(dir, 'd'), '--name', 'x');
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('damaged');
    expect(existsSync(path.join(dir, 'd'))).toBe(false);
  });
});

describe('help', () => {
  it('every group and subcommand has --help with usage and exit codes', async () => {
    const groups: Record<string, Record<string, string>> = {
      doc: docHelps, cluster: { ...clusterHelps, status: '' }, snapshot: snapshotHelps,
    };
    for (const [group, subs] of Object.entries(groups)) {
      for (const sub of Object.keys(subs)) {
        const r = await inProcess(group, sub, '--help');
        expect(r.code, `${group} ${sub}`).toBe(0);
        expect(r.stdout, `${group} ${sub}`).toContain(`Usage: shoal ${group} ${sub}`);
        expect(r.stdout, `${group} ${sub}`).toContain('Exit codes:');
      }
    }
    const top = await inProcess('--help');
    for (const group of Object.keys(groups)) expect(top.stdout).toContain(`  ${group} `);
  });

  it('a group --help lists its subcommands (as a child process)', async () => {
    const r = await run(['doc', '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('Usage: shoal doc <subcommand>');
    for (const sub of ['get', 'put', 'rm', 'ls', 'watch']) expect(r.stdout).toContain(`  ${sub} `);
    expect(r.stdout).toContain('Exit codes:');
  });
});

describe('client internals', () => {
  it('maps failures to exit codes', () => {
    const api = (status: number, code: string): ApiError => new ApiError(status, { code, message: code }, 'x:1');
    expect(exitCodeOf(api(404, 'not_found'))).toBe(1);
    expect(exitCodeOf(api(409, 'revision_mismatch'))).toBe(1);
    expect(exitCodeOf(api(410, 'cursor_expired'))).toBe(1);
    expect(exitCodeOf(api(400, 'bad_request'))).toBe(1);
    expect(exitCodeOf(api(503, 'no_leader'))).toBe(3);
    expect(exitCodeOf(api(504, 'timeout'))).toBe(3);
    expect(exitCodeOf(new UnreachableError('x:1', 'ECONNREFUSED', false))).toBe(3);
    expect(exitCodeOf(new CliFailure('m', 4))).toBe(4);
  });

  it('gives precondition_failed the advice of revision_mismatch and already_exists', () => {
    const hint = (body: ApiError['body'], ctx: FailureContext = {}): string => {
      let stderr = '';
      const err = vi.spyOn(console, 'error').mockImplementation((...a: unknown[]) => { stderr += `${a.join(' ')}\n`; });
      try {
        reportFailure('doc put', new ApiError(412, body, 'x:1'), false, ctx);
      } finally {
        err.mockRestore();
      }
      return stderr;
    };
    const failed = (currentRev: number | null) => ({ code: 'precondition_failed', message: 'precondition failed', details: { currentRev } });
    expect(hint(failed(43))).toContain('it is at rev 43; read it again and retry with --if-match 43');
    expect(hint(failed(43), { ifAbsent: true })).toContain('it exists at rev 43; replace it with --if-match 43');
    expect(hint(failed(null))).toContain('the document does not exist (any more); drop --if-match to create it, or use --if-absent');
    expect(hint({ code: 'revision_mismatch', message: 'm', details: { currentRev: 43 } })).toContain('retry with --if-match 43');
    expect(hint({ code: 'member_not_ready', message: 'm', details: { reason: 'cluster_mismatch' } })).toContain("--ca-from <a member's data dir>");
    expect(hint({ code: 'member_not_ready', message: 'm', details: { reason: 'lagging' } })).toMatch(/caught up .*--force/);
    expect(hint({ code: 'ambiguous_name', message: 'm', details: { candidates: [{ id: 'a1', name: 't' }, { id: 'b2', name: 't' }] } })).toContain('use the id instead: a1 or b2');
  });

  it('parses server-sent events split anywhere, with comments and CRLF', () => {
    const text = ': watching after rev 3\n\nid: 4\nevent: put\ndata: {"a":1}\n\r\nevent: delete\r\ndata: x\r\ndata: y\r\n\r\n';
    for (const size of [1, 3, 7, text.length]) {
      const p = new SseParser();
      const got = [];
      for (let i = 0; i < text.length; i += size) got.push(...p.push(text.slice(i, i + size)));
      expect(got, `chunks of ${size}`).toEqual([{ event: 'put', data: '{"a":1}', id: '4' }, { event: 'delete', data: 'x\ny' }]);
    }
  });

  it('resumes after a dropped connection from the last complete revision, printing nothing twice', async () => {
    const ev = (rev: number, id: string): string => `event: put\ndata: ${JSON.stringify({ rev, type: 'put', collection: 'c', id })}\n\n`;
    const withId = (rev: number, id: string): string => `id: ${rev}\n${ev(rev, id)}`;
    const requests: string[] = [];
    const server: Server = createServer((req, res) => {
      if (req.url?.startsWith('/v1/cluster')) {
        res.writeHead(404, { 'content-type': 'application/json' }).end('{"code":"not_found","message":"no route"}');
        return;
      }
      requests.push(req.url ?? '');
      res.writeHead(200, { 'content-type': 'text/event-stream', 'x-shoal-watch-from': '4' });
      if (requests.length === 1) {
        // rev 5 complete; rev 6 has two events and the connection drops after the first.
        res.write(withId(5, 'a') + ev(6, 'b'));
        setTimeout(() => res.destroy(), 50);
      } else {
        res.write(ev(6, 'b') + withId(6, 'c') + withId(7, 'd'));
      }
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    const ctrl = new AbortController();
    const got: string[] = [];
    const notices: string[] = [];
    const done = followWatch({
      addr: `127.0.0.1:${port}`, signal: ctrl.signal, onNotice: (m) => notices.push(m),
      onEvent: (e) => {
        got.push(`${e.rev}${e.id}`);
        if (e.rev === 7) ctrl.abort();
      },
    });
    await done;
    server.closeAllConnections();
    server.close();
    expect(got).toEqual(['5a', '6b', '6c', '7d']);
    expect(requests[0]).toBe('/v1/watch');
    expect(requests[1]).toBe('/v1/watch?after=5');
    expect(notices.join('\n')).toContain('after rev 5');
  });
});
