// Who can reach whom: each node is on one side of the network (all on side 0 when whole). Two
// nodes that are up and on the same side are connected, unless the one link between them is cut.
// Partitions are symmetric: a node cut off hears nobody and nobody hears it; a cut link is too
// (the two cannot hear each other, while each hears the others: "only the leader cannot reach it").

export class Network {
  private readonly side = new Map<string, number>();
  /** Cut links, as `a|b` with a < b. */
  private readonly cuts = new Set<string>();

  constructor(private readonly ids: readonly string[]) {
    this.heal();
  }

  /** Everything whole again: sides and cut links. */
  heal(): void {
    for (const id of this.ids) this.side.set(id, 0);
    this.cuts.clear();
  }

  /** The sides whole again; cut links stay cut. */
  healSides(): void {
    for (const id of this.ids) this.side.set(id, 0);
  }

  /** Cuts the one link between a and b, both ways. */
  cutLink(a: string, b: string): void {
    this.cuts.add(a < b ? `${a}|${b}` : `${b}|${a}`);
  }

  healLinks(): void {
    this.cuts.clear();
  }

  linkCut(a: string, b: string): boolean {
    return this.cuts.has(a < b ? `${a}|${b}` : `${b}|${a}`);
  }

  /** Puts each group on its own side; nodes in no group stay on side 0. */
  split(groups: readonly (readonly string[])[]): void {
    for (const id of this.ids) this.side.set(id, 0);
    groups.forEach((g, i) => { for (const id of g) this.side.set(id, i + 1); });
  }

  sameSide(a: string, b: string): boolean {
    return this.side.get(a) === this.side.get(b) && !this.linkCut(a, b);
  }

  isWhole(): boolean {
    const first = this.side.get(this.ids[0] ?? '');
    return this.cuts.size === 0 && this.ids.every((id) => this.side.get(id) === first);
  }

  describe(): string {
    const bySide = new Map<number, string[]>();
    for (const id of this.ids) bySide.set(this.side.get(id) ?? 0, [...(bySide.get(this.side.get(id) ?? 0) ?? []), id]);
    const sides = [...bySide.values()].map((g) => `[${g.join(' ')}]`).join(' | ');
    return this.cuts.size === 0 ? sides : `${sides}, cut ${[...this.cuts].map((c) => c.replace('|', '-')).join(' ')}`;
  }
}
