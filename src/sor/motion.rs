//! Bone motions between two poses and their derivatives in the joint angles: the
//! kinematic pieces of SOR Eq. 1 and of the SOR sensitivity s̄ (Eq. 6).

use glam::{Mat3A, Quat, Vec3, Vec3A};

use crate::skeleton::{DOF_COUNT, JOINT_COUNT, JointId, Pose, Rigid, Skeleton};

/// The rigid motion of every bone from an example pose to an input pose (SOR Eq. 1's
/// R_b, T_b), written about the bone's joint: x_in = R_b (x_J − c_b^J) + c_b^in, and the
/// joint translation t_b = c_b^in − c_b^J used by the translation weights.
#[derive(Copy, Clone, Debug)]
pub struct BoneMotion {
    /// R_b as a matrix.
    pub rot: [Mat3A; JOINT_COUNT],
    /// R_b as a quaternion.
    pub quat: [Quat; JOINT_COUNT],
    /// c_b^J, joint positions at the example pose.
    pub from: [Vec3A; JOINT_COUNT],
    /// c_b^in, joint positions at the input pose.
    pub to: [Vec3A; JOINT_COUNT],
}

impl BoneMotion {
    /// Motion from the example frames to the input frames (from
    /// [`Skeleton::world_frames`]).
    pub fn new(example: &[Rigid; JOINT_COUNT], input: &[Rigid; JOINT_COUNT]) -> Self {
        let quat: [Quat; JOINT_COUNT] =
            std::array::from_fn(|b| (input[b].rot * example[b].rot.conjugate()).normalize());
        Self {
            rot: quat.map(Mat3A::from_quat),
            quat,
            from: example.map(|f| Vec3A::from(f.trans)),
            to: input.map(|f| Vec3A::from(f.trans)),
        }
    }

    /// Identity motion (input = example).
    pub fn identity(frames: &[Rigid; JOINT_COUNT]) -> Self {
        Self::new(frames, frames)
    }

    /// Where bone `b` carries point `x`.
    #[inline]
    pub fn apply(&self, b: usize, x: Vec3A) -> Vec3A {
        self.rot[b] * (x - self.from[b]) + self.to[b]
    }

    /// Joint translation t_b.
    #[inline]
    pub fn translation(&self, b: usize) -> Vec3A {
        self.to[b] - self.from[b]
    }
}

/// Derivatives of bone motions in the 66 joint angles at a pose: DOF m = 3·j + axis
/// turns every bone in the subtree of joint j about c_j with angular velocity
/// ω_m = W_j e_axis (W_j joint j's world rotation), matching Θ's definition
/// (local rotation q_j · exp(δ e_axis)).
#[derive(Clone, Debug)]
pub struct PoseDerivatives {
    /// ω_m per DOF (world frame).
    pub omega: [Vec3; DOF_COUNT],
    /// Joint position per bone at the pose.
    pub joint: [Vec3; JOINT_COUNT],
    /// `in_subtree[b]` is a bitmask over joints j: bit j set when b is in j's subtree.
    pub ancestors: [u32; JOINT_COUNT],
}

impl PoseDerivatives {
    /// At `pose` on `skeleton`.
    pub fn new(skeleton: &Skeleton, pose: &Pose) -> Self {
        let frames = skeleton.world_frames(pose);
        let omega = std::array::from_fn(|m| {
            let mut e = Vec3::ZERO;
            e[m % 3] = 1.0;
            frames[m / 3].rot * e
        });
        let ancestors = std::array::from_fn(|b| {
            let mut mask = 0u32;
            let mut j = Some(JointId(b as u8));
            while let Some(x) = j {
                mask |= 1 << x.index();
                j = x.parent();
            }
            mask
        });
        Self {
            omega,
            joint: frames.map(|f| f.trans),
            ancestors,
        }
    }

    /// Velocity of a point `x` rigidly attached to bone `b` when DOF `m` changes.
    #[inline]
    pub fn point_velocity(&self, b: usize, m: usize, x: Vec3) -> Vec3 {
        let j = m / 3;
        if self.ancestors[b] & (1 << j) == 0 {
            Vec3::ZERO
        } else {
            self.omega[m].cross(x - self.joint[j])
        }
    }

    /// Velocity of joint `b`'s position when DOF `m` changes (∂t_b/∂Θ_m).
    #[inline]
    pub fn joint_velocity(&self, b: usize, m: usize) -> Vec3 {
        self.point_velocity(b, m, self.joint[b])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skeleton::{apply_theta, quat_exp};

    #[test]
    fn derivatives_match_finite_differences_of_the_motion() {
        let skel = Skeleton::default();
        let mut pose = Pose::rest();
        pose.set_rotation(JointId::SPINE2, quat_exp(Vec3::new(0.2, 0.3, -0.1)));
        pose.set_rotation(JointId::LEFT_SHOULDER, quat_exp(Vec3::new(0.1, -0.4, -0.6)));
        let d = PoseDerivatives::new(&skel, &pose);
        let base = skel.world_frames(&pose);
        let x = Vec3::new(0.5, 1.3, 0.05);
        let h = 1e-3f32;
        for m in [0, 7, 18, 19, 48, 50, 54] {
            let mut th = [0.0f32; DOF_COUNT];
            th[m] = h;
            let moved = skel.world_frames(&apply_theta(&pose, &th));
            let motion = BoneMotion::new(&base, &moved);
            for b in [
                JointId::LEFT_ELBOW.index(),
                JointId::SPINE3.index(),
                JointId::RIGHT_KNEE.index(),
            ] {
                let fd = (Vec3::from(motion.apply(b, Vec3A::from(x))) - x) / h;
                let an = d.point_velocity(b, m, x);
                assert!(
                    (fd - an).length() < 2e-3 * (1.0 + an.length()),
                    "m {m} b {b}: {fd} vs {an}"
                );
                let fdt = Vec3::from(motion.translation(b)) / h;
                assert!((fdt - d.joint_velocity(b, m)).length() < 2e-3);
            }
        }
    }
}
