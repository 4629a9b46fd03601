// Cluster: members with role, leader, term, indexes, lag, round-trip time, health, version and
// the failure tolerance; polled every second (a leader change shows within about a second).

import { api } from '../api.ts';
import { failureTolerance } from '../format.ts';
import type { ClusterView as ClusterAnswer } from '../../api/cluster-routes.ts';
import { Badge, ErrorLine, html, type Confirmation, type Polled } from '../ui.ts';

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
  </section>`;
}
