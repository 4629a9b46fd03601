// A service's status as the API shows it (control-views.ts), over hand-built control states: a
// task on a node that is suspect or down is not counted running but unreachable; during an update
// the tasks of the new spec (running) and every task that serves (serving) are counted apart.

import { describe, expect, it } from 'vitest';
import { serviceStatus } from '../../src/api/control-views.ts';
import { StateBuilder, serviceYaml } from '../control/state-builder.ts';

const running = { observed: 'running' as const, startedAt: 5 };

function web(n3: 'ready' | 'suspect' | 'down'): StateBuilder {
  return new StateBuilder().node('node1').node('node2').node('node3', { state: n3 }).service(serviceYaml('web'))
    .placed('a', 'web', 1, 'node1', 'running', running).placed('b', 'web', 2, 'node2', 'running', running).placed('c', 'web', 3, 'node3', 'running', running);
}

const statusOf = (b: StateBuilder) => {
  const state = b.build();
  const svc = state.services.get('web')?.value;
  if (svc === undefined) throw new Error('no web');
  return serviceStatus(state, svc);
};

describe('the service status', () => {
  it('counts all three running on ready nodes', () => {
    expect(statusOf(web('ready'))).toMatchObject({ desired: 3, running: 3, serving: 3, unreachable: 0, converged: true });
  });

  it('counts a task on a suspect node as unreachable, not running, and the service as not converged', () => {
    expect(statusOf(web('suspect'))).toMatchObject({ desired: 3, running: 2, serving: 2, unreachable: 1, tasks: 3, converged: false });
  });

  it('counts a task on a down node (its epoch not raised yet) as unreachable too', () => {
    expect(statusOf(web('down'))).toMatchObject({ running: 2, unreachable: 1, converged: false });
  });

  it('counts the old tasks that still serve during an update apart from those of the new spec', () => {
    const b = web('ready');
    const svc = b.services.get('web');
    if (svc === undefined) throw new Error('no web');
    svc.value = { ...svc.value, specVersion: 2, previousSpec: svc.value.spec, previousSpecVersion: 1, updateStatus: { state: 'updating', startedAt: 1, completedAt: null, message: null } };
    b.placed('d', 'web', 1, 'node2', 'running', { ...running, specVersion: 2 });
    expect(statusOf(b)).toMatchObject({ desired: 3, running: 1, serving: 4, updating: true, converged: false });
  });
});
