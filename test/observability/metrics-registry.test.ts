// The Registry adapter over prom-client: the API the rest of the code registers through, and
// what comes out of it, parsed by promtool.

import { describe, expect, it } from 'vitest';
import { Counter, Histogram, Registry } from '../../src/base/metrics.ts';
import { families, promtool } from './promtool.ts';

describe('the metrics registry', () => {
  it('renders read-at-scrape gauges and counters, histograms and counters, as promtool reads them', async () => {
    const r = new Registry();
    let queued = 3;
    let dropped = 7;
    r.gauge({ name: 'test_queue_messages', help: 'Queued.', type: 'gauge', read: () => [{ labels: { peer: 'a' }, value: queued }] });
    r.gauge({ name: 'test_dropped_total', help: 'Dropped.', type: 'counter', read: () => [{ value: dropped }] });
    const h = r.histogram('test_duration_seconds', 'Durations.', [0.1, 1]);
    const c = r.counter('test_requests_total', 'Requests.', ['code']);
    h.observe(0.05);
    h.observe(0.5);
    c.inc({ code: 'ok' });
    c.inc({ code: 'ok' }, 2);
    queued = 4;
    dropped = 9;
    const text = await r.render();
    expect(text).toMatch(/^test_queue_messages\{peer="a"\} 4$/m);
    expect(text).toMatch(/^# TYPE test_dropped_total counter$/m);
    expect(text).toMatch(/^test_dropped_total 9$/m);
    expect(text).toMatch(/^test_duration_seconds_bucket\{le="0.1"\} 1$/m);
    expect(text).toMatch(/^test_duration_seconds_bucket\{le="\+Inf"\} 2$/m);
    expect(text).toMatch(/^test_duration_seconds_count 2$/m);
    expect(text).toMatch(/^test_requests_total\{code="ok"\} 3$/m);
    expect(h.count).toBe(2);
    const checked = promtool(['check', 'metrics'], text);
    expect(checked.stderr + checked.stdout).toBe('');
    expect(checked.status).toBe(0);
  });

  it('escapes label values instead of mangling them', async () => {
    const r = new Registry();
    const nasty = 'a "quoted" \\ back\nslash';
    r.gauge({ name: 'test_info', help: 'Info.', type: 'gauge', read: () => [{ labels: { v: nasty }, value: 1 }] });
    const text = await r.render();
    expect(text).toContain('test_info{v="a \\"quoted\\" \\\\ back\\nslash"} 1');
    expect(promtool(['check', 'metrics'], text).status).toBe(0);
  });

  it('takes histograms and counters made before it (as RaftNode makes its own), and renders other registries along', async () => {
    const h = new Histogram('test_made_early_seconds', 'Made early.', [1]);
    const c = new Counter('test_made_early_total', 'Made early.');
    h.observe(2);
    c.inc();
    const r = new Registry();
    r.add(h);
    r.add(c);
    const other = new Registry();
    other.gauge({ name: 'test_other', help: 'Other.', type: 'gauge', read: () => [{ value: 5 }] });
    r.include(other.prom);
    const fams = families(await r.render());
    expect([...fams]).toEqual([['test_made_early_seconds', 'histogram'], ['test_made_early_total', 'counter'], ['test_other', 'gauge']]);
    expect(await h.render()).toMatch(/^test_made_early_seconds_count 1$/m);
  });

  it('refuses a counter whose name does not end in _total, and a name registered twice', () => {
    const r = new Registry();
    expect(() => r.gauge({ name: 'test_dropped', help: 'x', type: 'counter', read: () => [] })).toThrow(/_total/);
    expect(() => new Counter('test_things', 'x')).toThrow(/_total/);
    r.gauge({ name: 'test_twice', help: 'x', type: 'gauge', read: () => [] });
    expect(() => r.gauge({ name: 'test_twice', help: 'x', type: 'gauge', read: () => [] })).toThrow(/already been registered/);
  });
});
