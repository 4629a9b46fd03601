// An S3-compatible bucket as a backup target (target-io.ts's interface): path-style addressing
// (http(s)://HOST[:PORT]/BUCKET[/PREFIX]), as MinIO, Garage, SeaweedFS and s3rver take, requests
// signed with AWS Signature Version 4 (node:crypto; no SDK). A "directory" is a key prefix
// `PREFIX/<dir>/`; a file is the object `PREFIX/<dir>/<name>`.
//
// S3 has no rename: this target says so (`renames: false`), and writeBackup (backup-store.ts)
// writes a backup straight under its id with the manifest LAST. A backup cut off before its
// manifest is listed as damaged (manifest missing), never as good.

import { createHash, createHmac } from 'node:crypto';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { TargetIo } from './target-io.ts';

export interface S3Location {
  /** http: or https: */
  protocol: 'http:' | 'https:';
  /** host[:port] */
  host: string;
  bucket: string;
  /** Key prefix without leading or trailing '/', '' for the bucket's root. */
  prefix: string;
}

export interface S3Credentials {
  accessKeyId: string;
  secretKey: string;
  region: string;
  /** PEM CA certificates to trust for https (a self-signed MinIO). */
  ca?: string;
}

/** The region signed when none is given: what MinIO and s3rver take; Garage wants its own ('garage'). */
export const s3RegionDefault = 'us-east-1';

/** A bucket name as S3 allows it (3-63 lower-case letters, digits, '.', '-'). */
const bucketPattern = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

/** Parses `http(s)://HOST[:PORT]/BUCKET[/PREFIX]`; a string saying what is wrong otherwise. */
export function parseS3Url(text: string): S3Location | string {
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    return `'${text}' is not a URL; give http(s)://HOST[:PORT]/BUCKET[/PREFIX]`;
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return `'${text}' must start with http:// or https://`;
  if (u.username !== '' || u.password !== '' || u.search !== '' || u.hash !== '') return `'${text}' takes no credentials, query or fragment: give http(s)://HOST[:PORT]/BUCKET[/PREFIX]`;
  const [bucket = '', ...rest] = decodeURIComponent(u.pathname).replace(/^\/+|\/+$/g, '').split('/');
  if (!bucketPattern.test(bucket)) return `'${text}' names no bucket (3-63 lower-case letters, digits, . and -): give http(s)://HOST[:PORT]/BUCKET[/PREFIX]`;
  const prefix = rest.filter((p) => p !== '').join('/');
  if (prefix.length > 512 || /[\0\r\n]/.test(prefix)) return `'${text}': the prefix is too long or holds control characters`;
  return { protocol: u.protocol, host: u.host, bucket, prefix };
}

export function s3Url(loc: S3Location): string {
  return `${loc.protocol}//${loc.host}/${loc.bucket}${loc.prefix === '' ? '' : `/${loc.prefix}`}`;
}

/** An error the S3 server answered: its code (AccessDenied, NoSuchBucket, SignatureDoesNotMatch...) and message. */
export class S3Error extends Error {
  constructor(readonly status: number, readonly code: string, readonly s3Message: string, what: string) {
    super(`${what}: the S3 server answered ${status} ${code}: ${s3Message}`);
  }
}

/**
 * What to do about an S3 refusal, for the error shown to the operator: the credential codes say
 * which half of the key to fix and how; the rest ask to check the URL, bucket and key.
 */
