// TypeScript declarations for worker-client.js (ClothcastClient in a Web Worker).
import type { Asset, Avatar, ClothcastClientOptions } from "./clothcast.js";

/** ClothcastClient with the connection and the garment decoding in a module Web Worker
 *  (decode-worker.js, next to this module). The same options, events and shapes, except
 *  that an Avatar's arrays are *replaced* by every frame (not written in place) and it
 *  has no decoder. Events: "welcome", "asset" (Asset), "avatar" (Avatar), "frame"
 *  (Avatar), "gone" (id), "error" (Error), "close" ({code, reason, retryMs}). */
export declare class ClothcastWorkerClient extends EventTarget {
  constructor(url: string, options?: ClothcastClientOptions);
  readonly avatars: Map<string, Avatar>;
  readonly assets: Map<string, Asset>;
  tickHz: number;
  /** Connections the worker has opened so far (reconnects included). */
  readonly connections: number;
  /** Milliseconds the worker has spent handling the server's messages. */
  readonly busyMs: number;
  /** Milliseconds this (the page's) thread has spent taking the worker's results in. */
  readonly pageMs: number;
  /** Whether the decoding runs in a worker: false where none could start (no module
   *  workers in this browser), and the client then decodes on this thread. */
  readonly inWorker: boolean;
  connect(): this;
  /** Closes for good (no reconnecting), then ends the worker. */
  close(): void;
}
