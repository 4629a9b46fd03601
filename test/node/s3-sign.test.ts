// The S3 target's Signature V4 (src/node/backup/s3-io.ts) against AWS's published examples
// ("Examples: Signature Calculations in AWS Signature Version 4", Amazon S3 API reference): the
// test server s3rver does not check V4 signatures; test/support/s3-sigv4-server.ts does, with the
// aws4 package (test/api/backups.test.ts: a wrong secret key refused).

import { describe, expect, it } from 'vitest';
import { parseS3Url, s3Advice, S3Error, signV4 } from '../../src/node/backup/s3-io.ts';

const cred = { accessKeyId: 'AKIAIOSFODNN7EXAMPLE', secretKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY', region: 'us-east-1' };
const at = new Date(Date.UTC(2013, 4, 24));
const host = 'examplebucket.s3.amazonaws.com';

describe('S3 Signature V4', () => {
  it('signs GET ?lifecycle as AWS\'s example does', () => {
    const r = signV4({ method: 'GET', host, key: '/', query: { lifecycle: '' }, body: new Uint8Array(0) }, cred, at);
    expect(r.headers.authorization).toBe('AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543');
  });

  it('signs a list with a query (max-keys, prefix) as AWS\'s example does', () => {
    const r = signV4({ method: 'GET', host, key: '/', query: { prefix: 'J', 'max-keys': '2' }, body: new Uint8Array(0) }, cred, at);
    expect(r.headers.authorization).toContain('Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7');
    expect(r.path).toBe('/?max-keys=2&prefix=J');
  });

  it('a different secret key gives a different signature', () => {
    const a = signV4({ method: 'GET', host, key: '/', query: { lifecycle: '' }, body: new Uint8Array(0) }, { ...cred, secretKey: 'other' }, at);
    expect(a.headers.authorization).not.toContain('fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543');
  });

  it('parses path-style URLs and refuses others, saying what to give', () => {
    expect(parseS3Url('http://127.0.0.1:9000/backups/homelab/a/')).toEqual({ protocol: 'http:', host: '127.0.0.1:9000', bucket: 'backups', prefix: 'homelab/a' });
    expect(parseS3Url('https://s3.lan/backups')).toEqual({ protocol: 'https:', host: 's3.lan', bucket: 'backups', prefix: '' });
    for (const bad of ['s3://b/p', 'http://h/', 'http://h/B_ad', 'http://u:p@h/b', 'http://h/b?x=1', 'nope']) expect(parseS3Url(bad)).toMatch(/http/);
  });

  it('says what to do about each refusal: which half of the key, the clock, the policy, the bucket', () => {
    const advice = (code: string, target?: string) => s3Advice(new S3Error(403, code, 'm', 'writing x'), 'AK1', target);
    expect(advice('SignatureDoesNotMatch', 'nas')).toBe('the server does not accept the secret key given for access key id AK1 (the request\'s signature does not match its own): set the right one with: shoal backup target add nas --s3 URL --access-key-id AK1 --secret-key-file FILE');
    expect(advice('SignatureDoesNotMatch')).toContain('give the right one (--secret-key-file FILE or --secret-key-stdin)');
    expect(advice('InvalidAccessKeyId')).toContain('the server knows no access key id AK1');
    expect(advice('RequestTimeTooSkewed')).toContain('clock');
    expect(advice('AccessDenied')).toContain('may not use this bucket');
    expect(advice('AccessDenied')).toContain('s3:AbortMultipartUpload');
    expect(advice('NoSuchBucket')).toContain('make the bucket');
    expect(advice('SlowDown')).toBe('check the URL, the bucket, the access key id and the secret key');
  });
});
