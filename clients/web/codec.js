// clothcast garment stream decoder, format v5: the JavaScript twin of the Rust `codec`
// module (src/codec/). Dependency-free ES module. Every operation is integer arithmetic
// below 2^53, so this decoder reproduces the Rust encoder's reconstruction bit for bit.
//
//   import { GarmentSetup, GarmentDecoder } from "./codec.js";
//   const setup = GarmentSetup.parse(setupBytes);          // once per garment
//   const dec = new GarmentDecoder(setup);
//   const positions = new Float32Array(3 * setup.vertexCount);
//   dec.decode(frameBytes, positions);                      // in place, every frame
//
// `decode` allocates nothing once the decoder exists (models, range decoder, header and
// scratch are reused), given a Uint8Array; error paths allocate their CodecError.
//
// Every error is a CodecError with a `code` naming the problem ("truncated",
// "missing-reference", "checksum", ...); a refused frame changes nothing.

export const FORMAT_VERSION = 5;
export const FRAME_HEADER_LEN = 40;
const SETUP_HEADER_LEN = 24;
const NO_REF = 0xffffffff;
const LATTICE_LIMIT = 1 << 21;
const MAX_VERTICES = 1 << 22;
const MAX_BONES = 256;
const MAX_TRIANGLES = 1 << 23;
const WEIGHT_ONE = 255;
const ONE = 1 << 14;
const HALF = 1 << 13;
const PATCH_SIZE = 64;
const MODE_SKIP = 0;
const SPATIAL_NONE = 0;
const SPATIAL_MEAN = 1;
const SPATIAL_PARALLELOGRAM = 2;
const BASE_SKINNED = 1;
// an adaptive probability's state (format.rs PROB_*): the probability of a 0 bit in
// units of 2^-15 in the low 16 bits, the count of bits it has adapted to above them;
// its shift is floor(log2(count + 2)), at most 6 (format v5)
const PROB_BITS = 15;
const PROB_COUNT_SHIFT = 16;
const PROB_INIT = 1 << (PROB_BITS - 1);
const PROB_SHIFT = 6;
const DECISION_BITS = 10;
const RANGE_TOP = 1 << 24;
const ACTIVITY_CLASSES = 5;
const HINTS = 2 * ACTIVITY_CLASSES;
const ZERO_CONTEXTS = 6 * HINTS;
const SIGN_CONTEXTS = HINTS;
const MAX_PREFIX = 26;
const FRAME_MAGIC = [0x43, 0x43, 0x47, 0x46]; // "CCGF"
const SETUP_MAGIC = [0x43, 0x43, 0x47, 0x53]; // "CCGS"

/** A refused setup or frame. `code` names the problem. */
export class CodecError extends Error {
  constructor(code, message) {
    super(`${code}: ${message}`);
    this.name = "CodecError";
    this.code = code;
  }
}

/** FNV-1a (32-bit) over 32-bit words. */
export function wordHash(words) {
  let h = 0x811c9dc5;
  for (const w of words) h = Math.imul((h ^ w) >>> 0, 0x01000193) >>> 0;
  return h >>> 0;
}

function* bytesAsWords(bytes) {
  const n = bytes.length;
  for (let i = 0; i < n; i += 4) {
    yield (bytes[i] | ((i + 1 < n ? bytes[i + 1] : 0) << 8) | ((i + 2 < n ? bytes[i + 2] : 0) << 16) | ((i + 3 < n ? bytes[i + 3] : 0) << 24)) >>> 0;
  }
}

function u32(bytes, o) {
  return (bytes[o] | (bytes[o + 1] << 8) | (bytes[o + 2] << 16) | (bytes[o + 3] << 24)) >>> 0;
}

function asBytes(data) {
  if (data instanceof Uint8Array) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  throw new CodecError("invalid", "expected bytes (Uint8Array or ArrayBuffer)");
}

