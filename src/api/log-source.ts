// Where a task's log lines come from, for the logs routes (logs-routes.ts): this node's runtime
// when the task runs here, else the client API of the node that runs it (its address in its
// NodeRecord), proxied as a stream. A proxied request is the same GET with format=json, marked
// with the forwarded-by header (as write-path.ts marks forwarded writes): the node that gets it
// reads its own runtime and never forwards again, whatever its store says.
//
// Every failure before the first line is a catalogued ShoalError, so the route can still answer
// with an error status: not_found (no such task; its container is gone), task_not_started (it
// never had a container), node_unreachable (its node does not answer, or its runtime is down).
//
// Logs bypass the Raft log (design.md, Fencing): which node runs a task is read from this node's
// applied store, without a read barrier, so logs can be read while the cluster has no leader,
// which is when they are wanted most.

import { z } from 'zod';
import type { NodeRecord } from '../resources/records.ts';
import type { ControlState } from '../resources/state.ts';
import { errorCatalog, ShoalError, type ErrorCode } from '../errors.ts';
import { labelKeys, ownerLabels } from '../executor/labels.ts';
import { RuntimeError, type ContainerInfo, type LogLine, type LogOptions, type LogReader } from '../executor/runtime.ts';
import type { ApiContext } from './context.ts';
import type { TaskItem } from './control-views.ts';
import { forwardedHeader } from './write-path.ts';

/** How long the node that runs a task has to answer a proxied log request with its headers. */
export const logProxyConnectTimeoutMs = 10_000;
/** One NDJSON line from another node: a 64 KiB log line, JSON-escaped, fits well within it. */
const proxiedLineBytesMax = 1 << 20;
/** An error answer from another node: a catalogued error body is far smaller. */
const errorBodyBytesMax = 64 * 1024;

/** A line as the logs routes send it with format=json (and as a proxied node's answer is read). */
export const logLineSchema = z.object({ at: z.number(), stream: z.enum(['stdout', 'stderr']), text: z.string() }).loose();
const lineErrorSchema = z.object({ error: z.object({ code: z.string(), message: z.string() }).loose() }).loose();

/** Opens the log of a task this node's store knows. */
export function openTaskItemLog(ctx: ApiContext, state: ControlState, item: TaskItem, opts: LogOptions): Promise<LogReader> {
  refuseNeverStarted(item);
  const nodeId = item.nodeId as string;
  if (nodeId === ctx.node.id) return openLocalTaskLog(ctx, item.id, opts);
  const node = state.nodes.get(nodeId)?.value;
  if (node === undefined) throw new ShoalError('node_unreachable', `task ${item.id} is on node ${nodeId}, which is no longer in the cluster`, { task: item.id, node: nodeId });
  return openRemoteTaskLog(ctx, node, item.id, opts);
}

/** A task that never had a container has no log to read: say why instead of a bare not_found. */
function refuseNeverStarted(item: TaskItem): void {
  const details = { task: item.id, observed: item.observed, node: item.nodeId };
  if (item.nodeId === null) {
    throw new ShoalError('task_not_started', `task ${item.id} is pending (${item.record.pendingReason ?? 'waiting for a node'}): it has no logs yet`, details);
  }
  const containerId = item.record.containerId ?? item.report?.containerId ?? null;
  if (containerId !== null || item.observed === 'running') return;
  const where = item.nodeName ?? item.nodeId;
  if (item.observed === 'assigned' || item.observed === 'starting') {
    throw new ShoalError('task_not_started', `task ${item.id} is ${item.observed} on node ${where} and has no container yet: it has no logs; try again once it runs`, details);
  }
  const why = item.record.message ?? item.report?.message ?? null;
  throw new ShoalError('task_not_started', `task ${item.id} never ran on node ${where} (it is ${item.observed}${why !== null ? `: ${why}` : ''}): it has no logs`, details);
}

/** The log of a task's container on this node, found by its labels (the store is not asked). */
export async function openLocalTaskLog(ctx: ApiContext, taskId: string, opts: LogOptions): Promise<LogReader> {
  const runtime = ctx.runtime;
  const nodeId = ctx.node.id;
  if (runtime === undefined || runtime === null) {
    throw new ShoalError('not_found', `node ${nodeId} runs no workloads (runtime: none): it has no logs of task ${taskId}`, { task: taskId, node: nodeId });
  }
  const labels = { ...ownerLabels({ clusterId: ctx.clusterId, nodeId }), [labelKeys.task]: taskId };
  const container = newest(await runtimeCall(nodeId, () => runtime.list(labels)));
  if (container === undefined) {
    throw new ShoalError('not_found', `task ${taskId} has no container on node ${nodeId} any more: it was removed (the task finished or moved); its logs went with it`, { task: taskId, node: nodeId });
  }
  return runtimeCall(nodeId, () => runtime.logs(container.id, opts));
}

/** A running container first (one task has one, but a stray twice-created one may linger), then the latest started. */
function newest(containers: ContainerInfo[]): ContainerInfo | undefined {
  return [...containers].sort((a, b) => Number(b.state === 'running') - Number(a.state === 'running') || (b.startedAt ?? -1) - (a.startedAt ?? -1))[0];
}

