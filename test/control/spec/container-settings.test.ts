// A Service's container settings (src/resources/spec/container-settings.ts): each read into its
// stored form, each bad value refused with its path and what to write, and the checks across
// fields (hostNetwork, tmpfs and mount targets, name servers on networks).

import { describe, expect, it } from 'vitest';
import { ShoalError } from '../../../src/errors.ts';
import { parseSpecObjects, renderService, specChange, type Problem, type ServiceSpec } from '../../../src/resources/spec/index.ts';

const svc = (fields: Record<string, unknown>): Record<string, unknown> => ({ apiVersion: 'shoal/v1', kind: 'Service', name: 'web', image: 'busybox:local', ...fields });

function one(fields: Record<string, unknown>): ServiceSpec {
  const s = parseSpecObjects([svc(fields)]).services[0];
  if (s === undefined) throw new Error('none');
  return s;
}

function refused(fields: Record<string, unknown>): string[] {
  try {
    parseSpecObjects([svc(fields)]);
  } catch (err) {
    expect(err).toBeInstanceOf(ShoalError);
    expect((err as ShoalError).code).toBe('bad_request');
    return (((err as ShoalError).details?.problems ?? []) as Problem[]).map((p) => `${p.path}: ${p.message}`);
  }
  throw new Error('the input was accepted');
}