export function s3Advice(err: S3Error, accessKeyId: string, target?: string): string {
  const again = target === undefined ? 'give the right one (--secret-key-file FILE or --secret-key-stdin)' : `set the right one with: shoal backup target add ${target} --s3 URL --access-key-id ${accessKeyId} --secret-key-file FILE`;
  switch (err.code) {
    case 'SignatureDoesNotMatch':
      return `the server does not accept the secret key given for access key id ${accessKeyId} (the request's signature does not match its own): ${again}`;
    case 'InvalidAccessKeyId':
      return `the server knows no access key id ${accessKeyId}: check it (--access-key-id) against the keys made on the server`;
    case 'RequestTimeTooSkewed':
      return 'this machine\'s clock is too far from the server\'s (S3 allows 15 minutes): set its time (NTP) and try again';
    case 'AccessDenied':
      return `access key id ${accessKeyId} may not use this bucket: allow it to list, get, put and delete under the prefix, and to abort multipart uploads (s3:AbortMultipartUpload: a volume's stream over 5 MiB goes up in parts), in the server's bucket policy`;
    case 'NoSuchBucket':
      return 'make the bucket on the server first (shoal does not create it), or fix the URL';
    default:
      return 'check the URL, the bucket, the access key id and the secret key';
  }
}

const sha256Hex = (b: Uint8Array | string): string => createHash('sha256').update(b).digest('hex');
const hmac = (key: Uint8Array | string, text: string): Buffer => createHmac('sha256', key).update(text).digest();
/** RFC 3986 encoding as SigV4 wants it ('/' kept in paths). */
const enc = (s: string): string => encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
const encPath = (s: string): string => s.split('/').map(enc).join('/');

