//! Kinect body tracking → canonical poses. Kinect v2 (25 joints, metres, camera space:
//! X to the sensor's left, Y up, Z away from the sensor) and Azure Kinect body tracking
//! (32 joints, millimetres, X right, Y down, Z away). Bytes in, `Pose` out; no sockets.
//!
//! Both are position sources: each canonical bone is turned from its rest direction to
//! the observed one by the smallest rotation in its parent's frame (twist held at rest),
//! the pelvis and chest take their full orientation from the hip and shoulder lines, and
//! joints not tracked keep their previous rotation. Camera space is turned (a rotation,
//! not a mirror) so the performer's left is the avatar's left; mirror displays flip the
//! picture instead (the viewer's mirror mode).

use glam::{Quat, Vec3};

use crate::skeleton::{JOINT_COUNT, JointId, Pose, Skeleton};

/// Which sensor's joints and units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KinectKind {
    /// Kinect for Windows v2 (`kinect_v2`).
    V2,
    /// Azure Kinect body tracking (`azure_kinect`).
    Azure,
}

/// Source joints every bone direction is measured between (names of both SDKs).
#[derive(Clone, Copy)]
enum Src {
    Pelvis,
    SpineMid,
    Chest,
    Neck,
    Head,
    ClavicleL,
    ClavicleR,
    ShoulderL,
    ShoulderR,
    ElbowL,
    ElbowR,
    WristL,
    WristR,
    HandL,
    HandR,
    HipL,
    HipR,
    KneeL,
    KneeR,
    AnkleL,
    AnkleR,
    FootL,
    FootR,
}

const SRC_COUNT: usize = 23;

/// Each source joint's name in Kinect v2 (no clavicles) and in Azure Kinect body
/// tracking, in [`Src`] order.
const NAMES: [(Src, Option<&str>, &str); SRC_COUNT] = {
    use Src::*;
    [
        (Pelvis, Some("SpineBase"), "PELVIS"),
        (SpineMid, Some("SpineMid"), "SPINE_NAVEL"),
        (Chest, Some("SpineShoulder"), "SPINE_CHEST"),
        (Neck, Some("Neck"), "NECK"),
        (Head, Some("Head"), "HEAD"),
        (ClavicleL, None, "CLAVICLE_LEFT"),
        (ClavicleR, None, "CLAVICLE_RIGHT"),
        (ShoulderL, Some("ShoulderLeft"), "SHOULDER_LEFT"),
        (ShoulderR, Some("ShoulderRight"), "SHOULDER_RIGHT"),
        (ElbowL, Some("ElbowLeft"), "ELBOW_LEFT"),
        (ElbowR, Some("ElbowRight"), "ELBOW_RIGHT"),
        (WristL, Some("WristLeft"), "WRIST_LEFT"),
        (WristR, Some("WristRight"), "WRIST_RIGHT"),
        (HandL, Some("HandLeft"), "HAND_LEFT"),
        (HandR, Some("HandRight"), "HAND_RIGHT"),
        (HipL, Some("HipLeft"), "HIP_LEFT"),
        (HipR, Some("HipRight"), "HIP_RIGHT"),
        (KneeL, Some("KneeLeft"), "KNEE_LEFT"),
        (KneeR, Some("KneeRight"), "KNEE_RIGHT"),
        (AnkleL, Some("AnkleLeft"), "ANKLE_LEFT"),
        (AnkleR, Some("AnkleRight"), "ANKLE_RIGHT"),
        (FootL, Some("FootLeft"), "FOOT_LEFT"),
        (FootR, Some("FootRight"), "FOOT_RIGHT"),
    ]
};

impl KinectKind {
    /// The profile name used in pose messages.
    pub fn from_profile(name: &str) -> Option<Self> {
        match name {
            "kinect_v2" => Some(Self::V2),
            "azure_kinect" | "kinect_azure" => Some(Self::Azure),
            _ => None,
        }
    }

