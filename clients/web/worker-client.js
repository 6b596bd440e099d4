// ClothcastClient with the connection and the garment decoding in a Web Worker
// (decode-worker.js), so that the page's thread — the one that renders, and in WebXR
// the one that must make every headset frame — only receives decoded arrays. Ten
// avatars in a 3 000-vertex garment at 30 Hz kept the decoding thread 17–19 % busy in
// Chromium on a server core (tests/gltf/decode-threads.mjs; a headset's cores are
// slower): on the page's thread that is time taken from rendering, in bursts as each
// tick's frames arrive.
//
//   import { ClothcastWorkerClient } from "./worker-client.js";
//   const cc = new ClothcastWorkerClient("ws://127.0.0.1:8470/ws", { token: "…" });
//   cc.addEventListener("frame", (e) => draw(e.detail));   // e.detail: the Avatar
//   cc.connect();
//
// The same constructor options, events (welcome, asset, avatar, frame, gone, close,
// error) and Avatar and Asset shapes as ClothcastClient (clothcast.js), but:
// - an Avatar has no `decoder` (it lives in the worker); its arrays (garment, each
//   layer's garment, bones, pose, world) are *replaced* by every frame, not written
//   in place, so read them from the avatar when drawing rather than keeping them;
// - an Asset's setup is a plain copy of the worker's GarmentSetup (the same fields);
// - an "error" event's detail is an Error carrying the worker's message;
// - busyMs is the time the worker has spent handling messages, pageMs the time this
//   thread has spent taking its results in;
// - with { normals: true } the worker also computes each garment's vertex normals
//   (vertexNormals in clothcast.js): avatar.normals and each layer's normals (null
//   without it), replaced every frame as the positions are;
// - with { workers: n } (1 to 64, default 1) it runs n workers, each with its own
//   connection subscribed to its shard of the avatars (`subscribe`'s `shard`: the
//   server splits them by their ids), so that a room of avatars is decoded on n cores
//   instead of one; each avatar arrives on one connection. The first worker connects
//   alone; the others once the assets its welcome announced are in, handed them and
//   saying so (`have`), so that the garments' setups and bodies are downloaded once.
//   "welcome" and "close" come once per connection; busyMs is the workers' sum,
//   `slots` has each worker's connections, busyMs and assets received.
// - with { recycle: true } the arrays a frame replaces (the avatar's garment, normals,
//   layers' garments and normals, bones, pose, world) are moved back to the worker as
//   the next frame of that avatar arrives, and that frame's arrays are copied into
//   them: a steady stream then allocates no arrays per frame (a 3 000-vertex garment
//   is ~36 kB a frame, ~11 MB/s for ten avatars at 30 Hz, for the garbage collector
//   to reclaim, in pauses a headset shows as dropped frames). Hold nothing across
//   frames then: an array handed back is empty (length 0) from that moment (or,
//   where no worker could start, overwritten by a later frame). Copy
//   what you keep, or upload it (e.g. to a WebGL buffer) when its frame event comes.
//   arraysMade counts the arrays the workers made new: at most 3 sets per avatar
//   (decode-relay.js's IN_FLIGHT_MAX), whatever the page's pace;
// - latest wins towards the page: at most two frames of an avatar are on their way to
//   this thread at once; a frame decoded meanwhile waits and is replaced by the next, so
//   a page that falls behind (a long task, a tab in the background) gets each avatar's
//   latest frame when it is back, not a backlog of stale ones. An Avatar's `skipped`
//   counts the frames the worker decoded and never passed on (`dropped` counts those the
//   server never sent).
// The worker script is found next to this module (decode-worker.js), as a module
// worker (Chrome 80, Firefox 114, Safari 15 and later). Where one cannot start (an older
// browser, a page whose policy forbids workers) the client decodes on the page's thread
// instead, with the same events (`inWorker` then turns false).

import { relay } from "./decode-relay.js";

export class ClothcastWorkerClient extends EventTarget {
  constructor(url, options = {}) {
    super();
    this.url = url;
    this.options = options;
    this.assets = new Map();
    this.avatars = new Map();
    this.tickHz = 0;
    this.connections = 0;
    this.busyMs = 0;
    this.pageMs = 0;
    this.arraysMade = 0;
    this.inWorker = true;
    // per worker, while connected through workers: { worker, connections, busyMs }
    this.workers = [];
    this.here = null; // the ClothcastClient on this thread, where no worker could start
    this.earlier = 0; // connections of the workers before these (connect after close)
    this.generation = 0; // connect() calls: what an earlier worker says late is dropped
    this.slots = []; // the workers, or the one client on this thread: their figures
    this.startRest = null; // with several workers: starts all but the first (once)
    this.restTimer = null;
    this.expected = null; // the asset hashes the first worker's welcome announced
  }

