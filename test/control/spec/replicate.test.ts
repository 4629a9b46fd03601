// Issue 41 in the Service spec: `replicate` on a volume mount of an exclusive service, read with
// its defaults, rendered back, and refused (with the reason) anywhere else.

import { describe, expect, it } from 'vitest';
import { ShoalError } from '../../../src/errors.ts';
import { parseSpecObjects, type Problem } from '../../../src/resources/spec/index.ts';
import { renderService } from '../../../src/resources/spec/render.ts';
import { serviceSpecSchema } from '../../../src/resources/spec/service-spec.ts';
import { compatCommand } from '../../../src/resources/record-compat.ts';

const svc = (fields: Record<string, unknown>): Record<string, unknown> => ({ apiVersion: 'shoal/v1', kind: 'Service', name: 'db', image: 'busybox:local', ...fields });
const vol = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({ type: 'volume', source: 'pgdata', target: '/data', ...extra });

function refused(doc: Record<string, unknown>): string[] {
  try {
    parseSpecObjects([doc]);
  } catch (err) {
    expect(err).toBeInstanceOf(ShoalError);
    return (((err as ShoalError).details?.problems ?? []) as Problem[]).map((p) => `${p.path}: ${p.message}`);
  }
  throw new Error('the input was accepted');
}

describe('replicate on a volume mount', () => {
  it('reads the defaults (2 copies, every 30 s, 1 GiB) and the written values', () => {
    const s = parseSpecObjects([svc({ exclusive: true, mounts: [vol({ replicate: {} })] })]).services[0];
    expect(s?.mounts[0]?.replicate).toEqual({ copies: 2, everyMs: 30_000, sizeBytes: 1024 ** 3 });
    const t = parseSpecObjects([svc({ exclusive: true, mounts: [vol({ replicate: { copies: 1, every: '10s', size: '256Mi' } })] })]).services[0];
    expect(t?.mounts[0]?.replicate).toEqual({ copies: 1, everyMs: 10_000, sizeBytes: 256 * 1024 ** 2 });
    expect(serviceSpecSchema.parse(t)).toEqual(t);
  });

  it('leaves a mount that is not replicated as it was (no replicate key)', () => {
    const s = parseSpecObjects([svc({ mounts: [vol()] })]).services[0];
    expect(s?.mounts[0]).toEqual({ type: 'volume', source: 'pgdata', target: '/data', readOnly: false });
  });

  it('renders back to the same spec', () => {
    const s = parseSpecObjects([svc({ exclusive: true, mounts: [vol({ replicate: { copies: 3, every: '1m', size: '2Gi' } })] })]).services[0];
    if (s === undefined) throw new Error('no service');
    expect(parseSpecObjects([renderService(s)]).services[0]).toEqual(s);
  });

  it('refuses it on a service that is not exclusive, with the reason', () => {
    expect(refused(svc({ mounts: [vol({ replicate: {} })] }))).toEqual([
      'services[0].mounts[0].replicate: only an exclusive service may replicate a volume: two tasks writing one replicated volume would diverge (set exclusive: true, or drop replicate)',
    ]);
  });

  it('refuses it on a bind mount, a read-only mount, more than one task, and a volume mounted twice', () => {
    expect(refused(svc({ exclusive: true, mounts: [{ type: 'bind', source: '/srv/x', target: '/x', replicate: {} }] })))
      .toEqual([expect.stringMatching(/^services\[0\]\.mounts\[0\]\.replicate: only a volume is replicated/)]);
    expect(refused(svc({ exclusive: true, mounts: [vol({ readOnly: true, replicate: {} })] })))
      .toEqual([expect.stringMatching(/read-only mount of it would never change/)]);
    expect(refused(svc({ exclusive: true, replicas: 2, mounts: [vol({ replicate: {} })] })))
      .toEqual([expect.stringMatching(/the service must run one task/)]);
    expect(refused(svc({ exclusive: true, mounts: [vol({ replicate: {} }), vol({ target: '/other', replicate: {} })] })))
      .toEqual(['services[0].mounts[1].replicate: volume pgdata is already mounted by mounts[0]; a replicated volume is mounted once']);
  });

  it('refuses bad settings: unknown keys, zero copies, too small a size, too short an interval', () => {
    const problems = refused(svc({ exclusive: true, mounts: [vol({ replicate: { copies: 0, every: '10ms', size: '1Mi', keep: 3 } })] }));
    expect(problems).toEqual(expect.arrayContaining([
      expect.stringMatching(/^services\[0\]\.mounts\[0\]\.replicate\.keep: unknown field/),
      expect.stringMatching(/^services\[0\]\.mounts\[0\]\.replicate\.copies:/),
      expect.stringMatching(/^services\[0\]\.mounts\[0\]\.replicate\.every:/),
      expect.stringMatching(/^services\[0\]\.mounts\[0\]\.replicate\.size:/),
    ]));
  });

  it('refuses it in a job', () => {
    const job = { apiVersion: 'shoal/v1', kind: 'Job', name: 'backup', image: 'busybox:local', mounts: [vol({ replicate: {} })] };
    expect(refused(job)).toEqual([expect.stringMatching(/^jobs\[0\]\.mounts\[0\]\.replicate: a job cannot replicate a volume/)]);
  });

  it('needs feature level 6 to be stored (a level-5 schema refuses the key)', () => {
    const s = parseSpecObjects([svc({ exclusive: true, mounts: [vol({ replicate: {} })] })]).services[0];
    const plain = parseSpecObjects([svc({ exclusive: true, mounts: [vol()] })]).services[0];
    const level = (spec: unknown): number => compatCommand({ op: 'put', collection: 'shoal.services', id: 'db', doc: { name: 'db', spec, previousSpec: null } as never }).featureLevel;
    expect(level(s)).toBe(6);
    expect(level(plain)).toBeLessThan(6);
  });
});

