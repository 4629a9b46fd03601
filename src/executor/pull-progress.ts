// A pull's progress, read from Docker's pull stream (one JSON object a line: `{status, id,
// progressDetail: {current, total}}` per layer), summed into what a person follows: layers done
// of layers, bytes downloaded of bytes known. The agent reports it as the starting task's message
// (`pulling IMAGE: 2/5 layers, 12.3 MB of 40.1 MB`), which `shoal apply`, `service update` and
// the console show while they wait. Pure.

export interface PullProgress {
  /** Layers the stream has named so far. */
  layers: number;
  /** Of them, downloaded (or already there). */
  layersDone: number;
  /** Bytes downloaded so far, over every layer. */
  bytes: number;
  /** Bytes of the layers whose size the stream has said. */
  bytesTotal: number;
}

interface Layer {
  current: number;
  total: number;
  done: boolean;
}

const doneStatuses = /^(Download complete|Pull complete|Already exists|Verifying Checksum|Extracting)/;

export class PullProgressTracker {
  private readonly layers = new Map<string, Layer>();

  /** Takes one line of the stream; true when it changed the progress. */
  add(line: unknown): boolean {
    if (typeof line !== 'object' || line === null) return false;
    const { id, status, progressDetail } = line as { id?: unknown; status?: unknown; progressDetail?: { current?: unknown; total?: unknown } };
    // Lines without a layer id (`Pulling from team/app`, `Digest: ...`) say nothing of progress.
    if (typeof id !== 'string' || typeof status !== 'string' || !/^[0-9a-f]{12,64}$/.test(id)) return false;
    const layer = this.layers.get(id) ?? { current: 0, total: 0, done: false };
    this.layers.set(id, layer);
    if (status === 'Downloading' && typeof progressDetail?.current === 'number') {
      layer.current = progressDetail.current;
      if (typeof progressDetail.total === 'number' && progressDetail.total > 0) layer.total = progressDetail.total;
    } else if (doneStatuses.test(status) && !layer.done) {
      layer.done = true;
      if (layer.total > 0) layer.current = layer.total;
    }
    return true;
  }

  get progress(): PullProgress {
    let layersDone = 0;
    let bytes = 0;
    let bytesTotal = 0;
    for (const l of this.layers.values()) {
      if (l.done) layersDone++;
      bytes += l.current;
      bytesTotal += l.total;
    }
    return { layers: this.layers.size, layersDone, bytes, bytesTotal };
  }
}

function megabytes(n: number): string {
  return `${(n / 1_000_000).toFixed(1)} MB`;
}

/** `pulling ghcr.io/o/app:1.4: 2/5 layers, 12.3 MB of 40.1 MB` */
export function pullProgressText(image: string, p: PullProgress): string {
  if (p.layers === 0) return `pulling ${image}`;
  const size = p.bytesTotal > 0 ? `, ${megabytes(p.bytes)} of ${megabytes(p.bytesTotal)}` : p.bytes > 0 ? `, ${megabytes(p.bytes)}` : '';
  return `pulling ${image}: ${p.layersDone}/${p.layers} layers${size}`;
}
