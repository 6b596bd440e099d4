use super::*;

/// Every landmark at a distinct point: landmark `i` at (i, 2i, 3i) cm in camera axes.
fn all() -> Landmarks {
    let mut m = Landmarks::default();
    for i in 0..MEDIAPIPE_LANDMARKS {
        let c = i as f32 * 0.01;
        assert!(m.set(i, Landmarks::to_world([c, 2.0 * c, 3.0 * c]), false));
    }
    m
}

#[test]
fn names_are_mediapipes_in_its_order() {
    assert_eq!(MEDIAPIPE_NAMES.len(), 33);
    for (name, i) in [
        ("nose", 0),
        ("left_ear", 7),
        ("left_shoulder", 11),
        ("right_wrist", 16),
        ("left_hip", 23),
        ("right_heel", 30),
        ("right_foot_index", 32),
    ] {
        assert_eq!(Landmarks::index(name), Some(i), "{name}");
    }
    assert_eq!(Landmarks::index("LEFT_SHOULDER"), None);
    assert_eq!(Landmarks::index("spine"), None);
}

/// MediaPipe's axes (x right in the picture, y down it, z away from the camera) of a
/// performer facing the camera: their left shoulder is to the picture's right, their
/// head up the picture, their nose towards the camera; in clothcast's world the left
/// is +X, up +Y and the performer faces +Z.
#[test]
fn the_cameras_axes_turn_into_the_worlds() {
    let left_shoulder = Landmarks::to_world([0.18, -0.45, 0.0]);
    let nose = Landmarks::to_world([0.0, -0.65, -0.15]);
    assert!(left_shoulder.x > 0.0 && left_shoulder.y > 0.0);
    assert!(nose.y > 0.0 && nose.z > 0.0);
}

#[test]
fn derived_joints_lie_between_their_landmarks() {
    let m = all();
    let j = m.joints();
    let at = |i: usize| Landmarks::to_world([i as f32 * 0.01, i as f32 * 0.02, i as f32 * 0.03]);
    let close = |a: Vec3, b: Vec3| (a - b).length() < 1e-6;
    let get = |s: Src| j.source(s).expect("set").0;
    assert!(close(get(Src::Pelvis), (at(L_HIP) + at(R_HIP)) / 2.0));
    assert!(close(
        get(Src::Chest),
        (at(L_SHOULDER) + at(R_SHOULDER)) / 2.0
    ));
    assert!(close(get(Src::Neck), get(Src::Chest)));
    assert!(close(
        get(Src::SpineMid),
        (get(Src::Pelvis) + get(Src::Chest)) / 2.0
    ));
    assert!(close(get(Src::Head), (at(L_EAR) + at(R_EAR)) / 2.0));
    assert!(close(get(Src::ElbowR), at(R_ELBOW)));
    assert!(close(get(Src::KneeL), at(L_KNEE)));
    // the foot: from the ankle along the sole
    assert!(close(get(Src::FootL), at(L_ANKLE) + at(L_TOE) - at(L_HEEL)));
    // no clavicles, no lumbar point, no hands: as a Kinect v2 without them
    for s in [Src::ClavicleL, Src::Lumbar, Src::HandL] {
        assert!(j.source(s).is_none());
    }
    assert!(close(get(Src::EarL), at(L_EAR)) && close(get(Src::EarR), at(R_EAR)));
    assert_eq!(j.count(), 21);
}

#[test]
fn a_derived_joint_is_missing_or_inferred_with_its_landmarks() {
    let mut m = Landmarks::default();
    let p = Vec3::new(0.1, 0.0, 0.0);
    assert!(m.set(L_HIP, p, false));
    // one hip: no pelvis, no mid-spine
    let j = m.joints();
    assert!(j.source(Src::Pelvis).is_none() && j.source(Src::SpineMid).is_none());
    assert!(m.set(R_HIP, -p, true));
    assert!(m.set(L_SHOULDER, p + Vec3::Y, false));
    assert!(m.set(R_SHOULDER, Vec3::Y - p, false));
    let j = m.joints();
    assert_eq!(j.source(Src::Pelvis), Some((Vec3::ZERO, true)));
    assert_eq!(j.source(Src::Chest), Some((Vec3::Y, false)));
    assert_eq!(j.source(Src::SpineMid), Some((Vec3::Y / 2.0, true)));
    assert_eq!(j.source(Src::HipL), Some((p, false)));
    // a foot needs its ankle, heel and toe tip
    assert!(m.set(L_ANKLE, Vec3::ZERO, false) && m.set(L_TOE, Vec3::Z, false));
    assert!(m.joints().source(Src::FootL).is_none());
}

#[test]
fn unusable_landmarks_are_refused() {
    let mut m = Landmarks::default();
    assert!(!m.set(33, Vec3::ZERO, false));
    assert!(!m.set(0, Vec3::new(f32::NAN, 0.0, 0.0), false));
    assert!(!m.set(0, Vec3::new(0.0, f32::INFINITY, 0.0), false));
    assert!(!m.set(0, Vec3::new(0.0, 0.0, 100.0), false));
    assert_eq!(m.count(), 0);
    assert!(m.set(0, Vec3::new(0.0, 0.0, 99.0), false));
    assert_eq!(m.count(), 1);
}

/// A bridge's floor: a level camera's normal is the world's up; one pitched down by θ
/// turns the landmarks back up by θ (levelling); the all-zero plane is no floor, and an
/// unusable one is named.
#[test]
fn a_stated_floor_levels_a_tilted_cameras_landmarks() {
    let level = Landmarks::floor([0.0, -1.0, 0.0, 1.5])
        .expect("valid")
        .expect("a floor");
    assert!((level.normal() - Vec3::Y).length() < 1e-6);
    assert_eq!(level.height(), 0.0, "d is not used");
    let t = 25f32.to_radians();
    let tilted = Landmarks::floor([0.0, -t.cos(), -t.sin(), 0.0])
        .expect("valid")
        .expect("a floor");
    // an upright trunk, in the axes of a camera pitched down, reads as leaning
    // towards the camera (+z of the world) until it is levelled
    let up_in_camera = Vec3::new(0.0, -t.cos(), -t.sin());
    let trunk = Landmarks::to_world(up_in_camera.to_array());
    assert!(trunk.z > 0.3, "{trunk}");
    assert!((tilted.level(trunk) - Vec3::Y).length() < 1e-5);
    assert!(Landmarks::floor([0.0; 4]).expect("valid").is_none());
    for bad in [
        [f32::NAN, -1.0, 0.0, 0.0],
        [0.0, -2.0, 0.0, 0.0],
        [1.0, 0.0, 0.0, 0.0],
    ] {
        assert!(Landmarks::floor(bad).is_err(), "{bad:?}");
    }
}