    /// Guesses the kind from joint names (`SpineBase` → v2, `SPINE_NAVEL` → Azure).
    pub fn detect<'a>(mut names: impl Iterator<Item = &'a str>) -> Option<Self> {
        names.find_map(|n| match n {
            "SpineBase" | "SpineShoulder" | "HandTipLeft" => Some(Self::V2),
            "SPINE_NAVEL" | "SPINE_CHEST" | "CLAVICLE_LEFT" => Some(Self::Azure),
            _ => None,
        })
    }

    /// Whether `name` is one of this sensor's joint names.
    pub fn knows(self, name: &str) -> bool {
        self.source(name).is_some()
    }

    fn source(self, name: &str) -> Option<Src> {
        NAMES
            .iter()
            .find(|&&(s, _, _)| self.name(s) == Some(name))
            .map(|&(s, _, _)| s)
    }

    /// The SDK's name of a source joint (`None`: this sensor has no such joint).
    fn name(self, s: Src) -> Option<&'static str> {
        let (_, v2, azure) = NAMES[s as usize];
        match self {
            Self::V2 => v2,
            Self::Azure => Some(azure),
        }
    }

    /// Camera coordinates (the SDK's units) → clothcast world (metres, +Y up, the
    /// performer facing +Z with their left at +X).
    pub fn to_world(self, p: [f32; 3]) -> Vec3 {
        match self {
            // rotate 180° about Y
            Self::V2 => Vec3::new(-p[0], p[1], -p[2]),
            // millimetres; rotate 180° about X
            Self::Azure => Vec3::new(p[0], -p[1], -p[2]) * 0.001,
        }
    }

    /// Whether a joint's tracking state (v2: 0 not tracked, 1 inferred, 2 tracked) or
    /// confidence level (Azure: 0 none, 1 low, 2 medium, 3 high) is good enough.
    pub fn usable(self, level: u32) -> bool {
        match self {
            Self::V2 => level >= 1,
            Self::Azure => level >= 1,
        }
    }
}

/// The observed joints of one body, in clothcast's world frame (metres).
#[derive(Clone, Debug, Default)]
pub struct KinectJoints {
    pos: [Option<Vec3>; SRC_COUNT],
}

impl KinectJoints {
    /// Sets a joint by its SDK name (unknown names are ignored; returns whether used).
    pub fn set(&mut self, kind: KinectKind, name: &str, world: Vec3) -> bool {
        match kind.source(name) {
            Some(s) if world.is_finite() && world.length() < 100.0 => {
                self.pos[s as usize] = Some(world);
                true
            }
            _ => false,
        }
    }

    fn get(&self, s: Src) -> Option<Vec3> {
        self.pos[s as usize]
    }

    /// The observed pelvis, if tracked.
    pub fn pelvis(&self) -> Option<Vec3> {
        self.get(Src::Pelvis)
    }

    /// Number of joints set.
    pub fn count(&self) -> usize {
        self.pos.iter().flatten().count()
    }
}

/// Turns observed joint positions into canonical poses.
#[derive(Clone, Debug)]
pub struct PositionRetargeter {
    rest: [Vec3; JOINT_COUNT],
}

/// Smallest rotation taking direction `a` to `b` (identity for degenerate input).
fn arc(a: Vec3, b: Vec3) -> Quat {
    match (a.try_normalize(), b.try_normalize()) {
        (Some(a), Some(b)) => Quat::from_rotation_arc(a, b),
        _ => Quat::IDENTITY,
    }
}

/// The rotation whose frame has `x` along `side` and `y` along `up` (orthonormalised).
fn frame(side: Vec3, up: Vec3) -> Option<Quat> {
    let y = up.try_normalize()?;
    let z = side.cross(y).try_normalize()?;
    let x = y.cross(z);
    Some(Quat::from_mat3(&glam::Mat3::from_cols(x, y, z)).normalize())
}

impl PositionRetargeter {
    /// For a canonical skeleton (its rest pose gives the rest bone directions).
    pub fn new(skeleton: &Skeleton) -> Self {
        Self {
            rest: *skeleton.rest_positions(),
        }
    }

    fn rest(&self, j: JointId) -> Vec3 {
        self.rest[j.index()]
    }

