//! Skin weights and skinning: linear blend skinning and dual-quaternion skinning
//! (Kavan, Collins, Žára, O'Sullivan 2008).

use glam::{Mat3A, Quat, Vec3, Vec3A};

use crate::skeleton::{JOINT_COUNT, Rigid};

/// Maximum number of bone influences per vertex (glTF `JOINTS_0`/`WEIGHTS_0`).
pub const MAX_INFLUENCES: usize = 4;

/// Per-vertex bone influences.
///
/// Kept as two parallel arrays (`[[u16; 4]]` and `[[f32; 4]]`, as bevy does) rather than
/// an array of (bone, weight) pairs: the skinning loops read both contiguously, and the
/// layout maps one-to-one onto glTF's `JOINTS_0` and `WEIGHTS_0` accessors.
///
/// Invariants (checked by [`SkinWeights::validate`]): every weight is finite and ≥ 0,
/// each vertex's weights sum to 1, unused slots have weight 0, bone indices are < 22.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SkinWeights {
    /// Bone (joint) index per influence slot.
    pub joints: Vec<[u16; MAX_INFLUENCES]>,
    /// Weight per influence slot, sorted descending.
    pub weights: Vec<[f32; MAX_INFLUENCES]>,
}

/// A broken skin-weight invariant.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum SkinError {
    /// Arrays of different lengths, or not matching the mesh.
    #[error("skin has {joints} joint rows and {weights} weight rows for {vertices} vertices")]
    Length {
        /// Rows of joint indices.
        joints: usize,
        /// Rows of weights.
        weights: usize,
        /// Mesh vertices.
        vertices: usize,
    },
    /// A vertex's weights are negative, non-finite or do not sum to 1.
    #[error("vertex {0} has invalid weights (negative, non-finite, or not summing to 1)")]
    Weights(usize),
    /// A bone index is out of range.
    #[error("vertex {0} refers to a bone index ≥ 22")]
    Bone(usize),
}

impl SkinWeights {
    /// Number of vertices.
    pub fn len(&self) -> usize {
        self.joints.len()
    }

    /// True when there are no vertices.
    pub fn is_empty(&self) -> bool {
        self.joints.is_empty()
    }

    /// Builds one vertex's influences from any number of (bone, weight) pairs: keeps
    /// the four largest, renormalises, sorts descending.
    pub fn pack(pairs: &mut [(u16, f32)]) -> ([u16; MAX_INFLUENCES], [f32; MAX_INFLUENCES]) {
        pairs.sort_by(|a, b| b.1.total_cmp(&a.1));
        let n = pairs.len().min(MAX_INFLUENCES);
        let sum: f32 = pairs[..n].iter().map(|p| p.1.max(0.0)).sum();
        let mut j = [0u16; MAX_INFLUENCES];
        let mut w = [0f32; MAX_INFLUENCES];
        if sum <= 0.0 || !sum.is_finite() {
            j[0] = pairs.first().map(|p| p.0).unwrap_or(0);
            w[0] = 1.0;
            return (j, w);
        }
        for k in 0..n {
            j[k] = pairs[k].0;
            w[k] = pairs[k].1.max(0.0) / sum;
        }
        (j, w)
    }

    /// Checks the invariants against a vertex count.
    pub fn validate(&self, vertices: usize) -> Result<(), SkinError> {
        if self.joints.len() != vertices || self.weights.len() != vertices {
            return Err(SkinError::Length {
                joints: self.joints.len(),
                weights: self.weights.len(),
                vertices,
            });
        }
        for v in 0..vertices {
            let w = self.weights[v];
            let sum: f32 = w.iter().sum();
            if w.iter().any(|x| !x.is_finite() || *x < 0.0) || (sum - 1.0).abs() > 1e-4 {
                return Err(SkinError::Weights(v));
            }
            if self.joints[v]
                .iter()
                .zip(w)
                .any(|(&j, w)| w > 0.0 && j as usize >= JOINT_COUNT)
            {
                return Err(SkinError::Bone(v));
            }
        }
        Ok(())
    }