/** Static data of one garment stream (see src/codec/format.rs for the layout). */
export class GarmentSetup {
  /** Parses and validates a setup; throws CodecError. */
  static parse(data) {
    const b = asBytes(data);
    if (b.length === 0) throw new CodecError("empty", "empty setup");
    if (b.length < SETUP_HEADER_LEN) throw new CodecError("truncated", "setup header");
    for (let i = 0; i < 4; i++) if (b[i] !== SETUP_MAGIC[i]) throw new CodecError("bad-magic", "not a clothcast garment setup");
    if (b[4] !== FORMAT_VERSION) throw new CodecError("unsupported-version", `setup version ${b[4]}, this decoder reads ${FORMAT_VERSION}`);
    if (b[5] || b[6] || b[7]) throw new CodecError("corrupt", "reserved setup bytes");
    const step = new DataView(b.buffer, b.byteOffset, b.byteLength).getFloat32(8, true);
    const n = u32(b, 12), t = u32(b, 16), bones = u32(b, 20);
    if (!(Number.isFinite(step) && step > 1e-6)) throw new CodecError("invalid", "lattice step");
    if (n === 0 || n > MAX_VERTICES) throw new CodecError("too-large", `vertex count ${n}`);
    if (t > MAX_TRIANGLES) throw new CodecError("too-large", `triangle count ${t}`);
    if (bones === 0 || bones > MAX_BONES) throw new CodecError("too-large", `bone count ${bones}`);
    // the skeleton ends the v4 layout; v5 adds a rest flag and, where it is 1, the rest shape
    const skeletonEnd = SETUP_HEADER_LEN + 12 * t + 24 * n + 16 * bones;
    if (b.length < skeletonEnd + 4) throw new CodecError("truncated", "setup");
    const flag = u32(b, skeletonEnd);
    if (flag > 1) throw new CodecError("corrupt", "setup rest flag");
    const expected = skeletonEnd + 4 + (flag === 1 ? 12 * n : 0);
    if (b.length < expected) throw new CodecError("truncated", "setup");
    if (b.length > expected) throw new CodecError("trailing-bytes", `${b.length - expected} extra bytes`);
    const s = new GarmentSetup();
    s.step = step;
    s.vertexCount = n;
    s.bones = bones;
    let o = SETUP_HEADER_LEN;
    s.triangles = new Uint32Array(3 * t);
    for (let i = 0; i < 3 * t; i++, o += 4) {
      const v = u32(b, o);
      if (v >= n) throw new CodecError("invalid", "triangle vertex index");
      s.triangles[i] = v;
    }
    s.joints = new Uint8Array(4 * n);
    s.weights = new Uint8Array(4 * n);
    for (let v = 0; v < n; v++, o += 8) {
      let sum = 0;
      for (let k = 0; k < 4; k++) {
        s.joints[4 * v + k] = b[o + k];
        s.weights[4 * v + k] = b[o + 4 + k];
        sum += b[o + 4 + k];
        if (b[o + k] >= bones) throw new CodecError("invalid", "skin bone index");
      }
      if (sum !== WEIGHT_ONE) throw new CodecError("invalid", "skin weights (must sum to 255)");
    }
    s.order = new Uint32Array(n);
    const position = new Uint32Array(n).fill(NO_REF);
    for (let k = 0; k < n; k++, o += 4) {
      const v = u32(b, o);
      if (v >= n || position[v] !== NO_REF) throw new CodecError("invalid", "traversal order (not a permutation)");
      position[v] = k;
      s.order[k] = v;
    }
    s.predictor = new Uint32Array(3 * n);
    for (let v = 0; v < n; v++, o += 12) {
      let gap = false;
      for (let k = 0; k < 3; k++) {
        const r = u32(b, o + 4 * k);
        s.predictor[3 * v + k] = r;
        if (r === NO_REF) { gap = true; continue; }
        if (gap) throw new CodecError("invalid", "predictor (gap in references)");
        if (r >= n || position[r] >= position[v]) throw new CodecError("invalid", "predictor (refers to a later vertex)");
      }
    }
    // the skeleton (format v3): per bone its parent (an earlier bone, or NO_REF) and
    // its rest joint in lattice steps
    s.boneParents = new Uint32Array(bones);
    s.bonePivots = new Int32Array(3 * bones);
    for (let i = 0; i < bones; i++, o += 16) {
      const p = u32(b, o);
      if (p !== NO_REF && p >= i) throw new CodecError("invalid", "bone parent (must be an earlier bone)");
      s.boneParents[i] = p;
      for (let k = 0; k < 3; k++) {
        const c = u32(b, o + 4 + 4 * k) | 0;
        if (Math.abs(c) >= LATTICE_LIMIT) throw new CodecError("invalid", "bone pivot (outside the lattice)");
        s.bonePivots[3 * i + k] = c;
      }
    }
    // the rest shape (format v5): the reference of every keyframe, with identity bones;
    // all zero for a setup without one
    o += 4;
    s.hasRest = flag === 1;
    s.rest = new Int32Array(3 * n);
    if (s.hasRest) {
      for (let i = 0; i < 3 * n; i++, o += 4) {
        const c = u32(b, o) | 0;
        if (Math.abs(c) >= LATTICE_LIMIT) throw new CodecError("invalid", "rest position (outside the lattice)");
        s.rest[i] = c;
      }
    }
    s.id = wordHash(bytesAsWords(b));
    return s;
  }
}

