//! The hands: their direction from the fingertips, their turn about themselves (and the
//! forearm's) from the thumb.

use super::*;

/// What a sensor of `kind` reports of `pose` of `skel`, read back from a bridge's body
/// frame (hands, fingertips and thumbs included), without the joints in `unseen`.
fn seen_by(kind: KinectKind, skel: &Skeleton, pose: &Pose, unseen: &[Src]) -> KinectJoints {
    let view = SensorView {
        distance: 2.0,
        height: 1.0,
        tilt: 0.0,
    };
    let bodies = [("1".to_string(), skel.world_frames(pose))];
    let frame = body_frame_json(kind, &bodies, &view, false);
    let mut joints = parse_body_frame(&frame, Some(kind))
        .expect("reads")
        .remove(0)
        .joints;
    for s in unseen {
        joints.pos[*s as usize] = None;
    }
    joints
}

/// Arms lowered and bent, each forearm turned by `supination` degrees from the
/// palm-down T-pose (palm up at 180°), the wrists bent up and sideways when `bent`.
fn turned_hands(supination: f32, bent: bool) -> Pose {
    let mut p = Pose::rest();
    let turn = Quat::from_rotation_x(-supination.to_radians());
    for (shoulder, elbow, wrist, side) in [
        (J::LEFT_SHOULDER, J::LEFT_ELBOW, J::LEFT_WRIST, 1.0),
        (J::RIGHT_SHOULDER, J::RIGHT_ELBOW, J::RIGHT_WRIST, -1.0),
    ] {
        p.set_rotation(shoulder, Quat::from_rotation_z(-side * 0.9));
        p.set_rotation(elbow, Quat::from_rotation_y(-side * 0.7) * turn);
        if bent {
            p.set_rotation(
                wrist,
                Quat::from_rotation_z(side * 0.4) * Quat::from_rotation_y(0.2),
            );
        }
    }
    p
}

fn hands_off(skel: &Skeleton, truth: &Pose, got: &Pose) -> [f32; 2] {
    let (a, b) = (skel.world_frames(truth), skel.world_frames(got));
    [J::LEFT_WRIST, J::RIGHT_WRIST].map(|j| {
        a[j.index()]
            .rot
            .angle_between(b[j.index()].rot)
            .to_degrees()
    })
}

/// A hand bent at the wrist and turned from palm down to palm up, seen by either
/// sensor's hand, fingertip and thumb points, comes back within a degree, from one
/// frame to the next without a jump; with the thumbs unseen its direction is still
/// followed. Before the hands were read, they kept the rest pose's turn and bend
/// (24–180° off).
#[test]
fn a_bent_and_turned_hand_is_followed() {
    let skel = Skeleton::from_proportions(&Proportions::default());
    let r = PositionRetargeter::new(&skel);
    let at = Placement::at(skel.rest_positions()[0]);
    for kind in [KinectKind::V2, KinectKind::Azure] {
        let (mut previous, mut first) = (Pose::rest(), true);
        let sweep = (-80..=175).step_by(5).chain((-80..=175).rev().step_by(5));
        for supination in sweep.map(|d| d as f32) {
            let truth = turned_hands(supination, true);
            let got = r.retarget(&seen_by(kind, &skel, &truth, &[]), &previous, &at);
            for (side, off) in hands_off(&skel, &truth, &got).into_iter().enumerate() {
                assert!(
                    off < 1.0,
                    "{kind:?} hand {side} at {supination}°: {off}° off"
                );
            }
            let step = hands_off(&skel, &previous, &got);
            assert!(
                first || step.iter().all(|s| *s < 8.0),
                "{kind:?} at {supination}°: the hands moved {step:?}° in a 5° step"
            );
            (previous, first) = (got, false);
        }
        // held at 90°, frame after frame: the forearms keep half the turn (it does not
        // creep into them)
        let truth = turned_hands(90.0, false);
        for _ in 0..5 {
            previous = r.retarget(&seen_by(kind, &skel, &truth, &[]), &previous, &at);
        }
        for elbow in [J::LEFT_ELBOW, J::RIGHT_ELBOW] {
            let (_, twist) = crate::skeleton::swing_twist(previous.rotation(elbow), Vec3::X);
            let share = twist.angle_between(Quat::IDENTITY).to_degrees() / 90.0;
            assert!(
                (share - FOREARM_TWIST_SHARE).abs() < 0.02,
                "{kind:?} {elbow:?}: the forearm took {share} of the turn"
            );
        }
        // the thumbs unseen: the hands point as the performer's, their turn kept
        let truth = turned_hands(90.0, true);
        let got = r.retarget(
            &seen_by(kind, &skel, &truth, &[Src::ThumbL, Src::ThumbR]),
            &Pose::rest(),
            &at,
        );
        let (a, b) = (skel.world_frames(&truth), skel.world_frames(&got));
        for (wrist, axis) in [(J::LEFT_WRIST, Vec3::X), (J::RIGHT_WRIST, -Vec3::X)] {
            let off = (a[wrist.index()].rot * axis)
                .angle_between(b[wrist.index()].rot * axis)
                .to_degrees();
            assert!(off < 1.0, "{kind:?} {wrist:?}: points {off}° off");
        }
    }
}

/// A hand turned past what a forearm can (palm up and 40° more) is held at palm up,
/// not flipped to a pronation; a thumb seen along the hand's axis, or only inferred by
/// the sensor, keeps the last turn.
#[test]
fn a_hand_turns_only_as_a_forearm_can() {
    let skel = Skeleton::from_proportions(&Proportions::default());
    let r = PositionRetargeter::new(&skel);
    let at = Placement::at(skel.rest_positions()[0]);
    let kind = KinectKind::Azure;
    let seen = |s: f32| seen_by(kind, &skel, &turned_hands(s, false), &[]);
    let up = r.retarget(&seen(175.0), &Pose::rest(), &at);
    let past = r.retarget(&seen(220.0), &up, &at);
    let palm_up = turned_hands(180.0, false);
    for off in hands_off(&skel, &palm_up, &past) {
        assert!(off < 2.0, "{off}° from palm up");
    }
    // the thumb along the hand: nothing to read its turn from
    let mut obs = seen(0.0);
    for (thumb, wrist, tip) in [
        (Src::ThumbL, Src::WristL, Src::HandTipL),
        (Src::ThumbR, Src::WristR, Src::HandTipR),
    ] {
        let (w, t) = (
            obs.pos[wrist as usize].expect("wrist"),
            obs.pos[tip as usize].expect("tip"),
        );
        obs.pos[thumb as usize] = Some(w + (t - w) * 0.5);
    }
    let held = r.retarget(&obs, &up, &at);
    for off in hands_off(&skel, &up, &held) {
        assert!(off < 1.0, "{off}° from the turn held");
    }
    // thumbs the sensor only inferred: the same
    let mut obs = seen(0.0);
    obs.inferred |= (1 << Src::ThumbL as u32) | (1 << Src::ThumbR as u32);
    let held = r.retarget(&obs, &up, &at);
    for off in hands_off(&skel, &up, &held) {
        assert!(off < 1.0, "{off}° from the turn held with inferred thumbs");
    }
    // and with the fingertips inferred too, the hand's centre points it
    obs.inferred |= (1 << Src::HandTipL as u32) | (1 << Src::HandTipR as u32);
    let held = r.retarget(&obs, &up, &at);
    for off in hands_off(&skel, &up, &held) {
        assert!(
            off < 1.0,
            "{off}° from the turn held, pointed by the hands' centres"
        );
    }
}
