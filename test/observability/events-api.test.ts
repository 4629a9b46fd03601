// GET /v1/events and `shoal events` on a real node: the retained events, the sync marker, live
// events after it, cursors, type filters, the node's own events, and refusals.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SseParser, type SseMessage } from '../../src/api/sse-parser.ts';
import { inProcess } from '../cli/in-process.ts';
import { oneNode, type OneNode } from './one-node.ts';
import { waitFor } from '../transport/helpers.ts';

interface Stream {
  /** Messages up to and including the sync marker. */
  backlog: SseMessage[];
  /** Reads messages until `until` says stop (or `timeoutMs` passes: then it fails). */
  more: (until: (m: SseMessage) => boolean, timeoutMs?: number) => Promise<SseMessage[]>;
  headers: Headers;
  close: () => void;
}

async function open(n: OneNode, query: string, headers: Record<string, string> = {}): Promise<Stream> {
  const ctrl = new AbortController();
  const res = await fetch(n.url(`/v1/events${query}`), { headers: { accept: 'text/event-stream', ...headers }, signal: ctrl.signal });
  if (res.status !== 200) throw new Error(`${res.status}: ${await res.text()}`);
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const parser = new SseParser();
  const decoder = new TextDecoder();
  const queued: SseMessage[] = [];
  const more = async (until: (m: SseMessage) => boolean, timeoutMs = 10_000): Promise<SseMessage[]> => {
    const out: SseMessage[] = [];
    const timer = setTimeout(() => ctrl.abort(), timeoutMs);
    try {
      for (;;) {
        const m = queued.shift();
        if (m !== undefined) {
          out.push(m);
          if (until(m)) return out;
          continue;
        }
        const { done, value } = await reader.read();
        if (done) throw new Error(`the stream ended after ${JSON.stringify(out)}`);
        queued.push(...parser.push(decoder.decode(value, { stream: true })));
      }
    } finally {
      clearTimeout(timer);
    }
  };
  const backlog = await more((m) => m.event === 'sync');
  return { backlog, more, headers: res.headers, close: () => ctrl.abort() };
}

const data = (m: SseMessage): Record<string, unknown> => JSON.parse(m.data) as Record<string, unknown>;

let n: OneNode;
beforeAll(async () => {
  // Small stream bounds, to see an event stream refused past them (no test here holds more than 3).
  n = await oneNode(undefined, { watchStreamsMax: 8, watchStreamsPerClientMax: 3 });
  await waitFor('leader.elected recorded', () => n.running.events.clusterSince(0, ['leader.elected']).length > 0, 10_000);
}, 60_000);
afterAll(async () => {
  await n.close();
});

