// The JavaScript decoder against the Rust encoder's frozen golden streams
// (tests/fixtures/codec/v5, written by `clothcast bench codec --golden`), and hostile
// input. Run: node --test clients/web/test/
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { GarmentSetup, GarmentDecoder, CodecError, wordHash } from "../codec.js";

const dir = fileURLToPath(new URL("../../../tests/fixtures/codec/v5/", import.meta.url));
const v4 = fileURLToPath(new URL("../../../tests/fixtures/codec/v4/", import.meta.url));
const setupBytes = new Uint8Array(readFileSync(dir + "setup.bin"));
const stream = new Uint8Array(readFileSync(dir + "stream.bin"));

function records(stream) {
  const out = [];
  for (let at = 0; at < stream.length;) {
    const len = stream[at] | (stream[at + 1] << 8) | (stream[at + 2] << 16) | (stream[at + 3] << 24);
    out.push(stream.subarray(at + 4, at + 4 + len));
    at += 4 + len;
  }
  return out;
}

// v5/: a setup with the traversal the server sends (coarse vertices first, references
// anywhere earlier); v5/breadth-first/: one with the breadth-first traversal
for (const sub of ["", "breadth-first/"]) {
  test(`golden v5 stream ${sub || "(coarse-to-fine) "}decodes bit-exactly`, () => {
    const setup = GarmentSetup.parse(new Uint8Array(readFileSync(dir + sub + "setup.bin")));
    const stream = new Uint8Array(readFileSync(dir + sub + "stream.bin"));
    const expected = JSON.parse(readFileSync(dir + sub + "frames.json", "utf8"));
    const dec = new GarmentDecoder(setup);
    const out = new Float32Array(3 * setup.vertexCount);
    const bones = new Float32Array(7 * setup.bones);
    const recs = records(stream);
    assert.equal(recs.length, expected.length);
    recs.forEach((r, i) => {
      const h = dec.decode(r, out);
      assert.equal(h.kind, expected[i].kind, `record ${i}`);
      assert.equal(h.frame, expected[i].frame, `record ${i}`);
      const bits = new Uint32Array(out.buffer);
      assert.equal(wordHash(bits), expected[i].hash, `record ${i}: decoded floats differ from Rust`);
      dec.bones(bones);
      assert.equal(wordHash(new Uint32Array(bones.buffer)), expected[i].bones, `record ${i}: decoded bones differ from Rust`);
    });
    assert.deepEqual(new Uint8Array(out.buffer), new Uint8Array(readFileSync(dir + sub + "last.f32")));
  });
}

