// The control socket of a running `shoal dev`: how `shoal dev restart NODE` and `shoal dev stop`,
// run in another terminal, reach the supervisor. A Unix socket (src/cli/dev-lock.ts says where),
// one JSON request line, one JSON answer line:
//
//   {"op":"restart","node":"n2"}  ->  {"ok":true,"event":"restarted","node":"n2","pid":...,"message":...}
//   {"op":"stop"}                 ->  {"ok":true,"message":"stopped"}   (after every node is down)
//   {"op":"status"}               ->  {"ok":true,"dataDir":...,"nodes":[{name,id,api,pid}]}
//   anything refused              ->  {"ok":false,"error":{"code":...,"message":...}}

import { rmSync } from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { z } from 'zod';
import { exitCodes } from './args.ts';
import { CliFailure } from './client.ts';

const requestSchema = z.discriminatedUnion('op', [
  z.object({ op: z.literal('restart'), node: z.string().min(1).max(64) }).strict(),
  z.object({ op: z.literal('stop') }).strict(),
  z.object({ op: z.literal('status') }).strict(),
]);
export type ControlRequest = z.infer<typeof requestSchema>;

const answerSchema = z.union([
  z.object({ ok: z.literal(true), message: z.string().optional() }).loose(),
  z.object({ ok: z.literal(false), error: z.object({ code: z.string(), message: z.string() }).loose() }).loose(),
]);
export type ControlAnswer = z.infer<typeof answerSchema>;

/** A request line longer than this is refused (the real ones are tens of bytes). */
const requestBytesMax = 4096;

export type ControlHandler = (req: ControlRequest) => Promise<Record<string, unknown> & { message?: string }>;

/** Listens on `socket`; requests run one at a time, in arrival order. */
export async function serveControl(socket: string, handle: ControlHandler): Promise<{ close: () => void }> {
  rmSync(socket, { force: true });
  let queue: Promise<void> = Promise.resolve();
  const server: Server = createServer((conn) => {
    let buf = '';
    conn.setEncoding('utf8');
    conn.on('data', (chunk: string) => {
      buf += chunk;
      const nl = buf.indexOf('\n');
      if (nl < 0 && buf.length <= requestBytesMax) return;
      const line = nl < 0 ? '' : buf.slice(0, nl);
      conn.pause();
      queue = queue.then(() => answer(conn, line, handle));
    });
    conn.on('error', () => conn.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socket, () => resolve());
  });
  return { close: () => { server.close(); rmSync(socket, { force: true }); } };
}

async function answer(conn: Socket, line: string, handle: ControlHandler): Promise<void> {
  let reply: ControlAnswer;
  let raw: unknown;
  try {
    raw = JSON.parse(line);
  } catch {
    raw = undefined;
  }
  const req = requestSchema.safeParse(raw);
  if (!req.success) {
    reply = { ok: false, error: { code: 'bad_request', message: `not a control request: ${line.slice(0, 100)}` } };
  } else {
    try {
      reply = { ok: true, ...(await handle(req.data)) };
    } catch (err) {
      const code = err instanceof CliFailure ? err.code : 'internal';
      reply = { ok: false, error: { code, message: (err as Error).message } };
    }
  }
  conn.end(`${JSON.stringify(reply)}\n`);
}

/** Sends one request to the supervisor listening on `socket` and returns its answer. */
export function askControl(socket: string, req: ControlRequest, timeoutMs: number): Promise<ControlAnswer> {
  return new Promise((resolve, reject) => {
    const conn = createConnection(socket);
    let buf = '';
    conn.setEncoding('utf8');
    conn.setTimeout(timeoutMs, () => {
      conn.destroy();
      reject(new CliFailure(`the dev supervisor did not answer within ${timeoutMs / 1000} s`, exitCodes.unavailable, 'timeout'));
    });
    conn.once('connect', () => conn.write(`${JSON.stringify(req)}\n`));
    conn.on('data', (chunk: string) => { buf += chunk; });
    conn.once('error', (err) => reject(new CliFailure(`cannot reach the dev supervisor at ${socket}: ${(err as NodeJS.ErrnoException).code ?? err.message}`, exitCodes.unavailable, 'unreachable')));
    conn.once('end', () => {
      const parsed = answerSchema.safeParse(safeJson(buf.trim()));
      if (parsed.success) resolve(parsed.data);
      else reject(new CliFailure(`the dev supervisor answered something unexpected: ${buf.slice(0, 200)}`, exitCodes.failed, 'bad_answer'));
    });
  });
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