async function runtimeCall<T>(nodeId: string, f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (err) {
    if (!(err instanceof RuntimeError)) throw err;
    if (err.kind === 'not_found') throw new ShoalError('not_found', `the container is gone from node ${nodeId}: ${err.message}`, { node: nodeId });
    if (err.kind === 'unavailable' || err.kind === 'timeout') {
      throw new ShoalError('node_unreachable', `the container runtime of node ${nodeId} is unavailable: ${err.message}`, { node: nodeId, reason: 'runtime_unavailable' });
    }
    throw new ShoalError('internal', `the container runtime of node ${nodeId} refused to read the log: ${err.message}`, { node: nodeId });
  }
}

/** The same request, to the node that runs the task; its answer read as NDJSON lines. */
export async function openRemoteTaskLog(ctx: ApiContext, node: NodeRecord, taskId: string, opts: LogOptions): Promise<LogReader> {
  const query = new URLSearchParams({ format: 'json', follow: String(opts.follow) });
  if (opts.tailLines !== null) query.set('tail', String(opts.tailLines));
  if (opts.sinceMs !== null) query.set('since', String(opts.sinceMs));
  const address = node.addresses.api;
  const who = `node ${node.name} (${node.id}) at ${address}`;
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(new Error(`no answer within ${logProxyConnectTimeoutMs} ms`)), logProxyConnectTimeoutMs);
  let res: Response;
  try {
    res = await ctx.peer.fetch(address, `/v1/tasks/${encodeURIComponent(taskId)}/logs?${query.toString()}`, {
      // The node asks as itself (the caller's role was checked here; a node may read any log).
      headers: { [forwardedHeader]: ctx.node.id, accept: 'application/x-ndjson' }, signal: ac.signal,
    });
  } catch (err) {
    throw new ShoalError('node_unreachable', `task ${taskId} runs on ${who}, which did not answer: ${reasonOf(err, ac.signal)}`, { task: taskId, node: node.id, address });
  } finally {
    clearTimeout(timer);
  }
  if (!res.ok || res.body === null) {
    // The body is read before the abort: aborting first would cancel it, and a typed error
    // (not_found, task_not_started) would come out as node_unreachable.
    const e = await remoteError(res, who, node.id);
    ac.abort();
    throw e;
  }
  let closed = false;
  const close = (): void => {
    closed = true;
    ac.abort();
  };
  const lines = readNdjson(res.body, who, node.id, () => closed);
  return { [Symbol.asyncIterator]: () => lines, close };
}

function reasonOf(err: unknown, signal: AbortSignal): string {
  if (signal.aborted && signal.reason instanceof Error) return signal.reason.message;
  const cause = (err as { cause?: { code?: unknown; message?: unknown } } | null)?.cause;
  if (typeof cause?.code === 'string') return cause.code;
  return err instanceof Error ? err.message : String(err);
}

/** The first `bytesMax` bytes of an answer's body ('' when it cannot be read): an error is read without trusting its size. */
async function readTextMax(res: Response, bytesMax: number): Promise<string> {
  if (res.body === null) return '';
  const chunks: Uint8Array[] = [];
  let length = 0;
  try {
    for await (const chunk of res.body) {
      chunks.push(chunk);
      length += chunk.length;
      if (length >= bytesMax) break;
    }
  } catch {
    // A body cut off: what arrived is all there is.
  }
  return Buffer.concat(chunks).subarray(0, bytesMax).toString('utf8');
}

/** The other node's catalogued error, passed on (with which node said it); anything else is node_unreachable. */
async function remoteError(res: Response, who: string, nodeId: string): Promise<ShoalError> {
  const text = await readTextMax(res, errorBodyBytesMax);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  const e = z.object({ code: z.string(), message: z.string(), details: z.record(z.string(), z.unknown()).optional() }).loose().safeParse(body);
  if (e.success && Object.hasOwn(errorCatalog, e.data.code)) {
    return new ShoalError(e.data.code as ErrorCode, `${who}: ${e.data.message}`, { ...e.data.details, node: nodeId });
  }
  return new ShoalError('node_unreachable', `${who} answered HTTP ${res.status}${text !== '' ? `: ${text.slice(0, 200)}` : ''}`, { node: nodeId });
}

async function* readNdjson(body: ReadableStream<Uint8Array>, who: string, nodeId: string, isClosed: () => boolean): AsyncGenerator<LogLine, void, undefined> {
  const decoder = new TextDecoder();
  let buf = '';
  try {
    for await (const chunk of body) {
      buf += decoder.decode(chunk, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.trim() !== '') yield parseLine(line, who, nodeId);
      }
      if (buf.length > proxiedLineBytesMax) throw new ShoalError('node_unreachable', `${who} sent a log line longer than ${proxiedLineBytesMax} bytes`, { node: nodeId });
    }
  } catch (err) {
    if (isClosed()) return;
    if (err instanceof ShoalError) throw err;
    throw new ShoalError('node_unreachable', `the log stream from ${who} broke: ${err instanceof Error ? err.message : String(err)}`, { node: nodeId });
  }
}

function parseLine(text: string, who: string, nodeId: string): LogLine {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    value = undefined;
  }
  const line = logLineSchema.safeParse(value);
  if (line.success) return { at: line.data.at, stream: line.data.stream, text: line.data.text };
  const failed = lineErrorSchema.safeParse(value);
  if (failed.success && Object.hasOwn(errorCatalog, failed.data.error.code)) {
    throw new ShoalError(failed.data.error.code as ErrorCode, `${who}: ${failed.data.error.message}`, { node: nodeId });
  }
  throw new ShoalError('node_unreachable', `${who} sent something that is not a log line: ${text.slice(0, 200)}`, { node: nodeId });
}
