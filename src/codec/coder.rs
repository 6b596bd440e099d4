//! The encoder and the decoder. Both run the same prediction code on the same integers
//! (the encoder's reconstruction *is* its quantised input), so they agree bit for bit
//! forever: there is no drift to correct.

use std::sync::Arc;

use super::CodecError;
use super::format::PROB_INIT;
use super::format::{
    BASE_PREVIOUS, BASE_SKINNED, FRAME_HEADER_LEN, FrameHeader, FrameKind, LATTICE_LIMIT,
    MODE_SKIP, MODES, NO_REF, PATCH_SIZE, SPATIAL_MEAN, SPATIAL_NONE, SPATIAL_PARALLELOGRAM,
    max_frame_bytes, word_hash,
};
use super::motion::{
    BoneTransform, QBone, RelMotion, compensate_vertex, quantize_bone, valid_bone,
};
use super::range::{IntModel, Prob, RangeDecoder, RangeEncoder, coord_context, zero_context};
use super::setup::GarmentSetup;

type Lattice = Vec<[i32; 3]>;

/// Adaptive models of one frame (reset at every frame, so frames decode independently
/// of the ones before their reference).
struct Models {
    coords: [IntModel; 3],
    rotation: IntModel,
    translation: IntModel,
    skip: [Prob; 2],
    skinned: [Prob; 2],
    spatial: [Prob; 3],
    parallelogram: [Prob; 3],
}

impl Models {
    fn new() -> Self {
        Self {
            coords: Default::default(),
            rotation: IntModel::default(),
            translation: IntModel::default(),
            skip: [PROB_INIT; 2],
            skinned: [PROB_INIT; 2],
            spatial: [PROB_INIT; 3],
            parallelogram: [PROB_INIT; 3],
        }
    }

    /// Codes a patch mode; contexts are the previous patch's mode parts.
    fn encode_mode(&mut self, enc: &mut RangeEncoder<'_>, last: u32, mode: u32) {
        enc.bit(
            &mut self.skip[usize::from(last == MODE_SKIP)],
            mode != MODE_SKIP,
        );
        if mode == MODE_SKIP {
            return;
        }
        let (lb, ls) = split_mode(last);
        let (b, sp) = split_mode(mode);
        enc.bit(&mut self.skinned[lb as usize], b == BASE_SKINNED);
        enc.bit(&mut self.spatial[ls as usize], sp != SPATIAL_NONE);
        if sp != SPATIAL_NONE {
            enc.bit(
                &mut self.parallelogram[ls as usize],
                sp == SPATIAL_PARALLELOGRAM,
            );
        }
    }

    fn decode_mode(&mut self, dec: &mut RangeDecoder<'_>, last: u32) -> Result<u32, CodecError> {
        if !dec.bit(&mut self.skip[usize::from(last == MODE_SKIP)])? {
            return Ok(MODE_SKIP);
        }
        let (lb, ls) = split_mode(last);
        let b = if dec.bit(&mut self.skinned[lb as usize])? {
            BASE_SKINNED
        } else {
            BASE_PREVIOUS
        };
        let sp = if !dec.bit(&mut self.spatial[ls as usize])? {
            SPATIAL_NONE
        } else if dec.bit(&mut self.parallelogram[ls as usize])? {
            SPATIAL_PARALLELOGRAM
        } else {
            SPATIAL_MEAN
        };
        Ok(1 + 3 * b + sp)
    }
}

/// (base, spatial) of a mode; the skip mode reads as (previous, parallelogram).
#[inline]
fn split_mode(mode: u32) -> (u32, u32) {
    if mode == MODE_SKIP {
        (BASE_PREVIOUS, SPATIAL_PARALLELOGRAM)
    } else {
        ((mode - 1) / 3, (mode - 1) % 3)
    }
}

