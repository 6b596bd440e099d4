//! What the encoder ([`super::encoder`]) and the decoder ([`super::decoder`]) share:
//! the adaptive models and patch modes, prediction, motion compensation, the bones'
//! coding, the checksum. Both run this same prediction code on the same integers (the
//! encoder's reconstruction *is* its quantised input), so they agree bit for bit
//! forever: there is no drift to correct.

use super::CodecError;
use super::format::{ACTIVITY_CLASSES, PROB_INIT};
use super::format::{
    BASE_PREVIOUS, BASE_SKINNED, MODE_SKIP, NO_REF, SPATIAL_MEAN, SPATIAL_NONE,
    SPATIAL_PARALLELOGRAM, WORD_HASH_START, word_hash_step,
};
#[cfg(target_arch = "x86_64")]
use super::motion::compensate_vertex_avx2;
use super::motion::{
    IDENTITY_BONE, QBone, RelMotion, compensate_vertex, derived_w, predict_rotation,
    predict_translation, valid_bone,
};
use super::range::{IntModel, Prob, RangeDecoder, RangeEncoder, zero_context};
use super::setup::GarmentSetup;

pub(super) type Lattice = Vec<[i32; 3]>;

/// Adaptive models of one frame (reset at every frame, so frames decode independently
/// of the ones before their reference).
pub(super) struct Models {
    pub(super) coords: [IntModel; 3],
    pub(super) rotation: IntModel,
    /// w's difference from the w x, y, z imply (format version 4).
    pub(super) w: IntModel,
    pub(super) translation: IntModel,
    skip: [Prob; 2],
    skinned: [Prob; 2],
    spatial: [Prob; 3],
    parallelogram: [Prob; 3],
}

impl Models {
    pub(super) fn new() -> Self {
        Self {
            coords: Default::default(),
            rotation: IntModel::default(),
            w: IntModel::default(),
            translation: IntModel::default(),
            skip: [PROB_INIT; 2],
            skinned: [PROB_INIT; 2],
            spatial: [PROB_INIT; 3],
            parallelogram: [PROB_INIT; 3],
        }
    }

