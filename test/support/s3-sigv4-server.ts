// A small S3-compatible server for tests that CHECKS AWS Signature Version 4, as AWS, MinIO and
// Garage do (s3rver, the other test server, does not: any secret key passes it). Path-style
// buckets held in memory; PUT, GET and DELETE of an object, ListObjectsV2 (prefix, delimiter,
// continuation), and multipart uploads (create, upload part, complete, abort; parts but the last
// at least `partBytesMin`, as S3's 5 MiB), which is what a backup target uses (src/node/backup/s3-io.ts).
//
// The check is independent of shoal's signer: the canonical request is rebuilt from what the
// server RECEIVED (method, raw path and query, the headers the client says it signed, their
// values) by the `aws4` npm package, signed there with the secret key the server holds for the
// access key id, and the two signatures compared. A refusal is answered as S3 answers it (403 and
// an <Error> document): InvalidAccessKeyId, SignatureDoesNotMatch, XAmzContentSHA256Mismatch,
// RequestTimeTooSkewed, AccessDenied (no or malformed Authorization), NoSuchBucket, NoSuchKey.

import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';

interface Aws4Request { method: string; host: string; path: string; service: string; region: string; headers: Record<string, string> }
interface Aws4 { sign(request: Aws4Request, credentials: { accessKeyId: string; secretAccessKey: string }): Aws4Request & { headers: { Authorization?: string } } }
const aws4 = createRequire(import.meta.url)('aws4') as Aws4;

export interface S3SigV4ServerOptions {
  /** Access key id → secret key. */
  keys: Record<string, string>;
  buckets: string[];
  /** Keys per ListObjectsV2 page (S3's is 1000); small to exercise continuation tokens. */
  pageKeys?: number;
  /** The smallest part but the last of a multipart upload (S3's: 5 MiB). */
  partBytesMin?: number;
}

interface Upload { bucket: string; key: string; parts: Map<number, Buffer> }

/** Why the server refused or failed requests, newest last (for a test's message). */
export interface Refusal { method: string; url: string; code: string }

const skewMaxMs = 15 * 60_000;
const bodyBytesMax = 64 * 1024 * 1024;
const xmlEscape = (s: string): string => s.replace(/[<>&'"]/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '\'': '&apos;', '"': '&quot;' })[c] ?? c);

class S3Refusal extends Error {
  constructor(readonly status: number, readonly code: string, message: string) {
    super(message);
  }
}

export class S3SigV4Server {
  readonly refusals: Refusal[] = [];
  /** Requests whose signature was checked and accepted. */
  accepted = 0;
  private readonly buckets = new Map<string, Map<string, Buffer>>();
  /** Multipart uploads under way, by upload id. */
  readonly uploads = new Map<string, Upload>();
  /** The largest request body received (a test checks that a streamed upload came in parts). */
  largestBodyBytes = 0;
  private server: Server | undefined;
  private port = 0;

  constructor(private readonly o: S3SigV4ServerOptions) {
    for (const b of o.buckets) this.buckets.set(b, new Map());
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async start(): Promise<string> {
    const server = createServer((req, res) => void this.handle(req, res));
    this.server = server;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    this.port = (server.address() as AddressInfo).port;
    return this.url;
  }

  async close(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    if (s === undefined) return;
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }

  /** The objects of `bucket` (key → bytes), for tests to look at or change. */
  objects(bucket: string): Map<string, Buffer> {
    const b = this.buckets.get(bucket);
    if (b === undefined) throw new Error(`no bucket ${bucket}`);
    return b;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      const body = await readBody(req);
      this.largestBodyBytes = Math.max(this.largestBodyBytes, body.length);
      this.authenticate(req, body);
      this.accepted++;
      this.serve(req, body, res);
    } catch (err) {
      const r = err instanceof S3Refusal ? err : new S3Refusal(500, 'InternalError', (err as Error).message);
      this.refusals.push({ method: req.method ?? '', url: req.url ?? '', code: r.code });
      res.writeHead(r.status, { 'content-type': 'application/xml' });
      res.end(`<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${r.code}</Code><Message>${xmlEscape(r.message)}</Message></Error>`);
    }
  }

