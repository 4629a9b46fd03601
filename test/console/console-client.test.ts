// The console's pure parts: every route its client calls is in the node's OpenAPI document with
// that method; the event-stream parser gives the same messages however the stream is chunked;
// failure tolerance counts healthy voters; a service's replicas say which tasks serve and which
// are on an unreachable node; the credential file reader takes a bearer token only.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ClusterView, MemberView } from '../../src/api/cluster-routes.ts';
import { openApiDocument } from '../../src/api/openapi.ts';
import { consoleApiRoutes } from '../../src/console/api.ts';
import { failureTolerance, replicasText } from '../../src/console/format.ts';
import type { ServiceStatus } from '../../src/api/control-views.ts';
import { SseParser } from '../../src/api/sse-parser.ts';
import { tokenOfCredentialFile } from '../../src/console/views/login.ts';

describe('the console\'s API client', () => {
  it('calls only routes the OpenAPI document lists, with the method it lists', () => {
    const paths = openApiDocument('test').paths as Record<string, Record<string, unknown>>;
    for (const [name, [method, path]] of Object.entries(consoleApiRoutes)) {
      expect(paths[path], `${name}: ${path} is not in the OpenAPI document`).toBeDefined();
      expect(Object.keys(paths[path] ?? {}), `${name}: ${path} does not take ${method}`).toContain(method.toLowerCase());
    }
  });
});

describe('SseParser', () => {
  const stream = 'event: sync\ndata: {}\n\n: keepalive\n\nid: 7\nevent: member.added\r\ndata: {"a":1}\r\ndata: {"b":2}\n\r\ndata: plain\r\n\r\n';
  // An id belongs to the message that carries it (api/sse-parser.ts).
  const expected = [
    { event: 'sync', data: '{}' },
    { event: 'member.added', data: '{"a":1}\n{"b":2}', id: '7' },
    { event: 'message', data: 'plain' },
  ];

  it('parses events, multi-line data, ids, comments and CRLF', () => {
    expect(new SseParser().push(stream)).toEqual(expected);
  });

  it('gives the same messages however the stream is cut into chunks', () => {
    fc.assert(fc.property(fc.array(fc.integer({ min: 0, max: stream.length }), { maxLength: 12 }), (cuts) => {
      const points = [...new Set(cuts)].sort((a, b) => a - b);
      const p = new SseParser();
      const out = [];
      let from = 0;
      for (const c of [...points, stream.length]) {
        out.push(...p.push(stream.slice(from, c)));
        from = c;
      }
      expect(out).toEqual(expected);
    }));
  });
});

describe('failureTolerance', () => {
  const member = (id: string, role: MemberView['role'], health: MemberView['health']): MemberView => ({
    id, name: id, peerAddress: '', apiAddress: '', role, matchIndex: 0, lag: 0, rttMs: 1, softwareVersion: null, featureLevelMax: null, health,
  });
  const view = (members: MemberView[]): ClusterView => ({
    clusterId: 'c', view: 'leader', node: 'a', softwareVersion: '', leader: 'a', term: 1, commitIndex: 0, appliedIndex: 0, lastIndex: 0, featureLevel: 3, members,
  });

  it('is one for three healthy voters, zero once one is unreachable, and ignores learners', () => {
    expect(failureTolerance(view([member('a', 'voter', 'healthy'), member('b', 'voter', 'healthy'), member('c', 'voter', 'healthy')])).tolerance).toBe(1);
    expect(failureTolerance(view([member('a', 'voter', 'healthy'), member('b', 'voter', 'unreachable'), member('c', 'voter', 'healthy')])).tolerance).toBe(0);
    expect(failureTolerance(view([member('a', 'voter', 'healthy'), member('l', 'learner', 'healthy')])).tolerance).toBe(0);
    expect(failureTolerance(view([...'abcde'].map((id) => member(id, 'voter', 'healthy')))).tolerance).toBe(2);
  });
});

describe('tokenOfCredentialFile', () => {
  it('takes a bearer token and refuses a certificate credential or bad JSON', () => {
    expect(tokenOfCredentialFile('{"token":"shoal_a.b","caPem":"x"}')).toBe('shoal_a.b');
    expect(tokenOfCredentialFile('{"certPem":"x","keyPem":"y"}')).toBeUndefined();
    expect(tokenOfCredentialFile('not json')).toBeUndefined();
  });
});

describe('a service\'s replicas in the Services view', () => {
  const status = (over: Partial<ServiceStatus>): ServiceStatus => ({
    desired: 3, running: 3, serving: 3, unreachable: 0, tasks: 3, pending: 0, pendingReasons: [], stopping: 0, updating: false, converged: true,
    disruption: { limit: 'maxUnavailable 1', maxUnavailable: 1, unavailable: [], allowed: 1, waiting: null, forced: [] }, ...over,
  });

  it('says how many run of those asked for, and which run on an unreachable node or serve during an update', () => {
    expect(replicasText(status({}))).toBe('3 / 3');
    expect(replicasText(status({ running: 2, serving: 2, unreachable: 1, converged: false }))).toBe('2 / 3 · 1 on an unreachable node');
    expect(replicasText(status({ desired: 5, running: 1, serving: 5, updating: true, converged: false }))).toBe('1 / 5 · 5 serving');
  });
});