    /// Codes a patch mode; contexts are the previous patch's mode parts.
    pub(super) fn encode_mode(&mut self, enc: &mut RangeEncoder<'_>, last: u32, mode: u32) {
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

    pub(super) fn decode_mode(
        &mut self,
        dec: &mut RangeDecoder<'_>,
        last: u32,
    ) -> Result<u32, CodecError> {
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
pub(super) fn split_mode(mode: u32) -> (u32, u32) {
    if mode == MODE_SKIP {
        (BASE_PREVIOUS, SPATIAL_PARALLELOGRAM)
    } else {
        ((mode - 1) / 3, (mode - 1) % 3)
    }
}

/// The hint of one axis of a prediction from references with offsets `a` and `b`
/// (`mean`: the prediction is their rounded-down mean): activity class and odd sum
/// ([`super::format::HINTS`]).
#[inline(always)]
fn hint(a: i64, b: i64, mean: bool) -> u8 {
    // the bit length of |a − b| capped at 4 (compares and adds: no bit scan)
    const _: () = assert!(ACTIVITY_CLASSES == 5);
    let d = (a - b).unsigned_abs();
    let class = u8::from(d >= 1) + u8::from(d >= 2) + u8::from(d >= 4) + u8::from(d >= 8);
    2 * class + u8::from(mean && (a + b) & 1 != 0)
}

/// The offset of an earlier vertex `u` from its base.
#[inline(always)]
fn offset(u: u32, base: &[[i32; 3]], cur: &[[i32; 3]]) -> [i64; 3] {
    let (c, b) = (cur[u as usize], base[u as usize]);
    std::array::from_fn(|k| i64::from(c[k]) - i64::from(b[k]))
}

/// The rounded-down mean of two references' offsets and its hints.
#[inline(always)]
fn mean(oa: [i64; 3], ob: [i64; 3]) -> ([i64; 3], [u8; 3]) {
    (
        std::array::from_fn(|k| (oa[k] + ob[k]) >> 1),
        std::array::from_fn(|k| hint(oa[k], ob[k], true)),
    )
}

/// Prediction of vertex `v` from earlier-decoded vertices: `base[v]` plus, by spatial
/// predictor `SP`, nothing, the mean, or the parallelogram of the references' offsets
/// from their own bases; and per axis the
/// prediction hint its residual is coded with ([`super::format::HINTS`]). The
/// encoder's trials and the decoder's runs are instantiated per mode, so that nothing
/// is decided per vertex but which references exist.
#[inline(always)]
pub(super) fn predict_in<const SP: u32>(
    v: usize,
    refs: &[u32; 3],
    base: &[[i32; 3]],
    cur: &[[i32; 3]],
) -> ([i64; 3], [u8; 3]) {
    let off = |u: u32| offset(u, base, cur);
    let (s, h): ([i64; 3], [u8; 3]) = match SP {
        SPATIAL_NONE => ([0; 3], [0; 3]),
        SPATIAL_MEAN => match (refs[0], refs[1]) {
            (NO_REF, _) => ([0; 3], [0; 3]),
            (a, NO_REF) => (off(a), [0; 3]),
            (a, b) => mean(off(a), off(b)),
        },
        _ => match (refs[0], refs[1], refs[2]) {
            (NO_REF, _, _) => ([0; 3], [0; 3]),
            (a, NO_REF, _) => (off(a), [0; 3]),
            (a, b, NO_REF) => mean(off(a), off(b)),
            (a, b, c) => {
                let (oa, ob, oc) = (off(a), off(b), off(c));
                (
                    std::array::from_fn(|k| oa[k] + ob[k] - oc[k]),
                    std::array::from_fn(|k| hint(oa[k], ob[k], false)),
                )
            }
        },
    };
    let bv = base[v];
    (std::array::from_fn(|k| i64::from(bv[k]) + s[k]), h)
}

/// What the encoder and the decoder of a stream both hold, identically: the reference
/// frame (`q`, `bones`), the frame being coded (`q_new`, `bones_new`), and the reference
/// moved by the bones' motion between the two (`mc`), computed only where a patch
/// predicts from it.
pub(super) struct Frames {
    pub(super) q: Lattice,
    pub(super) bones: Vec<QBone>,
    pub(super) q_new: Lattice,
    pub(super) bones_new: Vec<QBone>,
    pub(super) mc: Lattice,
    /// Whether `mc` holds vertex v's compensated position this frame.
    mc_done: Vec<bool>,
    motions: Vec<RelMotion>,
    /// Whether the reference is the setup's keyframe base with identity bones (a
    /// keyframe) rather than `q` and `bones` (a delta).
    from_rest: bool,
    /// Whether the CPU has AVX2 and FMA (motion compensation then runs four lanes wide).
    wide: bool,
}

impl Frames {
    pub(super) fn new(vertices: usize, bones: usize) -> Self {
        Self {
            q: vec![[0; 3]; vertices],
            bones: vec![[0; 7]; bones],
            q_new: vec![[0; 3]; vertices],
            bones_new: vec![[0; 7]; bones],
            mc: vec![[0; 3]; vertices],
            mc_done: vec![false; vertices],
            motions: vec![RelMotion::default(); bones],
            from_rest: false,
            #[cfg(target_arch = "x86_64")]
            wide: std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma"),
            #[cfg(not(target_arch = "x86_64"))]
            wide: false,
        }
    }

    /// Starts a frame once `bones_new` is set: each bone's motion from the reference
    /// (`bones`, or for a keyframe, `from_rest`, the identity), and no vertex
    /// compensated yet.
    pub(super) fn start(&mut self, from_rest: bool) {
        self.from_rest = from_rest;
        for (m, (p, c)) in self
            .motions
            .iter_mut()
            .zip(self.bones.iter().zip(&self.bones_new))
        {
            *m = RelMotion::new(if from_rest { &IDENTITY_BONE } else { p }, c);
        }
        self.mc_done.fill(false);
    }

    /// The base a patch coded with base `b` is predicted from (the reference, or the
    /// reference moved by the bones' motion, compensated here for the patch's
    /// vertices and their predictor references), with the frame being coded.
    pub(super) fn patch_base<'a>(
        &'a mut self,
        setup: &'a GarmentSetup,
        patch: &[u32],
        b: u32,
    ) -> (&'a [[i32; 3]], &'a mut Lattice) {
        if b == BASE_SKINNED {
            self.compensate(setup, patch);
            (&self.mc, &mut self.q_new)
        } else if self.from_rest {
            (setup.keyframe_base(), &mut self.q_new)
        } else {
            (&self.q, &mut self.q_new)
        }
    }

    /// The reference positions of the frame being coded: `q`, or for a keyframe the
    /// setup's keyframe base.
    pub(super) fn reference<'a>(&'a self, setup: &'a GarmentSetup) -> &'a [[i32; 3]] {
        if self.from_rest {
            setup.keyframe_base()
        } else {
            &self.q
        }
    }

    /// Motion compensation of `vertices` and their predictor references into `mc`,
    /// each vertex once per frame.
    pub(super) fn compensate(&mut self, setup: &GarmentSetup, vertices: &[u32]) {
        #[cfg(target_arch = "x86_64")]
        if self.wide {
            // SAFETY: `wide` is set only where the CPU has AVX2 and FMA
            unsafe { self.compensate_wide(setup, vertices) };
            return;
        }
        self.compensate_in::<false>(setup, vertices);
    }

    /// [`Frames::compensate`] compiled for AVX2 and FMA (the same integers).
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn compensate_wide(&mut self, setup: &GarmentSetup, vertices: &[u32]) {
        self.compensate_in::<true>(setup, vertices);
    }

    #[inline(always)]
    fn compensate_in<const WIDE: bool>(&mut self, setup: &GarmentSetup, vertices: &[u32]) {
        let reference = if self.from_rest {
            setup.keyframe_base()
        } else {
            &self.q
        };
        for &v in vertices {
            let refs = &setup.predictor[v as usize];
            for u in std::iter::once(v).chain(refs.iter().copied()) {
                let u = u as usize;
                if u < self.mc_done.len() && !self.mc_done[u] {
                    let (j, w, p) = (&setup.joints[u], &setup.weights[u], reference[u]);
                    self.mc[u] = if WIDE {
                        #[cfg(target_arch = "x86_64")]
                        // SAFETY: the WIDE form runs only inside `compensate_wide`,
                        // which the caller has checked the CPU can run
                        unsafe {
                            compensate_vertex_avx2(&self.motions, j, w, p)
                        }
                        #[cfg(not(target_arch = "x86_64"))]
                        compensate_vertex(&self.motions, j, w, p)
                    } else {
                        compensate_vertex(&self.motions, j, w, p)
                    };
                    self.mc_done[u] = true;
                }
            }
        }
    }

    /// The coded frame becomes the reference.
    pub(super) fn commit(&mut self) {
        std::mem::swap(&mut self.q, &mut self.q_new);
        std::mem::swap(&mut self.bones, &mut self.bones_new);
    }
}

/// The frame checksum: [`word_hash`](super::format::word_hash) of the lattice
/// coordinates, vertex by vertex.
pub(super) fn checksum(q: &[[i32; 3]]) -> u32 {
    Checksum::new().finish(q)
}

/// [`checksum`] taken a vertex at a time, so that its chain of multiplications can run
/// alongside other work (the encoder's range coding) instead of after it.
pub(super) struct Checksum {
    h: u32,
    next: usize,
}

impl Checksum {
    pub(super) fn new() -> Self {
        Self {
            h: WORD_HASH_START,
            next: 0,
        }
    }

    /// Hashes the next vertex of `q`, if any is left.
    #[inline(always)]
    pub(super) fn step(&mut self, q: &[[i32; 3]]) {
        if let Some(p) = q.get(self.next) {
            self.h = p.iter().fold(self.h, |h, &c| word_hash_step(h, c as u32));
            self.next += 1;
        }
    }

    /// The checksum of all of `q` (the vertices not yet hashed, then the result).
    pub(super) fn finish(self, q: &[[i32; 3]]) -> u32 {
        q.get(self.next..)
            .unwrap_or_default()
            .iter()
            .flatten()
            .fold(self.h, |h, &c| word_hash_step(h, c as u32))
    }
}

/// The bones of a frame (format version 4): per bone in index order (parents before
/// children), x, y, z of its rotation, each the difference from its prediction
/// ([`predict_rotation`]), w's difference from the w they imply ([`derived_w`]; 0 but
/// near a half turn), and its translation, the difference from its prediction
/// ([`predict_translation`]). `parents` and `pivots` are the setup's skeleton.
pub(super) fn code_bones(
    enc: &mut RangeEncoder<'_>,
    m: &mut Models,
    bones: &[QBone],
    reference: Option<&[QBone]>,
    skeleton: Skeleton<'_>,
) {
    let mut prev = [0i32; 3];
    for (i, b) in bones.iter().enumerate() {
        let parent = skeleton.parent(i).and_then(|p| bones.get(p));
        let rot = predict_rotation(parent, skeleton.reference(reference, i));
        let t = predict_translation(b, parent, &skeleton.pivots[i], reference.map(|r| &r[i]));
        let w = b[3] - derived_w(b[0], b[1], b[2]);
        for k in 0..7 {
            let (model, slot, e) = match k {
                0..3 => (&mut m.rotation, 0, b[k] - rot[k]),
                3 => (&mut m.w, 2, w),
                _ => (&mut m.translation, 1, b[k] - t[k - 4]),
            };
            enc.int(model, zero_context(prev[slot]), e);
            prev[slot] = e;
        }
    }
}

pub(super) fn decode_bones(
    dec: &mut RangeDecoder<'_>,
    m: &mut Models,
    out: &mut [QBone],
    reference: Option<&[QBone]>,
    skeleton: Skeleton<'_>,
) -> Result<(), CodecError> {
    let corrupt = CodecError::Corrupt {
        what: "bone value out of range",
    };
    let mut prev = [0i32; 3];
    for i in 0..out.len() {
        let (done, rest) = out.split_at_mut(i);
        let b = &mut rest[0];
        // the setup guarantees a parent precedes its child
        let parent = skeleton.parent(i).and_then(|p| done.get(p));
        let rot = predict_rotation(parent, skeleton.reference(reference, i));
        for k in 0..3 {
            let e = dec.int(&mut m.rotation, zero_context(prev[0]))?;
            prev[0] = e;
            b[k] = rot[k].checked_add(e).ok_or(corrupt.clone())?;
        }
        // off-range x, y, z (refused by `valid_bone` below) give a derived w of 0
        let e = dec.int(&mut m.w, zero_context(prev[2]))?;
        prev[2] = e;
        b[3] = derived_w(b[0], b[1], b[2])
            .checked_add(e)
            .ok_or(corrupt.clone())?;
        let t = predict_translation(b, parent, &skeleton.pivots[i], reference.map(|r| &r[i]));
        for k in 0..3 {
            let e = dec.int(&mut m.translation, zero_context(prev[1]))?;
            prev[1] = e;
            b[4 + k] = t[k].checked_add(e).ok_or(corrupt.clone())?;
        }
        if !valid_bone(b) {
            return Err(corrupt);
        }
    }
    Ok(())
}

/// A setup's skeleton as [`code_bones`] reads it.
#[derive(Clone, Copy)]
pub(super) struct Skeleton<'a> {
    /// Per bone: its parent ([`NO_REF`] for a root), always an earlier bone.
    pub(super) parents: &'a [u32],
    /// Per bone: its rest joint, lattice steps.
    pub(super) pivots: &'a [[i32; 3]],
}

impl<'a> Skeleton<'a> {
    /// The skeleton `setup` carries.
    pub(super) fn of(setup: &'a GarmentSetup) -> Self {
        Self {
            parents: &setup.bone_parents,
            pivots: &setup.bone_pivots,
        }
    }

