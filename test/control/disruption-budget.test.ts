// The disruption budget as pure functions (src/control/disruption-budget.ts): what a budget
// allows, which slots are unavailable and why, what one pass may take down, and what a drain or a
// drill of a node would cost. Tables over hand-built states.

import { describe, expect, it } from 'vitest';
import {
  assessBudget, budgetWaitText, DisruptionLedger, limitText, maxUnavailableOf, nodeLossVerdicts, unavailableText,
} from '../../src/control/disruption-budget.ts';
import type { ForcedDisruption } from '../../src/resources/records.ts';
import { serviceYaml, specOf, StateBuilder } from './state-builder.ts';

const web = (extra = '', replicas = 3): string => serviceYaml('web', extra).replace('replicas: 3', `replicas: ${replicas}`);

/** Three ready nodes and `web` (3 replicas unless said), each slot i running on node i (healthy). */
function serving(extra = '', replicas = 3): StateBuilder {
  const b = new StateBuilder().node('node1').node('node2').node('node3').service(web(extra, replicas));
  for (let s = 1; s <= replicas; s++) b.placed(`t${s}`, 'web', s, `node${((s - 1) % 3) + 1}`, 'running', { observed: 'running', startedAt: 1 });
  return b;
}

describe('the budget in slots', () => {
  it.each([
    // [the disruption field (YAML), the update's parallelism, slots, budget, as people read it]
    ['', 1, 3, 1, 'maxUnavailable 1'],
    ['', 2, 3, 2, "maxUnavailable 2 (the update's parallelism)"],
    ['disruption: {maxUnavailable: 2}', 1, 3, 2, 'maxUnavailable 2'],
    ['disruption: {maxUnavailable: 0}', 3, 3, 0, 'maxUnavailable 0'],
    ['disruption: {maxUnavailable: 5}', 1, 3, 5, 'maxUnavailable 5'],
    // A percentage of the wanted slots, rounded down...
    ['disruption: {maxUnavailable: 50%}', 1, 4, 2, 'maxUnavailable 50% (2 of 4 slots)'],
    ['disruption: {maxUnavailable: 50%}', 1, 3, 1, 'maxUnavailable 50% (1 of 3 slots)'],
    ['disruption: {maxUnavailable: 67%}', 1, 3, 2, 'maxUnavailable 67% (2 of 3 slots)'],
    ['disruption: {maxUnavailable: 66%}', 1, 3, 1, 'maxUnavailable 66% (1 of 3 slots)'],
    ['disruption: {maxUnavailable: 100%}', 1, 3, 3, 'maxUnavailable 100% (3 of 3 slots)'],
    // ...but at least one above 0%, so a small service can be updated or drained at all...
    ['disruption: {maxUnavailable: 25%}', 1, 3, 1, 'maxUnavailable 25% (1 of 3 slots)'],
    ['disruption: {maxUnavailable: 1%}', 1, 1, 1, 'maxUnavailable 1% (1 of 1 slot)'],
    // ...and none at 0%, or of no slot.
    ['disruption: {maxUnavailable: 0%}', 1, 10, 0, 'maxUnavailable 0% (0 of 10 slots)'],
    ['disruption: {maxUnavailable: 25%}', 1, 0, 0, 'maxUnavailable 25% (0 of 0 slots)'],
  ])('%s, parallelism %i, %i slots: %i (%s)', (field, parallelism, slots, budget, text) => {
    const spec = specOf(web(`update: {parallelism: ${parallelism}}\n${field}`));
    expect(maxUnavailableOf(spec, slots)).toBe(budget);
    expect(limitText(spec, slots)).toBe(text);
  });
});