/** Parses and validates a frame header (and that the payload length matches); fills
 * and returns `into` when given (no allocation). */
export function parseFrameHeader(data, into = {}) {
  const b = asBytes(data);
  if (b.length === 0) throw new CodecError("empty", "empty frame");
  if (b.length < FRAME_HEADER_LEN) throw new CodecError("truncated", "frame header");
  for (let i = 0; i < 4; i++) if (b[i] !== FRAME_MAGIC[i]) throw new CodecError("bad-magic", "not a clothcast garment frame");
  if (b[4] !== FORMAT_VERSION) throw new CodecError("unsupported-version", `frame version ${b[4]}, this decoder reads ${FORMAT_VERSION}`);
  if (b[5] > 1) throw new CodecError("bad-kind", `frame kind ${b[5]}`);
  if (b[6] || b[7]) throw new CodecError("corrupt", "reserved header bytes");
  const h = into;
  h.kind = b[5] === 0 ? "key" : "delta";
  h.setupId = u32(b, 8); h.streamId = u32(b, 12); h.frame = u32(b, 16); h.reference = u32(b, 20);
  h.vertices = u32(b, 24); h.bones = u32(b, 28); h.checksum = u32(b, 32); h.payloadLen = u32(b, 36);
  if (h.vertices > MAX_VERTICES || h.bones > MAX_BONES) throw new CodecError("too-large", "frame counts");
  if (h.kind === "key" && h.reference !== h.frame) throw new CodecError("corrupt", "keyframe reference");
  if (h.payloadLen > maxFrameBytes(h.vertices, h.bones)) throw new CodecError("too-large", `payload of ${h.payloadLen} bytes`);
  const rest = b.length - FRAME_HEADER_LEN;
  if (rest < h.payloadLen) throw new CodecError("truncated", "frame payload");
  if (rest > h.payloadLen) throw new CodecError("trailing-bytes", `${rest - h.payloadLen} extra bytes`);
  return h;
}

/** Largest possible frame for these counts, bytes (as the Rust `max_frame_bytes`). */
export function maxFrameBytes(vertices, bones) {
  const ints = 3 * vertices + 7 * bones;
  const bitsPerInt = DECISION_BITS * (2 + MAX_PREFIX + 1) + MAX_PREFIX;
  const patches = Math.ceil(vertices / PATCH_SIZE);
  const bits = ints * bitsPerInt + patches * 4 * DECISION_BITS;
  return FRAME_HEADER_LEN + 5 + Math.ceil(bits / 8) + 8;
}

