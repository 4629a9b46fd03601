// Replicated volumes (issue 41, docs/volumes.md):
//
//   GET  /v1/volumes                    each replicated volume: its service, settings, writer, newest complete copy, where, its age, the last error (reader)
//   GET  /v1/volumes/:name              one, with every copy held (complete or diverged) (reader)
//   POST /v1/volumes/:name/restore      {version: "s12-e3-n2"} or {empty: true}: the next start of its task restores that version, or starts empty (operator; stop-first)
//   POST /v1/volumes/:name/remove-copy  {node, version, force?}: the operator removes a node's copy: a diverged one, or with force
//                                       one of the line but never the last complete copy (volume_copy_kept); the node deletes it
//   PUT  /v1/volumes/:name/increments   a writer's node sends a holder an increment (nodes only, over mTLS): the offer in the
//                                       x-shoal-increment header (base64url JSON), the stream as the body; refused from a
//                                       sender that is not the volume's current writer (volume_copy_refused, stale_epoch)
//   GET  /v1/volumes/:name/versions/:version/stream[?parent=VERSION]
//                                       a btrfs send stream of a version this node holds, for a backup (nodes only,
//                                       over mTLS): its length and sha256 in the x-shoal-stream header (base64url JSON);
//                                       with ?parent, an increment on that version when this node still holds it, else
//                                       whole, the header's `parent` saying which (null: whole)
//
// sendIncrement is the writer's side of the increments, fetchVolumeStream the backup's side of the
// stream, both over the mesh with this node's certificate.

import { createHash } from 'node:crypto';
import { pipeline, type Readable } from 'node:stream';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { ShoalError, errorCatalog, type ErrorCode } from '../errors.ts';
import { throttle, type ThrottleClock } from '../executor/volumes/throttle.ts';
import type { Increment, IncrementOffer, VolumeEngine } from '../executor/volumes/volume-engine.ts';
import { btrfsTimeouts } from '../executor/volumes/btrfs.ts';
import { putChange } from '../resources/changes.ts';
import { allDocs } from '../resources/state.ts';
import {
  copyRemovalProblem, currentWriter, divergedCopies, holdersOf, inLine, newestComplete, parseVersionName, refuseIncrement, removeCopy, restoreEras,
  restoreProblem, restoreWriter, sameVersion, versionName, volumeRecordSchema, volumesCollection, type VolumeRecord, type VolumeVersion,
} from '../resources/volumes.ts';
import type { ApiContext } from './context.ts';
import { readOnlyQuery } from './control-schemas.ts';
import { decideAndWrite } from './control-write.ts';
import { readBarrier } from './docs-routes.ts';
import type { PeerHttp } from './peer-http.ts';
import { noQuery } from './request-schemas.ts';
import { validate } from './validate.ts';
import { compareText } from '../base/order.ts';

export const incrementHeader = 'x-shoal-increment';
export const streamHeader = 'x-shoal-stream';
// `parent` is there only when the request asked for one: a node of an older release never asks,
// and reads this header strictly.
const streamInfoSchema = z.object({ bytes: z.number().int().min(0), sha256: z.string().regex(/^[0-9a-f]{64}$/), parent: z.string().max(200).nullable().optional() }).strict();
const streamQuery = z.object({ parent: z.string().regex(/^s\d+-e\d+-[A-Za-z0-9_.-]+$/, 'a version name: s<seq>-e<epoch>-<node>').max(200).optional() }).strict();


const versionSchema = z.object({ seq: z.number().int().min(1), node: z.string().min(1).max(128), epoch: z.number().int().min(0) }).strict();
const offerSchema = z.object({
  volume: z.string().min(1).max(128), version: versionSchema, parent: versionSchema.nullable(),
  sender: z.object({ node: z.string().min(1).max(128), epoch: z.number().int().min(0) }).strict(),
  bytes: z.number().int().min(0), sha256: z.string().regex(/^[0-9a-f]{64}$/),
}).strict();

