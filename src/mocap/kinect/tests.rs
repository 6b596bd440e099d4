use super::*;
use crate::skeleton::Proportions;

/// Joint positions of a canonical pose, named as a Kinect v2 would report them.
pub(super) fn observe(skel: &Skeleton, pose: &Pose) -> KinectJoints {
    let p = skel.joint_positions(pose);
    let mut k = KinectJoints::default();
    let names = [
        ("SpineBase", J::PELVIS),
        ("SpineMid", J::SPINE2),
        ("SpineShoulder", J::SPINE3),
        ("Neck", J::NECK),
        ("Head", J::HEAD),
        ("ShoulderLeft", J::LEFT_SHOULDER),
        ("ShoulderRight", J::RIGHT_SHOULDER),
        ("ElbowLeft", J::LEFT_ELBOW),
        ("ElbowRight", J::RIGHT_ELBOW),
        ("WristLeft", J::LEFT_WRIST),
        ("WristRight", J::RIGHT_WRIST),
        ("HipLeft", J::LEFT_HIP),
        ("HipRight", J::RIGHT_HIP),
        ("KneeLeft", J::LEFT_KNEE),
        ("KneeRight", J::RIGHT_KNEE),
        ("AnkleLeft", J::LEFT_ANKLE),
        ("AnkleRight", J::RIGHT_ANKLE),
        ("FootLeft", J::LEFT_FOOT),
        ("FootRight", J::RIGHT_FOOT),
    ];
    for (n, j) in names {
        // through camera space and back, as a sensor would deliver it
        let w = p[j.index()];
        let cam = [-w.x, w.y, -w.z];
        assert!(k.set(KinectKind::V2, n, KinectKind::V2.to_world(cam)));
    }
    k
}

use crate::skeleton::JointId as J;

#[test]
fn observed_joint_positions_are_reproduced() {
    let skel = Skeleton::from_proportions(&Proportions::default());
    let r = PositionRetargeter::new(&skel);
    let mut truth = Pose::rest();
    truth.set_rotation(J::LEFT_SHOULDER, Quat::from_rotation_z(-1.0));
    truth.set_rotation(J::LEFT_ELBOW, Quat::from_rotation_y(0.8));
    truth.set_rotation(J::RIGHT_HIP, Quat::from_rotation_x(-0.6));
    truth.set_rotation(J::RIGHT_KNEE, Quat::from_rotation_x(0.9));
    truth.set_rotation(J::PELVIS, Quat::from_rotation_y(0.5));
    truth.set_rotation(J::SPINE2, Quat::from_rotation_y(0.3));
    truth.translation = Vec3::new(0.1, -0.05, 0.2);
    let obs = observe(&skel, &truth);
    let origin = skel.rest_positions()[0];
    let got = r.retarget(&obs, &Pose::rest(), &Placement::at(origin));
    let (a, b) = (skel.joint_positions(&truth), skel.joint_positions(&got));
    for j in [
        J::LEFT_ELBOW,
        J::LEFT_WRIST,
        J::RIGHT_KNEE,
        J::RIGHT_ANKLE,
        J::HEAD,
        J::RIGHT_WRIST,
    ] {
        let e = (a[j.index()] - b[j.index()]).length();
        assert!(e < 0.02, "{} off by {e} m", j.name());
    }
}

