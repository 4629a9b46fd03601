// The address book, peer hints and the leader's address change (src/node/peer-address*.ts):
// only a member itself moves its address, the book survives a restart and gives way to the
// committed records, and the change the leader proposes changes no configuration.

import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PeerAddressBook, peerAddressFile } from '../../src/node/peer-address-book.ts';
import { PeerHints, peerHintFailuresMax } from '../../src/node/peer-address-hints.ts';
import { PeerAddresses, addressChange, announcedSelf, type AddressNode } from '../../src/node/peer-addresses.ts';
import type { MemberRecord } from '../../src/resources/membership.ts';
import { Membership } from '../../src/resources/membership.ts';
import type { ConfChange, ConfState } from '../../src/raft/types.ts';

const quiet = { debug() {}, info() {}, warn() {}, error() {} };
const dirs: string[] = [];
const tmp = (): string => {
  const d = mkdtempSync(path.join(os.tmpdir(), 'shoal-addr-'));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const a: MemberRecord = { id: 'aaaa', name: 'n1', peerAddress: '10.0.0.1:7200', apiAddress: '10.0.0.1:7100' };
const b: MemberRecord = { id: 'bbbb', name: 'n2', peerAddress: '10.0.0.2:7200', apiAddress: '10.0.0.2:7100' };
const cs = (voters: string[], learners: string[] = []): ConfState => ({ voters, votersOutgoing: [], learners, learnersNext: [], autoLeave: false });

describe('PeerAddressBook', () => {
  it('keeps what a member announced, across a restart (the file in the data dir)', () => {
    const dir = tmp();
    const book = new PeerAddressBook(dir, quiet);
    expect(book.learn(b, '10.0.9.2:7200', '10.0.9.2:7100')).toBe(true);
    expect(book.learn(b, '10.0.9.2:7200', '10.0.9.2:7100')).toBe(false);
    expect(existsSync(path.join(dir, peerAddressFile))).toBe(true);
    const again = new PeerAddressBook(dir, quiet);
    expect(again.get('bbbb')).toEqual({ peerAddress: '10.0.9.2:7200', apiAddress: '10.0.9.2:7100', over: '10.0.0.2:7200' });
  });

  it('takes nothing that is not HOST:PORT, and no entry equal to the record', () => {
    const book = new PeerAddressBook(tmp(), quiet);
    expect(book.learn(b, 'not an address')).toBe(false);
    expect(book.learn(b, '10.0.9.2:99999')).toBe(false);
    expect(book.learn(b, b.peerAddress, b.apiAddress)).toBe(false);
    expect(book.list()).toEqual([]);
  });

  it('drops an entry once the committed record says the same, or moved since it was learned', () => {
    const book = new PeerAddressBook(tmp(), quiet);
    book.learn(a, '10.0.9.1:7200');
    book.learn(b, '10.0.9.2:7200');
    // a's record now holds what a announced; b's record moved elsewhere (a newer word, committed).
    const changed = book.reconcile([{ ...a, peerAddress: '10.0.9.1:7200' }, { ...b, peerAddress: '10.0.7.2:7200' }]);
    expect(changed).toBe(true);
    expect(book.list()).toEqual([]);
  });

  it('keeps an entry while the record still holds the old address, and forgets ids no longer members', () => {
    const book = new PeerAddressBook(tmp(), quiet);
    book.learn(a, '10.0.9.1:7200');
    book.learn(b, '10.0.9.2:7200');
    expect(book.reconcile([a])).toBe(true);
    expect(book.list().map(([id]) => id)).toEqual(['aaaa']);
  });

  it('sets a damaged file aside and starts empty', () => {
    const dir = tmp();
    writeFileSync(path.join(dir, peerAddressFile), '{"version": 1, "entries": {"x": {"peerAddress": "nope"}}}');
    const warnings: string[] = [];
    const book = new PeerAddressBook(dir, { ...quiet, warn: (m: string) => warnings.push(m) });
    expect(book.list()).toEqual([]);
    expect(readFileSync(path.join(dir, `${peerAddressFile}.damaged`), 'utf8')).toContain('nope');
    expect(warnings.join('\n')).toContain('damaged');
  });
});

describe('PeerHints', () => {
  it('probes each hint until it answers, backing off after failures', () => {
    const hints = new PeerHints(['h:1'], () => 0);
    expect(hints.due(0)).toEqual(['h:1']);
    expect(hints.due(0)).toEqual([]); // being probed
    const failed = hints.settle('h:1', 0, { error: 'ECONNREFUSED' });
    expect(failed.firstFailure).toBe(true);
    expect(hints.due(100)).toEqual([]);
    expect(hints.due(1000)).toEqual(['h:1']);
    expect(hints.settle('h:1', 1000, { id: 'bbbb' })).toEqual({ address: 'h:1', id: 'bbbb' });
    expect(hints.size).toBe(0);
  });

  it("gives a peer's hint up after repeated failures, but never the operator's", () => {
    const hints = new PeerHints(['op:1'], () => 0);
    hints.addFromPeer(['peer:1', 'op:1']);
    let now = 0;
    for (let i = 0; i < peerHintFailuresMax; i++) {
      now += 60_000;
      for (const h of hints.due(now)) hints.settle(h, now, { error: 'timeout' });
    }
    expect(hints.operatorHints()).toEqual(['op:1']);
    expect(hints.size).toBe(1);
  });
});

describe('addressChange', () => {
  it('re-adds each moved member as what it is, its new record in the context', () => {
    const learner: MemberRecord = { id: 'cccc', name: 'n3', peerAddress: '10.0.0.3:7200', apiAddress: '10.0.0.3:7100' };
    const book = new Map([['bbbb', { peerAddress: '10.0.9.2:7200' }], ['cccc', { peerAddress: '10.0.9.3:7200', apiAddress: '10.0.9.3:7100' }]]);
    const cc = addressChange([a, b, learner], cs(['aaaa', 'bbbb'], ['cccc']), 'aaaa', { peerAddress: '10.0.9.1:7200', apiAddress: '10.0.9.1:7100' }, (id) => book.get(id));
    expect(cc?.change.changes).toEqual([
      { type: 'addVoter', node: 'aaaa' }, { type: 'addVoter', node: 'bbbb' }, { type: 'addLearner', node: 'cccc' },
    ]);
    // Applied as any conf change's context is: the records move, nothing else does.
    const m = new Membership();
    m.restore([a, b, learner]);
    m.applyConfChange(cc?.change as ConfChange);
    expect(m.list()).toEqual([
      { ...a, peerAddress: '10.0.9.1:7200', apiAddress: '10.0.9.1:7100' },
      { ...b, peerAddress: '10.0.9.2:7200' },
      { ...learner, peerAddress: '10.0.9.3:7200', apiAddress: '10.0.9.3:7100' },
    ]);
  });

  it('proposes nothing when the records are right, or while a joint configuration is in effect', () => {
    expect(addressChange([a, b], cs(['aaaa', 'bbbb']), 'aaaa', { peerAddress: a.peerAddress, apiAddress: a.apiAddress }, () => undefined)).toBeUndefined();
    const joint = { ...cs(['aaaa']), votersOutgoing: ['aaaa', 'bbbb'] };
    expect(addressChange([a, b], joint, 'aaaa', { peerAddress: '10.0.9.1:7200' }, () => undefined)).toBeUndefined();
  });
});

describe('announcedSelf', () => {
  it('announces advertise, else the listen address, never a wildcard or port 0', () => {
    expect(announcedSelf({ api: { listen: '10.0.0.1:7100' }, peer: { listen: '10.0.0.1:7200' } }, undefined)).toEqual({ peerAddress: '10.0.0.1:7200', apiAddress: '10.0.0.1:7100' });
    expect(announcedSelf({ api: { listen: '0.0.0.0:7100' }, peer: { listen: '0.0.0.0:7200', advertise: 'n1.lan:7200' } }, '0.0.0.0:7200')).toEqual({ peerAddress: 'n1.lan:7200' });
    expect(announcedSelf({ api: { listen: '127.0.0.1:0' }, peer: { listen: '127.0.0.1:0' } }, '127.0.0.1:40001')).toEqual({ peerAddress: '127.0.0.1:40001' });
  });
});

describe('PeerAddresses', () => {
  class FakeNode implements AddressNode {
    readonly id = 'aaaa';
    readonly membership = new Membership();
    isLeader = false;
    currentTerm = 2;
    appliedTerm = 2;
    refreshed = 0;
    proposed: ConfChange[] = [];
    constructor() { this.membership.restore([a, b]); }
    confState(): ConfState { return cs(['aaaa', 'bbbb']); }
    changeMembership(cc: ConfChange): Promise<void> {
      this.proposed.push(cc);
      this.membership.applyConfChange(cc);
      return Promise.resolve();
    }
    refreshPeers(): void { this.refreshed++; }
  }

  const make = (node: FakeNode, identify: (addr: string) => Promise<string> = () => Promise.reject(new Error('down'))): PeerAddresses => {
    const p = new PeerAddresses({ dataDir: tmp(), log: quiet, hints: [], self: () => ({ peerAddress: '10.0.9.1:7200', apiAddress: '10.0.9.1:7100' }), identify, intervalMs: 60_000 });
    p.start(node);
    return p;
  };

  it("moves a member only on that member's own hello, and never moves this node", () => {
    const node = new FakeNode();
    const p = make(node);
    p.heard('bbbb', { peerAddress: '10.0.9.2:7200', apiAddress: '10.0.9.2:7100' });
    expect(p.peerAddressOf(b)).toBe('10.0.9.2:7200');
    expect(node.refreshed).toBe(1);
    // The hello says where it is itself; what it says of others is only a hint to probe.
    p.heard('bbbb', { peerHints: ['10.0.5.5:7200'] });
    expect(p.peerAddressOf(a)).toBe(a.peerAddress);
    p.heard('aaaa', { peerAddress: '10.6.6.6:7200' });
    expect(p.book.get('aaaa')).toBeUndefined();
    p.heard('zzzz', { peerAddress: '10.6.6.6:7200' });
    expect(p.book.get('zzzz')).toBeUndefined();
    p.close();
  });

  it('learns a hint from the certificate that answers there', async () => {
    const node = new FakeNode();
    const probed: string[] = [];
    const p = make(node, (addr) => {
      probed.push(addr);
      return Promise.resolve(addr === '10.0.5.5:7200' ? 'bbbb' : 'zzzz');
    });
    p.heard('bbbb', { peerHints: ['10.0.5.5:7200', '10.0.6.6:7200'] });
    await new Promise((r) => setImmediate(r));
    expect(p.peerAddressOf(b)).toBe('10.0.5.5:7200');
    expect(p.book.get('zzzz')).toBeUndefined();
    expect(probed).toEqual(['10.0.5.5:7200', '10.0.6.6:7200']);
    // An address already dialled is not probed again when a later hello passes it on.
    p.heard('bbbb', { peerHints: ['10.0.5.5:7200', a.peerAddress] });
    await new Promise((r) => setImmediate(r));
    expect(probed).toHaveLength(2);
    p.close();
  });

  it('as leader, commits the announced addresses into the records', async () => {
    const node = new FakeNode();
    node.isLeader = true;
    const p = new PeerAddresses({ dataDir: tmp(), log: quiet, hints: [], self: () => ({ peerAddress: '10.0.9.1:7200', apiAddress: '10.0.9.1:7100' }), identify: () => Promise.reject(new Error('x')), intervalMs: 60_000 });
    p.start(node);
    await new Promise((r) => setImmediate(r));
    expect(node.proposed).toHaveLength(1);
    expect(node.membership.get('aaaa')?.peerAddress).toBe('10.0.9.1:7200');
    p.close();
  });
});
