// The libraries every shoal node loads to serve, used once each as a node uses them at start
// (bench/heartbeat-floor.ts, "transport + libraries"): imported statically here, as src/ does,
// and loaded by that benchmark's processes through one import() of this file.

import Docker from 'dockerode';
import Fastify from 'fastify';
import { pack } from 'msgpackr';
import pino from 'pino';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { parse } from 'yaml';
import { z } from 'zod';
// shoal's own schema compilers (no Ajv): the bundle leaves fastify's out, as the node's does.
import { noJsonSchemaCompilers } from '../../src/api/no-json-schema.ts';

/**
 * What every node has loaded and running besides shoal's own code: an HTTPS API (fastify, one
 * route), zod and yaml (config and requests), prom-client's default metrics, a Docker client,
 * a pino logger and msgpackr. Each used once, as a node uses it at start.
 */
export async function serveWithLibraries(caPem: string, mine: { certPem: string; keyPem: string }): Promise<() => Promise<void>> {
  const config = z.object({ api: z.object({ listen: z.string() }) }).parse(parse('api:\n  listen: 127.0.0.1:0\n'));
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const docker = new Docker({ socketPath: '/var/run/docker.sock' });
  const log = pino({ level: 'info' }, pino.destination({ dest: 2, sync: false }));
  const app = Fastify({ https: { ca: caPem, cert: mine.certPem, key: mine.keyPem }, schemaController: noJsonSchemaCompilers });
  app.get('/healthz', async () => ({ ok: true, docker: typeof docker.listContainers, size: pack({ a: 1 }).length }));
  await app.listen({ host: '127.0.0.1', port: 0 });
  log.info(`floor: listening as ${config.api.listen} asks`);
  await registry.metrics();
  return async () => { await app.close(); };
}
