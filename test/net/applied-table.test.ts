// The quiet-pass rule both table loops share (net/applied-table.ts): apply unless the rendering,
// stamp aside, is the one applied last and that table is in force (its stamp, its sets); check
// the DOCKER-USER rule on quiet passes only every dockerRuleCheckMs after the last check; never
// quiet while an unfinished apply left something owed.

import { describe, expect, it } from 'vitest';
import { AppliedTable, ApplyUnfinishedError, dockerRuleCheckMs, setsKey, withoutStamp } from '../../net/applied-table.ts';

const stamp = (revision: number): string => `shoal node=n1 term=5 revision=${revision}`;
const text = (revision: number, permit: string): string => `table inet shoal {\n  comment "${stamp(revision)}"\n  elements = { ${permit} }\n  counter comment "${stamp(revision)}"\n}\n`;

describe('withoutStamp and setsKey', () => {
  it('takes every occurrence of the stamp out, so two renderings of one table from two revisions are equal', () => {
    expect(withoutStamp(text(7, 'a'), stamp(7))).toBe(withoutStamp(text(9, 'a'), stamp(9)));
    expect(withoutStamp(text(7, 'a'), stamp(7))).not.toContain('revision');
    expect(withoutStamp(text(7, 'a'), stamp(7))).not.toBe(withoutStamp(text(9, 'b'), stamp(9)));
  });

  it('keys sets whatever order and duplicates their elements come in, and keeps the sets apart', () => {
    expect(setsKey(['b', 'a', 'a'], ['c'])).toBe(setsKey(['a', 'b'], ['c']));
    expect(setsKey(['a', 'b'], [])).not.toBe(setsKey(['a'], ['b']));
    expect(setsKey([], [])).not.toBe(setsKey(['a'], []));
  });
});

describe('AppliedTable', () => {
  const applied = { body: withoutStamp(text(7, 'a'), stamp(7)), term: 5, revision: 7, sets: setsKey(['a']) };

  it('applies when nothing was applied yet or no table is in force', () => {
    const t = new AppliedTable(() => 0);
    expect(t.revision).toBeNull();
    expect(t.decide(applied.body, { term: 5, revision: 7, sets: applied.sets })).toBe('apply');
    t.recordApplied(applied, true);
    expect(t.revision).toBe(7);
    expect(t.decide(applied.body, null)).toBe('apply');
  });

  it('applies nothing only when the body is the one applied last and its stamp and sets are in force', () => {
    const t = new AppliedTable(() => 0);
    t.recordApplied(applied, true);
    const body9 = withoutStamp(text(9, 'a'), stamp(9));
    expect(t.decide(body9, { term: 5, revision: 7, sets: applied.sets })).toBe('unchanged');
    // Another table: another body; or the kernel's table is not the one applied (stamp, or a set flushed).
    expect(t.decide(withoutStamp(text(9, 'b'), stamp(9)), { term: 5, revision: 7, sets: applied.sets })).toBe('apply');
    expect(t.decide(body9, { term: 4, revision: 7, sets: applied.sets })).toBe('apply');
    expect(t.decide(body9, { term: 5, revision: 6, sets: applied.sets })).toBe('apply');
    expect(t.decide(body9, { term: 5, revision: 7, sets: setsKey([]) })).toBe('apply');
    // The revision stays that of the table applied.
    expect(t.revision).toBe(7);
  });

  it('checks the DOCKER-USER rule on quiet passes once dockerRuleCheckMs have gone by since the last check, an apply\'s included', async () => {
    let now = 1000;
    const t = new AppliedTable(() => now);
    let checks = 0;
    const check = async (): Promise<boolean> => { checks++; return true; };
    // Nothing checked yet: due at once.
    expect(await t.maybeCheckDockerRule(check)).toBe(true);
    now += dockerRuleCheckMs - 1;
    expect(await t.maybeCheckDockerRule(check)).toBe(false);
    now += 1;
    expect(await t.maybeCheckDockerRule(check)).toBe(true);
    // An apply that checked it starts the wait again; one that did not (no rule needed) does not.
    now += dockerRuleCheckMs;
    t.recordApplied(applied, true);
    expect(await t.maybeCheckDockerRule(check)).toBe(false);
    now += dockerRuleCheckMs;
    t.recordApplied(applied, false);
    expect(await t.maybeCheckDockerRule(check)).toBe(true);
    expect(checks).toBe(3);
  });

  it('does not count a check that failed: the next quiet pass tries again', async () => {
    const t = new AppliedTable(() => 0);
    await expect(t.maybeCheckDockerRule(async () => { throw new Error('iptables: timed out'); })).rejects.toThrow(/timed out/);
    expect(await t.maybeCheckDockerRule(async () => true)).toBe(true);
  });

  it('is never quiet while something is owed: what an unfinished apply carries, until an apply finishes', async () => {
    class Unfinished extends ApplyUnfinishedError<string[]> {}
    const t = new AppliedTable<string[]>(() => 0);
    t.recordApplied(applied, true);
    const inForce = { term: 5, revision: 7, sets: applied.sets };
    expect(t.decide(applied.body, inForce)).toBe('unchanged');
    // Another failure (nft -f refused: nothing went in) owes nothing.
    await expect(t.applyOwing(async () => { throw new Error('nft -f - exited with code 1'); }, Unfinished)).rejects.toThrow(/nft -f/);
    expect(t.owed).toBeNull();
    await expect(t.applyOwing(async () => { throw new Unfinished(['10.255.0.2 tcp 80'], new Error('conntrack: refused')); }, Unfinished)).rejects.toThrow(/conntrack: refused/);
    expect(t.owed).toEqual(['10.255.0.2 tcp 80']);
    expect(t.decide(applied.body, inForce)).toBe('apply');
    // The next apply is handed what is owed; a failure that is not an unfinished apply keeps it.
    const handed: (string[] | null)[] = [];
    await expect(t.applyOwing(async (owed) => { handed.push(owed); throw new Error('nft -f - timed out'); }, Unfinished)).rejects.toThrow(/timed out/);
    expect(handed).toEqual([['10.255.0.2 tcp 80']]);
    expect(t.owed).toEqual(['10.255.0.2 tcp 80']);
    // An unfinished apply with nothing left to end owes nothing.
    await expect(t.applyOwing(async () => { throw new Unfinished(null, new Error('iptables: timed out')); }, Unfinished)).rejects.toThrow(/iptables/);
    expect(t.owed).toBeNull();
    await expect(t.applyOwing(async () => { throw new Unfinished(['x'], new Error('conntrack: refused')); }, Unfinished)).rejects.toThrow();
    // An apply that finishes clears it.
    expect(await t.applyOwing(async (owed) => owed, Unfinished)).toEqual(['x']);
    t.recordApplied(applied, true);
    expect(t.owed).toBeNull();
    expect(t.decide(applied.body, inForce)).toBe('unchanged');
  });

  it('an unfinished apply\'s error says what its cause said and carries what is owed', () => {
    const cause = new Error('conntrack -R - exited with code 1: Operation not permitted');
    const err = new ApplyUnfinishedError(['x'], cause);
    expect(err.message).toBe(cause.message);
    expect(err.cause).toBe(cause);
    expect(err.owed).toEqual(['x']);
  });
});
