// clothcast viewer client: connects to a clothcast server, speaks the viewer protocol
// (README "The server and its protocol"), and keeps per avatar the body mesh with skin
// weights, the body pose of the last frame, and the garment positions decoded in place.
// Dependency-free ES module.
//
//   import { ClothcastClient } from "./clothcast.js";
//   const cc = new ClothcastClient("ws://127.0.0.1:8470/ws", { token: "…" });
//   cc.addEventListener("frame", (e) => draw(e.detail));   // e.detail: the Avatar
//   cc.connect();
//
// The client reconnects by itself when the connection drops (server restarted, network
// gone, peer timeout), after 0.5 s, doubling to at most 10 s while it keeps failing, and
// reset once a server welcomes it again: every avatar is dropped ("gone") and streams
// again from a keyframe. It does not retry after close() nor after a refusal that a
// retry cannot change (4001 wrong token, 1002 bad hello or protocol version);
// { reconnect: false } turns it off. A "close" event reports each drop with
// { code, reason, retryMs } (retryMs null: no retry).
//
// A link that dies without closing (a kiosk's network gone, a server host powered off)
// can take the browser minutes to notice, and it cannot see WebSocket pings: after
// pingAfterMs (5 s) without word from the server the client sends a `ping` message, and
// when one has gone unanswered until deadAfterMs (20 s) without word it drops the
// connection itself (code 1006) and reconnects as above. A connection that has not
// opened within deadAfterMs is dropped the same way.
//
// Avatar: { id, asset, garment: Float32Array (canonical frame, metres, decoded in place),
//           layers: [{ asset, garment: Float32Array }] (an outfit's garments worn over
//           the first, inner to outer; empty for one garment),
//           bones: Float32Array(7 × 22) (the skeleton's skinning transforms, rest →
//             posed, canonical frame, as the garment's codec frame carries them:
//             quaternion x,y,z,w then translation in metres; boneMatrices() below),
//           pose: Float32Array (pelvis translation + 22 local quaternions x,y,z,w;
//             filled only with { pose: true }, zeros otherwise),
//           world: Float32Array(7) (garment canonical → world: quaternion, translation),
//           seq, frames, bytes, dropped, latencyMs,
//           resyncAsked: when (performance.now(), ms) the client last asked the server
//             for a keyframe of it, a frame of its refused; null while in step }
// A frame the decoder refuses (corrupt, or a delta whose reference it lacks) leaves its
// avatar's garment at the last decoded frame and raises an "error" event (not for a
// missing reference, which only follows one); the client asks for a keyframe
// (`resync`), again each second while none comes, and the avatar streams on from it.
// A frame naming an asset the client lacks (its `asset` never came, or was refused)
// raises one "error" for that asset and asks the server for it again (`resync`'s
// `assets`, each second while it does not come: client.missingAssets), with the
// avatar's keyframe.
// client.busyMs: milliseconds this thread has spent handling the server's messages
// (parsing, decoding, the event listeners they run). ClothcastWorkerClient
// (worker-client.js) runs all of this in a Web Worker instead, off the page's thread.
//
// The client subscribes without the body pose in its frames (364 bytes a frame, about a
// sixth of a walking 3 000-vertex avatar's): the codec frames carry the bones, which
// pose the body as well. { pose: true } asks for it too. It asks for frames in the
// compact form (a MessagePack array, ~65 bytes a frame less than the map; readFrame).
// Asset:  { hash, garment (name, what `wear` takes), setup (GarmentSetup), bodyPositions,
//           bodyTriangles, bodyJoints, bodyWeights, skeleton (22 rest joint positions),
//           parents }

import { decode } from "./msgpack.js";
import { GarmentSetup, GarmentDecoder, CodecError } from "./codec.js";

export const PROTOCOL_VERSION = 1;

