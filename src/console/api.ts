// The console's API client: every call the views make goes through `call`, and every route it
// uses is named in `consoleApiRoutes`, which test/console/api-routes.test.ts checks against the
// node's OpenAPI document (a renamed or removed route fails that test, not an operator's click).
// The credential is a bearer token held by this tab (sessionStorage: it survives a reload, not
// the tab); the page sends it as a header, never as a cookie, so another site cannot make the
// browser act with it (no CSRF).

import type { CollectionsAnswer, HistoryAnswer } from '../api/browse-routes.ts';
import type { ClusterView } from '../api/cluster-routes.ts';
import type { NodeView, ServiceView, TaskItem } from '../api/control-views.ts';
import type { DrillReport } from '../node/drill/drill-report.ts';
import type { JobRunView, JobView } from '../api/jobs-routes.ts';
import type { StackView } from '../api/stack-routes.ts';
import { SseParser, type SseMessage } from '../api/sse-parser.ts';
import type { HealthSummary } from '../api/health-summary.ts';
import type { NodeSeriesAnswer, ServiceSeriesAnswer } from '../api/series-routes.ts';

/** Method and OpenAPI path of every route the console calls. */
export const consoleApiRoutes = {
  cluster: ['GET', '/v1/cluster'],
  transferLeader: ['POST', '/v1/cluster/leader'],
  nodes: ['GET', '/v1/nodes'],
  availability: ['POST', '/v1/nodes/{ref}/availability'],
  services: ['GET', '/v1/services'],
  service: ['GET', '/v1/services/{name}'],
  taskLogs: ['GET', '/v1/tasks/{id}/logs'],
  events: ['GET', '/v1/events'],
  collections: ['GET', '/v1/collections'],
  list: ['GET', '/v1/docs/{collection}'],
  doc: ['GET', '/v1/docs/{collection}/{id}'],
  history: ['GET', '/v1/docs/{collection}/{id}/history'],
  drills: ['GET', '/v1/drills'],
  summary: ['GET', '/v1/summary'],
  nodeSeries: ['GET', '/v1/nodes/{ref}/series'],
  serviceSeries: ['GET', '/v1/services/{name}/series'],
  jobs: ['GET', '/v1/jobs'],
  job: ['GET', '/v1/jobs/{name}'],
  stacks: ['GET', '/v1/stacks'],
} as const satisfies Record<string, readonly ['GET' | 'POST', string]>;

export type RouteName = keyof typeof consoleApiRoutes;

/** An error answer from the catalog (docs/errors.md), or a network failure as code `unreachable`. */
export class ApiError extends Error {
  constructor(readonly status: number, readonly code: string, message: string) {
    super(message);
  }
}

const tokenKey = 'shoal.token';

export function credential(): string | null {
  return sessionStorage.getItem(tokenKey);
}

export function setCredential(token: string | null): void {
  if (token === null) sessionStorage.removeItem(tokenKey);
  else sessionStorage.setItem(tokenKey, token);
}

function urlOf(route: RouteName, params: Record<string, string> = {}, query: Record<string, string> = {}): string {
  const path = consoleApiRoutes[route][1].replace(/\{(\w+)\}/g, (_, k: string) => encodeURIComponent(params[k] ?? ''));
  const q = new URLSearchParams(query).toString();
  return q === '' ? path : `${path}?${q}`;
}

function headers(json: boolean): Record<string, string> {
  const token = credential();
  return { ...(token !== null ? { authorization: `Bearer ${token}` } : {}), ...(json ? { 'content-type': 'application/json' } : {}) };
}

/**
 * Dispatched on window when the API refuses the credential (or its absence): the page asks for
 * one. Its detail is the API's reason when the tab held a token (expired, revoked), else null.
 */
export const unauthenticatedEvent = 'shoal-unauthenticated';

