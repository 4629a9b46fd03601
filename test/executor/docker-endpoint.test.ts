import { describe, expect, it } from 'vitest';
import { isShoalError } from '../../src/errors.ts';
import { describeEndpoint, resolveDockerEndpoint } from '../../src/executor/docker-endpoint.ts';

function refusal(f: () => unknown): string {
  try {
    f();
  } catch (err) {
    expect(isShoalError(err) && err.code).toBe('config_invalid');
    return (err as Error).message;
  }
  throw new Error('expected config_invalid');
}

describe('resolveDockerEndpoint', () => {
  it('defaults to /var/run/docker.sock', () => {
    expect(resolveDockerEndpoint({})).toEqual({ kind: 'unix', socketPath: '/var/run/docker.sock' });
    expect(resolveDockerEndpoint({ env: { DOCKER_HOST: '' } })).toEqual({ kind: 'unix', socketPath: '/var/run/docker.sock' });
  });

  it('takes the configured socket path over DOCKER_HOST', () => {
    expect(resolveDockerEndpoint({ socketPath: '/run/d.sock', env: { DOCKER_HOST: 'tcp://h:1' } })).toEqual({ kind: 'unix', socketPath: '/run/d.sock' });
  });

  it('reads unix:// and tcp:// from DOCKER_HOST', () => {
    expect(resolveDockerEndpoint({ env: { DOCKER_HOST: 'unix:///run/user/1000/docker.sock' } })).toEqual({ kind: 'unix', socketPath: '/run/user/1000/docker.sock' });
    expect(resolveDockerEndpoint({ env: { DOCKER_HOST: 'tcp://10.0.0.5:2375' } })).toEqual({ kind: 'tcp', host: '10.0.0.5', port: 2375 });
    expect(resolveDockerEndpoint({ env: { DOCKER_HOST: 'tcp://docker.lan' } })).toEqual({ kind: 'tcp', host: 'docker.lan', port: 2375 });
    expect(resolveDockerEndpoint({ env: { DOCKER_HOST: 'tcp://[::1]:2375', DOCKER_TLS_VERIFY: '0' } })).toEqual({ kind: 'tcp', host: '::1', port: 2375 });
    expect(describeEndpoint({ kind: 'tcp', host: 'h', port: 1 })).toBe('tcp://h:1');
    expect(describeEndpoint({ kind: 'unix', socketPath: '/s' })).toBe('unix:///s');
  });

  it('refuses what it cannot use, saying what to do', () => {
    expect(refusal(() => resolveDockerEndpoint({ socketPath: 'docker.sock' }))).toMatch(/absolute/);
    expect(refusal(() => resolveDockerEndpoint({ env: { DOCKER_HOST: 'not a url' } }))).toMatch(/unix:\/\/\/path/);
    expect(refusal(() => resolveDockerEndpoint({ env: { DOCKER_HOST: 'ssh://me@host' } }))).toMatch(/ssh:/);
    expect(refusal(() => resolveDockerEndpoint({ env: { DOCKER_HOST: 'tcp://h:2376', DOCKER_TLS_VERIFY: '1' } }))).toMatch(/TLS/);
  });
});
