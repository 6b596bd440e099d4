//! Skinning-based motion compensation on the integer lattice: bones quantised to
//! fixed point, the relative motion of each bone between the reference frame and the
//! current one, and each vertex moved by its skin-weighted blend of those motions.
//! All products stay below 2^48, so JavaScript doubles compute the same integers.

use super::CodecError;
use super::format::{LATTICE_LIMIT, ROT_BITS, WEIGHT_ONE};

/// A bone's skinning transform (bind pose → current pose) in avatar-local coordinates.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BoneTransform {
    /// Unit quaternion, (x, y, z, w).
    pub rotation: [f32; 4],
    /// Translation, metres.
    pub translation: [f32; 3],
}

impl BoneTransform {
    /// The identity.
    pub const IDENTITY: Self = Self {
        rotation: [0.0, 0.0, 0.0, 1.0],
        translation: [0.0; 3],
    };
}

/// A quantised bone: quaternion (x, y, z, w) in units of 2^-14 with w ≥ 0, translation
/// in lattice steps.
pub(crate) type QBone = [i32; 7];

const ONE: i64 = 1 << ROT_BITS;
const HALF: i64 = 1 << (ROT_BITS - 1);

/// The quantised identity transform: the bones of a keyframe's reference (the setup's
/// rest shape is at the bind pose).
pub(crate) const IDENTITY_BONE: QBone = [0, 0, 0, ONE as i32, 0, 0, 0];

/// Quantises a bone transform; refuses non-finite or degenerate rotations and
/// translations outside the lattice.
pub(crate) fn quantize_bone(b: &BoneTransform, step: f32) -> Result<QBone, CodecError> {
    let q = b.rotation;
    let len = q.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    if !(len.is_finite() && len > 1e-6) {
        return Err(CodecError::Invalid {
            what: "bone rotation (not a finite non-zero quaternion)",
        });
    }
    let sign = if q[3] < 0.0 { -1.0 } else { 1.0 };
    let mut out = [0i32; 7];
    for i in 0..4 {
        out[i] = (sign * f64::from(q[i]) / len * ONE as f64).round() as i32;
    }
    // w as x, y, z give it unless that is more than W_SLACK off (near a half turn): the
    // stream then carries the difference
    let derived = derived_w(out[0], out[1], out[2]);
    if (out[3] - derived).abs() <= W_SLACK {
        out[3] = derived;
    }
    for i in 0..3 {
        let t = f64::from(b.translation[i]) / f64::from(step);
        if !(t.is_finite() && t.abs() < f64::from(LATTICE_LIMIT)) {
            return Err(CodecError::Invalid {
                what: "bone translation (not finite or outside the lattice)",
            });
        }
        out[4 + i] = t.round() as i32;
    }
    Ok(out)
}

/// How far, in units of 2^-14, the encoder lets a bone's w lie from [`derived_w`] of its
/// x, y, z before it sends the difference (an encoder choice, not part of the format):
/// within it the rotation is off by at most ~3.5e-4 rad and the difference is 0, which
/// costs a fraction of a bit. For turns up to ~130° the derived w is always within it
/// (1 would send differences from ~90°, 3 allow ~4.5e-4 rad).
const W_SLACK: i32 = 2;

/// The w a quantised quaternion's x, y, z imply (units 2^-14): ⌊√(2^28 − x² − y² −
/// z²)⌋, 0 where x² + y² + z² ≥ 2^28. A frame codes w as its difference from this
/// (format version 4; version 3 coded no w); w ≥ 0 always.
pub(crate) fn derived_w(x: i32, y: i32, z: i32) -> i32 {
    let s = [x, y, z]
        .iter()
        .map(|&c| i64::from(c) * i64::from(c))
        .sum::<i64>();
    // a decoded x, y, z is below 2^28 in magnitude (prediction below 2^18 plus a
    // residual below 2^27), so the squares' sum fits an i64; the root lies in [0, 2^14]
    (ONE * ONE - s).max(0).isqrt() as i32
}

