// ESM loader hooks for bench/lib/footprint-probe.mjs: appends "URL<TAB>source bytes" of every
// module loaded to the file given at registration.
import { appendFileSync } from 'node:fs';

let file = '';

export function initialize(data) {
  file = data.file;
}

export async function load(url, context, nextLoad) {
  const result = await nextLoad(url, context);
  const bytes = result.source === undefined || result.source === null ? 0 : result.source.length;
  appendFileSync(file, `${url}\t${bytes}\n`);
  return result;
}
