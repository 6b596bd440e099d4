// The viewer protocol's compact frame form (clothcast.js readFrame) against the frozen
// frame of tests/fixtures/protocol/, written by the Rust server's own writers in both
// forms: the compact one must read as the map one does, and malformed ones must be
// refused with an error that names what is wrong.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { decode } from "../msgpack.js";
import { readFrame } from "../clothcast.js";

const dir = fileURLToPath(new URL("../../../tests/fixtures/protocol/", import.meta.url));
const load = (name) => new Uint8Array(readFileSync(dir + name));

test("a compact frame reads as the same frame in the map form", () => {
  const map = decode(load("frame.map.msgpack"));
  const compact = decode(load("frame.compact.msgpack"));
  assert.ok(Array.isArray(compact) && !Array.isArray(map));
  const read = readFrame(compact);
  assert.deepEqual(read, map);
  // the fixture has everything: a pose, an outfit layer, a seq past 16 bits
  assert.equal(read.pose.byteLength, 364);
  assert.equal(read.layers.length, 1);
  assert.equal(read.seq, 70001);
  assert.ok(load("frame.compact.msgpack").byteLength + 55 <= load("frame.map.msgpack").byteLength);
});

test("malformed compact frames are refused by name", () => {
  const bytes = load("frame.compact.msgpack");
  for (const n of [0, 1, 9, 40, bytes.length - 1]) {
    assert.throws(() => readFrame(decode(bytes.subarray(0, n))), /truncated|compact frame/, `prefix of ${n} bytes`);
  }
  const good = decode(bytes);
  const refused = (a, says) => assert.throws(() => readFrame(a), (e) => e.message.includes(says), says);
  refused(good.slice(0, 10), "10 entries");
  refused(good.slice(0, 8), "8 entries");
  refused([...good, "x", new Uint8Array(1), "y", new Uint8Array(1), "z", new Uint8Array(1)], "entries");
  refused(["gone", ...good.slice(1)], 'not "frame"');
  refused(good.map((v, i) => (i === 1 ? 7 : v)), "avatar: not a string");
  refused(good.map((v, i) => (i === 2 ? "7" : v)), "seq: not a number");
  refused(good.map((v, i) => (i === 5 ? new Uint8Array(24) : v)), "world: 24 bytes");
  refused(good.map((v, i) => (i === 8 ? "bytes" : v)), "garment: not bytes");
  refused(good.map((v, i) => (i === 10 ? null : v)), "a layer's garment: not bytes");
});