/// Prediction of vertex `v` from earlier-decoded vertices: `base[v]` plus, by
/// `spatial`, nothing, the mean, or the parallelogram of the references' offsets from
/// their own bases (`base = None`: zero, for keyframes).
#[inline]
fn predict(
    v: usize,
    refs: &[u32; 3],
    base: Option<&[[i32; 3]]>,
    cur: &[[i32; 3]],
    spatial: u32,
) -> [i64; 3] {
    match (base, spatial) {
        (None, SPATIAL_NONE) => predict_in::<SPATIAL_NONE, false>(v, refs, &[], cur),
        (None, SPATIAL_MEAN) => predict_in::<SPATIAL_MEAN, false>(v, refs, &[], cur),
        (None, _) => predict_in::<SPATIAL_PARALLELOGRAM, false>(v, refs, &[], cur),
        (Some(b), SPATIAL_NONE) => predict_in::<SPATIAL_NONE, true>(v, refs, b, cur),
        (Some(b), SPATIAL_MEAN) => predict_in::<SPATIAL_MEAN, true>(v, refs, b, cur),
        (Some(b), _) => predict_in::<SPATIAL_PARALLELOGRAM, true>(v, refs, b, cur),
    }
}

/// [`predict`] for one spatial predictor `SP`, with (`BASE`) or without a base (the
/// encoder's trials are instantiated per mode so that nothing is decided per vertex
/// but which references exist).
#[inline(always)]
fn predict_in<const SP: u32, const BASE: bool>(
    v: usize,
    refs: &[u32; 3],
    base: &[[i32; 3]],
    cur: &[[i32; 3]],
) -> [i64; 3] {
    // offset of an earlier vertex from its base
    let off = |u: u32| -> [i64; 3] {
        let c = cur[u as usize];
        let b = if BASE { base[u as usize] } else { [0; 3] };
        std::array::from_fn(|k| i64::from(c[k]) - i64::from(b[k]))
    };
    let s: [i64; 3] = match SP {
        SPATIAL_NONE => [0; 3],
        SPATIAL_MEAN => match (refs[0], refs[1]) {
            (NO_REF, _) => [0; 3],
            (a, NO_REF) => off(a),
            (a, b) => {
                let (oa, ob) = (off(a), off(b));
                std::array::from_fn(|k| (oa[k] + ob[k]) >> 1)
            }
        },
        _ => match (refs[0], refs[1], refs[2]) {
            (NO_REF, _, _) => [0; 3],
            (a, NO_REF, _) => off(a),
            (a, b, NO_REF) => {
                let (oa, ob) = (off(a), off(b));
                std::array::from_fn(|k| (oa[k] + ob[k]) >> 1)
            }
            (a, b, c) => {
                let (oa, ob, oc) = (off(a), off(b), off(c));
                std::array::from_fn(|k| oa[k] + ob[k] - oc[k])
            }
        },
    };
    if BASE {
        let bv = base[v];
        std::array::from_fn(|k| i64::from(bv[k]) + s[k])
    } else {
        s
    }
}

/// Approximate cost in bits of coding `e` (used only to choose patch modes).
#[inline]
fn cost(e: i64) -> u32 {
    if e == 0 {
        1
    } else {
        4 + 2 * (64 - e.unsigned_abs().leading_zeros())
    }
}

/// Motion compensation of `vertices` and their predictor references into `mc`, each
/// vertex once per frame (`done` marks those computed): the encoder and decoder compute
/// it only where a patch predicts from it.
fn compensate_where_used(
    setup: &GarmentSetup,
    motions: &[RelMotion],
    q: &[[i32; 3]],
    mc: &mut [[i32; 3]],
    done: &mut [bool],
    vertices: &[u32],
) {
    for &v in vertices {
        let refs = &setup.predictor[v as usize];
        for u in std::iter::once(v).chain(refs.iter().copied()) {
            let u = u as usize;
            if u < done.len() && !done[u] {
                mc[u] = compensate_vertex(motions, &setup.joints[u], &setup.weights[u], q[u]);
                done[u] = true;
            }
        }
    }
}

fn checksum(q: &[[i32; 3]]) -> u32 {
    word_hash(q.iter().flat_map(|p| p.map(|c| c as u32)))
}