/** Reconnect delays, ms: the first, and the most it doubles to. */
const RETRY_FIRST_MS = 500;
const RETRY_MAX_MS = 10000;
/** Without word from the server: ping after this long, ms; give up after this long. */
const PING_AFTER_MS = 5000;
const DEAD_AFTER_MS = 20000;
/** While an avatar's frames cannot be decoded (a frame of its refused), its keyframe is
 * asked for again after this long, ms: a server sends it within a tick or two. */
const RESYNC_AGAIN_MS = 1000;
/** Close codes after which reconnecting cannot help: wrong token, bad hello/version. */
const FINAL_CLOSE_CODES = new Set([4001, 1002]);

/** Compact frame entries before its layers (README "The server and its protocol"). */
const COMPACT_HEAD = 9;
const MAX_OUTFIT = 4;

/**
 * A `frame` message from its compact form (a decoded MessagePack array: "frame",
 * avatar, seq, timestamp, pose_timestamp, world as 28 bytes of 7 little-endian f32,
 * pose bytes, asset, garment bytes, then an asset and garment bytes per layer) as the
 * map form's object; throws an Error naming the entry that is wrong.
 */
export function readFrame(a) {
  const fail = (what) => { throw new Error(`compact frame: ${what}`); };
  const layers = (a.length - COMPACT_HEAD) / 2;
  if (!Number.isInteger(layers) || layers < 0 || layers > MAX_OUTFIT - 1) fail(`${a.length} entries; a frame has ${COMPACT_HEAD} and two per layer, at most ${MAX_OUTFIT - 1} layers`);
  const str = (i, what) => (typeof a[i] === "string" ? a[i] : fail(`${what}: not a string`));
  const bin = (i, what) => (a[i] instanceof Uint8Array ? a[i] : fail(`${what}: not bytes`));
  const num = (i, what) => (typeof a[i] === "number" ? a[i] : fail(`${what}: not a number`));
  if (a[0] !== "frame") fail('its first entry is not "frame"');
  const w = bin(5, "world");
  if (w.byteLength !== 28) fail(`world: ${w.byteLength} bytes, not 7 floats (28)`);
  const wv = new DataView(w.buffer, w.byteOffset, 28);
  return {
    type: "frame", avatar: str(1, "avatar"), seq: num(2, "seq"), timestamp: num(3, "timestamp"),
    pose_timestamp: num(4, "pose_timestamp"), world: Array.from({ length: 7 }, (_, i) => wv.getFloat32(4 * i, true)),
    pose: bin(6, "pose"), asset: str(7, "asset"), garment: bin(8, "garment"),
    layers: Array.from({ length: layers }, (_, k) => ({
      asset: str(COMPACT_HEAD + 2 * k, "a layer's asset"), garment: bin(COMPACT_HEAD + 2 * k + 1, "a layer's garment") })),
  };
}

const f32 = (b) => new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
const u32 = (b) => new Uint32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));

export class ClothcastClient extends EventTarget {
  constructor(url, { token = null, avatars = null, reconnect = true, pingAfterMs = PING_AFTER_MS, deadAfterMs = DEAD_AFTER_MS, pose = false, shard = null, assets = [] } = {}) {
    super();
    this.url = url;
    this.token = token;
    this.pose = pose;
    this.shard = shard; // [index, count]: only the avatars of that shard (the server's shard_of)
    this.subscription = avatars;
    this.reconnect = reconnect;
    this.pingAfterMs = pingAfterMs;
    this.deadAfterMs = Math.max(deadAfterMs, pingAfterMs);
    this.watchdog = null;
    this.retryMs = RETRY_FIRST_MS;
    this.retryTimer = null;
    this.closed = false;
    this.connections = 0;
    this.assets = new Map();
    // assets held already (another client's: ClothcastWorkerClient hands its first
    // worker's to the others), not downloaded again (`have`); a setup that crossed a
    // postMessage is a plain copy: made a GarmentSetup again
    for (const a of assets ?? []) {
      if (!(a?.setup instanceof GarmentSetup)) Object.setPrototypeOf(a.setup, GarmentSetup.prototype);
      this.assets.set(a.hash, a);
    }
    this.avatars = new Map();
    // assets frames named that this client lacks (their `asset` never came, or was
    // refused) → when last asked for (performance.now(), ms)
    this.missingAssets = new Map();
    this.tickHz = 0;
    this.ws = null;
    this.clockOffset = Infinity; // min(receive time − server timestamp), ms
    // milliseconds spent handling the server's messages (parsing, decoding garments,
    // and the listeners of the events they raise), since the client was made
    this.busyMs = 0;
  }

