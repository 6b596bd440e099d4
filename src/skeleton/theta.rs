//! The joint-angle vector Θ between two poses (DESIGN §2, SOR §3).

use glam::Vec3;

use super::joint::{DOF_COUNT, JOINT_COUNT};
use super::pose::Pose;
use super::rotation::{quat_exp, quat_log_fast};

/// Θ(a, b): per joint the rotation vector (log map, radians) of the local rotation
/// difference `a_j⁻¹ · b_j`, concatenated as 66 numbers, index `m = 3·joint + axis`.
///
/// Properties: Θ(p, p) = 0; Θ(b, a) = −Θ(a, b); for `b_j = a_j · exp(δ_j)`,
/// Θ(a, b)_j = δ_j. The root translation does not enter Θ.
pub fn theta(a: &Pose, b: &Pose) -> [f32; DOF_COUNT] {
    let mut out = [0.0; DOF_COUNT];
    theta_into(a, b, &mut out);
    out
}

/// [`theta`] writing into a caller's buffer (no allocation, for the runtime).
pub fn theta_into(a: &Pose, b: &Pose, out: &mut [f32; DOF_COUNT]) {
    for j in 0..JOINT_COUNT {
        let d = quat_log_fast(a.rotations[j].conjugate() * b.rotations[j]);
        out[3 * j] = d.x;
        out[3 * j + 1] = d.y;
        out[3 * j + 2] = d.z;
    }
}

/// Applies a joint-angle displacement: `b_j = a_j · exp(Θ_j)`. Inverse of [`theta`]
/// for rotations below π.
pub fn apply_theta(a: &Pose, th: &[f32; DOF_COUNT]) -> Pose {
    let mut b = *a;
    for j in 0..JOINT_COUNT {
        let d = Vec3::new(th[3 * j], th[3 * j + 1], th[3 * j + 2]);
        b.rotations[j] = (a.rotations[j] * quat_exp(d)).normalize();
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pose_from(v: &[f32]) -> Pose {
        let mut p = Pose::rest();
        for j in 0..JOINT_COUNT {
            p.rotations[j] = quat_exp(Vec3::new(v[3 * j], v[3 * j + 1], v[3 * j + 2]));
        }
        p
    }

    proptest! {
        #[test]
        fn theta_is_zero_on_equal_and_antisymmetric(
            a in prop::collection::vec(-1.5f32..1.5, DOF_COUNT),
            b in prop::collection::vec(-1.5f32..1.5, DOF_COUNT),
        ) {
            let (pa, pb) = (pose_from(&a), pose_from(&b));
            let zero = theta(&pa, &pa);
            prop_assert!(zero.iter().all(|x| x.abs() < 1e-5));
            let ab = theta(&pa, &pb);
            let ba = theta(&pb, &pa);
            for m in 0..DOF_COUNT {
                prop_assert!((ab[m] + ba[m]).abs() < 1e-4, "m={} {} {}", m, ab[m], ba[m]);
            }
        }

        #[test]
        fn theta_recovers_small_displacements(
            a in prop::collection::vec(-1.5f32..1.5, DOF_COUNT),
            d in prop::collection::vec(-0.01f32..0.01, DOF_COUNT),
        ) {
            let pa = pose_from(&a);
            let mut dd = [0.0f32; DOF_COUNT];
            dd.copy_from_slice(&d);
            let pb = apply_theta(&pa, &dd);
            let th = theta(&pa, &pb);
            for m in 0..DOF_COUNT {
                prop_assert!((th[m] - dd[m]).abs() < 2e-6 + 1e-3 * dd[m].abs(), "m={} {} {}", m, th[m], dd[m]);
            }
        }
    }
}
