//! The canonical skeleton's rest geometry (T-pose) and forward kinematics.

use glam::{Quat, Vec3};

use super::joint::{JOINT_COUNT, JointId};
use super::pose::Pose;
use super::rotation::Rigid;

/// Body proportions that scale the canonical skeleton. All lengths in metres.
#[derive(Copy, Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Proportions {
    /// Standing height, soles to the top of the head (1.5–2.0 m is the supported range).
    pub height: f32,
    /// Biacromial (shoulder) width, outer shoulder to outer shoulder.
    pub shoulder_width: f32,
    /// Hip width at the greater trochanters.
    pub hip_width: f32,
}

impl Default for Proportions {
    /// A 1.75 m adult of average build (anthropometric means, Drillis & Contini 1966).
    fn default() -> Self {
        Self {
            height: 1.75,
            shoulder_width: 0.40,
            hip_width: 0.34,
        }
    }
}

/// Rest geometry of the canonical skeleton: the world position of every joint in the
/// T-pose (metres, +Y up, facing +Z, soles on y = 0, left side at +X). All rest
/// rotations are the identity, so bone `b`'s rest frame is a pure translation to
/// `rest[b]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Skeleton {
    rest: [Vec3; JOINT_COUNT],
}

impl Skeleton {
    /// A skeleton from explicit rest joint positions (T-pose, world frame, metres).
    pub fn from_rest_positions(rest: [Vec3; JOINT_COUNT]) -> Self {
        Self { rest }
    }

    /// The SMPL-like template scaled to the given proportions. Vertical positions are
    /// fractions of the height (Drillis & Contini segment ratios), lateral ones follow
    /// the shoulder and hip widths.
    pub fn from_proportions(p: &Proportions) -> Self {
        let h = p.height;
        let sx = p.shoulder_width;
        let hx = p.hip_width;
        let mut r = [Vec3::ZERO; JOINT_COUNT];
        let mut set = |j: JointId, v: Vec3| r[j.index()] = v;
        let hip_y = 0.505 * h;
        set(
            JointId::PELVIS,
            Vec3::new(0.0, hip_y + 0.045 * h, -0.005 * h),
        );
        for (side, s) in [(1.0f32, true), (-1.0, false)] {
            let pick = |l: JointId| if s { l } else { l.mirror() };
            let hipx = side * 0.26 * hx;
            set(pick(JointId::LEFT_HIP), Vec3::new(hipx, hip_y, 0.0));
            set(
                pick(JointId::LEFT_KNEE),
                Vec3::new(hipx * 1.02, 0.285 * h, 0.004 * h),
            );
            set(
                pick(JointId::LEFT_ANKLE),
                Vec3::new(hipx * 1.02, 0.045 * h, -0.01 * h),
            );
            set(
                pick(JointId::LEFT_FOOT),
                Vec3::new(hipx * 1.08, 0.012 * h, 0.065 * h),
            );
            set(
                pick(JointId::LEFT_COLLAR),
                Vec3::new(side * 0.04 * h, 0.79 * h, -0.012 * h),
            );
            let shx = side * 0.44 * sx;
            set(
                pick(JointId::LEFT_SHOULDER),
                Vec3::new(shx, 0.812 * h, -0.012 * h),
            );
            let elx = shx + side * 0.168 * h;
            set(
                pick(JointId::LEFT_ELBOW),
                Vec3::new(elx, 0.812 * h, -0.016 * h),
            );
            let wrx = elx + side * 0.142 * h;
            set(
                pick(JointId::LEFT_WRIST),
                Vec3::new(wrx, 0.812 * h, -0.012 * h),
            );
        }
        set(JointId::SPINE1, Vec3::new(0.0, 0.61 * h, -0.008 * h));
        set(JointId::SPINE2, Vec3::new(0.0, 0.675 * h, -0.005 * h));
        set(JointId::SPINE3, Vec3::new(0.0, 0.715 * h, -0.008 * h));
        set(JointId::NECK, Vec3::new(0.0, 0.83 * h, -0.016 * h));
        set(JointId::HEAD, Vec3::new(0.0, 0.885 * h, 0.0));
        Self { rest: r }
    }

    /// Rest (T-pose) world position of a joint, metres.
    #[inline]
    pub fn rest_position(&self, j: JointId) -> Vec3 {
        self.rest[j.index()]
    }

    /// All rest positions, indexed by joint.
    pub fn rest_positions(&self) -> &[Vec3; JOINT_COUNT] {
        &self.rest
    }