    /// The pose for observed joints `obs`, starting from `previous` (untracked bones
    /// keep their rotation there). `origin` is the observed pelvis position that maps to
    /// the avatar's rest pelvis (the calibration point).
    pub fn retarget(&self, obs: &KinectJoints, previous: &Pose, origin: Vec3) -> Pose {
        use JointId as J;
        use Src::*;
        let mut pose = *previous;
        let mut world = [Quat::IDENTITY; JOINT_COUNT];
        for j in JointId::all() {
            world[j.index()] = match j.parent() {
                Some(p) => world[p.index()] * previous.rotation(j),
                None => previous.rotation(j),
            };
        }
        // pelvis and chest: full orientation from the hip and shoulder lines
        let rest_hips = self.rest(J::LEFT_HIP) - self.rest(J::RIGHT_HIP);
        let rest_up = self.rest(J::SPINE3) - self.rest(J::PELVIS);
        let rest_frame = frame(rest_hips, rest_up).unwrap_or(Quat::IDENTITY);
        let pelvis = match (
            obs.get(HipL),
            obs.get(HipR),
            obs.get(Pelvis),
            obs.get(Chest).or(obs.get(SpineMid)),
        ) {
            (Some(l), Some(r), Some(b), Some(c)) => {
                frame(l - r, c - b).map(|f| f * rest_frame.inverse())
            }
            _ => None,
        };
        if let Some(q) = pelvis {
            world[J::PELVIS.index()] = q;
            pose.set_rotation(J::PELVIS, q);
        }
        if let Some(b) = obs.get(Pelvis) {
            pose.translation = b - origin;
        }
        let rest_shoulders = self.rest(J::LEFT_SHOULDER) - self.rest(J::RIGHT_SHOULDER);
        let chest = match (
            obs.get(ShoulderL),
            obs.get(ShoulderR),
            obs.get(Pelvis),
            obs.get(Chest).or(obs.get(Neck)),
        ) {
            (Some(l), Some(r), Some(b), Some(c)) => frame(l - r, c - b)
                .zip(frame(rest_shoulders, rest_up))
                .map(|(f, r)| f * r.inverse()),
            _ => None,
        };
        if let Some(chest) = chest {
            // spread the turn from pelvis to chest over the three spine joints
            let base = world[J::PELVIS.index()];
            let mut parent = base;
            for (j, t) in [
                (J::SPINE1, 1.0 / 3.0),
                (J::SPINE2, 2.0 / 3.0),
                (J::SPINE3, 1.0),
            ] {
                let w = base.slerp(chest, t).normalize();
                pose.set_rotation(j, (parent.inverse() * w).normalize());
                world[j.index()] = w;
                parent = w;
            }
        }
        // limbs and head: swing each bone onto its observed direction
        let bones: [(J, J, Src, Src); 13] = [
            (J::NECK, J::HEAD, Neck, Head),
            (J::LEFT_COLLAR, J::LEFT_SHOULDER, ClavicleL, ShoulderL),
            (J::RIGHT_COLLAR, J::RIGHT_SHOULDER, ClavicleR, ShoulderR),
            (J::LEFT_SHOULDER, J::LEFT_ELBOW, ShoulderL, ElbowL),
            (J::RIGHT_SHOULDER, J::RIGHT_ELBOW, ShoulderR, ElbowR),
            (J::LEFT_ELBOW, J::LEFT_WRIST, ElbowL, WristL),
            (J::RIGHT_ELBOW, J::RIGHT_WRIST, ElbowR, WristR),
            (J::LEFT_HIP, J::LEFT_KNEE, HipL, KneeL),
            (J::RIGHT_HIP, J::RIGHT_KNEE, HipR, KneeR),
            (J::LEFT_KNEE, J::LEFT_ANKLE, KneeL, AnkleL),
            (J::RIGHT_KNEE, J::RIGHT_ANKLE, KneeR, AnkleR),
            (J::LEFT_ANKLE, J::LEFT_FOOT, AnkleL, FootL),
            (J::RIGHT_ANKLE, J::RIGHT_FOOT, AnkleR, FootR),
        ];
        for (j, child, a, b) in bones {
            let Some(parent) = j.parent() else { continue };
            // refresh this joint's world rotation from its (possibly updated) parent
            world[j.index()] = world[parent.index()] * pose.rotation(j);
            if let (Some(pa), Some(pb)) = (obs.get(a), obs.get(b)) {
                let wp = world[parent.index()];
                let rest_dir = wp * (self.rest(child) - self.rest(j));
                let w = (arc(rest_dir, pb - pa) * wp).normalize();
                pose.set_rotation(j, (wp.inverse() * w).normalize());
                world[j.index()] = w;
            }
        }
        // keep the wrists, feet and head as they were relative to their parents
        pose
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skeleton::Proportions;

    /// Joint positions of a canonical pose, named as a Kinect v2 would report them.
    fn observe(skel: &Skeleton, pose: &Pose) -> KinectJoints {
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
        let got = r.retarget(&obs, &Pose::rest(), origin);
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
        let got = r.retarget(&obs, &prev, skel.rest_positions()[0]);
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
    }
}

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
}

