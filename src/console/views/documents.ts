// Documents: the collections, a collection's documents in pages, and one document with its
// retained changes (as far back as the store's event tail reaches).

import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { ErrorLine, html, usePoll } from '../ui.ts';

function DocumentDetail({ collection, id }: { collection: string; id: string }) {
  const { data, error } = usePoll(() => Promise.all([api.doc(collection, id), api.history(collection, id)]), 5000, [collection, id]);
  if (data === undefined) return html`<${ErrorLine} error=${error} />`;
  const [doc, history] = data;
  return html`<div class="detail">
    <h2><code>${collection}/${id}</code> at revision ${doc.rev}</h2>
    <pre class="json" data-testid="document">${JSON.stringify(doc.doc, null, 2)}</pre>
    <h3>Changes (retained from revision ${history.oldestRev})</h3>
    <ol class="history">${[...history.items].reverse().map((c) => html`<li key=${c.rev}><details><summary>rev ${c.rev}: ${c.type}</summary>
      ${c.doc !== undefined ? html`<pre class="json">${JSON.stringify(c.doc, null, 2)}</pre>` : null}</details></li>`)}</ol>
  </div>`;
}

function Collection({ name, open }: { name: string; open: (id: string) => void }) {
  const [after, setAfter] = useState<string[]>([]);
  const { data, error } = usePoll(() => api.list(name, after[after.length - 1]), 5000, [name, after.join('\u0000')]);
  return html`<div>
    <h2>${name}</h2>
    <${ErrorLine} error=${error} />
    <ul class="ids">${(data?.items ?? []).map((d) => html`<li key=${d.id}><button type="button" class="link" onClick=${() => open(d.id)}>${d.id}</button> <span class="muted">rev ${d.rev}</span></li>`)}</ul>
    <div class="actions">
      <button type="button" disabled=${after.length === 0} onClick=${() => setAfter(after.slice(0, -1))}>Previous</button>
      <button type="button" disabled=${data?.next === null || data === undefined} onClick=${() => data?.next != null && setAfter([...after, data.next])}>Next</button>
    </div>
  </div>`;
}

export function DocumentsView() {
  const { data, error } = usePoll(() => api.collections(), 5000);
  const [collection, setCollection] = useState<string | null>(null);
  const [id, setId] = useState<string | null>(null);
  return html`<section aria-labelledby="docs-h" class="docs">
    <h1 id="docs-h">Documents</h1>
    <${ErrorLine} error=${error} />
    <nav aria-label="Collections"><ul>${(data?.items ?? []).map((c) => html`<li key=${c.name}>
      <button type="button" class="link" aria-current=${collection === c.name} onClick=${() => { setCollection(c.name); setId(null); }}>${c.name}</button> <span class="muted">${c.documents}</span></li>`)}</ul></nav>
    ${collection !== null ? html`<${Collection} name=${collection} open=${setId} />` : null}
    ${collection !== null && id !== null ? html`<${DocumentDetail} collection=${collection} id=${id} />` : null}
  </section>`;
}