/// Quaternion product a ⊗ b of quantised quaternions (x, y, z, w; units 2^-14), each
/// component's sum rounded by `round` ([`round_shift`] in the format). Inputs below 2^17
/// in magnitude keep every sum below 2^37. Generic so that a test can run the same
/// product in 128 bits.
fn quat_mul<T>(a: [T; 4], b: [T; 4], round: impl Fn(T) -> T) -> [T; 4]
where
    T: Copy + std::ops::Add<Output = T> + std::ops::Sub<Output = T> + std::ops::Mul<Output = T>,
{
    let [ax, ay, az, aw] = a;
    let [bx, by, bz, bw] = b;
    [
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
        aw * bw - ax * bx - ay * by - az * bz,
    ]
    .map(round)
}

/// Where a bone's x, y, z are predicted from (format version 3): `parent` its
/// parent's bone in this frame, `reference` its own and its parent's in the reference
/// frame (delta frames).
///
/// - A bone with a parent, in a delta frame: the parent's motion since the reference
///   applied to the bone's reference rotation, q_p ⊗ q̄_p^ref ⊗ q^ref (the bone kept
///   its rotation relative to its parent), negated where its w came out negative.
/// - With a parent, in a keyframe: the parent's rotation (the joint at rest).
/// - A root: its reference rotation, or the identity in a keyframe.
pub(crate) fn predict_rotation(
    parent: Option<&QBone>,
    reference: Option<(&QBone, Option<&QBone>)>,
) -> [i32; 3] {
    let quat = |b: &QBone| [b[0], b[1], b[2], b[3]].map(i64::from);
    let q = match (parent, reference) {
        (Some(p), Some((r, Some(rp)))) => {
            let conj = [-rp[0], -rp[1], -rp[2], rp[3]].map(i64::from);
            let m = quat_mul(quat_mul(quat(p), conj, round_shift), quat(r), round_shift);
            if m[3] < 0 { m.map(|c| -c) } else { m }
        }
        (Some(p), _) => quat(p),
        (None, Some((r, _))) => quat(r),
        (None, None) => [0; 4],
    };
    // below 2^18 in magnitude (two products of values at most 2^15), so exact in i32
    [q[0], q[1], q[2]].map(|c| c as i32)
}

/// Where a bone's translation (lattice steps) is predicted from (format version 3):
/// for a bone with a parent, the translation that keeps its rest joint `pivot`
/// (lattice steps) where the parent carries it: t = t_p + (R_p − R) · pivot, with R
/// this frame's rotation of the bone (already decoded) and R_p, t_p its parent's; for
/// a root, its reference translation (0 in a keyframe).
pub(crate) fn predict_translation(
    bone: &QBone,
    parent: Option<&QBone>,
    pivot: &[i32; 3],
    reference: Option<&QBone>,
) -> [i32; 3] {
    match parent {
        Some(p) => {
            let (rp, rb) = (rotation(p), rotation(bone));
            let j = pivot.map(i64::from);
            std::array::from_fn(|i| {
                let moved = (0..3)
                    .map(|k| (rp[3 * i + k] - rb[3 * i + k]) * j[k])
                    .sum::<i64>();
                // |t_p| < 2^21, matrix entries at most 2^16, pivots below 2^21: the sum
                // stays below 2^26
                (i64::from(p[4 + i]) + round_shift(moved)) as i32
            })
        }
        None => reference.map_or([0; 3], |r| [r[4], r[5], r[6]]),
    }
}

/// The transform a quantised bone stands for (rotation to 2^-14, not renormalised;
/// translation in metres).
pub(crate) fn dequantize_bone(q: &QBone, step: f32) -> BoneTransform {
    let unit = 1.0 / ONE as f32;
    BoneTransform {
        rotation: [q[0], q[1], q[2], q[3]].map(|c| c as f32 * unit),
        translation: [q[4], q[5], q[6]].map(|t| t as f32 * step),
    }
}

/// Checks a decoded bone lies where an encoder could have put it.
pub(crate) fn valid_bone(b: &QBone) -> bool {
    b[..4].iter().all(|c| i64::from(c.unsigned_abs()) <= ONE)
        && b[3] >= 0
        && b[4..]
            .iter()
            .all(|t| t.unsigned_abs() < LATTICE_LIMIT as u32)
}

/// Rounded arithmetic shift right by [`ROT_BITS`] (floor of (v + ½) / 2^14).
#[inline]
fn round_shift(v: i64) -> i64 {
    (v + HALF) >> ROT_BITS
}

