// Forwarding a name that is not shoal's to the host's resolvers, bounded: at most
// `inflightMax` forwards at once (beyond: the asker gets SERVFAIL at once rather than a queue
// that grows), each upstream tried in turn with a timeout. The query goes out as the asker sent
// it, under a fresh random id on a fresh socket (so a forged answer must guess both), and the
// answer comes back under the asker's id. Over UDP when the asker used UDP, over TCP when it
// used TCP (it does after a truncated answer).

import { randomInt } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { connect, isIPv6 } from 'node:net';
import type { Upstream } from './dns-upstreams.ts';

export type Transport = 'udp' | 'tcp';

export type ForwardResult =
  | { kind: 'answer'; reply: Buffer }
  /** No upstream answered in time (or there is none). */
  | { kind: 'failed' }
  /** Too many forwards in flight: not tried. */
  | { kind: 'busy' };

export interface ForwarderOptions {
  upstreams: () => readonly Upstream[];
  /** Per upstream tried. */
  timeoutMs: number;
  inflightMax: number;
}

export const forwardTimeoutMsDefault = 2_000;
export const forwardsInflightMaxDefault = 256;

export class DnsForwarder {
  private inflight = 0;

  constructor(private readonly o: ForwarderOptions) {}

  get inflightCount(): number {
    return this.inflight;
  }

  async forward(query: Buffer, transport: Transport): Promise<ForwardResult> {
    if (this.inflight >= this.o.inflightMax) return { kind: 'busy' };
    this.inflight++;
    try {
      for (const upstream of this.o.upstreams()) {
        const id = randomInt(0, 0x10000);
        const out = Buffer.from(query);
        out.writeUInt16BE(id, 0);
        const answer = transport === 'udp' ? await askUdp(upstream, out, this.o.timeoutMs) : await askTcp(upstream, out, this.o.timeoutMs);
        if (answer === null || answer.length < 12 || answer.readUInt16BE(0) !== id) continue;
        answer.writeUInt16BE(query.readUInt16BE(0), 0);
        return { kind: 'answer', reply: answer };
      }
      return { kind: 'failed' };
    } finally {
      this.inflight--;
    }
  }
}

/** One UDP exchange; null on timeout or error. Only a datagram from the upstream itself counts. */
function askUdp(upstream: Upstream, query: Buffer, timeoutMs: number): Promise<Buffer | null> {
  return new Promise((resolve) => {
    const socket = createSocket(isIPv6(upstream.host.replace(/%.*$/, '')) ? 'udp6' : 'udp4');
    let finished = false;
    const done = (answer: Buffer | null): void => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      socket.close();
      resolve(answer);
    };
    const timer = setTimeout(() => done(null), timeoutMs);
    socket.on('error', () => done(null));
    socket.on('message', (msg, from) => {
      if (from.port === upstream.port && msg.length >= 2 && msg.readUInt16BE(0) === query.readUInt16BE(0)) done(msg);
    });
    // Connected: the kernel drops datagrams from any other address.
    // The exchange may have ended (an error, the timeout) before the connect completes: a send on
    // the closed socket would throw out of this callback and end the process.
    socket.connect(upstream.port, upstream.host, () => {
      if (!finished) socket.send(query);
    });
  });
}

/** One TCP exchange (RFC 1035 4.2.2: each message prefixed by its 16-bit length); null on timeout or error. */
function askTcp(upstream: Upstream, query: Buffer, timeoutMs: number): Promise<Buffer | null> {
  return new Promise((resolve) => {
    const socket = connect({ host: upstream.host, port: upstream.port });
    let buffered = Buffer.alloc(0);
    let finished = false;
    const done = (answer: Buffer | null): void => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(answer);
    };
    const timer = setTimeout(() => done(null), timeoutMs);
    socket.on('error', () => done(null));
    socket.on('close', () => done(null));
    socket.on('connect', () => {
      const len = Buffer.alloc(2);
      len.writeUInt16BE(query.length);
      socket.write(Buffer.concat([len, query]));
    });
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      if (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) done(buffered.subarray(2, 2 + buffered.readUInt16BE(0)));
    });
  });
}
