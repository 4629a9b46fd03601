// A node whose start fails at any of its components leaves nothing running: its API and peer
// ports can be bound again, no handle or timer keeps the process alive, no child process is left;
// and a normal stop stops the components in the reverse order of their starts
// (src/server/server.ts, nodeComponents; src/server/lifecycle.ts). One real node in this
// process (disk storage, TLS transport, the HTTP API, the memory runtime), started again and again.

import { createHook } from 'node:async_hooks';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../bench/lib/proc.ts';
import { silentLogger } from '../../src/log.ts';
import { initNode } from '../../src/node/identity.ts';
import { parseConfig, type NodeConfig } from '../../src/server/config.ts';
import { nodeComponents, startNode, type StartOptions } from '../../src/server/server.ts';
import { ShoalError } from '../../src/errors.ts';

/** The components that return no stop with this config (no DNS, firewall, overlay, ingress or mesh). */
const withoutStop = new Set(['bootstrap', 'node-parts', 'dns', 'firewall', 'overlay', 'ingress', 'mesh', 'api-bound']);
const names = nodeComponents.map((c) => c.name);

let dir: string;
let config: NodeConfig;
let apiPort: number;
let peerPort: number;

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-start-failure-'));
  const identity = await initNode({ dataDir: dir, name: 'solo' });
  apiPort = await freePort();
  peerPort = await freePort();
  const apiAddress = `127.0.0.1:${apiPort}`;
  const peerAddress = `127.0.0.1:${peerPort}`;
  config = parseConfig({
    dataDir: dir, api: { listen: apiAddress, insecureLoopback: true }, peer: { listen: peerAddress },
    bootstrap: [{ id: identity.id, name: 'solo', apiAddress, peerAddress }],
    raft: { tickMs: 10, heartbeatIntervalMs: 10, electionTimeoutMs: 50 },
    runtime: { kind: 'memory' },
    // No request is held at the stop: the drain bound never matters here.
    limits: { apiDrainMs: 1000 },
  }, 'test');
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** The kinds of the resources keeping the event loop alive, counted. */
function activeResources(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const r of process.getActiveResourcesInfo()) counts.set(r, (counts.get(r) ?? 0) + 1);
  return counts;
}

/** What is active beyond `baseline`, counted (empty: nothing). */
function beyond(baseline: Map<string, number>): string {
  return [...activeResources()].filter(([k, n]) => n > (baseline.get(k) ?? 0)).map(([k, n]) => `${k}×${n - (baseline.get(k) ?? 0)}`).sort().join(', ');
}

/**
 * The timers (unref'd ones too, which getActiveResourcesInfo does not list), sockets, servers,
 * child processes, signal and file watchers made while the node starts, runs and stops, and not
 * yet gone. (Requests and file handles are left out: their end is told only when the garbage
 * collector frees them.)
 */
const lasting = new Set(['Timeout', 'TCPSERVERWRAP', 'TCPWRAP', 'PIPESERVERWRAP', 'PIPEWRAP', 'UDPWRAP', 'PROCESSWRAP', 'SIGNALWRAP', 'FSEVENTWRAP', 'STATWATCHER']);
const live = new Map<number, { type: string; resource: object; stack: string }>();
/** The test's own timers (its waits), left out of `live`. */
const ownTimers = new WeakSet<object>();
const tracker = createHook({
  init(id, type, _trigger, resource) {
    if (lasting.has(type)) live.set(id, { type, resource, stack: new Error().stack ?? '' });
  },
  destroy(id) { live.delete(id); },
});

afterEach(() => {
  tracker.disable();
});

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => { ownTimers.add(setTimeout(resolve, ms)); });
}

/** The resources the node left, each with where it was made (empty: none). */
function stillLive(): string {
  return [...live.values()].filter((r) => !ownTimers.has(r.resource))
    .map((r) => `${r.type} made ${r.stack.split('\n').filter((l) => l.includes('/src/') || l.includes('/net/') || l.includes('/transport/')).slice(0, 3).join(' ').trim()}`).join('\n');
}

/**
 * Starts tracking (in the test's body: the test runner's own timer is made before it) and
 * returns the resources active now, once the handles closed before settle: a closed handle is
 * listed until the event loop's next turn, and a port helper's server was just closed.
 */
async function begin(): Promise<Map<string, number>> {
  live.clear();
  tracker.enable();
  await sleep(20);
  return activeResources();
}

/** Waits until nothing the node made is left and nothing beyond the baseline is active. */
async function expectResourcesBack(baseline: Map<string, number>, why: string): Promise<void> {
  const deadline = Date.now() + 3000;
  while ((stillLive() !== '' || beyond(baseline) !== '') && Date.now() < deadline) await sleep(10);
  expect(stillLive(), `${why}: async resources left`).toBe('');
  expect(beyond(baseline), `${why}: resources left keeping the process alive`).toBe('');
}

