//! Where example poses come from: frames of motion clips, and samples of the joint-limit
//! pose space (clips alone never show every pose a performer makes).

use crate::mocap::Clip;
use crate::skeleton::{JOINT_COUNT, Pose, Skeleton, canonicalize, quat_log, sample_pose};

/// A small deterministic random generator (SplitMix64): bakes are reproducible from
/// their seed on any machine.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// From a seed.
    pub fn new(seed: u64) -> Self {
        Self(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f32 {
        let u1 = self.uniform().max(1e-7);
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
    }
}

/// Every `step`-th frame of a clip, in the canonical frame (root translation and
/// heading removed: the statics do not depend on them).
pub fn clip_poses(clip: &Clip, step: usize, skeleton: &Skeleton) -> Vec<Pose> {
    clip.poses
        .iter()
        .step_by(step.max(1))
        .map(|p| canonicalize(p, skeleton).0)
        .collect()
}

/// `n` poses drawn uniformly inside the joint limits shrunk by `scale` (0–1).
pub fn limit_samples(n: usize, scale: f32, rng: &mut Rng) -> Vec<Pose> {
    (0..n)
        .map(|_| sample_pose(|| rng.uniform(), scale))
        .collect()
}

/// A pose as 66 rotation-vector coordinates (for clustering).
pub fn pose_coordinates(p: &Pose) -> [f32; 3 * JOINT_COUNT] {
    let mut out = [0.0; 3 * JOINT_COUNT];
    for j in 0..JOINT_COUNT {
        let r = quat_log(p.rotations[j]);
        out[3 * j] = r.x;
        out[3 * j + 1] = r.y;
        out[3 * j + 2] = r.z;
    }
    out
}