describe('GET /v1/events', () => {
  it('sends the retained cluster events, a sync marker, then new events as they are recorded', async () => {
    const s = await open(n, '');
    try {
      expect(s.headers.get('x-shoal-events-scope')).toBe('cluster');
      const [elected, ...rest] = s.backlog;
      expect(elected?.event).toBe('leader.elected');
      expect(data(elected as SseMessage)).toMatchObject({ scope: 'cluster', type: 'leader.elected', subject: n.running.identity.id, nodeName: 'solo', details: { term: n.running.node.currentTerm } });
      expect(elected?.id).toBe(String(data(elected as SseMessage).cursor));
      expect(rest.at(-1)?.event).toBe('sync');
      n.running.events.recordEvent('test.live', 'thing', { n: 1 });
      // Other events may come first (the feature level rising after the election).
      const live = (await s.more((m) => m.event === 'test.live')).at(-1);
      expect(live?.event).toBe('test.live');
      expect(Number(live?.id)).toBeGreaterThan(Number(elected?.id));
    } finally {
      s.close();
    }
  });

  it('starts after a cursor (?after or Last-Event-ID) and filters by type and the types under it', async () => {
    n.running.events.recordEvent('test.first', 'a');
    n.running.events.recordEvent('test.second', 'b');
    n.running.events.recordEvent('other.thing', 'c');
    await waitFor('three events', () => n.running.events.clusterSince(0, ['test.second', 'other']).length === 2, 10_000);
    const first = n.running.events.clusterSince(0, ['test.first'])[0]?.cursor ?? 0;
    const types = (s: Stream): string[] => s.backlog.filter((m) => m.event !== 'sync').map((m) => m.event);
    const after = await open(n, `?after=${first}&type=test`);
    const resumed = await open(n, '?type=test,other', { 'last-event-id': String(first) });
    const both = await open(n, '?type=test.first&type=other.thing');
    try {
      expect(types(after)).toEqual(['test.second']);
      expect(types(resumed)).toEqual(['test.second', 'other.thing']);
      expect(types(both)).toEqual(['test.first', 'other.thing']);
      expect(data(after.backlog.at(-1) as SseMessage)).toEqual({ cursor: n.running.events.clusterSince(0, ['test.second'])[0]?.cursor });
    } finally {
      after.close();
      resumed.close();
      both.close();
    }
  });

  it('records the control plane\'s changes: a node registered and drained, a service created, updated, rolled out and removed', async () => {
    const types = ['node', 'service'];
    const post = async (url: string, body: unknown, method = 'POST'): Promise<void> => {
      const res = await fetch(n.url(url), { method, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      expect(res.status, await res.text()).toBe(200);
    };
    const service = (image: string): unknown => ({ documents: [{ apiVersion: 'shoal/v1', kind: 'Service', name: 'web', image, command: ['sleep', '3600'], replicas: 1 }] });
    const id = n.running.identity.id;
    await waitFor('node.registered', () => n.running.events.clusterSince(0, ['node.registered']).length === 1, 10_000);
    await post('/v1/apply', service('busybox:1'));
    await post('/v1/apply', service('busybox:2'));
    await post('/v1/nodes/solo/availability', { availability: 'drain' });
    await post('/v1/nodes/solo/availability', { availability: 'active' });
    const res = await fetch(n.url('/v1/services/web'), { method: 'DELETE' });
    expect(res.status).toBe(200);
    await waitFor('service.removed', () => n.running.events.clusterSince(0, ['service.removed']).length === 1, 10_000);
    const seen = n.running.events.clusterSince(0, types).map((e) => `${e.type} ${e.subject} ${JSON.stringify(e.details)}`);
    expect(seen).toEqual(expect.arrayContaining([
      `node.registered ${id} {"name":"solo","state":"ready","availability":"active"}`,
      'service.created web {"specVersion":1}',
      'service.updated web {"specVersion":2,"from":1}',
      `node.drained ${id} {"name":"solo","from":"active"}`,
      `node.activated ${id} {"name":"solo","from":"drain"}`,
      'service.removed web {"specVersion":2}',
    ]));
    expect(seen.filter((e) => e.startsWith('service.rollout web {"state":"updating"'))).toHaveLength(1);
    // In the order they were applied.
    const order = ['service.created', 'service.updated', 'node.drained', 'node.activated', 'service.removed'];
    expect(seen.map((e) => e.split(' ')[0]).filter((t) => order.includes(t as string))).toEqual(order);
  });

  it('serves the node\'s own events with ?local', async () => {
    const s = await open(n, '?local&type=leader');
    try {
      expect(s.headers.get('x-shoal-events-scope')).toBe('local');
      expect(s.backlog[0]).toMatchObject({ event: 'leader.changed' });
      expect(data(s.backlog[0] as SseMessage)).toMatchObject({ scope: 'local', subject: n.running.identity.id, details: { leader: n.running.identity.id } });
    } finally {
      s.close();
    }
  });

  it('refuses a bad cursor or type with every problem at once', async () => {
    const res = await fetch(n.url('/v1/events?after=-1&type=Not%20A%20Type&colour=red'));
    expect(res.status).toBe(400);
    const body = await res.json() as { code: string; details: { problems: { path: string }[] } };
    expect(body.code).toBe('bad_request');
    expect(body.details.problems.map((p) => p.path).sort()).toEqual(['query', 'query.after', 'query.type']);
  });

  it('refuses a cluster cursor ahead of the store, as /v1/watch does', async () => {
    const ahead = n.running.store.revision + 1000;
    const res = await fetch(n.url(`/v1/events?after=${ahead}`));
    expect(res.status).toBe(400);
    const body = await res.json() as { code: string; details: { currentRev: number; problems: { path: string }[] } };
    expect(body.code).toBe('bad_request');
    expect(body.details.problems.map((p) => p.path)).toEqual(['query.after']);
    expect(body.details.currentRev).toBeLessThan(ahead);
    // A node's own cursor from another process reads the whole ring instead.
    const local = await open(n, `?local&after=${ahead}`);
    local.close();
    expect(local.backlog.length).toBeGreaterThan(1);
  });

  it('takes a watch stream slot while open (shoal_api_watch_streams), and is refused past watchStreamsPerClientMax', async () => {
    const gauge = async (): Promise<number> => Number(/^shoal_api_watch_streams (\d+)$/m.exec(await (await fetch(n.url('/metrics'))).text())?.[1]);
    // The streams of earlier tests are released once their sockets close.
    const settle = async (want: number): Promise<void> => {
      const deadline = Date.now() + 10_000;
      while ((await gauge()) !== want && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(await gauge()).toBe(want);
    };
    await settle(0);
    const s = await open(n, '');
    expect(await gauge()).toBe(1);
    const more = [await open(n, ''), await open(n, '?local')];
    expect(await gauge()).toBe(3);
    const refused = await fetch(n.url('/v1/events'));
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(await refused.json()).toMatchObject({ code: 'too_many_requests', details: { limit: 'watchStreamsPerClientMax', max: 3 } });
    for (const m of [s, ...more]) m.close();
    await settle(0);
  });
});


describe('shoal events', () => {
  it('prints the retained events, one line each, and exits', async () => {
    const r = await inProcess('events', '--addr', n.running.apiAddress, '--type', 'leader');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^\\S+Z  leader\\.elected\\s+${n.running.identity.id}  term=\\d+  \\(by solo, term \\d+\\)$`, 'm'));
  });

  it('prints JSON lines with --json, and the node\'s own events with --local', async () => {
    const r = await inProcess('events', '--addr', n.running.apiAddress, '--json', '--local', '--type', 'leader.changed');
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines[0]).toMatchObject({ scope: 'local', type: 'leader.changed', nodeName: 'solo' });
  });

  it('refuses a bad --type or --after as usage errors (exit 2), and says when no node answers (exit 3)', async () => {
    expect((await inProcess('events', '--type', 'Bad Type')).code).toBe(2);
    expect((await inProcess('events', '--after', 'soon')).code).toBe(2);
    const down = await inProcess('events', '--addr', '127.0.0.1:1');
    expect(down.code).toBe(3);
    expect(down.stderr).toContain('cannot reach 127.0.0.1:1');
  });
});
