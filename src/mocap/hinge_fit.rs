//! How far a retargeted clip's elbows and knees bend from the canonical skeleton's
//! hinges, and the profile correction that turns them back.
//!
//! A rotation source's rest pose fixes how each bone is turned about itself. When a
//! source's rest pose has an upper arm (or thigh) turned about its own axis relative to
//! the canonical T-pose, the automatic rest-pose correction, a smallest swing, keeps
//! that turn: the forearm then bends about an axis turned as much from the canonical
//! hinge, in every frame. CMU's BVH conversion is such a source (its hanging arms,
//! 35° on both clips here). The avatar still moves as the performer, but its upper arms
//! disagree with every other source, the joint limits and the examples baked from other
//! clips by that twist. `clothcast retarget` prints this fit for the clip it reads.

use std::f32::consts::PI;

use glam::Vec3;

use super::Profile;
use super::kinect::{HINGES, turn_about};
use crate::skeleton::{JointId, Pose, Skeleton, quat_exp, quat_log};

/// Bend (degrees between the two bones) from which a frame says where the hinge is:
/// a nearly straight limb's bend direction is noise.
pub const HINGE_FIT_MIN_BEND: f32 = 25.0;

/// Frames bent past [`HINGE_FIT_MIN_BEND`] a fit needs before it suggests a correction.
pub const HINGE_FIT_MIN_FRAMES: usize = 30;

/// Offset (degrees) beyond which a consistent fit suggests a correction: smaller turns
/// are within what a performer's own anatomy and a suit's placement give.
pub const HINGE_FIT_SUGGEST: f32 = 5.0;

/// Spread (degrees, RMS about the mean) under which the offset counts as the source's
/// rest pose rather than the performer's motion.
pub const HINGE_FIT_CONSISTENT: f32 = 10.0;

/// Where one limb's hinge bends over a clip, in the upper bone's frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HingeFit {
    /// The upper bone's joint (`LEFT_SHOULDER`, `RIGHT_SHOULDER`, `LEFT_HIP`,
    /// `RIGHT_HIP`); the hinge is its child, the end of the lower bone its grandchild.
    pub upper: JointId,
    /// The axis the offset is measured about: the lower bone's rest direction on the
    /// skeleton fitted (nearly x for the arms, −y for the legs), unit.
    pub axis: Vec3,
    /// Frames bent past [`HINGE_FIT_MIN_BEND`].
    pub frames: usize,
    /// Mean signed turn about `axis` (degrees, right-handed) from the canonical bend
    /// direction (the forearm forwards, the shin backwards) to the clip's, weighted by
    /// each frame's bend; 0 where no frame is bent enough.
    pub offset: f32,
    /// RMS of the frames' turns about that mean, degrees.
    pub spread: f32,
}

impl HingeFit {
    /// The hinge joint (elbow, knee).
    pub fn hinge(&self) -> Option<JointId> {
        self.upper.children().next()
    }

    /// Whether the clip shows enough bent frames, consistently turned, for the offset
    /// to be the source's rest pose.
    pub fn consistent(&self) -> bool {
        self.frames >= HINGE_FIT_MIN_FRAMES && self.spread < HINGE_FIT_CONSISTENT
    }

    /// The `[correction]` entries (canonical joint, rotation vector in degrees) that
    /// `profile`, which read the clip, needs instead of its own for these three joints
    /// so that this limb bends about the canonical hinge: its correction followed by a
    /// turn by the offset back about the lower bone. `None` unless the fit is
    /// [`consistent`](Self::consistent) and more than [`HINGE_FIT_SUGGEST`] off.
    /// Turning all three joints keeps the lower bones' and the hand's or foot's rest
    /// relation to the upper bone; joint positions do not change.
    pub fn correction(&self, profile: &Profile) -> Option<Vec<(JointId, Vec3)>> {
        if !self.consistent() || self.offset.abs() <= HINGE_FIT_SUGGEST {
            return None;
        }
        let hinge = self.hinge()?;
        let end = hinge.children().next()?;
        let further = quat_exp(self.axis * self.offset.to_radians());
        Some(
            [self.upper, hinge, end]
                .into_iter()
                .map(|j| {
                    let had = quat_exp(profile.correction[j.index()]);
                    (j, quat_log((had * further).normalize()) * (180.0 / PI))
                })
                .collect(),
        )
    }
}

/// The fit of each hinged limb (left arm, right arm, left leg, right leg) over `poses`,
/// retargeted onto `skeleton` (local rotations; the canonical T-pose's bones along its
/// rest offsets). Frames whose limb is bent less than [`HINGE_FIT_MIN_BEND`] are left
/// out.
pub fn hinge_fit(poses: &[Pose], skeleton: &Skeleton) -> [HingeFit; 4] {
    HINGES.map(|(upper, _, flex, axis)| {
        let Some(hinge) = upper.children().next() else {
            return empty(upper, axis);
        };
        let Some(lower) = hinge
            .children()
            .next()
            .and_then(|end| skeleton.offset(end).try_normalize())
        else {
            return empty(upper, axis);
        };
        let axis = lower;
        // each bent frame's turn about the bone, weighted by its bend
        let turns: Vec<(f32, f32)> = poses
            .iter()
            .filter_map(|pose| {
                let bent = pose.rotation(hinge) * lower;
                let bend = bent.angle_between(lower);
                // (a NaN bend is not bent either)
                if bend.to_degrees().partial_cmp(&HINGE_FIT_MIN_BEND)
                    != Some(std::cmp::Ordering::Greater)
                {
                    return None;
                }
                Some((turn_about(axis, flex, bent)?, bend))
            })
            .collect();
        let (s, c, w) = turns
            .iter()
            .fold((0.0f32, 0.0f32, 0.0f32), |(s, c, w), &(t, b)| {
                (s + b * t.sin(), c + b * t.cos(), w + b)
            });
        if turns.is_empty() || w <= 0.0 {
            return empty(upper, axis);
        }
        let mean = s.atan2(c);
        let spread = (turns
            .iter()
            .map(|&(t, b)| b * (t - mean).sin().atan2((t - mean).cos()).powi(2))
            .sum::<f32>()
            / w)
            .sqrt();
        HingeFit {
            upper,
            axis,
            frames: turns.len(),
            offset: mean.to_degrees(),
            spread: spread.to_degrees(),
        }
    })
}

