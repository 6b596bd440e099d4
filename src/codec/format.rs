//! The garment stream format, version 5: every constant of the format, the frame
//! header, the setup (static data) layout, the checksum, and the worst-case size bound.
//!
//! A **frame** is a fixed 40-byte little-endian header followed by one range-coded
//! payload:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `CCGF` |
//! | 4 | 1 | format version ([`FORMAT_VERSION`]) |
//! | 5 | 1 | kind: 0 keyframe (predicted from the setup alone), 1 delta (from the reference frame) |
//! | 6 | 2 | reserved, must be 0 |
//! | 8 | 4 | setup id (FNV-1a of the setup bytes, [`word_hash`]) |
//! | 12 | 4 | stream id |
//! | 16 | 4 | frame number |
//! | 20 | 4 | reference frame number (= frame number for keyframes) |
//! | 24 | 4 | vertex count |
//! | 28 | 4 | bone count |
//! | 32 | 4 | checksum of the reconstructed lattice positions ([`word_hash`]) |
//! | 36 | 4 | payload length in bytes |
//!
//! The payload codes, in order: the bones (7 integers each, in bone order: quaternion
//! x, y, z in units of 2^-[`ROT_BITS`], each the difference from its prediction along
//! the setup's skeleton; then w's difference from ⌊√(2^28 − x² − y² − z²)⌋, 0 unless
//! the bone is near a half turn, where that root is coarse (new in version 4: version 3
//! sent no w, so a bone within a few degrees of a half turn was up to ~0.02 rad off);
//! then translation in lattice steps, the difference from its prediction (version 3
//! predicted the bones from the skeleton; version 2 sent all seven as differences from
//! the reference frame's); see `motion::predict_rotation` and
//! `motion::predict_translation`), then one mode per patch of [`PATCH_SIZE`] vertices
//! in traversal order (a skip bit; then the base bit and the spatial predictor as two
//! bits) followed by that patch's residuals (x, y, z interleaved per vertex). A delta
//! frame predicts from its reference frame; a keyframe (new in version 5) the same way
//! from the setup's rest shape (all zero without one) with identity bones as its
//! reference, so its skinned base is the rest shape posed by the frame's bones (version
//! 4 coded a keyframe's every vertex by intra prediction alone). Each residual axis is a
//! zero flag, a sign, an adaptive Elias-gamma prefix and raw bits; its zero flag and sign
//! are coded in contexts of the previous vertex's residual and of the prediction's hint
//! ([`HINTS`], new in version 2: version 1 had no hints and one sign probability).
//! Every adaptive decision's probability starts at ½ in each frame and adapts by a
//! shift that grows with the bits it has seen ([`PROB_SHIFT`], new in version 5:
//! version 4 adapted 11-bit probabilities by a fixed shift of 5).
//!
//! A **setup** (sent once per garment, content-addressed by its id) is:
//! magic `CCGS`, version (u8), 3 reserved zero bytes, lattice step (f32, metres),
//! vertex count, triangle count, bone count (u32 each), triangles (3 × u32 each),
//! skin (per vertex 4 bone indices u8 then 4 weights u8 summing to [`WEIGHT_ONE`]),
//! traversal order (u32 per vertex: the vertex decoded at each position), predictor
//! (per vertex 3 × u32 ids of vertices a, b, c earlier in the traversal, [`NO_REF`]
//! where absent: a, b, c → parallelogram a + b − c; a, b → the rounded-down mean; a → a;
//! none → 0), skeleton (new in version 3; per bone its parent as u32, an earlier bone
//! or [`NO_REF`] for a root, then its rest joint as 3 × i32 lattice steps), and (new in
//! version 5) a rest flag (u32: 0 or 1) followed, where it is 1, by the garment at the
//! bones' bind pose as 3 × i32 lattice steps per vertex.