  /** The worker (the first, with several), while connected through one. */
  get worker() {
    return this.workers[0]?.worker ?? null;
  }

  connect() {
    if (this.workers.length || this.here) return this;
    // (ClothcastClient's options as given, plus `normals`: plain data, so each worker
    // gets a copy; with `workers` > 1 each its own shard of the avatars)
    const n = Math.max(1, Math.min(64, Math.floor(Number(this.options.workers ?? 1)) || 1));
    this.earlier = this.connections;
    const generation = ++this.generation;
    const take = (m, slot) => {
      if (generation !== this.generation) return;
      const t = performance.now();
      try {
        this.onEvent(m, slot);
      } catch (err) {
        this.dispatchEvent(new CustomEvent("error", { detail: err }));
      } finally {
        // (every frame taken in, refused or not, lets the worker send that avatar's next)
        if (m?.ev === "frame") {
          if (slot.worker) slot.worker.postMessage({ op: "took", id: m.id });
          else this.here?.took(m.id);
        }
      }
      this.pageMs += performance.now() - t;
    };
    const here = () => {
      // one client for every avatar (no shards) on this thread
      this.inWorker = false;
      this.workers = [];
      this.stopRest();
      const slot = { connections: 0, busyMs: 0, assets: 0, arraysMade: 0 };
      const { workers, ...options } = this.options;
      this.here = relay(this.url, options, (m) => take(m, slot));
      this.slots = [slot];
    };
    let heard = false;
    const started = [];
    for (let i = 0; i < n; i++) {
      let worker;
      try {
        worker = new Worker(new URL("./decode-worker.js", import.meta.url), { type: "module" });
      } catch {
        worker = null;
      }
      if (!worker) break;
      started.push({ worker, connections: 0, busyMs: 0, assets: 0, arraysMade: 0 });
    }
    if (started.length < n) {
      for (const w of started) w.worker.terminate();
      here();
      return this;
    }
    this.workers = started;
    this.slots = started;
    // with several workers the first connects alone; the others once the page holds
    // every asset the first's welcome announced, each told it holds them (`have`), so
    // that the garments' setups and bodies are downloaded once, not once per worker
    // (or after 3 s, downloading them themselves, should the assets not come)
    const optionsFor = (i, assets) => {
      const { workers, ...options } = this.options;
      if (n > 1) options.shard = [i, n];
      if (assets) options.assets = assets;
      return options;
    };
    if (n > 1) {
      let begun = false;
      this.startRest = () => {
        if (begun || generation !== this.generation || !this.workers.length) return;
        begun = true;
        clearTimeout(this.restTimer);
        const assets = [...this.assets.values()];
        for (let i = 1; i < n; i++) this.workers[i].worker.postMessage({ op: "connect", url: this.url, options: optionsFor(i, assets) });
      };
      this.restTimer = setTimeout(() => this.startRest?.(), 3000);
    }
    for (const [i, slot] of started.entries()) {
      const { worker } = slot;
      worker.onmessage = (e) => { heard = true; take(e.data, slot); };
      worker.onerror = (e) => {
        // (a worker already let go: closed, or its sibling failed first and the
        // client went to this thread)
        if (!this.workers.includes(slot)) return;
        if (!heard) {
          // the workers never ran (no module workers here): decode on this thread
          e.preventDefault?.();
          for (const w of this.workers) w.worker.terminate();
          here();
          return;
        }
        this.dispatchEvent(new CustomEvent("error", { detail: new Error(`decode worker: ${e.message ?? "failed"}`) }));
      };
      if (i === 0) worker.postMessage({ op: "connect", url: this.url, options: optionsFor(0) });
    }
    return this;
  }

  /** With several workers: starts the others once the first's announced assets are in. */
  checkRest() {
    if (this.startRest && this.expected && this.expected.every((h) => this.assets.has(h))) this.startRest();
  }

  /** Closes the connections for good (no reconnecting) and ends the workers once they
   * have said goodbye to the server; connect() afterwards starts afresh. */
  close() {
    this.stopRest();
    if (this.here) {
      this.here.close();
      this.here = null;
    }
    for (const { worker } of this.workers) {
      worker.postMessage({ op: "close" });
      setTimeout(() => worker.terminate(), 1000);
    }
    this.workers = [];
  }

