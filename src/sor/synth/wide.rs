//! The AVX2 + FMA parts of synthesis, used only where the CPU has both (see
//! [`super::SynthParams::wide`]): the record sums of the vertex loop (two of a record's
//! 16-byte lanes per instruction), the body posing for penetration handling, and Θ with
//! the per-region distances eight examples abreast. Each equals its SSE2 counterpart in
//! `synth.rs` up to rounding (unit tests there).

use std::arch::x86_64::{
    __m128, __m256, _CMP_GT_OQ, _CMP_LT_OQ, _mm_add_ps, _mm_fmadd_ps, _mm_mul_ps, _mm_set1_ps,
    _mm_setzero_ps, _mm_shuffle_ps, _mm256_add_ps, _mm256_and_ps, _mm256_blendv_ps,
    _mm256_castps256_ps128, _mm256_cmp_ps, _mm256_div_ps, _mm256_extractf128_ps, _mm256_fmadd_ps,
    _mm256_fnmadd_ps, _mm256_load_ps, _mm256_max_ps, _mm256_min_ps, _mm256_mul_ps, _mm256_set1_ps,
    _mm256_setzero_ps, _mm256_sqrt_ps, _mm256_store_ps, _mm256_sub_ps, _mm256_xor_ps,
};
use std::f32::consts::FRAC_PI_2;

use glam::{Mat3A, Quat, Vec3, Vec3A, Vec4};

use super::{DOF_COUNT, Database, InputFrames, JOINT_COUNT, Pose, Sums};
use crate::body::{MAX_INFLUENCES, SkinWeights, normalize_fast};
use crate::skeleton::ATAN_COEFFS;
use crate::sor::local::{LocalExamples, LocalVertex};

// the lanes summed here, as offsets in floats: near[0..4] at 0, tau[0..3] at 16,
// tau_offset at 28; records 32-byte aligned
const _: () = {
    assert!(std::mem::offset_of!(LocalVertex, near) == 0);
    assert!(std::mem::offset_of!(LocalVertex, tau) == 64);
    assert!(std::mem::offset_of!(LocalVertex, tau_offset) == 112);
    assert!(std::mem::align_of::<LocalVertex>() == 32);
    assert!(std::mem::size_of::<LocalVertex>() == 160);
};

/// Most regions the AVX2 distances handle (more use the SSE2 ones).
pub(super) const MAX_REGIONS: usize = 16;

/// Eight lanes of f32, 32-byte aligned.
#[derive(Clone, Copy, Default)]
#[repr(C, align(32))]
struct Lanes([f32; 8]);

/// The examples eight abreast (the last group padded with identity rotations and
/// zero weights): per group and joint the conjugated rotation's x, y, z, w, and
/// per group, region and degree of freedom the distance weight U (SOR Eq. 9).
pub(super) struct Examples8 {
    examples: usize,
    regions: usize,
    rotations: Vec<Lanes>,
    weights: Vec<Lanes>,
}

impl Examples8 {
    /// `distance_weights`: per example, `regions × 66` (the synthesizer's, see
    /// [`super::Distance`]).
    pub(super) fn new(db: &Database, distance_weights: &[f32]) -> Self {
        let (examples, regions) = (db.examples.len(), db.region_count());
        let groups = examples.div_ceil(8);
        let mut rotations = vec![Lanes::default(); groups * JOINT_COUNT * 4];
        let mut weights = vec![Lanes::default(); groups * regions * DOF_COUNT];
        for g in 0..groups {
            for lane in 0..8 {
                let ex = db.examples.get(8 * g + lane);
                for j in 0..JOINT_COUNT {
                    let q = ex.map_or(Quat::IDENTITY, |e| e.pose.rotations[j].conjugate());
                    for (c, v) in q.to_array().into_iter().enumerate() {
                        rotations[(g * JOINT_COUNT + j) * 4 + c].0[lane] = v;
                    }
                }
                for r in 0..regions {
                    for m in 0..DOF_COUNT {
                        weights[(g * regions + r) * DOF_COUNT + m].0[lane] = ex.map_or(0.0, |_| {
                            distance_weights[((8 * g + lane) * regions + r) * DOF_COUNT + m]
                        });
                    }
                }
            }
        }
        Self {
            examples,
            regions,
            rotations,
            weights,
        }
    }

