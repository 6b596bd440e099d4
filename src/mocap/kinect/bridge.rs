//! The JSON body frames Kinect bridges send: reading them ([`parse_body_frame`]) and
//! writing them for a simulated sensor ([`body_json`], what `clothcast play --kinect`
//! sends).

use glam::Vec3;

use super::{Floor, KinectJoints, KinectKind, NAMES, Src};
use crate::skeleton::{JOINT_COUNT, JointId, Rigid};

/// Why a body frame was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KinectError {
    /// Not JSON, or not the shape of a body frame.
    #[error("bad Kinect body frame: {0}")]
    Shape(String),
    /// Neither joint names nor the profile say which sensor it is.
    #[error("cannot tell Kinect v2 from Azure Kinect joints; name the profile")]
    UnknownKind,
    /// The frame's `floorClipPlane` is present but unusable.
    #[error("bad floorClipPlane: {0}")]
    Floor(String),
}

/// One tracked body of a frame.
#[derive(Clone, Debug)]
pub struct KinectBody {
    /// The SDK's body (tracking) id.
    pub id: String,
    /// Which sensor.
    pub kind: KinectKind,
    /// Its usable joints.
    pub joints: KinectJoints,
    /// The floor the sensor reported with this frame, if any.
    pub floor: Option<Floor>,
}

/// Where a simulated sensor stands for [`body_json`]: on the performer's facing line,
/// `distance` metres in front of the world origin, its optical centre `height` metres
/// above the floor, pitched down by `tilt` radians, looking at the performer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SensorView {
    /// Horizontal distance from the world origin, metres.
    pub distance: f32,
    /// Height above the floor, metres.
    pub height: f32,
    /// Downward pitch, radians.
    pub tilt: f32,
}

impl SensorView {
    /// A world position (metres) in the sensor's camera coordinates and units: the
    /// inverse of [`KinectKind::to_world`] seen from this sensor.
    pub fn camera(&self, kind: KinectKind, w: Vec3) -> [f32; 3] {
        // the sensor unpitched: Kinect v2's axes (X to its left, Y up, Z to the performer)
        let u = w - Vec3::new(0.0, self.height, self.distance);
        let u = Vec3::new(-u.x, u.y, -u.z);
        // pitched down: its Y axis is (0, cos, sin) and its Z axis (0, -sin, cos) in u
        let (s, c) = self.tilt.sin_cos();
        let v2 = [u.x, c * u.y + s * u.z, c * u.z - s * u.y];
        match kind {
            KinectKind::V2 => v2,
            KinectKind::Azure => [-v2[0] * 1000.0, -v2[1] * 1000.0, v2[2] * 1000.0],
        }
    }

    /// The floor plane `[a, b, c, d]` this sensor reports (camera coordinates and units;
    /// see [`KinectKind::floor`]).
    pub fn floor_plane(&self, kind: KinectKind) -> [f32; 4] {
        let (s, c) = self.tilt.sin_cos();
        match kind {
            KinectKind::V2 => [0.0, c, -s, self.height],
            KinectKind::Azure => [0.0, -c, -s, self.height * 1000.0],
        }
    }
}

/// A whole body frame as a bridge sends it: `{"bodies": [...]}` with a body per
/// `(id, joints)` ([`body_json`]) seen from `view`, and with `floor` the sensor's
/// `floorClipPlane` as Kinect v2 bridges send it (`{"x", "y", "z", "w"}`).
pub fn body_frame_json(
    kind: KinectKind,
    bodies: &[(String, [Rigid; JOINT_COUNT])],
    view: &SensorView,
    floor: bool,
) -> serde_json::Value {
    let list: Vec<serde_json::Value> = bodies
        .iter()
        .map(|(id, joints)| body_json(kind, id, joints, view))
        .collect();
    let mut frame = serde_json::json!({ "bodies": list });
    if floor {
        let [x, y, z, w] = view.floor_plane(kind);
        frame["floorClipPlane"] = serde_json::json!({"x": x, "y": y, "z": z, "w": w});
    }
    frame
}

/// Half the distance between the ears that [`body_json`] writes, metres (an adult's
/// head is ~15 cm wide at the ears).
pub(super) const EAR_SPREAD: f32 = 0.075;

/// Where the bridge writer puts a hand's points, in forearm lengths from the wrist: the
/// hand's centre along the hand, its fingertips, and the thumb's tip (along, forwards
/// from the palm's edge).
const HAND_AT: f32 = 0.33;
const HAND_TIP_AT: f32 = 0.7;
const THUMB_AT: (f32, f32) = (0.25, 0.2);