/// Most bodies per frame (the SDKs track 6).
const MAX_BODIES: usize = 16;

/// One body of a JSON body frame as a Kinect bridge emits it (the shapes
/// [`parse_body_frame`] reads: `trackingId`, `jointType`, `cameraX..Z` in metres and
/// `trackingState` for v2; `body_id`, `name`, `position` in millimetres and `confidence`
/// for Azure), every joint tracked, from canonical joint positions (`joints`: world
/// frame, metres, +Y up, the performer facing +Z, e.g. [`Skeleton::joint_positions`]).
/// The performer stands `distance` metres in front of the sensor, facing it. Hands are
/// put a third of the forearm beyond the wrists (the canonical skeleton has none).
/// What `clothcast play --kinect` sends, so a kiosk's server can be tried without a
/// sensor.
pub fn body_json(
    kind: KinectKind,
    id: &str,
    joints: &[Vec3; JOINT_COUNT],
    distance: f32,
) -> serde_json::Value {
    use Src::*;
    let at = |j: JointId| joints[j.index()];
    let hand = |w: JointId, e: JointId| at(w) + (at(w) - at(e)) / 3.0;
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
        HandL => hand(JointId::LEFT_WRIST, JointId::LEFT_ELBOW),
        HandR => hand(JointId::RIGHT_WRIST, JointId::RIGHT_ELBOW),
        HipL => at(JointId::LEFT_HIP),
        HipR => at(JointId::RIGHT_HIP),
        KneeL => at(JointId::LEFT_KNEE),
        KneeR => at(JointId::RIGHT_KNEE),
        AnkleL => at(JointId::LEFT_ANKLE),
        AnkleR => at(JointId::RIGHT_ANKLE),
        FootL => at(JointId::LEFT_FOOT),
        FootR => at(JointId::RIGHT_FOOT),
    };
    let list: Vec<serde_json::Value> = NAMES
        .iter()
        .filter_map(|&(s, ..)| Some((kind.name(s)?, joint(s))))
        .map(|(name, p)| {
            // world → camera: the inverse of `to_world`, the performer `distance` away
            let w = p - Vec3::new(0.0, 0.0, distance);
            match kind {
                KinectKind::V2 => serde_json::json!({"jointType": name,
                    "cameraX": -w.x, "cameraY": w.y, "cameraZ": -w.z, "trackingState": 2}),
                KinectKind::Azure => serde_json::json!({"name": name,
                    "position": [w.x * 1000.0, -w.y * 1000.0, -w.z * 1000.0], "confidence": 2}),
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
/// `isTracked: false` and joints not tracked are skipped.
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
            if kind.usable(level) {
                joints.set(kind, name, kind.to_world(p.map(|x| x as f32)));
            }
        }
        out.push(KinectBody { id, kind, joints });
    }
    Ok(out)
}

#[cfg(test)]
mod frame_tests {
    use super::*;

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
        let joints = skel.joint_positions(&pose);
        for (kind, count) in [(KinectKind::V2, 21), (KinectKind::Azure, 23)] {
            let frame = serde_json::json!({"bodies": [body_json(kind, "7", &joints, 2.0)]});
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
}
