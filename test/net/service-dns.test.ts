// The service DNS responder over real sockets: a document store (the real state machine) holds
// the records, loopback addresses stand in for the gateways (front 127.0.61.1, back 127.0.62.1),
// and Node's own resolver asks. Answers follow the store at once; names of the world are
// forwarded to a fake upstream on loopback (never from the internal network); an answer too
// big for UDP comes whole over TCP; bad bytes do not stop it; sockets follow the networks.

import { Resolver } from 'node:dns/promises';
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { connect, createServer } from 'node:net';
import * as dnsPacket from 'dns-packet';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { servicesCollection, taskStatusCollection, tasksCollection } from '../../src/resources/collections.ts';
import { networksCollection } from '../../src/resources/network-resources.ts';
import { ServiceDns, type ServiceDnsOptions } from '../../net/service-dns.ts';
import { cluster, networkRecord, RecordStore } from './service-dns-fixtures.ts';

const loopbackOf: Record<string, string> = { front: '127.0.61.1', back: '127.0.62.1' };

let records: RecordStore;
let dns: ServiceDns;
let upstream: UdpSocket;
let upstreamAsked: string[];
const warnings: string[] = [];

async function startDns(o: Partial<ServiceDnsOptions> = {}): Promise<ServiceDns> {
  const d = new ServiceDns({
    store: records.store, nodeId: 'n1', port: 0, log: { info: () => undefined, warn: (m) => warnings.push(m) },
    bindAddress: (network) => loopbackOf[network] ?? '192.0.2.1',
    upstreams: () => [{ host: '127.0.0.1', port: (upstream.address()).port }], forwardTimeoutMs: 300, acceptFrom: () => true, ...o,
  });
  d.start();
  await d.converge();
  return d;
}

function serverOf(network: string): string {
  const at = dns.listening().get(network);
  if (at === undefined) throw new Error(`no listener for ${network}`);
  return at;
}

/** A fresh resolver per question: c-ares caches answers for their TTL. */
async function resolve4(network: string, name: string): Promise<string[] | string> {
  const r = new Resolver({ timeout: 2000, tries: 1 });
  r.setServers([serverOf(network)]);
  try {
    return (await r.resolve4(name)).sort();
  } catch (err) {
    return (err as NodeJS.ErrnoException).code ?? 'error';
  }
}

function ask(network: string, packet: Buffer, transport: 'udp' | 'tcp', from?: string): Promise<ReturnType<typeof dnsPacket.decode> | null> {
  const [host, port] = serverOf(network).split(':') as [string, string];
  return new Promise((resolve) => {
    const timer = setTimeout(() => { done(null); }, 1500);
    let done: (p: ReturnType<typeof dnsPacket.decode> | null) => void;
    if (transport === 'udp') {
      const s = createSocket('udp4');
      done = (p) => { clearTimeout(timer); s.close(); resolve(p); };
      s.on('message', (m) => done(dnsPacket.decode(m)));
      s.bind(0, from, () => s.send(packet, Number(port), host));
    } else {
      const s = connect({ host, port: Number(port), ...(from !== undefined ? { localAddress: from } : {}) });
      let buf = Buffer.alloc(0);
      done = (p) => { clearTimeout(timer); s.destroy(); resolve(p); };
      s.on('connect', () => s.write(Buffer.concat([Buffer.from([packet.length >> 8, packet.length & 0xff]), packet])));
      s.on('data', (c: Buffer) => {
        buf = Buffer.concat([buf, c]);
        if (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) done(dnsPacket.decode(buf.subarray(2)));
      });
    }
  });
}

const query = (name: string): Buffer => dnsPacket.encode({ type: 'query', id: 77, flags: dnsPacket.RECURSION_DESIRED, questions: [{ type: 'A', name }] });

beforeEach(async () => {
  warnings.length = 0;
  upstreamAsked = [];
  // The host's resolver, on loopback: answers example.test with 192.0.2.7, stays silent on silent.test.
  upstream = createSocket('udp4');
  upstream.on('message', (msg, from) => {
    const q = dnsPacket.decode(msg);
    const name = q.questions?.[0]?.name ?? '';
    upstreamAsked.push(name);
    if (name === 'silent.test') return;
    upstream.send(dnsPacket.encode({
      type: 'response', id: q.id ?? 0, flags: dnsPacket.RECURSION_AVAILABLE, questions: q.questions ?? [],
      answers: name === 'example.test' ? [{ type: 'A', name, ttl: 60, data: '192.0.2.7' }] : [],
    }), from.port, from.address);
  });
  await new Promise<void>((r) => upstream.bind(0, '127.0.0.1', r));
  const c = cluster();
  records = new RecordStore().load(c.control, c.networks);
  dns = await startDns();
});