/// Most bodies per frame (the SDKs track 6).
const MAX_BODIES: usize = 16;

/// One body of a JSON body frame as a Kinect bridge emits it (the shapes
/// [`parse_body_frame`] reads: `trackingId`, `jointType`, `cameraX..Z` in metres and
/// `trackingState` for v2; `body_id`, `name`, `position` in millimetres and `confidence`
/// for Azure), every joint tracked, from the canonical joints' world frames (`joints`:
/// metres, +Y up, the performer facing +Z, e.g.
/// [`Skeleton::world_frames`](crate::skeleton::Skeleton::world_frames)) as the sensor at
/// `view` sees them. The hand's centre, fingertips and thumb tip are put along the
/// hand's axes (a third and 0.7 of the forearm's length along it; the thumb a quarter
/// along and a fifth forwards, as a palm-down T-pose hand holds it) and, for Azure, the
/// ears 7.5 cm either side of the head joint along the head's left axis (the canonical
/// skeleton has neither). What `clothcast play --kinect` sends, so
/// a kiosk's server can be tried without a sensor.
pub fn body_json(
    kind: KinectKind,
    id: &str,
    joints: &[Rigid; JOINT_COUNT],
    view: &SensorView,
) -> serde_json::Value {
    use Src::*;
    let at = |j: JointId| joints[j.index()].trans;
    let ear = |side: f32| {
        let head = joints[JointId::HEAD.index()];
        head.trans + head.rot * Vec3::new(side * EAR_SPREAD, 0.0, 0.0)
    };
    // the hand: along the hand's own axis (the canonical T-pose's hands continue the
    // arms, left along +x, right along −x, palms down, thumbs forwards along +z), its
    // points at fractions of the forearm's length from the wrist
    let hand = |w: JointId, e: JointId, along: f32, forward: f32| {
        let side = if w == JointId::LEFT_WRIST { 1.0 } else { -1.0 };
        let wrist = joints[w.index()];
        let length = at(w).distance(at(e));
        wrist.trans + wrist.rot * (Vec3::new(side * along, 0.0, forward) * length)
    };
    use JointId as W;
    let joint = |s: Src| match s {
        Pelvis => at(JointId::PELVIS),
        SpineMid => at(JointId::SPINE2),
        Chest => at(JointId::SPINE3),
        Neck => at(JointId::NECK),
        Head => at(JointId::HEAD),
        ClavicleL => at(JointId::LEFT_COLLAR),
        ClavicleR => at(JointId::RIGHT_COLLAR),
        ShoulderL => at(JointId::LEFT_SHOULDER),
        ShoulderR => at(JointId::RIGHT_SHOULDER),
        ElbowL => at(JointId::LEFT_ELBOW),
        ElbowR => at(JointId::RIGHT_ELBOW),
        WristL => at(JointId::LEFT_WRIST),
        WristR => at(JointId::RIGHT_WRIST),
        HandL => hand(W::LEFT_WRIST, W::LEFT_ELBOW, HAND_AT, 0.0),
        HandR => hand(W::RIGHT_WRIST, W::RIGHT_ELBOW, HAND_AT, 0.0),
        HandTipL => hand(W::LEFT_WRIST, W::LEFT_ELBOW, HAND_TIP_AT, 0.0),
        HandTipR => hand(W::RIGHT_WRIST, W::RIGHT_ELBOW, HAND_TIP_AT, 0.0),
        ThumbL => hand(W::LEFT_WRIST, W::LEFT_ELBOW, THUMB_AT.0, THUMB_AT.1),
        ThumbR => hand(W::RIGHT_WRIST, W::RIGHT_ELBOW, THUMB_AT.0, THUMB_AT.1),
        HipL => at(JointId::LEFT_HIP),
        HipR => at(JointId::RIGHT_HIP),
        KneeL => at(JointId::LEFT_KNEE),
        KneeR => at(JointId::RIGHT_KNEE),
        AnkleL => at(JointId::LEFT_ANKLE),
        AnkleR => at(JointId::RIGHT_ANKLE),
        FootL => at(JointId::LEFT_FOOT),
        FootR => at(JointId::RIGHT_FOOT),
        // no Kinect has one (filtered out by name below)
        Lumbar => at(JointId::SPINE1),
        EarL => ear(1.0),
        EarR => ear(-1.0),
    };
    let list: Vec<serde_json::Value> = NAMES
        .iter()
        .filter_map(|&(s, ..)| Some((kind.name(s)?, joint(s))))
        .map(|(name, p)| {
            let [x, y, z] = view.camera(kind, p);
            match kind {
                KinectKind::V2 => serde_json::json!({"jointType": name,
                    "cameraX": x, "cameraY": y, "cameraZ": z, "trackingState": 2}),
                KinectKind::Azure => serde_json::json!({"name": name,
                    "position": [x, y, z], "confidence": 2}),
            }
        })
        .collect();
    match kind {
        KinectKind::V2 => serde_json::json!({"trackingId": id, "joints": list}),
        KinectKind::Azure => serde_json::json!({"body_id": id, "joints": list}),
    }
}