describe('which slots are unavailable, and why', () => {
  it('counts none while every slot has a task running, healthy, on a ready node', () => {
    const a = assessBudget(serving().build(), serving().services.get('web')?.value as never);
    expect(a).toMatchObject({ maxUnavailable: 1, slots: 3, unavailable: [], allowed: 1 });
    expect([...a.serving.keys()]).toEqual(['1', '2', '3']);
  });

  it('counts a slot missing, pending, starting, stopping, failed, unhealthy, or on a suspect, down or lost node', () => {
    const b = new StateBuilder().node('node1').node('node2', { state: 'suspect' }).node('node3', { state: 'down' }).node('node4', { epoch: 2 })
      .service(web('healthCheck: {command: [check]}', 11));
    b.task({ id: 'p', service: 'web', slot: 2, pendingReason: '3 nodes without 2 GiB memory free' });
    b.task({ id: 'q', service: 'web', slot: 3 });
    b.placed('s', 'web', 4, 'node1', 'starting', { observed: 'starting' });
    b.placed('x', 'web', 5, 'node1', 'running', { desired: 'shutdown', observed: 'running' });
    b.placed('f', 'web', 6, 'node1', 'failed', { observed: 'failed' });
    b.placed('u', 'web', 7, 'node1', 'running', { observed: 'running' }, { health: 'unhealthy' });
    b.placed('h', 'web', 8, 'node2', 'running', { observed: 'running' }, { health: 'healthy' });
    b.placed('d', 'web', 9, 'node3', 'running', { observed: 'running' }, { health: 'healthy' });
    b.placed('o', 'web', 10, 'node4', 'running', { observed: 'running', nodeEpoch: 1 }, { health: 'healthy', nodeEpoch: 1 });
    b.placed('ok', 'web', 11, 'node1', 'running', { observed: 'running' }, { health: 'healthy' });
    const a = assessBudget(b.build(), b.services.get('web')?.value as never);
    expect(a.unavailable).toEqual([
      { slot: '1', why: 'no task' },
      { slot: '2', why: 'pending: no node fits' },
      { slot: '3', why: 'being placed' },
      { slot: '4', why: 'starting on n1' },
      { slot: '5', why: 'stopping on n1' },
      { slot: '6', why: 'failed on n1' },
      { slot: '7', why: 'unhealthy on n1' },
      { slot: '8', why: 'node n2 suspect' },
      { slot: '9', why: 'node n3 down' },
      { slot: '10', why: 'node n4 lost' },
    ]);
    expect(a.allowed).toBe(0);
    expect([...a.serving.keys()]).toEqual(['11']);
    expect(unavailableText(a)).toBe('10 slots unavailable (slot 1: no task; slot 2: pending: no node fits; slot 3: being placed; ...)');
  });

  it('counts a start-first pair as one slot, served while either serves', () => {
    const b = serving('update: {order: start-first}');
    b.placed('t1new', 'web', 1, 'node2', 'starting', { observed: 'starting', createdAt: 5 });
    const a = assessBudget(b.build(), b.services.get('web')?.value as never);
    expect(a.unavailable).toEqual([]);
    expect(a.serving.get('1')?.record.id).toBe('t1');
  });

  it('does not count the tasks of a global service on a draining or down node: the node has no slot', () => {
    const b = new StateBuilder().node('node1').node('node2', { availability: 'drain' }).node('node3', { state: 'down' })
      .service(serviceYaml('agent').replace('replicas: 3\n', 'mode: global\n'));
    b.placed('a1', 'agent', 'node1', 'node1', 'running', { observed: 'running' });
    b.placed('a2', 'agent', 'node2', 'node2', 'running', { observed: 'running' });
    b.placed('a3', 'agent', 'node3', 'node3', 'running', { observed: 'running' });
    const a = assessBudget(b.build(), b.services.get('agent')?.value as never);
    expect(a).toMatchObject({ slots: 1, unavailable: [], allowed: 1 });
    // A drain of node2 costs the global service nothing; a drill of node1 costs its slot.
    expect(nodeLossVerdicts(b.build(), 'node2', { cause: 'drain', nodeId: 'node2', nodeName: 'n2' })).toEqual([]);
    expect(nodeLossVerdicts(b.build(), 'node1', { cause: 'drill', nodeId: 'node1', nodeName: 'n1' })).toMatchObject([{ service: 'agent', slots: ['node1'], fits: true }]);
  });
});

