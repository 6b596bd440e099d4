//! The canonical frame (DESIGN §2, Stable Spaces Eq. 1): garment synthesis runs with
//! the root translation and heading (yaw about +Y) removed; they are put back on output.

use glam::{Quat, Vec3};

use super::joint::JointId;
use super::pose::Pose;
use super::rotation::Rigid;
use super::skeleton::Skeleton;

/// What [`canonicalize`] removed from a pose: heading about +Y around the pelvis's rest
/// position (`pivot`) and the root translation.
///
/// `to_world(x) = heading · (x − pivot) + pivot + translation`, metres, world frame.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct RootFrame {
    /// Heading angle about +Y, radians (0 faces +Z).
    pub heading: f32,
    /// Pelvis displacement from its rest position, metres, world frame.
    pub translation: Vec3,
    /// Pelvis rest position (centre of the heading rotation), metres.
    pub pivot: Vec3,
}

impl RootFrame {
    /// The rigid motion from the canonical frame to the world frame.
    pub fn to_world(&self) -> Rigid {
        let rot = Quat::from_rotation_y(self.heading);
        Rigid::new(rot, self.pivot + self.translation - rot * self.pivot)
    }

    /// Puts the removed heading and translation back on a canonical pose.
    pub fn apply_to_pose(&self, canonical: &Pose) -> Pose {
        let mut p = *canonical;
        p.rotations[0] = (Quat::from_rotation_y(self.heading) * canonical.rotations[0]).normalize();
        p.translation = self.to_world().apply(self.pivot + canonical.translation) - self.pivot;
        p
    }
}

/// Heading (yaw about +Y, radians) of a pelvis rotation: the direction its forward
/// axis (+Z) points in the horizontal plane; when the pelvis faces straight up or down,
/// the direction of its left axis (+X) is used instead.
pub fn heading_of(pelvis: Quat) -> f32 {
    let f = pelvis * Vec3::Z;
    let l = pelvis * Vec3::X;
    let hf = f.x * f.x + f.z * f.z;
    let hl = l.x * l.x + l.z * l.z;
    if hf >= hl * 0.25 {
        f.x.atan2(f.z)
    } else {
        (-l.z).atan2(l.x)
    }
}

/// Splits `pose` into a canonical pose (zero translation, pelvis heading removed, tilt
/// kept) and the [`RootFrame`] that puts them back: for every joint,
/// `fk(pose) = frame.to_world() ∘ fk(canonical)`.
pub fn canonicalize(pose: &Pose, skeleton: &Skeleton) -> (Pose, RootFrame) {
    let heading = heading_of(pose.rotations[0]);
    let mut c = *pose;
    c.rotations[0] = (Quat::from_rotation_y(-heading) * pose.rotations[0]).normalize();
    c.translation = Vec3::ZERO;
    let frame = RootFrame {
        heading,
        translation: pose.translation,
        pivot: skeleton.rest_position(JointId::PELVIS),
    };
    (c, frame)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skeleton::quat_exp;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn canonical_round_trip(
            rv in prop::array::uniform3(-1.2f32..1.2),
            yaw in -3.1f32..3.1,
            t in prop::array::uniform3(-2.0f32..2.0),
            arm in prop::array::uniform3(-1.0f32..1.0),
        ) {
            let s = Skeleton::default();
            let mut p = Pose::rest();
            p.rotations[0] = Quat::from_rotation_y(yaw) * quat_exp(Vec3::new(rv[0] * 0.3, 0.0, rv[2] * 0.3));
            p.rotations[JointId::RIGHT_SHOULDER.index()] = quat_exp(Vec3::from(arm));
            p.translation = Vec3::from(t);
            let (c, frame) = canonicalize(&p, &s);
            // heading is removed: the canonical pelvis faces +Z in the horizontal plane
            let f = c.rotations[0] * Vec3::Z;
            prop_assert!(f.x.abs() < 1e-4, "canonical forward {f}");
            prop_assert!(heading_of(c.rotations[0]).abs() < 1e-3);
            let pure = Quat::from_rotation_y(yaw) * quat_exp(Vec3::new(rv[0] * 0.3, 0.0, 0.0));
            prop_assert!((heading_of(pure) - yaw).abs() < 1e-3);
            let world = s.world_frames(&p);
            let canon = s.world_frames(&c);
            let to_w = frame.to_world();
            for j in 0..22 {
                let back = to_w.apply(canon[j].trans);
                prop_assert!((back - world[j].trans).length() < 1e-4);
            }
            let restored = frame.apply_to_pose(&c);
            let again = s.joint_positions(&restored);
            for j in 0..22 {
                prop_assert!((again[j] - world[j].trans).length() < 1e-4);
            }
        }
    }
}