const copyView = z.object({ node: z.string(), version: z.string(), atMs: z.number().int(), state: z.enum(['complete', 'diverged']) });
export const volumeViewSchema = z.object({
  name: z.string(),
  service: z.string(),
  copies: z.number().int(),
  everyMs: z.number().int(),
  sizeBytes: z.number().int(),
  /** The node that writes it now and its epoch; null: never started, or restored and not started since. */
  writer: z.object({ node: z.string(), epoch: z.number().int() }).nullable(),
  /** The newest complete copy: its version, the nodes holding it, when it was first recorded (log time) and its age. */
  newest: z.object({ version: z.string(), nodes: z.array(z.string()), atMs: z.number().int(), ageMs: z.number().int() }).nullable(),
  /** A restore is waiting for the task's next start: the version it restores, or null for an empty volume. */
  restoring: z.object({ version: z.string().nullable() }).nullable(),
  lastError: z.object({ atMs: z.number().int(), message: z.string() }).nullable(),
  held: z.array(copyView),
  diverged: z.number().int(),
  /** Copies the operator removed (shoal volume rm-copy) whose node has not deleted their files yet. */
  removing: z.array(z.object({ node: z.string(), version: z.string() })),
  rev: z.number().int(),
});
export type VolumeView = z.infer<typeof volumeViewSchema>;
export const volumeListAnswer = z.object({ items: z.array(volumeViewSchema), rev: z.number().int() });
export const restoreBody = z.object({ version: z.string().min(1).max(200).optional(), empty: z.literal(true).optional() }).strict()
  .refine((b) => (b.version === undefined) !== (b.empty === undefined), 'give either version (a version name, e.g. s12-e3-n2) or empty: true');
export const restoreAnswer = z.object({ volume: volumeViewSchema, restoring: z.string().nullable() });

export const removeCopyBody = z.object({
  node: z.string().min(1).max(128), version: z.string().min(1).max(200),
  /** Also a copy of the line (complete); still never the last complete copy. */
  force: z.boolean().optional(),
}).strict();
export const removeCopyAnswer = z.object({ volume: volumeViewSchema, removed: z.object({ node: z.string(), version: z.string(), state: z.enum(['complete', 'diverged']) }) });

export const volumeNameParams = z.object({ name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/, 'a volume name: letters, digits, _ . -') }).strict();
export const volumeVersionParams = volumeNameParams.extend({ version: z.string().regex(/^s\d+-e\d+-[A-Za-z0-9_.-]+$/, 'a version name: s<seq>-e<epoch>-<node>').max(200) }).strict();

/** What GET /v1/volumes shows of a record; `nowMs` is the log time. */
export function volumeView(rec: VolumeRecord, rev: number, nowMs: number): VolumeView {
  const writer = currentWriter(rec);
  const newest = newestComplete(rec);
  const newestAt = newest === null ? null : Math.min(...rec.held.filter((c) => c.version.seq === newest.seq && c.version.node === newest.node && c.version.epoch === newest.epoch).map((c) => c.atMs));
  const last = rec.eras.at(-1);
  return {
    name: rec.name, service: rec.service, copies: rec.copies, everyMs: rec.everyMs, sizeBytes: rec.sizeBytes,
    writer: writer === null || writer.node === restoreWriter ? null : writer,
    newest: newest === null || newestAt === null ? null : { version: versionName(newest), nodes: holdersOf(rec, newest), atMs: newestAt, ageMs: Math.max(0, nowMs - newestAt) },
    restoring: last === undefined ? (rec.held.length > 0 ? { version: null } : null) : last.node === restoreWriter ? { version: last.base === null ? null : versionName(last.base) } : null,
    lastError: rec.lastError,
    held: [...rec.held].sort((a, b) => b.version.seq - a.version.seq || compareText(a.node, b.node))
      .map((c) => ({ node: c.node, version: versionName(c.version), atMs: c.atMs, state: inLine(rec, c.version) ? 'complete' as const : 'diverged' as const })),
    diverged: divergedCopies(rec).length,
    removing: (rec.removing ?? []).map((r) => ({ node: r.node, version: versionName(r.version) })),
    rev,
  };
}