class RangeDecoder {
  reset(b, start) {
    if (b.length - start < 5) throw new CodecError("truncated", "range-coded payload");
    if (b[start] !== 0) throw new CodecError("corrupt", "range coder start byte");
    this.b = b;
    this.pos = start + 5;
    this.range = 0xffffffff;
    this.code = b[start + 1] * 16777216 + b[start + 2] * 65536 + b[start + 3] * 256 + b[start + 4];
    return this;
  }
  normalize() {
    while (this.range < RANGE_TOP) {
      if (this.pos >= this.b.length) throw new CodecError("truncated", "range-coded payload");
      this.range *= 256;
      this.code = this.code * 256 + this.b[this.pos++];
    }
  }
  bit(probs, i) {
    const s = probs[i], p = s & 0xffff, n = s >>> PROB_COUNT_SHIFT;
    const shift = Math.min(31 - Math.clz32(n + 2), PROB_SHIFT);
    const count = (shift < PROB_SHIFT ? n + 1 : n) << PROB_COUNT_SHIFT;
    const bound = (this.range >>> PROB_BITS) * p;
    let bit;
    if (this.code < bound) {
      this.range = bound;
      probs[i] = (p + (((1 << PROB_BITS) - p) >> shift)) | count;
      bit = 0;
    } else {
      this.code -= bound;
      this.range -= bound;
      probs[i] = (p - (p >> shift)) | count;
      bit = 1;
    }
    if (this.range < RANGE_TOP) this.normalize();
    return bit;
  }
  direct(count) {
    let v = 0;
    for (let i = 0; i < count; i++) {
      this.range >>>= 1; // range < 2^32: the unsigned shift is floor(range / 2)
      let bit = 0;
      if (this.code >= this.range) { this.code -= this.range; bit = 1; }
      v = v * 2 + bit;
      if (this.range < RANGE_TOP) this.normalize();
    }
    return v;
  }
  /** A signed integer with model m (zero flag in context zctx, sign in context sctx,
   * Elias-gamma prefix). */
  int(m, zctx, sctx) {
    if (!this.bit(m.zero, zctx)) return 0;
    const negative = this.bit(m.sign, sctx);
    let k = 0;
    while (k < MAX_PREFIX && this.bit(m.prefix, k)) k++;
    const mag = (1 << k) + this.direct(k); // k ≤ MAX_PREFIX = 26
    return negative ? -mag : mag;
  }
  finish() {
    if (this.pos !== this.b.length) throw new CodecError("trailing-bytes", `${this.b.length - this.pos} unused payload bytes`);
  }
}

function intModel() {
  return { zero: new Int32Array(ZERO_CONTEXTS), sign: new Int32Array(SIGN_CONTEXTS), prefix: new Int32Array(MAX_PREFIX + 1) };
}

function models() {
  return { coords: [intModel(), intModel(), intModel()], rotation: intModel(), w: intModel(), translation: intModel(),
    skip: new Int32Array(2), skinned: new Int32Array(2), spatial: new Int32Array(3), parallelogram: new Int32Array(3) };
}

function resetInt(im) {
  im.zero.fill(PROB_INIT); im.sign.fill(PROB_INIT); im.prefix.fill(PROB_INIT);
}

function resetModels(m) {
  resetInt(m.coords[0]); resetInt(m.coords[1]); resetInt(m.coords[2]); resetInt(m.rotation); resetInt(m.w); resetInt(m.translation);
  m.skip.fill(PROB_INIT); m.skinned.fill(PROB_INIT); m.spatial.fill(PROB_INIT); m.parallelogram.fill(PROB_INIT);
}

/** FNV-1a over Int32 values as 32-bit words (the frame checksum), allocation-free. */
function hashInt32(a) {
  let h = 0x811c9dc5;
  for (let i = 0; i < a.length; i++) h = Math.imul((h ^ a[i]) >>> 0, 0x01000193) >>> 0;
  return h >>> 0;
}

function zeroContext(prev) {
  return Math.min(Math.abs(prev), 2);
}

const roundShift = (v) => Math.floor((v + HALF) / ONE);

function rotation(q, o, r) {
  const x = q[o], y = q[o + 1], z = q[o + 2], w = q[o + 3];
  const one = ONE * ONE;
  r[0] = roundShift(one - 2 * (y * y + z * z)); r[1] = roundShift(2 * (x * y - w * z)); r[2] = roundShift(2 * (x * z + w * y));
  r[3] = roundShift(2 * (x * y + w * z)); r[4] = roundShift(one - 2 * (x * x + z * z)); r[5] = roundShift(2 * (y * z - w * x));
  r[6] = roundShift(2 * (x * z - w * y)); r[7] = roundShift(2 * (y * z + w * x)); r[8] = roundShift(one - 2 * (x * x + y * y));
  return r;
}

/** Quaternion product a ⊗ b (x, y, z, w at offsets ao, bo; units 2^-14), each component
 * rounded, into r (offset 0). Sums stay below 2^37. */
function quatMul(a, ao, b, bo, r) {
  const ax = a[ao], ay = a[ao + 1], az = a[ao + 2], aw = a[ao + 3];
  const bx = b[bo], by = b[bo + 1], bz = b[bo + 2], bw = b[bo + 3];
  const x = aw * bx + ax * bw + ay * bz - az * by;
  const y = aw * by - ax * bz + ay * bw + az * bx;
  const z = aw * bz + ax * by - ay * bx + az * bw;
  const w = aw * bw - ax * bx - ay * by - az * bz;
  r[0] = roundShift(x); r[1] = roundShift(y); r[2] = roundShift(z); r[3] = roundShift(w);
}

