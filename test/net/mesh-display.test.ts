import { describe, expect, it } from 'vitest';
import type { NodeView } from '../../src/cli/control-api.ts';
import { handshakeStaleMs, meshRows, meshText, meshWarnings } from '../../src/cli/node-mesh.ts';

const now = 1_800_000_000_000;

function view(id: string, mesh: unknown): NodeView {
  return {
    id, name: id.replace('id-', ''), rev: 1, tasks: 0, running: 0, reserved: { cpuMillis: 0, memoryBytes: 0 },
    record: { availability: 'active', state: 'ready', epoch: 0, labels: {}, capacity: { cpuMillis: 1000, memoryBytes: 1 }, runtime: { status: 'up', error: null }, softwareVersion: 't', addresses: { api: 'x:1' }, mesh },
  };
}

const mesh = (address: string | null, peers: unknown[]): unknown => ({ publicKey: 'k', endpoint: `${address ?? '0.0.0.0'}:51820`, address, peers, reportedAt: now - 1000 });

describe('the mesh in shoal node ls', () => {
  const items = [
    view('id-n1', mesh('10.212.0.1', [
      { nodeId: 'id-n2', latestHandshakeAt: now - 12_000, rxBytes: 2048, txBytes: 4096 },
      { nodeId: 'id-n3', latestHandshakeAt: now - handshakeStaleMs - 60_000, rxBytes: 0, txBytes: 148 },
    ])),
    view('id-n2', mesh('10.212.0.2', [{ nodeId: 'id-n1', latestHandshakeAt: null, rxBytes: 0, txBytes: 0 }])),
    view('id-n3', mesh(null, [])),
    view('id-n4', null),
  ];

  it('shows each peer\'s handshake age and counters by node name, and marks the stale ones', () => {
    const rows = meshRows(items, now);
    expect(rows.map((r) => [r[0], r[1], r[3], r[4]])).toEqual([
      ['n1', '10.212.0.1', 'n2', '12s ago'],
      ['', '', 'n3', '6m ago (!)'],
      ['n2', '10.212.0.2', 'n1', 'never (!)'],
      ['n3', 'pending', '-', '-'],
    ]);
    expect(rows[0]?.[5]).toBe('2 KiB');
  });

  it('names every peer without a recent handshake, and nothing else', () => {
    const w = meshWarnings(items, now);
    expect(w).toHaveLength(2);
    expect(w[0]).toContain('n1 has had no handshake for 6m with n3');
    expect(w[1]).toContain('n2 never had a handshake with n1');
  });

  it('adds nothing to the listing when no node takes part in the mesh', () => {
    expect(meshText([view('id-n4', null)], now)).toBe('');
  });
});