function readVolume(ctx: ApiContext, name: string): { rec: VolumeRecord; rev: number } {
  const doc = ctx.store.get(volumesCollection, name);
  const r = volumeRecordSchema.safeParse(doc?.doc);
  if (doc === undefined || !r.success) throw new ShoalError('not_found', `no replicated volume ${name}; list them with: shoal volume ls`, { volume: name });
  return { rec: r.data, rev: doc.rev };
}

/** Who may fetch a volume's stream: another node of the cluster, with its certificate (anyone under api.insecureLoopback). */
function checkNodeCaller(req: FastifyRequest, what: string): void {
  const caller = req.caller;
  if (caller.via === 'insecure' || caller.via === 'node') return;
  throw new ShoalError('forbidden', `${what} is fetched by a node of the cluster, with its certificate (the caller is ${caller.principal})`);
}

/** Who may send an increment: the sender node itself, with its certificate (anyone under api.insecureLoopback). */
function checkSender(req: FastifyRequest, offer: IncrementOffer): void {
  const caller = req.caller;
  if (caller.via === 'insecure') return;
  if (caller.via !== 'node' || caller.principal !== `node:${offer.sender.node}`) {
    throw new ShoalError('forbidden', `an increment of volume ${offer.volume} from ${offer.sender.node} is sent by that node itself, with its certificate (the caller is ${caller.principal})`);
  }
}

