// shoal doctor's checks on made-up facts: each says OK, WARN or FAIL at its thresholds, with what
// to do; and the command against no node fails the quorum check and exits 3.

import { describe, expect, it } from 'vitest';
import type { View } from '../../src/cli/cluster-view.ts';
import {
  apiExposureCheck, certificateCheck, clockCheck, diskCheck, quorumCheck, toleranceCheck, versionCheck, type MemberFacts,
} from '../../src/cli/doctor-checks.ts';
import { metricValue } from '../../src/cli/doctor.ts';
import { inProcess } from './in-process.ts';

type Health = 'healthy' | 'lagging' | 'unreachable';

function view(health: Health[], opts: { leader?: string | null; versions?: string[]; featureLevel?: number; levelsMax?: number[] } = {}): View {
  return {
    clusterId: 'c', view: 'leader', node: 'a', leader: opts.leader === undefined ? 'a' : opts.leader, term: 3, commitIndex: 9, appliedIndex: 9, lastIndex: 9,
    ...(opts.featureLevel !== undefined ? { featureLevel: opts.featureLevel } : {}),
    members: health.map((h, i) => ({
      id: String.fromCharCode(97 + i), name: `n${i + 1}`, apiAddress: `h${i}:7101`, peerAddress: `h${i}:7102`, role: 'voter' as const,
      matchIndex: 9, lag: 0, rttMs: 1, softwareVersion: opts.versions?.[i] ?? '1.0.0', featureLevelMax: opts.levelsMax?.[i] ?? null, health: h,
    })),
  };
}

describe('quorum and tolerance', () => {
  it('fails without an answer, a leader or a quorum; warns with a voter down', () => {
    expect(quorumCheck(undefined, 'x:1').status).toBe('fail');
    expect(quorumCheck(view(['healthy', 'healthy', 'healthy'], { leader: null }), 'x:1').status).toBe('fail');
    expect(quorumCheck(view(['healthy', 'unreachable', 'unreachable']), 'x:1').status).toBe('fail');
    const down = quorumCheck(view(['healthy', 'lagging', 'unreachable']), 'x:1');
    expect(down.status).toBe('warn');
    expect(down.message).toContain('n3');
    expect(quorumCheck(view(['healthy', 'healthy', 'healthy']), 'x:1').status).toBe('ok');
  });
  it('warns of a lone voter and of an even number', () => {
    expect(toleranceCheck(view(['healthy'])).status).toBe('warn');
    expect(toleranceCheck(view(['healthy', 'healthy'])).status).toBe('warn');
    expect(toleranceCheck(view(['healthy', 'healthy', 'healthy'])).message).toContain('tolerate 1');
  });
});

const m = (name: string, f: Partial<MemberFacts>): MemberFacts => ({ name, id: name, reachable: true, ...f });

describe('clock skew and disk free', () => {
  it('measures skew between the members, not against this machine', () => {
    expect(clockCheck([m('n1', { clockOffsetMs: 9000 }), m('n2', { clockOffsetMs: 9500 })]).status).toBe('ok');
    const warn = clockCheck([m('n1', { clockOffsetMs: 0 }), m('n2', { clockOffsetMs: 3000 }), m('n3', { clockOffsetMs: 100 })]);
    expect(warn.status).toBe('warn');
    expect(warn.message).toContain('between n2 and n1');
    expect(clockCheck([m('n1', { clockOffsetMs: 0 }), m('n2', { clockOffsetMs: -40_000 })]).status).toBe('fail');
    expect(clockCheck([m('n1', { clockOffsetMs: 0 })]).status).toBe('skip');
  });
  it('warns under 15% free, fails under 5% or 1 GiB', () => {
    const gib = 1024 ** 3;
    expect(diskCheck([m('n1', { availBytes: 50 * gib, sizeBytes: 100 * gib })]).status).toBe('ok');
    expect(diskCheck([m('n1', { availBytes: 50 * gib, sizeBytes: 100 * gib }), m('n2', { availBytes: 10 * gib, sizeBytes: 100 * gib })]).status).toBe('warn');
    expect(diskCheck([m('n1', { availBytes: 4 * gib, sizeBytes: 100 * gib })]).status).toBe('fail');
    expect(diskCheck([m('n1', { availBytes: 0.5 * gib, sizeBytes: 2 * gib })]).status).toBe('fail');
    expect(diskCheck([m('n1', {})]).status).toBe('skip');
  });
});

describe('versions, API exposure, certificates', () => {
  it('warns of mixed versions and a feature level below what all support', () => {
    expect(versionCheck(view(['healthy', 'healthy'], { versions: ['1.0.0', '1.1.0'] })).status).toBe('warn');
    expect(versionCheck(view(['healthy', 'healthy'], { featureLevel: 2, levelsMax: [3, 3] })).status).toBe('warn');
    expect(versionCheck(view(['healthy', 'healthy'], { featureLevel: 3, levelsMax: [3, 3] })).status).toBe('ok');
  });
  it('warns of an API beyond loopback', () => {
    expect(apiExposureCheck('127.0.0.1:7101').status).toBe('ok');
    expect(apiExposureCheck('[::1]:7101').status).toBe('ok');
    expect(apiExposureCheck('0.0.0.0:7101').status).toBe('warn');
    expect(apiExposureCheck(undefined).status).toBe('skip');
  });
  it('fails an expired certificate and warns of one expiring within 30 days', () => {
    const now = new Date('2026-12-01T00:00:00Z');
    const cert = (days: number) => [{ file: 'tls/node.crt', notAfter: new Date(now.getTime() + days * 86_400_000) }];
    expect(certificateCheck(cert(365), now).status).toBe('ok');
    expect(certificateCheck(cert(10), now).status).toBe('warn');
    expect(certificateCheck(cert(-1), now).status).toBe('fail');
  });
  it('reads an unlabelled sample from Prometheus text', () => {
    const text = '# HELP x y\nshoal_storage_filesystem_avail_bytes 1234\nshoal_storage_filesystem_size_bytes_other 9\n';
    expect(metricValue(text, 'shoal_storage_filesystem_avail_bytes')).toBe(1234);
    expect(metricValue(text, 'shoal_storage_filesystem_size_bytes')).toBeUndefined();
  });
});

describe('shoal doctor', () => {
  it('with no node answering: the quorum check fails and the exit code is 3', async () => {
    const r = await inProcess('doctor', '--json', '--addr', '127.0.0.1:9');
    expect(r.code).toBe(3);
    const checks = (JSON.parse(r.stdout) as { checks: { name: string; status: string }[] }).checks;
    expect(checks.find((c) => c.name === 'quorum')?.status).toBe('fail');
  });
});
