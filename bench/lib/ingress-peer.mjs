/* global process, Buffer */
// The two ends of the routing mesh benchmark (bench/ingress.ts), run inside network namespaces
// with `ip netns exec NS node ingress-peer.mjs ...`. One JSON line on stdout each.
//
//   serve PORT                 a TCP server: a connection's first byte chooses what it is.
//                              'S' (sink): counts the bytes that follow; at the sender's end of
//                              stream, writes the count back (decimal) and closes. 'E' (echo):
//                              writes back what it reads. Prints {"ready":true} once listening, and
//                              the source address of each sink connection on stderr's JSON lines.
//   stream HOST PORT SECONDS   a sink connection: writes 64 KiB chunks as fast as the socket takes
//                              them for SECONDS, ends, and waits for the server's count:
//                              {"bytes":N,"seconds":S,"mbps":M,"cpuMs":C} (bytes the server counted,
//                              from the first write to the count's arrival; the sender's own CPU)
//   rr HOST PORT N             one echo connection, N round trips of 32 bytes, one at a time:
//                              {"p50us":..,"p99us":..,"meanus":..}
//   crr HOST PORT N            N echo connections, one after the other: connect, 32 bytes there
//                              and back, close; timed from connect() to the answer: the same fields
import { connect, createServer } from 'node:net';

const [mode, ...args] = process.argv.slice(2);
const payload = Buffer.alloc(32, 0x61);

function stats(us) {
  const s = [...us].sort((a, b) => a - b);
  const at = (q) => s[Math.min(s.length - 1, Math.floor(q * s.length))];
  return { p50us: at(0.5), p99us: at(0.99), meanus: s.reduce((a, b) => a + b, 0) / s.length, n: s.length };
}

function serve(port) {
  createServer((sock) => {
    sock.setNoDelay(true);
    sock.on('error', () => {});
    let kind = null;
    let count = 0;
    sock.on('data', (chunk) => {
      let data = chunk;
      if (kind === null) {
        kind = String.fromCharCode(data[0]);
        data = data.subarray(1);
        if (kind === 'S') process.stderr.write(`${JSON.stringify({ sink: sock.remoteAddress })}\n`);
      }
      if (kind === 'E') sock.write(data);
      else count += data.length;
    });
    sock.on('end', () => { if (kind === 'S') sock.end(String(count)); else sock.end(); });
  }).listen(Number(port), '0.0.0.0', () => process.stdout.write('{"ready":true}\n'));
}

function open(host, port) {
  return new Promise((resolve, reject) => {
    const s = connect({ host, port: Number(port) });
    s.setNoDelay(true);
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
}

async function stream(host, port, seconds) {
  const s = await open(host, port);
  const chunk = Buffer.alloc(64 * 1024, 0x62);
  const t0 = process.hrtime.bigint();
  const until = t0 + BigInt(Math.round(Number(seconds) * 1e9));
  s.write('S');
  await new Promise((resolve) => {
    const pump = () => {
      while (process.hrtime.bigint() < until) {
        if (!s.write(chunk)) { s.once('drain', pump); return; }
      }
      resolve();
    };
    pump();
  });
  let answer = '';
  s.on('data', (d) => { answer += d.toString(); });
  await new Promise((resolve) => { s.on('end', resolve); s.end(); });
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  const bytes = Number(answer);
  const cpu = process.cpuUsage();
  return { bytes, seconds: secs, mbps: (bytes * 8) / secs / 1e6, cpuMs: (cpu.user + cpu.system) / 1000 };
}

function roundTrip(s) {
  return new Promise((resolve) => {
    let got = 0;
    const on = (d) => {
      got += d.length;
      if (got >= payload.length) { s.off('data', on); resolve(); }
    };
    s.on('data', on);
    s.write(payload);
  });
}

async function rr(host, port, n) {
  const s = await open(host, port);
  s.write('E');
  const us = [];
  for (let i = 0; i < 20; i++) await roundTrip(s); // warm up
  for (let i = 0; i < Number(n); i++) {
    const t0 = process.hrtime.bigint();
    await roundTrip(s);
    us.push(Number(process.hrtime.bigint() - t0) / 1000);
  }
  s.end();
  return stats(us);
}

async function crr(host, port, n) {
  const us = [];
  for (let i = 0; i < Number(n); i++) {
    const t0 = process.hrtime.bigint();
    const s = await open(host, port);
    s.write('E');
    await roundTrip(s);
    us.push(Number(process.hrtime.bigint() - t0) / 1000);
    s.destroy();
  }
  return stats(us);
}

if (mode === 'serve') serve(args[0]);
else {
  const run = { stream, rr, crr }[mode];
  if (run === undefined) { process.stderr.write(`unknown mode ${mode}\n`); process.exit(2); }
  run(...args).then((r) => { process.stdout.write(`${JSON.stringify(r)}\n`); process.exit(0); }, (e) => { process.stderr.write(`${e.message}\n`); process.exit(1); });
}
