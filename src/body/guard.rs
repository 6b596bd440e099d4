//! Keeping the arms out of the torso. Motion capture of a slimmer or differently built
//! performer often puts the body's upper arms inside its chest (relaxed arms hang
//! against the sides); cloth trapped there has no valid rest state. The guard measures
//! the body's torso half-width by height and its upper-arm radius once, and lifts an arm
//! sideways (about the chest's front–back axis, at the shoulder) just enough that the
//! elbow and mid-upper-arm clear the torso by a margin. Poses that already clear it are
//! returned unchanged.

use glam::{Quat, Vec3};

use crate::skeleton::{JointId, Pose};

use super::body::Body;

/// Heights at which the torso half-width is tabulated.
const BANDS: usize = 24;

/// Precomputed body measurements for [`SelfContactGuard::apply`].
#[derive(Clone, Debug)]
pub struct SelfContactGuard {
    /// Torso half-width |x| by height band (rest pose, chest-centred), metres.
    half_width: [f32; BANDS],
    /// Half-depth of the torso (front–back), metres.
    half_depth: f32,
    y0: f32,
    y1: f32,
    /// Upper-arm radius, metres.
    arm_radius: f32,
    /// Gap kept between arm and torso surfaces, metres.
    clearance: f32,
    skeleton: crate::skeleton::Skeleton,
}

impl SelfContactGuard {
    /// Measures `body`; `clearance` is the gap to keep (metres; two cloth margins plus
    /// a little is a good value: 0.015).
    pub fn new(body: &Body, clearance: f32) -> Self {
        let sk = body.skeleton.clone();
        let y0 = sk.rest_position(JointId::LEFT_HIP).y;
        let y1 = sk.rest_position(JointId::LEFT_SHOULDER).y;
        let arms = [
            JointId::LEFT_SHOULDER,
            JointId::RIGHT_SHOULDER,
            JointId::LEFT_ELBOW,
            JointId::RIGHT_ELBOW,
            JointId::LEFT_WRIST,
            JointId::RIGHT_WRIST,
        ];
        let legs = [
            JointId::LEFT_HIP,
            JointId::RIGHT_HIP,
            JointId::LEFT_KNEE,
            JointId::RIGHT_KNEE,
        ];
        let mut half_width = [0.0f32; BANDS];
        let mut half_depth = 0.0f32;
        let mut arm_radius = 0.0f32;
        let sh = sk.rest_position(JointId::LEFT_SHOULDER);
        let el = sk.rest_position(JointId::LEFT_ELBOW);
        for (v, p) in body.mesh.positions.iter().enumerate() {
            let dominant = JointId(body.skin.joints[v][0] as u8);
            let arm_w: f32 = arms
                .iter()
                .map(|&j| body.skin.weight_of(v, j.index()))
                .sum();
            let leg_w: f32 = legs
                .iter()
                .map(|&j| body.skin.weight_of(v, j.index()))
                .sum();
            if dominant == JointId::LEFT_SHOULDER
                && p.x > sh.x + 0.3 * (el.x - sh.x)
                && p.x < sh.x + 0.8 * (el.x - sh.x)
            {
                arm_radius = arm_radius.max(Vec3::new(0.0, p.y - sh.y, p.z - sh.z).length());
            }
            if arm_w < 0.05 && leg_w < 0.5 && p.y >= y0 && p.y <= y1 {
                let b = (((p.y - y0) / (y1 - y0)) * (BANDS - 1) as f32).round() as usize;
                half_width[b.min(BANDS - 1)] = half_width[b.min(BANDS - 1)].max(p.x.abs());
                half_depth = half_depth.max(p.z.abs());
            }
        }
        // fill empty bands from neighbours
        for b in 1..BANDS {
            if half_width[b] == 0.0 {
                half_width[b] = half_width[b - 1];
            }
        }
        Self {
            half_width,
            half_depth,
            y0,
            y1,
            arm_radius: arm_radius.max(0.03),
            clearance,
            skeleton: sk,
        }
    }

    fn width_at(&self, y: f32) -> Option<f32> {
        if y < self.y0 || y > self.y1 {
            return None;
        }
        let b = (((y - self.y0) / (self.y1 - self.y0)) * (BANDS - 1) as f32).round() as usize;
        Some(self.half_width[b.min(BANDS - 1)])
    }

    /// The pose with each upper arm lifted out of the torso where needed.
    pub fn apply(&self, pose: &Pose) -> Pose {
        let mut p = *pose;
        for (shj, elj, side) in [
            (JointId::LEFT_SHOULDER, JointId::LEFT_ELBOW, 1.0f32),
            (JointId::RIGHT_SHOULDER, JointId::RIGHT_ELBOW, -1.0),
        ] {
            for _ in 0..4 {
                let frames = self.skeleton.world_frames(&p);
                let chest = frames[JointId::SPINE3.index()];
                let c_rest = self.skeleton.rest_position(JointId::SPINE3);
                let to_chest = |x: Vec3| chest.rot.conjugate() * (x - chest.trans) + c_rest;
                let s = to_chest(frames[shj.index()].trans);
                let e = to_chest(frames[elj.index()].trans);
                // the lateral gap needed at the elbow and half way down the upper arm
                let mut lift = 0.0f32;
                for t in [0.5f32, 1.0] {
                    let q = s.lerp(e, t);
                    if q.z.abs() > self.half_depth + self.arm_radius {
                        continue;
                    }
                    if let Some(w) = self.width_at(q.y) {
                        let need = w + self.arm_radius + self.clearance;
                        let have = q.x * side;
                        if have < need {
                            let len = (q - s).length().max(1e-3);
                            lift = lift.max(((need - have) / len).clamp(0.0, 1.0).asin());
                        }
                    }
                }
                if lift < 1e-3 {
                    break;
                }
                // turn the arm outwards about the chest's front–back axis at the shoulder
                let axis = chest.rot * Vec3::Z;
                let r = Quat::from_axis_angle(axis, side * lift);
                let parent = frames[shj.parent().map(|x| x.index()).unwrap_or(0)].rot;
                let world = (r * frames[shj.index()].rot).normalize();
                p.set_rotation(shj, (parent.conjugate() * world).normalize());
            }
        }
        p
    }
}
