// How the control plane's state is shown (control-format.ts): the progress line with the tasks of
// a rolling update's new spec and the serving ones apart, tasks on unreachable nodes, and
// service ps messages fitted to the terminal (--no-trunc). Pure: no cluster, no process.

import { describe, expect, it } from 'vitest';
import { fittedTableText, psHead, psRows, replicasText, serviceProgress, shorten } from '../../src/cli/control-format.ts';
import { pull, task, view } from './service-views.ts';

describe('progress and replicas', () => {
  it('shows the tasks of the new spec and the serving ones apart during an update', () => {
    const v = view({ running: 0, serving: 5, desired: 5, updating: true }, { specVersion: 3, update: 'updating', replicas: 5 });
    expect(serviceProgress(v)).toBe('web: 0/5 new (spec version 3), 5 serving, updating');
    expect(replicasText(v)).toBe('0/5 (5 serving)');
    const back = view({ running: 2, serving: 4, desired: 5, updating: true, stopping: 1 }, { specVersion: 4, update: 'rolling-back', replicas: 5 });
    expect(serviceProgress(back)).toBe('web: 2/5 new (spec version 4), 4 serving, rolling back, 1 stopping');
  });

  it('counts tasks on an unreachable node apart from the running ones', () => {
    const v = view({ running: 2, serving: 2, unreachable: 1 });
    expect(serviceProgress(v)).toBe('web: 2/3 running, 1 on an unreachable node');
    expect(replicasText(v)).toBe('2/3 (1 unreachable)');
    expect(serviceProgress(view({ running: 1, serving: 1, unreachable: 2 }))).toBe('web: 1/3 running, 2 on unreachable nodes');
  });

  it('reads an older node that has no serving or unreachable counts', () => {
    const v = view({ running: 2 });
    delete v.status.serving;
    delete v.status.unreachable;
    expect(serviceProgress({ ...v, status: { ...v.status, updating: true } })).toBe('web: 2/3 running, updating');
    expect(replicasText(v)).toBe('2/3');
  });
});

describe('service ps messages', () => {
  const long = `${pull}: Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io on 127.0.0.53:53: server misbehaving`;
  const rows = psRows([task(1, 'failed', long)]);

  it('fits the message to the terminal, cut at a word with an ellipsis', () => {
    const text = fittedTableText(psHead, rows, 100);
    for (const line of text.split('\n')) expect(line.length).toBeLessThanOrEqual(100);
    const cut = text.split('\n')[1] ?? '';
    expect(cut.endsWith('…')).toBe(true);
    expect(cut).toMatch(/ [a-z_:]+…$/);
    expect(long).toContain(cut.slice(cut.indexOf('image_pull_failed'), -1));
  });

  it('prints it whole with --no-trunc, and capped at 80 characters when the output is not a terminal', () => {
    expect(fittedTableText(psHead, rows, 100, true)).toContain(long);
    const piped = (fittedTableText(psHead, rows, null).split('\n')[1] ?? '');
    expect(piped.slice(piped.indexOf('image_pull_failed')).length).toBeLessThanOrEqual(80);
    expect(shorten('pull access denied for ghost', 20)).toBe('pull access denied…');
    expect(shorten('abcdefghijkl', 5)).toBe('abcd…');
    expect(shorten('short', 10)).toBe('short');
  });

  it('keeps 20 characters of message on a very narrow terminal', () => {
    const cut = fittedTableText(psHead, rows, 30).split('\n')[1] ?? '';
    const message = cut.slice(cut.indexOf('image_pull_failed'));
    expect(message.length).toBeLessThanOrEqual(20);
    expect(message.length).toBeGreaterThanOrEqual(12);
  });
});
