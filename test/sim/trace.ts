// A trace of what happened, kept only when asked for (a failing seed is replayed with the trace
// on, so fast runs pay nothing). `tailLines` bounds memory: only the last lines are kept.

export class Trace {
  private readonly lines: string[] = [];
  private dropped = 0;

  constructor(readonly enabled: boolean, private readonly tailLines: number, private readonly echo?: (line: string) => void) {}

  add(line: string): void {
    if (this.echo !== undefined) this.echo(line);
    this.lines.push(line);
    if (this.lines.length > this.tailLines * 2) {
      const cut = this.lines.length - this.tailLines;
      this.lines.splice(0, cut);
      this.dropped += cut;
    }
  }

  tail(): string[] {
    return this.lines.slice(-this.tailLines);
  }

  total(): number {
    return this.dropped + this.lines.length;
  }
}
