// Times the JavaScript decoder on a recorded stream, for `clothcast bench codec --js`.
// Usage: node decode.mjs DIR  (DIR holds setup.bin, stream.bin: u32 little-endian length
// + frame, repeated, and codec.js). Decodes the stream once to warm the JIT, then
// `passes` times more from its first keyframe, and prints one JSON line: microseconds
// per frame (the fastest pass, as the Rust side reports wall time of one pass) and the
// FNV word hash of the last decoded floats, which the bench compares with Rust's.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const dir = process.argv[2];
if (!dir) {
  console.error("usage: node decode.mjs DIR");
  process.exit(2);
}
const { GarmentSetup, GarmentDecoder, wordHash } = await import(
  pathToFileURL(join(dir, "codec.js")).href
);
const setup = GarmentSetup.parse(new Uint8Array(readFileSync(join(dir, "setup.bin"))));
const stream = new Uint8Array(readFileSync(join(dir, "stream.bin")));
const frames = [];
for (let at = 0; at + 4 <= stream.length;) {
  const len = (stream[at] | (stream[at + 1] << 8) | (stream[at + 2] << 16) | (stream[at + 3] << 24)) >>> 0;
  frames.push(stream.subarray(at + 4, at + 4 + len));
  at += 4 + len;
}
const out = new Float32Array(3 * setup.vertexCount);
const pass = () => {
  const dec = new GarmentDecoder(setup);
  for (const f of frames) dec.decode(f, out);
};
pass();
const passes = Number(process.argv[3] ?? 3);
let best = Infinity;
for (let i = 0; i < passes; i++) {
  const t = process.hrtime.bigint();
  pass();
  best = Math.min(best, Number(process.hrtime.bigint() - t) / 1e3);
}
const hash = wordHash(new Uint32Array(out.buffer));
console.log(JSON.stringify({ us_per_frame: best / frames.length, frames: frames.length, hash }));