describe('container settings', () => {
  it('reads every setting into its stored form', () => {
    const s = one({
      workingDir: '/srv/app', hostname: 'web-1.lan', init: true, readOnlyRootfs: true, shmSize: '256Mi',
      tmpfs: ['/tmp', { target: '/run', size: '64Mi', mode: '1777' }],
      extraHosts: ['nas=10.0.0.5', 'gw:192.168.1.1', 'v6=[fd00::1]', { host: 'db', address: '10.0.0.6' }],
      dns: ['1.1.1.1', '2606:4700::1111'], dnsSearch: ['lan'], dnsOptions: ['ndots:2', 'rotate'],
      ulimits: { nproc: 512, nofile: { soft: 1024, hard: 4096 }, memlock: { soft: -1, hard: -1 } },
      sysctls: { 'net.core.somaxconn': 1024, 'kernel.shmmax': '68719476736', 'fs.mqueue.msg_max': '64', 'kernel.sem': '250 32000 100 128' },
      labels: { 'traefik.enable': 'true', 'traefik.http.routers.web.rule': 'Host(`web.lan`)' },
    });
    expect(s).toMatchObject({
      workingDir: '/srv/app', hostname: 'web-1.lan', init: true, readOnlyRootfs: true, shmSizeBytes: 256 * 1024 ** 2,
      tmpfs: [{ target: '/run', sizeBytes: 64 * 1024 ** 2, mode: 0o1777 }, { target: '/tmp', sizeBytes: null, mode: null }],
      extraHosts: [
        { host: 'nas', address: '10.0.0.5' }, { host: 'gw', address: '192.168.1.1' }, { host: 'v6', address: 'fd00::1' }, { host: 'db', address: '10.0.0.6' },
      ],
      dns: ['1.1.1.1', '2606:4700::1111'], dnsSearch: ['lan'], dnsOptions: ['ndots:2', 'rotate'],
      ulimits: [{ name: 'memlock', soft: -1, hard: -1 }, { name: 'nofile', soft: 1024, hard: 4096 }, { name: 'nproc', soft: 512, hard: 512 }],
      sysctls: { 'fs.mqueue.msg_max': '64', 'kernel.sem': '250 32000 100 128', 'kernel.shmmax': '68719476736', 'net.core.somaxconn': '1024' },
      labels: { 'traefik.enable': 'true', 'traefik.http.routers.web.rule': 'Host(`web.lan`)' },
    });
    // What inspect prints reads back into the very same spec.
    expect(parseSpecObjects([renderService(s)]).services[0]).toEqual(s);
  });

  it.each([
    [{ workingDir: 'srv' }, 'services[0].workingDir: "srv" is not a working directory'],
    [{ hostname: 'web_1' }, 'services[0].hostname: "web_1" is not a hostname'],
    [{ hostname: 'a'.repeat(64) }, 'is not a hostname'],
    [{ init: 'yes' }, 'services[0].init: must be true or false'],
    [{ readOnlyRootfs: 1 }, 'services[0].readOnlyRootfs: must be true or false'],
    [{ shmSize: '64X' }, 'services[0].shmSize: "64X"'],
    [{ shmSize: 10 }, 'services[0].shmSize: must be at least'],
    [{ tmpfs: ['tmp'] }, 'services[0].tmpfs[0]: "tmp" is not a container path'],
    [{ tmpfs: [{ target: '/run', mode: 1777 }] }, 'services[0].tmpfs[0].mode: write the mode as a quoted octal string'],
    [{ tmpfs: [{ target: '/run', size: '1Gi', uid: 1 }] }, 'services[0].tmpfs[0].uid'],
    [{ tmpfs: ['/run', '/run'] }, 'services[0].tmpfs[1]: /run is already the target of tmpfs[0]'],
    [{ tmpfs: ['/data'], mounts: [{ type: 'volume', source: 'd', target: '/data' }] }, 'services[0].tmpfs[0]: /data is already the target of mounts[0]'],
    [{ extraHosts: ['nas'] }, 'services[0].extraHosts[0]: "nas" is not host=address'],
    [{ extraHosts: ['nas=10.0.0.300'] }, 'services[0].extraHosts[0].address: "10.0.0.300" is not an IPv4 or IPv6 address'],
    [{ dns: ['dns.google'] }, 'services[0].dns[0]: "dns.google" is not an IPv4 or IPv6 address'],
    [{ dns: ['1.1.1.1', '1.0.0.1', '8.8.8.8', '9.9.9.9'] }, 'services[0].dns: has 4 items; at most 3'],
    [{ dns: ['1.1.1.1', '1.0.0.1', '8.8.8.8'], networks: ['back'] }, 'services[0].dns: on a network the node\'s service resolver is the first'],
    [{ dnsSearch: ['bad domain'] }, 'services[0].dnsSearch[0]: "bad domain" is not a domain name'],
    [{ dnsOptions: ['ndots 2'] }, 'services[0].dnsOptions[0]: "ndots 2" is not a resolv.conf option'],
    [{ ulimits: { files: 10 } }, 'services[0].ulimits.files: "files" is not a limit the runtime sets'],
    [{ ulimits: { nofile: { soft: 10, hard: 5 } } }, 'services[0].ulimits.nofile.soft: is above hard (5)'],
    [{ ulimits: { nofile: { soft: 10 } } }, 'services[0].ulimits.nofile.hard'],
    [{ ulimits: ['nofile=10'] }, 'services[0].ulimits: must be a mapping'],
    [{ sysctls: { 'kernel.pid_max': '100000' } }, 'services[0].sysctls["kernel.pid_max"]: kernel.pid_max is not namespaced'],
    [{ sysctls: { 'vm.swappiness': '10' } }, 'vm.swappiness is not namespaced: a container may set only net.*, kernel.shm*, kernel.msg*, kernel.sem and fs.mqueue.*'],
    [{ sysctls: { 'net.core.somaxconn': 1.5 } }, 'must be a string'],
    [{ sysctls: { 'net.ipv4.ip_forward': '1' }, hostNetwork: true }, 'a service with hostNetwork shares the node\'s network namespace'],
    [{ labels: { 'io.shoal.service': 'x' } }, 'services[0].labels["io.shoal.service"]: is under io.shoal., which shoal keeps for its own labels'],
    [{ labels: { 'shoal.stack': 'x' } }, 'is under shoal., which shoal keeps'],
    [{ labels: { 'IO.SHOAL.task': 'x' } }, 'is under io.shoal.'],
    [{ labels: { 'has space': 'x' } }, 'is not a label key'],
    [{ labels: { port: 80 } }, 'services[0].labels.port: must be a string'],
  ])('refuses %j', (fields, message) => {
    expect(refused(fields).join('\n')).toContain(message);
  });

  it('takes a hostname, name servers and /etc/hosts entries with hostNetwork (the container keeps its own UTS namespace and files)', () => {
    expect(one({ hostNetwork: true, hostname: 'web', dns: ['1.1.1.1'], extraHosts: ['a=10.0.0.1'] })).toMatchObject({ hostname: 'web', dns: ['1.1.1.1'] });
  });

  it('counts a change of any setting as a change that replaces the tasks', () => {
    const before = one({});
    for (const fields of [
      { workingDir: '/srv' }, { hostname: 'h' }, { init: true }, { readOnlyRootfs: true }, { shmSize: '1Gi' }, { tmpfs: ['/tmp'] },
      { extraHosts: ['a=10.0.0.1'] }, { dns: ['1.1.1.1'] }, { dnsSearch: ['lan'] }, { dnsOptions: ['rotate'] }, { ulimits: { nofile: 10 } },
      { sysctls: { 'net.core.somaxconn': '1' } }, { labels: { a: 'b' } },
    ]) expect(specChange(before, one(fields)), JSON.stringify(fields)).toBe('replace');
  });
});
