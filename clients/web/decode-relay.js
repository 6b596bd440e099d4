// What ClothcastWorkerClient (worker-client.js) runs where the decoding happens: a
// ClothcastClient whose every event is handed to `post` as a plain message, a frame's
// arrays as copies with the list of their buffers (to transfer). decode-worker.js runs
// it in a Web Worker; worker-client.js runs it on the page itself where a module worker
// cannot start (browsers without module workers).
//
// Messages: { ev: "connecting" | "welcome" | "asset" | "frame" | "gone" | "close" |
// "error", ... }; read by ClothcastWorkerClient.onEvent.

import { ClothcastClient, vertexNormals } from "./clothcast.js";

/** A frame's message and the buffers it moves: copies of the avatar's arrays (the
 * client's own go on being decoded into), and with `normals` each garment's vertex
 * normals (vertexNormals). */
function frameData(client, av, normals) {
  const garment = av.garment.slice();
  const layers = av.layers.map((l) => l.garment.slice());
  const bones = av.bones.slice(), pose = av.pose.slice(), world = av.world.slice();
  const normalsOf = (g, a) => (normals ? vertexNormals(g, a.setup.triangles, new Float32Array(g.length)) : null);
  const garmentNormals = normalsOf(garment, av.asset);
  const layerNormals = layers.map((g, i) => normalsOf(g, av.layers[i].asset));
  const msg = { ev: "frame", id: av.id, asset: av.asset.hash, layerAssets: av.layers.map((l) => l.asset.hash),
    garment, layers, normals: garmentNormals, layerNormals, bones, pose, world, seq: av.seq, frames: av.frames,
    bytes: av.bytes, dropped: av.dropped, latencyMs: av.latencyMs, busyMs: client.busyMs };
  const moved = [garment, ...layers, garmentNormals, ...layerNormals, bones, pose, world].filter((a) => a);
  return [msg, moved.map((a) => a.buffer)];
}

/** Connects a ClothcastClient (`url`, `options`: its constructor's arguments, and
 * `normals`: whether frames carry the garments' vertex normals) that hands every event
 * to `post(message, transfer)`; returns the client. */
export function relay(url, options, post) {
  const client = new ClothcastClient(url, options);
  const normals = options.normals === true;
  client.addEventListener("welcome", (e) => post({ ev: "welcome", detail: e.detail, tickHz: client.tickHz, connections: client.connections }, []));
  // (an asset is plain data, its setup too: the page gets a copy with the same fields)
  client.addEventListener("asset", (e) => post({ ev: "asset", asset: e.detail }, []));
  client.addEventListener("frame", (e) => post(...frameData(client, e.detail, normals)));
  client.addEventListener("gone", (e) => post({ ev: "gone", id: e.detail }, []));
  client.addEventListener("close", (e) => post({ ev: "close", detail: e.detail, connections: client.connections }, []));
  client.addEventListener("error", (e) => post({ ev: "error", message: String(e.detail?.message ?? e.detail) }, []));
  client.connect();
  post({ ev: "connecting", connections: client.connections }, []);
  return client;
}
