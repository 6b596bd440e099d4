//! What the server makes of an Xsens suit streamed by MVN ([`through_mvn`]): where its
//! performers stand, how it follows a walk, and its segment orientations after a
//! calibration.

use super::*;

/// `truth` (a pose of `skel`, which `r` was made for) sent as MVN sample `k` of
/// `character`, read back and applied as the server's MVN loop applies it (no filter).
fn through_mvn(
    skel: &Skeleton,
    r: &PositionRetargeter,
    truth: &Pose,
    character: u8,
    k: usize,
    sensor: &mut SensorState,
    state: &mut InputState,
) -> Pose {
    use crate::mocap::{Floor, MvnDatagram, mvn_datagram, parse_mvn};
    let d = mvn_datagram(truth, skel, character, k as u32, 0).expect("sendable");
    let Ok(MvnDatagram::Sample(sample)) = parse_mvn(&d) else {
        panic!("a sample")
    };
    apply_joints(
        &sample.joints(),
        Some(Floor::LEVEL),
        sensor,
        state,
        r,
        None,
        k as f64 / 60.0,
    )
    .expect("applies")
}

/// Two Xsens suits of a multi-person capture, streamed by MVN: each avatar stands
/// where its performer stands around MVN's origin (not each at the origin, as a
/// Kinect's first visitor would), on the floor, its limbs where the suit puts them;
/// a crouch, bent forward, keeps the feet on the floor.
#[test]
fn xsens_suits_stand_where_they_stand_on_mvns_floor() {
    let skel = Skeleton::from_proportions(&Proportions::default());
    let r = PositionRetargeter::new(&skel);
    let mut lifted = Pose::rest();
    lifted.set_rotation(JointId::LEFT_SHOULDER, Quat::from_rotation_z(-1.1));
    lifted.set_rotation(JointId::RIGHT_ELBOW, Quat::from_rotation_y(0.9));
    lifted.set_rotation(JointId::PELVIS, Quat::from_rotation_y(0.6));
    let low = crouch(&skel, [-0.6, 1.2, -0.6], 0.3);
    for (character, at) in [
        (0u8, Vec3::new(1.2, 0.0, -0.5)),
        (1, Vec3::new(-0.8, 0.0, 2.0)),
    ] {
        let (mut sensor, mut state) = (SensorState::mvn(), InputState::default());
        for (k, truth) in [Pose::rest(), lifted, low].into_iter().enumerate() {
            let mut truth = truth;
            truth.translation += at;
            let got = through_mvn(&skel, &r, &truth, character, k, &mut sensor, &mut state);
            let (want, have) = (skel.joint_positions(&truth), skel.joint_positions(&got));
            for j in [
                JointId::PELVIS,
                JointId::LEFT_WRIST,
                JointId::RIGHT_WRIST,
                JointId::LEFT_ANKLE,
                JointId::RIGHT_KNEE,
                JointId::HEAD,
            ] {
                let e = (want[j.index()] - have[j.index()]).length();
                assert!(
                    e < 0.02,
                    "suit {character}, pose {k}: {} off by {e} m",
                    j.name()
                );
            }
            let (above, _) = stance(&skel, &got);
            assert!(
                above.abs() < 0.005,
                "suit {character}, pose {k}: feet {above} m off the floor"
            );
        }
    }
}

/// The walking clip streamed frame by frame through MVN datagrams and the server's
/// MVN path: the avatar follows the walk, turns included, every joint within 1.5 cm
/// of the clip's (0.9 cm measured: the pelvis's motion scaled by the legs as
/// measured). MVN's lumbar point fixes the pelvis's pitch and the spine's bend,
/// which the hip line and one point up the spine (all a Kinect has) leave open:
/// without it the neck was 8 cm and the hands 6 cm off.
#[test]
fn a_walk_streamed_from_mvn_follows_the_walk() {
    let skel = Skeleton::from_proportions(&Proportions::default());
    let r = PositionRetargeter::new(&skel);
    let clip =
        crate::mocap::Clip::from_bvh_text(crate::bake::DEFAULT_CLIP, None, &skel).expect("clip");
    let (mut sensor, mut state) = (SensorState::mvn(), InputState::default());
    let mut worst = 0.0f32;
    for (k, truth) in clip.poses.iter().enumerate() {
        let got = through_mvn(&skel, &r, truth, 0, k, &mut sensor, &mut state);
        let (want, have) = (skel.joint_positions(truth), skel.joint_positions(&got));
        let pelvis = JointId::PELVIS.index();
        // the pelvis's motion is scaled by the legs as measured (within 0.5 %)
        let off = (want[pelvis] - have[pelvis]).length();
        assert!(off < 0.015, "frame {k}: pelvis {off} m from the clip's");
        for j in [
            JointId::LEFT_WRIST,
            JointId::RIGHT_WRIST,
            JointId::LEFT_FOOT,
            JointId::RIGHT_FOOT,
            JointId::HEAD,
            JointId::SPINE2,
            JointId::SPINE3,
            JointId::NECK,
            JointId::LEFT_SHOULDER,
            JointId::LEFT_ELBOW,
            JointId::LEFT_HIP,
        ] {
            worst = worst.max((want[j.index()] - have[j.index()]).length());
        }
    }
    assert!(worst < 0.015, "a joint {worst} m from the clip's");
}

