//! What the server makes of a performer seen by a Kinect through its bridge frames
//! ([`through_kinect`]): limb twist from the hinges, the head from the ears, and the
//! calibration of such a performer.

use super::*;

/// The walking clip through each Kinect's bridge frames and the server's Kinect path
/// (`through_kinect`, as `render --kinect` draws it): a pose per frame, the thighs
/// turned as the clip's are where the sensor captured them (their twist read from the
/// knees' bend; 12–13° off on average with the smallest swing alone), and the hands,
/// with the filter's lag only when filtered.
#[test]
fn a_walk_seen_by_either_kinect_keeps_the_clips_thigh_twist() {
    let skel = Skeleton::from_proportions(&Proportions::default());
    let r = PositionRetargeter::new(&skel);
    let clip =
        crate::mocap::Clip::from_bvh_text(crate::bake::DEFAULT_CLIP, None, &skel).expect("clip");
    let poses = &clip.poses[..600];
    // the clip runs at 120 Hz, the sensor at 30: every 4th frame is a capture
    let every = (1.0 / (clip.frame_time * 30.0)).round() as usize;
    assert_eq!(every, 4);
    let thigh_error = |seen: &[Pose]| {
        let mut sum = 0.0f32;
        for (truth, got) in poses.iter().zip(seen).step_by(every) {
            let (a, b) = (skel.world_frames(truth), skel.world_frames(got));
            for j in [JointId::LEFT_HIP, JointId::RIGHT_HIP] {
                sum += a[j.index()]
                    .rot
                    .angle_between(b[j.index()].rot)
                    .to_degrees();
            }
        }
        sum / (2 * seen.len().div_ceil(every)) as f32
    };
    for kind in [KinectKind::V2, KinectKind::Azure] {
        let seen = through_kinect(poses, clip.frame_time, kind, &r, None).expect("applies");
        assert_eq!(seen.len(), poses.len());
        // the hands turn and bend as the clip's (read from the hand, fingertip and
        // thumb points; before they were, they kept their rest turn: 31° and 49° off on
        // average, up to 91°)
        for wrist in [JointId::LEFT_WRIST, JointId::RIGHT_WRIST] {
            let (mut sum, mut n) = (0.0f32, 0);
            for (truth, got) in poses.iter().zip(&seen).step_by(every) {
                let (a, b) = (skel.world_frames(truth), skel.world_frames(got));
                sum += a[wrist.index()]
                    .rot
                    .angle_between(b[wrist.index()].rot)
                    .to_degrees();
                n += 1;
            }
            let mean = sum / n as f32;
            assert!(
                mean < 1.0,
                "{kind:?} {wrist:?}: {mean}° off the clip's on average"
            );
        }
        let e = thigh_error(&seen);
        assert!(e < 3.0, "{kind:?}: thighs {e}° off the clip's on average");
        let filter = FilterConfig::default();
        let smooth =
            through_kinect(poses, clip.frame_time, kind, &r, Some(&filter)).expect("applies");
        let lagged = thigh_error(&smooth);
        assert!(
            lagged > e && lagged < 10.0,
            "{kind:?}: filtered {lagged}° against {e}°"
        );
    }
}

/// The sensor captures at 30 Hz whatever the clip's rate: a 120 Hz clip's pose is held
/// for four frames (the server keeps the latest), a 30 Hz clip's changes every frame; a
/// clip of a frame a minute is captured for its last second only, and a frame time
/// that is not a positive number is refused.
#[test]
fn the_sensor_captures_at_its_own_rate() {
    let skel = Skeleton::from_proportions(&Proportions::default());
    let r = PositionRetargeter::new(&skel);
    let clip =
        crate::mocap::Clip::from_bvh_text(crate::bake::DEFAULT_CLIP, None, &skel).expect("clip");
    let poses = &clip.poses[300..340];
    let moved = |a: &Pose, b: &Pose| {
        JointId::all().any(|j| a.rotation(j).angle_between(b.rotation(j)) > 1e-5)
            || (a.translation - b.translation).length() > 1e-6
    };
    for kind in [KinectKind::V2, KinectKind::Azure] {
        let seen = through_kinect(poses, clip.frame_time, kind, &r, None).expect("applies");
        assert_eq!(seen.len(), poses.len());
        for f in 1..seen.len() {
            let changed = moved(&seen[f - 1], &seen[f]);
            assert_eq!(changed, f % 4 == 0, "{kind:?} frame {f}: changed {changed}");
        }
        // the same clip at 30 Hz: a new pose every frame
        let slow: Vec<Pose> = poses.iter().step_by(4).copied().collect();
        let seen = through_kinect(&slow, 4.0 * clip.frame_time, kind, &r, None).expect("applies");
        assert!(seen.windows(2).all(|w| moved(&w[0], &w[1])));
        // a frame a minute: done at once, each frame still shown
        let seen = through_kinect(&slow[..3], 60.0, kind, &r, None).expect("applies");
        assert!(seen.windows(2).all(|w| moved(&w[0], &w[1])));
        for bad in [0.0, -1.0, f32::NAN, f32::INFINITY] {
            let e = through_kinect(poses, bad, kind, &r, None).expect_err("refused");
            assert!(e.to_string().contains("frame time"), "{e}");
        }
    }
}

