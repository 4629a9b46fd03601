// What wakes an idle node, by timer (issue 45; bench/RESULTS.md "Footprint levers", second part).
// Preloaded into shoal nodes, it counts the callbacks of setTimeout, setInterval and setImmediate
// by the place that created them (the first three frames outside Node's own code), and when the
// process exits writes DIR/wakes-PID.txt: callbacks per second since the start, most first.
//
//   SHOAL_TIMER_WAKES=DIR SHOAL_NODE_FLAGS="--import ./bench/lib/timer-wakes.mjs" \
//     flock /tmp/shoal-heavy.lock npm run bench:footprint -- --no-etcd
//
// Inert unless SHOAL_TIMER_WAKES is set. Timers made through node:timers/promises, and wakes by
// sockets, are not counted. Wrapping every timer costs a stack trace per timer created: a
// counted node is not one to measure for CPU.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import process from 'node:process';

const dir = process.env.SHOAL_TIMER_WAKES;
if (dir !== undefined && dir !== '') {
  const counts = new Map();
  const started = Date.now();
  const site = () => {
    const frames = (new Error().stack ?? '').split('\n').slice(3)
      .filter((l) => !l.includes('node:internal') && !l.includes('timer-wakes.mjs'));
    return frames.slice(0, 3).map((l) => l.trim().replace(/\(file:\/\/[^)]*\/((?:chunks\/)?[^/):]+)(:\d+):\d+\)/, '($1$2)')).join(' < ');
  };
  for (const name of ['setTimeout', 'setInterval', 'setImmediate']) {
    const original = globalThis[name];
    globalThis[name] = function counted(fn, ...rest) {
      if (typeof fn !== 'function') return original.call(this, fn, ...rest);
      const key = `${name} ${site()}`;
      return original.call(this, function wake(...args) {
        counts.set(key, (counts.get(key) ?? 0) + 1);
        return fn.apply(this, args);
      }, ...rest);
    };
  }
  process.on('exit', () => {
    const seconds = Math.max(1, (Date.now() - started) / 1000);
    const rows = [...counts].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${(n / seconds).toFixed(2)}/s ${k}`);
    writeFileSync(path.join(dir, `wakes-${process.pid}.txt`), `${seconds.toFixed(0)} s\n${rows.join('\n')}\n`);
  });
}