describe('replicate.maxBandwidth (issue 41 wiring)', () => {
  it('reads a bandwidth as bytes per second, renders it back, and leaves it out when not written', () => {
    const s = parseSpecObjects([svc({ exclusive: true, mounts: [vol({ replicate: { maxBandwidth: '10Mi' } })] })]).services[0];
    if (s === undefined) throw new Error('no service');
    expect(s.mounts[0]?.replicate).toEqual({ copies: 2, everyMs: 30_000, sizeBytes: 1024 ** 3, maxBandwidthBytes: 10 * 1024 ** 2 });
    expect(serviceSpecSchema.parse(s)).toEqual(s);
    expect(parseSpecObjects([renderService(s)]).services[0]).toEqual(s);
    expect(parseSpecObjects([svc({ exclusive: true, mounts: [vol({ replicate: {} })] })]).services[0]?.mounts[0]?.replicate).not.toHaveProperty('maxBandwidthBytes');
  });

  it('refuses a bandwidth under 64 KiB/s', () => {
    expect(refused(svc({ exclusive: true, mounts: [vol({ replicate: { maxBandwidth: '1Ki' } })] })))
      .toEqual([expect.stringMatching(/^services\[0\]\.mounts\[0\]\.replicate\.maxBandwidth: /)]);
  });

  it('reads hooks (argv lists, the timeout defaulted to 30 s), stores and renders them back', () => {
    const hooks = { before: ['sqlite3', '/data/app.db', '.backup /data/app.bak'], after: ['rm', '-f', '/data/app.bak'] };
    const s = parseSpecObjects([svc({ exclusive: true, mounts: [vol({ replicate: { hooks } })] })]).services[0];
    if (s === undefined) throw new Error('no service');
    expect(s.mounts[0]?.replicate?.hooks).toEqual({ ...hooks, timeoutMs: 30_000 });
    expect(serviceSpecSchema.parse(s)).toEqual(s);
    expect(parseSpecObjects([renderService(s)]).services[0]).toEqual(s);
    const t = parseSpecObjects([svc({ exclusive: true, mounts: [vol({ replicate: { hooks: { before: ['sync'], timeout: '5s' } } })] })]).services[0];
    expect(t?.mounts[0]?.replicate?.hooks).toEqual({ before: ['sync'], timeoutMs: 5_000 });
  });

  it('refuses bad hooks with the reason: a string, an empty command, none at all, unknown keys, a timeout out of bounds', () => {
    const at = (hooks: unknown): string[] => refused(svc({ exclusive: true, mounts: [vol({ replicate: { hooks } })] }));
    expect(at({ before: 'sqlite3 /data/app.db .backup' })).toEqual([expect.stringMatching(/^services\[0\]\.mounts\[0\]\.replicate\.hooks\.before: /)]);
    expect(at({ before: [] })).toEqual([expect.stringMatching(/hooks\.before: a hook is a command as a list of arguments/)]);
    expect(at({})).toEqual([expect.stringMatching(/hooks: hooks name a command to run before the snapshot, after it, or both/)]);
    expect(at({ before: ['sync'], during: ['x'] })).toEqual([expect.stringMatching(/hooks\.during: /)]);
    expect(at({ before: ['sync'], timeout: '1h' })).toEqual([expect.stringMatching(/hooks\.timeout: /)]);
    expect(at({ before: ['sync'], timeout: '10ms' })).toEqual([expect.stringMatching(/hooks\.timeout: /)]);
  });
});