    /// Number of non-zero influences of vertex `v`.
    pub fn influence_count(&self, v: usize) -> usize {
        self.weights[v].iter().filter(|&&w| w > 0.0).count()
    }

    /// Weight of bone `b` at vertex `v` (0 when it does not influence it).
    pub fn weight_of(&self, v: usize, b: usize) -> f32 {
        self.joints[v]
            .iter()
            .zip(self.weights[v])
            .filter(|(j, _)| **j as usize == b)
            .map(|(_, w)| w)
            .sum()
    }
}

/// Skinning method.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SkinningMethod {
    /// Linear blend skinning: blend the bone matrices.
    #[default]
    Lbs,
    /// Dual-quaternion skinning: blend unit dual quaternions (no candy-wrapper collapse).
    Dqs,
}

/// `v / |v|`, or zero where that is not finite (as `normalize_or_zero`), from the
/// hardware reciprocal square root refined by one Newton step: within ~2e-7 of the
/// exact unit vector, without the square root and division whose latency dominated
/// posing the body for penetration handling (SOR Eq. 11–13) in `perf`.
#[inline]
pub(crate) fn normalize_fast(v: Vec3A) -> Vec3A {
    let l2 = v.length_squared();
    if !l2.is_normal() {
        return v.normalize_or_zero();
    }
    #[cfg(target_arch = "x86_64")]
    let r = {
        use std::arch::x86_64::{_mm_cvtss_f32, _mm_rsqrt_ss, _mm_set_ss};
        // SAFETY: SSE is part of every x86_64 target's baseline; registers only.
        let r = unsafe { _mm_cvtss_f32(_mm_rsqrt_ss(_mm_set_ss(l2))) };
        r * (1.5 - 0.5 * l2 * r * r)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let r = 1.0 / l2.sqrt();
    v * r
}

/// Bone matrices prepared once per pose for [`lbs_into`].
#[derive(Copy, Clone, Debug)]
pub struct LbsMatrices {
    rot: [Mat3A; JOINT_COUNT],
    trans: [Vec3A; JOINT_COUNT],
}

impl LbsMatrices {
    /// From per-bone skinning transforms (rest → posed, see
    /// [`crate::skeleton::Skeleton::skinning_transforms`]).
    pub fn new(t: &[Rigid; JOINT_COUNT]) -> Self {
        Self {
            rot: t.map(|r| Mat3A::from_quat(r.rot)),
            trans: t.map(|r| Vec3A::from(r.trans)),
        }
    }

    /// LBS of one vertex: Σ w_b (R_b x + T_b).
    #[inline]
    pub fn apply(
        &self,
        x: Vec3,
        joints: &[u16; MAX_INFLUENCES],
        weights: &[f32; MAX_INFLUENCES],
    ) -> Vec3 {
        let x = Vec3A::from(x);
        let mut acc = Vec3A::ZERO;
        for k in 0..MAX_INFLUENCES {
            if weights[k] != 0.0 {
                let b = joints[k] as usize;
                acc += weights[k] * (self.rot[b] * x + self.trans[b]);
            }
        }
        Vec3::from(acc)
    }

    /// [`Self::apply`] and [`Self::rotate_normal`] of one vertex at once, blending the
    /// bone matrices first (one blend, two products).
    #[inline]
    pub fn apply_with_normal(
        &self,
        x: Vec3,
        n: Vec3,
        joints: &[u16; MAX_INFLUENCES],
        weights: &[f32; MAX_INFLUENCES],
    ) -> (Vec3, Vec3) {
        let mut m = Mat3A::ZERO;
        let mut t = Vec3A::ZERO;
        for k in 0..MAX_INFLUENCES {
            let w = weights[k];
            if w != 0.0 {
                let b = joints[k] as usize;
                m += self.rot[b] * w;
                t += self.trans[b] * w;
            }
        }
        let p = m * Vec3A::from(x) + t;
        let n = normalize_fast(m * Vec3A::from(n));
        (Vec3::from(p), Vec3::from(n))
    }

    /// Blended rotation of one normal (LBS), renormalised.
    #[inline]
    pub fn rotate_normal(
        &self,
        n: Vec3,
        joints: &[u16; MAX_INFLUENCES],
        weights: &[f32; MAX_INFLUENCES],
    ) -> Vec3 {
        let n = Vec3A::from(n);
        let mut acc = Vec3A::ZERO;
        for k in 0..MAX_INFLUENCES {
            if weights[k] != 0.0 {
                acc += self.rot[joints[k] as usize] * n * weights[k];
            }
        }
        Vec3::from(acc.normalize_or_zero())
    }
}

/// Linear blend skinning of `rest` positions into `out` (same length): x' = Σ w_b (R_b x + T_b).
///
/// # Panics
/// If the slices and the skin have different lengths (a programming error).
#[track_caller]
pub fn lbs_into(rest: &[Vec3], skin: &SkinWeights, m: &LbsMatrices, out: &mut [Vec3]) {
    assert!(
        rest.len() == out.len() && rest.len() == skin.len(),
        "lbs_into: length mismatch"
    );
    for (((x, j), w), o) in rest
        .iter()
        .zip(&skin.joints)
        .zip(&skin.weights)
        .zip(out.iter_mut())
    {
        *o = m.apply(*x, j, w);
    }
}

/// Dual quaternion (real part `r`, dual part `d`) of a rigid motion.
#[derive(Copy, Clone, Debug)]
struct DualQuat {
    r: Quat,
    d: Quat,
}

impl DualQuat {
    fn from_rigid(t: &Rigid) -> Self {
        let tq = Quat::from_xyzw(t.trans.x, t.trans.y, t.trans.z, 0.0);
        Self {
            r: t.rot,
            d: (tq * t.rot) * 0.5,
        }
    }
}

/// Dual-quaternion skinning of `rest` positions into `out` (Kavan et al. 2008, Alg. 1),
/// with antipodality handled relative to each vertex's heaviest bone.
///
/// # Panics
/// If the slices and the skin have different lengths (a programming error).
#[track_caller]
pub fn dqs_into(rest: &[Vec3], skin: &SkinWeights, t: &[Rigid; JOINT_COUNT], out: &mut [Vec3]) {
    assert!(
        rest.len() == out.len() && rest.len() == skin.len(),
        "dqs_into: length mismatch"
    );
    let dq: [DualQuat; JOINT_COUNT] = std::array::from_fn(|b| DualQuat::from_rigid(&t[b]));
    for (((x, j), w), o) in rest
        .iter()
        .zip(&skin.joints)
        .zip(&skin.weights)
        .zip(out.iter_mut())
    {
        let pivot = dq[j[0] as usize].r;
        let (mut r, mut d) = (
            Quat::from_xyzw(0.0, 0.0, 0.0, 0.0),
            Quat::from_xyzw(0.0, 0.0, 0.0, 0.0),
        );
        for k in 0..MAX_INFLUENCES {
            if w[k] == 0.0 {
                continue;
            }
            let q = dq[j[k] as usize];
            let s = if q.r.dot(pivot) < 0.0 { -w[k] } else { w[k] };
            r += q.r * s;
            d += q.d * s;
        }
        let n = r.length();
        let (r, d) = (r / n, d / n);
        // translation = 2 · d · r*
        let tq = (d * r.conjugate()) * 2.0;
        *o = r * *x + Vec3::new(tq.x, tq.y, tq.z);
    }
}

/// Skins positions by either method.
pub fn skin_into(
    method: SkinningMethod,
    rest: &[Vec3],
    skin: &SkinWeights,
    t: &[Rigid; JOINT_COUNT],
    out: &mut [Vec3],
) {
    match method {
        SkinningMethod::Lbs => lbs_into(rest, skin, &LbsMatrices::new(t), out),
        SkinningMethod::Dqs => dqs_into(rest, skin, t, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast normalisation agrees with the exact one over every magnitude a float
    /// squared can hold, and falls back to it for zero, subnormal, infinite and NaN.
    #[test]
    fn fast_normalisation_is_a_unit_vector() {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        };
        for e in -18..=18 {
            for _ in 0..200 {
                let v = Vec3A::new(next(), next(), next()) * 10f32.powi(e);
                let (fast, exact) = (normalize_fast(v), v.normalize_or_zero());
                assert!((fast - exact).length() < 3e-7, "{v}: {fast} vs {exact}");
            }
        }
        for v in [
            Vec3A::ZERO,
            Vec3A::splat(1e-30),
            Vec3A::new(f32::INFINITY, 0.0, 0.0),
            Vec3A::splat(f32::NAN),
            Vec3A::splat(3e19),
        ] {
            assert_eq!(normalize_fast(v), v.normalize_or_zero(), "{v}");
        }
    }
    use crate::skeleton::quat_exp;

    /// Skinning transforms moving bones 3 and 5 (the rest stay put).
    fn two_bones() -> [Rigid; JOINT_COUNT] {
        let mut t = [Rigid::IDENTITY; JOINT_COUNT];
        t[3] = Rigid::new(
            quat_exp(Vec3::new(0.2, 1.1, -0.4)),
            Vec3::new(0.1, -0.2, 0.3),
        );
        t[5] = Rigid::new(
            quat_exp(Vec3::new(-0.9, 0.3, 0.5)),
            Vec3::new(-0.3, 0.0, 0.2),
        );
        t
    }

    #[test]
    fn lbs_and_dqs_agree_for_single_bone_and_differ_when_blended() {
        let rest = vec![Vec3::new(0.3, 1.0, 0.1), Vec3::new(0.5, 1.2, -0.2)];
        let skin = SkinWeights {
            joints: vec![[3, 0, 0, 0], [3, 5, 0, 0]],
            weights: vec![[1.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0]],
        };
        skin.validate(2).expect("valid");
        let t = two_bones();
        let (mut a, mut b) = (vec![Vec3::ZERO; 2], vec![Vec3::ZERO; 2]);
        skin_into(SkinningMethod::Lbs, &rest, &skin, &t, &mut a);
        skin_into(SkinningMethod::Dqs, &rest, &skin, &t, &mut b);
        assert!((a[0] - t[3].apply(rest[0])).length() < 1e-5);
        assert!((a[0] - b[0]).length() < 1e-5);
        assert!(
            (a[1] - b[1]).length() > 1e-3,
            "blended vertices differ between LBS and DQS"
        );
    }

    #[test]
    fn fused_position_and_normal_match_separate_ones() {
        let t = two_bones();
        let m = LbsMatrices::new(&t);
        let (x, n) = (Vec3::new(0.5, 1.2, -0.2), Vec3::new(0.0, 0.6, 0.8));
        let (j, w) = ([3, 5, 0, 0], [0.6, 0.3, 0.1, 0.0]);
        let (p, q) = m.apply_with_normal(x, n, &j, &w);
        assert!((p - m.apply(x, &j, &w)).length() < 1e-6);
        assert!((q - m.rotate_normal(n, &j, &w)).length() < 1e-6);
        assert!((q.length() - 1.0).abs() < 1e-6);
    }

    #[test]
    fn pack_keeps_four_largest() {
        let mut pairs = vec![(1, 0.1), (2, 0.4), (3, 0.05), (4, 0.3), (5, 0.15)];
        let (j, w) = SkinWeights::pack(&mut pairs);
        assert_eq!(j, [2, 4, 5, 1]);
        assert!((w.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!(w[0] >= w[1] && w[1] >= w[2] && w[2] >= w[3]);
    }
}
