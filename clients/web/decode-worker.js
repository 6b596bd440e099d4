// The Web Worker behind ClothcastWorkerClient (worker-client.js): runs a ClothcastClient
// — the connection, its reconnecting and watchdog, and the garment decoding — off the
// page's thread (decode-relay.js), and posts each event to the page, a frame's decoded
// arrays transferred (moved, not copied again).
//
// Messages in: { op: "connect", url, options } (ClothcastClient's constructor arguments;
// the first one only), { op: "recycle", arrays } (a replaced frame's arrays, moved
// back to be decoded into again; with the `recycle` option), { op: "took", id } (the
// page has taken in a frame of avatar `id`: decode-relay.js's IN_FLIGHT_MAX),
// { op: "close" }.

import { relay } from "./decode-relay.js";

let client = null;

self.onmessage = (e) => {
  const m = e.data;
  if (m?.op === "connect" && !client) client = relay(m.url, m.options, (msg, transfer) => postMessage(msg, transfer));
  else if (m?.op === "recycle") client?.recycle(m.arrays);
  else if (m?.op === "took") client?.took(m.id);
  else if (m?.op === "close") client?.close();
};
