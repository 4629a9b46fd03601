// The control state reader's cost per read with a large store (issue 45): 500 services of 10
// tasks, each task with a status, as the leak check's cluster holds them; a full read (a fresh
// reader) beside a read after one write (the reader's previous read reused).
//
//   npx tsx bench/state-read.ts [--services 500] [--replicas 10]

import { parseArgs } from 'node:util';
import { DocumentStore, encodeCommand, type JsonObject } from '../fsm/index.ts';
import { servicesCollection, tasksCollection } from '../src/resources/collections.ts';
import { ControlStateReader } from '../src/resources/state.ts';
import { serviceYaml, StateBuilder } from '../test/control/state-builder.ts';

const { values: v } = parseArgs({ options: { services: { type: 'string', default: '500' }, replicas: { type: 'string', default: '10' } } });
const services = Number(v.services);
const replicas = Number(v.replicas);
const b = new StateBuilder().node('node1').service(serviceYaml('web')).placed('t1', 'web', 1, 'node1', 'running', { observed: 'running' }).build();
const svc = b.services.get('web')?.value as unknown as Record<string, unknown>;
const task = b.tasks.get('t1')?.value as unknown as Record<string, unknown>;
const store = new DocumentStore();
let index = 0;
const put = (collection: string, id: string, doc: JsonObject): void => {
  store.apply({ index: ++index, term: 1, data: encodeCommand({ cmd: { op: 'put', collection, id, doc }, ts: 1, principal: 'shoal:bench' }), logTimeMs: 1, featureLevel: 6 });
};
for (let s = 0; s < services; s++) {
  const name = `s${s}`;
  put(servicesCollection, name, { ...svc, name, spec: { ...(svc.spec as object), name } } as JsonObject);
  for (let r = 1; r <= replicas; r++) put(tasksCollection, `${name}-${r}`, { ...task, id: `${name}-${r}`, service: name, slot: r } as JsonObject);
}
const time = (what: string, n: number, f: () => void): void => {
  const t0 = performance.now();
  for (let i = 0; i < n; i++) f();
  console.log(`${what}: ${((performance.now() - t0) / n).toFixed(3)} ms per read`);
};
const reader = new ControlStateReader(store);
reader.read();
console.log(`${services} services, ${services * replicas} tasks`);
time('full read (a fresh reader)', 20, () => new ControlStateReader(store).read());
time('full read (a reader whose records are cached, as before this change)', 20, () => { (reader as unknown as { last: undefined }).last = undefined; reader.read(); });
time('read at an unchanged revision', 1000, () => reader.read());
let n = 0;
time('read after one write of a task', 200, () => { put(tasksCollection, 's1-1', { ...task, id: 's1-1', service: 's1', slot: 1, message: `m${n++}` } as JsonObject); reader.read(); });
{
  const { tasksOf } = await import('../src/resources/state.ts');
  const st = reader.read();
  const t0 = performance.now();
  for (let s = 0; s < services; s++) tasksOf(st, `s${s}`);
  console.log(`tasksOf for every service at one revision: ${(performance.now() - t0).toFixed(1)} ms in all`);
}