  connect() {
    this.closed = false;
    clearTimeout(this.retryTimer);
    this.connections++;
    const ws = new WebSocket(this.url);
    ws.binaryType = "arraybuffer";
    // the watchdog: word from the server is any message; a ping goes out after
    // pingAfterMs of silence (once welcomed), and deadAfterMs of silence drops the link
    let heard = performance.now(), pinged = -Infinity, welcomed = false;
    clearInterval(this.watchdog);
    this.watchdog = setInterval(() => {
      const now = performance.now(), quiet = now - heard;
      if (quiet >= this.deadAfterMs) {
        this.lost(ws, 1006, `no word from the server for ${(quiet / 1000).toFixed(1)} s`);
        try { ws.close(); } catch { /* already closing */ }
      } else if (welcomed && quiet >= this.pingAfterMs && now - pinged >= this.pingAfterMs && ws.readyState === WebSocket.OPEN) {
        pinged = now;
        ws.send('{"type":"ping"}');
      }
    }, Math.max(10, Math.min(1000, this.pingAfterMs / 2)));
    ws.onopen = () => {
      ws.send(JSON.stringify({ type: "hello", version: PROTOCOL_VERSION, role: "viewer", token: this.token }));
      // the assets an earlier connection brought are not sent again (`have`)
      const have = [...this.assets.keys()].slice(0, 64);
      ws.send(JSON.stringify({ type: "subscribe", avatars: this.subscription, pose: this.pose, compact: true, ...(this.shard ? { shard: this.shard } : {}), ...(have.length ? { have } : {}) }));
    };
    ws.onmessage = (ev) => {
      if (this.ws !== ws) return;
      heard = performance.now();
      try {
        let m = ev.data instanceof ArrayBuffer ? decode(ev.data) : JSON.parse(ev.data);
        if (Array.isArray(m)) m = readFrame(m);
        if (m.type === "welcome") welcomed = true;
        this.handle(m, ev.data.byteLength ?? 0);
      } catch (e) {
        this.dispatchEvent(new CustomEvent("error", { detail: e }));
      }
      this.busyMs += performance.now() - heard;
    };
    ws.onclose = (ev) => this.lost(ws, ev.code, ev.reason);
    this.ws = ws;
    return this;
  }

  /** Connection `ws` ended (closed, or given up on by the watchdog). */
  lost(ws, code, reason) {
    if (this.ws !== ws) return;
    this.ws = null;
    clearInterval(this.watchdog);
    // what this connection streamed is gone; the next one starts from keyframes
    for (const id of [...this.avatars.keys()]) {
      this.avatars.delete(id);
      this.dispatchEvent(new CustomEvent("gone", { detail: id }));
    }
    this.clockOffset = Infinity;
    // (the next subscription brings every asset not held)
    this.missingAssets.clear();
    const retry = this.reconnect && !this.closed && !FINAL_CLOSE_CODES.has(code);
    const retryMs = retry ? this.retryMs : null;
    this.dispatchEvent(new CustomEvent("close", { detail: { code, reason, retryMs } }));
    if (retry) {
      this.retryTimer = setTimeout(() => { if (!this.closed) this.connect(); }, retryMs);
      this.retryMs = Math.min(2 * this.retryMs, RETRY_MAX_MS);
    }
  }

  /** Closes the connection for good (no reconnecting). */
  close() {
    this.closed = true;
    clearTimeout(this.retryTimer);
    clearInterval(this.watchdog);
    this.ws?.close(1000, "bye");
  }