/** Binds the port and releases it: it throws if something still listens there. */
async function expectFree(port: number, why: string): Promise<void> {
  const srv = createServer();
  const err = await new Promise<Error | undefined>((resolve) => {
    srv.once('error', resolve);
    srv.listen(port, '127.0.0.1', () => resolve(undefined));
  });
  expect(err?.message, `${why}: port ${port} still taken`).toBeUndefined();
  await new Promise((r) => srv.close(r));
}

async function hold(port: number): Promise<Server> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(port, '127.0.0.1', resolve));
  return srv;
}

/** Starts the node with hooks that note each start and stop; `failAt` throws before that component. */
function tracedStart(failAt?: string): { started: string[]; stopped: string[]; run: Promise<Awaited<ReturnType<typeof startNode>>> } {
  const started: string[] = [];
  const stopped: string[] = [];
  const opts: StartOptions = {
    clusterEvents: false,
    lifecycle: {
      beforeStart: (name) => {
        if (name === failAt) throw new Error(`injected failure at ${name}`);
        started.push(name);
      },
      afterStop: (name) => stopped.push(name),
    },
  };
  return { started, stopped, run: startNode(config, silentLogger, opts) };
}

describe('a node start that fails', () => {
  it('at each component in turn stops, in reverse, exactly what had started, and leaves nothing running', async () => {
    const baseline = await begin();
    expect(baseline.has('ProcessWrap')).toBe(false);
    for (const failAt of names) {
      const { started, stopped, run } = tracedStart(failAt);
      await expect(run, failAt).rejects.toThrow(`injected failure at ${failAt}`);
      expect(started, failAt).toEqual(names.slice(0, names.indexOf(failAt)));
      expect(stopped, failAt).toEqual(started.filter((n) => !withoutStop.has(n)).reverse());
      await expectResourcesBack(baseline, `failed at ${failAt}`);
      await expectFree(apiPort, `failed at ${failAt}`);
      await expectFree(peerPort, `failed at ${failAt}`);
      expect(activeResources().has('ProcessWrap'), `${failAt}: a child process`).toBe(false);
    }
  });

  it('because the peer port is taken says so, and leaves nothing running', async () => {
    const baseline = await begin();
    const taken = await hold(peerPort);
    try {
      const { stopped, run } = tracedStart();
      const err: unknown = await run.then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(ShoalError);
      expect((err as ShoalError).code).toBe('address_in_use');
      expect((err as ShoalError).message).toContain('peer.listen');
      expect(stopped).toEqual(['event-log', 'metrics', 'storage', 'peer-http']);
    } finally {
      await new Promise((r) => taken.close(r));
    }
    await expectResourcesBack(baseline, 'peer port taken');
    await expectFree(apiPort, 'peer port taken');
  });

  it('because the API port is taken says so, stops every component, and leaves nothing running', async () => {
    const baseline = await begin();
    const taken = await hold(apiPort);
    try {
      const { started, stopped, run } = tracedStart();
      const err: unknown = await run.then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(ShoalError);
      expect((err as ShoalError).code).toBe('address_in_use');
      expect((err as ShoalError).message).toContain('api.listen');
      expect(started).toEqual(names);
      expect(stopped).toEqual(names.filter((n) => !withoutStop.has(n)).reverse());
    } finally {
      await new Promise((r) => taken.close(r));
    }
    await expectResourcesBack(baseline, 'API port taken');
    await expectFree(peerPort, 'API port taken');
  });
});

describe('a node that started', () => {
  it('serves, then stops every component in the reverse order of their starts, hand-over and API drain before the Raft node', async () => {
    const baseline = await begin();
    const { started, stopped, run } = tracedStart();
    const running = await run;
    expect(started).toEqual(names);
    const res = await fetch(`http://${running.apiAddress}/healthz`);
    expect(res.status).toBe(200);
    await Promise.all([running.stop(), running.stop()]);
    await running.stop();
    const expected = names.filter((n) => !withoutStop.has(n)).reverse();
    expect(stopped).toEqual(expected);
    // What docs/operations.md, "Graceful stop", promises: the loops, then the hand-over, then the API, then the node.
    const at = (n: string): number => stopped.indexOf(n);
    expect(at('control')).toBeLessThan(at('hand-over'));
    expect(at('hand-over')).toBeLessThan(at('api'));
    expect(at('api')).toBeLessThan(at('raft-node'));
    await expectResourcesBack(baseline, 'stopped');
    await expectFree(apiPort, 'stopped');
    await expectFree(peerPort, 'stopped');
  });
});
