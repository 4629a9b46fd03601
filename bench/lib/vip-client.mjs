/* global process, setTimeout, clearTimeout */
// The LAN client of bench/vip-task-loss.ts, run in the client's namespace with
// `ip netns exec NS node vip-client.mjs '<json>'`. One JSON line on stdout per outcome; times are
// the wall clock (Date.now(), the same clock as the bench's: one machine).
//
// The JSON: {host, port, everyMs, timeoutMs, endAt, hold: {count, openAt, writeAt: [..]}}.
//   - a request loop until endAt: every everyMs a new HTTP/1.0 GET / on a new connection (no
//     keep-alive), not waiting for the one before; each ends answered (the body: the task's
//     hostname), failed (its error), or timed out after timeoutMs:
//       {"req":{"at":..,"end":..,"ok":true,"who":"<hostname>"}} | {"req":{..,"ok":false,"error":"ETIMEDOUT"}}
//   - held connections: at hold.openAt, hold.count connections opened and left idle (busybox
//     httpd waits 60 s for a request); once all are open, their local ports:
//       {"held":{"ports":[..]}}
//     then the i-th is written its request at hold.writeAt[i % writeAt.length] and given 20 s:
//       {"conn":{"port":..,"wroteAt":..,"end":..,"ok":..,"who"|"error":..}}
import { request } from 'node:http';
import { connect } from 'node:net';

const o = JSON.parse(process.argv[2] ?? '{}');
const print = (x) => process.stdout.write(`${JSON.stringify(x)}\n`);
const sleepUntil = (t) => new Promise((r) => setTimeout(r, Math.max(0, t - Date.now())));

function once() {
  const at = Date.now();
  return new Promise((resolve) => {
    let done = false;
    const finish = (fields) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      print({ req: { at, end: Date.now(), ...fields } });
      resolve();
    };
    const req = request({ host: o.host, port: o.port, path: '/', agent: false, headers: { connection: 'close' } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { body += d; });
      res.on('end', () => finish(res.statusCode === 200 ? { ok: true, who: body.trim() } : { ok: false, error: `HTTP ${res.statusCode}` }));
      res.on('error', (e) => finish({ ok: false, error: e.code ?? e.message }));
    });
    const timer = setTimeout(() => { finish({ ok: false, error: 'ETIMEDOUT' }); req.destroy(); }, o.timeoutMs);
    req.on('error', (e) => finish({ ok: false, error: e.code ?? e.message }));
    req.end();
  });
}

async function loop() {
  const all = [];
  for (let next = Date.now(); next < o.endAt; next += o.everyMs) {
    await sleepUntil(next);
    all.push(once());
  }
  await Promise.all(all);
}

function heldOne(writeAt) {
  return new Promise((resolve) => {
    const s = connect({ host: o.host, port: o.port });
    s.once('error', (e) => resolve({ s, openError: e.code ?? e.message }));
    s.once('connect', () => resolve({ s, writeAt }));
  });
}

async function held() {
  const h = o.hold;
  if (h === undefined || h.count === 0) return;
  await sleepUntil(h.openAt);
  const conns = await Promise.all(Array.from({ length: h.count }, (_, i) => heldOne(h.writeAt[i % h.writeAt.length])));
  print({ held: { ports: conns.map((c) => c.s.localPort ?? null) } });
  await Promise.all(conns.map(async (c) => {
    const port = c.s.localPort ?? null;
    if (c.openError !== undefined) return print({ conn: { port, ok: false, error: c.openError } });
    let ended = false;
    const result = new Promise((resolve) => {
      let body = '';
      const fin = (fields) => { if (!ended) { ended = true; resolve(fields); } };
      c.s.on('data', (d) => { body += d.toString(); });
      c.s.on('error', (e) => fin({ ok: false, error: e.code ?? e.message }));
      c.s.on('close', () => fin(/ 200 /.test(body) ? { ok: true, who: body.split('\r\n\r\n')[1]?.trim() ?? '' } : { ok: false, error: body === '' ? 'closed' : 'bad answer' }));
    });
    await sleepUntil(c.writeAt);
    const wroteAt = Date.now();
    if (!ended) c.s.write('GET / HTTP/1.0\r\n\r\n');
    let timer;
    const r = await Promise.race([result, new Promise((res) => { timer = setTimeout(() => res({ ok: false, error: 'ETIMEDOUT' }), 20_000); })]);
    clearTimeout(timer);
    c.s.destroy();
    print({ conn: { port, wroteAt, end: Date.now(), ...r } });
  }));
}

await Promise.all([loop(), held()]);