/// Rotation matrix (row-major, units 2^-14) of a quantised quaternion.
fn rotation(b: &QBone) -> [i64; 9] {
    let [x, y, z, w] = [b[0], b[1], b[2], b[3]].map(i64::from);
    let one = ONE * ONE;
    [
        one - 2 * (y * y + z * z),
        2 * (x * y - w * z),
        2 * (x * z + w * y),
        2 * (x * y + w * z),
        one - 2 * (x * x + z * z),
        2 * (y * z - w * x),
        2 * (x * z - w * y),
        2 * (y * z + w * x),
        one - 2 * (x * x + y * y),
    ]
    .map(round_shift)
}

/// Relative motion of one bone from `prev` to `cur`: A = R_cur R_prevᵀ (units 2^-14),
/// c = t_cur − A t_prev (units 2^-14 lattice steps).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RelMotion {
    a: [i64; 9],
    c: [i64; 3],
    /// The same as doubles for [`compensate_vertex_avx2`]: the columns of A, then c,
    /// each padded to four lanes (integers below 2^43 in magnitude, so exact).
    cols: Lanes,
}

/// Four rows of four doubles, aligned for 256-bit loads.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(32))]
struct Lanes([[f64; 4]; 4]);

impl RelMotion {
    pub(crate) fn new(prev: &QBone, cur: &QBone) -> Self {
        let (rp, rc) = (rotation(prev), rotation(cur));
        let mut a = [0i64; 9];
        for i in 0..3 {
            for j in 0..3 {
                a[3 * i + j] = round_shift((0..3).map(|k| rc[3 * i + k] * rp[3 * j + k]).sum());
            }
        }
        let tp = [prev[4], prev[5], prev[6]].map(i64::from);
        let mut c = [0i64; 3];
        for i in 0..3 {
            c[i] = i64::from(cur[4 + i]) * ONE - (0..3).map(|k| a[3 * i + k] * tp[k]).sum::<i64>();
        }
        let mut cols = Lanes::default();
        for i in 0..3 {
            for j in 0..3 {
                cols.0[j][i] = a[3 * i + j] as f64;
            }
            cols.0[3][i] = c[i] as f64;
        }
        Self { a, c, cols }
    }
}

/// Skinning motion compensation of one vertex: `p` moved by the motions of bones `j`
/// blended with weights `w` (summing to [`WEIGHT_ONE`]), clamped to twice the lattice
/// range so that residuals stay bounded whatever the bones.
#[inline]
pub(crate) fn compensate_vertex(
    motions: &[RelMotion],
    j: &[u8; 4],
    w: &[u8; 4],
    p: [i32; 3],
) -> [i32; 3] {
    const D: i64 = WEIGHT_ONE * ONE;
    let limit = 2 * i64::from(LATTICE_LIMIT);
    let q = p.map(i64::from);
    // Σ_k w_k (A_k q + c_k): the same integer as (Σ_k w_k A_k) q + Σ_k w_k c_k (every
    // product is exact), in 12 multiplications per bone instead of 12 per bone plus 9
    let mut x = [0i64; 3];
    for k in 0..4 {
        if w[k] == 0 {
            continue;
        }
        let wk = i64::from(w[k]);
        let r = &motions[j[k] as usize];
        for i in 0..3 {
            let moved = r.a[3 * i] * q[0] + r.a[3 * i + 1] * q[1] + r.a[3 * i + 2] * q[2] + r.c[i];
            x[i] += wk * moved;
        }
    }
    x.map(|x| (x + D / 2).div_euclid(D).clamp(-limit, limit) as i32)
}

