// Cluster: members with role, leader, term, indexes, lag, round-trip time, health, version and
// the failure tolerance; polled every second (a leader change shows within about a second).
// Below, throughput, latency and commit lag over time with the leader changes marked.

import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { Chart, chartPollMs, formats, marksOf, WindowPicker } from '../charts.ts';
import { failureTolerance } from '../format.ts';
import type { ClusterView as ClusterAnswer } from '../../api/cluster-routes.ts';
import { Badge, ErrorLine, html, usePoll, type Confirmation, type Polled } from '../ui.ts';

/**
 * Throughput and latency over time, from the leader's ring (it makes every write, forwarded ones
 * included; with no leader, the serving node's), with each leader change it saw as a mark.
 */
function ClusterCharts({ source }: { source: string }) {
  const [windowS, setWindowS] = useState(3600);
  const { data, error } = usePoll(() => api.nodeSeries(source, windowS), chartPollMs, [source, windowS]);
  const now = Date.now();
  return html`<section aria-labelledby="cluster-charts-h">
    <h2 id="cluster-charts-h">Over time</h2>
    <${WindowPicker} id="cluster-window" value=${windowS} set=${setWindowS} />
    <${ErrorLine} error=${error} />
    ${data === undefined ? html`<p>Loading…</p>` : html`<p class="muted">Samples of ${data.node.name}, one per ${data.intervalMs / 1000} s; dashed marks: leader changes it saw.</p>
    <div class="charts">
      <${Chart} id="throughput" title="Throughput" times=${data.times} windowMs=${windowS * 1000} nowMs=${now} format=${formats.rate}
        lines=${[{ label: 'writes', values: data.series.writes, cls: 'line-a' }, { label: 'reads', values: data.series.reads, cls: 'line-b' }]}
        marks=${marksOf(data.times, data.series.leaderChanges, (n) => (n === 1 ? 'leader change' : `${n} leader changes`))} />
      <${Chart} id="latency" title="Latency" times=${data.times} windowMs=${windowS * 1000} nowMs=${now} format=${formats.ms}
        lines=${[{ label: 'write', values: data.series.writeLatencyMs, cls: 'line-a' }, { label: 'read', values: data.series.readLatencyMs, cls: 'line-b' }]}
        marks=${marksOf(data.times, data.series.leaderChanges, (n) => (n === 1 ? 'leader change' : `${n} leader changes`))} />
      <${Chart} id="commit-lag" title="Commit lag" times=${data.times} windowMs=${windowS * 1000} nowMs=${now} format=${formats.count} yMin=${10}
        lines=${[{ label: 'entries', values: data.series.commitLag, cls: 'line-c' }]} />
    </div>`}
  </section>`;
}

/** `cluster` is the page's one poll of /v1/cluster (main.ts), every second while this view shows. */
export function ClusterView({ confirm, cluster }: { confirm: (c: Confirmation) => void; cluster: Polled<ClusterAnswer> }) {
  const { data: view, error } = cluster;
  if (view === undefined) return html`<${ErrorLine} error=${error} /><p>Loading…</p>`;
  const leader = view.members.find((m) => m.id === view.leader);
  const ft = failureTolerance(view);
  return html`<section aria-labelledby="cluster-h">
    <h1 id="cluster-h">Cluster</h1>
    <${ErrorLine} error=${error} />
    <dl class="facts">
      <div><dt>Leader</dt><dd data-testid="leader">${leader?.name ?? 'none'}</dd></div>
      <div><dt>Term</dt><dd data-testid="term">${view.term}</dd></div>
      <div><dt>Commit / applied</dt><dd>${view.commitIndex} / ${view.appliedIndex}</dd></div>
      <div><dt>Failure tolerance</dt><dd data-testid="tolerance">${ft.tolerance} of ${ft.voters} voters (${ft.healthy} healthy)</dd></div>
      <div><dt>Feature level</dt><dd>${view.featureLevel}</dd></div>
      <div><dt>Answered by</dt><dd>${view.members.find((m) => m.id === view.node)?.name ?? view.node} (${view.view === 'leader' ? "the leader's view" : 'its own view: no leader reachable'})</dd></div>
    </dl>
    <div class="scroll"><table>
      <caption>Members</caption>
      <thead><tr><th scope="col">Name</th><th scope="col">Role</th><th scope="col">Health</th><th scope="col">Match index</th><th scope="col">Lag</th><th scope="col">RTT</th><th scope="col">Version</th><th scope="col">Peer</th><th scope="col"></th></tr></thead>
      <tbody>${view.members.map((m) => html`<tr key=${m.id} data-member=${m.name}>
        <th scope="row">${m.name} ${m.id === view.leader ? html`<${Badge} kind="leader" text="leader" />` : null}</th>
        <td>${m.role}</td>
        <td><${Badge} kind=${m.health} text=${m.health} /></td>
        <td>${m.matchIndex ?? '—'}</td><td>${m.lag ?? '—'}</td><td>${m.rttMs === null ? '—' : `${m.rttMs.toFixed(1)} ms`}</td>
        <td>${m.softwareVersion ?? '—'}</td><td><code>${m.peerAddress}</code></td>
        <td>${m.role === 'voter' && m.id !== view.leader ? html`<button type="button" onClick=${() => confirm({
          title: `Make ${m.name} the leader?`, body: `Leadership moves from ${leader?.name ?? 'the current leader'} to ${m.name}. Clients do not notice a hand-over, but it is a change to the cluster.`,
          confirm: 'Transfer leadership', run: () => api.transferLeader(m.id),
        })}>Make leader</button>` : null}</td>
      </tr>`)}</tbody>
    </table></div>
    <${ClusterCharts} source=${view.leader ?? view.node} />
  </section>`;
}