afterEach(async () => {
  await dns.close();
  upstream.close();
});

describe('service DNS over real sockets', () => {
  it('answers on each network\'s gateway with that network\'s tasks, and follows the store when a task stops', async () => {
    expect([...dns.listening().keys()].sort()).toEqual(['back', 'front']);
    expect(await resolve4('front', 'web')).toEqual(['10.61.0.10', '10.61.0.9', '10.61.1.2']);
    expect(await resolve4('front', 'tasks.web.front.shoal')).toEqual(['10.61.0.10', '10.61.0.9', '10.61.1.2']);
    // web2's agent reports it stopped: gone from the answer at the next question.
    records.put(taskStatusCollection, 'web2', { ...statusOf('web2'), state: 'shutdown', finishedAt: 2 });
    expect(await resolve4('front', 'web')).toEqual(['10.61.0.10', '10.61.0.9']);
    // The leader stops web1 (desired shutdown): gone too, before it has stopped.
    records.put(tasksCollection, 'web1', { ...taskOf('web1'), desired: 'shutdown' });
    expect(await resolve4('front', 'web')).toEqual(['10.61.0.10']);
    expect(dns.counts.answered).toBe(4);
  });

  it('keeps networks apart: db is NXDOMAIN on front and answered on back', async () => {
    expect(await resolve4('front', 'db')).toBe('ENOTFOUND');
    expect(await resolve4('back', 'db')).toEqual(['10.62.0.2']);
    expect(await resolve4('back', 'api')).toEqual(['10.62.1.2']);
    expect(dns.counts.nxdomain).toBe(1);
  });

  it('forwards other names to the host\'s resolvers, SERVFAIL when they stay silent, and never from an internal network', async () => {
    expect(await resolve4('front', 'example.test')).toEqual(['192.0.2.7']);
    expect(await resolve4('front', 'silent.test')).toBe('ESERVFAIL');
    expect(await resolve4('back', 'example.test')).toBe('EREFUSED');
    expect(upstreamAsked).toEqual(['example.test', 'silent.test']);
    expect(dns.counts).toMatchObject({ forwarded: 1, forward_failed: 1, refused: 1 });
  });

  it('forwards over TCP what is asked over TCP, and holds at most forwardsInflightMax forwards at once', async () => {
    // The host's resolver over TCP, on the same port as the UDP one.
    const tcpAsked: string[] = [];
    const server = createServer((sock) => {
      sock.on('data', (buf: Buffer) => {
        const q = dnsPacket.decode(buf.subarray(2));
        tcpAsked.push(q.questions?.[0]?.name ?? '');
        const out = dnsPacket.encode({ type: 'response', id: q.id ?? 0, questions: q.questions ?? [], answers: [{ type: 'A', name: 'example.test', ttl: 60, data: '192.0.2.8' }] });
        sock.end(Buffer.concat([Buffer.from([out.length >> 8, out.length & 0xff]), out]));
      });
    });
    await new Promise<void>((r) => server.listen(upstream.address().port, '127.0.0.1', r));
    try {
      const tcp = await ask('front', query('example.test'), 'tcp');
      expect(tcp?.id).toBe(77);
      expect(tcp?.answers?.map((a) => (a.type === 'A' ? a.data : null))).toEqual(['192.0.2.8']);
      expect(tcpAsked).toEqual(['example.test']);
    } finally {
      server.close();
    }
    await dns.close();
    dns = await startDns({ forwardsInflightMax: 1 });
    const both = await Promise.all([ask('front', query('silent.test'), 'udp'), ask('front', query('silent.test'), 'udp')]);
    expect(both.map((p) => (p?.flags ?? 0) & 0xf)).toEqual([2, 2]);
    expect(upstreamAsked).toEqual(['silent.test']);
  });

  it('answers too many addresses for 512 bytes with TC over UDP and in full over TCP', async () => {
    const addresses: Record<string, string> = {};
    for (let i = 1; i <= 60; i++) {
      records.put(tasksCollection, `big${i}`, { ...taskOf('web1'), id: `big${i}`, slot: 10 + i });
      records.put(taskStatusCollection, `big${i}`, { ...statusOf('web1'), taskId: `big${i}` });
      addresses[`big${i}`] = `10.61.0.${100 + i}`;
    }
    const c = cluster();
    records.put(networksCollection, 'front', { ...c.networks[0], addresses: { ...c.networks[0]?.addresses, ...addresses } });
    const udp = await ask('front', query('web'), 'udp');
    expect(udp?.flag_tc).toBe(true);
    expect(udp?.answers?.length).toBeLessThan(63);
    const tcp = await ask('front', query('web'), 'tcp');
    expect(tcp?.flag_tc).toBe(false);
    expect(tcp?.answers?.length).toBe(63);
    // Node's resolver retries over TCP by itself, or offers EDNS room: either way it gets them all.
    expect((await resolve4('front', 'web') as string[]).length).toBe(63);
  });

  it('survives bad bytes: FORMERR or silence, then answers the next query', async () => {
    const formerr = await ask('front', Buffer.concat([query('web').subarray(0, 13)]), 'udp');
    expect(formerr?.flags !== undefined && formerr.flags & 0xf).toBe(1);
    expect(await ask('front', Buffer.from([0xff]), 'udp')).toBe(null);
    expect(await resolve4('front', 'web')).toHaveLength(3);
    expect(dns.counts.malformed).toBe(2);
  });

  it('listens on the gateway of its own slice, and answers only askers inside the network\'s subnet', async () => {
    await dns.close();
    // A network whose subnet is on loopback: its real gateway (slice 0) can be bound here.
    const c = cluster();
    records.put(networksCollection, 'lo', networkRecord('lo', '127.64.0.0/16', false, { n1: 0 }, { web1: '127.64.0.9', api1: '127.64.0.5' }));
    records.put(servicesCollection, 'web', { ...c.control.services.get('web')?.value, spec: { ...c.control.services.get('web')?.value.spec, networks: ['front', 'lo'] } });
    dns = await startDns({ bindAddress: (network, gateway) => loopbackOf[network] ?? gateway, acceptFrom: undefined });
    expect(dns.listening().get('lo')).toMatch(/^127\.64\.0\.1:/);
    expect((await ask('lo', query('web'), 'udp', '127.64.0.9'))?.answers?.map((a) => (a.type === 'A' ? a.data : null))).toEqual(['127.64.0.9']);
    expect((await ask('lo', query('web'), 'tcp', '127.64.0.9'))?.answers).toHaveLength(1);
    // api1 is on lo and back: asking on lo, it sees back's names too (and web1 does not).
    expect((await ask('lo', query('db'), 'udp', '127.64.0.5'))?.answers?.map((a) => (a.type === 'A' ? a.data : null))).toEqual(['10.62.0.2']);
    expect(((await ask('lo', query('db'), 'udp', '127.64.0.9'))?.flags ?? 0) & 0xf).toBe(3);
    // From outside the subnet: no answer at all (the responder is no open resolver).
    expect(await ask('lo', query('web'), 'udp', '127.0.0.1')).toBe(null);
    expect(await ask('front', query('web'), 'udp', '127.0.0.1')).toBe(null);
    expect(dns.counts).toMatchObject({ answered: 3, nxdomain: 1, foreign: 2 });
  });

  it('retries a gateway that is not on the host on every pass, says so once, and closes the sockets of a network removed', async () => {
    await dns.close();
    loopbackOf.side = '192.0.2.1';
    records.put(networksCollection, 'side', networkRecord('side', '10.63.0.0/16', false, { n1: 0 }, {}));
    dns = await startDns();
    await dns.converge();
    await dns.converge();
    expect([...dns.listening().keys()].sort()).toEqual(['back', 'front']);
    expect(warnings.filter((w) => w.includes('network side'))).toHaveLength(1);
    expect(warnings[0]).toContain('EADDRNOTAVAIL');
    // The bridge comes up: the next pass binds.
    loopbackOf.side = '127.0.63.1';
    await dns.converge();
    expect(dns.listening().get('side')).toMatch(/^127\.0\.63\.1:/);
    records.delete(networksCollection, 'side');
    await dns.converge();
    expect(dns.listening().has('side')).toBe(false);
    delete loopbackOf.side;
  });
});

function taskOf(id: string): object {
  return cluster().control.tasks.get(id)?.value as object;
}

function statusOf(id: string): object {
  return cluster().control.statuses.get(id)?.value as object;
}
