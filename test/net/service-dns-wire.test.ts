// The service DNS responder's wire format: answers cut to 512 bytes with TC unless EDNS offers
// more, malformed bytes never throw, responses are never answered, resolv.conf is read strictly.

import * as dnsPacket from 'dns-packet';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { answerTtlSec, rcodes, readQuery, reply, udpBytesFor, udpBytesMin } from '../../net/dns-reply.ts';
import { parseResolvConf } from '../../net/dns-upstreams.ts';

function query(name: string, o: { edns?: number; id?: number } = {}): Buffer {
  return dnsPacket.encode({
    type: 'query', id: o.id ?? 4242, flags: dnsPacket.RECURSION_DESIRED, questions: [{ type: 'A', name, class: 'IN' }],
    additionals: o.edns === undefined ? [] : [{ type: 'OPT', name: '.', udpPayloadSize: o.edns, extendedRcode: 0, ednsVersion: 0, flags: 0, flag_do: false, options: [] }],
  });
}

function read(buf: Buffer): ReturnType<typeof dnsPacket.decode> {
  const q = readQuery(buf);
  if (q.kind !== 'query') throw new Error('not a query');
  return q.packet;
}

const rcodeOf = (buf: Buffer): number => buf.readUInt16BE(2) & 0xf;
const addresses = (n: number): string[] => Array.from({ length: n }, (_, i) => `10.61.${Math.floor(i / 250)}.${(i % 250) + 2}`);

describe('service DNS wire format', () => {
  it('answers with the question as asked (its case kept), authoritative, TTL 5 s, under the asker\'s id', () => {
    const q = read(query('Web.Front'));
    const out = dnsPacket.decode(reply(q, { rcode: 'NOERROR', addresses: ['10.61.0.2'], recursion: true, bytesMax: 512 }));
    expect(out.id).toBe(4242);
    expect(out.flag_aa && out.flag_rd && out.flag_ra && !out.flag_tc).toBe(true);
    expect(out.questions).toEqual([{ type: 'A', name: 'Web.Front', class: 'IN' }]);
    expect(out.answers).toEqual([{ type: 'A', name: 'Web.Front', ttl: answerTtlSec, class: 'IN', flush: false, data: '10.61.0.2' }]);
  });

  it('cuts an answer to 512 bytes and sets TC without EDNS, and sends it whole when EDNS offers room', () => {
    const many = addresses(60);
    const small = reply(read(query('web')), { rcode: 'NOERROR', addresses: many, recursion: true, bytesMax: udpBytesFor(read(query('web'))) });
    expect(small.length).toBeLessThanOrEqual(udpBytesMin);
    const cut = dnsPacket.decode(small);
    expect(cut.flag_tc).toBe(true);
    expect(cut.answers?.length).toBeGreaterThan(20);
    expect(cut.answers?.length).toBeLessThan(60);
    const edns = read(query('web', { edns: 4096 }));
    expect(udpBytesFor(edns)).toBe(4096);
    const whole = dnsPacket.decode(reply(edns, { rcode: 'NOERROR', addresses: many, recursion: true, bytesMax: udpBytesFor(edns) }));
    expect(whole.flag_tc).toBe(false);
    expect(whole.answers?.map((r) => (r.type === 'A' ? r.data : null))).toEqual(many);
    expect(whole.additionals?.[0]?.type).toBe('OPT');
    // An EDNS offer below 512 or above 4096 is held to those bounds.
    expect(udpBytesFor(read(query('web', { edns: 100 })))).toBe(512);
    expect(udpBytesFor(read(query('web', { edns: 65000 })))).toBe(4096);
  });

  it('gives FORMERR to a readable header with an unreadable body, NOTIMP to other opcodes, and nothing to responses or scraps', () => {
    const broken = Buffer.concat([query('web').subarray(0, 14)]);
    const formerr = readQuery(broken);
    expect(formerr.kind === 'reject' && formerr.reply !== null && rcodeOf(formerr.reply)).toBe(rcodes.FORMERR);
    const update = query('web');
    update.writeUInt16BE((5 << 11) | 0x0100, 2);
    const notimp = readQuery(update);
    expect(notimp.kind === 'reject' && notimp.reply !== null && rcodeOf(notimp.reply)).toBe(rcodes.NOTIMP);
    const response = dnsPacket.encode({ type: 'response', id: 1, questions: [{ type: 'A', name: 'web' }], answers: [] });
    expect(readQuery(response)).toEqual({ kind: 'reject', reply: null });
    expect(readQuery(Buffer.from([1, 2, 3]))).toEqual({ kind: 'reject', reply: null });
    const two = dnsPacket.encode({ type: 'query', id: 7, questions: [{ type: 'A', name: 'a' }, { type: 'A', name: 'b' }] });
    const twoOut = readQuery(two);
    expect(twoOut.kind === 'reject' && twoOut.reply !== null && rcodeOf(twoOut.reply)).toBe(rcodes.FORMERR);
  });

  it('never throws on any bytes, and whatever it sends back is a response header with the asker\'s id', () => {
    fc.assert(fc.property(fc.uint8Array({ maxLength: 600 }), (bytes) => {
      const buf = Buffer.from(bytes);
      const q = readQuery(buf);
      if (q.kind === 'query') {
        const out = reply(q.packet, { rcode: 'NXDOMAIN', recursion: false, bytesMax: udpBytesFor(q.packet) });
        expect(out.length).toBeLessThanOrEqual(udpBytesFor(q.packet) + 600);
        expect(dnsPacket.decode(out).type).toBe('response');
      } else if (q.reply !== null) {
        expect(q.reply.readUInt16BE(0)).toBe(buf.readUInt16BE(0));
        expect(q.reply.readUInt16BE(2) & 0x8000).toBe(0x8000);
      }
    }), { numRuns: 2000 });
    // Mutations of a real query, which reach deeper into the parser than random bytes.
    const base = query('web.front.shoal', { edns: 1232 });
    fc.assert(fc.property(fc.array(fc.tuple(fc.nat(base.length - 1), fc.integer({ min: 0, max: 255 })), { maxLength: 6 }), fc.nat(base.length), (flips, cut) => {
      const buf = Buffer.from(base.subarray(0, Math.max(cut, 12)));
      for (const [at, v] of flips) if (at < buf.length) buf[at] = v;
      const q = readQuery(buf);
      if (q.kind === 'query') reply(q.packet, { rcode: 'NOERROR', addresses: ['10.61.0.2'], recursion: true, bytesMax: udpBytesFor(q.packet) });
    }), { numRuns: 2000 });
  });

  it('reads the nameservers of resolv.conf, at most three, IP addresses only', () => {
    const text = '# comment\nsearch lan\nnameserver 127.0.0.53\nnameserver  fe80::1%eth0\nnameserver not-an-ip\noptions edns0\nnameserver 1.1.1.1\nnameserver 9.9.9.9\n';
    expect(parseResolvConf(text)).toEqual([{ host: '127.0.0.53', port: 53 }, { host: 'fe80::1%eth0', port: 53 }, { host: '1.1.1.1', port: 53 }]);
    expect(parseResolvConf('')).toEqual([]);
  });
});