/// Reads the JSON body frames Kinect bridges emit: `{"bodies": [{"trackingId": …,
/// "joints": [{"jointType": "SpineBase", "cameraX": …, "cameraY": …, "cameraZ": …,
/// "trackingState": 2}, …]}]}` (Kinect v2; `joints` may also be an object keyed by
/// name) and `{"bodies": [{"body_id": …, "joints": [{"name": "PELVIS", "position": [x, y,
/// z], "confidence": 2}, …]}]}` (Azure Kinect), with `id`/`bodyId`/`body_id`/
/// `trackingId` and `position`/`cameraX..Z`/`x, y, z` all accepted. Bodies with
/// `isTracked: false` and joints not tracked are skipped. The frame's
/// `floorClipPlane` (also `floor`; `{"x", "y", "z", "w"}` or `[a, b, c, d]`, camera
/// coordinates and the sensor's units, see [`KinectKind::floor`]) goes with every body;
/// an unusable one refuses the frame by name.
pub fn parse_body_frame(
    json: &serde_json::Value,
    kind: Option<KinectKind>,
) -> Result<Vec<KinectBody>, KinectError> {
    use serde_json::Value;
    let shape = |m: &str| KinectError::Shape(m.to_string());
    let bodies = json
        .get("bodies")
        .and_then(Value::as_array)
        .ok_or_else(|| shape("no `bodies` array"))?;
    if bodies.len() > MAX_BODIES {
        return Err(shape("more than 16 bodies"));
    }
    let plane = floor_plane(json)?;
    let mut out = Vec::new();
    for b in bodies {
        if b.get("isTracked").and_then(Value::as_bool) == Some(false)
            || b.get("tracked").and_then(Value::as_bool) == Some(false)
        {
            continue;
        }
        let id = ["trackingId", "id", "bodyId", "body_id", "bodyIndex"]
            .iter()
            .find_map(|k| b.get(*k))
            .map(|v| match v {
                Value::String(s) => s.chars().take(32).collect(),
                other => other.to_string().chars().take(32).collect(),
            })
            .ok_or_else(|| shape("a body without an id"))?;
        // joints as an array of objects with a name, or an object keyed by name
        let list: Vec<(String, &Value)> = match b.get("joints") {
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(|j| {
                    ["jointType", "name", "type", "joint"]
                        .iter()
                        .find_map(|k| j.get(*k)?.as_str())
                        .map(|n| (n.to_string(), j))
                })
                .collect(),
            Some(Value::Object(o)) => o.iter().map(|(k, v)| (k.clone(), v)).collect(),
            _ => return Err(shape("a body without `joints`")),
        };
        if list.len() > 64 {
            return Err(shape("more than 64 joints"));
        }
        let kind = match kind.or_else(|| KinectKind::detect(list.iter().map(|(n, _)| n.as_str()))) {
            Some(k) => k,
            None => return Err(KinectError::UnknownKind),
        };
        let mut joints = KinectJoints::default();
        for (name, j) in &list {
            let num = |k: &str| j.get(k).and_then(Value::as_f64);
            let pos = match j.get("position") {
                Some(Value::Array(p)) if p.len() == 3 => p
                    .iter()
                    .map(Value::as_f64)
                    .collect::<Option<Vec<f64>>>()
                    .map(|v| [v[0], v[1], v[2]]),
                Some(Value::Object(_)) => {
                    let p = &j["position"];
                    match (
                        p.get("x").and_then(Value::as_f64),
                        p.get("y").and_then(Value::as_f64),
                        p.get("z").and_then(Value::as_f64),
                    ) {
                        (Some(x), Some(y), Some(z)) => Some([x, y, z]),
                        _ => None,
                    }
                }
                _ => match (
                    num("cameraX").or(num("x")),
                    num("cameraY").or(num("y")),
                    num("cameraZ").or(num("z")),
                ) {
                    (Some(x), Some(y), Some(z)) => Some([x, y, z]),
                    _ => None,
                },
            };
            let Some(p) = pos else { continue };
            let level = match j
                .get("trackingState")
                .or_else(|| j.get("confidence"))
                .or_else(|| j.get("confidenceLevel"))
            {
                None => 2,
                Some(Value::Number(n)) => {
                    n.as_f64().map_or(0, |x| x.clamp(0.0, 3.0).round() as u32)
                }
                Some(Value::String(s)) => match s.as_str() {
                    "Tracked" | "HIGH" | "MEDIUM" => 2,
                    "Inferred" | "LOW" => 1,
                    _ => 0,
                },
                Some(_) => 0,
            };
            let world = kind.to_world(p.map(|x| x as f32));
            if kind.tracked(level) {
                joints.set(kind, name, world);
            } else if kind.usable(level) {
                joints.set_inferred(kind, name, world);
            }
        }
        let floor = match plane {
            Some(p) => kind.floor(p).map_err(KinectError::Floor)?,
            None => None,
        };
        out.push(KinectBody {
            id,
            kind,
            joints,
            floor,
        });
    }
    Ok(out)
}

