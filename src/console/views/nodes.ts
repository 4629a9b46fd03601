// Nodes: capacity and what is reserved, availability, state, epoch and tasks; drain, pause and
// activate, each confirmed first (drain moves the node's work).

import type { NodeView } from '../../api/control-views.ts';
import { api } from '../api.ts';
import { bytes, cores } from '../format.ts';
import { Badge, ErrorLine, html, usePoll, type Confirmation } from '../ui.ts';

const consequences = {
  drain: 'Its tasks are stopped and started on other nodes, and it takes no new ones.',
  pause: 'It keeps its tasks but takes no new ones.',
  active: 'It takes new tasks again (tasks moved off it do not come back on their own).',
} as const;

function actions(n: NodeView, confirm: (c: Confirmation) => void, after: () => void) {
  const ask = (to: 'drain' | 'pause' | 'active', label: string) => html`<button type="button" data-action=${to} disabled=${n.record.availability === to}
    onClick=${() => confirm({ title: `${label} ${n.name}?`, body: consequences[to], confirm: label, run: () => api.availability(n.id, to).then(after) })}>${label}</button>`;
  return html`${ask('drain', 'Drain')} ${ask('pause', 'Pause')} ${ask('active', 'Activate')}`;
}

export function NodesView({ confirm, tick }: { confirm: (c: Confirmation) => void; tick: number }) {
  const { data, error, refresh } = usePoll(() => api.nodes(), 2000, [tick]);
  return html`<section aria-labelledby="nodes-h">
    <h1 id="nodes-h">Nodes</h1>
    <${ErrorLine} error=${error} />
    ${data === undefined ? html`<p>Loading…</p>` : html`<div class="scroll"><table>
      <thead><tr><th scope="col">Name</th><th scope="col">State</th><th scope="col">Availability</th><th scope="col">Epoch</th><th scope="col">Tasks (running)</th><th scope="col">CPU reserved</th><th scope="col">Memory reserved</th><th scope="col">Runtime</th><th scope="col">Actions</th></tr></thead>
      <tbody>${data.items.map((n) => html`<tr key=${n.id} data-node=${n.name}>
        <th scope="row">${n.name}</th>
        <td><${Badge} kind=${n.record.state} text=${n.record.state} /></td>
        <td data-availability>${n.record.availability}</td>
        <td>${n.record.epoch}</td>
        <td data-tasks>${n.tasks} (${n.running})</td>
        <td>${cores(n.reserved.cpuMillis)} of ${cores(n.record.capacity.cpuMillis)}</td>
        <td>${bytes(n.reserved.memoryBytes)} of ${bytes(n.record.capacity.memoryBytes)}</td>
        <td>${n.record.runtime.status}</td>
        <td class="actions">${actions(n, confirm, refresh)}</td>
      </tr>`)}</tbody>
    </table></div>`}
  </section>`;
}
