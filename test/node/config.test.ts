import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig, parseConfig } from '../../src/server/config.ts';
import { ShoalError } from '../../src/errors.ts';

const minimal = { dataDir: '.', api: { listen: '127.0.0.1:7101' }, peer: { listen: '127.0.0.1:7201' } };

function problems(raw: unknown): string {
  try {
    parseConfig(raw, 'test.yaml');
  } catch (err) {
    expect(err).toBeInstanceOf(ShoalError);
    expect((err as ShoalError).code).toBe('config_invalid');
    return (err as Error).message;
  }
  throw new Error('expected the config to be refused');
}

describe('node config', () => {
  it('fills the documented defaults', () => {
    const c = parseConfig(minimal, 'test.yaml');
    expect(c.raft).toEqual({
      tickMs: 100, heartbeatIntervalMs: 100, electionTimeoutMs: 1000, snapshotEntries: 10_000, snapshotIntervalMs: 30_000,
      snapshotEntriesMax: 100_000, logKeepEntries: 5_000, appendBytesMax: 1 << 20, appendsInflightMax: 256, uncommittedBytesMax: 64 << 20,
    });
    expect(c.limits).toEqual({
      proposalTimeoutMs: 10_000, bodyBytesMax: 1 << 20, proposalsPendingMax: 10_000, readsPendingMax: 10_000, diskStallMs: 5_000,
      connectionsMax: 512, watchStreamsMax: 256, watchStreamsPerClientMax: 32, snapshotDownloadsMax: 2, apiDrainMs: 10_000,
    });
    expect(c.runtime.kind).toBe('docker');
    expect(c.control).toEqual({ suspectAfterMs: 1_500, downAfterMs: 4_000, restartGraceMs: 30_000, jobClockSkewMaxMs: 30_000 });
    expect(c.logLevel).toBe('info');
  });

  it('refuses unknown keys at any depth, naming them', () => {
    const msg = problems({ ...minimal, colour: 'blue', raft: { tickMS: 5 } });
    expect(msg).toContain('colour');
    expect(msg).toContain('tickMS');
  });

  it('reports every problem at once', () => {
    const msg = problems({ dataDir: '', api: { listen: 'nonsense' }, peer: {}, raft: { tickMs: -1 } });
    expect(msg).toContain('dataDir');
    expect(msg).toContain('api.listen');
    expect(msg).toContain('peer.listen');
    expect(msg).toContain('raft.tickMs');
  });

  it('refuses timeouts that are not multiples of the tick or an election timeout below the heartbeat', () => {
    expect(problems({ ...minimal, raft: { tickMs: 100, heartbeatIntervalMs: 150 } })).toContain('multiples of tickMs');
    expect(problems({ ...minimal, raft: { heartbeatIntervalMs: 1000, electionTimeoutMs: 1000 } })).toContain('must exceed heartbeatIntervalMs');
  });

  it('refuses a snapshot ceiling below the snapshot threshold, naming both', () => {
    const msg = problems({ ...minimal, raft: { snapshotEntries: 5000, snapshotEntriesMax: 4000 } });
    expect(msg).toContain('raft.snapshotEntriesMax: must be at least snapshotEntries (5000)');
    expect(parseConfig({ ...minimal, raft: { snapshotEntries: 5000, snapshotEntriesMax: 5000, snapshotIntervalMs: 0 } }, 't').raft.snapshotIntervalMs).toBe(0);
  });

  it('leaves dead member cleanup off by default, and refuses a removal time under a minute or within control.restartGraceMs', () => {
    expect(parseConfig(minimal, 't').autopilot).toEqual({ stabilizationMs: 10_000, deadMemberRemoveAfterMs: 0, minQuorum: 3 });
    expect(problems({ ...minimal, autopilot: { deadMemberRemoveAfterMs: 30_000 } })).toContain('autopilot.deadMemberRemoveAfterMs: must be 0 (off) or at least 60000');
    expect(problems({ ...minimal, autopilot: { deadMemberRemoveAfterMs: 90_000 }, control: { downAfterMs: 100_000, restartGraceMs: 120_000 } })).toContain('above control.restartGraceMs (120000)');
    expect(problems({ ...minimal, autopilot: { minQuorum: 0 } })).toContain('autopilot.minQuorum');
    expect(parseConfig({ ...minimal, autopilot: { deadMemberRemoveAfterMs: 3_600_000, minQuorum: 2 } }, 't').autopilot.minQuorum).toBe(2);
  });

  it('runs the routing mesh by default without preferLocal, and takes ingress.preferLocal as a boolean only', () => {
    expect(parseConfig(minimal, 't').ingress).toEqual({ enabled: true, preferLocal: false });
    expect(parseConfig({ ...minimal, ingress: { preferLocal: true } }, 't').ingress).toEqual({ enabled: true, preferLocal: true });
    expect(problems({ ...minimal, ingress: { preferLocal: 'yes' } })).toContain('ingress.preferLocal');
  });

  it('refuses node-health timeouts out of order: suspect below down, the restart grace not below down', () => {
    expect(problems({ ...minimal, control: { suspectAfterMs: 4_000, downAfterMs: 4_000 } })).toContain('control.suspectAfterMs: must be below control.downAfterMs (4000)');
    expect(problems({ ...minimal, control: { downAfterMs: 10_000, restartGraceMs: 5_000 } })).toContain('control.restartGraceMs: must be at least control.downAfterMs (10000)');
    expect(problems({ ...minimal, control: { downAfterMs: 2_000 } })).toContain('control.downAfterMs');
    expect(problems({ ...minimal, control: { jobClockSkewMaxMs: 500 } })).toContain('control.jobClockSkewMaxMs');
    expect(parseConfig({ ...minimal, control: { jobClockSkewMaxMs: 10_000 } }, 't').control.jobClockSkewMaxMs).toBe(10_000);
    expect(parseConfig({ ...minimal, control: { suspectAfterMs: 1_000, downAfterMs: 3_000, restartGraceMs: 3_000 } }, 't').control.restartGraceMs).toBe(3_000);
  });

  it('takes the exclusive lease settings, with the release\'s defaults', () => {
    expect(parseConfig(minimal, 't').exclusive).toEqual({ leaseMs: 8_000, driftRho: 0.01, killMs: 2_000, stopReportMs: 1_000 });
    expect(parseConfig({ ...minimal, exclusive: { leaseMs: 30_000, killMs: 3_000 } }, 't').exclusive).toEqual({ leaseMs: 30_000, driftRho: 0.01, killMs: 3_000, stopReportMs: 1_000 });
  });

  it('refuses exclusive lease settings that break the safety formula or its bounds, with a clear config error', () => {
    expect(problems({ ...minimal, exclusive: { leaseMs: 1_000 } })).toContain('exclusive.leaseMs: Too small');
    expect(problems({ ...minimal, exclusive: { killMs: 500 } })).toContain('exclusive.killMs');
    expect(problems({ ...minimal, exclusive: { driftRho: 0 } })).toContain('exclusive.driftRho');
    expect(problems({ ...minimal, exclusive: { leaseMs: 5_000 }, raft: { electionTimeoutMs: 2_000 } })).toContain('exclusive.leaseMs: must be at least three election timeouts (6000)');
    const msg = problems({ ...minimal, exclusive: { leaseMs: 60_000, driftRho: 0.05, killMs: 5_000, stopReportMs: 0 } });
    expect(msg).toContain('exclusive.stopReportMs: stopReportMs must be at least 579');
    expect(problems({ ...minimal, exclusive: { leaseMS: 10_000 } })).toContain('leaseMS');
  });

  it('loads YAML and JSON files, resolving dataDir against the file, and explains unparsable files', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-config-'));
    writeFileSync(path.join(dir, 'a.yaml'), 'dataDir: data\napi: {listen: "127.0.0.1:1"}\npeer: {listen: "127.0.0.1:2"}\n');
    writeFileSync(path.join(dir, 'b.json'), JSON.stringify(minimal));
    writeFileSync(path.join(dir, 'c.yaml'), 'dataDir: [unclosed\n');
    expect(loadConfig(path.join(dir, 'a.yaml')).dataDir).toBe(path.join(dir, 'data'));
    expect(loadConfig(path.join(dir, 'b.json')).dataDir).toBe(dir);
    expect(() => loadConfig(path.join(dir, 'c.yaml'))).toThrow(/not valid YAML/);
    expect(() => loadConfig(path.join(dir, 'missing.yaml'))).toThrow(/cannot read config file/);
  });
});
