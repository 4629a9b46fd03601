// Who can reach whom: each node is on one side of the network (all on side 0 when whole). Two
// nodes that are up and on the same side are connected. Partitions are symmetric: a node cut
// off hears nobody and nobody hears it.

export class Network {
  private readonly side = new Map<string, number>();

  constructor(private readonly ids: readonly string[]) {
    this.heal();
  }

  heal(): void {
    for (const id of this.ids) this.side.set(id, 0);
  }

  /** Puts each group on its own side; nodes in no group stay on side 0. */
  split(groups: readonly (readonly string[])[]): void {
    this.heal();
    groups.forEach((g, i) => { for (const id of g) this.side.set(id, i + 1); });
  }

  sameSide(a: string, b: string): boolean {
    return this.side.get(a) === this.side.get(b);
  }

  isWhole(): boolean {
    const first = this.side.get(this.ids[0] ?? '');
    return this.ids.every((id) => this.side.get(id) === first);
  }

  describe(): string {
    const bySide = new Map<number, string[]>();
    for (const id of this.ids) bySide.set(this.side.get(id) ?? 0, [...(bySide.get(this.side.get(id) ?? 0) ?? []), id]);
    return [...bySide.values()].map((g) => `[${g.join(' ')}]`).join(' | ');
  }
}
