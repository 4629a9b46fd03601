// The receiving side of a rolling upgrade (docs/api.md, "Upgrade"; docs/operations.md, "Rolling
// upgrade"). Node-local, never forwarded: `shoal upgrade` sends each to the node it upgrades.
//
//   GET  /v1/upgrade            this node's releases: running, current, previous, every release
//   PUT  /v1/upgrade/build      ?sha256=HEX, body: an `npm pack` tarball (application/octet-stream),
//                               streamed to disk, checked, unpacked, started once, kept (admin)
//   POST /v1/upgrade/activate   {release}: current -> release, previous -> the old current, then a
//                               graceful stop and exit 10, "restart me" (admin)
//   POST /v1/upgrade/rollback   current <-> previous, then the same restart (admin)

import type { FastifyPluginAsync } from 'fastify';
import type { Readable } from 'node:stream';
import { z } from 'zod';
import { ShoalError } from '../errors.ts';
import type { UpgradeHost } from '../node/upgrade/upgrade-host.ts';
import type * as UpgradeReceive from '../node/upgrade/upgrade-receive.ts';
import type { ApiPluginOptions } from './context.ts';
import { noQuery } from './request-schemas.ts';
import { validate } from './validate.ts';

/** Receiving and checking builds (node/upgrade/upgrade-receive.ts, with tar): loaded by the first call that needs it, not at a node's start. */
const receiving = async (): Promise<typeof UpgradeReceive> => import('../node/upgrade/upgrade-receive.ts');

export const buildQuery = z.strictObject({ sha256: z.string().regex(/^[0-9a-f]{64}$/, 'the sha256 of the tarball, 64 lowercase hex digits') });
export const activateBody = z.strictObject({ release: z.string().min(1).max(128) });
export const rollbackBody = z.strictObject({});

/** Answered before the node goes down: the restart starts once the answer is on its way. */
function restartSoon(host: UpgradeHost): void {
  setImmediate(() => host.restart?.());
}

function requireRestart(host: UpgradeHost): void {
  if (host.restart !== undefined) return;
  throw new ShoalError('release_refused', 'this node does not own its process (it runs inside another one, e.g. a test): it cannot restart into a new build; nothing was changed', { reason: 'not_process' });
}

export const upgradeRoutes: FastifyPluginAsync<ApiPluginOptions> = async (app, { ctx }) => {
  const host = ctx.upgrade;
  const unavailable = (): ShoalError => new ShoalError('release_refused', 'this node has no releases folder (it runs without a data directory)', { reason: 'not_installed' });
  // One upgrade operation at a time on a node: two uploads or an upload and an activation would race.
  let busy: string | undefined;
  const exclusive = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
    if (busy !== undefined) throw new ShoalError('release_refused', `this node is busy with ${busy}; wait until it ends`, { reason: 'busy' });
    busy = what;
    try {
      return await fn();
    } finally {
      busy = undefined;
    }
  };
  // The tarball is read as a stream by the route, never buffered whole (upgrade-receive.ts caps it).
  app.addContentTypeParser('application/octet-stream', (_req, payload, done) => done(null, payload));

  app.get('/v1/upgrade', { config: { role: 'reader' } }, async (req) => {
    validate({ query: [noQuery, req.query] });
    if (host === undefined) throw unavailable();
    // The levels of current and previous, asked of each release once when not yet recorded: a
    // rollback planned from this answer is checked before any node is touched.
    for (const name of [host.releases.link('current'), host.releases.link('previous')]) {
      if (name === null || host.releases.marker(name) === undefined || host.releases.levelOf(name) !== undefined) continue;
      await receiving().then((r) => r.releaseLevel(host.releases, name, host.nodeBinary)).catch((err: unknown) => ctx.node.log.warn(`upgrade: could not learn the feature level of release ${name}: ${(err as Error).message}`));
    }
    return { node: ctx.node.id, softwareVersion: ctx.softwareVersion, featureLevel: ctx.node.featureLevel, ...host.releases.view() };
  });

  app.put('/v1/upgrade/build', { config: { role: 'admin' } }, async (req) => {
    const v = validate({ query: [buildQuery, req.query] });
    if (host === undefined) throw unavailable();
    if (req.headers['content-type']?.split(';')[0]?.trim() !== 'application/octet-stream' || req.body === undefined) {
      throw new ShoalError('unsupported_media_type', 'send the tarball as the body, with content-type: application/octet-stream');
    }
    const received = await exclusive('receiving a build', async () => (await receiving()).receiveBuild(host.releases, host.runningRoot, req.body as Readable, v.query.sha256, { nodeBinary: host.nodeBinary }));
    ctx.node.log.info(`upgrade: ${received.existed ? 'already had' : 'received'} release ${received.name} (${received.version}, node_modules ${received.nodeModules})`);
    return { node: ctx.node.id, release: received };
  });

  app.post('/v1/upgrade/activate', { config: { role: 'admin' } }, async (req) => {
    const v = validate({ query: [noQuery, req.query], body: [activateBody, req.body] });
    if (host === undefined) throw unavailable();
    requireRestart(host);
    return exclusive('an activation', async () => {
      if (host.releases.marker(v.body.release) !== undefined) await (await receiving()).refuseBelowLevel(host.releases, v.body.release, ctx.node.featureLevel, host.nodeBinary);
      const previous = host.releases.activate(v.body.release);
      ctx.node.log.warn(`upgrade: release ${v.body.release} is current (previous: ${previous ?? 'none'}); stopping gracefully to restart into it`);
      const pruned = host.releases.prune();
      if (pruned.length > 0) ctx.node.log.info(`upgrade: removed release${pruned.length > 1 ? 's' : ''} ${pruned.join(', ')}: neither current, previous nor shared by one of them`);
      restartSoon(host);
      return { node: ctx.node.id, current: v.body.release, previous, restarting: true };
    });
  });

  app.post('/v1/upgrade/rollback', { config: { role: 'admin' } }, async (req) => {
    // No body at all is an empty one; a body that is not {} (null included) is refused.
    validate({ query: [noQuery, req.query], body: [rollbackBody, req.body === undefined ? {} : req.body] });
    if (host === undefined) throw unavailable();
    requireRestart(host);
    return exclusive('a rollback', async () => {
      const previous = host.releases.link('previous');
      if (previous !== null && host.releases.marker(previous) !== undefined) await (await receiving()).refuseBelowLevel(host.releases, previous, ctx.node.featureLevel, host.nodeBinary);
      const current = host.releases.rollback();
      ctx.node.log.warn(`upgrade: rolled back to release ${current}; stopping gracefully to restart into it`);
      restartSoon(host);
      return { node: ctx.node.id, current, previous: host.releases.link('previous'), restarting: true };
    });
  });
};