/// How far, as a fraction of the tolerance, a vertex whose prediction missed the
/// tolerance ball is coded from its true position, towards the prediction. On the
/// ball's edge (1.0) the residual is smallest now, but the vertex needs another
/// correction the next time it moves the same way; pulled in, it pays a little more
/// once and then rides on the prediction longer. Encoder-only; 0.4 codes walking
/// cloth in ~5 % fewer bits than 1.0 (and 0.0, the nearest lattice point, in ~2 % more;
/// `bench codec`).
const PULL: f64 = 0.4;

/// Picks the lattice point coded for a vertex whose true position is `x` (lattice
/// units) when the decoder will predict `p`: `p` itself when it lies within `r` of `x`
/// (the residual is then zero), else the lattice point nearest to the point [`PULL`]·`r`
/// from `x` towards `p` if that is inside the ball, else the nearest lattice point to
/// `x` (always within `r`, see [`Encoder::set_tolerance`]). This is what keeps still
/// and rigidly moving cloth from paying for rounding noise.
#[inline]
fn snap(p: [i64; 3], x: [f64; 3], r: f64) -> [i32; 3] {
    let d = [p[0] as f64 - x[0], p[1] as f64 - x[1], p[2] as f64 - x[2]];
    let len2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
    let lim = f64::from(LATTICE_LIMIT - 1);
    let inside = |q: [f64; 3]| q.iter().all(|c| c.abs() < lim);
    if len2 <= r * r {
        let q = p.map(|c| c as f64);
        if inside(q) {
            return p.map(|c| c as i32);
        }
    }
    let len = len2.sqrt();
    if len > 0.0 {
        let t = PULL * r / len;
        let q: [f64; 3] = std::array::from_fn(|k| round(x[k] + d[k] * t));
        let e2: f64 = (0..3).map(|k| (q[k] - x[k]).powi(2)).sum();
        if e2 <= r * r && inside(q) {
            return q.map(|c| c as i32);
        }
    }
    x.map(|c| round(c) as i32)
}

/// Nearest integer (ties to even) of a lattice coordinate (|x| < 2^22 here), without
/// the libm call `f64::round` compiles to on baseline x86-64; encoder-only (which
/// nearby lattice point is coded is the encoder's choice, not part of the format).
#[inline]
fn round(x: f64) -> f64 {
    const MAGIC: f64 = 6_755_399_441_055_744.0; // 1.5 · 2^52
    (x + MAGIC) - MAGIC
}

/// Chooses and stores the coded lattice points of `vertices` (in traversal order) for
/// one prediction mode; returns the estimated bits.
#[allow(clippy::too_many_arguments, reason = "the encoder's disjoint buffers")]
fn trial(
    setup: &GarmentSetup,
    vertices: &[u32],
    base: Option<&[[i32; 3]]>,
    spatial: u32,
    target: &[[f64; 3]],
    r: f64,
    q_new: &mut [[i32; 3]],
    residual: &mut [[i32; 3]],
) -> u32 {
    let t = Trial {
        setup,
        vertices,
        target,
        r,
    };
    match (base, spatial) {
        (None, SPATIAL_NONE) => t.run::<SPATIAL_NONE, false>(&[], q_new, residual),
        (None, SPATIAL_MEAN) => t.run::<SPATIAL_MEAN, false>(&[], q_new, residual),
        (None, _) => t.run::<SPATIAL_PARALLELOGRAM, false>(&[], q_new, residual),
        (Some(b), SPATIAL_NONE) => t.run::<SPATIAL_NONE, true>(b, q_new, residual),
        (Some(b), SPATIAL_MEAN) => t.run::<SPATIAL_MEAN, true>(b, q_new, residual),
        (Some(b), _) => t.run::<SPATIAL_PARALLELOGRAM, true>(b, q_new, residual),
    }
}

/// The read-only inputs of a [`trial`].
struct Trial<'a> {
    setup: &'a GarmentSetup,
    vertices: &'a [u32],
    target: &'a [[f64; 3]],
    r: f64,
}