/// Frame magic.
pub const FRAME_MAGIC: [u8; 4] = *b"CCGF";
/// Setup magic.
pub const SETUP_MAGIC: [u8; 4] = *b"CCGS";
/// Format version of frames and setups.
pub const FORMAT_VERSION: u8 = 5;
/// Frame kind byte of a keyframe.
pub const KIND_KEY: u8 = 0;
/// Frame kind byte of a delta frame.
pub const KIND_DELTA: u8 = 1;
/// Frame header length, bytes.
pub const FRAME_HEADER_LEN: usize = 40;
/// Setup header length (magic to bone count), bytes.
pub const SETUP_HEADER_LEN: usize = 24;
/// Absent predictor reference.
pub const NO_REF: u32 = u32::MAX;
/// Lattice coordinates lie in (−LATTICE_LIMIT, LATTICE_LIMIT) steps.
pub const LATTICE_LIMIT: i32 = 1 << 21;
/// Largest vertex count a setup or frame may declare.
pub const MAX_VERTICES: u32 = 1 << 22;
/// Largest bone count (bone indices are one byte).
pub const MAX_BONES: u32 = 256;
/// Skin weights of a vertex sum to this.
pub const WEIGHT_ONE: i64 = 255;
/// Fixed-point bits of quaternion components and rotation matrix entries.
pub const ROT_BITS: u32 = 14;
/// Vertices per patch of a delta frame (one predictor mode each).
pub const PATCH_SIZE: usize = 64;
/// Patch mode: every vertex equals the reference frame's. Other modes are
/// `1 + 3 · base + spatial`, base one of `BASE_*`, spatial one of `SPATIAL_*`.
pub const MODE_SKIP: u32 = 0;
/// Base prediction: the reference frame's position.
pub const BASE_PREVIOUS: u32 = 0;
/// Base prediction: the reference position moved by the blended bone motion between
/// the reference frame and this one (skinning motion compensation).
pub const BASE_SKINNED: u32 = 1;
/// Spatial prediction: none (the base alone).
pub const SPATIAL_NONE: u32 = 0;
/// Spatial prediction: the rounded-down mean of the first two references' offsets
/// from their bases (or the first's alone).
pub const SPATIAL_MEAN: u32 = 1;
/// Spatial prediction: parallelogram a + b − c of the references' offsets (falling back
/// to the mean, the copy, or none where references are missing).
pub const SPATIAL_PARALLELOGRAM: u32 = 2;
/// Number of patch modes.
pub const MODES: u32 = 7;

/// Probability precision of the range coder, bits (version 4 and before: 11).
pub const PROB_BITS: u32 = 15;
/// An adaptive probability's state: the probability of a 0 bit in units of
/// 2^-[`PROB_BITS`] in the low 16 bits, and above them how many bits it has adapted to
/// (counted until the shift reaches [`PROB_SHIFT`], so at most 62). New in version 5.
pub const PROB_COUNT_SHIFT: u32 = 16;
/// A new model's state: probability ½, nothing seen.
pub const PROB_INIT: u32 = 1 << (PROB_BITS - 1);
/// Adaptation shift of a probability that has seen n bits: ⌊log2(n + 2)⌋, at most
/// this (new in version 5; version 4 adapted by a fixed shift of 5 from the first bit).
/// A new context then learns as fast as a running count (its first bit moves it half
/// way), and a settled one averages over ~2^6 bits: on `bench codec`'s walks 0.6–1.2 %
/// fewer bits than the fixed shift of 5, where a fixed 6 alone was 0.3–2.2 % worse.
pub const PROB_SHIFT: u32 = 6;
/// Range renormalisation threshold.
pub const RANGE_TOP: u32 = 1 << 24;
/// Activity classes of an axis of a prediction from two references a and b: the bit
/// length of |offset(a) − offset(b)| on that axis, capped (0; 1; 2–3; 4–7; ≥ 8 lattice
/// steps). Where the references moved apart, the motion field bends and predictions
/// miss the tolerance more often. Predictions from fewer than two references are
/// class 0.
pub const ACTIVITY_CLASSES: usize = 5;
/// Prediction hints of a residual axis: `2 · activity class + odd`, `odd` being 1 where
/// the prediction is the rounded-down mean of an odd sum (it then lies half a step
/// below the references' midpoint, so the residual leans positive). New in version 2.
pub const HINTS: usize = 2 * ACTIVITY_CLASSES;
/// Zero-flag contexts: `HINTS · (m + 3 · busy) + hint`, where `m` is the previous
/// value's magnitude (0, 1, ≥ 2) in the same stream and `busy` whether the vertex's
/// earlier axes (for x: the previous vertex) had a non-zero residual. The bones' values
/// use `m` alone (hint 0, busy 0 never reached: contexts 0, 1, 2 of their own models).
pub const ZERO_CONTEXTS: usize = 6 * HINTS;
/// Sign contexts: the prediction hint (0 for the bones).
pub const SIGN_CONTEXTS: usize = HINTS;
/// Longest Elias-gamma prefix: coded integers satisfy |v| < 2^(MAX_PREFIX + 1).
pub const MAX_PREFIX: usize = 26;

/// FNV-1a (32-bit) over 32-bit little-endian words: the setup id and the frame
/// checksum (one `Math.imul` per word in JavaScript).
pub fn word_hash(words: impl IntoIterator<Item = u32>) -> u32 {
    words.into_iter().fold(WORD_HASH_START, word_hash_step)
}

/// [`word_hash`] of no words: where a running hash starts.
pub(crate) const WORD_HASH_START: u32 = 0x811C_9DC5;

/// One word's step of [`word_hash`].
#[inline(always)]
pub(crate) fn word_hash_step(h: u32, w: u32) -> u32 {
    (h ^ w).wrapping_mul(0x0100_0193)
}

/// Bits an adaptive binary decision costs at most, rounded up (a test checks the
/// probabilities' extremes against it).
pub const DECISION_BITS: usize = 10;

