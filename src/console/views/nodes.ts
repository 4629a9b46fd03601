// Nodes: capacity and what is reserved, availability, state, epoch and tasks; drain, pause and
// activate, each confirmed first (drain moves the node's work). Below, each node's CPU, memory,
// disk and running tasks over time, from its own ring.

import { useEffect, useState } from 'preact/hooks';
import type { NodeView } from '../../api/control-views.ts';
import { api } from '../api.ts';
import { Chart, chartPollMs, formats, WindowPicker } from '../charts.ts';
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

/** A node's CPU, memory, disk and running tasks over time, from its own ring (proxied by this node). */
function NodeCharts({ node, windowS }: { node: NodeView; windowS: number }) {
  const { data, error } = usePoll(() => api.nodeSeries(node.id, windowS), chartPollMs, [node.id, windowS]);
  const now = Date.now();
  const w = windowS * 1000;
  return html`<section class="node-charts" aria-labelledby=${`charts-${node.id}`} data-node-charts=${node.name}>
    <h3 id=${`charts-${node.id}`}>${node.name}</h3>
    <${ErrorLine} error=${error} />
    ${data === undefined ? (error === undefined ? html`<p>Loading…</p>` : null) : html`<div class="charts">
      <${Chart} id=${`cpu-${node.name}`} title="CPU (host)" times=${data.times} windowMs=${w} nowMs=${now} format=${formats.percent} yMax=${1}
        lines=${[{ label: 'busy', values: data.series.cpu, cls: 'line-a' }]} />
      <${Chart} id=${`memory-${node.name}`} title="Memory" times=${data.times} windowMs=${w} nowMs=${now} format=${bytes}
        yMax=${data.series.memoryTotalBytes.find((v) => v !== null) ?? undefined}
        lines=${[{ label: 'host used', values: data.series.memoryUsedBytes, cls: 'line-a' }, { label: 'shoal', values: data.series.rssBytes, cls: 'line-b' }]} />
      <${Chart} id=${`disk-${node.name}`} title="Disk used (data dir)" times=${data.times} windowMs=${w} nowMs=${now} format=${formats.percent} yMax=${1}
        lines=${[{ label: 'used', cls: 'line-c', values: data.series.diskAvailBytes.map((a, i) => {
          const size = data.series.diskSizeBytes[i] ?? null;
          return a === null || size === null || size <= 0 ? null : 1 - a / size;
        }) }]} />
      <${Chart} id=${`tasks-${node.name}`} title="Tasks running" times=${data.times} windowMs=${w} nowMs=${now} format=${formats.count} yMin=${1}
        lines=${[{ label: 'running', values: data.series.tasksRunning, cls: 'line-b' }]} />
    </div>`}
  </section>`;
}

export function NodesView({ confirm, tick, focus = null }: { confirm: (c: Confirmation) => void; tick: number; focus?: string | null }) {
  const { data, error, refresh } = usePoll(() => api.nodes(), 2000, [tick]);
  const [windowS, setWindowS] = useState(3600);
  // A summary link (#nodes/NAME) marks the node's row and brings it into view.
  useEffect(() => {
    if (focus !== null && data !== undefined) document.querySelector(`tr[data-node="${CSS.escape(focus)}"]`)?.scrollIntoView({ block: 'center' });
  }, [focus, data === undefined]);
  return html`<section aria-labelledby="nodes-h">
    <h1 id="nodes-h">Nodes</h1>
    <${ErrorLine} error=${error} />
    ${data === undefined ? html`<p>Loading…</p>` : html`<div class="scroll"><table>
      <thead><tr><th scope="col">Name</th><th scope="col">State</th><th scope="col">Availability</th><th scope="col">Epoch</th><th scope="col">Tasks (running)</th><th scope="col">CPU reserved</th><th scope="col">Memory reserved</th><th scope="col">Runtime</th><th scope="col">Actions</th></tr></thead>
      <tbody>${data.items.map((n) => html`<tr key=${n.id} data-node=${n.name} class=${focus === n.name || focus === n.id ? 'focus' : undefined}>
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
    <h2>Over time</h2>
    <${WindowPicker} id="nodes-window" value=${windowS} set=${setWindowS} />
    ${data?.items.map((n) => html`<${NodeCharts} key=${n.id} node=${n} windowS=${windowS} />`)}
  </section>`;
}
