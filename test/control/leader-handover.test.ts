// The leader's loops acting on node health (src/control/leader-run.ts): with a real store and
// fake ports, a node that only this leader cannot hear (another member's committed peer view says
// it hears it) stays suspect and leadership is handed to a voter that hears every member, once per
// cooldown however many passes run; one nobody hears is declared down.

import { describe, expect, it } from 'vitest';
import { DocumentStore, encodeCommand } from '../../fsm/index.ts';
import type { CommandResult, JsonObject } from '../../fsm/types.ts';
import { LeaderRun } from '../../src/control/leader-run.ts';
import { nodeHealthDefaults, transferCooldownMs, type NodeContact } from '../../src/control/node-health.ts';
import { ManualClock } from '../../src/executor/manual-clock.ts';
import type { Timer } from '../../src/executor/clock.ts';
import { controlFeatureLevel, nodesCollection } from '../../src/resources/collections.ts';
import { peerViewsCollection } from '../../src/resources/peer-views.ts';
import type { NodeRecord } from '../../src/resources/records.ts';

function setup(contacts: Record<string, NodeContact>, views: Record<string, string[]>) {
  const clock = new ManualClock(0);
  const store = new DocumentStore();
  let index = 0;
  const apply = (cmd: Parameters<typeof encodeCommand>[0]['cmd'], fence?: number): CommandResult =>
    store.apply({ index: ++index, term: 1, data: encodeCommand({ cmd, ts: clock.now(), principal: 'shoal:test', ...(fence !== undefined ? { fence: { term: fence } } : {}) }), logTimeMs: clock.now(), featureLevel: controlFeatureLevel });
  for (const id of ['n1', 'n2', 'n3']) {
    const rec: NodeRecord = {
      id, name: id, addresses: { api: `${id}:1`, peer: `${id}:2` }, capacity: { cpuMillis: 1000, memoryBytes: 1 << 30 }, labels: {},
      availability: 'active', state: 'ready', epoch: 0, runtime: { status: 'up', error: null }, softwareVersion: 't', mesh: null,
    };
    const { mesh: _mesh, ...doc } = rec;
    apply({ op: 'put', collection: nodesCollection, id, doc: doc as unknown as JsonObject });
  }
  for (const [id, unheard] of Object.entries(views)) apply({ op: 'put', collection: peerViewsCollection, id, doc: { nodeId: id, unheard, unheardAfterMs: 1_500 } });
  const transfers: { to: string; atMs: number }[] = [];
  const run = new LeaderRun({
    store, clock: { now: () => clock.now(), setTimeout: (fn, ms) => clock.setTimer(ms, fn), clearTimeout: (h) => (h as Timer).cancel() },
    logTimeNow: () => clock.now(), self: 'n1', members: () => new Set(['n1', 'n2', 'n3']), health: nodeHealthDefaults,
    silentForMs: () => undefined,
    peerContact: (id) => ({ ...(contacts[id] ?? { heardAgoMs: 0, watchingForMs: 600_000, link: 'connected', goodbye: false, refused: false }) }),
    transferLeadership: (to) => { transfers.push({ to, atMs: clock.now() }); },
    lastTransferAgoMs: () => { const last = transfers.at(-1); return last === undefined ? undefined : clock.now() - last.atMs; },
    propose: async (data, term) => {
      await Promise.resolve();
      return { index: index + 1, result: store.apply({ index: ++index, term, data, logTimeMs: clock.now(), featureLevel: controlFeatureLevel }) };
    },
    settleOwnProposals: async () => {},
    newTaskId: () => 't1',
    log: { debug: () => {}, warn: () => {} },
  }, 1);
  const state = (id: string): string => (store.get(nodesCollection, id)?.doc as { state: string }).state;
  const advance = async (ms: number): Promise<void> => {
    for (let t = 0; t < ms; t += 100) {
      clock.advance(100);
      for (let i = 0; i < 10; i++) await Promise.resolve();
    }
  };
  return { run, transfers, state, advance };
}

const silent: NodeContact = { heardAgoMs: 60_000, watchingForMs: 600_000, link: 'silent', goodbye: false, refused: false };

describe('the leader\'s loops on node health', () => {
  it('a node only the leader cannot hear stays suspect; leadership goes to a voter that hears everyone, once per cooldown', async () => {
    const t = setup({ n2: silent }, { n3: [] });
    t.run.start();
    await t.advance(3_000);
    expect(t.state('n2')).toBe('suspect');
    expect(t.transfers.map((x) => x.to)).toEqual(['n3']);
    // The hand-over has not happened (a fake): passes go on, but no second one within the cooldown.
    await t.advance(transferCooldownMs - 5_000);
    expect(t.transfers).toHaveLength(1);
    expect(t.state('n2')).toBe('suspect');
    await t.advance(10_000);
    expect(t.transfers).toHaveLength(2);
    t.run.stop();
    await t.run.done;
  });

  it('a node no member hears is declared down, and nobody is handed leadership', async () => {
    const t = setup({ n2: silent }, { n3: ['n2'] });
    t.run.start();
    await t.advance(3_000);
    expect(t.state('n2')).toBe('down');
    expect(t.transfers).toEqual([]);
    t.run.stop();
    await t.run.done;
  });
});
