// TypeScript declarations for worker-client.js (ClothcastClient in a Web Worker).
import type { ClothcastClientOptions, StreamClient } from "./clothcast.js";

export interface ClothcastWorkerClient extends StreamClient {}
/** ClothcastClient with the connection and the garment decoding in a module Web Worker
 *  (decode-worker.js, next to this module): the same options, events and shapes
 *  (StreamClient), except that an Avatar's arrays are *replaced* by every frame (not
 *  written in place) and it has no decoder. `connections` counts the worker's
 *  connections, `busyMs` the worker's time on the stream; close() also ends the worker.
 *  With `{ workers: n }` it runs n workers, each on its own connection subscribed to
 *  its shard of the avatars; `connections` and `busyMs` are then their sums. The first
 *  connects alone; the others once its assets are in, handed them (so they are
 *  downloaded once). Latest wins towards the page: at most two frames of an avatar
 *  are on their way to the page's thread at once, a frame decoded meanwhile is replaced
 *  by the next (counted in the avatar's `skipped`), so a page that fell behind gets the
 *  latest frames, not a backlog. */
export declare class ClothcastWorkerClient extends EventTarget {
  constructor(url: string, options?: ClothcastClientOptions);
  /** Milliseconds this (the page's) thread has spent taking the worker's results in. */
  readonly pageMs: number;
  /** Whether the decoding runs in a worker: false where none could start (no module
   *  workers in this browser), and the client then decodes on this thread. */
  readonly inWorker: boolean;
  /** The workers' connections and busy time, one entry per worker (`workers` option),
   *  or the one client on this thread where no worker could start. */
  readonly slots: ReadonlyArray<{ readonly connections: number; readonly busyMs: number; readonly assets: number; readonly arraysMade: number }>;
  /** Float32Arrays the workers have made for frames: with `recycle` it stops growing
   *  once every avatar streams, since each frame is copied into the arrays of the
   *  frame it replaces (at most 3 sets per avatar, whatever the page's pace). */
  readonly arraysMade: number;
}