/// Largest possible encoded frame for `vertices` vertices and `bones` bones, in bytes
/// (header included). An encoder never produces more; a decoder can use it to refuse
/// a declared payload length before reading it.
///
/// Each adaptive binary decision costs at most log2(2^15 / 63) < 9.1 bits (the
/// probabilities stay within [63, 2^15 − 63]: [`DECISION_BITS`]); a coded integer
/// takes at most 2 + 27 such decisions and 26 raw bits.
pub fn max_frame_bytes(vertices: usize, bones: usize) -> usize {
    let ints = 3 * vertices + 7 * bones;
    let bits_per_int = DECISION_BITS * (2 + MAX_PREFIX + 1) + MAX_PREFIX;
    let patches = vertices.div_ceil(PATCH_SIZE);
    let bits = ints * bits_per_int + patches * 4 * DECISION_BITS;
    FRAME_HEADER_LEN + 5 + bits.div_ceil(8) + 8
}

/// Frame kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameKind {
    /// Decodable alone: predicted from the setup (its rest shape) and its own bones.
    Key,
    /// Predicted from the frame named by `reference`.
    Delta,
}

/// The fixed header of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// Keyframe or delta.
    pub kind: FrameKind,
    /// Id of the setup the frame was coded with.
    pub setup_id: u32,
    /// Stream (avatar garment) id.
    pub stream_id: u32,
    /// This frame's number.
    pub frame: u32,
    /// Frame number of the reference (equal to `frame` for keyframes).
    pub reference: u32,
    /// Vertex count.
    pub vertices: u32,
    /// Bone count.
    pub bones: u32,
    /// Checksum of the reconstructed lattice coordinates.
    pub checksum: u32,
    /// Payload length, bytes.
    pub payload_len: u32,
}

impl FrameHeader {
    /// Writes the header.
    pub(crate) fn write(&self, out: &mut [u8; FRAME_HEADER_LEN]) {
        out[0..4].copy_from_slice(&FRAME_MAGIC);
        out[4] = FORMAT_VERSION;
        out[5] = match self.kind {
            FrameKind::Key => KIND_KEY,
            FrameKind::Delta => KIND_DELTA,
        };
        out[6] = 0;
        out[7] = 0;
        for (i, v) in [
            self.setup_id,
            self.stream_id,
            self.frame,
            self.reference,
            self.vertices,
            self.bones,
            self.checksum,
            self.payload_len,
        ]
        .into_iter()
        .enumerate()
        {
            out[8 + 4 * i..12 + 4 * i].copy_from_slice(&v.to_le_bytes());
        }
    }

    /// Parses and validates a frame header: magic, version, kind, reserved bytes,
    /// sizes within the format's limits, a keyframe referring to itself, and the
    /// payload length equal to what follows the header (so extra or missing bytes are
    /// refused here).
    pub fn parse(bytes: &[u8]) -> Result<Self, super::CodecError> {
        use super::CodecError as E;
        if bytes.is_empty() {
            return Err(E::Empty);
        }
        if bytes.len() < FRAME_HEADER_LEN {
            return Err(E::Truncated {
                what: "frame header",
            });
        }
        if bytes[0..4] != FRAME_MAGIC {
            return Err(E::BadMagic);
        }
        if bytes[4] != FORMAT_VERSION {
            return Err(E::UnsupportedVersion {
                found: bytes[4],
                supported: FORMAT_VERSION,
            });
        }
        let kind = match bytes[5] {
            KIND_KEY => FrameKind::Key,
            KIND_DELTA => FrameKind::Delta,
            k => return Err(E::BadKind(k)),
        };
        if bytes[6] != 0 || bytes[7] != 0 {
            return Err(E::Corrupt {
                what: "reserved header bytes",
            });
        }
        let word = |i: usize| {
            u32::from_le_bytes([
                bytes[8 + 4 * i],
                bytes[9 + 4 * i],
                bytes[10 + 4 * i],
                bytes[11 + 4 * i],
            ])
        };
        let h = FrameHeader {
            kind,
            setup_id: word(0),
            stream_id: word(1),
            frame: word(2),
            reference: word(3),
            vertices: word(4),
            bones: word(5),
            checksum: word(6),
            payload_len: word(7),
        };
        if h.vertices > MAX_VERTICES || h.bones > MAX_BONES {
            return Err(E::TooLarge {
                what: "frame",
                count: u64::from(h.vertices.max(h.bones)),
            });
        }
        if h.kind == FrameKind::Key && h.reference != h.frame {
            return Err(E::Corrupt {
                what: "keyframe reference",
            });
        }
        let rest = bytes.len() - FRAME_HEADER_LEN;
        let declared = h.payload_len as usize;
        if declared > max_frame_bytes(h.vertices as usize, h.bones as usize) {
            return Err(E::TooLarge {
                what: "payload",
                count: u64::from(h.payload_len),
            });
        }
        if rest < declared {
            return Err(E::Truncated {
                what: "frame payload",
            });
        }
        if rest > declared {
            return Err(E::TrailingBytes {
                extra: rest - declared,
            });
        }
        Ok(h)
    }
}
