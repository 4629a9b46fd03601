// The test S3 server's own check (s3-sigv4-server.ts): what shoal's signer signs passes it, and a
// request changed after signing does not, so a refusal in test/api/backups.test.ts means the key.

import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseS3Url, S3TargetIo, signV4, type S3Location } from '../../src/node/backup/s3-io.ts';
import { S3SigV4Server } from './s3-sigv4-server.ts';

const cred = { accessKeyId: 'AK1', secretKey: 'the-secret', region: 'us-east-1' };
const server = new S3SigV4Server({ keys: { [cred.accessKeyId]: cred.secretKey }, buckets: ['bkt'], pageKeys: 2 });
let host = '';
beforeAll(async () => { host = new URL(await server.start()).host; });
afterAll(async () => { await server.close(); });

/** Sends a request signed for `signedBody`/`signedQuery` with `body`/`query` instead; answers status and the S3 error code. */
function send(method: string, key: string, signedQuery: Record<string, string>, signedBody: string, sent: { query?: string; body?: string } = {}): Promise<{ status: number; code: string }> {
  const s = signV4({ method, host, key, query: signedQuery, body: Buffer.from(signedBody) }, cred, new Date());
  const body = Buffer.from(sent.body ?? signedBody);
  return new Promise((resolve, reject) => {
    const r = request({ host: '127.0.0.1', port: Number(host.split(':')[1]), method, path: sent.query === undefined ? s.path : `${key}?${sent.query}`, headers: { ...s.headers, 'content-length': String(body.length) } }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => { text += c.toString(); });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, code: /<Code>(\w+)<\/Code>/.exec(text)?.[1] ?? '' }));
    });
    r.on('error', reject);
    r.end(body);
  });
}

describe('the test S3 server checks Signature V4', () => {
  it('accepts what is signed, and refuses a body, a query or a key changed after signing', async () => {
    expect(await send('PUT', '/bkt/a/b', {}, 'hello')).toEqual({ status: 200, code: '' });
    expect(await send('PUT', '/bkt/a/b', {}, 'hello', { body: 'HELLO' })).toEqual({ status: 400, code: 'XAmzContentSHA256Mismatch' });
    expect(await send('GET', '/bkt', { 'list-type': '2', prefix: 'a/' }, '')).toMatchObject({ status: 200 });
    expect(await send('GET', '/bkt', { 'list-type': '2', prefix: 'a/' }, '', { query: 'list-type=2&prefix=b%2F' })).toEqual({ status: 403, code: 'SignatureDoesNotMatch' });
    expect([...server.objects('bkt').keys()]).toEqual(['a/b']);
    const other = new S3TargetIo(parseS3Url(`http://${host}/bkt`) as S3Location, { ...cred, accessKeyId: 'AK2' });
    await expect(other.list()).rejects.toThrow(/403 InvalidAccessKeyId/);
  });

  it('lists page by page (continuation tokens) as shoal\'s target reads it', async () => {
    const io = new S3TargetIo(parseS3Url(`http://${host}/bkt/p`) as S3Location, cred);
    for (const d of ['d1', 'd2', 'd3', 'd4', 'd5']) await io.writeFile(d, 'f', new Uint8Array([1]));
    expect(await io.list()).toEqual(['d1', 'd2', 'd3', 'd4', 'd5']);
    expect(Buffer.from(await io.readFile('d3', 'f', 10) ?? [])).toEqual(Buffer.from([1]));
    await io.removeDir('d3');
    expect(await io.list()).toEqual(['d1', 'd2', 'd4', 'd5']);
  });
});