    /// D_g^J = Σ_m U^J_{g,m} Θ_m(p^J, `pose`)² (SOR Eq. 9) into `dist` (region-major,
    /// `regions × examples`), eight examples per instruction: the same Θ as
    /// [`crate::skeleton::theta_into`] with its polynomial arctangent, without
    /// branches, in a different rounding.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn distances(&self, pose: &Pose, dist: &mut [f64]) {
        let regions = self.regions;
        let sign = _mm256_set1_ps(-0.0);
        let ld = |l: &Lanes| -> __m256 {
            // SAFETY: a `Lanes` is 8 floats, 32-byte aligned
            unsafe { _mm256_load_ps(l.0.as_ptr()) }
        };
        for g in 0..self.examples.div_ceil(8) {
            let mut sums = [_mm256_setzero_ps(); MAX_REGIONS];
            let sums = &mut sums[..regions];
            for j in 0..JOINT_COUNT {
                let [bx, by, bz, bw] = pose.rotations[j].to_array().map(|c| _mm256_set1_ps(c));
                let a = &self.rotations[(g * JOINT_COUNT + j) * 4..][..4];
                let (ax, ay, az, aw) = (ld(&a[0]), ld(&a[1]), ld(&a[2]), ld(&a[3]));
                // q = a · b (Hamilton product, as glam's `Quat * Quat`)
                let mul = _mm256_mul_ps;
                let fma = _mm256_fmadd_ps;
                let fnma = _mm256_fnmadd_ps;
                let w = fnma(az, bz, fnma(ay, by, fnma(ax, bx, mul(aw, bw))));
                let x = fnma(az, by, fma(ay, bz, fma(ax, bw, mul(aw, bx))));
                let y = fma(az, bx, fma(ay, bw, fnma(ax, bz, mul(aw, by))));
                let z = fma(az, bw, fnma(ay, bx, fma(ax, by, mul(aw, bz))));
                // the shorter arc: negate q where w < 0
                let flip = _mm256_and_ps(w, sign);
                let (x, y, z) = (
                    _mm256_xor_ps(x, flip),
                    _mm256_xor_ps(y, flip),
                    _mm256_xor_ps(z, flip),
                );
                let w = _mm256_xor_ps(w, flip);
                let s = _mm256_sqrt_ps(fma(z, z, fma(y, y, mul(x, x))));
                // atan2(s, w), s, w ≥ 0: atan of the smaller over the larger
                let (lo, hi) = (_mm256_min_ps(s, w), _mm256_max_ps(s, w));
                let r = _mm256_div_ps(lo, _mm256_max_ps(hi, _mm256_set1_ps(f32::MIN_POSITIVE)));
                let t = mul(r, r);
                let mut p = _mm256_set1_ps(ATAN_COEFFS[7]);
                for c in ATAN_COEFFS[..7].iter().rev() {
                    p = fma(p, t, _mm256_set1_ps(*c));
                }
                let at = mul(r, p);
                let steep = _mm256_cmp_ps::<_CMP_GT_OQ>(s, w);
                let at = _mm256_blendv_ps(at, _mm256_sub_ps(_mm256_set1_ps(FRAC_PI_2), at), steep);
                // 2·atan2(s, w)/s, or 2 for (nearly) no rotation
                let scale = _mm256_div_ps(
                    _mm256_add_ps(at, at),
                    _mm256_max_ps(s, _mm256_set1_ps(1e-12)),
                );
                let tiny = _mm256_cmp_ps::<_CMP_LT_OQ>(s, _mm256_set1_ps(1e-12));
                let scale = _mm256_blendv_ps(scale, _mm256_set1_ps(2.0), tiny);
                let th2 = [x, y, z].map(|c| {
                    let th = mul(c, scale);
                    mul(th, th)
                });
                for (r, sum) in sums.iter_mut().enumerate() {
                    let u = &self.weights[(g * regions + r) * DOF_COUNT + 3 * j..][..3];
                    *sum = fma(ld(&u[0]), th2[0], *sum);
                    *sum = fma(ld(&u[1]), th2[1], *sum);
                    *sum = fma(ld(&u[2]), th2[2], *sum);
                }
            }
            for (r, sum) in sums.iter().enumerate() {
                let mut lanes = Lanes::default();
                // SAFETY: a `Lanes` is 8 floats, 32-byte aligned
                unsafe { _mm256_store_ps(lanes.0.as_mut_ptr(), *sum) };
                let n = (self.examples - 8 * g).min(8);
                for (lane, d) in lanes.0[..n].iter().enumerate() {
                    dist[r * self.examples + 8 * g + lane] = f64::from(*d);
                }
            }
        }
    }
}