const xmlText = (s: string): string => s.replace(/&(lt|gt|quot|apos|amp|#\d+|#x[0-9a-fA-F]+);/g, (_m, e: string) =>
  e === 'lt' ? '<' : e === 'gt' ? '>' : e === 'quot' ? '"' : e === 'apos' ? '\'' : e === 'amp' ? '&' : String.fromCodePoint(e.startsWith('#x') ? parseInt(e.slice(2), 16) : Number(e.slice(1))));
const xmlAll = (xml: string, tag: string): string[] => [...xml.matchAll(new RegExp(`<${tag}>([\\s\\S]*?)</${tag}>`, 'g'))].map((m) => xmlText(m[1] ?? ''));
const xmlOne = (xml: string, tag: string): string | undefined => xmlAll(xml, tag)[0];

const requestTimeoutMs = 60_000;

export interface SignedRequest {
  method: string;
  /** The path, already encoded (/bucket/key). */
  path: string;
  query: Record<string, string>;
  headers: Record<string, string>;
}

/** Signs a request (AWS Signature Version 4, service s3), the payload's SHA-256 in x-amz-content-sha256. */
export function signV4(req: { method: string; host: string; key: string; query: Record<string, string>; body: Uint8Array }, cred: S3Credentials, now: Date): SignedRequest {
  const amzDate = now.toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '');
  const day = amzDate.slice(0, 8);
  const payloadHash = sha256Hex(req.body);
  const path = encPath(req.key);
  const query = Object.keys(req.query).sort().map((k) => `${enc(k)}=${enc(req.query[k] ?? '')}`).join('&');
  const headers: Record<string, string> = { host: req.host, 'x-amz-content-sha256': payloadHash, 'x-amz-date': amzDate };
  const names = Object.keys(headers).sort();
  const canonical = [req.method, path, query, ...names.map((n) => `${n}:${headers[n]}`), '', names.join(';'), payloadHash].join('\n');
  const scope = `${day}/${cred.region}/s3/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256Hex(canonical)].join('\n');
  const signingKey = hmac(hmac(hmac(hmac(`AWS4${cred.secretKey}`, day), cred.region), 's3'), 'aws4_request');
  const signature = createHmac('sha256', signingKey).update(toSign).digest('hex');
  return {
    method: req.method, path: query === '' ? path : `${path}?${query}`, query: req.query,
    headers: { ...headers, authorization: `AWS4-HMAC-SHA256 Credential=${cred.accessKeyId}/${scope}, SignedHeaders=${names.join(';')}, Signature=${signature}` },
  };
}

interface S3Answer { status: number; body: Buffer; etag?: string }

/**
 * Bytes per part of a multipart upload (a streamed file larger than one part): the one part held
 * in memory at a time, and what S3 signs (each part's SHA-256). S3's minimum part is 5 MiB and its
 * maximum count 10,000: 50 GiB a file, far above the 2 GiB cap of a backup's file.
 */
export const s3PartBytes = 5 * 1024 * 1024 + 64 * 1024;
/** A CompleteMultipartUpload answer's body is a few hundred bytes; an error document a few KiB. */
const answerBytesMax = 1024 * 1024;

export class S3TargetIo implements TargetIo {
  readonly where: string;
  readonly renames = false as const;
  constructor(private readonly loc: S3Location, private readonly cred: S3Credentials, private readonly now: () => Date = () => new Date(), private readonly partBytes = s3PartBytes) {
    this.where = s3Url(loc);
  }

  private key(...parts: string[]): string {
    return `/${this.loc.bucket}/${[this.loc.prefix, ...parts].filter((p) => p !== '').join('/')}`;
  }

  private dirPrefix(dir?: string): string {
    return [this.loc.prefix, dir ?? ''].filter((p) => p !== '').map((p) => `${p}/`).join('');
  }

  /** One signed request; resolves with the answer's head, its body unread. */
  private request(method: string, key: string, query: Record<string, string>, what: string, body: Uint8Array): Promise<IncomingMessage> {
    const signed = signV4({ method, host: this.loc.host, key, query, body }, this.cred, this.now());
    const u = new URL(`${this.loc.protocol}//${this.loc.host}`);
    const doRequest = this.loc.protocol === 'https:' ? httpsRequest : httpRequest;
    return new Promise<IncomingMessage>((resolve, reject) => {
      const r = doRequest({
        method, hostname: u.hostname.replace(/^\[|\]$/g, ''), port: u.port === '' ? undefined : Number(u.port), path: signed.path,
        headers: { ...signed.headers, 'content-length': String(body.length) }, timeout: requestTimeoutMs,
        ...(this.loc.protocol === 'https:' && this.cred.ca !== undefined ? { ca: this.cred.ca } : {}),
      }, resolve);
      r.on('timeout', () => r.destroy(new Error(`${what}: no answer from ${this.where} in ${requestTimeoutMs / 1000} s`)));
      r.on('error', (err) => reject(new Error(`${what}: cannot reach ${this.where}: ${err.message}`)));
      r.end(Buffer.from(body.buffer, body.byteOffset, body.length));
    });
  }

  /** The answer's body whole, at most `bytesMax` (by its Content-Length first, unread). */
  private async collect(res: IncomingMessage, what: string, bytesMax: number): Promise<Buffer> {
    const chunks: Uint8Array[] = [];
    for await (const c of bounded(res, what, bytesMax)) chunks.push(c);
    return Buffer.concat(chunks);
  }

  private static refusal(status: number, body: Buffer, statusMessage: string | undefined, what: string): S3Error {
    const xml = body.toString('utf8');
    return new S3Error(status, xmlOne(xml, 'Code') ?? `HTTP${status}`, xmlOne(xml, 'Message') ?? (statusMessage ?? 'no message'), what);
  }

  /** One request; `bytesMax` refuses a larger answer (by its Content-Length) unread. Errors other than `accept` throw S3Error. */
  private async send(method: string, key: string, query: Record<string, string>, what: string, opts: { body?: Uint8Array; accept?: number[]; bytesMax?: number } = {}): Promise<S3Answer> {
    const res = await this.request(method, key, query, what, opts.body ?? new Uint8Array(0));
    const status = res.statusCode ?? 0;
    const ok = (status >= 200 && status < 300) || (opts.accept ?? []).includes(status);
    const body = await this.collect(res, what, ok && opts.bytesMax !== undefined ? opts.bytesMax : Math.max(answerBytesMax, opts.bytesMax ?? 0));
    if (!ok) throw S3TargetIo.refusal(status, body, res.statusMessage, what);
    const etag = res.headers.etag;
    return { status, body, ...(typeof etag === 'string' ? { etag } : {}) };
  }

  /** Every key (and common prefix with a delimiter) under `prefix`, following continuation tokens. */
  private async listAll(prefix: string, delimiter: boolean): Promise<{ keys: string[]; prefixes: string[] }> {
    const keys: string[] = [];
    const prefixes: string[] = [];
    let token: string | undefined;
    for (;;) {
      const query: Record<string, string> = { 'list-type': '2', prefix, ...(delimiter ? { delimiter: '/' } : {}), ...(token !== undefined ? { 'continuation-token': token } : {}) };
      const { body } = await this.send('GET', `/${this.loc.bucket}`, query, `listing ${this.where}`);
      const xml = body.toString('utf8');
      for (const c of xmlAll(xml, 'Contents')) keys.push(xmlOne(c, 'Key') ?? '');
      for (const c of xmlAll(xml, 'CommonPrefixes')) prefixes.push(xmlOne(c, 'Prefix') ?? '');
      token = xmlOne(xml, 'NextContinuationToken');
      if (xmlOne(xml, 'IsTruncated') !== 'true' || token === undefined) break;
    }
    return { keys, prefixes };
  }

  async list(): Promise<string[]> {
    const base = this.dirPrefix();
    const { prefixes } = await this.listAll(base, true);
    return prefixes.map((p) => p.slice(base.length).replace(/\/$/, '')).filter((n) => n !== '');
  }

  async makeDir(): Promise<void> {
    // No directories in S3: a prefix exists once an object is written under it.
  }

  async writeFile(dir: string, name: string, bytes: Uint8Array): Promise<void> {
    await this.send('PUT', this.key(dir, name), {}, `writing ${this.where}/${dir}/${name}`, { body: bytes });
  }

  /**
   * A file as it flows: one PUT when it fits in a part, else a multipart upload, one part in
   * memory at a time (each part signed with its own SHA-256); a failure aborts the upload, so the
   * server drops the parts it holds.
   */
  async writeStream(dir: string, name: string, body: AsyncIterable<Uint8Array> | Iterable<Uint8Array>): Promise<void> {
    const what = `writing ${this.where}/${dir}/${name}`;
    const key = this.key(dir, name);
    let part: Buffer[] = [];
    let partLength = 0;
    let upload: { id: string; etags: string[] } | undefined;
    try {
      for await (const chunk of body) {
        for (let at = 0; at < chunk.length;) {
          const n = Math.min(chunk.length - at, this.partBytes - partLength);
          part.push(Buffer.from(chunk.buffer, chunk.byteOffset + at, n));
          partLength += n;
          at += n;
          if (partLength < this.partBytes) continue;
          upload ??= { id: await this.startUpload(key, what), etags: [] };
          await this.uploadPart(key, upload, Buffer.concat(part), what);
          part = [];
          partLength = 0;
        }
      }
      if (upload === undefined) {
        await this.send('PUT', key, {}, what, { body: Buffer.concat(part) });
        return;
      }
      if (partLength > 0) await this.uploadPart(key, upload, Buffer.concat(part), what);
      await this.completeUpload(key, upload, what);
    } catch (err) {
      if (upload !== undefined) await this.send('DELETE', key, { uploadId: upload.id }, `${what}: aborting its upload`, { accept: [404] }).catch(() => undefined);
      throw err;
    }
  }

  private async startUpload(key: string, what: string): Promise<string> {
    const a = await this.send('POST', key, { uploads: '' }, `${what}: starting a multipart upload`);
    const id = xmlOne(a.body.toString('utf8'), 'UploadId');
    if (id === undefined || id === '') throw new Error(`${what}: the server answered no UploadId to a multipart upload`);
    return id;
  }

  private async uploadPart(key: string, upload: { id: string; etags: string[] }, bytes: Buffer, what: string): Promise<void> {
    const n = upload.etags.length + 1;
    const a = await this.send('PUT', key, { partNumber: String(n), uploadId: upload.id }, `${what}: part ${n}`, { body: bytes });
    if (a.etag === undefined) throw new Error(`${what}: the server answered no ETag for part ${n}`);
    upload.etags.push(a.etag);
  }

  private async completeUpload(key: string, upload: { id: string; etags: string[] }, what: string): Promise<void> {
    const esc = (t: string): string => t.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
    const xml = `<CompleteMultipartUpload>${upload.etags.map((e, i) => `<Part><PartNumber>${i + 1}</PartNumber><ETag>${esc(e)}</ETag></Part>`).join('')}</CompleteMultipartUpload>`;
    const a = await this.send('POST', key, { uploadId: upload.id }, `${what}: completing its multipart upload`, { body: Buffer.from(xml) });
    // S3 may answer 200 and still fail the completion, with an <Error> document as the body.
    const answer = a.body.toString('utf8');
    if (/<Error>/.test(answer)) throw S3TargetIo.refusal(a.status, a.body, undefined, `${what}: completing its multipart upload`);
  }

  async readFile(dir: string, name: string, bytesMax: number): Promise<Uint8Array | undefined> {
    const a = await this.send('GET', this.key(dir, name), {}, `reading ${this.where}/${dir}/${name}`, { accept: [404], bytesMax });
    if (a.status === 404) {
      const code = xmlOne(a.body.toString('utf8'), 'Code');
      if (code !== undefined && code !== 'NoSuchKey') throw new S3Error(404, code, xmlOne(a.body.toString('utf8'), 'Message') ?? '', `reading ${this.where}/${dir}/${name}`);
      return undefined;
    }
    return a.body;
  }

  async readStream(dir: string, name: string, bytesMax: number): Promise<AsyncIterable<Uint8Array> | undefined> {
    const what = `reading ${this.where}/${dir}/${name}`;
    const res = await this.request('GET', this.key(dir, name), {}, what, new Uint8Array(0));
    const status = res.statusCode ?? 0;
    if (status === 404 || status < 200 || status >= 300) {
      const body = await this.collect(res, what, answerBytesMax);
      const code = xmlOne(body.toString('utf8'), 'Code');
      if (status === 404 && (code === undefined || code === 'NoSuchKey')) return undefined;
      throw S3TargetIo.refusal(status, body, res.statusMessage, what);
    }
    // Checked before the caller iterates: a body announced too large is refused unread.
    checkLength(res, what, bytesMax);
    return bounded(res, what, bytesMax);
  }

  async renameDir(from: string): Promise<void> {
    throw new Error(`an S3 target cannot rename ${from}: S3 has no rename (writeBackup writes S3 backups in place, the manifest last)`);
  }

  async removeDir(dir: string): Promise<void> {
    const { keys } = await this.listAll(this.dirPrefix(dir), false);
    for (const k of keys) await this.send('DELETE', `/${this.loc.bucket}/${k}`, {}, `removing ${this.where}/${k}`, { accept: [404] });
  }

  async close(): Promise<void> {}
}

/** Refuses (and drops) an answer whose Content-Length is over `bytesMax`. */
function checkLength(res: IncomingMessage, what: string, bytesMax: number): void {
  const length = Number(res.headers['content-length'] ?? NaN);
  if (Number.isFinite(length) && length > bytesMax) {
    res.destroy();
    throw new Error(`${what}: it is ${length} bytes, more than the ${bytesMax} expected`);
  }
}

/** The answer's body as it arrives, at most `bytesMax` bytes (by its Content-Length first, then counted). */
async function* bounded(res: IncomingMessage, what: string, bytesMax: number): AsyncGenerator<Uint8Array> {
  checkLength(res, what, bytesMax);
  let got = 0;
  for await (const c of res) {
    got += (c as Buffer).length;
    if (got > bytesMax) {
      res.destroy();
      throw new Error(`${what}: more than the ${bytesMax} bytes expected`);
    }
    yield c as Buffer;
  }
}
