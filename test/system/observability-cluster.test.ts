// Three real `shoal serve` processes with `--log-level debug --log-format json` (heavy: run under
// flock /tmp/shoal-heavy.lock). A write taken by a follower is followed through the JSON logs by
// its proposal id, on that follower and on the leader; every line names its node, term and role;
// and the cluster's events say when a member goes away and comes back, through the API and
// `shoal events --watch`.

import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getJson, ProcessCluster, putJson, sleep, type ClusterNode } from '../cluster/process-cluster.ts';

const binPath = fileURLToPath(new URL('../../bin/shoal.js', import.meta.url));

/** The cluster of test/cluster, its nodes started with debug JSON logs. */
class DebugCluster extends ProcessCluster {
  override start(node: ClusterNode): void {
    if (node.proc) throw new Error(`${node.name} already running`);
    const proc = spawn(process.execPath, [binPath, 'serve', '--config', path.join(node.dir, 'shoal.yaml'), '--log-level', 'debug', '--log-format', 'json'], { stdio: ['ignore', 'pipe', 'pipe'] });
    proc.stderr.on('data', (b: Buffer) => node.logs.push(b.toString()));
    proc.stdout.on('data', (b: Buffer) => node.logs.push(b.toString()));
    proc.once('exit', () => { if (node.proc === proc) node.proc = undefined; });
    node.proc = proc;
  }
}

type Line = Record<string, unknown>;

function lines(node: ClusterNode): Line[] {
  return node.logs.join('').split('\n').filter((l) => l.trim() !== '').map((l) => {
    try {
      return JSON.parse(l) as Line;
    } catch {
      throw new Error(`${node.name} wrote a line that is not JSON: ${l}`);
    }
  });
}

async function until<T>(what: string, get: () => Promise<T | undefined> | T | undefined, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await get();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

/** The cluster events a node serves (the backlog of GET /v1/events, up to its sync marker). */
async function clusterEvents(node: ClusterNode, query = ''): Promise<Line[]> {
  const ctrl = new AbortController();
  const res = await fetch(`http://${node.apiAddress}/v1/events${query}`, { signal: ctrl.signal });
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  let text = '';
  try {
    while (!text.includes('event: sync\n')) {
      const { done, value } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
  } finally {
    ctrl.abort();
  }
  return [...text.matchAll(/^data: (.*)$/gm)].map((m) => JSON.parse(m[1] as string) as Line).filter((e) => 'type' in e);
}

describe('a three-node cluster with debug JSON logs', () => {
  const cluster = new DebugCluster({ nodes: 3 });
  beforeAll(async () => {
    await cluster.init();
    cluster.startAll();
    await cluster.waitForLeader();
  }, 60_000);
  afterAll(async () => {
    await cluster.destroy();
  });

  it('follows one write by its proposal id from the follower that took it to the leader', async () => {
    const leader = await cluster.waitForLeader();
    const follower = cluster.nodes.find((n) => n !== leader) as ClusterNode;
    const res = await putJson<{ rev: number }>(follower, '/v1/docs/obs/followed', { v: 1 });
    expect(res.status).toBe(200);

    const proposing = await until('the follower\'s debug line', () => lines(follower).find((l) => typeof l.proposal === 'string' && typeof l.reqId === 'string'));
    expect(proposing).toMatchObject({ level: 'debug', node: follower.name, nodeId: follower.id, role: 'follower' });
    expect(String(proposing.msg)).toContain(`proposing write ${String(proposing.proposal)} through leader ${leader.id}`);
    expect(String(proposing.proposal)).toMatch(new RegExp(`^${follower.id}/[0-9a-f]{12}#\\d+$`));
    const appending = await until('the leader\'s debug line', () => lines(leader).find((l) => l.proposal === proposing.proposal));
    expect(appending).toMatchObject({ level: 'debug', node: leader.name, nodeId: leader.id, role: 'leader', from: follower.id });
    expect(String(appending.msg)).toContain('leader appending write');
    // One line per write on each: the follower took one write through its API (its agent
    // proposes its own, without a request id), and no write has two lines.
    expect(lines(follower).filter((l) => l.proposal !== undefined && l.reqId !== undefined)).toHaveLength(1);
    for (const n of [follower, leader]) {
      const ids = lines(n).filter((l) => l.proposal !== undefined).map((l) => String(l.proposal));
      expect(new Set(ids).size).toBe(ids.length);
    }

    // Every line of every node names the node, its term and its role.
    for (const n of cluster.nodes) {
      for (const l of lines(n)) expect(l).toMatchObject({ node: n.name, nodeId: n.id, term: expect.any(Number) as unknown, role: expect.any(String) as unknown, level: expect.any(String) as unknown, msg: expect.any(String) as unknown });
    }
  });

  it('records the leader, a member going away and coming back, and shoal events --watch prints them', async () => {
    const leader = await cluster.waitForLeader();
    const [follower, victim] = cluster.nodes.filter((n) => n !== leader) as [ClusterNode, ClusterNode];
    const elected = await until('leader.elected', async () => (await clusterEvents(follower, '?type=leader')).find((e) => e.subject === leader.id));
    expect(elected).toMatchObject({ scope: 'cluster', type: 'leader.elected', node: leader.id, nodeName: leader.name });

    const watch = spawn(process.execPath, [binPath, 'events', '--watch', '--json', '--type', 'member', '--addr', follower.apiAddress], { stdio: ['ignore', 'pipe', 'pipe'] });
    const printed = collect(watch);
    try {
      await cluster.kill(victim);
      const gone = await until('member.unreachable', async () => (await clusterEvents(follower, '?type=member.unreachable')).find((e) => e.subject === victim.id));
      expect(gone).toMatchObject({ node: leader.id, details: { name: victim.name } });
      const local = await until('the follower\'s own view', async () => (await clusterEvents(follower, '?local&type=member')).find((e) => e.subject === victim.id));
      expect(local).toMatchObject({ scope: 'local', type: 'member.unreachable', node: follower.id });
      cluster.start(victim);
      await until('member.back', async () => (await clusterEvents(follower, '?type=member.back')).find((e) => e.subject === victim.id));
      await until('the watch to print both', () => (printed.lines().some((l) => l.type === 'member.back') ? true : undefined));
      expect(printed.lines().map((l) => `${String(l.type)} ${String(l.subject)}`)).toEqual([`member.unreachable ${victim.id}`, `member.back ${victim.id}`]);
    } finally {
      watch.kill('SIGINT');
    }
    expect(await new Promise((r) => watch.once('exit', r))).toBe(0);
    expect((await getJson<{ leader: string }>(follower, '/healthz')).body.leader).toBeTruthy();
  });
});

function collect(p: ChildProcess): { lines: () => Line[] } {
  let out = '';
  p.stdout?.on('data', (b: Buffer) => { out += b.toString(); });
  return { lines: () => out.split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as Line) };
}
