// What the transport tells node health of a peer (WsTransport.contact): when it last heard it,
// how the outbound link stands (connected, refused, closed, silent), a goodbye (a graceful close
// says so with 1001, a connection cut without one does not), and a refusal held until the peer
// is heard again.

import net from 'node:net';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { dialOutcomeOf } from '../../transport/peer-link.ts';
import { closedAfterEach, makePki, type Node, type Pki, startNode, waitFor } from './helpers.ts';

let pki: Pki;
const open = closedAfterEach();
const proxies: net.Server[] = [];

async function node(...args: Parameters<typeof startNode>): Promise<Node> {
  const n = await startNode(...args);
  open.push(n);
  return n;
}

afterEach(async () => {
  await Promise.all(proxies.splice(0).map((p) => new Promise((r) => p.close(r))));
});

beforeAll(async () => {
  pki = await makePki(['a', 'b']);
});

/**
 * A TCP proxy in front of `target`: 'forward' relays, 'blackhole' accepts and holds every
 * connection without a byte (a machine that answers nothing is the same to the dialler after a
 * round trip), and `cut()` destroys what it relays without a close frame (a process killed).
 */
async function proxy(target: string): Promise<{ address: string; mode: 'forward' | 'blackhole'; cut(): void; server: net.Server }> {
  const [host, port] = [target.slice(0, target.lastIndexOf(':')), Number(target.slice(target.lastIndexOf(':') + 1))];
  const sockets = new Set<net.Socket>();
  const p = {
    address: '', mode: 'forward' as 'forward' | 'blackhole', server: net.createServer((client) => {
      sockets.add(client);
      client.on('close', () => sockets.delete(client));
      client.on('error', () => undefined);
      if (p.mode === 'blackhole') return;
      const upstream = net.connect(port, host);
      sockets.add(upstream);
      upstream.on('error', () => client.destroy());
      client.on('error', () => upstream.destroy());
      client.pipe(upstream).pipe(client);
    }),
    cut: () => { for (const s of sockets) s.destroy(); },
  };
  proxies.push(p.server);
  await new Promise<void>((r) => p.server.listen(0, '127.0.0.1', r));
  p.address = `127.0.0.1:${(p.server.address() as net.AddressInfo).port}`;
  return p;
}

describe('WsTransport.contact', { timeout: 20_000 }, () => {
  it('says connected and recently heard; after a graceful stop, goodbye and a refused port; back, neither', async () => {
    const a = await node(pki, 'a');
    const b = await node(pki, 'b');
    const peers = [{ id: 'a', address: a.t.address }, { id: 'b', address: b.t.address }];
    a.t.setPeers(peers);
    b.t.setPeers(peers);
    await waitFor('connected both ways', () => a.t.contact('b').link === 'connected' && b.t.contact('a').link === 'connected');
    const c = a.t.contact('b');
    expect(c.heardAgoMs).toBeLessThan(1_000);
    expect(c.goodbye).toBe(false);
    expect(c.watchingForMs).toBeGreaterThan(0);
    expect(a.t.contact('nobody')).toMatchObject({ heardAgoMs: undefined, link: 'unknown', goodbye: false });

    const port = Number(b.t.address.split(':')[1]);
    await b.t.close();
    await waitFor('the goodbye and a refused redial', () => a.t.contact('b').goodbye && a.t.contact('b').link === 'refused');

    const b2 = await node(pki, 'b', { listen: { host: '127.0.0.1', port } });
    b2.t.setPeers(peers);
    await waitFor('back', () => a.t.contact('b').link === 'connected' && !a.t.contact('b').goodbye, 10_000);
  });

  it('a connection cut without a close frame is no goodbye: closed, then refused or silent as the dials find', async () => {
    const a = await node(pki, 'a');
    const b = await node(pki, 'b');
    const p = await proxy(b.t.address);
    a.t.setPeers([{ id: 'b', address: p.address }]);
    await waitFor('connected through the proxy', () => a.t.contact('b').link === 'connected');

    p.mode = 'blackhole';
    p.cut();
    await waitFor('a dial unanswered past a round trip reads silent', () => a.t.contact('b').link === 'silent', 5_000);
    expect(a.t.contact('b').goodbye).toBe(false);

    p.cut();
    await new Promise((r) => p.server.close(r));
    await waitFor('the closed proxy port reads refused', () => a.t.contact('b').link === 'refused', 8_000);
    expect(a.t.contact('b').goodbye).toBe(false);
  });

  it('a refusal holds until the peer is heard: a dial then hanging on a restarted shoal (listening, not answering yet) reads silent, still refused', async () => {
    const a = await node(pki, 'a');
    const b = await node(pki, 'b');
    const p = await proxy(b.t.address);
    const port = Number(p.address.split(':')[1]);
    a.t.setPeers([{ id: 'b', address: p.address }]);
    await waitFor('connected through the proxy', () => a.t.contact('b').link === 'connected');
    expect(a.t.contact('b').refused).toBe(false);

    p.cut();
    await new Promise((r) => p.server.close(r));
    await waitFor('a refused redial', () => a.t.contact('b').link === 'refused' && a.t.contact('b').refused, 8_000);

    p.mode = 'blackhole';
    await new Promise<void>((r) => p.server.listen(port, '127.0.0.1', r));
    await waitFor('a dial unanswered past a round trip reads silent', () => a.t.contact('b').link === 'silent', 8_000);
    expect(a.t.contact('b').refused).toBe(true);

    p.mode = 'forward';
    p.cut();
    await waitFor('heard again', () => a.t.contact('b').link === 'connected', 10_000);
    expect(a.t.contact('b')).toMatchObject({ refused: false, goodbye: false });
    // The proxy's close (afterEach) waits for the connections it relays.
    await a.t.close();
    p.cut();
  });

  it('reads a dial failure as refused (the kernel answered), silent (nothing did) or closed', () => {
    expect(dialOutcomeOf('ECONNREFUSED')).toBe('refused');
    for (const code of ['ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EHOSTDOWN', 'handshake_timeout']) expect(dialOutcomeOf(code)).toBe('silent');
    for (const code of ['ECONNRESET', 'EPIPE', 'ERR_TLS_CERT_ALTNAME_INVALID', 'error']) expect(dialOutcomeOf(code)).toBe('closed');
  });
});
