// The sockets of the service DNS responder on one network: UDP and TCP on the node's gateway
// address of that network (port 53), so which socket a query arrives on says which network
// asked, and needs no lookup of the asker's address. TCP is there for answers that do not fit
// a UDP datagram (a service with more than about 28 tasks, for an asker without EDNS): the
// asker gets TC over UDP and asks again over TCP.

import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { createServer, type Server, type Socket } from 'node:net';
import type { Transport } from './dns-forward.ts';

/** `from`: the asker's address. */
export type QueryHandler = (msg: Buffer, transport: Transport, from: string) => Promise<Buffer | null>;

/** TCP connections per listener at once; beyond, the kernel's backlog and then refusals. */
export const tcpConnectionsMax = 64;
/** A TCP connection with no complete query for this long is closed (RFC 7766 suggests seconds). */
export const tcpIdleMs = 10_000;
/** Queries one TCP connection may have unanswered at once (pipelining); beyond, it is closed. */
export const tcpPendingMax = 16;

export interface DnsListener {
  network: string;
  address: string;
  port: number;
  close(): Promise<void>;
}

/** Binds UDP then TCP on address:port; rejects with the bind error (EADDRNOTAVAIL until the bridge is up, EACCES without root), leaving nothing open. */
export async function openListener(network: string, address: string, port: number, handle: QueryHandler, onError: (err: Error) => void): Promise<DnsListener> {
  const udp = await bindUdp(address, port);
  let tcp: Server;
  try {
    tcp = await listenTcp(address, udp.address().port, handle);
  } catch (err) {
    udp.close();
    throw err;
  }
  let closed = false;
  udp.on('message', (msg, from) => {
    handle(msg, 'udp', from.address).then((out) => {
      if (out !== null && !closed) udp.send(out, from.port, from.address);
    }).catch(onError);
  });
  udp.on('error', onError);
  tcp.on('error', onError);
  let closing: Promise<void> | undefined;
  return {
    network, address, port: udp.address().port,
    close: () => {
      closing ??= new Promise<void>((resolve) => {
        closed = true;
        udp.close();
        tcp.close(() => resolve());
        for (const s of connectionsOf.get(tcp) ?? []) s.destroy();
      });
      return closing;
    },
  };
}

function bindUdp(address: string, port: number): Promise<UdpSocket> {
  return new Promise((resolve, reject) => {
    const udp = createSocket({ type: address.includes(':') ? 'udp6' : 'udp4' });
    udp.once('error', (err) => {
      udp.close();
      reject(err);
    });
    udp.bind({ address, port, exclusive: true }, () => {
      udp.removeAllListeners('error');
      resolve(udp);
    });
  });
}

const connectionsOf = new WeakMap<Server, Set<Socket>>();

function listenTcp(address: string, port: number, handle: QueryHandler): Promise<Server> {
  return new Promise((resolve, reject) => {
    const connections = new Set<Socket>();
    const server = createServer((socket) => {
      connections.add(socket);
      socket.on('close', () => connections.delete(socket));
      serveConnection(socket, handle);
    });
    server.maxConnections = tcpConnectionsMax;
    connectionsOf.set(server, connections);
    server.once('error', reject);
    server.listen({ host: address, port, exclusive: true }, () => {
      server.removeListener('error', reject);
      resolve(server);
    });
  });
}

/** Length-prefixed queries in, answers out in the order asked; a connection that misbehaves is closed. */
function serveConnection(socket: Socket, handle: QueryHandler): void {
  let buffered = Buffer.alloc(0);
  let pending = 0;
  let chain = Promise.resolve();
  socket.setTimeout(tcpIdleMs, () => socket.destroy());
  socket.on('error', () => socket.destroy());
  socket.on('data', (chunk: Buffer) => {
    buffered = Buffer.concat([buffered, chunk]);
    while (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
      const msg = buffered.subarray(2, 2 + buffered.readUInt16BE(0));
      buffered = buffered.subarray(2 + msg.length);
      if (++pending > tcpPendingMax) {
        socket.destroy();
        return;
      }
      const answer = handle(Buffer.from(msg), 'tcp', socket.remoteAddress ?? '');
      chain = chain.then(async () => {
        const out = await answer.catch(() => null);
        pending--;
        if (out === null || socket.destroyed) return;
        const len = Buffer.alloc(2);
        len.writeUInt16BE(out.length);
        socket.write(Buffer.concat([len, out]));
      });
    }
  });
}
