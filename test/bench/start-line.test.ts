// The footprint bench reads a restarted node's own start-up figure from its log
// (bench/lib/shoal-cluster.ts, boundMsOf): the line serve logs (src/cli/serve.ts) through
// startUpLine (src/server/lifecycle.ts), as pino writes it.
import { describe, expect, it } from 'vitest';
import { boundMsOf } from '../../bench/lib/shoal-cluster.ts';
import { startUpLine } from '../../src/server/lifecycle.ts';

describe('boundMsOf', () => {
  it("reads the ms to the API bound from the node's start-up line, the first of a log that holds more", () => {
    const line = (servingMs: number): string => JSON.stringify({
      level: 'info', node: 'n3',
      msg: `node n3 (472273ef5f50eb2c) serving the API on https://127.0.0.1:7103, ${startUpLine(200.4, 210.2, servingMs, [{ name: 'api-bound', ms: 44 }], 390.2)}`,
    });
    const log = [JSON.stringify({ msg: 'opened storage /tmp/x: snapshot 1, log 2..29, commit 28' }), line(342.6), line(512)].join('\n');
    expect(boundMsOf(log)).toBe(343);
    expect(boundMsOf(line(1_204))).toBe(1_204);
  });

  it('NaN when the log has no start-up line (the node never bound its API)', () => {
    expect(boundMsOf('{"msg":"opened storage /tmp/x"}\n{"msg":"api: listen EADDRINUSE 127.0.0.1:7103"}')).toBeNaN();
  });
});