/** w of a quantised quaternion from x, y, z: floor(sqrt(2^28 − x² − y² − z²)), 0 where
 * that is negative. */
function derivedW(x, y, z) {
  const s = ONE * ONE - (x * x + y * y + z * z);
  if (s <= 0) return 0;
  let r = Math.floor(Math.sqrt(s));
  while (r * r > s) r--;
  while ((r + 1) * (r + 1) <= s) r++;
  return r;
}

/** Decodes one garment stream in place into a caller's Float32Array. */
export class GarmentDecoder {
  constructor(setup) {
    const n = setup.vertexCount, nb = setup.bones;
    this.setup = setup;
    this.frame = null;
    this.streamId = null;
    this.q = new Int32Array(3 * n);
    this.qNew = new Int32Array(3 * n);
    this.bonesQ = new Int32Array(7 * nb);
    this.bonesNew = new Int32Array(7 * nb);
    this.mc = new Int32Array(3 * n);
    this.mcDone = new Uint8Array(n);
    this.relA = new Float64Array(9 * nb);
    this.relC = new Float64Array(3 * nb);
    this.prev = [0, 0, 0];
    this.header = {};
    this.range = new RangeDecoder();
    this.models = models();
    this.rp = new Float64Array(9);
    this.rc = new Float64Array(9);
    this.qa = new Float64Array(4);
    this.qb = new Float64Array(4);
    // the reference of the frame being decoded: q (a delta), or the setup's rest shape
    // (a keyframe); and its bones, bonesQ or the identity
    this.ref = this.q;
    this.identity = new Int32Array(7 * nb);
    for (let i = 0; i < nb; i++) this.identity[7 * i + 3] = ONE;
  }

  /**
   * The bones of the last decoded frame as the stream carries them, into `out`
   * (Float32Array of 7 × bones: per bone the rotation x, y, z, w to 2^-14, w ≥ 0, not
   * renormalised, then the translation in metres, garment frame), as Rust's
   * `Decoder::bones`. All zeros before the first frame. Allocates nothing.
   */
  bones(out) {
    const nb = this.setup.bones, b = this.bonesQ, step = this.setup.step;
    if (!(out instanceof Float32Array) || out.length !== 7 * nb) throw new CodecError("mismatch", "bones output must be a Float32Array of 7 × bones");
    for (let i = 0; i < 7 * nb; i++) out[i] = (i % 7 < 4) ? b[i] / ONE : b[i] * step;
    return out;
  }

  /** Forgets the stream; the next frame must be a keyframe. */
  reset() {
    this.frame = null;
    this.streamId = null;
  }

