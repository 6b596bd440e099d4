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

/// Checks a decoded bone lies where an encoder could have put it.
pub(crate) fn valid_bone(b: &QBone) -> bool {
    b[..4].iter().all(|c| i64::from(c.unsigned_abs()) <= ONE)
        && b[4..].iter().all(|t| t.abs() < LATTICE_LIMIT)
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

    proptest! {
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