test("hostile frames are refused with named errors and lose nothing", () => {
  const setup = GarmentSetup.parse(setupBytes);
  const recs = records(stream);
  const dec = new GarmentDecoder(setup);
  const out = new Float32Array(3 * setup.vertexCount);
  const code = (f) => { try { f(); } catch (e) { assert.ok(e instanceof CodecError, String(e)); return e.code; } return "accepted"; };
  assert.equal(code(() => dec.decode(recs[1], out)), "missing-reference");
  assert.equal(code(() => dec.decode(new Uint8Array(0), out)), "empty");
  const key = recs[0];
  for (const cut of [1, 10, 39, 40, 41, key.length >> 1, key.length - 1]) {
    assert.equal(code(() => dec.decode(key.subarray(0, cut), out)), "truncated", `prefix ${cut}`);
  }
  const longer = new Uint8Array(key.length + 1); longer.set(key);
  assert.equal(code(() => dec.decode(longer, out)), "trailing-bytes");
  const bad = key.slice(); bad[4] = 9;
  assert.equal(code(() => dec.decode(bad, out)), "unsupported-version");
  const magic = key.slice(); magic[0] = 0x58;
  assert.equal(code(() => dec.decode(magic, out)), "bad-magic");
  const huge = key.slice(); huge.set([0xff, 0xff, 0xff, 0xff], 36);
  assert.equal(code(() => dec.decode(huge, out)), "too-large");
  let refused = 0;
  const good = new Float32Array(out.length);
  new GarmentDecoder(setup).decode(key, good);
  for (let i = 40; i < key.length; i += 7) {
    const flip = key.slice(); flip[i] ^= 0x10;
    const probe = new GarmentDecoder(setup);
    const c = code(() => probe.decode(flip, out));
    if (c === "accepted") assert.deepEqual(out, good, `flip at ${i} decoded to wrong positions`);
    else refused++;
    assert.ok(out.every(Number.isFinite));
  }
  assert.ok(refused > 0);
  for (let t = 0; t < 200; t++) {
    const garbage = new Uint8Array(1 + (t * 37) % 300).map((_, i) => (i * 131 + t * 17) & 255);
    if (t % 2) garbage.set([0x43, 0x43, 0x47, 0x46, 3, t & 1, 0, 0].slice(0, garbage.length));
    assert.notEqual(code(() => dec.decode(garbage, out)), "accepted");
  }
  // after all that the real stream still decodes
  recs.slice(0, 3).forEach((r) => dec.decode(r, out));
  assert.equal(code(() => GarmentSetup.parse(setupBytes.subarray(0, 100))), "truncated");
  // the rest shape (format v5) ends the setup, after its flag: a coordinate off the
  // lattice, a flag other than 0 or 1; each refused as Rust refuses it
  assert.ok(setup.hasRest, "the server's setups carry the rest shape");
  const n = setup.vertexCount, flagAt = setupBytes.length - 12 * n - 4;
  const offRest = setupBytes.slice(); new DataView(offRest.buffer).setInt32(flagAt + 4 + 12 * 7, -2147483648, true);
  assert.equal(code(() => GarmentSetup.parse(offRest)), "invalid");
  const flag = setupBytes.slice(); flag[flagAt] = 2;
  assert.equal(code(() => GarmentSetup.parse(flag)), "corrupt");
  // the skeleton block (format v3), 16 bytes per bone before the flag: a bone that
  // names itself as parent, a pivot off the lattice; each refused as Rust refuses it
  const bones = setup.bones, at = flagAt - 16 * bones;
  const own = setupBytes.slice(); new DataView(own.buffer).setUint32(at + 16 * (bones - 1), bones - 1, true);
  assert.equal(code(() => GarmentSetup.parse(own)), "invalid");
  const far = setupBytes.slice(); new DataView(far.buffer).setInt32(at + 4, -2147483648, true);
  assert.equal(code(() => GarmentSetup.parse(far)), "invalid");
  assert.equal(setup.boneParents[0], 0xffffffff, "the pelvis is the root");
  assert.ok(Array.from(setup.boneParents).every((p, i) => p === 0xffffffff ? i === 0 : p < i));
});

test("keyframes whose bones decode off their range are refused as Rust refuses them", () => {
  // crafted by src/codec/tests/skeleton.rs (bones_decoded_off_their_range_are_refused)
  // for a small sleeve setup: a rotation beyond 1 through the skeleton prediction, a w
  // beyond 1 or below 0 through its difference from the w x, y, z imply (format v4), a
  // translation off the lattice
  const hostile = dir + "hostile-bones/";
  const setup = GarmentSetup.parse(new Uint8Array(readFileSync(hostile + "setup.bin")));
  for (const name of ["root-x-beyond-1", "child-x-beyond-1", "root-w-beyond-1", "root-w-negative", "root-translation-off-the-lattice"]) {
    const dec = new GarmentDecoder(setup);
    const out = new Float32Array(3 * setup.vertexCount);
    let err = null;
    try { dec.decode(new Uint8Array(readFileSync(hostile + name + ".bin")), out); } catch (e) { err = e; }
    assert.ok(err instanceof CodecError, `${name}: ${err}`);
    assert.equal(err.code, "corrupt", name);
    assert.match(err.message, /bone value out of range/, name);
    assert.ok(out.every((x) => x === 0), `${name}: the output was touched`);
  }
});

test("a setup and a frame frozen at format version 4 are refused by version", () => {
  const code = (f) => { try { f(); } catch (e) { assert.ok(e instanceof CodecError, String(e)); return e.code; } return "accepted"; };
  assert.equal(code(() => GarmentSetup.parse(new Uint8Array(readFileSync(v4 + "setup.bin")))), "unsupported-version");
  const first = records(new Uint8Array(readFileSync(v4 + "stream.bin")))[0];
  assert.equal(code(() => new GarmentDecoder(GarmentSetup.parse(setupBytes)).decode(first, new Float32Array(9000))), "unsupported-version");
});