/// A bone's skinning transform (rest → posed) as four 16-byte lanes: the rotation's
/// columns and the translation (w unused), 32-byte aligned so that two lanes load
/// as one 256-bit register.
#[derive(Clone, Copy)]
#[repr(C, align(32))]
pub(super) struct BoneLanes(pub [Vec4; 4]);

/// Poses the body vertices `used` (LBS of their rest positions and normals, the
/// normals renormalised) into `out`, as [`crate::body::LbsMatrices::apply_with_normal`]
/// does, blending each vertex's bone transforms two lanes per fused multiply-add.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn pose_body(
    bones: &[BoneLanes; JOINT_COUNT],
    (positions, normals, skin): (&[Vec3], &[Vec3], &SkinWeights),
    used: &[u32],
    out: &mut [[Vec3A; 2]],
) {
    for &b in used {
        let b = b as usize;
        let (joints, weights) = (&skin.joints[b], &skin.weights[b]);
        // (x_axis, y_axis), (z_axis, translation)
        let (mut a0, mut a1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        for k in 0..MAX_INFLUENCES {
            let w = weights[k];
            if w != 0.0 {
                let m = &bones[joints[k] as usize];
                let p = m.0.as_ptr().cast::<f32>();
                let wv = _mm256_set1_ps(w);
                // SAFETY: `p` points to 16 floats, 32-byte aligned
                unsafe {
                    a0 = _mm256_fmadd_ps(_mm256_load_ps(p), wv, a0);
                    a1 = _mm256_fmadd_ps(_mm256_load_ps(p.add(8)), wv, a1);
                }
            }
        }
        let lo = |v: __m256| Vec3A::from(_mm256_castps256_ps128(v));
        let hi = |v: __m256| Vec3A::from(_mm256_extractf128_ps::<1>(v));
        let m = Mat3A::from_cols(lo(a0), hi(a0), lo(a1));
        let p = m * Vec3A::from(positions[b]) + hi(a1);
        let n = normalize_fast(m * Vec3A::from(normals[b]));
        out[b] = [p, n];
    }
}

/// [`super::Synthesizer::sums`], the same sums in a different rounding (fused).
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
#[inline]
pub(super) unsafe fn sums(
    local: &LocalExamples,
    i: usize,
    slots: &[(u32, f32)],
    (rot, pos): InputFrames<'_>,
) -> Sums {
    // near[0..2], near[2..4], tau[0..2], (tau[2], tau_offset)
    let mut acc: [__m256; 4] = [_mm256_setzero_ps(); 4];
    let mut remote = _mm_setzero_ps();
    for &(j, w) in slots {
        let lv = local.get(j as usize, i);
        let p = (lv as *const LocalVertex).cast::<f32>();
        let wv = _mm256_set1_ps(w);
        // SAFETY: `p` points to a whole, 32-byte aligned record of 40 floats; the
        // loads read floats 0..32 in aligned groups of 8 (layout asserted above).
        unsafe {
            for (g, a) in acc.iter_mut().enumerate() {
                *a = _mm256_fmadd_ps(_mm256_load_ps(p.add(8 * g)), wv, *a);
            }
        }
        // α ℓ_r w rotated by the remote bone r, plus α w c_r (r = JOINT_COUNT: zeros)
        let r = (lv.remote_bone as usize).min(JOINT_COUNT);
        let (m, c) = (&rot[r], pos[r]);
        let rw = _mm_mul_ps(lv.remote.into(), _mm_set1_ps(w));
        let lane = |k: i32| -> __m128 {
            match k {
                0 => _mm_shuffle_ps::<0x00>(rw, rw),
                1 => _mm_shuffle_ps::<0x55>(rw, rw),
                2 => _mm_shuffle_ps::<0xAA>(rw, rw),
                _ => _mm_shuffle_ps::<0xFF>(rw, rw),
            }
        };
        let t = _mm_fmadd_ps(c.into(), lane(3), _mm_mul_ps(m.x_axis.into(), lane(0)));
        let t = _mm_fmadd_ps(m.y_axis.into(), lane(1), t);
        let t = _mm_fmadd_ps(m.z_axis.into(), lane(2), t);
        remote = _mm_add_ps(remote, t);
    }
    let lo = |v: __m256| Vec4::from(_mm256_castps256_ps128(v));
    let hi = |v: __m256| Vec4::from(_mm256_extractf128_ps::<1>(v));
    Sums {
        near: [lo(acc[0]), hi(acc[0]), lo(acc[1]), hi(acc[1])],
        tau: [lo(acc[2]), hi(acc[2]), lo(acc[3])],
        tau_offset: hi(acc[3]),
        remote: Vec3A::from(remote),
    }
}
