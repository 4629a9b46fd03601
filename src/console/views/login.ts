// Login: the API refused the request for want of a credential. The operator pastes a bearer
// token, or picks a credential file (`shoal credential create`, `shoal login`) holding one; it is
// kept by this tab only (api.ts). The view says which command makes a token, for whoever has none.

import { useState } from 'preact/hooks';
import { setCredential } from '../api.ts';
import { html } from '../ui.ts';

/** The command that makes a token for the console (src/cli/credential.ts; an admin runs it). */
export const createTokenCommand = 'npx shoal credential create --principal me --role operator';

/** The bearer token in a credential file's JSON, or undefined when it holds none (a client certificate cannot be used by a page). */
export function tokenOfCredentialFile(text: string): string | undefined {
  try {
    const c = JSON.parse(text) as Record<string, unknown>;
    for (const k of ['token', 'bearerToken', 'bearer']) if (typeof c[k] === 'string') return c[k];
  } catch {
    return undefined;
  }
  return undefined;
}

export function LoginView({ done, reason }: { done: () => void; reason?: string | null }) {
  const [token, setToken] = useState('');
  const [problem, setProblem] = useState<string | null>(null);
  const submit = (e: Event) => {
    e.preventDefault();
    if (token.trim() === '') return setProblem('paste a token, or choose a credential file');
    setCredential(token.trim());
    done();
  };
  const file = async (e: Event) => {
    const f = (e.target as HTMLInputElement).files?.[0];
    if (f === undefined) return;
    const t = tokenOfCredentialFile(await f.text());
    if (t === undefined) setProblem(`${f.name} holds no bearer token (a certificate credential works for the CLI only): create one with '${createTokenCommand} --out me.json'`);
    else {
      setCredential(t);
      done();
    }
  };
  return html`<section aria-labelledby="login-h" class="login">
    <h1 id="login-h">Sign in</h1>
    <p>This node wants a credential. Paste a token, or choose a credential file.</p>
    <p data-testid="login-how">No token yet? Make one where the CLI has an admin credential (the machine
      that ran <code>shoal dev</code> or <code>shoal init</code>): <code>${createTokenCommand}</code>. It prints the token
      once; <code>--role reader</code> makes one that can only look, <code>--ttl</code> sets how long it works (90 days).</p>
    ${reason != null ? html`<p class="error" role="alert" data-testid="login-reason">The token this tab held was refused: ${reason}</p>` : null}
    <form onSubmit=${submit}>
      <label>Token <input type="password" autocomplete="off" value=${token} onInput=${(e: Event) => setToken((e.target as HTMLInputElement).value)} /></label>
      <label>Credential file <input type="file" accept=".json,application/json" onChange=${file} /></label>
      ${problem !== null ? html`<p class="error" role="alert">${problem}</p>` : null}
      <button type="submit">Sign in</button>
    </form>
  </section>`;
}