  /** Forgets a pending start of the other workers. */
  stopRest() {
    clearTimeout(this.restTimer);
    this.startRest = null;
    this.expected = null;
  }

  /** Sums a per-worker figure over the workers (or the one client on this thread). */
  total(key) {
    return this.slots.reduce((sum, s) => sum + s[key], 0);
  }

  /** With `recycle`: hands the arrays of `av`'s last frame back to the worker of
   * `slot` (or the relay on this thread), to be decoded into again. Only arrays that
   * still own a whole buffer of their own go back (one the page moved elsewhere, or
   * swapped for a view into a larger buffer, stays where it is). */
  recycle(av, slot) {
    const old = [av.garment, av.normals, ...av.layers.flatMap((l) => [l.garment, l.normals]), av.bones, av.pose, av.world];
    const back = old.filter((a) => a instanceof Float32Array && a.length > 0 && a.byteOffset === 0 && a.buffer.byteLength === a.byteLength);
    if (!back.length) return;
    if (slot.worker) slot.worker.postMessage({ op: "recycle", arrays: back }, back.map((a) => a.buffer));
    else this.here?.recycle(back);
  }

  onEvent(m, slot) {
    switch (m.ev) {
      case "connecting":
        slot.connections = m.connections;
        this.connections = this.earlier + this.total("connections");
        break;
      case "welcome":
        this.tickHz = m.tickHz;
        slot.connections = m.connections;
        this.connections = this.earlier + this.total("connections");
        if (slot === this.slots[0] && this.startRest) {
          this.expected = m.detail?.assets ?? [];
          this.checkRest();
        }
        this.dispatchEvent(new CustomEvent("welcome", { detail: m.detail }));
        break;
      case "asset":
        slot.assets++;
        // (an asset may come on several connections, e.g. one whose worker started
        // before the first's assets were in: the first counts)
        if (!this.assets.has(m.asset.hash)) {
          this.assets.set(m.asset.hash, m.asset);
          this.dispatchEvent(new CustomEvent("asset", { detail: m.asset }));
        }
        this.checkRest();
        break;
      case "frame": {
        const asset = this.assets.get(m.asset);
        const over = m.layerAssets.map((h) => this.assets.get(h));
        const lacking = [m.asset, ...m.layerAssets].find((h) => !this.assets.has(h));
        if (lacking !== undefined) throw new Error(`frame of ${m.id} for unknown asset ${lacking}`);
        let av = this.avatars.get(m.id);
        const same = av && av.asset === asset && av.layers.length === over.length && av.layers.every((l, i) => l.asset === over[i]);
        if (!same) {
          av = { id: m.id, asset, garment: m.garment, normals: m.normals, layers: over.map((a, i) => ({ asset: a, garment: m.layers[i], normals: m.layerNormals[i] })),
            bones: m.bones, pose: m.pose, world: m.world, seq: -1, frames: 0, bytes: 0, dropped: 0, skipped: 0, latencyMs: 0 };
          this.avatars.set(m.id, av);
          this.dispatchEvent(new CustomEvent("avatar", { detail: av }));
        }
        else if (this.options.recycle === true) this.recycle(av, slot);
        av.garment = m.garment;
        av.normals = m.normals;
        av.layers.forEach((l, i) => { l.garment = m.layers[i]; l.normals = m.layerNormals[i]; });
        av.bones = m.bones;
        av.pose = m.pose;
        av.world = m.world;
        av.seq = m.seq;
        av.frames = m.frames;
        av.bytes = m.bytes;
        av.dropped = m.dropped;
        av.skipped = m.skipped;
        av.latencyMs = m.latencyMs;
        slot.busyMs = m.busyMs;
        this.busyMs = this.total("busyMs");
        slot.arraysMade = m.arraysMade;
        this.arraysMade = this.total("arraysMade");
        this.dispatchEvent(new CustomEvent("frame", { detail: av }));
        break;
      }
      case "gone":
        this.avatars.delete(m.id);
        this.dispatchEvent(new CustomEvent("gone", { detail: m.id }));
        break;
      case "close":
        slot.connections = m.connections;
        this.connections = this.earlier + this.total("connections");
        this.dispatchEvent(new CustomEvent("close", { detail: m.detail }));
        break;
      case "error":
        this.dispatchEvent(new CustomEvent("error", { detail: new Error(m.message) }));
        break;
      default:
        break;
    }
  }
}