impl Trial<'_> {
    #[inline(always)]
    fn run<const SP: u32, const BASE: bool>(
        &self,
        base: &[[i32; 3]],
        q_new: &mut [[i32; 3]],
        residual: &mut [[i32; 3]],
    ) -> u32 {
        let mut bits = 0;
        for &v in self.vertices {
            let v = v as usize;
            let p = predict_in::<SP, BASE>(v, &self.setup.predictor[v], base, q_new);
            let q = snap(p, self.target[v], self.r);
            let e: [i64; 3] = std::array::from_fn(|k| i64::from(q[k]) - p[k]);
            bits += e.iter().map(|&e| cost(e)).sum::<u32>();
            q_new[v] = q;
            residual[v] = e.map(|e| e as i32);
        }
        bits
    }
}

/// Vertices of a patch on which the encoder compares prediction modes.
const MODE_PROBE: usize = 16;

/// Encodes one garment stream. Owns the reconstruction (the last coded frame), so a
/// delta is always predicted from exactly what every in-step decoder holds.
pub struct Encoder {
    setup: Arc<GarmentSetup>,
    stream_id: u32,
    frame: u32,
    has_frame: bool,
    radius: f64,
    target: Vec<[f64; 3]>,
    q: Lattice,
    bones: Vec<QBone>,
    q_new: Lattice,
    bones_new: Vec<QBone>,
    mc: Lattice,
    /// Whether `mc` holds vertex v's compensated position this frame.
    mc_done: Vec<bool>,
    /// Per vertex, the residual the last trial coded (what the range coder writes).
    residual: Lattice,
    motions: Vec<RelMotion>,
    modes: Vec<u32>,
}

impl Encoder {
    /// A new stream; its first frame is a keyframe numbered 0. The error tolerance
    /// starts at max(1 mm, step·√3/2).
    pub fn new(setup: Arc<GarmentSetup>, stream_id: u32) -> Self {
        let n = setup.vertex_count();
        let nb = setup.bones as usize;
        let step = f64::from(setup.step);
        Self {
            stream_id,
            frame: 0,
            has_frame: false,
            radius: (0.001 / step).max(3f64.sqrt() / 2.0),
            target: vec![[0.0; 3]; n],
            q: vec![[0; 3]; n],
            bones: vec![[0; 7]; nb],
            q_new: vec![[0; 3]; n],
            bones_new: vec![[0; 7]; nb],
            mc: vec![[0; 3]; n],
            mc_done: vec![false; n],
            residual: vec![[0; 3]; n],
            motions: vec![RelMotion::default(); nb],
            modes: vec![0; n.div_ceil(PATCH_SIZE)],
            setup,
        }
    }

    /// Sets the largest distance, metres, between a vertex and its coded position. It
    /// must be at least step·√3/2 (the distance to the nearest lattice point); larger
    /// values let the encoder keep a vertex where the prediction puts it.
    pub fn set_tolerance(&mut self, metres: f32) -> Result<(), CodecError> {
        let r = f64::from(metres) / f64::from(self.setup.step);
        if !(r.is_finite() && r >= 3f64.sqrt() / 2.0 && r < 1e3) {
            return Err(CodecError::Invalid {
                what: "tolerance (must be at least step·√3/2)",
            });
        }
        self.radius = r;
        Ok(())
    }

    /// The error tolerance, metres.
    pub fn tolerance(&self) -> f32 {
        (self.radius * f64::from(self.setup.step)) as f32
    }

    /// The setup frames of this stream are coded with.
    pub fn setup(&self) -> &Arc<GarmentSetup> {
        &self.setup
    }

    /// Number of the last coded frame (`None` before the first).
    pub fn last_frame(&self) -> Option<u32> {
        self.has_frame.then_some(self.frame)
    }

    /// The reconstruction of the last frame, metres, into `out` (3 floats per vertex):
    /// exactly what a decoder outputs for it.
    pub fn reconstruction(&self, out: &mut [f32]) -> Result<(), CodecError> {
        write_out(&self.q, self.setup.step, out)
    }

