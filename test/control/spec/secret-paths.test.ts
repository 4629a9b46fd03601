// Issue 39 in the Service spec: a secret reference's target as an absolute container path
// (Compose configs anywhere), read as written, refused when not clean, under /proc, /sys or /dev,
// or at a path a mount, a tmpfs or another secret's file already has (/run/secrets/x and x are the
// same file); a secret file's owner (uid/gid); and ports[].hostIp.

import { describe, expect, it } from 'vitest';
import { ShoalError } from '../../../src/errors.ts';
import { parseSpecObjects, type Problem } from '../../../src/resources/spec/index.ts';
import { renderService } from '../../../src/resources/spec/render.ts';

const svc = (fields: Record<string, unknown>): Record<string, unknown> => ({ apiVersion: 'shoal/v1', kind: 'Service', name: 'web', image: 'busybox:local', ...fields });

function refused(fields: Record<string, unknown>): string[] {
  try {
    parseSpecObjects([svc(fields)]);
  } catch (err) {
    expect(err).toBeInstanceOf(ShoalError);
    return (((err as ShoalError).details?.problems ?? []) as Problem[]).map((p) => `${p.path}: ${p.message}`);
  }
  throw new Error('the input was accepted');
}

describe('secrets at absolute paths', () => {
  it('reads an absolute target as written, beside file names under /run/secrets/', () => {
    const s = parseSpecObjects([svc({ secrets: [{ name: 'conf', target: '/etc/app/app.conf', mode: '0444' }, 'db'] })]).services[0];
    expect(s?.secrets).toEqual([{ name: 'conf', target: '/etc/app/app.conf', mode: 0o444 }, { name: 'db', target: 'db', mode: 0o400 }]);
  });

  it('refuses a path that is not clean, the root, a path under /proc, /sys or /dev, and a name with a /', () => {
    expect(refused({ secrets: [{ name: 'a', target: '/etc/../x' }] })).toEqual([expect.stringMatching(/^services\[0\]\.secrets\[0\]\.target: "\/etc\/\.\.\/x" is not an absolute container path/)]);
    expect(refused({ secrets: [{ name: 'a', target: '/' }] })).toEqual([expect.stringMatching(/is not an absolute container path/)]);
    expect(refused({ secrets: [{ name: 'a', target: '/dev/shm/k' }] })).toEqual([expect.stringMatching(/is under \/dev, which the runtime mounts itself/)]);
    expect(refused({ secrets: [{ name: 'a', target: 'etc/x' }] })).toEqual([expect.stringMatching(/is not a file name under \/run\/secrets\/ .* nor an absolute container path/)]);
  });

  it('refuses a file at a mount\'s or a tmpfs\'s target, or where another secret\'s file is', () => {
    expect(refused({ mounts: [{ type: 'volume', source: 'data', target: '/data' }], secrets: [{ name: 'a', target: '/data' }] }))
      .toEqual(['services[0].secrets[0].target: /data is already the target of mounts[0]; give the file another path']);
    expect(refused({ tmpfs: ['/run/app'], secrets: [{ name: 'a', target: '/run/app' }] })).toEqual(['services[0].secrets[0].target: /run/app is already the target of tmpfs[0]; give the file another path']);
    expect(refused({ secrets: ['db', { name: 'b', target: '/run/secrets/db' }] })).toEqual(['services[0].secrets[1].target: /run/secrets/db is already given by secrets[0]']);
  });
});

describe('a job\'s secrets at absolute paths', () => {
  it('are refused where a mount\'s target or another secret\'s file is, as a service\'s', () => {
    const job = (fields: Record<string, unknown>): string[] => {
      try {
        parseSpecObjects([{ apiVersion: 'shoal/v1', kind: 'Job', name: 'chore', image: 'busybox:local', ...fields }]);
      } catch (err) {
        return (((err as ShoalError).details?.problems ?? []) as Problem[]).map((p) => `${p.path}: ${p.message}`);
      }
      throw new Error('the input was accepted');
    };
    expect(job({ secrets: ['db', { name: 'b', target: '/run/secrets/db' }] })).toEqual(['jobs[0].secrets[1].target: /run/secrets/db is already given by secrets[0]']);
    expect(job({ mounts: [{ type: 'volume', source: 'data', target: '/data' }], secrets: [{ name: 'a', target: '/data' }] }))
      .toEqual(['jobs[0].secrets[0].target: /data is already the target of mounts[0]; give the file another path']);
  });
});

describe('ports[].hostIp', () => {
  it('reads an IPv4 or IPv6 address, leaves it out when unsaid, and refuses anything else', () => {
    const s = parseSpecObjects([svc({ ports: [{ published: 80, target: 80, hostIp: '127.0.0.1' }, { published: 53, target: 53, protocol: 'udp', hostIp: 'fd00::1' }, { published: 443, target: 443 }] })]).services[0];
    expect(s?.ports).toEqual([
      { published: 80, target: 80, protocol: 'tcp', hostIp: '127.0.0.1' }, { published: 53, target: 53, protocol: 'udp', hostIp: 'fd00::1' }, { published: 443, target: 443, protocol: 'tcp', mode: 'ingress' },
    ]);
    expect(refused({ ports: [{ published: 80, target: 80, hostIp: 'nas.lan' }] })).toEqual([expect.stringMatching(/^services\[0\]\.ports\[0\]\.hostIp: "nas\.lan" is not an IPv4 or IPv6 address/)]);
  });
});

describe('a secret file\'s owner (uid, gid)', () => {
  it('reads uid and gid as numbers, leaves 0 (root, the default) out, and renders them back', () => {
    const s = parseSpecObjects([svc({ secrets: [{ name: 'db', uid: 999, gid: 0 }, { name: 'conf', target: '/etc/app.conf', gid: 101, mode: '0440' }, 'plain'] })]).services[0];
    expect(s?.secrets).toEqual([{ name: 'db', target: 'db', mode: 0o400, uid: 999 }, { name: 'conf', target: '/etc/app.conf', mode: 0o440, gid: 101 }, { name: 'plain', target: 'plain', mode: 0o400 }]);
    if (s === undefined) throw new Error('no service');
    expect(renderService(s).secrets).toEqual([{ name: 'db', target: 'db', mode: '0400', uid: 999 }, { name: 'conf', target: '/etc/app.conf', mode: '0440', gid: 101 }, { name: 'plain', target: 'plain', mode: '0400' }]);
    expect(parseSpecObjects([renderService(s)]).services[0]).toEqual(s);
  });

  it('refuses an owner that is not a whole number from 0 to 4294967294 (a user\'s name included)', () => {
    expect(refused({ secrets: [{ name: 'db', uid: 'postgres' }] })).toEqual(['services[0].secrets[0].uid: must be a whole number, not a string']);
    expect(refused({ secrets: [{ name: 'db', gid: -1 }] })).toEqual(['services[0].secrets[0].gid: must be at least 0']);
    expect(refused({ secrets: [{ name: 'db', uid: 2 ** 32 - 1 }] })).toEqual(['services[0].secrets[0].uid: must be at most 4294967294']);
  });

  it('a job\'s secrets take them too', () => {
    const j = parseSpecObjects([{ apiVersion: 'shoal/v1', kind: 'Job', name: 'chore', image: 'busybox:local', command: ['true'], secrets: [{ name: 'db', uid: 70, gid: 70 }] }]).jobs[0];
    expect(j?.secrets).toEqual([{ name: 'db', target: 'db', mode: 0o400, uid: 70, gid: 70 }]);
  });
});