  /**
   * Decodes `data` into `out` (3 floats per vertex, metres). Throws CodecError; code
   * "missing-reference" means: ask the server for a keyframe. Returns the header.
   */
  decode(data, out) {
    const b = asBytes(data);
    const h = parseFrameHeader(b, this.header);
    const s = this.setup;
    if (h.setupId !== s.id) throw new CodecError("wrong-setup", `frame of setup ${h.setupId.toString(16)}, decoder has ${s.id.toString(16)}`);
    if (h.vertices !== s.vertexCount || h.bones !== s.bones) throw new CodecError("mismatch", "vertex/bone count of frame");
    if (!(out instanceof Float32Array) || out.length !== 3 * s.vertexCount) throw new CodecError("mismatch", "output must be a Float32Array of 3 × vertices");
    if (h.kind === "delta" && (this.frame !== h.reference || this.streamId !== h.streamId)) {
      throw new CodecError("missing-reference", `delta needs frame ${h.reference}, decoder holds ${this.frame}`);
    }
    const dec = this.range.reset(b, FRAME_HEADER_LEN);
    const m = this.models;
    resetModels(m);
    const delta = h.kind === "delta";
    // a keyframe (format v5) is decoded as a delta from the setup's rest shape at
    // identity bones; its bones are predicted from their parents alone
    this.ref = delta ? this.q : s.rest;
    this.decodeBones(dec, m, delta);
    this.prev[0] = this.prev[1] = this.prev[2] = 0;
    const order = s.order, ref = this.ref;
    this.mcDone.fill(0);
    let last = MODE_SKIP;
    for (let start = 0; start < order.length; start += PATCH_SIZE) {
      const end = Math.min(start + PATCH_SIZE, order.length);
      const mode = this.decodeMode(dec, m, last);
      if (mode === MODE_SKIP) {
        for (let i = start; i < end; i++) {
          const v = 3 * order[i];
          this.qNew[v] = ref[v]; this.qNew[v + 1] = ref[v + 1]; this.qNew[v + 2] = ref[v + 2];
        }
      } else {
        const skinned = Math.floor((mode - 1) / 3) === BASE_SKINNED;
        // motion compensation only where a patch uses it: its vertices and their
        // predictor references (which may lie in earlier patches)
        if (skinned) this.compensate(order, start, end);
        const base = skinned ? this.mc : ref;
        const sp = (mode - 1) % 3;
        for (let i = start; i < end; i++) this.vertex(dec, m, base, sp, order[i]);
      }
      last = mode;
    }
    dec.finish();
    const sum = hashInt32(this.qNew);
    if (sum !== h.checksum) throw new CodecError("checksum", `expected ${h.checksum.toString(16)}, decoded ${sum.toString(16)}`);
    const step = s.step;
    for (let i = 0; i < out.length; i++) out[i] = this.qNew[i] * step;
    const q = this.q; this.q = this.qNew; this.qNew = q;
    const bq = this.bonesQ; this.bonesQ = this.bonesNew; this.bonesNew = bq;
    this.frame = h.frame;
    this.streamId = h.streamId;
    return h;
  }

  decodeBones(dec, m, delta) {
    // format v4: each bone's x, y, z and translation from their predictions off its
    // parent (src/codec/motion.rs: predict_rotation, predict_translation); w from its
    // difference to the w x, y, z imply (0 but near a half turn)
    const s = this.setup, cur = this.bonesNew, ref = this.bonesQ, qa = this.qa, qb = this.qb;
    let prevRot = 0, prevW = 0, prevTrans = 0;
    for (let i = 0; i < s.bones; i++) {
      const o = 7 * i, p = s.boneParents[i], op = 7 * p;
      if (p !== NO_REF && delta) {
        // q_p ⊗ conj(q_p^ref) ⊗ q^ref, each product rounded
        qb[0] = -ref[op]; qb[1] = -ref[op + 1]; qb[2] = -ref[op + 2]; qb[3] = ref[op + 3];
        quatMul(cur, op, qb, 0, qa);
        quatMul(qa, 0, ref, o, qb);
        const sign = qb[3] < 0 ? -1 : 1;
        qa[0] = sign * qb[0]; qa[1] = sign * qb[1]; qa[2] = sign * qb[2];
      } else if (p !== NO_REF) {
        qa[0] = cur[op]; qa[1] = cur[op + 1]; qa[2] = cur[op + 2];
      } else if (delta) {
        qa[0] = ref[o]; qa[1] = ref[o + 1]; qa[2] = ref[o + 2];
      } else {
        qa[0] = qa[1] = qa[2] = 0;
      }
      for (let k = 0; k < 3; k++) {
        const e = dec.int(m.rotation, zeroContext(prevRot), 0);
        prevRot = e;
        const v = qa[k] + e;
        if (Math.abs(v) > ONE) throw new CodecError("corrupt", "bone value out of range");
        cur[o + k] = v;
      }
      const ew = dec.int(m.w, zeroContext(prevW), 0);
      prevW = ew;
      const w = derivedW(cur[o], cur[o + 1], cur[o + 2]) + ew;
      if (w < 0 || w > ONE) throw new CodecError("corrupt", "bone value out of range");
      cur[o + 3] = w;
      if (p !== NO_REF) {
        const rp = rotation(cur, op, this.rp), rb = rotation(cur, o, this.rc), j = s.bonePivots;
        for (let k = 0; k < 3; k++) {
          const moved = (rp[3 * k] - rb[3 * k]) * j[3 * i] + (rp[3 * k + 1] - rb[3 * k + 1]) * j[3 * i + 1] + (rp[3 * k + 2] - rb[3 * k + 2]) * j[3 * i + 2];
          qa[k] = cur[op + 4 + k] + roundShift(moved);
        }
      } else if (delta) {
        qa[0] = ref[o + 4]; qa[1] = ref[o + 5]; qa[2] = ref[o + 6];
      } else {
        qa[0] = qa[1] = qa[2] = 0;
      }
      for (let k = 0; k < 3; k++) {
        const e = dec.int(m.translation, zeroContext(prevTrans), 0);
        prevTrans = e;
        const v = qa[k] + e;
        if (Math.abs(v) >= LATTICE_LIMIT) throw new CodecError("corrupt", "bone value out of range");
        cur[o + 4 + k] = v;
      }
    }
    // each bone's motion from the reference's bones (a keyframe's: the identity)
    for (let bi = 0; bi < this.setup.bones; bi++) {
      const p = delta ? this.bonesQ : this.identity, c = this.bonesNew, o = 7 * bi;
      const rp = rotation(p, o, this.rp), rc = rotation(c, o, this.rc);
      const a = this.relA;
      for (let i = 0; i < 3; i++) {
        for (let j = 0; j < 3; j++) {
          a[9 * bi + 3 * i + j] = roundShift(rc[3 * i] * rp[3 * j] + rc[3 * i + 1] * rp[3 * j + 1] + rc[3 * i + 2] * rp[3 * j + 2]);
        }
      }
      for (let i = 0; i < 3; i++) {
        this.relC[3 * bi + i] = c[o + 4 + i] * ONE - (a[9 * bi + 3 * i] * p[o + 4] + a[9 * bi + 3 * i + 1] * p[o + 5] + a[9 * bi + 3 * i + 2] * p[o + 6]);
      }
    }
  }

