// Messages that obey every rule a transport can check (transport/check-message.ts) but that no
// correct peer sends in the receiver's state: the core ignores them rather than reach one of its
// assertions, which are for its own bugs.

import { describe, expect, it } from 'vitest';
import { Cluster } from './harness.ts';

describe('messages the core ignores, depending on its state', () => {
  it('a leader ignores an append response for an index past its last one, and goes on replicating', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    const { term, lastIndex } = c.status('a');
    // Taken, it moved b's next index past the log, and the next append to b reached the
    // assertion in log.term().
    c.inject({ type: 'appResp', from: 'b', to: 'a', term, index: lastIndex + 100 });
    expect(() => c.deliver({ type: 'appResp' })).not.toThrow();
    expect(c.status('a').progress?.b?.match).toBeLessThanOrEqual(lastIndex);
    c.propose('a', 'after');
    c.stabilize();
    for (const id of ['a', 'b', 'c']) expect(c.state(id)).toEqual(['after']);
  });

  it('a leader ignores a rejection for an index past its last one', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    const { term, lastIndex } = c.status('a');
    c.inject({ type: 'appResp', from: 'b', to: 'a', term, index: lastIndex + 7, reject: true, rejectHint: lastIndex + 7 });
    expect(() => c.deliver({ type: 'appResp' })).not.toThrow();
    c.propose('a', 'after');
    c.stabilize();
    expect(c.state('b')).toEqual(['after']);
  });
});