#[test]
fn untracked_joints_keep_their_rotation_and_kinds_are_detected() {
    let skel = Skeleton::from_proportions(&Proportions::default());
    let r = PositionRetargeter::new(&skel);
    let mut prev = Pose::rest();
    prev.set_rotation(J::LEFT_ELBOW, Quat::from_rotation_y(0.7));
    let mut obs = observe(&skel, &Pose::rest());
    obs.pos[Src::WristL as usize] = None;
    let got = r.retarget(&obs, &prev, &Placement::at(skel.rest_positions()[0]));
    assert!(
        got.rotation(J::LEFT_ELBOW)
            .angle_between(prev.rotation(J::LEFT_ELBOW))
            < 1e-4
    );
    assert_eq!(
        KinectKind::detect(["Head", "SpineBase"].into_iter()),
        Some(KinectKind::V2)
    );
    assert_eq!(
        KinectKind::detect(["HEAD", "SPINE_NAVEL"].into_iter()),
        Some(KinectKind::Azure)
    );
    assert_eq!(
        KinectKind::Azure.to_world([100.0, -1000.0, 2000.0]),
        Vec3::new(0.1, 1.0, -2.0)
    );
    let mut k = KinectJoints::default();
    assert!(!k.set(KinectKind::V2, "Tail", Vec3::ZERO));
    assert!(!k.set(KinectKind::V2, "Head", Vec3::NAN));
    assert_eq!(k.count(), 0);
    // a leg measures once all three of its joints are tracked, not inferred
    let rest = skel.rest_positions();
    let leg = [("HipLeft", J::LEFT_HIP), ("KneeLeft", J::LEFT_KNEE)];
    for (name, j) in leg {
        assert!(k.set(KinectKind::V2, name, rest[j.index()]));
    }
    assert!(k.set_inferred(KinectKind::V2, "AnkleLeft", rest[J::LEFT_ANKLE.index()]));
    assert_eq!((k.count(), k.leg_length()), (3, None));
    assert!(k.set(KinectKind::V2, "AnkleLeft", rest[J::LEFT_ANKLE.index()]));
    let measured = k.leg_length().expect("the left leg tracked");
    assert!((measured - r.leg_length()).abs() < 1e-5, "{measured} m");
    assert!(k.set_inferred(KinectKind::V2, "KneeLeft", rest[J::LEFT_KNEE.index()]));
    assert_eq!(k.leg_length(), None);
}

/// What a Kinect v2 at `view` reports of `pose` of `skel`, read back from a bridge's
/// body frame: the joints, levelled onto the floor it reported.
fn sensed(skel: &Skeleton, pose: &Pose, view: &SensorView) -> KinectJoints {
    let bodies = [("1".to_string(), skel.world_frames(pose))];
    let frame = body_frame_json(KinectKind::V2, &bodies, view, true);
    let body = parse_body_frame(&frame, None).expect("reads").remove(0);
    body.joints.levelled(&body.floor.expect("a floor"))
}

/// A half squat of `skel`: hips and knees bent, the back leaning forward, an arm
/// lowered, feet flat with the ankles at their rest height, moved `across` the floor.
fn squat(skel: &Skeleton, across: Vec3) -> Pose {
    let mut p = Pose::rest();
    for (hip, knee, ankle) in [
        (J::LEFT_HIP, J::LEFT_KNEE, J::LEFT_ANKLE),
        (J::RIGHT_HIP, J::RIGHT_KNEE, J::RIGHT_ANKLE),
    ] {
        p.set_rotation(hip, Quat::from_rotation_x(-0.9));
        p.set_rotation(knee, Quat::from_rotation_x(1.5));
        p.set_rotation(ankle, Quat::from_rotation_x(-0.6));
    }
    p.set_rotation(J::SPINE1, Quat::from_rotation_x(0.3));
    p.set_rotation(J::LEFT_SHOULDER, Quat::from_rotation_z(-1.1));
    let ankle = skel.joint_positions(&p)[J::LEFT_ANKLE.index()].y;
    p.translation = across + Vec3::Y * (skel.rest_position(J::LEFT_ANKLE).y - ankle);
    p
}