    /// Codes the next frame: positions (`3 × vertices` floats, metres, avatar-local)
    /// and the bones' skinning transforms (one per setup bone). A delta against the
    /// previous frame unless `keyframe` is set or there is no previous frame. Every
    /// vertex is reconstructed within [`Encoder::tolerance`] of its position.
    /// `out` is cleared and reused; it never grows past [`max_frame_bytes`].
    ///
    /// Refuses (and leaves the stream unchanged on) wrong lengths, non-finite values and
    /// positions outside the lattice (±2^21 steps).
    pub fn encode(
        &mut self,
        positions: &[f32],
        bones: &[BoneTransform],
        keyframe: bool,
        out: &mut Vec<u8>,
    ) -> Result<FrameHeader, CodecError> {
        let n = self.setup.vertex_count();
        if positions.len() != 3 * n {
            return Err(CodecError::Mismatch {
                what: "position floats",
                expected: 3 * n as u64,
                found: positions.len() as u64,
            });
        }
        if bones.len() != self.bones.len() {
            return Err(CodecError::Mismatch {
                what: "bones",
                expected: self.bones.len() as u64,
                found: bones.len() as u64,
            });
        }
        let inv = 1.0 / f64::from(self.setup.step);
        for (t, p) in self.target.iter_mut().zip(positions.chunks_exact(3)) {
            for k in 0..3 {
                let x = f64::from(p[k]) * inv;
                if !(x.is_finite() && x.abs() < f64::from(LATTICE_LIMIT) - 2.0) {
                    return Err(CodecError::Invalid {
                        what: "position (not finite or outside the lattice)",
                    });
                }
                t[k] = x;
            }
        }
        for (qb, b) in self.bones_new.iter_mut().zip(bones) {
            *qb = quantize_bone(b, self.setup.step)?;
        }
        let key = keyframe || !self.has_frame;
        let frame = if self.has_frame {
            self.frame.wrapping_add(1)
        } else {
            0
        };
        let header = if key {
            self.code_key(frame, self.radius, out)
        } else {
            self.code_delta(frame, out)
        };
        std::mem::swap(&mut self.q, &mut self.q_new);
        std::mem::swap(&mut self.bones, &mut self.bones_new);
        self.frame = frame;
        self.has_frame = true;
        Ok(header)
    }

    /// A keyframe of the last coded frame (same number, same reconstruction): what a
    /// viewer that missed frames is resynchronised with.
    pub fn keyframe(&mut self, out: &mut Vec<u8>) -> Result<FrameHeader, CodecError> {
        if !self.has_frame {
            return Err(CodecError::MissingReference {
                needed: 0,
                have: None,
            });
        }
        for (t, q) in self.target.iter_mut().zip(&self.q) {
            *t = q.map(f64::from);
        }
        self.bones_new.copy_from_slice(&self.bones);
        Ok(self.code_key(self.frame, 0.0, out))
    }

    fn finish(&self, kind: FrameKind, frame: u32, reference: u32, out: &mut [u8]) -> FrameHeader {
        let h = FrameHeader {
            kind,
            setup_id: self.setup.id(),
            stream_id: self.stream_id,
            frame,
            reference,
            vertices: self.setup.vertex_count() as u32,
            bones: self.bones.len() as u32,
            checksum: checksum(&self.q_new),
            payload_len: (out.len() - FRAME_HEADER_LEN) as u32,
        };
        let mut head = [0u8; FRAME_HEADER_LEN];
        h.write(&mut head);
        out[..FRAME_HEADER_LEN].copy_from_slice(&head);
        debug_assert!(out.len() <= max_frame_bytes(self.setup.vertex_count(), self.bones.len()));
        h
    }

    /// Intra-codes `target`/`bones_new` into `q_new` with snapping radius `r`.
    fn code_key(&mut self, frame: u32, r: f64, out: &mut Vec<u8>) -> FrameHeader {
        let s = &*self.setup;
        trial(
            s,
            &s.order,
            None,
            SPATIAL_PARALLELOGRAM,
            &self.target,
            r,
            &mut self.q_new,
            &mut self.residual,
        );
        out.clear();
        out.resize(FRAME_HEADER_LEN, 0);
        let mut m = Models::new();
        let mut enc = RangeEncoder::new(out);
        code_bones(&mut enc, &mut m, &self.bones_new, None);
        let mut prev = [0i32; 3];
        for &v in &s.order {
            let cur = self.residual[v as usize];
            for k in 0..3 {
                enc.int(&mut m.coords[k], coord_context(&prev, &cur, k), cur[k]);
            }
            prev = cur;
        }
        enc.finish();
        self.finish(FrameKind::Key, frame, frame, out)
    }