  /** Moves the vertices order[start..end] and their predictor references by their
   * blended bone motion into `mc` (each vertex once per frame). */
  compensate(order, start, end) {
    const pr = this.setup.predictor, done = this.mcDone;
    for (let i = start; i < end; i++) {
      const v = order[i];
      if (!done[v]) this.compensateVertex(v);
      for (let r = 3 * v; r < 3 * v + 3; r++) {
        const u = pr[r];
        if (u !== NO_REF && !done[u]) this.compensateVertex(u);
      }
    }
  }

  compensateVertex(v) {
    // integers below 2^53 throughout, so every product and sum is exact in doubles
    const s = this.setup, D = WEIGHT_ONE * ONE, half = D / 2, limit = 2 * LATTICE_LIMIT;
    const weights = s.weights, joints = s.joints, relA = this.relA, relC = this.relC;
    const q = this.ref, mc = this.mc;
    let m0 = 0, m1 = 0, m2 = 0, m3 = 0, m4 = 0, m5 = 0, m6 = 0, m7 = 0, m8 = 0, c0 = 0, c1 = 0, c2 = 0;
    for (let k = 4 * v; k < 4 * v + 4; k++) {
      const w = weights[k];
      if (w === 0) continue;
      const a = 9 * joints[k], c = 3 * joints[k];
      m0 += w * relA[a]; m1 += w * relA[a + 1]; m2 += w * relA[a + 2];
      m3 += w * relA[a + 3]; m4 += w * relA[a + 4]; m5 += w * relA[a + 5];
      m6 += w * relA[a + 6]; m7 += w * relA[a + 7]; m8 += w * relA[a + 8];
      c0 += w * relC[c]; c1 += w * relC[c + 1]; c2 += w * relC[c + 2];
    }
    const o = 3 * v, qx = q[o], qy = q[o + 1], qz = q[o + 2];
    const x = Math.floor((m0 * qx + m1 * qy + m2 * qz + c0 + half) / D);
    const y = Math.floor((m3 * qx + m4 * qy + m5 * qz + c1 + half) / D);
    const z = Math.floor((m6 * qx + m7 * qy + m8 * qz + c2 + half) / D);
    mc[o] = x < -limit ? -limit : x > limit ? limit : x;
    mc[o + 1] = y < -limit ? -limit : y > limit ? limit : y;
    mc[o + 2] = z < -limit ? -limit : z > limit ? limit : z;
    this.mcDone[v] = 1;
  }

