//! One Euro filtering of poses (Casiez, Roussel and Vogel 2012) in the tangent space of
//! each joint's rotation: little lag when a joint moves fast, strong smoothing when it is
//! still. Per-joint cutoff scales, and a confidence factor that smooths low-confidence
//! joints harder. Time comes in as an argument (seconds).

use glam::Vec3;

use crate::skeleton::{JOINT_COUNT, Pose, quat_exp, quat_log};

/// Filter settings (One Euro parameters; paper defaults where they apply).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FilterConfig {
    /// Minimum cutoff frequency, Hz (smoothing of a still joint; lower: smoother).
    pub min_cutoff: f32,
    /// Speed coefficient (how fast the cutoff rises with angular speed, per rad/s).
    pub beta: f32,
    /// Cutoff of the speed estimate, Hz (paper: 1 Hz).
    pub d_cutoff: f32,
    /// Per-joint factor on `min_cutoff` (22 values; e.g. smaller for the spine).
    pub joint_scale: Vec<f32>,
    /// Pelvis translation: minimum cutoff, Hz.
    pub translation_min_cutoff: f32,
    /// Pelvis translation: speed coefficient, per m/s.
    pub translation_beta: f32,
}

impl Default for FilterConfig {
    fn default() -> Self {
        Self {
            min_cutoff: 1.5,
            beta: 0.4,
            d_cutoff: 1.0,
            joint_scale: vec![1.0; JOINT_COUNT],
            translation_min_cutoff: 1.5,
            translation_beta: 0.7,
        }
    }
}

fn alpha(cutoff: f32, dt: f32) -> f32 {
    let tau = 1.0 / (std::f32::consts::TAU * cutoff.max(1e-3));
    1.0 / (1.0 + tau / dt)
}

/// [`FilterConfig`] as the filter reads it at every pose: the per-joint scales in a
/// fixed array (a joint the config leaves out has scale 1), so that a filter is copied,
/// as the engine does at every pose to apply it atomically, without allocating.
#[derive(Clone, Copy, Debug)]
struct Tuning {
    min_cutoff: f32,
    beta: f32,
    d_cutoff: f32,
    joint_scale: [f32; JOINT_COUNT],
    translation_min_cutoff: f32,
    translation_beta: f32,
}

impl From<&FilterConfig> for Tuning {
    fn from(c: &FilterConfig) -> Self {
        Self {
            min_cutoff: c.min_cutoff,
            beta: c.beta,
            d_cutoff: c.d_cutoff,
            joint_scale: std::array::from_fn(|j| c.joint_scale.get(j).copied().unwrap_or(1.0)),
            translation_min_cutoff: c.translation_min_cutoff,
            translation_beta: c.translation_beta,
        }
    }
}

/// Filter state of one pose stream (plain data: copying it allocates nothing).
#[derive(Clone, Copy, Debug)]
pub struct PoseFilter {
    config: Tuning,
    last: Option<(Pose, f64)>,
    speed: [Vec3; JOINT_COUNT],
    translation_speed: Vec3,
}

impl PoseFilter {
    /// A new stream filtered with `config`.
    pub fn new(config: &FilterConfig) -> Self {
        Self {
            config: config.into(),
            last: None,
            speed: [Vec3::ZERO; JOINT_COUNT],
            translation_speed: Vec3::ZERO,
        }
    }

    /// Filters `raw` observed at time `t` (seconds); `confidence[j]` in [0, 1] scales
    /// joint j's cutoff (1: as configured). Out-of-order or repeated times pass the
    /// previous output through unchanged.
    pub fn apply(&mut self, raw: &Pose, t: f64, confidence: &[f32; JOINT_COUNT]) -> Pose {
        let Some((prev, t0)) = self.last else {
            self.last = Some((*raw, t));
            return *raw;
        };
        let dt = (t - t0) as f32;
        if !(dt > 1e-4 && dt.is_finite()) {
            return prev;
        }
        let c = &self.config;
        let ad = alpha(c.d_cutoff, dt);
        let mut out = *raw;
        for j in 0..JOINT_COUNT {
            let p = prev.rotations[j];
            let mut q = raw.rotations[j];
            if p.dot(q) < 0.0 {
                q = -q;
            }
            // tangent step from the previous output
            let step = quat_log(p.inverse() * q);
            self.speed[j] = self.speed[j].lerp(step / dt, ad);
            let scale = c.joint_scale[j] * confidence[j].clamp(0.05, 1.0);
            let cutoff = c.min_cutoff * scale + c.beta * self.speed[j].length();
            out.rotations[j] = (p * quat_exp(step * alpha(cutoff, dt))).normalize();
        }
        let step = raw.translation - prev.translation;
        self.translation_speed = self.translation_speed.lerp(step / dt, ad);
        let cutoff =
            c.translation_min_cutoff + c.translation_beta * self.translation_speed.length();
        out.translation = prev.translation + step * alpha(cutoff, dt);
        self.last = Some((out, t));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skeleton::JointId;
    use glam::Quat;

    fn arm(angle: f32) -> Pose {
        let mut p = Pose::rest();
        p.set_rotation(JointId::LEFT_ELBOW, Quat::from_rotation_y(angle));
        p
    }

    #[test]
    fn jitter_is_smoothed_and_fast_moves_follow() {
        let ones = [1.0; JOINT_COUNT];
        let mut f = PoseFilter::new(&FilterConfig::default());
        let mut rng = 7u64;
        let (mut raw_jitter, mut out_jitter) = (0.0f32, 0.0f32);
        let mut prev_out: Option<f32> = None;
        for i in 0..90 {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let noise = ((rng >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.06;
            let out = f.apply(&arm(0.5 + noise), f64::from(i) / 30.0, &ones);
            let a = out
                .rotation(JointId::LEFT_ELBOW)
                .angle_between(Quat::IDENTITY);
            if let Some(p) = prev_out {
                out_jitter += (a - p).abs();
                raw_jitter += 0.06 / 3.0;
            }
            prev_out = Some(a);
        }
        assert!(
            out_jitter < 0.5 * raw_jitter,
            "still joint not smoothed: {out_jitter} vs ~{raw_jitter}"
        );
        // a fast 1.2 rad move is followed within a few frames
        let mut last = 0.0;
        for i in 90..100 {
            let out = f.apply(&arm(1.7), f64::from(i) / 30.0, &ones);
            last = out
                .rotation(JointId::LEFT_ELBOW)
                .angle_between(Quat::IDENTITY);
        }
        assert!((last - 1.7).abs() < 0.1, "lags: {last}");
        // low confidence smooths harder
        let mut lo = PoseFilter::new(&FilterConfig::default());
        let mut hi = PoseFilter::new(&FilterConfig::default());
        let half = [0.2; JOINT_COUNT];
        lo.apply(&arm(0.0), 0.0, &half);
        hi.apply(&arm(0.0), 0.0, &ones);
        let a_lo = lo
            .apply(&arm(0.05), 1.0 / 30.0, &half)
            .rotation(JointId::LEFT_ELBOW)
            .angle_between(Quat::IDENTITY);
        let a_hi = hi
            .apply(&arm(0.05), 1.0 / 30.0, &ones)
            .rotation(JointId::LEFT_ELBOW)
            .angle_between(Quat::IDENTITY);
        assert!(a_lo < a_hi);
        // out-of-order time: previous output unchanged
        let before = hi.apply(&arm(0.3), 0.5, &ones);
        assert_eq!(hi.apply(&arm(1.0), 0.4, &ones), before);
    }
}