    /// Codes `target`/`bones_new` into `q_new` as a delta against `q`/`bones`.
    fn code_delta(&mut self, frame: u32, out: &mut Vec<u8>) -> FrameHeader {
        for (m, (p, c)) in self
            .motions
            .iter_mut()
            .zip(self.bones.iter().zip(&self.bones_new))
        {
            *m = RelMotion::new(p, c);
        }
        let s = &*self.setup;
        self.mc_done.fill(false);
        let r = self.radius;
        // choose a mode per patch, fixing its vertices' coded points as we go
        for (pi, patch) in s.order.chunks(PATCH_SIZE).enumerate() {
            let still = patch.iter().all(|&v| {
                let (q, x) = (self.q[v as usize], self.target[v as usize]);
                (0..3)
                    .map(|k| (f64::from(q[k]) - x[k]).powi(2))
                    .sum::<f64>()
                    <= r * r
            });
            if still {
                self.modes[pi] = MODE_SKIP;
                for &v in patch {
                    self.q_new[v as usize] = self.q[v as usize];
                }
                continue;
            }
            // every mode is tried on the patch's first MODE_PROBE vertices (their
            // references lie before them, so the trial is exact there); the winner then
            // codes the whole patch
            let probe = &patch[..patch.len().min(MODE_PROBE)];
            // the patch's mode of the previous frame first; a probe coded with zero
            // residuals everywhere cannot be beaten, so the search stops there
            let floor = 3 * probe.len() as u32;
            let previous = self.modes[pi];
            let mut best = (u32::MAX, MODE_SKIP);
            let candidates = std::iter::once(previous)
                .filter(|&m| m != MODE_SKIP)
                .chain((1..MODES).filter(|&m| m != previous));
            for mode in candidates {
                let (b, sp) = split_mode(mode);
                if b == BASE_SKINNED {
                    let (q, mc, done) = (&self.q, &mut self.mc, &mut self.mc_done);
                    compensate_where_used(s, &self.motions, q, mc, done, probe);
                }
                let base = if b == BASE_SKINNED { &self.mc } else { &self.q };
                let c = trial(
                    s,
                    probe,
                    Some(base),
                    sp,
                    &self.target,
                    r,
                    &mut self.q_new,
                    &mut self.residual,
                );
                if c < best.0 {
                    best = (c, mode);
                }
                if c <= floor {
                    break;
                }
            }
            let (b, sp) = split_mode(best.1);
            if b == BASE_SKINNED {
                let (q, mc, done) = (&self.q, &mut self.mc, &mut self.mc_done);
                compensate_where_used(s, &self.motions, q, mc, done, patch);
            }
            let base = if b == BASE_SKINNED { &self.mc } else { &self.q };
            trial(
                s,
                patch,
                Some(base),
                sp,
                &self.target,
                r,
                &mut self.q_new,
                &mut self.residual,
            );
            self.modes[pi] = best.1;
        }
        out.clear();
        out.resize(FRAME_HEADER_LEN, 0);
        let mut m = Models::new();
        let mut enc = RangeEncoder::new(out);
        code_bones(&mut enc, &mut m, &self.bones_new, Some(&self.bones));
        let mut prev = [0i32; 3];
        let mut last_mode = MODE_SKIP;
        for (pi, patch) in s.order.chunks(PATCH_SIZE).enumerate() {
            let mode = self.modes[pi];
            m.encode_mode(&mut enc, last_mode, mode);
            if mode != MODE_SKIP {
                for &v in patch {
                    let cur = self.residual[v as usize];
                    for k in 0..3 {
                        enc.int(&mut m.coords[k], coord_context(&prev, &cur, k), cur[k]);
                    }
                    prev = cur;
                }
            }
            last_mode = mode;
        }
        enc.finish();
        self.finish(FrameKind::Delta, frame, self.frame, out)
    }
}

