//! `Pose`: root translation and one local rotation per canonical joint.

use glam::{Quat, Vec3};

use super::joint::{JOINT_COUNT, JointId};

/// A pose of the canonical skeleton (DESIGN §2).
///
/// Invariants: every rotation is a finite unit quaternion (checked by [`Pose::validate`]);
/// `translation` is the displacement of the pelvis from its rest position (metres, world
/// frame), so [`Pose::rest`] is the same for every body.
#[derive(Copy, Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Pose {
    /// Displacement of the pelvis joint from its rest position, metres, world frame.
    pub translation: Vec3,
    /// Local rotation of each joint relative to its parent's frame (the pelvis: relative
    /// to the world), indexed by [`JointId`]. Identity everywhere is the T-pose.
    pub rotations: [Quat; JOINT_COUNT],
}

/// Why a pose was refused.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum PoseError {
    /// A rotation or the translation has a NaN or infinite component.
    #[error("pose has a non-finite value at {0}")]
    NonFinite(&'static str),
    /// A rotation is far from unit length (more than 1 % off), so it is not a rotation.
    #[error("rotation of joint {joint} is not a unit quaternion (norm {norm})")]
    NotUnit {
        /// The joint whose rotation is wrong.
        joint: JointId,
        /// Its norm.
        norm: f32,
    },
}

impl Default for Pose {
    fn default() -> Self {
        Self::rest()
    }
}

impl Pose {
    /// The rest pose (T-pose, no translation).
    pub const fn rest() -> Self {
        Self {
            translation: Vec3::ZERO,
            rotations: [Quat::IDENTITY; JOINT_COUNT],
        }
    }

    /// The rest pose with both arms lowered by `degrees` at the shoulders, about the
    /// body's forward axis (45: an A-pose; 90 would put the arms along the sides).
    pub fn arms_lowered(degrees: f32) -> Self {
        let a = degrees.to_radians();
        let mut p = Self::rest();
        p.set_rotation(JointId::LEFT_SHOULDER, Quat::from_rotation_z(-a));
        p.set_rotation(JointId::RIGHT_SHOULDER, Quat::from_rotation_z(a));
        p
    }

    /// A pose from a root translation (metres) and local rotations (x, y, z, w) in
    /// joint order, as a frame message's body pose carries them: each rotation
    /// normalised, joints past the end of `rotations` at rest. Check outside values
    /// first ([`Pose::validate`], or the frame's `body_pose`).
    pub fn from_arrays(translation: [f32; 3], rotations: &[[f32; 4]]) -> Self {
        Self {
            translation: Vec3::from(translation),
            rotations: std::array::from_fn(|j| {
                rotations
                    .get(j)
                    .map_or(Quat::IDENTITY, |&q| Quat::from_array(q).normalize())
            }),
        }
    }

    /// Local rotation of joint `j`.
    #[inline]
    pub fn rotation(&self, j: JointId) -> Quat {
        self.rotations[j.index()]
    }

    /// Sets the local rotation of joint `j`.
    #[inline]
    pub fn set_rotation(&mut self, j: JointId, q: Quat) {
        self.rotations[j.index()] = q;
    }

    /// Checks that every value is finite and every rotation is unit length within 1 %,
    /// then renormalises the rotations. Use on any pose that came from outside.
    pub fn validate(&mut self) -> Result<(), PoseError> {
        if !self.translation.is_finite() {
            return Err(PoseError::NonFinite("translation"));
        }
        for j in JointId::all() {
            let q = &mut self.rotations[j.index()];
            if !q.is_finite() {
                return Err(PoseError::NonFinite(j.name()));
            }
            let n = q.length();
            if (n - 1.0).abs() > 0.01 {
                return Err(PoseError::NotUnit { joint: j, norm: n });
            }
            *q /= n;
        }
        Ok(())
    }

    /// Spherical interpolation between two poses (`t = 0` → `self`), for
    /// quasi-static continuation and resampling clips.
    pub fn slerp(&self, other: &Pose, t: f32) -> Pose {
        Pose {
            translation: self.translation.lerp(other.translation, t),
            rotations: std::array::from_fn(|i| {
                let (a, mut b) = (self.rotations[i], other.rotations[i]);
                if a.dot(b) < 0.0 {
                    b = -b;
                }
                a.slerp(b, t).normalize()
            }),
        }
    }

    /// Mirror image of the pose across the body's sagittal plane (x → −x), with left and
    /// right joints swapped.
    pub fn mirrored(&self) -> Pose {
        let m = |q: Quat| Quat::from_xyzw(q.x, -q.y, -q.z, q.w);
        Pose {
            translation: Vec3::new(-self.translation.x, self.translation.y, self.translation.z),
            rotations: std::array::from_fn(
                |i| m(self.rotations[JointId(i as u8).mirror().index()]),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skeleton::{Skeleton, quat_exp};

    /// A frame's arrays become a pose: translation as given, rotations normalised,
    /// joints the list does not reach at rest.
    #[test]
    fn from_arrays_normalises_and_pads_with_rest() {
        let p = Pose::from_arrays(
            [0.1, 0.9, -0.2],
            &[[0.0, 0.0, 0.0, 2.0], [0.0, 0.6, 0.0, 0.8]],
        );
        assert_eq!(p.translation, Vec3::new(0.1, 0.9, -0.2));
        assert_eq!(p.rotations[0], Quat::IDENTITY);
        assert!((p.rotations[1].length() - 1.0).abs() < 1e-6);
        assert!(p.rotations[1].abs_diff_eq(Quat::from_xyzw(0.0, 0.6, 0.0, 0.8), 1e-6));
        assert!(p.rotations[2..].iter().all(|q| *q == Quat::IDENTITY));
    }

    #[test]
    fn validate_refuses_nan_and_non_unit() {
        let mut p = Pose::rest();
        p.rotations[3] = Quat::from_xyzw(f32::NAN, 0.0, 0.0, 1.0);
        assert_eq!(p.validate(), Err(PoseError::NonFinite("spine1")));
        let mut p = Pose::rest();
        p.rotations[5] = Quat::from_xyzw(0.0, 0.0, 0.0, 2.0);
        assert!(matches!(p.validate(), Err(PoseError::NotUnit { .. })));
        let mut p = Pose::rest();
        p.rotations[5] = Quat::from_xyzw(0.0, 0.0, 0.0, 1.005);
        assert!(p.validate().is_ok());
        assert!((p.rotations[5].length() - 1.0).abs() < 1e-6);
    }

    #[test]
    fn mirrored_pose_mirrors_joint_positions() {
        let s = Skeleton::default();
        let mut p = Pose::rest();
        p.rotations[JointId::LEFT_SHOULDER.index()] = quat_exp(Vec3::new(0.3, -0.5, 0.8));
        p.rotations[JointId::SPINE2.index()] = quat_exp(Vec3::new(0.2, 0.4, 0.1));
        p.translation = Vec3::new(0.2, 0.1, 0.3);
        let a = s.joint_positions(&p);
        let b = s.joint_positions(&p.mirrored());
        for j in JointId::all() {
            let pa = a[j.index()];
            let pb = b[j.mirror().index()];
            // the default skeleton is symmetric
            assert!(
                (Vec3::new(-pa.x, pa.y, pa.z) - pb).length() < 1e-4,
                "{j}: {pa} vs {pb}"
            );
        }
    }
}