function offerOf(req: FastifyRequest): IncrementOffer {
  const raw = req.headers[incrementHeader];
  if (typeof raw !== 'string') throw new ShoalError('bad_request', `an increment needs the ${incrementHeader} header (base64url JSON: volume, version, parent, sender, bytes, sha256)`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
  } catch {
    throw new ShoalError('bad_request', `the ${incrementHeader} header is not base64url JSON`);
  }
  const r = offerSchema.safeParse(parsed);
  if (!r.success) throw new ShoalError('bad_request', `the ${incrementHeader} header is not an increment offer: ${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return r.data;
}

/**
 * GET /v1/volumes/:name/versions/:version/stream: a version this node holds, with its length and
 * sha256 in a header; with ?parent, an increment on that version when this node holds it too.
 */
async function sendVersionStream(ctx: ApiContext, req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const v = validate({ params: [volumeVersionParams, req.params], query: [streamQuery, req.query] });
  const name = v.params.name;
  checkNodeCaller(req, `volume ${name}'s stream`);
  const version = parseVersionName(v.params.version);
  const asked = v.query.parent === undefined ? null : parseVersionName(v.query.parent);
  if (version === null) throw new ShoalError('bad_request', `${JSON.stringify(v.params.version)} is not a version name (s<seq>-e<epoch>-<node>)`);
  if (v.query.parent !== undefined && (asked === null || sameVersion(asked, version))) throw new ShoalError('bad_request', `parent ${JSON.stringify(v.query.parent)} is not a version name other than the one asked for`);
  const engine = ctx.volumes;
  if (engine === undefined) throw new ShoalError('volume_no_copy', `node ${ctx.node.id} keeps no replicated volumes (it runs no workloads)`, { volume: name });
  const made = await versionStream(engine, ctx.node.id, name, version, asked);
  const body = engine.body(made);
  body.once('close', () => { void engine.release(made); });
  ctx.node.log.info(`volume ${name}: sending ${versionName(version)} ${made.parent === null ? 'whole' : `as an increment on ${versionName(made.parent)}`} (${made.bytes} bytes) for a backup${asked !== null && made.parent === null ? ` (${versionName(asked)} is no longer here)` : ''}`);
  const info = { bytes: made.bytes, sha256: made.sha256, ...(v.query.parent !== undefined ? { parent: made.parent === null ? null : versionName(made.parent) } : {}) };
  return reply.header(streamHeader, Buffer.from(JSON.stringify(info)).toString('base64url'))
    .header('content-type', 'application/octet-stream').send(body);
}

/**
 * The stream of `version` of volume `name` as this node (`self`) can make it for a backup: an
 * increment on `parent` when it holds that version too, else whole (the holder keeps only its
 * last few versions; the backup records what it got). The caller sends it, then releases it.
 */
export async function versionStream(engine: VolumeEngine, self: string, name: string, version: VolumeVersion, parent: VolumeVersion | null): Promise<Increment> {
  const held = (await engine.has(name)) ? await engine.versions(name) : [];
  if (!held.some((h) => sameVersion(h, version))) {
    throw new ShoalError('volume_no_copy', `node ${self} does not hold version ${versionName(version)} of volume ${name}`, { volume: name, version: versionName(version) });
  }
  const base = parent !== null && held.some((h) => sameVersion(h, parent)) ? parent : null;
  return await engine.makeIncrement(name, version, base, { node: self, epoch: 0 });
}

/** POST /v1/volumes/:name/remove-copy: the copy moved from held to removing, by compare-and-set; its node deletes the files. */
async function removeCopyRoute(ctx: ApiContext, req: FastifyRequest): Promise<z.infer<typeof removeCopyAnswer>> {
  const v = validate({ params: [volumeNameParams, req.params], query: [noQuery, req.query], body: [removeCopyBody, req.body] });
  const name = v.params.name;
  const { node, force = false } = v.body;
  const wanted = parseVersionName(v.body.version);
  if (wanted === null) throw new ShoalError('bad_request', `${JSON.stringify(v.body.version)} is not a version name (s<seq>-e<epoch>-<node>, as shoal volume inspect ${name} lists them)`);
  const w = await decideAndWrite(ctx, req, `removing a copy of volume ${name}`, (state) => {
    const found = state.volumes?.get(name);
    if (found === undefined) throw new ShoalError('not_found', `no replicated volume ${name}; list them with: shoal volume ls`, { volume: name });
    const rec = found.value;
    if (!rec.held.some((c) => c.node === node && sameVersion(c.version, wanted))) {
      const pending = (rec.removing ?? []).some((r) => r.node === node && sameVersion(r.version, wanted));
      throw new ShoalError('not_found', pending
        ? `${node}'s copy ${versionName(wanted)} of volume ${name} is removed already; the node deletes its files when it next looks (it is listed until then in shoal volume inspect ${name} --json, removing)`
        : `node ${node} holds no copy ${versionName(wanted)} of volume ${name}; shoal volume inspect ${name} lists the copies`, { volume: name, node, version: versionName(wanted) });
    }
    const problem = copyRemovalProblem(rec, node, wanted, force);
    if (problem !== null) throw new ShoalError('volume_copy_kept', problem.message, { volume: name, node, version: versionName(wanted), reason: problem.reason });
    const copyState = inLine(rec, wanted) ? 'complete' as const : 'diverged' as const;
    return { plan: { changes: [putChange(volumesCollection, name, removeCopy(rec, node, wanted), found.rev)], compares: [] }, answer: { rec: removeCopy(rec, node, wanted), state: copyState } };
  });
  const after = readVolume(ctx, name);
  ctx.node.log.info(`volume ${name}: ${w.answer.state} copy ${versionName(wanted)} on ${node} removed by the operator; the node deletes its files`);
  return { volume: volumeView(w.answer.rec, w.rev ?? after.rev, ctx.node.logTimeNow()), removed: { node, version: versionName(wanted), state: w.answer.state } };
}

export const volumeRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  // The increment's stream as it comes (its length and sha256 are checked against the offer).
  app.addContentTypeParser('application/octet-stream', (_req, payload, done) => done(null, payload));

  app.get('/v1/volumes', { config: { role: 'reader' } }, async (req) => {
    const v = validate({ query: [readOnlyQuery, req.query] });
    await readBarrier(ctx, v.query.consistency);
    const now = ctx.node.logTimeNow();
    const items: VolumeView[] = [];
    for (const d of allDocs(ctx.store, volumesCollection)) {
      const r = volumeRecordSchema.safeParse(d.doc);
      if (r.success) items.push(volumeView(r.data, d.rev, now));
    }
    items.sort((a, b) => compareText(a.name, b.name));
    return { items, rev: ctx.store.revision };
  });

  app.get('/v1/volumes/:name', { config: { role: 'reader' } }, async (req) => {
    const v = validate({ params: [volumeNameParams, req.params], query: [readOnlyQuery, req.query] });
    await readBarrier(ctx, v.query.consistency);
    const { rec, rev } = readVolume(ctx, v.params.name);
    return volumeView(rec, rev, ctx.node.logTimeNow());
  });

  app.post('/v1/volumes/:name/restore', { config: { role: 'operator' } }, async (req) => {
    const v = validate({ params: [volumeNameParams, req.params], query: [noQuery, req.query], body: [restoreBody, req.body] });
    const name = v.params.name;
    const wanted = v.body.version === undefined ? null : parseVersionName(v.body.version);
    if (v.body.version !== undefined && wanted === null) throw new ShoalError('bad_request', `${JSON.stringify(v.body.version)} is not a version name (s<seq>-e<epoch>-<node>, as shoal volume inspect ${name} lists them)`);
    const w = await decideAndWrite(ctx, req, `restoring volume ${name}`, (state) => {
      const found = state.volumes?.get(name);
      if (found === undefined) throw new ShoalError('not_found', `no replicated volume ${name}; list them with: shoal volume ls`, { volume: name });
      const rec = found.value;
      // Stop-first: a task that runs writes the live volume the restore replaces.
      const running = [...state.tasks.values()].map((t) => t.value).filter((t) => t.service === rec.service && t.desired === 'running' && t.nodeId !== null && state.nodes.get(t.nodeId)?.value.state === 'ready');
      if (running.length > 0) {
        throw new ShoalError('volume_in_use', `service ${rec.service} has a task running on ${running.map((t) => t.nodeId).join(', ')}, writing volume ${name}: stop it first (shoal service scale ${rec.service} 0), restore, then scale it back to 1`, { volume: name, service: rec.service, tasks: running.map((t) => t.id) });
      }
      if (wanted !== null) {
        const problem = restoreProblem(rec, wanted);
        if (problem !== null) {
          const newest = newestComplete(rec);
          throw new ShoalError('volume_no_copy', `${problem}; shoal volume inspect ${name} lists the copies`, { volume: name, newest: newest === null ? null : versionName(newest), nodes: newest === null ? [] : holdersOf(rec, newest) });
        }
      }
      const next: VolumeRecord = { ...rec, eras: restoreEras(rec, wanted), lastError: null };
      return { plan: { changes: [putChange(volumesCollection, name, next, found.rev)], compares: [] }, answer: next };
    });
    const after = readVolume(ctx, name);
    ctx.node.log.info(`volume ${name}: restore of ${wanted === null ? 'an empty volume' : versionName(wanted)} written; the task's next start takes it`);
    return { volume: volumeView(w.answer, w.rev ?? after.rev, ctx.node.logTimeNow()), restoring: wanted === null ? null : versionName(wanted) };
  });

  app.post('/v1/volumes/:name/remove-copy', { config: { role: 'operator' } }, async (req) => removeCopyRoute(ctx, req));

  app.put('/v1/volumes/:name/increments', { config: { role: 'admin' } }, async (req, reply) => {
    const v = validate({ params: [volumeNameParams, req.params], query: [noQuery, req.query] });
    const offer = offerOf(req);
    const body = req.body as Readable | undefined;
    if (req.headers['content-type']?.split(';')[0]?.trim() !== 'application/octet-stream' || body === undefined) {
      throw new ShoalError('unsupported_media_type', 'send the increment\'s stream as the body, with content-type: application/octet-stream');
    }
    if (offer.volume !== v.params.name) throw new ShoalError('bad_request', `the offer is for volume ${offer.volume}, the path names ${v.params.name}`);
    checkSender(req, offer);
    const engine = ctx.volumes;
    if (engine === undefined) throw new ShoalError('volume_tool_failed', `node ${ctx.node.id} keeps no replicated volumes (it runs no workloads)`, { reason: 'no_engine' });
    // The era the leader committed before the sender sent: a placement elsewhere refuses it from then on.
    await ctx.node.readBarrier();
    const { rec } = readVolume(ctx, offer.volume);
    await engine.receive(offer, rec.sizeBytes, body, () => {
      const now = volumeRecordSchema.safeParse(ctx.store.get(volumesCollection, offer.volume)?.doc);
      return now.success ? refuseIncrement(now.data, offer.sender, offer.version) : `stale_epoch: volume ${offer.volume} has no record`;
    });
    ctx.node.log.debug(`volume ${offer.volume}: received ${versionName(offer.version)} (${offer.bytes} bytes${offer.parent === null ? ', whole' : ` on ${versionName(offer.parent)}`}) from ${offer.sender.node}`);
    return reply.code(204).send();
  });

  app.get('/v1/volumes/:name/versions/:version/stream', { config: { role: 'admin' } }, async (req, reply) => await sendVersionStream(ctx, req, reply));
};

