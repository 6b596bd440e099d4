// TypeScript declarations for clothcast.js (the viewer client).
import type { GarmentSetup } from "./codec.js";

export declare const PROTOCOL_VERSION: 1;

/** Static data of an avatar's assets (sent once per viewer). */
export interface Asset {
  hash: string;
  /** Garment name (what a `wear` message takes); "" from older servers. */
  garment: string;
  setup: GarmentSetup;
  /** Body rest positions, 3 floats per vertex, metres. */
  bodyPositions: Float32Array;
  bodyTriangles: Uint32Array;
  /** 4 joint indices per body vertex. */
  bodyJoints: Uint8Array;
  /** 4 weights per body vertex. */
  bodyWeights: Float32Array;
  /** 22 rest joint positions, metres. */
  skeleton: Float32Array;
  /** Parent of each joint, -1 for the pelvis. */
  parents: number[];
}

/** One more garment of an avatar's outfit; `garment` is decoded in place every frame. */
export interface Layer {
  asset: Asset;
  /** Positions, 3 floats per vertex, canonical frame, metres. */
  garment: Float32Array;
  /** Its vertex normals (vertexNormals), from a ClothcastWorkerClient made with
   *  `{ normals: true }`; absent or null otherwise. */
  normals?: Float32Array | null;
}

/** One avatar as the client sees it; its arrays are updated in place every frame. */
export interface Avatar {
  id: string;
  asset: Asset;
  /** Garment positions, 3 floats per vertex, canonical frame, metres (decoded in place). */
  garment: Float32Array;
  /** An outfit's garments worn over the first, inner to outer (empty for one garment). */
  layers: Layer[];
  /** The garment's vertex normals (vertexNormals), from a ClothcastWorkerClient made
   *  with `{ normals: true }`; absent or null otherwise. */
  normals?: Float32Array | null;
  /** The skeleton's skinning transforms (rest → posed, canonical frame) from the
   *  garment's codec frame: per bone a quaternion (x, y, z, w) then a translation,
   *  metres (7 × 22 floats). `boneMatrices` turns them into world matrices. */
  bones: Float32Array;
  /** Body pose: pelvis translation (3) then 22 local quaternions (x, y, z, w); filled
   *  only when the client was made with `{ pose: true }` (zeros otherwise). */
  pose: Float32Array;
  /** Garment canonical → world: quaternion (x, y, z, w) then translation. */
  world: Float32Array;
  seq: number;
  frames: number;
  bytes: number;
  /** Frames the server never sent this client (its queue was full). */
  dropped: number;
  /** ClothcastWorkerClient only: frames the worker decoded and never passed to the page,
   *  each replaced by a later one while the page was behind (latest wins). */
  skipped?: number;
  latencyMs: number;
  /** When (performance.now(), ms) the client last asked the server for a keyframe of
   *  this avatar (`resync`) after a frame of its was refused; null while in step. The
   *  page client's avatars only (a worker client's are a relay's copy). */
  resyncAsked?: number | null;
}

export interface ClothcastClientOptions {
  token?: string | null;
  /** Avatar ids to receive; null for all. */
  avatars?: string[] | null;
  /** Reconnect after a dropped connection (0.5 s doubling to 10 s; not after close(),
   *  a wrong token or a bad hello). Default true. */
  reconnect?: boolean;
  /** Without word from the server for this long, send it a `ping`, ms (default 5000). */
  pingAfterMs?: number;
  /** Without word from the server for this long (a ping unanswered), drop the
   *  connection as dead and reconnect, ms (default 20000). */
  deadAfterMs?: number;
  /** Ask for the body pose in every frame too (364 bytes a frame; default false: the
   *  codec frames' bones pose the body). */
  pose?: boolean;
  /** ClothcastWorkerClient only: compute each garment's vertex normals in the worker
   *  too (Avatar.normals, Layer.normals). Default false. */
  normals?: boolean;
  /** ClothcastWorkerClient only: decode on this many workers (1–64, default 1), each
   *  with its own connection subscribed to its shard of the avatars, so that a room
   *  of avatars is decoded on that many cores. */
  workers?: number;
  /** ClothcastWorkerClient only: move the arrays a frame replaces back to the worker,
   *  which copies the next frame into them, so that a steady stream allocates no
   *  arrays (no garbage-collection pauses from it). An Avatar's arrays are then valid
   *  only until its next frame event (empty after it): copy what you keep. Default
   *  false. */
  recycle?: boolean;
  /** `[index, count]`: receive only the avatars the server puts in that shard of
   *  `count` (FNV-1a of the id modulo count; what `workers` uses). Default: all. */
  shard?: [number, number] | null;
  /** Assets held already (e.g. another client's): kept as if received, and named in
   *  `subscribe`'s `have` so that the server does not send them again. */
  assets?: Asset[];
}

/** What both viewer clients offer (ClothcastClient here, ClothcastWorkerClient in
 *  worker-client.js). Events: "welcome", "asset" (Asset), "avatar" (Avatar), "frame"
 *  (Avatar), "gone" (id), "error" (Error), "close" ({code, reason, retryMs: ms until
 *  the next try, or null}). */
export interface StreamClient extends EventTarget {
  readonly avatars: Map<string, Avatar>;
  readonly assets: Map<string, Asset>;
  tickHz: number;
  /** Connections opened so far (reconnects included). */
  readonly connections: number;
  /** Milliseconds this thread has spent handling the server's messages (parsing,
   *  decoding garments, the listeners of the events they raise). */
  readonly busyMs: number;
  connect(): this;
  /** Closes for good: no reconnecting. */
  close(): void;
}

export interface ClothcastClient extends StreamClient {
  /** Assets frames named that this client lacks (their `asset` never came, or was
   *  refused) → when it last asked the server for them (performance.now(), ms); each
   *  asked for again each second, with the avatar's keyframe, until it comes. */
  readonly missingAssets: Map<string, number>;
}
/** The viewer client, decoding on the thread that runs it (see StreamClient). */
export declare class ClothcastClient extends EventTarget {
  constructor(url: string, options?: ClothcastClientOptions);
}

/** Per-vertex normals of a mesh (`pos`: 3 floats per vertex, `tri`: 3 indices per
 *  triangle) into `out`: the sum of the adjacent triangles' unnormalised normals (area
 *  weighted, not unit length). */
export declare function vertexNormals(pos: Float32Array, tri: Uint32Array, out: Float32Array): Float32Array;

/** Writes 22 column-major 4×4 skinning matrices (rest → posed) into `out` (length 352). */
export declare function skinningMatrices(pose: Float32Array, skeleton: Float32Array, parents: number[], out: Float32Array): Float32Array;

/** Writes one column-major 4×4 world matrix per bone (world ∘ bone) into `out` (length
 *  16 × bones) from an avatar's `bones` and `world`: the body's skinning matrices. */
export declare function boneMatrices(bones: Float32Array, world: Float32Array, out: Float32Array): Float32Array;

/** A `frame` message as the server sends it in the map form (MessagePack field names). */
export interface FrameMessage {
  type: "frame";
  avatar: string;
  seq: number;
  timestamp: number;
  pose_timestamp: number;
  world: number[];
  pose: Uint8Array;
  asset: string;
  garment: Uint8Array;
  layers: { asset: string; garment: Uint8Array }[];
}

/** A compact `frame` message (a decoded MessagePack array) as the map form's object;
 *  throws an Error naming the entry that is wrong. The client calls it on every frame. */
export declare function readFrame(entries: unknown[]): FrameMessage;