  /** Asks the server for a keyframe of `av` (a `resync`), unless one was asked for in
   * the last RESYNC_AGAIN_MS. */
  resync(av) {
    const now = performance.now();
    if (av.resyncAsked != null && now - av.resyncAsked < RESYNC_AGAIN_MS) return;
    av.resyncAsked = now;
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify({ type: "resync", avatars: [av.id] }));
  }

  /** Asks the server again for asset `hash`, which a frame of avatar `id` named (and
   * for that avatar's keyframe: its stream restarts once the asset is in), unless
   * asked in the last RESYNC_AGAIN_MS. */
  askAsset(hash, id) {
    const now = performance.now();
    const asked = this.missingAssets.get(hash);
    if (asked != null && now - asked < RESYNC_AGAIN_MS) return;
    this.missingAssets.set(hash, now);
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify({ type: "resync", avatars: [id], assets: [hash] }));
  }

  handle(m, size) {
    switch (m.type) {
      case "welcome":
        this.retryMs = RETRY_FIRST_MS;
        this.tickHz = m.tick_hz;
        this.dispatchEvent(new CustomEvent("welcome", { detail: m }));
        break;
      case "asset": {
        const a = {
          hash: m.hash,
          garment: m.garment ?? "",
          setup: GarmentSetup.parse(m.setup),
          bodyPositions: f32(m.body_positions),
          bodyTriangles: u32(m.body_triangles),
          bodyJoints: new Uint8Array(m.body_joints),
          bodyWeights: f32(m.body_weights),
          skeleton: f32(m.skeleton),
          parents: m.parents,
        };
        this.assets.set(a.hash, a);
        this.missingAssets.delete(a.hash);
        this.dispatchEvent(new CustomEvent("asset", { detail: a }));
        break;
      }
      case "frame": {
        // an asset it lacks: asked for again with the avatar's keyframe; said once
        const lacking = [m.asset, ...(m.layers ?? []).map((l) => l.asset)].find((h) => !this.assets.has(h));
        if (lacking !== undefined) {
          const said = this.missingAssets.has(lacking);
          this.askAsset(lacking, m.avatar);
          if (said) return;
          throw new Error(`frame of ${m.avatar} for unknown asset ${lacking} (asked for again)`);
        }
        const asset = this.assets.get(m.asset);
        // an outfit's garments over the first, inner to outer (absent for one garment)
        const over = (m.layers ?? []).map((l) => this.assets.get(l.asset));
        let av = this.avatars.get(m.avatar);
        const same = av && av.asset === asset && av.layers.length === over.length && av.layers.every((l, i) => l.asset === over[i]);
        if (!same) {
          // a new avatar, or new garments: new streams, starting with keyframes
          const layer = (a) => ({ asset: a, decoder: new GarmentDecoder(a.setup), garment: new Float32Array(3 * a.setup.vertexCount) });
          const first = layer(asset);
          av = { id: m.avatar, asset, decoder: first.decoder, garment: first.garment, layers: over.map(layer),
            bones: new Float32Array(7 * asset.setup.bones), pose: new Float32Array(3 + 4 * 22), world: new Float32Array(7),
            seq: -1, frames: 0, bytes: 0, dropped: 0, latencyMs: 0, resyncAsked: null };
          this.avatars.set(m.avatar, av);
          this.dispatchEvent(new CustomEvent("avatar", { detail: av }));
        }
        av.bytes += size;
        try {
          av.decoder.decode(m.garment, av.garment);
          // every layer's frame has the frame's number: in step with the first
          av.layers.forEach((l, i) => l.decoder.decode(m.layers[i].garment, l.garment));
        } catch (e) {
          if (!(e instanceof CodecError)) throw e;
          // out of step (a corrupt frame, or a delta whose reference it lacks): every
          // delta after it is refused too, until the keyframe asked for here
          av.dropped++;
          this.resync(av);
          if (e.code === "missing-reference") return;
          e.message = `avatar ${av.id}: frame refused: ${e.message}`;
          throw e;
        }
        av.resyncAsked = null;
        if (av.seq >= 0 && m.seq > av.seq + 1) av.dropped += m.seq - av.seq - 1;
        av.seq = m.seq;
        av.frames++;
        av.decoder.bones(av.bones);
        if (m.pose && m.pose.byteLength) {
          const pv = new DataView(m.pose.buffer, m.pose.byteOffset, m.pose.byteLength);
          for (let i = 0; i < av.pose.length && 4 * i + 4 <= m.pose.byteLength; i++) av.pose[i] = pv.getFloat32(4 * i, true);
        }
        for (let i = 0; i < 7; i++) av.world[i] = m.world[i];
        // latency above the fastest frame seen (the clocks are not shared)
        const now = performance.now() - m.timestamp * 1000;
        this.clockOffset = Math.min(this.clockOffset, now);
        av.latencyMs = now - this.clockOffset;
        this.dispatchEvent(new CustomEvent("frame", { detail: av }));
        break;
      }
      case "pong": // an answer to the watchdog's ping: hearing it was the point
        break;
      case "gone":
        this.avatars.delete(m.avatar);
        this.dispatchEvent(new CustomEvent("gone", { detail: m.avatar }));
        break;
      case "error":
        this.dispatchEvent(new CustomEvent("error", { detail: new Error(`${m.code}: ${m.message}`) }));
        break;
      default:
        break;
    }
  }
}