/** A version's stream as a holder answered it: an increment on `parent`, or whole (parent null). */
export interface VolumeStreamAnswer {
  body: AsyncIterable<Uint8Array>;
  parent: VolumeVersion | null;
}

/**
 * The version's stream, from `node` (a holder) at `addr`, as it arrives (at most `bytesMax`
 * bytes; never held whole; failed after btrfsTimeouts.dataMs without a byte): an increment on
 * `parent` when given and the holder still has it, else whole (the answer says which); resolves
 * once the holder has answered with its length and sha256, and
 * the body, iterated, throws if it is longer than announced, or at its end if it is shorter or its
 * digest differs. A consumer that stops early cancels the transfer.
 */
export async function fetchVolumeStream(peer: PeerHttp, addr: string, name: string, version: VolumeVersion, bytesMax: number, parent: VolumeVersion | null = null): Promise<VolumeStreamAnswer> {
  // An idle limit, not a total one: the stream flows at the pace of the target it is written to
  // (a slow uplink may take longer than dataMs for a large volume), but never stalls that long.
  const idle = idleAbort(btrfsTimeouts.dataMs);
  let res: Response;
  try {
    const query = parent === null ? '' : `?parent=${encodeURIComponent(versionName(parent))}`;
    res = await peer.fetch(addr, `/v1/volumes/${encodeURIComponent(name)}/versions/${encodeURIComponent(versionName(version))}/stream${query}`, { signal: idle.signal });
  } catch (err) {
    idle.stop();
    throw err;
  }
  if (!res.ok) {
    idle.stop();
    throw await refusalOf(res, addr);
  }
  let info: z.infer<typeof streamInfoSchema>;
  try {
    info = streamInfoSchema.parse(JSON.parse(Buffer.from(res.headers.get(streamHeader) ?? '', 'base64url').toString('utf8')));
  } catch {
    await res.body?.cancel();
    throw new ShoalError('node_unreachable', `node at ${addr} answered no valid ${streamHeader} header for volume ${name}'s stream`);
  }
  if (info.bytes > bytesMax) {
    idle.stop();
    await res.body?.cancel();
    throw new ShoalError('backup_failed', `volume ${name}'s stream of ${versionName(version)} is ${info.bytes} bytes, more than the ${bytesMax} a backup takes of it`, { volume: name });
  }
  // An answer without `parent` is whole (a holder of an older release refuses the query instead:
  // bad_request, and the runner asks it again for the whole stream).
  const got = info.parent === undefined || info.parent === null ? null : parseVersionName(info.parent);
  if (got !== null && (parent === null || !sameVersion(got, parent))) {
    idle.stop();
    await res.body?.cancel();
    throw new ShoalError('backup_failed', `node at ${addr} answered volume ${name}'s stream as an increment on ${info.parent ?? '?'}, which was not asked for`, { volume: name });
  }
  return { body: checkedStream(res.body ?? new ReadableStream<Uint8Array>({ start: (c) => c.close() }), info, `volume ${name}'s stream from ${addr}`, name, idle), parent: got };
}