fn empty(upper: JointId, axis: Vec3) -> HingeFit {
    HingeFit {
        upper,
        axis,
        frames: 0,
        offset: 0.0,
        spread: 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mocap::{Bvh, Clip};

    /// The two CMU clips: 131_01 (the default database's) and 131_03.
    const CLIPS: [(&str, &str); 2] = [
        ("cmu_131_01.bvh", crate::bake::DEFAULT_CLIP),
        (
            "cmu_131_03.bvh",
            include_str!("../../tests/fixtures/mocap/cmu_131_03.bvh"),
        ),
    ];

    /// Synthetic arms and legs bent about hinges turned by known angles about their
    /// bones are measured back within a tenth of a degree, whatever the bend; straight
    /// limbs say nothing.
    #[test]
    fn a_turned_hinge_is_measured() {
        let skel = Skeleton::default();
        for (k, turn) in [-40.0f32, -12.0, 0.0, 7.5, 33.0].into_iter().enumerate() {
            let poses: Vec<Pose> = (0..60)
                .map(|f| {
                    let bend = (30.0 + f as f32).to_radians();
                    let mut p = Pose::rest();
                    for (upper, _, flex, axis) in HINGES {
                        let hinge = upper.children().next().expect("hinge");
                        let end = hinge.children().next().expect("end");
                        let lower = skel.offset(end).normalize();
                        let _ = axis;
                        // the bend axis carries the lower bone towards the flex
                        // direction, turned about the bone
                        let across = (flex - lower * flex.dot(lower)).normalize();
                        let towards =
                            glam::Quat::from_axis_angle(lower, turn.to_radians()) * across;
                        let r = glam::Quat::from_axis_angle(lower.cross(towards).normalize(), bend);
                        p.set_rotation(hinge, r);
                    }
                    // a straight frame now and then
                    if f % 10 == 0 { Pose::rest() } else { p }
                })
                .collect();
            for fit in hinge_fit(&poses, &skel) {
                assert_eq!(fit.frames, 54, "{k}: {fit:?}");
                assert!((fit.offset - turn).abs() < 0.1, "{fit:?} against {turn}");
                assert!(fit.spread < 0.1, "{fit:?}");
                let suggested = fit.correction(&Profile::builtin("unity").expect("unity"));
                assert_eq!(
                    suggested.is_some(),
                    turn.abs() > HINGE_FIT_SUGGEST,
                    "{fit:?}"
                );
            }
        }
        assert!(
            hinge_fit(&[Pose::rest(); 40], &skel)
                .iter()
                .all(|f| f.frames == 0)
        );
    }

    /// Read without its `[correction]`, CMU's elbows are 32–33° off and the fit suggests
    /// the corrections the profile carries (within half a degree); read with half of
    /// them, the same; with them, every hinge is within a degree and nothing is
    /// suggested. The knees were never off.
    #[test]
    fn cmu_hinges_fit_the_profiles_correction() {
        let skel = Skeleton::default();
        let shipped = Profile::builtin("cmu").expect("cmu");
        let mut bare = shipped.clone();
        bare.correction = Default::default();
        let mut half = shipped.clone();
        half.correction = shipped.correction.map(|c| c * 0.5);
        for (name, text) in CLIPS {
            let bvh = Bvh::parse(text).expect("bvh");
            let fits = |profile: &Profile| {
                let clip = Clip::from_bvh(&bvh, Some(profile), &skel).expect("clip");
                hinge_fit(&clip.poses, &skel)
            };
            for profile in [&bare, &half] {
                for fit in fits(profile) {
                    assert!(fit.consistent(), "{name}: {fit:?}");
                    let arm = matches!(fit.upper, JointId::LEFT_SHOULDER | JointId::RIGHT_SHOULDER);
                    let Some(c) = fit.correction(profile) else {
                        assert!(!arm, "{name}: {fit:?}");
                        continue;
                    };
                    assert!(arm, "{name}: a leg's correction {fit:?}");
                    for (j, v) in c {
                        let want = shipped.correction[j.index()] * (180.0 / PI);
                        assert!(
                            (v - want).length() < 0.5,
                            "{name} {j:?}: suggests {v}°, the profile has {want}°"
                        );
                    }
                }
            }
            for fit in fits(&shipped) {
                assert!(fit.offset.abs() < 1.0, "{name}: {fit:?}");
                assert!(fit.correction(&shipped).is_none(), "{name}: {fit:?}");
            }
        }
    }
}