  /** Refuses the request unless its Authorization is a valid SigV4 signature over what arrived. */
  private authenticate(req: IncomingMessage, body: Buffer): void {
    const auth = req.headers.authorization ?? '';
    const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/s3\/aws4_request, ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$/.exec(auth);
    if (m === null) throw new S3Refusal(403, 'AccessDenied', 'Access Denied: no AWS4-HMAC-SHA256 Authorization header');
    const [, accessKeyId = '', day = '', region = '', signedHeaders = '', signature = ''] = m;
    const secretAccessKey = this.o.keys[accessKeyId];
    if (secretAccessKey === undefined) throw new S3Refusal(403, 'InvalidAccessKeyId', 'The AWS Access Key Id you provided does not exist in our records.');
    const names = signedHeaders.split(';');
    for (const must of ['host', 'x-amz-content-sha256', 'x-amz-date']) {
      if (!names.includes(must)) throw new S3Refusal(403, 'AccessDenied', `Access Denied: ${must} is not signed`);
    }
    const headers: Record<string, string> = {};
    for (const n of names) {
      const v = req.headers[n];
      if (typeof v !== 'string') throw new S3Refusal(403, 'AccessDenied', `Access Denied: signed header ${n} is missing`);
      headers[n] = v;
    }
    const amzDate = headers['x-amz-date'] ?? '';
    const at = Date.parse(amzDate.replace(/^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/, '$1-$2-$3T$4:$5:$6Z'));
    if (!Number.isFinite(at) || !amzDate.startsWith(day)) throw new S3Refusal(403, 'AccessDenied', `Access Denied: x-amz-date ${amzDate} does not match the credential's day ${day}`);
    if (Math.abs(Date.now() - at) > skewMaxMs) throw new S3Refusal(403, 'RequestTimeTooSkewed', 'The difference between the request time and the current time is too large.');
    // aws4.sign (its public call: it reads x-amz-date and x-amz-content-sha256 from the headers
    // given, adds none, and answers them with the Authorization it computed).
    const signed = aws4.sign({ method: req.method ?? 'GET', host: headers.host ?? '', path: req.url ?? '/', service: 's3', region, headers: { ...headers } }, { accessKeyId, secretAccessKey });
    const expected = /Signature=([0-9a-f]{64})$/.exec(signed.headers.Authorization ?? '')?.[1] ?? '';
    if (expected.length !== signature.length || !timingSafeEqual(Buffer.from(expected), Buffer.from(signature))) {
      throw new S3Refusal(403, 'SignatureDoesNotMatch', 'The request signature we calculated does not match the signature you provided. Check your key and signing method.');
    }
    const contentHash = headers['x-amz-content-sha256'];
    if (contentHash !== 'UNSIGNED-PAYLOAD' && contentHash !== createHash('sha256').update(body).digest('hex')) {
      throw new S3Refusal(400, 'XAmzContentSHA256Mismatch', 'The provided \'x-amz-content-sha256\' header does not match what was computed.');
    }
  }