/** An abort signal that fires once `ms` pass without a `touch()`. */
function idleAbort(ms: number): { signal: AbortSignal; touch: () => void; stop: () => void } {
  const ctl = new AbortController();
  const arm = (): NodeJS.Timeout => setTimeout(() => ctl.abort(new Error(`no bytes for ${ms / 1000} s`)), ms).unref();
  let timer = arm();
  return {
    signal: ctl.signal,
    touch: () => {
      clearTimeout(timer);
      timer = arm();
    },
    stop: () => clearTimeout(timer),
  };
}

async function* checkedStream(body: ReadableStream<Uint8Array>, info: z.infer<typeof streamInfoSchema>, what: string, volume: string, idle: { touch: () => void; stop: () => void }): AsyncGenerator<Uint8Array> {
  let got = 0;
  const hash = createHash('sha256');
  const reader = body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      idle.touch();
      got += value.length;
      if (got > info.bytes) throw new ShoalError('backup_failed', `${what} is longer than the ${info.bytes} bytes announced`, { volume });
      hash.update(value);
      yield value;
    }
  } finally {
    idle.stop();
    // Stopped early (a failed write, a longer stream): the transfer is cancelled, not left open.
    await reader.cancel().catch(() => undefined);
  }
  const digest = hash.digest('hex');
  if (got !== info.bytes || digest !== info.sha256) {
    throw new ShoalError('backup_failed', `${what} arrived damaged: ${got} bytes with sha256 ${digest}, announced ${info.bytes} with ${info.sha256}`, { volume });
  }
}