// Per-vertex normals of a triangle mesh (positions `pos`, 3 floats per vertex; `tri`,
// 3 vertex indices per triangle) into `out` (3 floats per vertex): the sum of the
// unnormalised normals (twice the area) of the triangles around each vertex, so larger
// triangles weigh more; not unit length (a shader normalises). What the viewer lights
// garments with; ClothcastWorkerClient computes them in its worker with { normals: true }.
export function vertexNormals(pos, tri, out) {
  out.fill(0);
  for (let t = 0; t < tri.length; t += 3) {
    const a = 3 * tri[t], b = 3 * tri[t + 1], c = 3 * tri[t + 2];
    const ux = pos[b] - pos[a], uy = pos[b + 1] - pos[a + 1], uz = pos[b + 2] - pos[a + 2];
    const vx = pos[c] - pos[a], vy = pos[c + 1] - pos[a + 1], vz = pos[c + 2] - pos[a + 2];
    const nx = uy * vz - uz * vy, ny = uz * vx - ux * vz, nz = ux * vy - uy * vx;
    out[a] += nx; out[a + 1] += ny; out[a + 2] += nz;
    out[b] += nx; out[b + 1] += ny; out[b + 2] += nz;
    out[c] += nx; out[c + 1] += ny; out[c + 2] += nz;
  }
  return out;
}

// q = a ⊗ b for quaternions (x, y, z, w) at offsets ao, bo, into o at oo.
function qmul(a, ao, b, bo, o, oo) {
  const ax = a[ao], ay = a[ao + 1], az = a[ao + 2], aw = a[ao + 3];
  const bx = b[bo], by = b[bo + 1], bz = b[bo + 2], bw = b[bo + 3];
  o[oo] = aw * bx + ax * bw + ay * bz - az * by;
  o[oo + 1] = aw * by - ax * bz + ay * bw + az * bx;
  o[oo + 2] = aw * bz + ax * by - ay * bx + az * bw;
  o[oo + 3] = aw * bw - ax * bx - ay * by - az * bz;
}

// The vector (x, y, z) rotated by the unit quaternion at q[qo].
function rotate(q, qo, x, y, z) {
  const qx = q[qo], qy = q[qo + 1], qz = q[qo + 2], qw = q[qo + 3];
  const tx = 2 * (qy * z - qz * y), ty = 2 * (qz * x - qx * z), tz = 2 * (qx * y - qy * x);
  return [x + qw * tx + (qy * tz - qz * ty), y + qw * ty + (qz * tx - qx * tz), z + qw * tz + (qx * ty - qy * tx)];
}

