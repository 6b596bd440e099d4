//! The encoder: chooses each patch's prediction mode and the lattice point coded for
//! each vertex (within the tolerance), then range-codes the residuals.

use std::sync::Arc;

use super::CodecError;
use super::coder::{
    Checksum, Frames, Lattice, Models, Skeleton, code_bones, split_mode, write_out,
};
use super::format::{
    BASE_PREVIOUS, BASE_SKINNED, FRAME_HEADER_LEN, FrameHeader, FrameKind, LATTICE_LIMIT,
    MODE_SKIP, MODES, NO_REF, PATCH_SIZE, SPATIAL_MEAN, SPATIAL_NONE, SPATIAL_PARALLELOGRAM,
    max_frame_bytes,
};
use super::motion::{BoneTransform, quantize_bone};
use super::range::{RangeEncoder, coord_context};
use super::setup::GarmentSetup;
use super::trial::trial;

/// Approximate cost in bits of coding the residual `e` rounds to (used only to choose
/// patch modes): a zero 1 bit, else 4 + 2 × its bit length, i.e. |e| < ½ costs 1, else
/// 6 + 2⌊log₂(|e| + ½)⌋, read from the exponent field of |e| + ½ without rounding or
/// branching.
#[inline]
fn approximate_cost(e: f64) -> u32 {
    let a = e.abs() + 0.5;
    let log2 = ((a.to_bits() >> 52) as i32 - 1023).max(0) as u32;
    if a < 1.0 { 1 } else { 6 + 2 * log2 }
}

/// How much work the encoder spends choosing the coded lattice points: the same
/// format, decoders and error bound either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Effort {
    /// A vertex whose prediction misses the tolerance r is coded 0.4 r from its true
    /// position towards the prediction: one rounding.
    #[default]
    Fast,
    /// Of the corners of the lattice cell around the true position that lie within the
    /// tolerance, the one with the cheapest residual (with a penalty for lying at the
    /// tolerance's edge) is coded: ~4 % fewer bits on walking cloth for ~25 % more
    /// encode time, and an RMS error of ~0.72 mm instead of ~0.65 (the maximum is the
    /// same; `bench codec`).
    Small,
    /// [`Effort::Fast`], and a patch that moved last frame keeps last frame's
    /// prediction mode without comparing the modes again, except every 4th frame
    /// (staggered over the patches): ~20 % less encode time
    /// for ~2 % more bits on walking cloth (`bench codec`), for servers that run out of
    /// CPU before bandwidth.
    Fastest,
}

/// Range-codes one vertex's residual `cur`, each axis in its context (the previous
/// vertex's residual `prev`, then `cur`; the axis's hint), and makes it `prev`.
#[inline(always)]
fn code_residual(
    enc: &mut RangeEncoder<'_>,
    m: &mut Models,
    prev: &mut [i32; 3],
    cur: &[i32; 3],
    hint: &[u8; 3],
) {
    for k in 0..3 {
        enc.int(
            &mut m.coords[k],
            coord_context(prev, cur, k, hint[k]),
            cur[k],
        );
    }
    *prev = *cur;
}