/// A performer who turns their head: an Azure Kinect's ears turn the avatar's head with
/// it (within a degree), where a Kinect v2, which reports no ears, leaves the head as
/// it was; the head's tilt still comes from the neck and head points.
#[test]
fn an_azure_kinects_ears_turn_the_head() {
    let skel = Skeleton::from_proportions(&Proportions::default());
    let r = PositionRetargeter::new(&skel);
    let mut turned = Pose::rest();
    turned.set_rotation(JointId::NECK, Quat::from_rotation_x(0.25));
    turned.set_rotation(JointId::HEAD, Quat::from_rotation_y(0.8));
    turned.set_rotation(JointId::SPINE2, Quat::from_rotation_y(-0.2));
    for (kind, turns) in [(KinectKind::Azure, true), (KinectKind::V2, false)] {
        let seen =
            through_kinect(&[Pose::rest(), turned], 1.0 / 30.0, kind, &r, None).expect("applies");
        let (want, got) = (skel.world_frames(&turned), skel.world_frames(&seen[1]));
        let head = JointId::HEAD.index();
        let off = want[head].rot.angle_between(got[head].rot).to_degrees();
        if turns {
            assert!(off < 1.0, "{kind:?}: the head {off}° off");
        } else {
            assert!(
                off > 40.0,
                "{kind:?}: the head turned without ears ({off}° off)"
            );
        }
    }
}

/// A Kinect performer who walks up with bent, turned arms, straightens them into a
/// T-pose and is calibrated there: the calibration keeps no turn of the upper arms
/// about themselves (held from the last bend, it says nothing of the T-pose), so when
/// the elbows bend again the arms turn as the performer's do, not off by the old turn.
#[test]
fn calibrating_a_kinect_t_pose_keeps_no_held_arm_twist() {
    let skel = Skeleton::from_proportions(&Proportions::default());
    let r = PositionRetargeter::new(&skel);
    let arms = |turn: f32, bend: f32| {
        let mut p = Pose::rest();
        for (side, shoulder, elbow) in [
            (1.0, JointId::LEFT_SHOULDER, JointId::LEFT_ELBOW),
            (-1.0, JointId::RIGHT_SHOULDER, JointId::RIGHT_ELBOW),
        ] {
            let lowered = Quat::from_rotation_z(-side * 0.6);
            p.set_rotation(shoulder, lowered * Quat::from_rotation_x(turn));
            p.set_rotation(elbow, Quat::from_rotation_y(-side * bend));
        }
        p
    };
    let (mut sensor, mut state) = (SensorState::default(), InputState::default());
    let mut apply = |pose: &Pose, state: &mut InputState| {
        let body = parse_body_frame(&frame(&skel, pose, true), None)
            .expect("reads")
            .remove(0);
        apply_joints(&body.joints, body.floor, &mut sensor, state, &r, None, 0.0).expect("applies")
    };
    apply(&arms(0.9, 1.2), &mut state);
    apply(&Pose::rest(), &mut state);
    state.calibrate();
    let later = arms(-0.4, 1.0);
    let got = apply(&later, &mut state);
    let (want, have) = (skel.world_frames(&later), skel.world_frames(&got));
    for j in [JointId::LEFT_SHOULDER, JointId::RIGHT_SHOULDER] {
        let off = want[j.index()]
            .rot
            .angle_between(have[j.index()].rot)
            .to_degrees();
        assert!(off < 2.0, "{}: {off}° off after calibrating", j.name());
    }
}
