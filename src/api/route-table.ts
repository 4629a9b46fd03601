// Which methods each registered path takes, so that a request whose path exists under another
// method is answered 405 method_not_allowed with an Allow header (RFC 9110 §15.5.6) instead of a
// 404: the router only says "no route for this method and path".

import type { RouteRole } from '../security/roles.ts';

interface Entry {
  pattern: RegExp;
  methods: Set<string>;
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** A fastify route URL (static parts and `:param` segments) as a regex over the raw request path. */
function patternOf(url: string): RegExp {
  const parts = url.split('/').map((seg) => (seg.startsWith(':') ? '[^/]+' : escapeRegExp(seg)));
  return new RegExp(`^${parts.join('/')}$`);
}

export class RouteTable {
  private readonly entries = new Map<string, Entry>();
  private readonly roles = new Map<string, RouteRole>();

  /** The role a route declares (auth.ts), by method and fastify URL (`/v1/docs/:collection`). */
  roleOf(method: string, url: string): RouteRole | undefined {
    return this.roles.get(`${method.toUpperCase()} ${url}`);
  }

  /** Records a route as fastify's onRoute hook sees it. */
  add(method: string | string[], url: string, role?: RouteRole): void {
    if (role !== undefined) for (const m of Array.isArray(method) ? method : [method]) this.roles.set(`${m.toUpperCase()} ${url}`, role);
    let e = this.entries.get(url);
    if (e === undefined) {
      e = { pattern: patternOf(url), methods: new Set() };
      this.entries.set(url, e);
    }
    for (const m of Array.isArray(method) ? method : [method]) e.methods.add(m.toUpperCase());
    // fastify answers HEAD for every GET route (exposeHeadRoutes).
    if (e.methods.has('GET')) e.methods.add('HEAD');
  }

  /** The methods some route takes at this path (without the query), sorted; empty if none. */
  allowed(path: string): string[] {
    const out = new Set<string>();
    for (const e of this.entries.values()) if (e.pattern.test(path)) for (const m of e.methods) out.add(m);
    return [...out].sort();
  }
}
