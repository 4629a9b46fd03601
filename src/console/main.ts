// The console's entry point: a header naming the cluster and its leader, the health summary
// under it on every view, seven views chosen by the URL's hash (#cluster, #nodes, #services,
// #stacks, #jobs, #events, #documents; #services/NAME opens a service, #nodes/NAME marks a node), the sign-in
// when the API asks for a credential, and the one confirmation dialog.

import { render } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import type { ClusterView as ClusterAnswer } from '../api/cluster-routes.ts';
import { api, setCredential, unauthenticatedEvent } from './api.ts';
import { ConfirmDialog, html, usePoll, type Confirmation } from './ui.ts';
import { ClusterView } from './views/cluster.ts';
import { DocumentsView } from './views/documents.ts';
import { EventsView } from './views/events.ts';
import { LoginView } from './views/login.ts';
import { NodesView } from './views/nodes.ts';
import { ServicesView } from './views/services.ts';
import { SummaryBar } from './summary.ts';
import { JobsView } from './views/jobs.ts';
import { StacksView } from './views/stacks.ts';

const views = ['cluster', 'nodes', 'services', 'stacks', 'jobs', 'events', 'documents'] as const;
type ViewName = (typeof views)[number];

function viewOf(hash: string): ViewName {
  const v = hash.replace(/^#\/?/, '').split('/')[0] ?? '';
  return (views as readonly string[]).includes(v) ? (v as ViewName) : 'cluster';
}

/** What `#services/web` or `#nodes/n2` points at (the summary's links): the row to open or mark. */
function focusOf(hash: string): string | null {
  const rest = hash.replace(/^#\/?/, '').split('/').slice(1).join('/');
  if (rest === '') return null;
  try {
    return decodeURIComponent(rest);
  } catch {
    return null;
  }
}

function Header({ data }: { data: ClusterAnswer | undefined }) {
  const leader = data?.members.find((m) => m.id === data.leader);
  return html`<span class="cluster">cluster <code>${data?.clusterId.slice(0, 8) ?? '…'}</code> · leader <strong data-testid="header-leader">${leader?.name ?? '—'}</strong> · term ${data?.term ?? '—'}</span>`;
}

function App() {
  const [view, setView] = useState<ViewName>(viewOf(location.hash));
  const [focus, setFocus] = useState<string | null>(focusOf(location.hash));
  const [ask, setAsk] = useState<Confirmation | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [needLogin, setNeedLogin] = useState(false);
  /** Why the API refused the token this tab held (expired, revoked), shown on the sign-in. */
  const [loginReason, setLoginReason] = useState<string | null>(null);
  const [tick, setTick] = useState(0);
  // One poll of /v1/cluster for the header and the Cluster view: every second while that view shows.
  const cluster = usePoll(() => api.cluster(), needLogin ? null : view === 'cluster' ? 1000 : 2000);
  // The health summary on every view, every 2 s.
  const summary = usePoll(() => api.summary(), needLogin ? null : 2000);
  useEffect(() => {
    const onHash = () => { setView(viewOf(location.hash)); setFocus(focusOf(location.hash)); };
    const onUnauth = (e: Event) => {
      setLoginReason((e as CustomEvent<string | null>).detail ?? null);
      setNeedLogin(true);
    };
    window.addEventListener('hashchange', onHash);
    window.addEventListener(unauthenticatedEvent, onUnauth);
    return () => { window.removeEventListener('hashchange', onHash); window.removeEventListener(unauthenticatedEvent, onUnauth); };
  }, []);
  // Any cluster event (a task failed, a node drained) refreshes the lists that poll more slowly.
  const changed = useCallback(() => setTick((t) => t + 1), []);
  if (needLogin) return html`<main id="main"><${LoginView} reason=${loginReason} done=${() => { setNeedLogin(false); setLoginReason(null); setTick((t) => t + 1); }} /></main>`;
  return html`
    <header>
      <a class="brand" href="#cluster">shoal</a>
      <nav aria-label="Views"><ul>${views.map((v) => html`<li><a href=${`#${v}`} aria-current=${view === v ? 'page' : undefined}>${v[0]?.toUpperCase()}${v.slice(1)}</a></li>`)}</ul></nav>
      <${Header} data=${cluster.data} />
      <button type="button" class="link" onClick=${() => { setCredential(null); setLoginReason(null); setNeedLogin(true); }}>Sign out</button>
    </header>
    <${SummaryBar} data=${summary.data} error=${summary.error !== undefined ? `Health: ${summary.error.message}` : undefined} />
    ${notice !== null ? html`<p class="notice" role="status">${notice} <button type="button" class="link" onClick=${() => setNotice(null)}>Dismiss</button></p>` : null}
    <main id="main">
      ${view === 'cluster' ? html`<${ClusterView} confirm=${setAsk} cluster=${cluster} />` : null}
      ${view === 'nodes' ? html`<${NodesView} confirm=${setAsk} tick=${tick} focus=${focus} />` : null}
      ${view === 'services' ? html`<${ServicesView} tick=${tick} focus=${focus} />` : null}
      ${view === 'stacks' ? html`<${StacksView} tick=${tick} />` : null}
      ${view === 'jobs' ? html`<${JobsView} tick=${tick} />` : null}
      <div hidden=${view !== 'events'}><${EventsView} onChange=${changed} /></div>
      ${view === 'documents' ? html`<${DocumentsView} />` : null}
    </main>
    <${ConfirmDialog} ask=${ask} done=${(message: string | null) => { setAsk(null); if (message !== null) setNotice(message); }} />`;
}

const root = document.getElementById('app');
if (root !== null) render(html`<${App} />`, root);