/// Open-loop estimates, in 1/16 bits, of coding `vertices` from base `base` with each
/// spatial predictor (indexed by `SPATIAL_*`): the references' offsets are taken from
/// the true positions instead of their coded points (so no vertex waits for another's
/// snapping), plus the variance the coded points add. A vertex whose expected squared
/// error is within the tolerance costs its three zero flags and a little more the
/// closer it is to the ball's edge (which breaks ties towards the predictor that will
/// stay inside longer); one outside costs its rounded error's bits.
#[inline]
fn estimate(
    setup: &GarmentSetup,
    vertices: &[u32],
    base: &[[i32; 3]],
    target: &[[f64; 3]],
    r: f64,
) -> [u32; 3] {
    let off = |u: u32| -> [f64; 3] {
        let (x, b) = (target[u as usize], base[u as usize]);
        std::array::from_fn(|k| x[k] - f64::from(b[k]))
    };
    let r2 = r * r;
    // a coded reference lies anywhere in its tolerance ball: its offset carries an
    // error of variance 3r²/5, which the mean halves and the parallelogram triples
    let noise = [0.0, 0.3 * r2, 1.8 * r2];
    let sixteenths_per_r2 = 16.0 / r2;
    let vertex_cost = |e: [f64; 3], noise: f64| -> u32 {
        let l2 = e[0] * e[0] + e[1] * e[1] + e[2] * e[2] + noise;
        let inside = 48 + (l2 * sixteenths_per_r2) as u32;
        let outside = 16 * e.iter().map(|&e| approximate_cost(e)).sum::<u32>();
        // both computed and one picked: which one is as good as a coin toss
        if l2 <= r2 { inside } else { outside }
    };
    let mut bits = [0u32; 3];
    for &v in vertices {
        let v = v as usize;
        let (x, bv) = (target[v], base[v]);
        let e: [f64; 3] = std::array::from_fn(|k| f64::from(bv[k]) - x[k]);
        let refs = &setup.predictor[v];
        let zero = [0.0; 3];
        let oa = if refs[0] == NO_REF {
            zero
        } else {
            off(refs[0])
        };
        let (mean, para) = match (refs[0], refs[1], refs[2]) {
            (NO_REF, _, _) => (zero, zero),
            (_, NO_REF, _) => (oa, oa),
            (_, b, c) => {
                let ob = off(b);
                let mean = std::array::from_fn(|k| (oa[k] + ob[k]) * 0.5);
                if c == NO_REF {
                    (mean, mean)
                } else {
                    let oc = off(c);
                    (mean, std::array::from_fn(|k| oa[k] + ob[k] - oc[k]))
                }
            }
        };
        bits[SPATIAL_NONE as usize] += vertex_cost(e, noise[0]);
        bits[SPATIAL_MEAN as usize] +=
            vertex_cost(std::array::from_fn(|k| e[k] + mean[k]), noise[1]);
        bits[SPATIAL_PARALLELOGRAM as usize] +=
            vertex_cost(std::array::from_fn(|k| e[k] + para[k]), noise[2]);
    }
    bits
}

/// Vertices of a patch (every ⌈64/16⌉-th) on which the encoder compares prediction
/// modes; 32 would save another ~1 % of bits for ~25 % more encode time.
const MODE_PROBE: usize = 16;

/// With [`Effort::Fastest`], the frames a moving patch's mode is chosen afresh: every
/// `MODE_REFRESH`-th (the patches staggered). Walking cloth, 12 500 vertices, 30 fps
/// (`bench codec`, mode chosen every frame = 1): 2 → +1 % bits, −12 % encode time;
/// 4 → +2 %, −20 %; 8 → +3 %, −23 %.
const MODE_REFRESH: usize = 4;