    /// Rest offset of a joint from its parent (metres); the pelvis's offset is its rest
    /// position.
    pub fn offset(&self, j: JointId) -> Vec3 {
        match j.parent() {
            Some(p) => self.rest[j.index()] - self.rest[p.index()],
            None => self.rest[j.index()],
        }
    }

    /// Forward kinematics: world rotation and position of every joint for `pose`.
    /// Element `b` is joint `b`'s world frame (rotation, joint position).
    pub fn world_frames(&self, pose: &Pose) -> [Rigid; JOINT_COUNT] {
        let mut out = [Rigid::IDENTITY; JOINT_COUNT];
        for j in JointId::all() {
            let local = pose.rotations[j.index()];
            out[j.index()] = match j.parent() {
                None => Rigid::new(local, self.rest[0] + pose.translation),
                Some(p) => {
                    let pf = out[p.index()];
                    Rigid::new((pf.rot * local).normalize(), pf.apply(self.offset(j)))
                }
            };
        }
        out
    }

    /// World joint positions for `pose`, metres.
    pub fn joint_positions(&self, pose: &Pose) -> [Vec3; JOINT_COUNT] {
        self.world_frames(pose).map(|f| f.trans)
    }

    /// Skinning transforms: for each bone, the rigid motion that takes a rest-pose
    /// (T-pose, world frame) point attached to that bone to its posed world position.
    /// This is `world_b ∘ rest_b⁻¹` (the inverse bind matrix folded in).
    pub fn skinning_transforms(&self, pose: &Pose) -> [Rigid; JOINT_COUNT] {
        let w = self.world_frames(pose);
        std::array::from_fn(|b| {
            let f = w[b];
            Rigid::new(f.rot, f.trans - f.rot * self.rest[b])
        })
    }

    /// Uniformly scaled copy of this skeleton (about the origin, so soles stay on y = 0).
    pub fn scaled(&self, s: f32) -> Skeleton {
        Skeleton {
            rest: self.rest.map(|p| p * s),
        }
    }

    /// Rest world rotation of every joint (identity in the T-pose; kept as a function so
    /// callers do not hard-code that fact).
    pub fn rest_rotation(&self, _j: JointId) -> Quat {
        Quat::IDENTITY
    }
}

impl Default for Skeleton {
    fn default() -> Self {
        Self::from_proportions(&Proportions::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skeleton::rotation::quat_exp;

    #[test]
    fn rest_pose_fk_is_rest_geometry() {
        let s = Skeleton::default();
        let pos = s.joint_positions(&Pose::rest());
        for j in JointId::all() {
            assert!((pos[j.index()] - s.rest_position(j)).length() < 1e-6);
        }
        for t in s.skinning_transforms(&Pose::rest()) {
            assert!(t.rot.abs_diff_eq(Quat::IDENTITY, 1e-6) && t.trans.length() < 1e-6);
        }
    }

    #[test]
    fn fk_preserves_bone_lengths_and_moves_children() {
        let s = Skeleton::default();
        let mut pose = Pose::rest();
        pose.rotations[JointId::LEFT_SHOULDER.index()] =
            quat_exp(Vec3::new(0.0, 0.0, -std::f32::consts::FRAC_PI_2));
        pose.translation = Vec3::new(0.1, 0.0, 0.2);
        let pos = s.joint_positions(&pose);
        for j in JointId::all().skip(1) {
            let p = j.parent().unwrap_or(j);
            let l = (pos[j.index()] - pos[p.index()]).length();
            assert!((l - s.offset(j).length()).abs() < 1e-5);
        }
        // left arm rotated −90° about Z hangs down from the shoulder
        let sh = pos[JointId::LEFT_SHOULDER.index()];
        let el = pos[JointId::LEFT_ELBOW.index()];
        assert!((el - sh).normalize().dot(-Vec3::Y) > 0.99);
        // skinning transform maps the rest elbow to the posed elbow
        let t = s.skinning_transforms(&pose)[JointId::LEFT_SHOULDER.index()];
        assert!((t.apply(s.rest_position(JointId::LEFT_ELBOW)) - el).length() < 1e-5);
    }

    #[test]
    fn proportions_are_plausible() {
        let s = Skeleton::from_proportions(&Proportions {
            height: 1.9,
            ..Default::default()
        });
        let head = s.rest_position(JointId::HEAD).y;
        assert!(head > 1.6 && head < 1.9);
        assert!(s.rest_position(JointId::LEFT_SHOULDER).x > 0.0);
        assert!(s.rest_position(JointId::RIGHT_SHOULDER).x < 0.0);
        assert!(s.rest_position(JointId::LEFT_FOOT).z > s.rest_position(JointId::LEFT_ANKLE).z);
    }
}
