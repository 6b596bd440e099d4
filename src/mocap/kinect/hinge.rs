//! Twist of the upper arm and the thigh for position sources, from the hinge below them.
//!
//! Joint positions fix each bone's direction but not its turn about itself. The elbow
//! and the knee are hinges, so while one is bent the plane of the limb fixes the twist
//! of the bone above it: the forearm (shin) must bend about the hinge's axis, which
//! turns with the upper arm (thigh). Swinging each bone by the smallest rotation, as
//! the other bones are, leaves that twist wherever the swing happens to put it (on CMU
//! 131_03 seen as Kinect joints: the thighs' world rotations 12–13° from the clip's on
//! average, the elbows bending up to 70° off their hinge).

use glam::{Quat, Vec3};

use super::Src;
use crate::skeleton::{JointId, Pose, swing_twist};

/// The limbs whose middle joint is a hinge: the upper bone's joint, the source joint at
/// the end of the lower bone, the direction the lower bone bends towards in the upper
/// bone's frame at rest (the T-pose; `skeleton::limits`: elbow flexion brings the
/// forearm forward, about the upper arm's y axis; knee flexion the foot backwards,
/// about the thigh's x axis), and the axis the upper bone lies along at rest.
pub(in crate::mocap) const HINGES: [(JointId, Src, Vec3, Vec3); 4] = [
    (JointId::LEFT_SHOULDER, Src::WristL, Vec3::Z, Vec3::X),
    (JointId::RIGHT_SHOULDER, Src::WristR, Vec3::Z, Vec3::X),
    (JointId::LEFT_HIP, Src::AnkleL, Vec3::NEG_Z, Vec3::Y),
    (JointId::RIGHT_HIP, Src::AnkleR, Vec3::NEG_Z, Vec3::Y),
];

/// Bend of a hinge (degrees between the two bones) from which the lower bone's
/// direction starts to set the upper bone's twist, and from which it sets it alone.
/// Below it, a straight limb's jitter would spin the twist.
pub(super) const HINGE_BEND: (f32, f32) = (10.0, 25.0);

/// The same when the lower bone bends to the far side of the twist held so far (more
/// than 90° from it): a straight elbow or knee bent slightly backwards (a
/// hyperextension of 10–15° is common) must not read as the upper bone turned half
/// round, while a real bend after the twist changed unseen is followed.
pub(super) const HINGE_BEND_AGAINST: (f32, f32) = (30.0, 45.0);

/// The upper bone of a hinged limb (shoulder, hip), whose smallest swing onto its
/// observed direction `bone` (world frame) is the world rotation `swing`, turned about
/// `bone` so that the lower bone (`lower`: elbow to wrist, knee to ankle, world frame)
/// bends towards `flex` (see [`HINGES`]): its twist read from where the forearm or shin
/// points. While the limb is nearly straight that direction says nothing, so the
/// twist of `held` (the bone's world rotation last frame) is kept, blended into the
/// observed one as the limb bends ([`HINGE_BEND`], [`HINGE_BEND_AGAINST`]).
pub(super) fn hinge_twist(
    swing: Quat,
    bone: Vec3,
    lower: Option<Vec3>,
    flex: Vec3,
    held: Quat,
) -> Quat {
    let Some(axis) = bone.try_normalize() else {
        return swing;
    };
    // angles about the bone from where the swing leaves the bend direction
    let n = swing * flex;
    let hold = turn_about(axis, n, held * flex).unwrap_or(0.0);
    let seen = lower.and_then(|l| {
        let bend = l.angle_between(axis).to_degrees();
        let to = turn_about(axis, n, l)?;
        let d = wrap(to - hold);
        let (lo, hi) = if d.abs() <= std::f32::consts::FRAC_PI_2 {
            HINGE_BEND
        } else {
            HINGE_BEND_AGAINST
        };
        let t = ramp(bend, (lo, hi));
        t.is_finite().then_some(d * t)
    });
    let twist = hold + seen.unwrap_or(0.0);
    (Quat::from_axis_angle(axis, twist) * swing).normalize()
}

/// `pose` with the upper arms' and thighs' local rotations turned back about their own
/// bones (the canonical T-pose's: the arms along x, the thighs along y) so that no
/// twist is left in them, only their swing: what a position source's calibration keeps
/// of them (see `engine::InputState::calibrate`).
pub fn without_hinge_twist(pose: &Pose) -> Pose {
    let mut out = *pose;
    for (j, _, _, axis) in HINGES {
        let (swing, _) = swing_twist(pose.rotation(j), axis);
        out.set_rotation(j, swing.normalize());
    }
    out
}

/// `rotation` (a bone's world rotation) turned about the unit `axis` (world frame) so
/// that its local direction `local` points, across the axis, where `target` (world
/// frame) does: the head turned to the line of its ears. `None` where `target` lies
/// along the axis (it says nothing of the turn).
pub(super) fn twist_onto(rotation: Quat, axis: Vec3, local: Vec3, target: Vec3) -> Option<Quat> {
    let axis = axis.try_normalize()?;
    let angle = turn_about(axis, rotation * local, target)?;
    Some((Quat::from_axis_angle(axis, angle) * rotation).normalize())
}