describe('one pass of voluntary work (the ledger)', () => {
  const update = { cause: 'update', specVersion: 2 } as const;
  const drain = { cause: 'drain', nodeId: 'node1', nodeName: 'n1' } as const;
  const rebalance = { cause: 'rebalance', nodeId: 'node3', nodeName: 'n3' } as const;

  it('an update, a drain and a rebalance together take no more than the budget; the rest waits, named', () => {
    const b = serving('disruption: {maxUnavailable: 2}', 5);
    const ledger = new DisruptionLedger(assessBudget(b.build(), b.services.get('web')?.value as never), []);
    expect(ledger.take(1, update)).toBe(true);
    expect(ledger.take(1, drain)).toBe(true); // the same slot again: already down
    expect(ledger.take(4, drain)).toBe(true);
    expect(ledger.take(3, rebalance)).toBe(false);
    expect(ledger.take(2, update)).toBe(false);
    expect(ledger.paid).toEqual(['1', '4']);
    expect(ledger.waitReason()).toBe('waiting for the disruption budget of web (maxUnavailable 2): 0 slots unavailable; waiting: a rebalance off n3 (1 task), the rolling update (1 task)');
  });

  it('a node down leaves less: voluntary work waits while it is down, and a slot already unavailable costs nothing', () => {
    const b = serving();
    const n2 = b.nodes.get('node2');
    if (n2 !== undefined) n2.value = { ...n2.value, state: 'down' };
    const a = assessBudget(b.build(), b.services.get('web')?.value as never);
    expect(a).toMatchObject({ unavailable: [{ slot: '2', why: 'node n2 down' }], allowed: 0 });
    const ledger = new DisruptionLedger(a, []);
    expect(ledger.take(3, update)).toBe(false);
    expect(ledger.take(2, update)).toBe(true);
    expect(ledger.free).toEqual(['2']);
    // The wording of the issue.
    expect(ledger.waitReason()).toBe('waiting for the disruption budget of web (maxUnavailable 1): 1 slot unavailable (slot 2: node n2 down); waiting: the rolling update (1 task)');
  });

  it('a forced action goes past the budget (for its cause and target only), and uses up what is left', () => {
    const forced: ForcedDisruption[] = [{ cause: 'drain', nodeId: 'node1', specVersion: null, at: 1, by: 'alice', message: 'm' }];
    const b = serving('disruption: {maxUnavailable: 1}');
    const ledger = new DisruptionLedger(assessBudget(b.build(), b.services.get('web')?.value as never), forced);
    expect(ledger.take(1, drain)).toBe(true);
    expect(ledger.take(2, drain)).toBe(true);
    expect(ledger.forced.map((f) => f.slot)).toEqual(['1', '2']);
    expect(ledger.take(3, { cause: 'drain', nodeId: 'node3', nodeName: 'n3' })).toBe(false);
    expect(ledger.take(3, update)).toBe(false);
  });

  it('with maxUnavailable 0, nothing voluntary goes', () => {
    const b = serving('disruption: {maxUnavailable: 0}');
    const ledger = new DisruptionLedger(assessBudget(b.build(), b.services.get('web')?.value as never), []);
    expect(ledger.take(1, update)).toBe(false);
  });
});

describe('what taking a node away costs (drain, drill)', () => {
  it('names each service whose budget does not allow it, and lets a start-first drain through', () => {
    const b = serving('', 6);
    b.service(serviceYaml('api', 'update: {order: start-first}'));
    for (const s of [1, 2]) b.placed(`api${s}`, 'api', s, 'node1', 'running', { observed: 'running' });
    b.placed('api3', 'api', 3, 'node2', 'running', { observed: 'running' });
    const verdicts = nodeLossVerdicts(b.build(), 'node1', { cause: 'drain', nodeId: 'node1', nodeName: 'n1' });
    expect(verdicts.map((v) => [v.service, v.slots, v.fits])).toEqual([['api', ['1', '2'], true], ['web', ['1', '4'], false]]);
    expect(verdicts[1]?.reason).toBe('waiting for the disruption budget of web (maxUnavailable 1): 0 slots unavailable; waiting: the drain of n1 (2 tasks)');
    const drill = nodeLossVerdicts(b.build(), 'node1', { cause: 'drill', nodeId: 'node1', nodeName: 'n1' });
    expect(drill.map((v) => [v.service, v.fits])).toEqual([['api', false], ['web', false]]);
  });

  it('budgetWaitText names the budget and the service', () => {
    const b = serving();
    const a = assessBudget(b.build(), b.services.get('web')?.value as never);
    expect(budgetWaitText(a, [])).toBe('waiting for the disruption budget of web (maxUnavailable 1): 0 slots unavailable');
  });
});