/// The frame's floor plane as four numbers, if it states one.
fn floor_plane(json: &serde_json::Value) -> Result<Option<[f32; 4]>, KinectError> {
    use serde_json::Value;
    let Some(v) = ["floorClipPlane", "floor"]
        .iter()
        .find_map(|k| json.get(*k))
    else {
        return Ok(None);
    };
    let bad = || KinectError::Floor("not four numbers (x, y, z, w)".into());
    let numbers: Vec<Option<f64>> = match v {
        Value::Null => return Ok(None),
        Value::Array(a) if a.len() == 4 => a.iter().map(Value::as_f64).collect(),
        Value::Object(o) => ["x", "y", "z", "w"]
            .iter()
            .map(|k| o.get(*k).and_then(Value::as_f64))
            .collect(),
        _ => return Err(bad()),
    };
    let mut plane = [0f32; 4];
    for (p, n) in plane.iter_mut().zip(numbers) {
        *p = n.ok_or_else(bad)? as f32;
    }
    Ok(Some(plane))
}

#[cfg(test)]
mod frame_tests {
    use super::*;
    use crate::skeleton::{Pose, Skeleton};

    #[test]
    fn the_name_table_is_in_source_joint_order() {
        for (i, (s, ..)) in NAMES.iter().enumerate() {
            assert_eq!(*s as usize, i);
        }
    }

    /// A body written as a bridge writes it reads back as the joints it came from, in
    /// the world frame, for both sensors (Kinect v2 has no clavicles).
    #[test]
    fn written_bodies_read_back_as_their_joints() {
        use crate::skeleton::{Proportions, quat_exp};
        let skel = Skeleton::from_proportions(&Proportions::default());
        let mut pose = Pose::rest();
        pose.set_rotation(JointId::LEFT_SHOULDER, quat_exp(Vec3::new(0.0, 0.0, -0.6)));
        pose.set_rotation(JointId::RIGHT_KNEE, quat_exp(Vec3::new(0.5, 0.0, 0.0)));
        let frames = skel.world_frames(&pose);
        let joints = frames.map(|f| f.trans);
        for (kind, count) in [(KinectKind::V2, 25), (KinectKind::Azure, 29)] {
            let view = SensorView {
                distance: 2.0,
                height: 0.0,
                tilt: 0.0,
            };
            let frame = serde_json::json!({"bodies": [body_json(kind, "7", &frames, &view)]});
            let bodies = parse_body_frame(&frame, None).expect("reads back");
            let b = &bodies[0];
            assert_eq!(
                (b.kind, b.id.as_str(), b.joints.count()),
                (kind, "7", count)
            );
            // the sensor sees the performer 2 m away; clothcast's world has them at the
            // origin again once that offset is taken off
            let seen = |s: Src| b.joints.get(s).map(|p| p + Vec3::new(0.0, 0.0, 2.0));
            for (s, j) in [
                (Src::Pelvis, JointId::PELVIS),
                (Src::ElbowL, JointId::LEFT_ELBOW),
                (Src::KneeR, JointId::RIGHT_KNEE),
                (Src::Head, JointId::HEAD),
            ] {
                let p = seen(s).expect("tracked");
                assert!(p.distance(joints[j.index()]) < 1e-3, "{kind:?} {j:?}: {p}");
            }
        }
    }