/// The signed angle (radians, right-handed about the unit `axis`) from `from` to `to`,
/// both seen across the axis; `None` where either lies along it.
pub(in crate::mocap) fn turn_about(axis: Vec3, from: Vec3, to: Vec3) -> Option<f32> {
    let across = |v: Vec3| (v - axis * v.dot(axis)).try_normalize();
    let (from, to) = (across(from)?, across(to)?);
    Some(axis.dot(from.cross(to)).atan2(from.dot(to)))
}

/// 0 below `lo`, 1 above `hi`, and a smooth step between (zero slope at both ends),
/// so a blend by it never jumps.
pub(in crate::mocap) fn ramp(x: f32, (lo, hi): (f32, f32)) -> f32 {
    let t = ((x - lo) / (hi - lo)).clamp(0.0, 1.0);
    t * t * (3.0 - 2.0 * t)
}

/// An angle brought into (−π, π], radians.
fn wrap(a: f32) -> f32 {
    use std::f32::consts::{PI, TAU};
    PI - (PI - a).rem_euclid(TAU)
}

#[cfg(test)]
mod tests {
    use super::super::tests::observe;
    use super::super::{Placement, PositionRetargeter};
    use super::*;
    use crate::mocap::Clip;
    use crate::skeleton::{JOINT_COUNT, JointId as J, Pose, Skeleton, quat_log};

    fn world(skel: &Skeleton, pose: &Pose) -> [Quat; JOINT_COUNT] {
        skel.world_frames(pose).map(|f| f.rot)
    }

    /// Arms lowered 70° and turned `arm` radians about themselves (+ turns the left
    /// one's front upwards), elbows bent by `elbow` radians about their hinge; thighs
    /// forward 30° and turned `thigh` about themselves, knees bent 60°.
    fn limbs(arm: f32, elbow: f32, thigh: f32) -> Pose {
        let mut p = Pose::rest();
        for (side, shoulder, el, hip, knee) in [
            (
                1.0,
                J::LEFT_SHOULDER,
                J::LEFT_ELBOW,
                J::LEFT_HIP,
                J::LEFT_KNEE,
            ),
            (
                -1.0,
                J::RIGHT_SHOULDER,
                J::RIGHT_ELBOW,
                J::RIGHT_HIP,
                J::RIGHT_KNEE,
            ),
        ] {
            let lowered = Quat::from_rotation_z(-side * 70f32.to_radians());
            p.set_rotation(shoulder, lowered * Quat::from_rotation_x(arm));
            p.set_rotation(el, Quat::from_rotation_y(-side * elbow));
            let forward = Quat::from_rotation_x(-30f32.to_radians());
            p.set_rotation(hip, forward * Quat::from_rotation_y(side * thigh));
            p.set_rotation(knee, Quat::from_rotation_x(60f32.to_radians()));
        }
        p
    }

    fn retarget(r: &PositionRetargeter, truth: &Pose, previous: &Pose) -> Pose {
        let skel = r.skeleton();
        r.retarget(
            &observe(skel, truth),
            previous,
            &Placement::at(skel.rest_positions()[0]),
        )
    }

    fn off_by(skel: &Skeleton, truth: &Pose, got: &Pose, j: J) -> f32 {
        world(skel, truth)[j.index()]
            .angle_between(world(skel, got)[j.index()])
            .to_degrees()
    }

    const UPPER: [J; 4] = [
        J::LEFT_SHOULDER,
        J::RIGHT_SHOULDER,
        J::LEFT_HIP,
        J::RIGHT_HIP,
    ];

    #[test]
    fn a_bent_elbow_or_knee_sets_the_twist_of_the_bone_above_it() {
        let skel = Skeleton::default();
        let r = PositionRetargeter::new(&skel);
        for (arm, thigh) in [(0.0, 0.0), (0.7, 0.4), (-0.9, -0.5), (1.3, 0.6)] {
            let truth = limbs(arm, 1.2, thigh);
            let got = retarget(&r, &truth, &Pose::rest());
            for j in UPPER {
                let e = off_by(&skel, &truth, &got, j);
                assert!(e < 0.5, "{}: {e}° off (arm {arm}, thigh {thigh})", j.name());
            }
            // the elbows and knees bend about their hinges only
            for (j, hinge) in [
                (J::LEFT_ELBOW, Vec3::Y),
                (J::RIGHT_ELBOW, Vec3::Y),
                (J::LEFT_KNEE, Vec3::X),
                (J::RIGHT_KNEE, Vec3::X),
            ] {
                let v = quat_log(got.rotation(j));
                let off = (v - hinge * v.dot(hinge)).length().to_degrees();
                assert!(off < 0.5, "{} bends {off}° off its hinge", j.name());
            }
        }
    }

