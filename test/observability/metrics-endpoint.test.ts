// GET /metrics of a real node, against what docs/monitoring.md, the alert rules and the Grafana
// dashboard say: every metric they name exists, the output is valid Prometheus text (promtool),
// and the rules parse and pass their unit tests.

import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { exposes, families, promtool } from './promtool.ts';
import { oneNode, type OneNode } from './one-node.ts';

const docsDir = fileURLToPath(new URL('../../docs/', import.meta.url));
const read = (p: string): string => readFileSync(`${docsDir}${p}`, 'utf8');

/** The metrics of docs/monitoring.md's tables: rows that start with | `name` |. */
function documentedMetrics(): string[] {
  return [...read('monitoring.md').matchAll(/^\| `([a-z_:][a-z0-9_:]*)` \|/gm)].map((m) => m[1] as string);
}

/** Metric names in PromQL: identifiers of shoal's and prom-client's families (not functions, labels or `up`). */
function metricsIn(expr: string): string[] {
  return [...expr.matchAll(/\b((?:shoal|nodejs|process)_[a-z0-9_]+)\b/g)].map((m) => m[1] as string);
}

interface Panel { title?: string; targets?: { expr?: string }[]; panels?: Panel[] }

function dashboardExprs(): string[] {
  const dash = JSON.parse(read('monitoring/shoal-dashboard.json')) as { panels: Panel[] };
  const walk = (ps: Panel[]): string[] => ps.flatMap((p) => [...(p.targets ?? []).map((t) => t.expr ?? ''), ...walk(p.panels ?? [])]);
  return walk(dash.panels);
}

function ruleExprs(): string[] {
  const rules = parseYaml(read('monitoring/shoal-rules.yml')) as { groups: { rules: { expr: string }[] }[] };
  return rules.groups.flatMap((g) => g.rules.map((r) => r.expr));
}

let n: OneNode;
let text: string;

beforeAll(async () => {
  n = await oneNode();
  // A write, a read, an unknown path: every kind of series has samples.
  const put = await fetch(n.url('/v1/docs/notes/first'), { method: 'PUT', headers: { 'content-type': 'application/json' }, body: '{"x":1}' });
  expect(put.status).toBe(200);
  await fetch(n.url('/v1/docs/notes/first'));
  await fetch(n.url('/no/such/route'));
  // Until the node's agent has registered it, so the control plane's figures have a sample.
  const deadline = Date.now() + 20_000;
  for (;;) {
    const res = await fetch(n.url('/metrics'));
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    text = await res.text();
    if (/^shoal_control_nodes\{/m.test(text) || Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 100));
  }
}, 60_000);

afterAll(async () => {
  await n.close();
});

