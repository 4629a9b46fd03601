// GET /v1/cluster/snapshot: a consistent snapshot file of this node's applied state, after a
// read barrier (so it holds every write acknowledged before the request). It is encoded the way
// the node snapshots itself (store.snapshotInSlices: an image taken at once, encoded in slices
// with the event loop free between them) and streamed part by part with backpressure, rather
// than built and copied in one blocking call. Downloads are bounded (snapshotDownloadsMax): each
// holds an image of the store until it is sent.

import { Readable } from 'node:stream';
import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { encodeSnapshotFileParts } from '../node/snapshot-file.ts';
import type { ApiPluginOptions } from './app.ts';
import { validate } from './validate.ts';

const noQuery = z.object({}).strict();
const pause = (): Promise<void> => new Promise<void>((r) => setImmediate(r));

export const snapshotRoutes: FastifyPluginAsync<ApiPluginOptions> = async (app, { ctx, bounds }) => {
  app.get('/v1/cluster/snapshot', async (req, reply) => {
    validate({ query: [noQuery, req.query] });
    const release = bounds.snapshots.acquire(req.ip);
    try {
      await ctx.node.readBarrier();
      // The index, term, members and the store's image all belong to this one synchronous step.
      const meta = { clusterId: ctx.clusterId, index: ctx.node.appliedIndex, term: ctx.node.currentTerm, members: ctx.node.membership.list() };
      const parts = await encodeSnapshotFileParts(meta, await ctx.store.snapshotInSlices(pause), pause);
      let bytes = 0;
      for (const p of parts) bytes += p.length;
      reply.raw.once('finish', release);
      reply.raw.once('close', release);
      void reply.header('content-type', 'application/octet-stream');
      void reply.header('content-length', String(bytes));
      void reply.header('content-disposition', `attachment; filename="shoal-${ctx.clusterId}-${meta.index}.snap"`);
      return await reply.send(Readable.from(parts.map((p) => Buffer.from(p.buffer, p.byteOffset, p.byteLength)), { objectMode: false }));
    } catch (err) {
      release();
      throw err;
    }
  });
};