fn code_bones(
    enc: &mut RangeEncoder<'_>,
    m: &mut Models,
    bones: &[QBone],
    reference: Option<&[QBone]>,
) {
    let mut prev = [0i32; 2];
    for (i, b) in bones.iter().enumerate() {
        let r = reference.map_or([0; 7], |r| r[i]);
        for k in 0..7 {
            let e = b[k] - r[k];
            let (model, slot) = if k < 4 {
                (&mut m.rotation, 0)
            } else {
                (&mut m.translation, 1)
            };
            enc.int(model, zero_context(prev[slot]), e);
            prev[slot] = e;
        }
    }
}

fn decode_bones(
    dec: &mut RangeDecoder<'_>,
    m: &mut Models,
    out: &mut [QBone],
    reference: Option<&[QBone]>,
) -> Result<(), CodecError> {
    let mut prev = [0i32; 2];
    for (i, b) in out.iter_mut().enumerate() {
        let r = reference.map_or([0; 7], |r| r[i]);
        for k in 0..7 {
            let (model, slot) = if k < 4 {
                (&mut m.rotation, 0)
            } else {
                (&mut m.translation, 1)
            };
            let e = dec.int(model, zero_context(prev[slot]))?;
            prev[slot] = e;
            b[k] = r[k]
                .checked_add(e)
                .ok_or(CodecError::Corrupt { what: "bone value" })?;
        }
        if !valid_bone(b) {
            return Err(CodecError::Corrupt {
                what: "bone value out of range",
            });
        }
    }
    Ok(())
}

fn write_out(q: &[[i32; 3]], step: f32, out: &mut [f32]) -> Result<(), CodecError> {
    if out.len() != 3 * q.len() {
        return Err(CodecError::Mismatch {
            what: "output floats",
            expected: 3 * q.len() as u64,
            found: out.len() as u64,
        });
    }
    let step = f64::from(step);
    for (o, p) in out.chunks_exact_mut(3).zip(q) {
        for k in 0..3 {
            o[k] = (f64::from(p[k]) * step) as f32;
        }
    }
    Ok(())
}

/// Decodes one garment stream in place.
///
/// Contract: any byte string may be passed. Everything is validated — header, sizes
/// against the setup, every decoded value against the lattice, the payload length
/// exactly, and the reconstruction against the frame's checksum — before the state
/// or the caller's buffer changes, so a refused frame loses nothing. Memory is
/// allocated only in [`Decoder::new`]; an untrusted stream cannot make the decoder
/// allocate, loop longer than its byte length allows, or panic.
pub struct Decoder {
    setup: Arc<GarmentSetup>,
    stream_id: Option<u32>,
    frame: Option<u32>,
    q: Lattice,
    bones: Vec<QBone>,
    q_new: Lattice,
    bones_new: Vec<QBone>,
    mc: Lattice,
    /// Whether `mc` holds vertex v's compensated position this frame (the decoder
    /// computes it only where a patch predicts from it).
    mc_done: Vec<bool>,
    motions: Vec<RelMotion>,
}

impl Decoder {
    /// A decoder for streams coded with `setup`; it accepts a keyframe first.
    pub fn new(setup: Arc<GarmentSetup>) -> Self {
        let n = setup.vertex_count();
        let nb = setup.bones as usize;
        Self {
            stream_id: None,
            frame: None,
            q: vec![[0; 3]; n],
            bones: vec![[0; 7]; nb],
            q_new: vec![[0; 3]; n],
            bones_new: vec![[0; 7]; nb],
            mc: vec![[0; 3]; n],
            mc_done: vec![false; n],
            motions: vec![RelMotion::default(); nb],
            setup,
        }
    }

    /// Number of the last decoded frame (the only reference a delta may name).
    pub fn last_frame(&self) -> Option<u32> {
        self.frame
    }

    /// Forgets the stream (the next frame must be a keyframe).
    pub fn reset(&mut self) {
        self.frame = None;
        self.stream_id = None;
    }

