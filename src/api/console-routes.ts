// GET /ui: the web console (src/console/), served from the files `npm run build` writes beside
// the bundle (dist/console/: index.html, app.js, app.css). They ship in the package, so a node
// installed from a tarball serves them with no build step and no network. The files hold no
// data: every view reads the API with the credential the operator gives the console.

import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { FastifyPluginAsync } from 'fastify';
import { ShoalError } from '../errors.ts';

export interface ConsoleAsset {
  body: Buffer;
  type: string;
  etag: string;
}

const assetTypes: Readonly<Record<string, string>> = {
  'index.html': 'text/html; charset=utf-8',
  'app.js': 'text/javascript; charset=utf-8',
  'app.css': 'text/css; charset=utf-8',
};

/**
 * Where the built console may be: $SHOAL_CONSOLE_DIR (tests, a custom build), then beside the
 * bundle (dist/shoal.mjs, or a chunk in dist/chunks/), then dist/ of a source checkout.
 */
export function consoleDirCandidates(env: NodeJS.ProcessEnv = process.env): string[] {
  const here = (rel: string): string => fileURLToPath(new URL(rel, import.meta.url));
  return [...(env.SHOAL_CONSOLE_DIR !== undefined ? [env.SHOAL_CONSOLE_DIR] : []), here('./console/'), here('../console/'), here('../../dist/console/')];
}

/** The built console's files, read once; undefined when no candidate holds a whole build. */
export function loadConsole(dirs: readonly string[]): Map<string, ConsoleAsset> | undefined {
  // A build has app.js beside index.html: src/console/ (the sources, one of the candidates when
  // the node runs from them) has index.html alone.
  const dir = dirs.find((d) => existsSync(`${d}/index.html`) && existsSync(`${d}/app.js`));
  if (dir === undefined) return undefined;
  const assets = new Map<string, ConsoleAsset>();
  for (const [name, type] of Object.entries(assetTypes)) {
    let body: Buffer;
    try {
      body = readFileSync(`${dir}/${name}`);
    } catch {
      // A build without this file, or one being written now: not built (asked again next time).
      return undefined;
    }
    assets.set(name, { body, type, etag: `"${createHash('sha256').update(body).digest('hex').slice(0, 32)}"` });
  }
  return assets;
}

/**
 * The page may load only its own script and style and talk only to this node, and may not be
 * framed (its buttons drain nodes and move leadership: no clickjacking).
 */
const securityHeaders = {
  'content-security-policy': "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
};

export const consoleRoutes: FastifyPluginAsync<{ dirs?: readonly string[] }> = async (app, opts) => {
  let assets: Map<string, ConsoleAsset> | undefined;
  const asset = (name: string): ConsoleAsset => {
    assets ??= loadConsole(opts.dirs ?? consoleDirCandidates());
    const a = assets?.get(name);
    if (a === undefined) {
      throw new ShoalError('not_found', assets === undefined
        ? 'the console is not built on this node: run `npm run build` (a package installed with npm ships it built)'
        : `no console file ${name}`);
    }
    return a;
  };
  const serve = (name: string) => async (req: { headers: Record<string, unknown> }, reply: import('fastify').FastifyReply) => {
    const a = asset(name);
    void reply.headers({ ...securityHeaders, 'content-type': a.type, etag: a.etag, 'cache-control': 'no-cache' });
    if (req.headers['if-none-match'] === a.etag) return reply.code(304).send();
    return reply.send(a.body);
  };
  app.get('/ui', { config: { role: 'public' } }, async (_req, reply) => reply.redirect('/ui/', 308));
  app.get('/ui/', { config: { role: 'public' } }, serve('index.html'));
  app.get('/ui/app.js', { config: { role: 'public' } }, serve('app.js'));
  app.get('/ui/app.css', { config: { role: 'public' } }, serve('app.css'));
};