// The column-major 4×4 matrix of rotation q[qo] (a unit quaternion) then translation
// (tx, ty, tz), into m.
function rigidMatrix(q, qo, tx, ty, tz, m) {
  const x = q[qo], y = q[qo + 1], z = q[qo + 2], w = q[qo + 3];
  m[0] = 1 - 2 * (y * y + z * z); m[1] = 2 * (x * y + w * z); m[2] = 2 * (x * z - w * y); m[3] = 0;
  m[4] = 2 * (x * y - w * z); m[5] = 1 - 2 * (x * x + z * z); m[6] = 2 * (y * z + w * x); m[7] = 0;
  m[8] = 2 * (x * z + w * y); m[9] = 2 * (y * z - w * x); m[10] = 1 - 2 * (x * x + y * y); m[11] = 0;
  m[12] = tx; m[13] = ty; m[14] = tz; m[15] = 1;
}

// Skinning transforms of the canonical skeleton (the Rust `Skeleton::skinning_transforms`):
// for pose p (pelvis translation + local quaternions) and rest joint positions, writes
// 22 column-major 4×4 matrices into `out` (Float32Array(22 * 16)).
export function skinningMatrices(pose, skeleton, parents, out) {
  const n = parents.length;
  const rot = new Float64Array(4 * n), pos = new Float64Array(3 * n);
  for (let j = 0; j < n; j++) {
    const p = parents[j];
    if (p < 0) {
      for (let k = 0; k < 4; k++) rot[4 * j + k] = pose[3 + 4 * j + k];
      for (let k = 0; k < 3; k++) pos[3 * j + k] = skeleton[3 * j + k] + pose[k];
    } else {
      qmul(rot, 4 * p, pose, 3 + 4 * j, rot, 4 * j);
      const l = Math.hypot(rot[4 * j], rot[4 * j + 1], rot[4 * j + 2], rot[4 * j + 3]) || 1;
      for (let k = 0; k < 4; k++) rot[4 * j + k] /= l;
      const o = rotate(rot, 4 * p, skeleton[3 * j] - skeleton[3 * p], skeleton[3 * j + 1] - skeleton[3 * p + 1], skeleton[3 * j + 2] - skeleton[3 * p + 2]);
      for (let k = 0; k < 3; k++) pos[3 * j + k] = pos[3 * p + k] + o[k];
    }
  }
  for (let j = 0; j < n; j++) {
    const r = rotate(rot, 4 * j, skeleton[3 * j], skeleton[3 * j + 1], skeleton[3 * j + 2]);
    rigidMatrix(rot, 4 * j, pos[3 * j] - r[0], pos[3 * j + 1] - r[1], pos[3 * j + 2] - r[2], out.subarray(16 * j, 16 * j + 16));
  }
  return out;
}

// World skinning matrices of the body from a frame's bones (Avatar.bones: per bone the
// rest → posed transform in the canonical frame, quaternion x,y,z,w then translation)
// and its canonical → world motion (Avatar.world): per bone world ∘ bone, as column-major
// 4×4 matrices into `out` (Float32Array(16 × bones)). The quaternions are renormalised
// (the stream carries them to 2^-14).
export function boneMatrices(bones, world, out) {
  const q = new Float64Array(4);
  for (let j = 0; j < bones.length / 7; j++) {
    qmul(world, 0, bones, 7 * j, q, 0);
    const l = Math.hypot(q[0], q[1], q[2], q[3]) || 1;
    for (let k = 0; k < 4; k++) q[k] /= l;
    const t = rotate(world, 0, bones[7 * j + 4], bones[7 * j + 5], bones[7 * j + 6]);
    rigidMatrix(q, 0, t[0] + world[4], t[1] + world[5], t[2] + world[6], out.subarray(16 * j, 16 * j + 16));
  }
  return out;
}
