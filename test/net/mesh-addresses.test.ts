import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { NodeMesh } from '../../src/resources/records.ts';
import { allocateMeshAddresses, cidrContains, formatIpv4, parseCidr, parseIpv4 } from '../../src/resources/mesh-addresses.ts';
import { StateBuilder } from '../control/state-builder.ts';

const key = (i: number): string => `${String.fromCharCode(65 + (i % 26)).repeat(42)}A=`;
const mesh = (i: number, address: string | null = null): NodeMesh => ({ publicKey: key(i), endpoint: `10.0.0.${i}:51820`, address, peers: [], reportedAt: null });

describe('mesh address arithmetic', () => {
  it('parses and formats IPv4 addresses and ranges strictly', () => {
    expect(formatIpv4(parseIpv4('10.212.3.4') as number)).toBe('10.212.3.4');
    expect(parseIpv4('10.212.3.256')).toBeNull();
    expect(parseIpv4('10.212.03.4')).toBeNull();
    expect(parseCidr('10.212.0.0/16')).toEqual({ base: parseIpv4('10.212.0.0'), prefix: 16 });
    expect(parseCidr('10.212.0.1/16')).toBeNull();
    expect(parseCidr('10.0.0.0/31')).toBeNull();
    expect(parseCidr('10.0.0.0')).toBeNull();
    const c = parseCidr('192.168.4.0/30');
    expect(c !== null && cidrContains(c, parseIpv4('192.168.4.3') as number) && !cidrContains(c, parseIpv4('192.168.4.4') as number)).toBe(true);
  });
});

describe('allocateMeshAddresses', () => {
  it('gives each node with a key the lowest free address, in id order, and skips nodes without mesh', () => {
    const s = new StateBuilder().node('node-b', { mesh: mesh(2) }).node('node-a', { mesh: mesh(1) }).node('node-c', { mesh: mesh(3, '10.212.0.1') }).node('node-d');
    const { changes } = allocateMeshAddresses(s.build(), '10.212.0.0/16');
    expect(changes.map((c) => [c.id, c.kind === 'put' ? (c.doc.mesh as { address: string }).address : null])).toEqual([['node-a', '10.212.0.2'], ['node-b', '10.212.0.3']]);
    s.apply({ changes, compares: [] });
    expect(allocateMeshAddresses(s.build(), '10.212.0.0/16').changes).toEqual([]);
  });

  it('never hands out the network or broadcast address, and leaves the rest waiting when the range is full', () => {
    const s = new StateBuilder().node('n1', { mesh: mesh(1) }).node('n2', { mesh: mesh(2) }).node('n3', { mesh: mesh(3) });
    const r = allocateMeshAddresses(s.build(), '192.168.9.0/30');
    expect(r.changes.map((c) => (c.kind === 'put' ? (c.doc.mesh as { address: string }).address : ''))).toEqual(['192.168.9.1', '192.168.9.2']);
    expect(r.unplaced).toEqual(['n3']);
  });

  it('never gives two nodes one address, over any order of arrivals', () => {
    fc.assert(fc.property(fc.array(fc.integer({ min: 0, max: 20 }), { minLength: 1, maxLength: 40 }), (arrivals) => {
      const s = new StateBuilder();
      for (const i of arrivals) {
        if (!s.nodes.has(`n${i}`)) s.node(`n${i}`, { mesh: mesh(i) });
        s.apply({ changes: allocateMeshAddresses(s.build(), '10.9.0.0/27').changes, compares: [] });
      }
      const addresses = [...s.nodes.values()].map((n) => n.value.mesh?.address);
      expect(addresses.every((a) => typeof a === 'string')).toBe(true);
      expect(new Set(addresses).size).toBe(addresses.length);
    }));
  });
});
