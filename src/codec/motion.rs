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
}

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
        Self { a, c }
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
