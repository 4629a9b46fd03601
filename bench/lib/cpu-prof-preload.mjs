// Preloaded into a shoal node by `bench:swarm --bounds` (NODE_OPTIONS=--import ..., since
// --cpu-prof is not allowed in NODE_OPTIONS): a V8 CPU profile of the whole process, written to
// $SHOAL_PROF_DIR/<pid>.cpuprofile when it exits. The in-thread inspector session answers
// synchronously, so the profile can be taken in the exit handler.
import fs from 'node:fs';
import inspector from 'node:inspector';
import path from 'node:path';
import process from 'node:process';

const dir = process.env.SHOAL_PROF_DIR;
if (dir) {
  const session = new inspector.Session();
  session.connect();
  session.post('Profiler.enable');
  session.post('Profiler.start');
  process.on('exit', () => {
    session.post('Profiler.stop', (err, res) => {
      if (err || !res) return;
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, `shoal-${process.pid}.cpuprofile`), JSON.stringify(res.profile));
    });
  });
}