    #[test]
    fn a_straight_limb_holds_its_twist_and_a_backward_bend_does_not_turn_it() {
        let skel = Skeleton::default();
        let r = PositionRetargeter::new(&skel);
        let bent = limbs(0.8, 1.0, 0.4);
        let first = retarget(&r, &bent, &Pose::rest());
        // straightened, or bent ~20° backwards (a hyperextension, or a sensor's noise):
        // nothing observed says the twist changed
        for (elbow, knee) in [(0.0, 0.0), (-0.35, -0.3)] {
            let mut straight = limbs(0.8, elbow, 0.4);
            for (hip, k) in [(J::LEFT_HIP, J::LEFT_KNEE), (J::RIGHT_HIP, J::RIGHT_KNEE)] {
                straight.set_rotation(k, Quat::from_rotation_x(knee));
                straight.set_rotation(hip, bent.rotation(hip));
            }
            let got = retarget(&r, &straight, &first);
            for j in UPPER {
                let e = off_by(&skel, &straight, &got, j);
                assert!(e < 0.5, "{} {e}° off (elbow {elbow})", j.name());
            }
        }
        // bent again after the twist changed unseen: followed
        let turned = limbs(-0.6, 1.2, -0.3);
        let got = retarget(&r, &turned, &first);
        for j in UPPER {
            let e = off_by(&skel, &turned, &got, j);
            assert!(e < 0.5, "{}: {e}° off", j.name());
        }
    }

    #[test]
    fn twist_blends_in_as_the_limb_bends_and_is_unchanged_without_a_lower_bone() {
        let axis = Vec3::NEG_Y;
        let swing = Quat::from_rotation_z(-std::f32::consts::FRAC_PI_2);
        let flex = Vec3::Z;
        // held: the swing turned 30° about the bone; the forearm bends 90° further round
        let held = Quat::from_axis_angle(axis, 0.5) * swing;
        let twist_of = |q: Quat| {
            let n = q * flex;
            axis.dot((swing * flex).cross(n))
                .atan2((swing * flex).dot(n))
        };
        let lower = |bend_deg: f32| {
            let towards = Quat::from_axis_angle(axis, 0.5 + 1.2) * swing * flex;
            let b = bend_deg.to_radians();
            axis * b.cos() + towards * b.sin()
        };
        let at = |bend: f32| twist_of(hinge_twist(swing, axis, Some(lower(bend)), flex, held));
        assert!((at(5.0) - 0.5).abs() < 1e-4, "{}", at(5.0));
        assert!((at(40.0) - 1.7).abs() < 1e-4, "{}", at(40.0));
        let mid = at(17.5);
        assert!((mid - 1.1).abs() < 1e-3, "half way: {mid}");
        let mut last = at(10.0);
        for b in 11..=25 {
            let t = at(b as f32);
            assert!(t >= last - 1e-6, "not monotonic at {b}°");
            last = t;
        }
        assert!((twist_of(hinge_twist(swing, axis, None, flex, held)) - 0.5).abs() < 1e-4);
        // a degenerate bone leaves the swing as it is
        assert_eq!(
            hinge_twist(swing, Vec3::ZERO, Some(Vec3::X), flex, held),
            swing
        );
        assert_eq!(
            hinge_twist(swing, Vec3::NAN, Some(Vec3::X), flex, held),
            swing
        );
    }

    /// A real clip seen as joint positions: the thighs and upper arms turn with the
    /// clip's (CMU's knees bend about the canonical hinge, and so do its elbows once
    /// the profile's correction has turned its hanging arms back, so the clip's twist
    /// is the truth here), and the elbows bend about their hinges.
    #[test]
    fn a_clip_seen_as_joint_positions_keeps_its_limbs_twist() {
        let skel = Skeleton::default();
        let r = PositionRetargeter::new(&skel);
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/mocap/cmu_131_03.bvh"
        ))
        .expect("fixture");
        let clip = Clip::from_bvh_text(&text, None, &skel).expect("clip");
        let mut previous = Pose::rest();
        let (mut sum, mut n) = ([0.0f32; 4], 0);
        let mut worst_hinge = 0.0f32;
        for truth in clip.poses.iter().step_by(2) {
            let got = retarget(&r, truth, &previous);
            for (k, j) in UPPER.into_iter().enumerate() {
                sum[k] += off_by(&skel, truth, &got, j);
            }
            for (j, side) in [(J::LEFT_ELBOW, -1.0), (J::RIGHT_ELBOW, 1.0)] {
                let v = quat_log(got.rotation(j));
                if side * v.y > 25f32.to_radians() {
                    let off = Vec3::new(v.x, 0.0, v.z).length().to_degrees();
                    worst_hinge = worst_hinge.max(off);
                }
            }
            previous = got;
            n += 1;
        }
        for (j, s) in UPPER.into_iter().zip(sum) {
            let mean = s / n as f32;
            // the smallest swing alone: thighs 13.2° and 12.8°; upper arms 34–66°, and
            // a constant 32° before the CMU profile's correction
            assert!(mean < 3.0, "{j:?}: {mean}° off the clip's on average");
        }
        assert!(
            worst_hinge < 1.0,
            "an elbow bends {worst_hinge}° off its hinge"
        );
    }
}
