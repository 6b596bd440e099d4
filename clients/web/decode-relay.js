// What ClothcastWorkerClient (worker-client.js) runs where the decoding happens: a
// ClothcastClient whose every event is handed to `post` as a plain message, a frame's
// arrays as copies with the list of their buffers (to transfer). decode-worker.js runs
// it in a Web Worker; worker-client.js runs it on the page itself where a module worker
// cannot start (browsers without module workers).
//
// With `recycle` the copies are made into arrays the page has handed back (the
// returned client's recycle(arrays)) where one of the right length is at hand, so
// that a steady stream allocates nothing per frame.
//
// Latest wins towards the page, as it does on the server: at most IN_FLIGHT_MAX frames
// of one avatar are on their way to the page at once (the page says when it has taken
// one in: the returned client's took(id)). A frame decoded while that many are on their
// way waits, and the next one decoded replaces it (counted in the avatar's `skipped`),
// so a page that falls behind (a long task, a tab in the background) gets its avatars'
// latest frames when it is back, not a backlog of stale ones to copy and upload. The
// worker decodes every frame all the same (each delta needs the one before).
//
// Messages: { ev: "connecting" | "welcome" | "asset" | "frame" | "gone" | "close" |
// "error", ... }; read by ClothcastWorkerClient.onEvent.

import { ClothcastClient, vertexNormals } from "./clothcast.js";

/** Most arrays of one length kept for reuse (the page hands back one set per frame
 * it replaces, so a steady stream keeps a few per avatar; any more are let go). */
const POOL_MAX = 256;

/** Most frames of one avatar on their way to the page, not yet taken in: two, so that
 * the next frame is already there as the page takes one in. With `recycle` this bounds
 * the arrays made for an avatar, whatever the page's pace, at 3 sets: a frame is copied
 * only while fewer than two are on their way, so the sets out of the pool are the one
 * the page holds, at most one on its way, and the one being copied. */
export const IN_FLIGHT_MAX = 2;

/** Float32Arrays to copy frames into: made new, or with `recycle` taken from those
 * the page handed back. `made` counts the arrays made new. */
class Arrays {
  constructor(recycle) {
    this.recycle = recycle;
    this.pool = new Map(); // length → arrays of that length
    this.made = 0;
  }

  /** An array of `length` floats whose contents the caller overwrites. */
  take(length) {
    const a = this.recycle ? this.pool.get(length)?.pop() : undefined;
    if (a) return a;
    this.made++;
    return new Float32Array(length);
  }

  /** A copy of `src`. */
  copy(src) {
    const a = this.take(src.length);
    a.set(src);
    return a;
  }

  /** Keeps handed-back arrays for reuse: Float32Arrays only, and not empty (an array
   * whose buffer was moved elsewhere has length 0). */
  give(arrays) {
    if (!this.recycle || !Array.isArray(arrays)) return;
    for (const a of arrays) {
      if (!(a instanceof Float32Array) || a.length === 0) continue;
      let pool = this.pool.get(a.length);
      if (!pool) this.pool.set(a.length, (pool = []));
      if (pool.length < POOL_MAX) pool.push(a);
    }
  }
}

/** A frame's message and the buffers it moves: copies of the avatar's arrays (the
 * client's own go on being decoded into), and with `normals` each garment's vertex
 * normals (vertexNormals). */
function frameData(client, av, normals, arrays, skipped) {
  const garment = arrays.copy(av.garment);
  const layers = av.layers.map((l) => arrays.copy(l.garment));
  const bones = arrays.copy(av.bones), pose = arrays.copy(av.pose), world = arrays.copy(av.world);
  const normalsOf = (g, a) => (normals ? vertexNormals(g, a.setup.triangles, arrays.take(g.length)) : null);
  const garmentNormals = normalsOf(garment, av.asset);
  const layerNormals = layers.map((g, i) => normalsOf(g, av.layers[i].asset));
  const msg = { ev: "frame", id: av.id, asset: av.asset.hash, layerAssets: av.layers.map((l) => l.asset.hash),
    garment, layers, normals: garmentNormals, layerNormals, bones, pose, world, seq: av.seq, frames: av.frames,
    bytes: av.bytes, dropped: av.dropped, skipped, latencyMs: av.latencyMs, busyMs: client.busyMs, arraysMade: arrays.made };
  const moved = [garment, ...layers, garmentNormals, ...layerNormals, bones, pose, world].filter((a) => a);
  return [msg, moved.map((a) => a.buffer)];
}

/** Connects a ClothcastClient (`url`, `options`: its constructor's arguments,
 * `normals`: whether frames carry the garments' vertex normals, and `recycle`: whether
 * frames are copied into arrays handed back) that hands every event to
 * `post(message, transfer)`; returns the client, with `recycle(arrays)` added: takes
 * back a replaced frame's arrays (ignored without the `recycle` option), and `took(id)`:
 * the page has taken in a frame of avatar `id` (one call per frame posted; see
 * IN_FLIGHT_MAX). */
export function relay(url, options, post) {
  const client = new ClothcastClient(url, options);
  const normals = options.normals === true;
  const arrays = new Arrays(options.recycle === true);
  client.recycle = (handed) => arrays.give(handed);
  // per avatar id: frames posted and not yet taken in, whether a decoded frame waits,
  // and how many decoded frames never went (replaced while waiting)
  const flow = new Map();
  const send = (av, f) => {
    f.posted++;
    f.waiting = false;
    post(...frameData(client, av, normals, arrays, f.skipped));
  };
  client.took = (id) => {
    const f = flow.get(id);
    if (!f) return;
    f.posted = Math.max(0, f.posted - 1);
    const av = client.avatars.get(id);
    if (f.waiting && av) send(av, f);
  };
  client.addEventListener("welcome", (e) => post({ ev: "welcome", detail: e.detail, tickHz: client.tickHz, connections: client.connections }, []));
  // (an asset is plain data, its setup too: the page gets a copy with the same fields)
  client.addEventListener("asset", (e) => post({ ev: "asset", asset: e.detail }, []));
  client.addEventListener("frame", (e) => {
    const av = e.detail;
    let f = flow.get(av.id);
    if (!f) flow.set(av.id, (f = { posted: 0, waiting: false, skipped: 0 }));
    if (f.posted < IN_FLIGHT_MAX) send(av, f);
    else {
      if (f.waiting) f.skipped++;
      f.waiting = true;
    }
  });
  client.addEventListener("gone", (e) => {
    // (a waiting frame goes with it; the page's late took() for a frame still on its
    // way finds no entry, or that of an avatar back under the same id, which then may
    // send one frame early: harmless)
    flow.delete(e.detail);
    post({ ev: "gone", id: e.detail }, []);
  });
  client.addEventListener("close", (e) => post({ ev: "close", detail: e.detail, connections: client.connections }, []));
  client.addEventListener("error", (e) => post({ ev: "error", message: String(e.detail?.message ?? e.detail) }, []));
  client.connect();
  post({ ev: "connecting", connections: client.connections }, []);
  return client;
}