async function failure(res: Response): Promise<ApiError> {
  const body = (await res.json().catch(() => ({}))) as { code?: string; message?: string };
  if (res.status === 401) window.dispatchEvent(new CustomEvent<string | null>(unauthenticatedEvent, { detail: credential() !== null ? body.message ?? null : null }));
  return new ApiError(res.status, body.code ?? 'http_error', body.message ?? `${res.status} ${res.statusText}`);
}

export interface CallOptions {
  params?: Record<string, string>;
  query?: Record<string, string>;
  body?: unknown;
  signal?: AbortSignal;
}

export async function call<T>(route: RouteName, opts: CallOptions = {}): Promise<T> {
  const [method] = consoleApiRoutes[route];
  let res: Response;
  try {
    res = await fetch(urlOf(route, opts.params, opts.query), {
      method, headers: headers(opts.body !== undefined), ...(opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}),
      ...(opts.signal !== undefined ? { signal: opts.signal } : {}),
    });
  } catch (err) {
    throw new ApiError(0, 'unreachable', `this node did not answer: ${(err as Error).message}`);
  }
  if (!res.ok) throw await failure(res);
  return (route === 'taskLogs' ? await res.text() : await res.json()) as T;
}

/** Reads a server-sent event stream until `signal` aborts; each message goes to `onMessage`. */
export async function stream(route: 'events', query: Record<string, string>, onMessage: (m: SseMessage) => void, signal: AbortSignal): Promise<void> {
  const res = await fetch(urlOf(route, {}, query), { headers: headers(false), signal });
  if (!res.ok || res.body === null) throw await failure(res);
  const parser = new SseParser();
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    for (const m of parser.push(value)) onMessage(m);
  }
}

export const api = {
  cluster: (signal?: AbortSignal) => call<ClusterView>('cluster', signal !== undefined ? { signal } : {}),
  transferLeader: (to: string) => call<{ leader: string; term: number; name: string }>('transferLeader', { body: { to } }),
  nodes: () => call<{ items: NodeView[]; rev: number }>('nodes', { query: { consistency: 'stale' } }),
  availability: (ref: string, availability: 'active' | 'pause' | 'drain') => call<unknown>('availability', { params: { ref }, body: { availability } }),
  services: () => call<{ items: ServiceView[]; rev: number }>('services', { query: { consistency: 'stale' } }),
  service: (name: string) => call<{ service: ServiceView; tasks: TaskItem[]; rev: number }>('service', { params: { name }, query: { consistency: 'stale' } }),
  taskLogs: (id: string) => call<string>('taskLogs', { params: { id }, query: { tail: '200' } }),
  collections: () => call<CollectionsAnswer>('collections'),
  list: (collection: string, after?: string) => call<{ items: Array<{ id: string; rev: number; doc: unknown }>; next: string | null }>('list', { params: { collection }, query: { limit: '100', ...(after !== undefined ? { after } : {}) } }),
  doc: (collection: string, id: string) => call<{ id: string; rev: number; createRev: number; doc: unknown }>('doc', { params: { collection, id } }),
  history: (collection: string, id: string) => call<HistoryAnswer>('history', { params: { collection, id } }),
  drills: () => call<{ items: DrillReport[]; rev: number }>('drills', { query: { limit: '20' } }),
  summary: () => call<HealthSummary & { rev: number }>('summary'),
  nodeSeries: (ref: string, windowS: number) => call<NodeSeriesAnswer>('nodeSeries', { params: { ref }, query: { window: String(windowS) } }),
  serviceSeries: (name: string, windowS: number) => call<ServiceSeriesAnswer>('serviceSeries', { params: { name }, query: { window: String(windowS) } }),
  jobs: () => call<{ items: JobView[]; rev: number }>('jobs', { query: { consistency: 'stale' } }),
  job: (name: string) => call<{ job: JobView; runs: JobRunView[]; rev: number }>('job', { params: { name }, query: { consistency: 'stale' } }),
  stacks: () => call<{ items: StackView[]; rev: number }>('stacks', { query: { consistency: 'stale' } }),
};
