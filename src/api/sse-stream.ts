// The server-sent event streams' common life (GET /v1/watch, GET /v1/events): the head, the
// first text, a keepalive comment every 15 s so proxies keep the connection, an end the API's
// close can call (ctx.streams), and one clean-up when the connection closes.

import type { ServerResponse } from 'node:http';
import type { ApiContext } from './context.ts';

const keepaliveMs = 15_000;

export function openEventStream(
  ctx: ApiContext, raw: ServerResponse, headers: Record<string, string>, first: string, cleanup: () => void,
): void {
  raw.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive', ...headers });
  raw.write(first);
  const keepalive = setInterval(() => raw.write(': keepalive\n\n'), keepaliveMs);
  const end = (): void => {
    raw.end();
  };
  ctx.streams.add(end);
  raw.once('close', () => {
    clearInterval(keepalive);
    ctx.streams.delete(end);
    cleanup();
  });
}