#[test]
fn a_tilted_sensors_floor_levels_the_performer_and_stands_them_on_it() {
    let skel = Skeleton::from_proportions(&Proportions::default());
    let r = PositionRetargeter::new(&skel);
    // 1.4 m up, looking 25° down at a performer 2.5 m away
    let view = SensorView {
        distance: 2.5,
        height: 1.4,
        tilt: 25f32.to_radians(),
    };
    let origin = sensed(&skel, &Pose::rest(), &view)
        .pelvis()
        .expect("pelvis");
    let truth = squat(&skel, Vec3::new(0.3, 0.0, -0.4));
    let seen = sensed(&skel, &truth, &view);
    let at = Placement {
        origin,
        on_floor: true,
        leg: seen.leg_length(),
    };
    let got = r.retarget(&seen, &Pose::rest(), &at);
    let (a, b) = (skel.joint_positions(&truth), skel.joint_positions(&got));
    for j in [
        J::HEAD,
        J::LEFT_WRIST,
        J::RIGHT_WRIST,
        J::LEFT_KNEE,
        J::LEFT_ANKLE,
        J::RIGHT_FOOT,
    ] {
        let e = a[j.index()].distance(b[j.index()]);
        assert!(e < 0.03, "{} off by {e} m", j.name());
    }
    // the trunk's lean (pelvis to neck) against the performer's
    let lean = |p: &[Vec3; JOINT_COUNT]| {
        let trunk = p[J::NECK.index()] - p[J::PELVIS.index()];
        trunk.angle_between(a[J::NECK.index()] - a[J::PELVIS.index()])
    };
    // as a level sensor's (whose lean is the retargeter's own approximation of the spine)
    let level = SensorView { tilt: 0.0, ..view };
    let level_at = Placement {
        origin: sensed(&skel, &Pose::rest(), &level)
            .pelvis()
            .expect("pelvis"),
        ..at
    };
    let flat = r.retarget(&sensed(&skel, &truth, &level), &Pose::rest(), &level_at);
    let (tilted, flat) = (lean(&b), lean(&skel.joint_positions(&flat)));
    assert!(
        (tilted - flat).abs().to_degrees() < 0.2,
        "{tilted} against {flat}"
    );
    // the same frames without their floor: the sensor's tilt leans the avatar
    let raw = |pose: &Pose| {
        let bodies = [("1".to_string(), skel.world_frames(pose))];
        let frame = body_frame_json(KinectKind::V2, &bodies, &view, false);
        parse_body_frame(&frame, None)
            .expect("reads")
            .remove(0)
            .joints
    };
    let origin = raw(&Pose::rest()).pelvis().expect("pelvis");
    let leaning = r.retarget(&raw(&truth), &Pose::rest(), &Placement::at(origin));
    let off = lean(&skel.joint_positions(&leaning)).to_degrees();
    assert!(off > 20.0, "{off}°");
}

#[test]
fn a_childs_squat_keeps_an_adult_avatars_feet_on_the_floor() {
    let adult = Skeleton::from_proportions(&Proportions::default());
    let child = Skeleton::from_proportions(&Proportions {
        height: 1.2,
        shoulder_width: 0.28,
        hip_width: 0.24,
    });
    let r = PositionRetargeter::new(&adult);
    let view = SensorView {
        distance: 2.0,
        height: 0.8,
        tilt: 10f32.to_radians(),
    };
    let seen = sensed(&child, &squat(&child, Vec3::ZERO), &view);
    let leg = seen.leg_length().expect("legs seen");
    assert!((leg / r.leg_length() - 1.2 / 1.75).abs() < 0.01, "{leg}");
    let at = Placement {
        origin: seen.pelvis().expect("pelvis"),
        on_floor: true,
        leg: Some(leg),
    };
    let ankles = |at: &Placement| {
        let p = adult.joint_positions(&r.retarget(&seen, &Pose::rest(), at));
        [p[J::LEFT_ANKLE.index()].y, p[J::RIGHT_ANKLE.index()].y]
    };
    let rest = adult.rest_position(J::LEFT_ANKLE).y;
    for y in ankles(&at) {
        assert!((y - rest).abs() < 0.02, "ankle at {y} m, rest {rest} m");
    }
    // the child's legs taken for the avatar's: the avatar's hips at the child's
    // height put its feet through the floor
    for y in ankles(&Placement { leg: None, ..at }) {
        assert!(y < rest - 0.1, "ankle at {y} m");
    }
}

mod hands;
