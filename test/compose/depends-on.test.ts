// depends_on in the placement pass (src/control/dependencies.ts): a pending task whose stack says
// its service depends on another is placed only once that one is running, healthy or completed,
// and waits meanwhile with the reason; a dependency that is gone holds nothing back.

import { describe, expect, it } from 'vitest';
import { placePending } from '../../src/control/placement.ts';
import type { Dependencies } from '../../src/control/dependencies.ts';
import type { TaskRecord } from '../../src/resources/records.ts';
import { StateBuilder } from '../control/state-builder.ts';

const svc = (name: string, extra = ''): string => `apiVersion: shoal/v1\nkind: Service\nname: ${name}\nimage: busybox:1.36\n${extra}`;

function world(): StateBuilder {
  return new StateBuilder().node('node1')
    .service(svc('app-db', 'healthCheck: {command: ["true"]}'))
    .service(svc('app-api'))
    .service(svc('app-init', 'restart: {condition: never}'))
    .task({ id: 'api1', service: 'app-api', slot: 1 });
}

const outcome = (d: ReturnType<typeof placePending>): [string, string, string | null][] => d.plan.changes.map((c) => {
  const t = (c.kind === 'put' ? c.doc : {}) as unknown as TaskRecord;
  return [t.id, t.observed, t.pendingReason];
});

describe('depends_on', () => {
  it('holds a task until its dependency runs healthy, then places it', () => {
    const deps: Dependencies = new Map([['app-api', { 'app-db': 'service_healthy' }]]);
    const b = world().placed('db1', 'app-db', 1, 'node1', 'running', {}, { health: 'starting' });
    expect(outcome(placePending(b.build(), 1, 5, deps))).toEqual([['api1', 'pending', 'waiting for app-db to be running and healthy (depends_on)']]);
    b.statuses.set('db1', { ...b.statuses.get('db1')!, value: { ...b.statuses.get('db1')!.value, health: 'healthy' } });
    expect(outcome(placePending(b.build(), 1, 5, deps))).toEqual([['api1', 'assigned', null]]);
  });

  it('service_started needs a running task; service_completed_successfully a task that exited 0', () => {
    const started: Dependencies = new Map([['app-api', { 'app-db': 'service_started' }]]);
    expect(outcome(placePending(world().build(), 1, 5, started))[0]?.[2]).toBe('waiting for app-db to be running (depends_on)');
    expect(outcome(placePending(world().placed('db1', 'app-db', 1, 'node1', 'running').build(), 1, 5, started))[0]?.[1]).toBe('assigned');
    const completed: Dependencies = new Map([['app-api', { 'app-init': 'service_completed_successfully' }]]);
    const failed = world().placed('i1', 'app-init', 1, 'node1', 'failed', { exitCode: 1 }, { exitCode: 1 });
    expect(outcome(placePending(failed.build(), 1, 5, completed))[0]?.[2]).toBe('waiting for app-init to be completed successfully (depends_on)');
    const done = world().placed('i1', 'app-init', 1, 'node1', 'shutdown', { exitCode: 0 }, { exitCode: 0 });
    expect(outcome(placePending(done.build(), 1, 5, completed))[0]?.[1]).toBe('assigned');
  });

  it('a dependency that is gone holds nothing back, and services without dependencies are placed as before', () => {
    const deps: Dependencies = new Map([['app-api', { 'app-gone': 'service_healthy' }]]);
    expect(outcome(placePending(world().build(), 1, 5, deps))[0]?.[1]).toBe('assigned');
    expect(outcome(placePending(world().build(), 1, 5))[0]?.[1]).toBe('assigned');
  });
});

describe('depends_on during a rolling update', () => {
  it('a task waits for a task of its dependency\'s current spec version, not one of the previous', () => {
    const deps: Dependencies = new Map([['app-api', { 'app-db': 'service_started' }]]);
    const b = world().placed('db1', 'app-db', 1, 'node1', 'running', { specVersion: 1 });
    const db = b.services.get('app-db');
    if (db !== undefined) db.value = { ...db.value, specVersion: 2 };
    expect(outcome(placePending(b.build(), 1, 5, deps))[0]?.[2]).toBe('waiting for app-db to be running (depends_on)');
    b.placed('db2', 'app-db', 1, 'node1', 'running', { specVersion: 2 });
    expect(outcome(placePending(b.build(), 1, 5, deps))[0]?.[1]).toBe('assigned');
  });
});