    /// Decodes `bytes` and writes the positions (metres, 3 floats per vertex) into `out`.
    /// A delta whose reference is not the last decoded frame is refused with
    /// [`CodecError::MissingReference`]: ask the sender for a keyframe.
    pub fn decode(&mut self, bytes: &[u8], out: &mut [f32]) -> Result<FrameHeader, CodecError> {
        let h = FrameHeader::parse(bytes)?;
        let s = Arc::clone(&self.setup);
        if h.setup_id != s.id() {
            return Err(CodecError::WrongSetup {
                expected: s.id(),
                found: h.setup_id,
            });
        }
        if h.vertices as usize != s.vertex_count() || h.bones != s.bones {
            return Err(CodecError::Mismatch {
                what: "vertex/bone count of frame",
                expected: s.vertex_count() as u64,
                found: u64::from(h.vertices),
            });
        }
        if out.len() != 3 * s.vertex_count() {
            return Err(CodecError::Mismatch {
                what: "output floats",
                expected: 3 * s.vertex_count() as u64,
                found: out.len() as u64,
            });
        }
        if h.kind == FrameKind::Delta
            && (self.frame != Some(h.reference) || self.stream_id != Some(h.stream_id))
        {
            return Err(CodecError::MissingReference {
                needed: h.reference,
                have: self.frame,
            });
        }
        let mut dec = RangeDecoder::new(&bytes[FRAME_HEADER_LEN..])?;
        let mut m = Models::new();
        let limit = i64::from(LATTICE_LIMIT);
        let mut prev = [0i32; 3];
        let mut vertex = |dec: &mut RangeDecoder<'_>,
                          m: &mut Models,
                          q_new: &mut Lattice,
                          base: Option<&[[i32; 3]]>,
                          sp: u32,
                          v: usize|
         -> Result<(), CodecError> {
            let p = predict(v, &s.predictor[v], base, q_new, sp);
            let mut cur = [0i32; 3];
            for k in 0..3 {
                let e = dec.int(&mut m.coords[k], coord_context(&prev, &cur, k))?;
                cur[k] = e;
                let x = p[k] + i64::from(e);
                if x.abs() >= limit {
                    return Err(CodecError::Corrupt {
                        what: "position outside the lattice",
                    });
                }
                q_new[v][k] = x as i32;
            }
            prev = cur;
            Ok(())
        };
        match h.kind {
            FrameKind::Key => {
                decode_bones(&mut dec, &mut m, &mut self.bones_new, None)?;
                for &v in &s.order {
                    vertex(
                        &mut dec,
                        &mut m,
                        &mut self.q_new,
                        None,
                        SPATIAL_PARALLELOGRAM,
                        v as usize,
                    )?;
                }
            }
            FrameKind::Delta => {
                decode_bones(&mut dec, &mut m, &mut self.bones_new, Some(&self.bones))?;
                for (mo, (p, c)) in self
                    .motions
                    .iter_mut()
                    .zip(self.bones.iter().zip(&self.bones_new))
                {
                    *mo = RelMotion::new(p, c);
                }
                self.mc_done.fill(false);
                let mut last_mode = MODE_SKIP;
                for patch in s.order.chunks(PATCH_SIZE) {
                    let mode = m.decode_mode(&mut dec, last_mode)?;
                    if mode == MODE_SKIP {
                        for &v in patch {
                            self.q_new[v as usize] = self.q[v as usize];
                        }
                    } else {
                        let (b, sp) = split_mode(mode);
                        if b == BASE_SKINNED {
                            compensate_where_used(
                                &s,
                                &self.motions,
                                &self.q,
                                &mut self.mc,
                                &mut self.mc_done,
                                patch,
                            );
                        }
                        let base = if b == BASE_SKINNED { &self.mc } else { &self.q };
                        for &v in patch {
                            vertex(
                                &mut dec,
                                &mut m,
                                &mut self.q_new,
                                Some(base),
                                sp,
                                v as usize,
                            )?;
                        }
                    }
                    last_mode = mode;
                }
            }
        }
        dec.finish()?;
        let sum = checksum(&self.q_new);
        if sum != h.checksum {
            return Err(CodecError::ChecksumMismatch {
                expected: h.checksum,
                found: sum,
            });
        }
        write_out(&self.q_new, s.step, out)?;
        std::mem::swap(&mut self.q, &mut self.q_new);
        std::mem::swap(&mut self.bones, &mut self.bones_new);
        self.frame = Some(h.frame);
        self.stream_id = Some(h.stream_id);
        Ok(h)
    }
}
