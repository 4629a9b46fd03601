// The process logger (src/log.ts) and how `shoal serve` picks its level and format.

import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, withRequestId, type LogFormat, type LogLevel, type ProcessLogger } from '../../src/log.ts';
import { defaultLogFormat, logSettings } from '../../src/cli/logger.ts';
import { UsageError } from '../../src/cli/args.ts';

async function capture(level: LogLevel, format: LogFormat = 'json'): Promise<{ log: ProcessLogger; lines: string[] }> {
  const lines: string[] = [];
  const sink = new Writable({ write(chunk: Buffer, _enc, done) { lines.push(...chunk.toString().split('\n').filter((l) => l !== '')); done(); } });
  // pino writes to any object with write(); a Writable is one.
  return { log: await createLogger({ level, format, destination: sink }), lines };
}

const parse = (line: string): Record<string, unknown> => JSON.parse(line) as Record<string, unknown>;

describe('the process logger', () => {
  it('writes JSON lines with level, time and message, and from bindNode on the node name, id, term and role', async () => {
    const { log, lines } = await capture('info');
    log.info('before the node is known');
    let state = { term: 4, role: 'follower' };
    log.bindNode({ name: 'n1', id: 'id-1', state: () => state });
    log.warn('leader is now id-2 at term 4');
    state = { term: 5, role: 'leader' };
    log.error('fatal: something', { peer: 'id-3' });
    expect(lines.map(parse)).toEqual([
      expect.objectContaining({ level: 'info', msg: 'before the node is known' }),
      expect.objectContaining({ level: 'warn', msg: 'leader is now id-2 at term 4', node: 'n1', nodeId: 'id-1', term: 4, role: 'follower' }),
      expect.objectContaining({ level: 'error', msg: 'fatal: something', node: 'n1', nodeId: 'id-1', term: 5, role: 'leader', peer: 'id-3' }),
    ]);
    expect(parse(lines[0] as string)).not.toHaveProperty('term');
    expect(Date.parse(parse(lines[0] as string).time as string)).not.toBeNaN();
  });

  it('drops lines below its level and says which levels it writes', async () => {
    const { log, lines } = await capture('warn');
    log.debug('d');
    log.info('i');
    log.warn('w');
    expect(lines.map((l) => parse(l).msg)).toEqual(['w']);
    expect(log.isLevelEnabled?.('debug')).toBe(false);
    expect(log.isLevelEnabled?.('error')).toBe(true);
  });

  it('adds the API request id to the lines written while a request is handled', async () => {
    const { log, lines } = await capture('debug');
    withRequestId('req-7', () => log.debug('proposing write x#1', { proposal: 'x#1' }));
    log.debug('outside');
    expect(lines.map(parse)).toEqual([
      expect.objectContaining({ msg: 'proposing write x#1', proposal: 'x#1', reqId: 'req-7' }),
      expect.not.objectContaining({ reqId: expect.anything() as unknown }),
    ]);
  });

  it('writes human lines in text format: time, level, node, role and term, message, then the fields', async () => {
    const { log, lines } = await capture('info', 'text');
    log.bindNode({ name: 'n2', id: 'id-2', state: () => ({ term: 3, role: 'leader' }) });
    log.info('handed leadership to id-1 before stopping', { peer: 'id-1' });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: n2 leader t3: handed leadership to id-1 before stopping \{"peer":"id-1"\}$/);
  });
});

describe('shoal serve log settings', () => {
  const tty = { stderrIsTty: true, supervised: false };
  const pipe = { stderrIsTty: false, supervised: false };
  it('default to text for a person (a terminal, shoal dev) and JSON for a machine', () => {
    expect(defaultLogFormat(tty)).toBe('text');
    expect(defaultLogFormat({ stderrIsTty: false, supervised: true })).toBe('text');
    expect(defaultLogFormat(pipe)).toBe('json');
  });

  it('take --log-level over the config, --log-format over --json, and --json over the default', () => {
    expect(logSettings({ level: undefined, format: undefined, json: false }, 'warn', pipe)).toEqual({ level: 'warn', format: 'json' });
    expect(logSettings({ level: 'debug', format: undefined, json: true }, 'info', tty)).toEqual({ level: 'debug', format: 'json' });
    expect(logSettings({ level: undefined, format: 'text', json: true }, 'info', pipe)).toEqual({ level: 'info', format: 'text' });
  });

  it('refuse a level or format they do not know, as usage errors', () => {
    expect(() => logSettings({ level: 'verbose', format: undefined, json: false }, 'info', pipe)).toThrow(UsageError);
    expect(() => logSettings({ level: undefined, format: 'xml', json: false }, 'info', pipe)).toThrow(/--log-format must be json or text, got 'xml'/);
  });
});