  decodeMode(dec, m, last) {
    if (!dec.bit(m.skip, last === MODE_SKIP ? 1 : 0)) return MODE_SKIP;
    const lb = last === MODE_SKIP ? 0 : Math.floor((last - 1) / 3);
    const ls = last === MODE_SKIP ? SPATIAL_PARALLELOGRAM : (last - 1) % 3;
    const b = dec.bit(m.skinned, lb);
    let sp;
    if (!dec.bit(m.spatial, ls)) sp = SPATIAL_NONE;
    else sp = dec.bit(m.parallelogram, ls) ? SPATIAL_PARALLELOGRAM : SPATIAL_MEAN;
    return 1 + 3 * b + sp;
  }

  vertex(dec, m, base, spatial, v) {
    const pr = this.setup.predictor, q = this.qNew, prev = this.prev, o = 3 * v;
    let a = pr[o], b = pr[o + 1], c = pr[o + 2];
    if (spatial === SPATIAL_NONE) a = NO_REF;
    else if (spatial === SPATIAL_MEAN) c = NO_REF;
    // the references' offsets from their bases: none, a, the mean of a and b, or a + b − c;
    // with two references, each axis's prediction hint
    let p0 = 0, p1 = 0, p2 = 0, h0 = 0, h1 = 0, h2 = 0;
    if (a !== NO_REF) {
      const A = 3 * a;
      p0 = q[A]; p1 = q[A + 1]; p2 = q[A + 2];
      if (base) { p0 -= base[A]; p1 -= base[A + 1]; p2 -= base[A + 2]; }
      if (b !== NO_REF) {
        const B = 3 * b, mean = c === NO_REF;
        let t0 = q[B], t1 = q[B + 1], t2 = q[B + 2];
        if (base) { t0 -= base[B]; t1 -= base[B + 1]; t2 -= base[B + 2]; }
        // the hints (format.rs HINTS): 2 · min(bit length of |a − b|, 4), plus 1 where the
        // prediction is the rounded-down mean of an odd sum
        let d = Math.clz32(Math.abs(p0 - t0)); h0 = d < 28 ? 8 : 64 - 2 * d;
        d = Math.clz32(Math.abs(p1 - t1)); h1 = d < 28 ? 8 : 64 - 2 * d;
        d = Math.clz32(Math.abs(p2 - t2)); h2 = d < 28 ? 8 : 64 - 2 * d;
        if (mean) { h0 += (p0 + t0) & 1; h1 += (p1 + t1) & 1; h2 += (p2 + t2) & 1; }
        if (mean) {
          p0 = Math.floor((p0 + t0) / 2); p1 = Math.floor((p1 + t1) / 2); p2 = Math.floor((p2 + t2) / 2);
        } else {
          const C = 3 * c;
          let u0 = q[C], u1 = q[C + 1], u2 = q[C + 2];
          if (base) { u0 -= base[C]; u1 -= base[C + 1]; u2 -= base[C + 2]; }
          p0 += t0 - u0; p1 += t1 - u1; p2 += t2 - u2;
        }
      }
    }
    if (base) { p0 += base[o]; p1 += base[o + 1]; p2 += base[o + 2]; }
    // residuals; zero-flag context of an axis: the previous vertex's magnitude there
    // (0, 1, ≥ 2), plus 3 when an earlier axis of this vertex (for x: any axis of the
    // previous vertex) was non-zero, times HINTS, plus the axis's hint; the sign's
    // context is the hint
    const coords = m.coords;
    const e0 = dec.int(coords[0], (zeroContext(prev[0]) + (prev[0] !== 0 || prev[1] !== 0 || prev[2] !== 0 ? 3 : 0)) * HINTS + h0, h0);
    const e1 = dec.int(coords[1], (zeroContext(prev[1]) + (e0 !== 0 ? 3 : 0)) * HINTS + h1, h1);
    const e2 = dec.int(coords[2], (zeroContext(prev[2]) + (e0 !== 0 || e1 !== 0 ? 3 : 0)) * HINTS + h2, h2);
    const x = p0 + e0, y = p1 + e1, z = p2 + e2;
    if (Math.abs(x) >= LATTICE_LIMIT || Math.abs(y) >= LATTICE_LIMIT || Math.abs(z) >= LATTICE_LIMIT) {
      throw new CodecError("corrupt", "position outside the lattice");
    }
    q[o] = x; q[o + 1] = y; q[o + 2] = z;
    prev[0] = e0; prev[1] = e1; prev[2] = e2;
  }
}
