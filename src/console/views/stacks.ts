// Stacks: each compose stack with what it made (services, networks, secrets, the policy that
// publishes its ports), its tasks running of those wanted, the order its depends_on sets, and
// the files of its last deploy. A service links to the Services view, opened on it.

import type { StackView } from '../../api/stack-routes.ts';
import { api } from '../api.ts';
import { Badge, ErrorLine, html, usePoll } from '../ui.ts';

const when = (ms: number): string => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z').replace('T', ' ');

function dependsText(s: StackView): string {
  const lines = Object.entries(s.record.dependsOn).flatMap(([svc, deps]) => Object.entries(deps).map(([d, c]) => `${svc} after ${d} (${c.replace('service_', '').replace('_', ' ')})`));
  return lines.length === 0 ? '—' : lines.join('; ');
}

export function StacksView({ tick }: { tick: number }) {
  const { data, error } = usePoll(() => api.stacks(), 2000, [tick]);
  return html`<section aria-labelledby="stacks-h">
    <h1 id="stacks-h">Stacks</h1>
    <${ErrorLine} error=${error} />
    ${data === undefined ? html`<p>Loading…</p>` : data.items.length === 0 ? html`<p>No stacks. Deploy a compose file with <code>shoal stack deploy -c compose.yaml NAME</code>.</p>` : html`<div class="scroll"><table>
      <thead><tr><th scope="col">Name</th><th scope="col">Tasks</th><th scope="col">Services</th><th scope="col">Networks</th><th scope="col">Secrets</th><th scope="col">Order</th><th scope="col">Files</th><th scope="col">Updated (UTC)</th></tr></thead>
      <tbody>${data.items.map((s: StackView) => html`<tr key=${s.name} data-stack=${s.name}>
        <th scope="row">${s.name}</th>
        <td><${Badge} kind=${s.running >= s.desired ? 'running' : 'pending'} text=${`${s.running}/${s.desired}`} /></td>
        <td>${s.record.services.map((n, i) => html`${i > 0 ? ', ' : ''}<a href=${`#services/${encodeURIComponent(n)}`}>${n}</a>`)}</td>
        <td>${s.record.networks.join(', ') || '—'}</td>
        <td>${s.record.secrets.join(', ') || '—'}</td>
        <td>${dependsText(s)}</td>
        <td>${s.record.files.join(', ')}</td>
        <td>${when(s.record.updatedAt)}</td>
      </tr>`)}</tbody>
    </table></div>`}
  </section>`;
}