describe('GET /metrics', () => {
  it('is valid Prometheus text format that promtool parses and lints without a complaint', () => {
    const r = promtool(['check', 'metrics'], text);
    expect(r.stdout + r.stderr).toBe('');
    expect(r.status).toBe(0);
  });

  it('has every metric docs/monitoring.md documents, and documents every shoal_ metric it has', () => {
    const fams = families(text);
    const documented = documentedMetrics();
    expect(documented.length).toBeGreaterThan(30);
    expect(documented.filter((m) => !exposes(fams, m))).toEqual([]);
    expect([...fams.keys()].filter((m) => m.startsWith('shoal_') && !documented.includes(m))).toEqual([]);
    // The types the tables give are the types exported.
    for (const m of read('monitoring.md').matchAll(/^\| `([a-z_:][a-z0-9_:]*)` \| (gauge|counter|histogram|summary) \|/gm)) {
      expect(`${m[1]} ${fams.get(m[1] as string)}`).toBe(`${m[1]} ${m[2]}`);
    }
  });

  it('has every shoal_ metric any page of docs/ or the README names (the limits and metrics tables of operations.md too)', () => {
    const fams = families(text);
    // Names documented as removed ("Names that changed"): they must stay gone.
    const removed = ['shoal_gc_pause_seconds'];
    for (const m of removed) {
      expect(read('monitoring.md')).toMatch(new RegExp(`\`${m}\`[^.]*is gone`));
      expect(exposes(fams, m)).toBe(false);
    }
    const pages = [...readdirSync(docsDir).filter((f) => f.endsWith('.md')), '../README.md'];
    const named = new Map<string, string>();
    // An nftables table (`inet shoal_drill`) is not a metric.
    for (const page of pages) for (const m of read(page).matchAll(/(?<!inet )\b(shoal_[a-z0-9_]+)/g)) named.set(m[1] as string, page);
    expect(named.size).toBeGreaterThan(30);
    for (const m of ['shoal_overload_refusals_total', 'shoal_proposals_failed_total', 'shoal_peer_send_dropped_total', 'shoal_http_request_duration_seconds', 'shoal_apply_invalid_commands_total']) {
      expect(read('operations.md')).toContain(`\`${m}`);
    }
    expect([...named].filter(([m]) => !removed.includes(m) && !exposes(fams, m)).map(([m, page]) => `${m} (${page})`)).toEqual([]);
  });

  it('names counters with _total, and labels API requests by route pattern, never by URL', () => {
    for (const [name, type] of families(text)) if (type === 'counter') expect(name).toMatch(/_total$/);
    expect(text).toMatch(/^shoal_http_request_duration_seconds_count\{route="\/v1\/docs\/:collection\/:id",method="PUT",status="200"\} 1$/m);
    expect(text).toMatch(/^shoal_http_request_duration_seconds_count\{route="unmatched",method="GET",status="404"\} 1$/m);
    expect(text).not.toContain('notes/first');
    expect(text).toMatch(/^shoal_proposals_committed_total [1-9]\d*$/m);
    expect(text).toMatch(/^shoal_node_failed\{code="disk_stalled"\} 0$/m);
    expect(text).toMatch(/^shoal_raft_has_leader 1$/m);
    expect(text).toMatch(/^shoal_node_info\{id="[^"]+",name="solo",cluster="[^"]+",version="[^"]+"\} 1$/m);
    expect(text).toMatch(/^shoal_control_nodes\{state="ready",availability="active"\} 1$/m);
  });
});

describe('the Grafana dashboard', () => {
  it('queries only metrics a node exports', () => {
    const fams = families(text);
    const named = [...new Set(dashboardExprs().flatMap(metricsIn))];
    expect(named.length).toBeGreaterThan(20);
    expect(named.filter((m) => !exposes(fams, m))).toEqual([]);
  });

  it('puts every panel on the chosen data source', () => {
    const dash = JSON.parse(read('monitoring/shoal-dashboard.json')) as { panels: (Panel & { type: string; datasource?: { uid?: string } })[]; templating: { list: { name: string }[] } };
    expect(dash.templating.list.map((v) => v.name)).toEqual(['datasource', 'job']);
    for (const p of dash.panels.filter((x) => x.type !== 'row')) expect(`${p.title}: ${p.datasource?.uid}`).toBe(`${p.title}: \${datasource}`);
  });
});

describe('the alert rules', () => {
  it('parse with promtool check rules', () => {
    const r = promtool(['check', 'rules', `${docsDir}monitoring/shoal-rules.yml`]);
    expect(r.stdout).toContain('SUCCESS');
    expect(r.status).toBe(0);
  });

  it('pass their unit tests (promtool test rules)', () => {
    const r = promtool(['test', 'rules', `${docsDir}monitoring/shoal-rules.test.yml`]);
    expect(r.stdout + r.stderr).toContain('SUCCESS');
    expect(r.status).toBe(0);
  });

  it('name only metrics a node exports, and cover the alerts an operator starts with', () => {
    const fams = families(text);
    expect([...new Set(ruleExprs().flatMap(metricsIn))].filter((m) => !exposes(fams, m))).toEqual([]);
    const rules = read('monitoring/shoal-rules.yml');
    for (const alert of ['ShoalNoLeader', 'ShoalNodeDown', 'ShoalMemberUnreachable', 'ShoalSyncSlowForElectionTimeout', 'ShoalApplyLagGrowing', 'ShoalDiskFillingUp']) {
      expect(rules).toContain(`alert: ${alert}`);
      expect(read('monitoring.md')).toContain(`\`${alert}\``);
    }
  });
});