    #[test]
    fn bridge_shapes_of_both_sensors_parse() {
        let v2 = serde_json::json!({"bodies": [
            {"trackingId": 72057594037928000u64, "isTracked": true, "joints": [
                {"jointType": "SpineBase", "cameraX": 0.1, "cameraY": -0.2, "cameraZ": 2.0, "trackingState": 2},
                {"jointType": "Head", "cameraX": 0.1, "cameraY": 0.5, "cameraZ": 2.0, "trackingState": "Tracked"},
                {"jointType": "HandTipLeft", "cameraX": 0.1, "cameraY": 0.5, "cameraZ": 2.0, "trackingState": 0},
                {"jointType": "ElbowLeft", "cameraX": 0.1, "cameraY": 0.5, "cameraZ": 2.0, "trackingState": 0}
            ]},
            {"trackingId": 5, "isTracked": false, "joints": []}
        ]});
        let b = parse_body_frame(&v2, None).expect("v2");
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].kind, KinectKind::V2);
        assert_eq!(b[0].joints.count(), 2, "the untracked elbow is skipped");
        assert_eq!(
            b[0].joints.get(Src::Pelvis),
            Some(Vec3::new(-0.1, -0.2, -2.0))
        );
        let azure = serde_json::json!({"bodies": [{"body_id": 1, "joints": [
            {"name": "PELVIS", "position": [10.0, 200.0, 1500.0], "confidence": 2},
            {"name": "SPINE_NAVEL", "position": {"x": 10.0, "y": 0.0, "z": 1500.0}, "confidence": 1},
            {"name": "NOSE", "position": [0.0, 0.0, 0.0], "confidence": 3}
        ]}]});
        let b = parse_body_frame(&azure, None).expect("azure");
        assert_eq!(
            (b[0].kind, b[0].id.as_str(), b[0].joints.count()),
            (KinectKind::Azure, "1", 2)
        );
        assert!(
            (b[0].joints.get(Src::Pelvis).expect("pelvis") - Vec3::new(0.01, -0.2, -1.5)).length()
                < 1e-6
        );
        // refused shapes name the problem
        assert!(matches!(
            parse_body_frame(&serde_json::json!({"bodys": []}), None),
            Err(KinectError::Shape(_))
        ));
        assert!(matches!(
            parse_body_frame(&serde_json::json!({"bodies": [{"joints": []}]}), None),
            Err(KinectError::Shape(_))
        ));
        assert!(matches!(
            parse_body_frame(
                &serde_json::json!({"bodies": [{"id": 1, "joints": [{"name": "Foo", "x": 1, "y": 2, "z": 3}]}]}),
                None
            ),
            Err(KinectError::UnknownKind)
        ));
    }

    #[test]
    fn a_frames_floor_plane_reads_in_both_shapes_and_a_bad_one_is_named() {
        let skel = Skeleton::from_proportions(&crate::skeleton::Proportions::default());
        let view = SensorView {
            distance: 2.0,
            height: 1.1,
            tilt: 0.3,
        };
        let bodies = [("1".to_string(), skel.world_frames(&Pose::rest()))];
        let frame = body_frame_json(KinectKind::V2, &bodies, &view, true);
        let floor = |f: &serde_json::Value| parse_body_frame(f, None).map(|b| b[0].floor);
        let seen = floor(&frame).expect("reads").expect("a floor");
        assert!((seen.height() - 1.1).abs() < 1e-5);
        let [a, b, c, d] = view.floor_plane(KinectKind::V2);
        let with = |plane: serde_json::Value| {
            let mut f = frame.clone();
            f.as_object_mut().map(|o| o.remove("floorClipPlane"));
            f["floor"] = plane;
            f
        };
        assert_eq!(
            floor(&with(serde_json::json!([a, b, c, d]))).expect("array"),
            Some(seen)
        );
        for none in [serde_json::Value::Null, serde_json::json!([0, 0, 0, 0])] {
            assert_eq!(floor(&with(none)).expect("no floor yet"), None);
        }
        for bad in [
            serde_json::json!("up"),
            serde_json::json!([0, 1, 0]),
            serde_json::json!({"x": 0, "y": 1, "z": 0}),
            serde_json::json!([0, 1e40, 0, 1]),
            serde_json::json!([0, 0.17, 0.98, 1]),
        ] {
            match floor(&with(bad.clone())) {
                Err(e @ KinectError::Floor(_)) => {
                    assert!(e.to_string().starts_with("bad floorClipPlane: "), "{e}")
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
    }
}
