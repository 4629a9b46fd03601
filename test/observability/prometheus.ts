// Debian's real `prometheus` (package prometheus, which .ci/run installs through `npm run
// test:setup`) scraping real nodes with the scrape config docs/monitoring.md documents: the block
// is read from the page itself, so the page cannot drift from what works.

import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml, stringify } from 'yaml';
import { freePort } from '../../bench/lib/proc.ts';

const monitoringDoc = fileURLToPath(new URL('../../docs/monitoring.md', import.meta.url));
const upTimeoutMs = 30_000;
const stopTimeoutMs = 10_000;

interface ScrapeJob {
  job_name: string;
  scrape_interval?: string;
  tls_config?: { ca_file?: string };
  authorization?: { credentials_file?: string };
  static_configs?: { targets: string[] }[];
}
export interface ScrapeConfig { scrape_configs: ScrapeJob[] }

/** The one fenced YAML block of docs/monitoring.md that holds `scrape_configs:`, parsed. */
export function documentedScrapeConfig(): ScrapeConfig {
  const blocks = [...readFileSync(monitoringDoc, 'utf8').matchAll(/^```yaml\n([\s\S]*?)^```$/gm)].map((m) => m[1] as string);
  const found = blocks.filter((b) => /^scrape_configs:/m.test(b));
  if (found.length !== 1) throw new Error(`docs/monitoring.md has ${found.length} yaml blocks with scrape_configs; the test expects one`);
  return parseYaml(found[0] as string) as ScrapeConfig;
}

/**
 * The documented config with only what differs on this machine replaced: the targets, the CA and
 * token files, and the scrape interval (15 s in the doc: Prometheus waits a random part of one
 * interval before a target's first scrape, which would cost the test up to 15 s). Everything else
 * (scheme, TLS, authorization) is the page's. Throws when the page lacks a field it replaces.
 */
export function localScrapeConfig(doc: ScrapeConfig, local: { targets: string[]; caFile: string; tokenFile: string }): ScrapeConfig {
  const copy = structuredClone(doc);
  const [job] = copy.scrape_configs;
  if (copy.scrape_configs.length !== 1 || job === undefined) throw new Error('the documented config should have one scrape job');
  if (job.tls_config?.ca_file === undefined) throw new Error('the documented scrape job has no tls_config.ca_file');
  if (job.authorization?.credentials_file === undefined) throw new Error('the documented scrape job has no authorization.credentials_file');
  if (job.static_configs?.length !== 1) throw new Error('the documented scrape job should have one static_configs entry');
  job.tls_config.ca_file = local.caFile;
  job.authorization.credentials_file = local.tokenFile;
  job.static_configs = [{ targets: local.targets }];
  job.scrape_interval = '1s';
  return copy;
}

interface Target { scrapeUrl: string; health: string; lastError: string }

export interface PrometheusRun {
  /** Resolves once Prometheus reports every target `up`; rejects with their errors after a timeout. */
  waitAllUp(count: number): Promise<Target[]>;
  stop(): Promise<void>;
}

/** Starts `prometheus` with `config`, its web API on a free port of 127.0.0.1 and its data in a temporary folder. */
export async function startPrometheus(config: ScrapeConfig): Promise<PrometheusRun> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-prometheus-'));
  const configFile = path.join(dir, 'prometheus.yml');
  writeFileSync(configFile, stringify(config));
  const web = `127.0.0.1:${await freePort()}`;
  const child = spawn('prometheus', [`--config.file=${configFile}`, `--storage.tsdb.path=${path.join(dir, 'data')}`, `--web.listen-address=${web}`, '--log.level=warn'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  child.stderr.on('data', (b: Buffer) => { log = (log + b.toString()).slice(-4000); });
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const spawned = new Promise<void>((resolve, reject) => {
    child.once('spawn', resolve);
    child.once('error', (err) => reject(new Error(`prometheus could not run (${err.message}); install Debian's prometheus package (npm run test:setup does)`)));
  });
  await spawned;
  const targets = async (): Promise<Target[]> => {
    try {
      const res = await fetch(`http://${web}/api/v1/targets?state=active`, { signal: AbortSignal.timeout(2_000) });
      const body = (await res.json()) as { data?: { activeTargets?: Target[] } };
      return body.data?.activeTargets ?? [];
    } catch {
      return [];
    }
  };
  return {
    async waitAllUp(count) {
      const deadline = Date.now() + upTimeoutMs;
      let last: Target[] = [];
      while (Date.now() < deadline && child.exitCode === null) {
        last = await targets();
        if (last.length === count && last.every((t) => t.health === 'up')) return last;
        await new Promise((r) => setTimeout(r, 200));
      }
      const seen = last.map((t) => `${t.scrapeUrl}: ${t.health}${t.lastError !== '' ? ` (${t.lastError})` : ''}`).join('; ');
      throw new Error(`Prometheus did not report ${count} targets up within ${upTimeoutMs / 1000} s: ${seen || 'no targets'}; its log: ${log}`);
    },
    async stop() {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), stopTimeoutMs);
        await exited;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
