// docker-modem formats each request's options (which hold the client's agent) with
// util.inspect(showHidden, depth: null) for a debug line even when debugging is off: an agent
// inspected whole, with its sockets, cost most of a node's CPU while it converged (issue 44's
// profile). The runtime's agent inspects as one short line, however many sockets it holds.

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { inspect } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DockerAgent } from '../../src/executor/docker-runtime.ts';

let server: http.Server;
let port: number;

beforeAll(async () => {
  // Answers after a moment, so requests hold their sockets while the agent is inspected.
  server = http.createServer((_req, res) => setTimeout(() => res.end('ok'), 200));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});
afterAll(async () => {
  await new Promise<void>((r) => server.close(() => r()));
});

/** Starts `n` requests through `agent`; answers how long its options inspect while they are open, and waits for them. */
async function inspectedWhileBusy(agent: http.Agent, n: number): Promise<number> {
  const done = Array.from({ length: n }, () => new Promise<void>((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: '/', agent }, (res) => { res.resume(); res.on('end', resolve); }).on('error', reject);
  }));
  await new Promise((r) => setTimeout(r, 50));
  const length = inspect({ path: '/containers/json', method: 'GET', agent }, { showHidden: true, depth: null }).length;
  await Promise.all(done);
  return length;
}

describe('the Docker client agent', () => {
  it('inspects as one short line with its sockets open, where a plain agent is inspected whole', async () => {
    const quiet = await inspectedWhileBusy(new DockerAgent({ keepAlive: false, maxSockets: 32 }), 8);
    const plain = await inspectedWhileBusy(new http.Agent({ keepAlive: false, maxSockets: 32 }), 8);
    expect(quiet).toBeLessThan(200);
    expect(plain).toBeGreaterThan(10_000);
  });
});
