// The service DNS responder's answers as a pure function of hand-built records: which names
// name which tasks, isolation between networks, tasks.<service>, NXDOMAIN, AAAA, and an internal
// network that never forwards.

import { describe, expect, it } from 'vitest';
import { decide, type Decision } from '../../net/dns-answers.ts';
import { dnsView, type DnsView } from '../../net/dns-view.ts';
import { cluster, networkState } from './service-dns-fixtures.ts';

function view(nodeId = 'n1', edit: (c: ReturnType<typeof cluster>) => void = () => undefined): DnsView {
  const c = cluster();
  edit(c);
  return dnsView(c.control.build(), networkState(c.networks), nodeId);
}

const a = (v: DnsView, network: string, name: string, type = 'A'): Decision => decide(v, network, { name, type, class: 'IN' });
const records = (...addresses: string[]): Decision => ({ kind: 'records', addresses });
const webOnFront = records('10.61.0.9', '10.61.0.10', '10.61.1.2');

describe('service DNS answers', () => {
  it('names the running tasks of a service on the asking network, sorted by address, under every documented name', () => {
    const v = view();
    for (const name of ['web', 'web.front', 'web.front.shoal', 'tasks.web', 'tasks.web.front', 'tasks.web.front.shoal', 'WEB.Front.', 'Tasks.Web.Front.Shoal.']) {
      expect(a(v, 'front', name), name).toEqual(webOnFront);
    }
  });

  it('leaves out tasks that are starting, being stopped, unhealthy or lost with their node', () => {
    const v = view('n1', (c) => {
      c.control.placed('web6', 'web', 6, 'n2', 'running', {}, { health: 'unhealthy' });
      c.control.placed('web7', 'web', 7, 'n2', 'running', { nodeEpoch: 0 });
      c.control.node('n3', { epoch: 1 });
      c.control.placed('web8', 'web', 8, 'n3', 'running', { nodeEpoch: 0 }, { nodeEpoch: 0 });
      Object.assign(c.networks[0]?.addresses ?? {}, { web6: '10.61.1.6', web7: '10.61.1.7', web8: '10.61.2.8' });
    });
    // web7 runs healthy on n2 (epoch 0); web6 is unhealthy, web8's node was declared down since.
    expect(a(v, 'front', 'web')).toEqual(records('10.61.0.9', '10.61.0.10', '10.61.1.2', '10.61.1.7'));
  });

  it('gives a service on several networks its address on the asking network only', () => {
    const v = view();
    expect(a(v, 'front', 'api')).toEqual(records('10.61.1.3'));
    expect(a(v, 'back', 'api')).toEqual(records('10.62.1.2'));
    expect(a(v, 'back', 'tasks.api.back.shoal')).toEqual(records('10.62.1.2'));
  });

  it('isolates networks: a service of another network, or a name of another network, is NXDOMAIN', () => {
    const v = view();
    for (const name of ['db', 'db.back', 'db.back.shoal', 'tasks.db', 'api.back', 'api.back.shoal', 'web.back']) {
      expect(a(v, 'front', name), name).toEqual({ kind: 'nxdomain' });
    }
    expect(a(v, 'back', 'web')).toEqual({ kind: 'nxdomain' });
    expect(a(v, 'back', 'web.front')).toEqual({ kind: 'nxdomain' });
  });

  it('lets a task attached to several networks see them all from its first network\'s DNS, and nothing more', () => {
    const v = view();
    // api1 is on front (10.61.1.3) and back (10.62.1.2); its DNS server is its front gateway.
    const fromApi = (name: string): Decision => decide(v, 'front', { name, type: 'A' }, '10.61.1.3');
    expect(fromApi('db')).toEqual(records('10.62.0.2'));
    expect(fromApi('db.back.shoal')).toEqual(records('10.62.0.2'));
    // A service on both is answered on the asking network first, or on the one its name gives.
    expect(fromApi('api')).toEqual(records('10.61.1.3'));
    expect(fromApi('api.back')).toEqual(records('10.62.1.2'));
    expect(fromApi('example.com')).toEqual({ kind: 'forward' });
    // web1 is on front only: db stays out of its sight, as it does for an asker that is no task.
    expect(decide(v, 'front', { name: 'db', type: 'A' }, '10.61.0.9')).toEqual({ kind: 'nxdomain' });
    expect(decide(v, 'front', { name: 'db', type: 'A' }, '10.61.0.1')).toEqual({ kind: 'nxdomain' });
    // An address of another network means nothing on this one.
    expect(decide(v, 'front', { name: 'db', type: 'A' }, '10.62.1.2')).toEqual({ kind: 'nxdomain' });
  });

  it('answers a known name with no record of the type asked with an empty NOERROR (AAAA, MX; a service with no task running)', () => {
    const v = view();
    expect(a(v, 'front', 'web', 'AAAA')).toEqual(records());
    expect(a(v, 'front', 'web.front.shoal', 'MX')).toEqual(records());
    expect(a(v, 'front', 'idle')).toEqual(records());
    expect(a(v, 'front', 'db', 'AAAA')).toEqual({ kind: 'nxdomain' });
  });

  it('keeps .shoal to itself: an unknown name there is NXDOMAIN, never forwarded', () => {
    const v = view();
    for (const name of ['shoal', 'nope.shoal', 'web.shoal', 'nope.front.shoal', 'a.b.web.front.shoal']) {
      expect(a(v, 'front', name), name).toEqual({ kind: 'nxdomain' });
    }
  });

  it('forwards other names, including a service name under a domain that is no network (the LAN\'s own names stay reachable)', () => {
    const v = view();
    for (const name of ['example.com', 'web.lan', 'printer', '', 'tasks', 'web.front.example']) {
      expect(a(v, 'front', name), name).toEqual({ kind: 'forward' });
    }
    expect(decide(v, 'front', { name: 'web', type: 'A', class: 'CH' })).toEqual({ kind: 'forward' });
  });

  it('never forwards from an internal network: other names are REFUSED there', () => {
    const v = view();
    expect(a(v, 'back', 'example.com')).toEqual({ kind: 'refused' });
    expect(a(v, 'back', 'web.lan')).toEqual({ kind: 'refused' });
    // A network that is gone (its socket not closed yet) answers nothing of the world either.
    expect(a(v, 'gone', 'example.com')).toEqual({ kind: 'refused' });
    expect(a(v, 'gone', 'web')).toEqual({ kind: 'refused' });
  });

  it('knows this node\'s gateway on each network from its slice, and none without a slice', () => {
    expect(view('n1').networks.get('front')?.gateway).toBe('10.61.0.1');
    expect(view('n2').networks.get('front')?.gateway).toBe('10.61.1.1');
    expect(view('n1').networks.get('back')?.gateway).toBe('10.62.0.1');
    expect(view('n2').networks.get('back')?.gateway).toBe(null);
  });

  it('reads `tasks.x` as a service called `tasks` when no service x exists', () => {
    const v = view('n1', (c) => {
      c.control.service('apiVersion: shoal/v1\nkind: Service\nname: tasks\nimage: busybox:local\nnetworks: [front]\n');
      c.control.placed('tasks1', 'tasks', 1, 'n1', 'running');
      Object.assign(c.networks[0]?.addresses ?? {}, { tasks1: '10.61.0.20' });
    });
    expect(a(v, 'front', 'tasks')).toEqual(records('10.61.0.20'));
    expect(a(v, 'front', 'tasks.front')).toEqual(records('10.61.0.20'));
    expect(a(v, 'front', 'tasks.web')).toEqual(webOnFront);
  });
});