/// An MVN type-02 datagram of `truth` whose segment orientations are in axes of the
/// suit's own: each segment's quaternion turned by a fixed rotation of its own
/// (`axes[id − 1]`, as MVN's output settings may set a segment's axes), read back.
fn mvn_in_own_axes(
    skel: &Skeleton,
    truth: &Pose,
    k: usize,
    axes: &[Quat],
) -> crate::mocap::MvnSample {
    use crate::mocap::{MvnDatagram, mvn_datagram, parse_mvn};
    let mut d = mvn_datagram(truth, skel, 0, k as u32, 0).expect("sendable");
    let num = |d: &[u8], at: usize| f32::from_be_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]]);
    for (i, c) in axes.iter().enumerate() {
        let at = 24 + 32 * i + 16;
        let [w, x, y, z] = [0, 4, 8, 12].map(|o| num(&d, at + o));
        // MVN's x, y, z are clothcast's z, x, y
        let q = Quat::from_xyzw(y, z, x, w) * *c;
        for (o, v) in [q.w, q.z, q.x, q.y].into_iter().enumerate() {
            d[at + 4 * o..at + 4 * o + 4].copy_from_slice(&v.to_be_bytes());
        }
    }
    match parse_mvn(&d) {
        Ok(MvnDatagram::Sample(s)) => s,
        other => panic!("not a sample: {other:?}"),
    }
}

/// The walking clip streamed through MVN datagrams whose segment orientations are in
/// axes of the suit's own, after a calibration in the T-pose: the segments' turn since
/// then orients the hands, head and feet and twists the forearms as the clip does
/// (every bone's world rotation within a degree of the clip's: the stream is exact),
/// where the segment origins alone leave the hands and head held and the forearms
/// untwisted; no joint moves (the bones keep the directions the origins give them).
#[test]
fn an_xsens_suits_orientations_turn_its_hands_head_and_forearms() {
    use crate::mocap::orient_segments;
    let skel = Skeleton::from_proportions(&Proportions::default());
    let r = PositionRetargeter::new(&skel);
    let clip =
        crate::mocap::Clip::from_bvh_text(crate::bake::DEFAULT_CLIP, None, &skel).expect("clip");
    let axes: Vec<Quat> = (0..crate::mocap::MVN_SEGMENTS)
        .map(|i| {
            let i = i as f32;
            Quat::from_euler(
                glam::EulerRot::ZXY,
                0.7 * i + 0.3,
                1.3 * i - 0.5,
                0.4 * i * i,
            )
        })
        .collect();
    let start = mvn_in_own_axes(&skel, &Pose::rest(), 0, &axes);
    let calibrated = || {
        let (mut sensor, mut state) = (SensorState::mvn(), InputState::default());
        apply_joints(
            &start.joints(),
            Some(Floor::LEVEL),
            &mut sensor,
            &mut state,
            &r,
            None,
            0.0,
        )
        .expect("applies");
        state.calibrate();
        (sensor, state)
    };
    let (mut plain, mut oriented) = (calibrated(), calibrated());
    let angle = |a: Quat, b: Quat| {
        (a.inverse() * b)
            .normalize()
            .w
            .abs()
            .min(1.0)
            .acos()
            .to_degrees()
            * 2.0
    };
    let joints = [
        JointId::LEFT_WRIST,
        JointId::RIGHT_WRIST,
        JointId::HEAD,
        JointId::LEFT_FOOT,
        JointId::RIGHT_FOOT,
        JointId::LEFT_ELBOW,
        JointId::RIGHT_ELBOW,
        JointId::LEFT_SHOULDER,
        JointId::RIGHT_SHOULDER,
        JointId::LEFT_KNEE,
        JointId::RIGHT_HIP,
        JointId::SPINE3,
        JointId::NECK,
    ];
    let (mut worst_plain, mut worst) = ([0.0f32; 13], [0.0f32; 13]);
    let mut moved = 0.0f32;
    for (k, truth) in clip.poses.iter().enumerate().skip(1).step_by(3) {
        let sample = mvn_in_own_axes(&skel, truth, k, &axes);
        let t = k as f64 / 120.0;
        let feed = |(sensor, state): &mut (SensorState, InputState), orient: bool| {
            apply_joints_then(
                &sample.joints(),
                Some(Floor::LEVEL),
                sensor,
                state,
                &r,
                None,
                t,
                |p| {
                    if orient {
                        orient_segments(p, &skel, &sample.orientations, &start.orientations)
                    }
                },
            )
            .expect("applies")
        };
        let (without, with) = (feed(&mut plain, false), feed(&mut oriented, true));
        let (want, a, b) = (
            skel.world_frames(truth),
            skel.world_frames(&without),
            skel.world_frames(&with),
        );
        for (n, j) in joints.iter().enumerate() {
            let j = j.index();
            worst_plain[n] = worst_plain[n].max(angle(want[j].rot, a[j].rot));
            worst[n] = worst[n].max(angle(want[j].rot, b[j].rot));
        }
        for j in 0..JOINT_COUNT {
            moved = moved.max((a[j].trans - b[j].trans).length());
        }
    }
    for (n, j) in joints.iter().enumerate() {
        eprintln!(
            "{:>16}: worst {:5.1}° from the clip's with orientations, {:5.1}° without",
            j.name(),
            worst[n],
            worst_plain[n]
        );
    }
    eprintln!("joints moved by the orientations: at most {moved} m");
    assert!(moved < 1e-3, "orientations moved a joint by {moved} m");
    for (n, j) in joints.iter().enumerate() {
        assert!(
            worst[n] < 1.0,
            "{}: {}° from the clip's",
            j.name(),
            worst[n]
        );
    }
    // hands and head: held without orientations
    assert!(
        worst_plain[..3].iter().all(|w| *w > 10.0),
        "{worst_plain:?}"
    );
}
