// Small helpers shared by the outbound and inbound sides of a peer connection.

import WebSocket from 'ws';
import type { RawData } from 'ws';

/** The one HTTP path the peer listener upgrades; anything else gets 426. */
export const PEER_PATH = '/shoal/v1/peer';

/** "host:port", bracketing IPv6 literals so the result parses back and fits in a URL. */
export function formatAddress(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

export function rawDataToBytes(data: RawData): Uint8Array {
  if (Array.isArray(data)) return Buffer.concat(data);
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  return data;
}

/**
 * Closes with a close frame and waits for the socket to end; cuts it after `graceMs` if the
 * peer does not answer (a half-open connection would otherwise hold `close()` for ws's 30 s).
 */
export function closeSocket(ws: WebSocket, code: number, reason: string, graceMs: number): Promise<void> {
  if (ws.readyState === WebSocket.CLOSED) return Promise.resolve();
  return new Promise((resolve) => {
    // Resolve on the timer too: close() must not hang on a socket that never reports closing.
    const timer = setTimeout(() => {
      ws.terminate();
      resolve();
    }, graceMs);
    ws.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
    // A connection still in its HTTP upgrade cannot carry a close frame.
    if (ws.readyState === WebSocket.CONNECTING) ws.terminate();
    else if (ws.readyState === WebSocket.OPEN) ws.close(code, reason);
  });
}

/** A ping payload carrying the send time, so the matching pong yields the round trip. */
export function pingPayload(nowMs: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeDoubleLE(nowMs, 0);
  return b;
}

export function rttFromPong(payload: Buffer, nowMs: number): number | null {
  if (payload.byteLength !== 8) return null;
  const rtt = nowMs - payload.readDoubleLE(0);
  return Number.isFinite(rtt) && rtt >= 0 ? rtt : null;
}