    fn parent(&self, i: usize) -> Option<usize> {
        self.parents
            .get(i)
            .filter(|&&p| p != NO_REF)
            .map(|&p| p as usize)
    }

    /// Bone `i`'s and its parent's reference bones.
    fn reference<'r>(
        &self,
        reference: Option<&'r [QBone]>,
        i: usize,
    ) -> Option<(&'r QBone, Option<&'r QBone>)> {
        let r = reference?;
        Some((r.get(i)?, self.parent(i).and_then(|p| r.get(p))))
    }
}

pub(super) fn write_out(q: &[[i32; 3]], step: f32, out: &mut [f32]) -> Result<(), CodecError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::format::HINTS;

    /// The activity class is the bit length of |a − b| capped at 4, and only a mean of
    /// an odd sum (whose floor drops half a step) is marked odd, negative sums included.
    #[test]
    fn hints_classify_the_references_spread_and_the_dropped_half_step() {
        for (a, b, class) in [
            (0i64, 0i64, 0u8),
            (5, 5, 0),
            (3, 4, 1),
            (-1, 1, 2),
            (0, 3, 2),
            (0, -4, 3),
            (7, 0, 3),
            (0, 8, 4),
            (-3, 0, 2),
            (-1000, 1001, 4),
        ] {
            let odd = u8::from((a + b).rem_euclid(2) == 1);
            assert_eq!(hint(a, b, false), 2 * class, "{a} {b}");
            assert_eq!(hint(a, b, true), 2 * class + odd, "{a} {b}");
            assert!(usize::from(hint(a, b, true)) < HINTS);
        }
    }

    /// Hints come with predictions from two references (a mean, or a parallelogram's
    /// a and b, never odd); a prediction from one reference or none has hint 0.
    #[test]
    fn predictions_carry_hints_only_from_two_references() {
        // vertex 3 predicted from 0, 1 (and 2); offsets from a zero base
        let cur = [[10, 0, 0], [13, 0, 4], [0, 0, 0], [0; 3]];
        let base = [[0; 3]; 4];
        let (p, h) = predict_in::<SPATIAL_MEAN>(3, &[0, 1, NO_REF], &base, &cur);
        assert_eq!(p, [11, 0, 2]); // floor(23 / 2), 0, 2
        assert_eq!(h, [2 * 2 + 1, 0, 2 * 3]);
        let (p, h) = predict_in::<SPATIAL_PARALLELOGRAM>(3, &[0, 1, 2], &base, &cur);
        assert_eq!(p, [23, 0, 4]);
        assert_eq!(h, [2 * 2, 0, 2 * 3]);
        let (_, h) = predict_in::<SPATIAL_NONE>(3, &[0, 1, 2], &base, &cur);
        assert_eq!(h, [0; 3]);
        let (p, h) = predict_in::<SPATIAL_MEAN>(3, &[0, NO_REF, NO_REF], &base, &cur);
        assert_eq!((p, h), ([10, 0, 0], [0; 3]));
    }
}
