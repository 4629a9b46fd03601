// The kinds of pull failure, read from the answers Docker passes on from real registries.

import { describe, expect, it } from 'vitest';
import { describePullFailure, pullFailureKind } from '../../src/executor/pull-errors.ts';
import { imageRegistryHost } from '../../src/resources/registry-logins.ts';

describe('pullFailureKind', () => {
  it.each([
    ['Head "https://172.17.0.1:5000/v2/app/manifests/v1": no basic auth credentials', 'unauthorized'],
    ['Get "https://ghcr.io/v2/o/app/manifests/1": unauthorized: authentication required', 'unauthorized'],
    ['pull access denied for private/app, repository does not exist or may require \'docker login\': denied: requested access to the resource is denied', 'unauthorized'],
    ['manifest for 172.17.0.1:5000/app:nope not found: manifest unknown: manifest unknown', 'not_found'],
    ['no matching manifest for linux/arm64/v8 in the manifest list entries', 'not_found'],
    ['Get "https://registry.lan:5000/v2/": x509: certificate signed by unknown authority', 'tls'],
    ['Get "https://10.0.0.5:5000/v2/": http: server gave HTTP response to HTTPS client', 'tls'],
    ['toomanyrequests: You have reached your pull rate limit. You may increase the limit by authenticating and upgrading', 'rate_limited'],
    ['Get "https://registry.lan:5000/v2/": dial tcp 10.0.0.5:5000: connect: connection refused', 'unreachable'],
    ['Get "https://nope.invalid/v2/": dial tcp: lookup nope.invalid: no such host', 'unreachable'],
    ['something else entirely', 'other'],
  ])('%s is %s', (message, kind) => {
    expect(pullFailureKind(message)).toBe(kind);
  });

  it('says the kind first, then the registry\'s answer, then what to do', () => {
    const d = describePullFailure('ghcr.io', 'unauthorized: authentication required');
    expect(d.text).toBe('unauthorized: unauthorized: authentication required; log in to the registry: shoal registry login ghcr.io --username USER --password-stdin (or check the login\'s user and password)');
  });
});

describe('imageRegistryHost', () => {
  it.each([
    ['busybox', 'docker.io'], ['library/busybox:1.36', 'docker.io'], ['index.docker.io/library/nginx', 'docker.io'],
    ['ghcr.io/o/app:1', 'ghcr.io'], ['Registry.LAN:5000/app@sha256:abc', 'registry.lan:5000'], ['localhost/app', 'localhost'],
    ['localhost:5000/a/b:c', 'localhost:5000'], ['team/app:1', 'docker.io'],
  ])('%s is pulled from %s', (image, host) => {
    expect(imageRegistryHost(image)).toBe(host);
  });
});