async function refusalOf(res: Response, addr: string): Promise<ShoalError> {
  const text = await res.text();
  let err: { code?: unknown; message?: unknown; details?: unknown } = {};
  try {
    err = JSON.parse(text) as typeof err;
  } catch {
    // not an error answer of shoal's: said as it came
  }
  const code: ErrorCode = typeof err.code === 'string' && Object.hasOwn(errorCatalog, err.code) ? err.code as ErrorCode : 'node_unreachable';
  return new ShoalError(code, typeof err.message === 'string' ? err.message : `node at ${addr} answered ${res.status}: ${text.slice(0, 200)}`, (err.details ?? undefined) as Record<string, unknown> | undefined);
}

/**
 * Sends an increment to the holder at `addr` (its API address), streamed, bounded to
 * `bytesPerSecond` when given; resolves once the holder received and checked it, and throws
 * the holder's refusal as its ShoalError otherwise.
 */
export async function sendIncrement(
  peer: Pick<PeerHttp, 'fetch'>, addr: string, offer: IncrementOffer, body: Readable, bytesPerSecond: number | undefined, clock?: ThrottleClock,
): Promise<void> {
  // pipeline, not pipe: a read error of the stream's file ends the request instead of stalling it until the timeout.
  const stream = bytesPerSecond === undefined ? body : throttled(body, bytesPerSecond, clock);
  const header = Buffer.from(JSON.stringify({ volume: offer.volume, version: offer.version, parent: offer.parent, sender: offer.sender, bytes: offer.bytes, sha256: offer.sha256 })).toString('base64url');
  const res = await peer.fetch(addr, `/v1/volumes/${encodeURIComponent(offer.volume)}/increments`, {
    method: 'PUT', headers: { 'content-type': 'application/octet-stream', [incrementHeader]: header },
    body: stream as unknown as RequestInit['body'], duplex: 'half', signal: AbortSignal.timeout(btrfsTimeouts.dataMs),
  } as RequestInit);
  if (res.ok) {
    await res.body?.cancel();
    return;
  }
  throw await refusalOf(res, addr);
}

/** The stream paced to bytesPerSecond (replicate.maxBandwidth); an error on either side destroys both. */
function throttled(body: Readable, bytesPerSecond: number, clock: ThrottleClock | undefined): Readable {
  const t = throttle(bytesPerSecond, clock);
  pipeline(body, t, () => undefined);
  return t;
}
