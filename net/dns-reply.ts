// The service DNS responder's wire format, on dns-packet: reading a query (malformed bytes get
// FORMERR or nothing, never an exception), and writing an answer that fits the size the asker
// can take (512 bytes over UDP unless its EDNS record says more; TC set when records were left
// out, so the asker retries over TCP).

import * as dnsPacket from 'dns-packet';
import type { Answer, DecodedPacket, Packet } from 'dns-packet';
import type { DnsQuestion } from './dns-answers.ts';

/** Seconds an answer may be cached: short, so a task that stops leaves its callers' caches within seconds, and small enough to cost nothing (answers come from memory). */
export const answerTtlSec = 5;
/** What a query without EDNS can take over UDP (RFC 1035). */
export const udpBytesMin = 512;
/** The most this responder sends over UDP whatever EDNS offers: above it, fragments get lost. */
export const udpBytesMax = 4096;
/** A DNS message over TCP is prefixed by its 16-bit length. */
export const tcpBytesMax = 65535;

export const rcodes = { NOERROR: 0, FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3, NOTIMP: 4, REFUSED: 5 } as const;
export type Rcode = keyof typeof rcodes;

const qrBit = 0x8000;
const opcodeShift = 11;

export type ReadQuery =
  | { kind: 'query'; packet: DecodedPacket; question: DnsQuestion }
  /** Not answerable: the reply to send (FORMERR, NOTIMP), or null to stay silent. */
  | { kind: 'reject'; reply: Buffer | null };

export function readQuery(msg: Buffer): ReadQuery {
  let packet: DecodedPacket;
  try {
    packet = dnsPacket.decode(msg);
  } catch {
    // A header we can read gets FORMERR with its id; less than a header, or a response, nothing
    // (answering responses would let two responders bounce a packet between them forever).
    return { kind: 'reject', reply: msg.length >= 12 && (msg.readUInt16BE(2) & qrBit) === 0 ? headerOnly(msg.readUInt16BE(0), msg.readUInt16BE(2), 'FORMERR') : null };
  }
  if (packet.type === 'response') return { kind: 'reject', reply: null };
  const flags = packet.flags ?? 0;
  if (((flags >> opcodeShift) & 0xf) !== 0) return { kind: 'reject', reply: headerOnly(packet.id ?? 0, flags, 'NOTIMP') };
  const question = packet.questions?.[0];
  if (question === undefined || packet.questions?.length !== 1) return { kind: 'reject', reply: headerOnly(packet.id ?? 0, flags, 'FORMERR') };
  return { kind: 'query', packet, question: { name: question.name, type: question.type, class: question.class } };
}

/** The bytes a reply over UDP may have, from the query's EDNS record (if any). */
export function udpBytesFor(query: DecodedPacket): number {
  const opt = query.additionals?.find((a) => a.type === 'OPT');
  const offered = opt !== undefined && 'udpPayloadSize' in opt ? opt.udpPayloadSize : udpBytesMin;
  return Math.min(udpBytesMax, Math.max(udpBytesMin, offered));
}

export interface ReplyOptions {
  rcode: Rcode;
  addresses?: readonly string[];
  /** Whether this responder recurses for the asker (false on internal networks). */
  recursion: boolean;
  bytesMax: number;
}

/** An authoritative reply to a query: its question, A records for `addresses`, cut to `bytesMax` with TC. */
export function reply(query: DecodedPacket, o: ReplyOptions): Buffer {
  const question = query.questions?.[0];
  const name = question?.name ?? '';
  const hasEdns = query.additionals?.some((a) => a.type === 'OPT') === true;
  const base: Packet = {
    type: 'response', id: query.id ?? 0,
    flags: dnsPacket.AUTHORITATIVE_ANSWER | ((query.flags ?? 0) & dnsPacket.RECURSION_DESIRED) | (o.recursion ? dnsPacket.RECURSION_AVAILABLE : 0) | rcodes[o.rcode],
    questions: question === undefined ? [] : [question],
    answers: [],
    additionals: hasEdns ? [{ type: 'OPT', name: '.', udpPayloadSize: udpBytesMax, extendedRcode: 0, ednsVersion: 0, flags: 0, flag_do: false, options: [] }] : [],
  };
  const answers: Answer[] = (o.addresses ?? []).map((data) => ({ type: 'A', name, ttl: answerTtlSec, class: 'IN', data }));
  if (answers.length === 0) return dnsPacket.encode(base);
  // Every record has the same size (dns-packet does not compress names): how many fit is arithmetic.
  const fixed = dnsPacket.encodingLength(base);
  const each = dnsPacket.encodingLength({ ...base, answers: answers.slice(0, 1) }) - fixed;
  const fit = Math.max(0, Math.floor((o.bytesMax - fixed) / each));
  if (fit >= answers.length) return dnsPacket.encode({ ...base, answers });
  return dnsPacket.encode({ ...base, flags: (base.flags ?? 0) | dnsPacket.TRUNCATED_RESPONSE, answers: answers.slice(0, fit) });
}

/** A reply of only a header (and no question): for queries that cannot be read or are not supported. */
export function headerOnly(id: number, queryFlags: number, rcode: Rcode): Buffer {
  const buf = Buffer.alloc(12);
  buf.writeUInt16BE(id, 0);
  // QR set, the opcode and RD echoed, the rest clear.
  buf.writeUInt16BE(qrBit | (queryFlags & 0x7800) | (queryFlags & 0x0100) | rcodes[rcode], 2);
  return buf;
}

/** SERVFAIL for a query this responder read: the upstream resolvers did not answer. */
export function servfail(query: DecodedPacket, recursion: boolean): Buffer {
  return reply(query, { rcode: 'SERVFAIL', recursion, bytesMax: udpBytesMin });
}