/// Encodes one garment stream. Owns the reconstruction (the last coded frame), so a
/// delta is always predicted from exactly what every in-step decoder holds.
pub struct Encoder {
    setup: Arc<GarmentSetup>,
    stream_id: u32,
    frame: u32,
    has_frame: bool,
    radius: f64,
    effort: Effort,
    target: Vec<[f64; 3]>,
    f: Frames,
    /// Per vertex in traversal order, the residual the last trial coded (what the
    /// range coder writes, in that order).
    residual: Lattice,
    /// The prediction hints of `residual`'s axes (the contexts they are coded in).
    hints: Vec<[u8; 3]>,
    /// Per patch, the mode of the last delta (what `Effort::Fastest` keeps).
    modes: Vec<u32>,
    /// Per patch, the mode of the frame being coded when it is a keyframe (kept apart
    /// so that the deltas around a keyframe follow each other's modes).
    key_modes: Vec<u32>,
    /// Whether the trials run with the three axes of a vertex in SIMD lanes (AVX2;
    /// the same points as the scalar code).
    wide: bool,
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
            effort: Effort::default(),
            target: vec![[0.0; 3]; n],
            f: Frames::new(n, nb),
            residual: vec![[0; 3]; n],
            hints: vec![[0; 3]; n],
            modes: vec![0; n.div_ceil(PATCH_SIZE)],
            key_modes: vec![0; n.div_ceil(PATCH_SIZE)],
            #[cfg(target_arch = "x86_64")]
            wide: std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(not(target_arch = "x86_64"))]
            wide: false,
            setup,
        }
    }

    /// Runs the trials with the scalar code even where the CPU has AVX2 (tests compare
    /// the two).
    #[cfg(test)]
    pub(crate) fn set_scalar(&mut self) {
        self.wide = false;
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

    /// Sets how hard the encoder works for fewer bits (see [`Effort`]); takes effect
    /// from the next frame, and any frame decodes the same whichever was used.
    pub fn set_effort(&mut self, effort: Effort) {
        self.effort = effort;
    }

    /// The encoder's [`Effort`].
    pub fn effort(&self) -> Effort {
        self.effort
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
        write_out(&self.f.q, self.setup.step, out)
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
        if bones.len() != self.f.bones.len() {
            return Err(CodecError::Mismatch {
                what: "bones",
                expected: self.f.bones.len() as u64,
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
        for (qb, b) in self.f.bones_new.iter_mut().zip(bones) {
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
        self.f.commit();
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
        for (t, q) in self.target.iter_mut().zip(&self.f.q) {
            *t = q.map(f64::from);
        }
        self.f.bones_new.copy_from_slice(&self.f.bones);
        Ok(self.code_key(self.frame, 0.0, out))
    }

    /// Writes the header of the frame in `out` (`sum`: the [`checksum`] of `q_new`).
    fn finish(
        &self,
        kind: FrameKind,
        frame: u32,
        reference: u32,
        sum: u32,
        out: &mut [u8],
    ) -> FrameHeader {
        let h = FrameHeader {
            kind,
            setup_id: self.setup.id(),
            stream_id: self.stream_id,
            frame,
            reference,
            vertices: self.setup.vertex_count() as u32,
            bones: self.f.bones.len() as u32,
            checksum: sum,
            payload_len: (out.len() - FRAME_HEADER_LEN) as u32,
        };
        let mut head = [0u8; FRAME_HEADER_LEN];
        h.write(&mut head);
        out[..FRAME_HEADER_LEN].copy_from_slice(&head);
        debug_assert!(out.len() <= max_frame_bytes(self.setup.vertex_count(), self.f.bones.len()));
        h
    }

    /// Codes `target`/`bones_new` into `q_new` as a keyframe with snapping radius `r`:
    /// predicted as a delta is, from the setup's rest shape (or zeros) at identity
    /// bones (format version 5).
    fn code_key(&mut self, frame: u32, r: f64, out: &mut Vec<u8>) -> FrameHeader {
        std::mem::swap(&mut self.modes, &mut self.key_modes);
        let h = self.code_predicted(FrameKind::Key, frame, r, out);
        std::mem::swap(&mut self.modes, &mut self.key_modes);
        h
    }

    /// The prediction mode for a patch that moved, `previous` its mode last frame.
    ///
    /// Every mode is estimated, open loop, on [`MODE_PROBE`] vertices spread over the
    /// patch (one pass per base, all three spatial predictors at once); the cheapest
    /// wins, ties going to `previous`, then to the lower mode. (Estimating from true
    /// positions rather than coding trial runs is faster and picks modes that cost 3–8 %
    /// fewer bits on walking cloth: it ranks predictors by how well they follow the
    /// motion, not by where earlier snapping happened to leave the references.)
    fn choose_mode(&mut self, patch: &[u32], previous: u32) -> u32 {
        let s = &*self.setup;
        let stride = patch.len().div_ceil(MODE_PROBE).max(1);
        let mut sample = [0u32; MODE_PROBE];
        let mut ns = 0;
        for &v in patch.iter().step_by(stride) {
            sample[ns] = v;
            ns += 1;
        }
        let probe = &sample[..ns];
        let mut costs = [u32::MAX; MODES as usize];
        for b in [BASE_PREVIOUS, BASE_SKINNED] {
            if b == BASE_SKINNED {
                self.f.compensate(s, probe);
            }
            let base = if b == BASE_SKINNED {
                &self.f.mc[..]
            } else {
                self.f.reference(s)
            };
            let c = estimate(s, probe, base, &self.target, self.radius);
            costs[1 + 3 * b as usize..4 + 3 * b as usize].copy_from_slice(&c);
        }
        let mut best = (costs[previous as usize], previous);
        for mode in 1..MODES {
            if costs[mode as usize] < best.0 {
                best = (costs[mode as usize], mode);
            }
        }
        best.1
    }

    /// Codes `target`/`bones_new` into `q_new` as a delta against `q`/`bones`.
    fn code_delta(&mut self, frame: u32, out: &mut Vec<u8>) -> FrameHeader {
        self.code_predicted(FrameKind::Delta, frame, self.radius, out)
    }

    /// Codes `target`/`bones_new` into `q_new` with snapping radius `r`: a delta from
    /// `q`/`bones`, or a keyframe from the setup's keyframe base at identity bones.
    fn code_predicted(
        &mut self,
        kind: FrameKind,
        frame: u32,
        r: f64,
        out: &mut Vec<u8>,
    ) -> FrameHeader {
        let key = kind == FrameKind::Key;
        self.f.start(key);
        let setup = Arc::clone(&self.setup);
        let s = &*setup;
        // choose a mode per patch, fixing its vertices' coded points as we go
        for (pi, patch) in s.order.chunks(PATCH_SIZE).enumerate() {
            let reference = self.f.reference(s);
            let still = patch.iter().all(|&v| {
                let (q, x) = (reference[v as usize], self.target[v as usize]);
                (0..3)
                    .map(|k| (f64::from(q[k]) - x[k]).powi(2))
                    .sum::<f64>()
                    <= r * r
            });
            if still {
                self.modes[pi] = MODE_SKIP;
                let (reference, q_new) = self.f.patch_base(s, patch, BASE_PREVIOUS);
                for &v in patch {
                    q_new[v as usize] = reference[v as usize];
                }
                continue;
            }
            // with Effort::Fastest a patch that moved last frame mostly keeps its mode
            // (a keyframe's modes are all chosen afresh)
            let previous = self.modes[pi];
            let keep = self.effort == Effort::Fastest
                && !key
                && previous != MODE_SKIP
                && !(frame as usize + pi).is_multiple_of(MODE_REFRESH);
            let mode = if keep {
                previous
            } else {
                self.choose_mode(patch, previous)
            };
            let (b, sp) = split_mode(mode);
            let (base, q_new) = self.f.patch_base(s, patch, b);
            trial(
                s,
                patch,
                base,
                sp,
                &self.target,
                r,
                self.effort,
                self.wide,
                q_new,
                &mut self.residual[pi * PATCH_SIZE..pi * PATCH_SIZE + patch.len()],
                &mut self.hints[pi * PATCH_SIZE..pi * PATCH_SIZE + patch.len()],
            );
            self.modes[pi] = mode;
        }
        out.clear();
        out.resize(FRAME_HEADER_LEN, 0);
        let mut m = Models::new();
        let mut enc = RangeEncoder::new(out);
        // (a keyframe's bones are predicted as from identity bones: from their parents
        // alone)
        code_bones(
            &mut enc,
            &mut m,
            &self.f.bones_new,
            (!key).then_some(&self.f.bones[..]),
            Skeleton::of(s),
        );
        let mut prev = [0i32; 3];
        let mut last_mode = MODE_SKIP;
        // the checksum's serial chain rides along with the range coder's, a vertex (in
        // index order) per coded vertex
        let mut sum = Checksum::new();
        for (pi, patch) in s.order.chunks(PATCH_SIZE).enumerate() {
            let mode = self.modes[pi];
            m.encode_mode(&mut enc, last_mode, mode);
            if mode != MODE_SKIP {
                let span = pi * PATCH_SIZE..pi * PATCH_SIZE + patch.len();
                for (cur, hint) in self.residual[span.clone()].iter().zip(&self.hints[span]) {
                    code_residual(&mut enc, &mut m, &mut prev, cur, hint);
                    sum.step(&self.f.q_new);
                }
            }
            last_mode = mode;
        }
        enc.finish();
        let sum = sum.finish(&self.f.q_new);
        let reference = if key { frame } else { self.frame };
        self.finish(kind, frame, reference, sum, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The branch-free cost reads the same bit length as rounding and counting.
    #[test]
    fn approximate_cost_matches_the_rounded_residual_bit_length() {
        let exact = |e: f64| {
            let n = e.round_ties_even() as i64;
            if n == 0 {
                1
            } else {
                4 + 2 * (64 - n.unsigned_abs().leading_zeros())
            }
        };
        for i in -40_000..=40_000 {
            // steps of 0.0123 cross every rounding boundary up to ±492 from both sides
            let e = f64::from(i) * 0.0123;
            if (e.abs().fract() - 0.5).abs() < 1e-9 {
                continue; // exact ties: either neighbour is a fair estimate
            }
            assert_eq!(approximate_cost(e), exact(e), "e = {e}");
        }
        assert_eq!(approximate_cost(1e6), exact(1e6));
    }
}
