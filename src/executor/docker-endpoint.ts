// Where the Docker daemon listens. The node config's socket path wins when it is set; otherwise
// DOCKER_HOST, as the docker CLI reads it; otherwise /var/run/docker.sock. Pure: the
// environment is passed in.

import { ShoalError } from '../errors.ts';

export const defaultDockerSocketPath = '/var/run/docker.sock';

export type DockerEndpoint =
  | { kind: 'unix'; socketPath: string }
  | { kind: 'tcp'; host: string; port: number };

export interface DockerEndpointInput {
  /** From the node config; undefined = not set. */
  socketPath?: string | undefined;
  /** The process environment (DOCKER_HOST, DOCKER_TLS_VERIFY). */
  env?: Record<string, string | undefined>;
}

function invalid(message: string): ShoalError {
  return new ShoalError('config_invalid', message);
}

export function resolveDockerEndpoint(input: DockerEndpointInput): DockerEndpoint {
  if (input.socketPath !== undefined) {
    if (!input.socketPath.startsWith('/')) throw invalid(`the Docker socket path must be absolute, got '${input.socketPath}'`);
    return { kind: 'unix', socketPath: input.socketPath };
  }
  const dockerHost = input.env?.DOCKER_HOST;
  if (dockerHost === undefined || dockerHost === '') return { kind: 'unix', socketPath: defaultDockerSocketPath };
  return parseDockerHost(dockerHost, input.env?.DOCKER_TLS_VERIFY);
}

function parseDockerHost(dockerHost: string, tlsVerify: string | undefined): DockerEndpoint {
  let url: URL;
  try {
    url = new URL(dockerHost);
  } catch {
    throw invalid(`DOCKER_HOST '${dockerHost}' is not a URL; use unix:///path/to/docker.sock or tcp://host:port`);
  }
  if (url.protocol === 'unix:') {
    if (!url.pathname.startsWith('/')) throw invalid(`DOCKER_HOST '${dockerHost}' names no socket path`);
    return { kind: 'unix', socketPath: decodeURIComponent(url.pathname) };
  }
  if (url.protocol === 'tcp:') {
    // Plain HTTP only: sending it to a TLS port would fail with a confusing message later.
    if (tlsVerify !== undefined && tlsVerify !== '' && tlsVerify !== '0') {
      throw invalid('DOCKER_TLS_VERIFY is set, but shoal talks to Docker over tcp:// without TLS; use the unix socket (or an SSH tunnel to it)');
    }
    const port = url.port === '' ? 2375 : Number(url.port);
    if (url.hostname === '') throw invalid(`DOCKER_HOST '${dockerHost}' names no host`);
    return { kind: 'tcp', host: url.hostname.replace(/^\[|\]$/g, ''), port };
  }
  throw invalid(`DOCKER_HOST '${dockerHost}' uses ${url.protocol}//, which shoal does not support; use unix:// or tcp://`);
}

export function describeEndpoint(e: DockerEndpoint): string {
  return e.kind === 'unix' ? `unix://${e.socketPath}` : `tcp://${e.host}:${e.port}`;
}