/// [`compensate_vertex`] in 256-bit lanes of doubles (x, y, z, unused), as the
/// JavaScript decoder computes it: (Σ_k w_k A_k) p + Σ_k w_k c_k, then
/// ⌊(· + D/2) / D⌋ with D = 255 · 2^14. The same integers, bit for bit: for any bones
/// that pass [`valid_bone`] (quaternion components |·| ≤ 2^14, |t| < 2^21), |A| < 2^19.6
/// and |c| < 2^42.3, so with weights summing to 255 and |p| < 2^21 every product and
/// partial sum, in any order and fused or not, is an integer below 2^51.4 < 2^53 and
/// exact; and the quotient's rounding error (< 2^-23.6) is smaller than the distance
/// (≥ 1/D > 2^-22) from any non-integer quotient to the next integer, so the floor is
/// exact too.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
pub(crate) unsafe fn compensate_vertex_avx2(
    motions: &[RelMotion],
    j: &[u8; 4],
    w: &[u8; 4],
    p: [i32; 3],
) -> [i32; 3] {
    use std::arch::x86_64::*;
    const D: f64 = (WEIGHT_ONE * ONE) as f64;
    let limit = f64::from(2 * LATTICE_LIMIT);
    let mut m = [_mm256_setzero_pd(); 4];
    for k in 0..4 {
        // a zero weight adds exact zeros (its bone index is valid all the same)
        let cols = &motions[usize::from(j[k])].cols.0;
        let wk = _mm256_set1_pd(f64::from(w[k]));
        for (mc, col) in m.iter_mut().zip(cols) {
            // SAFETY: `col` is four initialised f64s
            *mc = _mm256_fmadd_pd(wk, unsafe { _mm256_load_pd(col.as_ptr()) }, *mc);
        }
    }
    let [q0, q1, q2] = p.map(|c| _mm256_set1_pd(f64::from(c)));
    let x = _mm256_fmadd_pd(
        m[0],
        q0,
        _mm256_fmadd_pd(m[1], q1, _mm256_fmadd_pd(m[2], q2, m[3])),
    );
    let y = _mm256_floor_pd(_mm256_div_pd(
        _mm256_add_pd(x, _mm256_set1_pd(D / 2.0)),
        _mm256_set1_pd(D),
    ));
    let y = _mm256_min_pd(
        _mm256_max_pd(y, _mm256_set1_pd(-limit)),
        _mm256_set1_pd(limit),
    );
    let mut out = [0i32; 4];
    // SAFETY: `out` has room for the four 32-bit lanes
    unsafe { _mm_storeu_si128(out.as_mut_ptr().cast(), _mm256_cvttpd_epi32(y)) };
    [out[0], out[1], out[2]]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bone() -> impl Strategy<Value = QBone> {
        // any bone `valid_bone` lets through, extremes included: quaternions need not
        // be unit (a hostile stream's need not)
        let c = prop_oneof![
            -(ONE as i32)..=ONE as i32,
            Just(ONE as i32),
            Just(-(ONE as i32))
        ];
        let t = prop_oneof![
            -(LATTICE_LIMIT - 1)..LATTICE_LIMIT,
            Just(LATTICE_LIMIT - 1),
            Just(1 - LATTICE_LIMIT)
        ];
        (
            [c.clone(), c.clone(), c.clone(), c],
            [t.clone(), t.clone(), t],
        )
            .prop_map(|(r, t)| [r[0], r[1], r[2], r[3], t[0], t[1], t[2]])
    }

    fn weights() -> impl Strategy<Value = [u8; 4]> {
        (0u8..=255, 0u8..=255, 0u8..=255, 0usize..4).prop_map(|(a, b, c, at)| {
            let mut w = [0u8; 4];
            let mut left = 255u32;
            for (k, x) in [a, b, c].into_iter().enumerate() {
                let x = u32::from(x).min(left);
                w[(at + k) % 4] = x as u8;
                left -= x;
            }
            w[(at + 3) % 4] = left as u8;
            w
        })
    }

    /// The format's definition in 128-bit integers, straight from the quantised bones:
    /// round(Σ_k w_k (A_k p + c_k) / (255 · 2^14)) with A = R_cur R_prevᵀ and
    /// c = t_cur·2^14 − A t_prev, then clamped.
    fn reference(prev: &[QBone], cur: &[QBone], j: &[u8; 4], w: &[u8; 4], p: [i32; 3]) -> [i32; 3] {
        let d = i128::from(WEIGHT_ONE * ONE);
        let limit = 2 * i128::from(LATTICE_LIMIT);
        let mut x = [0i128; 3];
        for k in 0..4 {
            let b = usize::from(j[k]);
            let (rp, rc) = (rotation(&prev[b]), rotation(&cur[b]));
            for r in 0..3 {
                let a: [i128; 3] = std::array::from_fn(|c| {
                    i128::from(round_shift(
                        (0..3).map(|t| rc[3 * r + t] * rp[3 * c + t]).sum(),
                    ))
                });
                let c = i128::from(cur[b][4 + r]) * i128::from(ONE)
                    - (0..3)
                        .map(|t| a[t] * i128::from(prev[b][4 + t]))
                        .sum::<i128>();
                let moved = (0..3).map(|t| a[t] * i128::from(p[t])).sum::<i128>() + c;
                x[r] += i128::from(w[k]) * moved;
            }
        }
        x.map(|x| (x + d / 2).div_euclid(d).clamp(-limit, limit) as i32)
    }

    /// Bone `q` in the rotation `rot` (any unit quaternion, x, y, z, w) and translation
    /// `t` (metres), quantised at 1 mm.
    fn quantised(rot: glam::Quat, t: glam::Vec3) -> QBone {
        quantize_bone(
            &BoneTransform {
                rotation: rot.to_array(),
                translation: t.to_array(),
            },
            0.001,
        )
        .expect("valid")
    }

    /// The rotation a quantised bone stands for.
    fn rotation_of(q: &QBone) -> glam::DQuat {
        let [x, y, z, w] = [q[0], q[1], q[2], q[3]].map(f64::from);
        glam::DQuat::from_xyzw(x, y, z, w).normalize()
    }

    /// A quantised bone keeps its rotation to within 3.5e-4 rad at every angle, a half
    /// turn included (format version 4 sends w's difference from the w x, y, z imply
    /// where that is more than a unit off). Version 3 derived w alone: within ~2.5e-4 rad
    /// where w ≥ 0.7, but ~0.02 rad off within a few degrees of a half turn, where the
    /// square root is steep; the body posed from the bones (a viewer without the body
    /// pose) moved its hand by millimetres there. And w's difference is 0 for turns up to
    /// ~130° (w ≥ 0.4), so it costs a bone a fraction of a bit there.
    #[test]
    fn quantised_bones_keep_the_rotation_up_to_a_half_turn() {
        let mut rng = 99u64;
        let mut next = || {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (rng >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        };
        let (mut worst, mut sent_below, mut sent) = (0f64, 1f32, 0);
        for i in 0..40_000 {
            let v = glam::Vec3::new(next(), next(), next()).normalize();
            // every other one within ~6° of a half turn
            let w = if i % 2 == 0 {
                next().abs()
            } else {
                0.05 * next().abs()
            };
            let q = glam::Quat::from_xyzw(v.x, v.y, v.z, w).normalize();
            let b = quantised(q, glam::Vec3::ZERO);
            assert!(valid_bone(&b), "{b:?}");
            // the angle of the rotation between them, in doubles (acos near 1 in
            // single precision cannot resolve 1e-4 rad)
            let d = rotation_of(&b) * q.as_dquat().conjugate();
            worst = worst.max(2.0 * d.xyz().length().atan2(d.w.abs()));
            if b[3] != derived_w(b[0], b[1], b[2]) {
                sent += 1;
                sent_below = sent_below.min(1.0 - q.w);
            }
        }
        assert!(worst <= 3.5e-4, "{worst} rad");
        assert!(sent > 0, "a half turn needs w's difference");
        assert!(
            1.0 - sent_below < 0.4,
            "w's difference sent at w = {}",
            1.0 - sent_below
        );
        assert_eq!(derived_w(0, 0, 0), ONE as i32);
        assert_eq!(
            derived_w(ONE as i32, 1, 0),
            0,
            "no square root of a negative"
        );
    }

    /// A child bone that kept its rotation relative to its parent and its joint where
    /// the parent carries it is predicted to within a few units of its own quantisation.
    #[test]
    fn a_rigid_chain_is_predicted_from_the_parent() {
        let pivot = glam::Vec3::new(0.18, 1.42, -0.02); // a shoulder, metres
        let pivot_q = [180, 1420, -20];
        let local = glam::Quat::from_euler(glam::EulerRot::XYZ, 0.3, -0.9, 0.4);
        let frame = |a: f32| {
            let rp = glam::Quat::from_euler(glam::EulerRot::YXZ, a, 0.2 * a, -0.1);
            let tp = glam::Vec3::new(0.01 * a, 0.02, -0.03 * a);
            let rb = rp * local;
            // the joint's posed position, as the parent carries it: tp + rp·pivot
            let tb = tp + rp * pivot - rb * pivot;
            (quantised(rp, tp), quantised(rb, tb))
        };
        let (ref_p, ref_b) = frame(0.2);
        let (p, b) = frame(0.35);
        let t = predict_translation(&b, Some(&p), &pivot_q, Some(&ref_b));
        for k in 0..3 {
            assert!(
                (t[k] - b[4 + k]).abs() <= 2,
                "translation {k}: {} vs {}",
                t[k],
                b[4 + k]
            );
        }
        let r = predict_rotation(Some(&p), Some((&ref_b, Some(&ref_p))));
        for k in 0..3 {
            assert!(
                (r[k] - b[k]).abs() <= 4,
                "rotation {k}: {} vs {}",
                r[k],
                b[k]
            );
        }
        // in a keyframe the child is predicted at rest relative to its parent
        assert_eq!(predict_rotation(Some(&p), None), [p[0], p[1], p[2]]);
        // a root: its reference, or the identity and the origin
        assert_eq!(
            predict_rotation(None, Some((&ref_b, None))),
            [ref_b[0], ref_b[1], ref_b[2]]
        );
        assert_eq!(predict_rotation(None, None), [0; 3]);
        assert_eq!(
            predict_translation(&b, None, &pivot_q, Some(&ref_b)),
            [ref_b[4], ref_b[5], ref_b[6]]
        );
        assert_eq!(predict_translation(&b, None, &pivot_q, None), [0; 3]);
    }

    proptest! {
        /// The bones' predictions are the format's integers (computed here in 128 bits)
        /// for every bone a stream can hold, and small enough that a residual against
        /// any valid bone stays within the coder's range (|e| < 2^27).
        #[test]
        fn bone_predictions_are_exact_and_bounded(
            b in bone(), p in bone(), r in bone(), rp in bone(),
            pivot in [-(LATTICE_LIMIT - 1)..LATTICE_LIMIT, -(LATTICE_LIMIT - 1)..LATTICE_LIMIT,
                      -(LATTICE_LIMIT - 1)..LATTICE_LIMIT],
        ) {
            let t = predict_translation(&b, Some(&p), &pivot, None);
            let (mp, mb) = (rotation(&p), rotation(&b));
            for i in 0..3 {
                let moved: i128 = (0..3)
                    .map(|k| i128::from(mp[3 * i + k] - mb[3 * i + k]) * i128::from(pivot[k]))
                    .sum();
                let want = i128::from(p[4 + i]) + ((moved + i128::from(HALF)) >> ROT_BITS);
                prop_assert_eq!(i128::from(t[i]), want);
                prop_assert!(t[i].abs() < 1 << 26);
            }
            let q = predict_rotation(Some(&p), Some((&r, Some(&rp))));
            let wide = |b: &QBone| [b[0], b[1], b[2], b[3]].map(i128::from);
            let mul = |a: [i128; 4], b: [i128; 4]| {
                quat_mul(a, b, |v| (v + i128::from(HALF)) >> ROT_BITS)
            };
            let conj = [-i128::from(rp[0]), -i128::from(rp[1]), -i128::from(rp[2]), i128::from(rp[3])];
            let m = mul(mul(wide(&p), conj), wide(&r));
            let m = if m[3] < 0 { m.map(|c| -c) } else { m };
            for k in 0..3 {
                prop_assert_eq!(i128::from(q[k]), m[k]);
                prop_assert!(q[k].abs() < 1 << 18);
            }
        }

        /// The integer form (64-bit) and, where the CPU has AVX2 and FMA, the doubles
        /// give the format's integers (the 128-bit reference) for every valid input.
        #[test]
        fn compensation_is_the_formats_integer(
            prev in proptest::collection::vec(bone(), 3),
            cur in proptest::collection::vec(bone(), 3),
            j in [0u8..3, 0u8..3, 0u8..3, 0u8..3],
            w in weights(),
            p in [-(LATTICE_LIMIT - 1)..LATTICE_LIMIT, -(LATTICE_LIMIT - 1)..LATTICE_LIMIT,
                  -(LATTICE_LIMIT - 1)..LATTICE_LIMIT],
        ) {
            let motions: Vec<RelMotion> =
                prev.iter().zip(&cur).map(|(a, b)| RelMotion::new(a, b)).collect();
            let want = reference(&prev, &cur, &j, &w, p);
            prop_assert_eq!(compensate_vertex(&motions, &j, &w, p), want);
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                // SAFETY: the CPU was just checked for AVX2 and FMA
                let got = unsafe { compensate_vertex_avx2(&motions, &j, &w, p) };
                prop_assert_eq!(got, want);
            }
        }
    }
}
