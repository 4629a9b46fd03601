// The health summary on every view's header (GET /v1/summary): leader and quorum with the
// failures the cluster can still take, nodes not ready, services not converged, failing tasks and
// the documented alerts whose condition holds now, each a link to the view (and row) where it is.

import type { HealthSummary } from '../api/health-summary.ts';
import { html } from './ui.ts';

export interface SummaryItem {
  key: string;
  text: string;
  href: string;
  level: 'ok' | 'warn' | 'bad';
}

/** How many services not converged are named before `+N more`. */
const servicesNamedMax = 5;

const plural = (n: number, one: string, many: string): string => `${n} ${n === 1 ? one : many}`;

function quorumItem(s: HealthSummary): SummaryItem {
  const q = s.quorum;
  if (s.leader === null) return { key: 'quorum', text: `No leader (${q.reachable} of ${q.voters} voters reachable from ${s.node})`, href: '#cluster', level: 'bad' };
  if (!q.hasQuorum) return { key: 'quorum', text: `No quorum: ${q.reachable} of ${q.voters} voters reachable`, href: '#cluster', level: 'bad' };
  const level = q.tolerance === 0 && q.voters > 1 ? 'warn' : 'ok';
  return { key: 'quorum', text: `Leader ${s.leader.name} · quorum, tolerates ${plural(q.tolerance, 'failure', 'failures')}`, href: '#cluster', level };
}

/** The header's items, most urgent kinds first; pure (tested in test/console/console-client.test.ts). */
export function summaryItems(s: HealthSummary): SummaryItem[] {
  const items: SummaryItem[] = [quorumItem(s)];
  if (s.nodesNotReady.length === 0) items.push({ key: 'nodes', text: 'Nodes ready', href: '#nodes', level: 'ok' });
  for (const n of s.nodesNotReady) {
    items.push({ key: `node-${n.id}`, text: `Node ${n.name} ${n.state}`, href: `#nodes/${encodeURIComponent(n.name)}`, level: n.state === 'down' ? 'bad' : 'warn' });
  }
  if (s.servicesNotConverged.length === 0) items.push({ key: 'services', text: 'Services converged', href: '#services', level: 'ok' });
  for (const v of s.servicesNotConverged.slice(0, servicesNamedMax)) {
    const pending = v.pending > 0 ? `, ${v.pending} pending` : '';
    items.push({ key: `service-${v.name}`, text: `${v.name} ${v.running}/${v.desired}${pending}${v.updating ? ', updating' : ''}`, href: `#services/${encodeURIComponent(v.name)}`, level: 'warn' });
  }
  const more = s.servicesNotConverged.length - servicesNamedMax;
  if (more > 0) items.push({ key: 'services-more', text: `+${more} more not converged`, href: '#services', level: 'warn' });
  if (s.failingTasksTotal > 0) {
    const first = s.failingTasks[0];
    items.push({ key: 'failing', text: plural(s.failingTasksTotal, 'failing task', 'failing tasks'), href: first !== undefined ? `#services/${encodeURIComponent(first.service)}` : '#services', level: 'bad' });
  }
  for (const [i, a] of s.alerts.entries()) {
    const href = a.subject.kind === 'cluster' || a.subject.name === null ? '#cluster' : `#${a.subject.kind}s/${encodeURIComponent(a.subject.name)}`;
    items.push({ key: `alert-${i}-${a.alert}`, text: `${a.alert}: ${a.summary}`, href, level: a.severity === 'critical' ? 'bad' : 'warn' });
  }
  return items;
}

export function SummaryBar({ data, error }: { data: HealthSummary | undefined; error: string | undefined }) {
  if (data === undefined) return html`<ul class="summary" aria-label="Health summary" data-testid="summary"><li><span class="item">${error ?? 'Health: loading…'}</span></li></ul>`;
  return html`<ul class="summary" aria-label="Health summary" data-testid="summary">
    ${summaryItems(data).map((it) => html`<li key=${it.key}><a class=${it.level} href=${it.href} data-item=${it.key}>${it.text}</a></li>`)}
  </ul>`;
}
