// The control plane's changes as cluster events (src/node/events/control-events.ts), on a document store
// fed log entries: what each change records, and that only the leader records.

import { describe, expect, it } from 'vitest';
import type { JsonObject } from '../../fsm/index.ts';
import { nodesCollection, servicesCollection, taskStatusCollection, tasksCollection } from '../../src/resources/collections.ts';
import { watchControlEvents } from '../../src/node/events/control-events.ts';
import { Feeder } from '../fsm/harness.ts';

function setup(): { f: Feeder; leader: { isLeader: boolean }; recorded: () => Promise<string[]>; stop: () => void } {
  const f = new Feeder();
  const leader = { isLeader: true };
  const seen: string[] = [];
  const stop = watchControlEvents(leader, f.store, { recordEvent: (type: string, subject: string, details: JsonObject = {}) => { seen.push(`${type} ${subject} ${JSON.stringify(details)}`); } });
  // Events are recorded after the apply's callback (setImmediate).
  const recorded = async (): Promise<string[]> => {
    await new Promise((r) => setImmediate(r));
    return seen.splice(0);
  };
  return { f, leader, recorded, stop };
}

const node = (state: string, availability: string): Record<string, unknown> => ({ id: 'n1', name: 'pi-1', state, availability, epoch: 0 });
const service = (specVersion: number, state: string): Record<string, unknown> => ({ name: 'web', specVersion, updateStatus: { state } });
const status = (state: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({ taskId: 't1', nodeId: 'n1', nodeEpoch: 0, state, exitCode: null, message: null, ...extra });

describe('the control plane\'s events', () => {
  it('records nodes registered, changing state and availability', async () => {
    const { f, recorded } = setup();
    f.put(nodesCollection, 'n1', node('ready', 'active'));
    f.put(nodesCollection, 'n1', node('suspect', 'active'));
    f.put(nodesCollection, 'n1', node('down', 'drain'));
    f.put(nodesCollection, 'n1', node('ready', 'drain'));
    f.put(nodesCollection, 'n1', node('ready', 'pause'));
    f.put(nodesCollection, 'n1', node('ready', 'active'));
    f.put(nodesCollection, 'n1', { ...node('ready', 'active'), labels: { zone: 'a' } });
    expect(await recorded()).toEqual([
      'node.registered n1 {"name":"pi-1","state":"ready","availability":"active"}',
      'node.suspect n1 {"name":"pi-1","from":"ready"}',
      'node.down n1 {"name":"pi-1","from":"suspect"}',
      'node.drained n1 {"name":"pi-1","from":"active"}',
      'node.ready n1 {"name":"pi-1","from":"down"}',
      'node.paused n1 {"name":"pi-1","from":"drain"}',
      'node.activated n1 {"name":"pi-1","from":"pause"}',
    ]);
  });

  it('records services created, updated, rolled out and removed', async () => {
    const { f, recorded } = setup();
    f.put(servicesCollection, 'web', service(1, 'none'));
    f.put(servicesCollection, 'web', service(2, 'updating'));
    f.put(servicesCollection, 'web', service(2, 'completed'));
    f.del(servicesCollection, 'web');
    expect(await recorded()).toEqual([
      'service.created web {"specVersion":1}',
      'service.updated web {"specVersion":2,"from":1}',
      'service.rollout web {"state":"updating","from":"none","specVersion":2}',
      'service.rollout web {"state":"completed","from":"updating","specVersion":2}',
      'service.removed web {"specVersion":2}',
    ]);
  });

  it('records each disruption forced past a service\'s budget once', async () => {
    const { f, recorded } = setup();
    const forced = { cause: 'drain', nodeId: 'n2', specVersion: null, at: 5, by: 'alice', message: 'forced past the disruption budget (maxUnavailable 1) by alice: 1 slot unavailable (slot 3: node n3 down)' };
    f.put(servicesCollection, 'web', service(1, 'none'));
    f.put(servicesCollection, 'web', { ...service(1, 'none'), forcedDisruptions: [forced] });
    f.put(servicesCollection, 'web', { ...service(1, 'none'), forcedDisruptions: [forced] });
    f.put(servicesCollection, 'web', service(1, 'none'));
    expect(await recorded()).toEqual([
      'service.created web {"specVersion":1}',
      `service.disruption-forced web {"cause":"drain","node":"n2","specVersion":null,"by":"alice","message":"${forced.message}"}`,
    ]);
  });

  it('records a task reported failed once, with its service, node, exit code and message cut short', async () => {
    const { f, recorded } = setup();
    f.put(tasksCollection, 't1', { service: 'web', slot: 1 });
    f.put(taskStatusCollection, 't1', status('running'));
    f.put(taskStatusCollection, 't1', status('failed', { exitCode: 3, message: `exited: ${'x'.repeat(1000)}` }));
    f.put(taskStatusCollection, 't1', status('failed', { exitCode: 3, message: 'the same failure, reported again' }));
    const got = await recorded();
    expect(got).toHaveLength(1);
    expect(got[0]).toMatch(/^task\.failed t1 \{"service":"web","node":"n1","exitCode":3,"message":"exited: x+"\}$/);
    expect((got[0] as string).length).toBeLessThan(400);
  });

  it('records nothing on a follower, nor for a record without the fields, and stops when told', async () => {
    const { f, leader, recorded, stop } = setup();
    leader.isLeader = false;
    f.put(servicesCollection, 'web', service(1, 'none'));
    f.put(nodesCollection, 'n2', { name: 'no state' });
    expect(await recorded()).toEqual([]);
    leader.isLeader = true;
    f.put(servicesCollection, 'web', service(2, 'none'));
    expect(await recorded()).toEqual(['service.updated web {"specVersion":2,"from":1}']);
    stop();
    f.put(servicesCollection, 'web', service(3, 'none'));
    expect(await recorded()).toEqual([]);
  });
});