  private serve(req: IncomingMessage, body: Buffer, res: ServerResponse): void {
    const u = new URL(req.url ?? '/', 'http://s3.test');
    const [bucketName = '', ...rest] = u.pathname.slice(1).split('/');
    const key = rest.map(decodeURIComponent).join('/');
    const bucket = this.buckets.get(decodeURIComponent(bucketName));
    if (bucket === undefined) throw new S3Refusal(404, 'NoSuchBucket', 'The specified bucket does not exist');
    const method = req.method ?? 'GET';
    if (key === '' && method === 'GET') {
      res.writeHead(200, { 'content-type': 'application/xml' });
      res.end(this.listXml(bucket, u.searchParams));
      return;
    }
    if (key === '') throw new S3Refusal(405, 'MethodNotAllowed', `${method} on a bucket is not served here`);
    if (u.searchParams.has('uploads') || u.searchParams.has('uploadId')) {
      this.multipart(method, decodeURIComponent(bucketName), key, u.searchParams, body, res);
      return;
    }
    if (method === 'PUT') {
      bucket.set(key, body);
      res.writeHead(200, { etag: `"${createHash('md5').update(body).digest('hex')}"` });
      res.end();
    } else if (method === 'GET') {
      const obj = bucket.get(key);
      if (obj === undefined) throw new S3Refusal(404, 'NoSuchKey', 'The specified key does not exist.');
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(obj.length) });
      res.end(obj);
    } else if (method === 'DELETE') {
      bucket.delete(key);
      res.writeHead(204);
      res.end();
    } else {
      throw new S3Refusal(405, 'MethodNotAllowed', `${method} is not served here`);
    }
  }

  /** CreateMultipartUpload, UploadPart, CompleteMultipartUpload, AbortMultipartUpload. */
  private multipart(method: string, bucketName: string, key: string, q: URLSearchParams, body: Buffer, res: ServerResponse): void {
    if (method === 'POST' && q.has('uploads')) {
      const id = `up-${this.uploads.size + 1}-${createHash('md5').update(`${key}${Date.now()}${Math.random()}`).digest('hex').slice(0, 12)}`;
      this.uploads.set(id, { bucket: bucketName, key, parts: new Map() });
      res.writeHead(200, { 'content-type': 'application/xml' });
      res.end(`<?xml version="1.0" encoding="UTF-8"?>\n<InitiateMultipartUploadResult><Bucket>${xmlEscape(bucketName)}</Bucket><Key>${xmlEscape(key)}</Key><UploadId>${id}</UploadId></InitiateMultipartUploadResult>`);
      return;
    }
    const id = q.get('uploadId') ?? '';
    const up = this.uploads.get(id);
    if (up === undefined || up.key !== key || up.bucket !== bucketName) throw new S3Refusal(404, 'NoSuchUpload', 'The specified multipart upload does not exist.');
    if (method === 'PUT') {
      const n = Number(q.get('partNumber'));
      if (!Number.isInteger(n) || n < 1 || n > 10_000) throw new S3Refusal(400, 'InvalidArgument', 'Part number must be an integer between 1 and 10000, inclusive');
      up.parts.set(n, body);
      res.writeHead(200, { etag: `"${createHash('md5').update(body).digest('hex')}"` });
      res.end();
    } else if (method === 'DELETE') {
      this.uploads.delete(id);
      res.writeHead(204);
      res.end();
    } else if (method === 'POST') {
      const listed = [...body.toString('utf8').matchAll(/<Part><PartNumber>(\d+)<\/PartNumber><ETag>([^<]*)<\/ETag><\/Part>/g)].map((m) => ({ n: Number(m[1]), etag: (m[2] ?? '').replace(/&quot;/g, '"') }));
      if (listed.length === 0) throw new S3Refusal(400, 'MalformedXML', 'The XML you provided was not well-formed');
      const parts: Buffer[] = [];
      listed.forEach((p, i) => {
        const part = up.parts.get(p.n);
        if (part === undefined || p.etag !== `"${createHash('md5').update(part).digest('hex')}"` || (i > 0 && (listed[i - 1]?.n ?? 0) >= p.n)) throw new S3Refusal(400, 'InvalidPart', `part ${p.n} was not uploaded, or its ETag or order differs`);
        if (i < listed.length - 1 && part.length < (this.o.partBytesMin ?? 5 * 1024 * 1024)) throw new S3Refusal(400, 'EntityTooSmall', 'Your proposed upload is smaller than the minimum allowed object size.');
        parts.push(part);
      });
      this.uploads.delete(id);
      this.objects(bucketName).set(key, Buffer.concat(parts));
      res.writeHead(200, { 'content-type': 'application/xml' });
      res.end(`<?xml version="1.0" encoding="UTF-8"?>\n<CompleteMultipartUploadResult><Key>${xmlEscape(key)}</Key></CompleteMultipartUploadResult>`);
    } else {
      throw new S3Refusal(405, 'MethodNotAllowed', `${method} on an upload is not served here`);
    }
  }

  /** ListObjectsV2: keys under `prefix`, rolled up at `delimiter` into common prefixes, one page at a time. */
  private listXml(bucket: Map<string, Buffer>, q: URLSearchParams): string {
    if (q.get('list-type') !== '2') throw new S3Refusal(400, 'InvalidArgument', 'only ListObjectsV2 (list-type=2) is served here');
    const prefix = q.get('prefix') ?? '';
    const delimiter = q.get('delimiter') ?? '';
    const entries = new Map<string, 'key' | 'prefix'>();
    for (const k of [...bucket.keys()].sort()) {
      if (!k.startsWith(prefix)) continue;
      const at = delimiter === '' ? -1 : k.indexOf(delimiter, prefix.length);
      if (at < 0) entries.set(k, 'key');
      else entries.set(k.slice(0, at + delimiter.length), 'prefix');
    }
    const all = [...entries.entries()];
    const start = Number(q.get('continuation-token') ?? '0');
    const page = all.slice(start, start + (this.o.pageKeys ?? 1000));
    const truncated = start + page.length < all.length;
    return [
      '<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult>',
      `<Prefix>${xmlEscape(prefix)}</Prefix><KeyCount>${page.length}</KeyCount><IsTruncated>${truncated}</IsTruncated>`,
      truncated ? `<NextContinuationToken>${start + page.length}</NextContinuationToken>` : '',
      ...page.map(([k, kind]) => (kind === 'key' ? `<Contents><Key>${xmlEscape(k)}</Key><Size>${bucket.get(k)?.length ?? 0}</Size></Contents>` : `<CommonPrefixes><Prefix>${xmlEscape(k)}</Prefix></CommonPrefixes>`)),
      '</ListBucketResult>',
    ].join('');
  }
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of req) {
    n += (c as Buffer).length;
    if (n > bodyBytesMax) throw new S3Refusal(400, 'EntityTooLarge', `more than ${bodyBytesMax} bytes`);
    chunks.push(c as Buffer);
  }
  return Buffer.concat(chunks);
}
