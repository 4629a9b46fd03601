// The one HTTP client of the benchmarks, for load and control alike: node:http (node:https when
// the endpoint has TLS: shoal's API always, etcd's when compared with it) over keep-alive agents
// (no dependency), one request at a time per call, the whole body buffered.

import http from 'node:http';
import https from 'node:https';

/** A client certificate and the CA that is the only trust root (PEM). */
export interface ClientTls {
  ca: string;
  cert: string;
  key: string;
}

export interface Endpoint {
  host: string;
  port: number;
  /** HTTPS with this client certificate; absent, plain HTTP. */
  tls?: ClientTls;
}

export interface RequestSpec {
  method: 'GET' | 'PUT' | 'POST' | 'DELETE';
  path: string;
  /** JSON bytes; sent with content-type application/json. */
  body?: Buffer;
}

export interface Answer {
  status: number;
  body: Buffer;
}

export class HttpError extends Error {}

/** A keep-alive connection pool to one endpoint; destroy() when done so no socket outlives a run. */
export class Client {
  private readonly agent: http.Agent;
  private readonly request: typeof http.request;

  constructor(readonly endpoint: Endpoint, socketsMax = 8) {
    const pool = { keepAlive: true, maxSockets: socketsMax, maxFreeSockets: socketsMax };
    const tls = endpoint.tls;
    this.agent = tls === undefined ? new http.Agent(pool) : new https.Agent({ ...pool, ca: tls.ca, cert: tls.cert, key: tls.key });
    this.request = tls === undefined ? http.request : https.request;
  }

  send(spec: RequestSpec, timeoutMs: number): Promise<Answer> {
    return new Promise<Answer>((resolve, reject) => {
      const headers: http.OutgoingHttpHeaders = spec.body
        ? { 'content-type': 'application/json', 'content-length': spec.body.length }
        : {};
      const req = this.request({ host: this.endpoint.host, port: this.endpoint.port, method: spec.method, path: spec.path, agent: this.agent, headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          clearTimeout(timer);
          resolve({ status: res.statusCode ?? 0, body: chunks.length === 1 && chunks[0] ? chunks[0] : Buffer.concat(chunks) });
        });
        res.on('error', (err) => { clearTimeout(timer); reject(err); });
      });
      const timer = setTimeout(() => req.destroy(new HttpError(`timeout after ${timeoutMs} ms`)), timeoutMs);
      req.on('error', (err) => { clearTimeout(timer); reject(err); });
      req.end(spec.body);
    });
  }

  async json<T>(spec: RequestSpec, timeoutMs = 2000): Promise<{ status: number; body: T }> {
    const a = await this.send(spec, timeoutMs);
    return { status: a.status, body: JSON.parse(a.body.toString('utf8')) as T };
  }

  destroy(): void {
    this.agent.destroy();
  }
}

export const jsonBody = (v: unknown): Buffer => Buffer.from(JSON.stringify(v));

/** One-off request with its own short-lived connection (for polling and control, not load). */
export async function once<T>(endpoint: Endpoint, spec: RequestSpec, timeoutMs = 2000): Promise<{ status: number; body: T }> {
  const c = new Client(endpoint, 1);
  try {
    return await c.json<T>(spec, timeoutMs);
  } finally {
    c.destroy();
  }
}
