//! Anatomical joint limits, per joint and axis, used to sample plausible poses.
//!
//! Limits bound the components of each joint's local rotation vector (log map of its
//! local rotation, radians, in the parent frame of the T-pose). Ranges follow the
//! clinical active range of motion tables (AAOS, "Joint Motion: Method of Measuring and
//! Recording", 1965), split across the three spine joints and converted to the
//! T-pose frame of the canonical skeleton (+Y up, facing +Z, left at +X).

use glam::Vec3;

use super::joint::{JOINT_COUNT, JointId};
use super::pose::Pose;
use super::rotation::{quat_exp, quat_log};

/// Range of one joint's rotation vector, per axis, radians (`lo ≤ hi` componentwise).
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct JointLimit {
    /// Lower bound per axis, radians.
    pub lo: Vec3,
    /// Upper bound per axis, radians.
    pub hi: Vec3,
}

impl JointLimit {
    fn deg(lo: [f32; 3], hi: [f32; 3]) -> Self {
        Self {
            lo: Vec3::from(lo) * std::f32::consts::PI / 180.0,
            hi: Vec3::from(hi) * std::f32::consts::PI / 180.0,
        }
    }

    /// The limit of the mirror joint: rotation vectors mirror as (x, y, z) → (x, −y, −z).
    fn mirrored(self) -> Self {
        Self {
            lo: Vec3::new(self.lo.x, -self.hi.y, -self.hi.z),
            hi: Vec3::new(self.hi.x, -self.lo.y, -self.lo.z),
        }
    }

    /// Whether a rotation vector lies inside the limit (with `slack` radians of tolerance).
    pub fn contains(&self, r: Vec3, slack: f32) -> bool {
        r.cmpge(self.lo - Vec3::splat(slack)).all() && r.cmple(self.hi + Vec3::splat(slack)).all()
    }
}

/// Limits for the centre joints and the left side (right side derived by mirroring).
/// Degrees, rotation-vector components (x, y, z).
fn base_limit(j: JointId) -> JointLimit {
    use JointId as J;
    match j {
        // global tilt only: heading is removed in the canonical frame
        J::PELVIS => JointLimit::deg([-20.0, 0.0, -15.0], [45.0, 0.0, 15.0]),
        // thigh hangs along −Y: x<0 swings it forward (flexion 120°), z>0 abducts
        J::LEFT_HIP => JointLimit::deg([-110.0, -35.0, -20.0], [25.0, 35.0, 45.0]),
        // knee flexion moves the foot backwards: x>0
        J::LEFT_KNEE => JointLimit::deg([0.0, -5.0, -3.0], [140.0, 5.0, 3.0]),
        // x>0 points the toes down (plantar flexion 50°, dorsiflexion 20°)
        J::LEFT_ANKLE => JointLimit::deg([-20.0, -20.0, -25.0], [45.0, 20.0, 20.0]),
        J::LEFT_FOOT => JointLimit::deg([-30.0, -5.0, -5.0], [20.0, 5.0, 5.0]),
        // spine: x>0 bends forward; the three joints share flexion 80°, extension 30°,
        // lateral bend 35° and twist 45° of the lumbar and thoracic spine together
        J::SPINE1 | J::SPINE2 | J::SPINE3 => {
            JointLimit::deg([-10.0, -15.0, -12.0], [27.0, 15.0, 12.0])
        }
        J::NECK => JointLimit::deg([-25.0, -35.0, -20.0], [30.0, 35.0, 20.0]),
        J::HEAD => JointLimit::deg([-25.0, -35.0, -20.0], [20.0, 35.0, 20.0]),
        // collar (shoulder girdle): elevation z>0, protraction y<0
        J::LEFT_COLLAR => JointLimit::deg([-10.0, -15.0, -10.0], [10.0, 15.0, 25.0]),
        // upper arm along +X: z<0 lowers it (to the side at −90°), z>0 raises it,
        // y<0 swings it forward, x twists it
        J::LEFT_SHOULDER => JointLimit::deg([-70.0, -100.0, -95.0], [70.0, 40.0, 75.0]),
        // elbow flexion brings the forearm forward in the T-pose frame: y<0
        J::LEFT_ELBOW => JointLimit::deg([-80.0, -145.0, -5.0], [80.0, 0.0, 5.0]),
        J::LEFT_WRIST => JointLimit::deg([-30.0, -30.0, -70.0], [30.0, 20.0, 70.0]),
        other => base_limit(other.mirror()).mirrored(),
    }
}

/// Anatomical limit of joint `j`.
pub fn joint_limit(j: JointId) -> JointLimit {
    base_limit(j)
}

/// All 22 limits, indexed by joint.
pub fn joint_limits() -> [JointLimit; JOINT_COUNT] {
    std::array::from_fn(|i| base_limit(JointId(i as u8)))
}

/// A pose with every joint's rotation vector drawn by `uniform(lo, hi)` (a caller's
/// random source returning numbers in `[0, 1)`), `scale` ∈ (0, 1] shrinking every
/// range towards the rest pose. No translation.
pub fn sample_pose(mut uniform: impl FnMut() -> f32, scale: f32) -> Pose {
    let mut p = Pose::rest();
    for j in JointId::all() {
        let l = base_limit(j);
        let lo = l.lo * scale;
        let hi = l.hi * scale;
        let r = Vec3::new(
            lo.x + (hi.x - lo.x) * uniform(),
            lo.y + (hi.y - lo.y) * uniform(),
            lo.z + (hi.z - lo.z) * uniform(),
        );
        p.rotations[j.index()] = quat_exp(r);
    }
    p
}

/// Clamps every joint's rotation vector into its limit.
pub fn clamp_pose(pose: &Pose) -> Pose {
    let mut p = *pose;
    for j in JointId::all() {
        let l = base_limit(j);
        let r = quat_log(pose.rotations[j.index()]).clamp(l.lo, l.hi);
        p.rotations[j.index()] = quat_exp(r);
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_ordered_and_mirrored() {
        for j in JointId::all() {
            let l = joint_limit(j);
            assert!(l.lo.cmple(l.hi).all(), "{j}");
            assert!(
                l.contains(Vec3::ZERO, 0.0),
                "rest pose must be allowed at {j}"
            );
            let m = joint_limit(j.mirror());
            assert!((m.lo.x - l.lo.x).abs() < 1e-6 && (m.lo.y + l.hi.y).abs() < 1e-6);
        }
    }

    #[test]
    fn samples_respect_limits_and_clamp_is_idempotent() {
        let mut state = 12345u64;
        let mut uniform = move || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32) / (1u64 << 24) as f32
        };
        for _ in 0..50 {
            let p = sample_pose(&mut uniform, 1.0);
            for j in JointId::all() {
                assert!(
                    joint_limit(j).contains(quat_log(p.rotation(j)), 1e-4),
                    "{j}"
                );
            }
            let c = clamp_pose(&p);
            for j in JointId::all() {
                assert!(
                    c.rotation(j).abs_diff_eq(p.rotation(j), 1e-4)
                        || c.rotation(j).abs_diff_eq(-p.rotation(j), 1e-4)
                );
            }
        }
        // a right arm raised well past the limit is clamped back inside
        let mut p = Pose::rest();
        p.set_rotation(JointId::RIGHT_ELBOW, quat_exp(Vec3::new(0.0, -2.0, 0.0)));
        let c = clamp_pose(&p);
        assert!(
            joint_limit(JointId::RIGHT_ELBOW)
                .contains(quat_log(c.rotation(JointId::RIGHT_ELBOW)), 1e-4)
        );
    }
}
