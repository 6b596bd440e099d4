//! Kinect body tracking → canonical poses. Kinect v2 (25 joints, metres, camera space:
//! X to the sensor's left, Y up, Z away from the sensor) and Azure Kinect body tracking
//! (32 joints, millimetres, X right, Y down, Z away). Bytes in, `Pose` out; no sockets.
//!
//! Both are position sources: each canonical bone is turned from its rest direction to
//! the observed one by the smallest rotation in its parent's frame (twist held), except
//! that the upper arms and thighs take their twist from the bend of the elbows and
//! knees below them ([`hinge`]), the pelvis and chest take their full orientation from
//! the hip and shoulder lines, and
//! joints not tracked keep their previous rotation. Camera space is turned (a rotation,
//! not a mirror) so the performer's left is the avatar's left; mirror displays flip the
//! picture instead (the viewer's mirror mode). A floor the sensor reports ([`Floor`])
//! levels the joints (a tilted sensor's tilt taken out) and stands the avatar on it, and
//! the pelvis's motion is scaled by the avatar's legs over the performer's
//! ([`Placement`]).

use glam::{Quat, Vec3};

use crate::skeleton::{JOINT_COUNT, JointId, Pose, Skeleton, swing_twist};

mod bridge;
mod floor;
mod hinge;

pub use hinge::without_hinge_twist;
pub(super) use hinge::{HINGES, turn_about};
use hinge::{hinge_twist, ramp, twist_onto};

pub use bridge::{
    KinectBody, KinectError, SensorView, body_frame_json, body_json, parse_body_frame,
};
pub use floor::Floor;

/// Which sensor's joints and units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KinectKind {
    /// Kinect for Windows v2 (`kinect_v2`).
    V2,
    /// Azure Kinect body tracking (`azure_kinect`).
    Azure,
}

/// Source joints every bone direction is measured between (names of both SDKs; the
/// Xsens MVN reader maps its segments onto them too).
#[derive(Clone, Copy)]
pub(super) enum Src {
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
    /// A point on the spine that moves with the pelvis, just above it (Xsens MVN's
    /// L5/S1 joint; neither Kinect has one): with it the pelvis's pitch is measured
    /// rather than taken from the whole spine's bend, and the chest's orientation from
    /// points fixed to the chest (clavicles, neck) rather than the arms.
    Lumbar,
    /// The ears (Azure Kinect's face points, MediaPipe's landmarks; a Kinect v2 has
    /// none): the line between them turns the head about itself (where it looks),
    /// which the neck and head points alone leave open.
    EarL,
    EarR,
    /// The fingertips' end of the hand (Kinect's `HandTip`): with the wrist, the hand's
    /// direction.
    HandTipL,
    HandTipR,
    /// The thumb: across the hand's direction it turns the hand about itself (which
    /// way the palm faces), and with it the forearm.
    ThumbL,
    ThumbR,
}

const SRC_COUNT: usize = 30;
// one bit per source joint in `KinectJoints::inferred`
const _: () = assert!(SRC_COUNT <= 32);

/// Each source joint's name in Kinect v2 (no clavicles) and in Azure Kinect body
/// tracking, in [`Src`] order.
const NAMES: [(Src, Option<&str>, Option<&str>); SRC_COUNT] = {
    use Src::*;
    [
        (Pelvis, Some("SpineBase"), Some("PELVIS")),
        (SpineMid, Some("SpineMid"), Some("SPINE_NAVEL")),
        (Chest, Some("SpineShoulder"), Some("SPINE_CHEST")),
        (Neck, Some("Neck"), Some("NECK")),
        (Head, Some("Head"), Some("HEAD")),
        (ClavicleL, None, Some("CLAVICLE_LEFT")),
        (ClavicleR, None, Some("CLAVICLE_RIGHT")),
        (ShoulderL, Some("ShoulderLeft"), Some("SHOULDER_LEFT")),
        (ShoulderR, Some("ShoulderRight"), Some("SHOULDER_RIGHT")),
        (ElbowL, Some("ElbowLeft"), Some("ELBOW_LEFT")),
        (ElbowR, Some("ElbowRight"), Some("ELBOW_RIGHT")),
        (WristL, Some("WristLeft"), Some("WRIST_LEFT")),
        (WristR, Some("WristRight"), Some("WRIST_RIGHT")),
        (HandL, Some("HandLeft"), Some("HAND_LEFT")),
        (HandR, Some("HandRight"), Some("HAND_RIGHT")),
        (HipL, Some("HipLeft"), Some("HIP_LEFT")),
        (HipR, Some("HipRight"), Some("HIP_RIGHT")),
        (KneeL, Some("KneeLeft"), Some("KNEE_LEFT")),
        (KneeR, Some("KneeRight"), Some("KNEE_RIGHT")),
        (AnkleL, Some("AnkleLeft"), Some("ANKLE_LEFT")),
        (AnkleR, Some("AnkleRight"), Some("ANKLE_RIGHT")),
        (FootL, Some("FootLeft"), Some("FOOT_LEFT")),
        (FootR, Some("FootRight"), Some("FOOT_RIGHT")),
        (Lumbar, None, None),
        (EarL, None, Some("EAR_LEFT")),
        (EarR, None, Some("EAR_RIGHT")),
        (HandTipL, Some("HandTipLeft"), Some("HANDTIP_LEFT")),
        (HandTipR, Some("HandTipRight"), Some("HANDTIP_RIGHT")),
        (ThumbL, Some("ThumbLeft"), Some("THUMB_LEFT")),
        (ThumbR, Some("ThumbRight"), Some("THUMB_RIGHT")),
    ]
};

impl KinectKind {
    /// Body frames a second the sensor delivers: 30 for both (the Kinect v2's depth
    /// camera runs at 30 Hz only; the Azure Kinect at its default and highest depth
    /// rate, 5 and 15 also being possible).
    pub fn frame_rate(self) -> f32 {
        match self {
            Self::V2 | Self::Azure => 30.0,
        }
    }

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
            Self::Azure => azure,
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
    /// confidence level (Azure: 0 none, 1 low, 2 medium, 3 high) is good enough to pose
    /// the avatar.
    pub fn usable(self, level: u32) -> bool {
        match self {
            Self::V2 => level >= 1,
            Self::Azure => level >= 1,
        }
    }

    /// Whether a usable level was measured rather than guessed: v2's "inferred" and
    /// Azure's "low" (occluded, its position predicted) joints are guesses.
    pub fn tracked(self, level: u32) -> bool {
        match self {
            Self::V2 => level >= 2,
            Self::Azure => level >= 2,
        }
    }
}

/// The observed joints of one body, in clothcast's world frame (metres).
#[derive(Clone, Debug, Default)]
pub struct KinectJoints {
    pos: [Option<Vec3>; SRC_COUNT],
    /// Bit `s`: source joint `s` was only inferred (guessed by the sensor: out of view
    /// or occluded), not tracked.
    inferred: u32,
}

impl KinectJoints {
    /// Sets a tracked joint by its SDK name (unknown names are ignored; returns whether
    /// used).
    pub fn set(&mut self, kind: KinectKind, name: &str, world: Vec3) -> bool {
        self.put(kind, name, world, false)
    }

    /// Sets a joint the sensor only inferred ([`KinectKind::tracked`] is false for its
    /// level): it poses the avatar like a tracked one, but measures nothing
    /// ([`Self::leg_length`]).
    pub fn set_inferred(&mut self, kind: KinectKind, name: &str, world: Vec3) -> bool {
        self.put(kind, name, world, true)
    }

    fn put(&mut self, kind: KinectKind, name: &str, world: Vec3, inferred: bool) -> bool {
        kind.source(name)
            .is_some_and(|s| self.put_source(s, world, inferred))
    }

    /// Sets source joint `s` (world frame, metres); refused (false) unless finite and
    /// within 100 m of the origin.
    pub(super) fn put_source(&mut self, s: Src, world: Vec3, inferred: bool) -> bool {
        if !world.is_finite() || world.length() >= 100.0 {
            return false;
        }
        self.pos[s as usize] = Some(world);
        let bit = 1 << s as u32;
        self.inferred = if inferred {
            self.inferred | bit
        } else {
            self.inferred & !bit
        };
        true
    }

    fn get(&self, s: Src) -> Option<Vec3> {
        self.pos[s as usize]
    }

    /// Source joint `s` and whether it was only inferred.
    pub(super) fn source(&self, s: Src) -> Option<(Vec3, bool)> {
        self.get(s)
            .map(|p| (p, self.inferred & (1 << s as u32) != 0))
    }

    /// The joint if it was tracked (not inferred).
    fn tracked(&self, s: Src) -> Option<Vec3> {
        self.get(s).filter(|_| self.inferred & (1 << s as u32) == 0)
    }

    /// The observed pelvis, tracked or inferred.
    pub fn pelvis(&self) -> Option<Vec3> {
        self.get(Src::Pelvis)
    }

    /// Number of joints set.
    pub fn count(&self) -> usize {
        self.pos.iter().flatten().count()
    }

    /// The same joints in `floor`'s levelled frame (y: height above the floor).
    pub fn levelled(&self, floor: &Floor) -> Self {
        Self {
            pos: self.pos.map(|p| p.map(|p| floor.level(p))),
            inferred: self.inferred,
        }
    }

    /// The performer's leg length, thigh plus shin (metres), averaged over the legs
    /// whose hip, knee and ankle are all tracked; `None` when neither is. Inferred
    /// joints do not count: a sensor guessing at legs out of its view (a kiosk that
    /// sees its customer from the knees up) would measure its guess.
    pub fn leg_length(&self) -> Option<f32> {
        let leg = |h, k, a| {
            let k = self.tracked(k)?;
            Some(self.tracked(h)?.distance(k) + k.distance(self.tracked(a)?))
        };
        match (
            leg(Src::HipL, Src::KneeL, Src::AnkleL),
            leg(Src::HipR, Src::KneeR, Src::AnkleR),
        ) {
            (Some(l), Some(r)) => Some((l + r) / 2.0),
            (l, r) => l.or(r),
        }
    }

    /// The centre of the hips where both are seen, else the pelvis.
    fn hip_centre(&self) -> Option<Vec3> {
        match (self.get(Src::HipL), self.get(Src::HipR)) {
            (Some(l), Some(r)) => Some((l + r) / 2.0),
            _ => self.get(Src::Pelvis),
        }
    }
}

/// Leg lengths (thigh plus shin, metres) taken as a performer's: shorter or longer is
/// a measurement gone wrong (or, from VMC, a model in other units).
pub const PLAUSIBLE_LEG: std::ops::RangeInclusive<f32> = 0.3..=1.4;

/// A performer's leg length from a stream of noisy measurements
/// ([`KinectJoints::leg_length`]): the median of the last 16 plausible ones (0.3–1.4
/// m), so a few bad measurements do not move it (legs the sensor marks as inferred are
/// not measured at all). Plain data (`Copy`), updated in place.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LegEstimate {
    recent: [f32; 16],
    next: usize,
    count: usize,
}

impl LegEstimate {
    /// Adds a measurement (metres); implausible or missing ones are ignored.
    pub fn push(&mut self, leg: Option<f32>) {
        if let Some(l) = leg.filter(|l| PLAUSIBLE_LEG.contains(l)) {
            self.recent[self.next] = l;
            self.next = (self.next + 1) % self.recent.len();
            self.count = (self.count + 1).min(self.recent.len());
        }
    }

    /// The estimate, once there is a measurement.
    pub fn get(&self) -> Option<f32> {
        if self.count == 0 {
            return None;
        }
        let mut v = self.recent;
        let v = &mut v[..self.count];
        v.sort_unstable_by(f32::total_cmp);
        Some(v[self.count / 2])
    }
}

/// How a position source's pelvis is placed ([`PositionRetargeter::retarget`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Placement {
    /// The observed pelvis position that maps to the avatar's rest pelvis: across the
    /// floor always, and in height too unless `on_floor`.
    pub origin: Vec3,
    /// The joints are levelled onto the floor ([`KinectJoints::levelled`]): the avatar's
    /// hips stand at the performer's hip height above the floor (scaled by the legs).
    pub on_floor: bool,
    /// The performer's leg length ([`KinectJoints::leg_length`]), when known: the
    /// pelvis's motion is scaled by the avatar's leg length over it (clamped to
    /// ½–2), so a child's or a tall performer's steps and crouches fit the avatar's
    /// legs (as BVH root motion is scaled).
    pub leg: Option<f32>,
}

impl Placement {
    /// Heights relative to `origin`, the performer's legs taken as the avatar's.
    pub fn at(origin: Vec3) -> Self {
        Self {
            origin,
            on_floor: false,
            leg: None,
        }
    }
}

/// Turns observed joint positions into canonical poses.
#[derive(Clone, Debug)]
pub struct PositionRetargeter {
    /// The avatar's skeleton (its rest pose gives the rest bone directions).
    skeleton: Skeleton,
    /// The avatar's thigh plus shin, metres.
    leg: f32,
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
        let r = skeleton.rest_positions();
        let leg = |h: JointId, k: JointId, a: JointId| {
            r[h.index()].distance(r[k.index()]) + r[k.index()].distance(r[a.index()])
        };
        Self {
            skeleton: skeleton.clone(),
            leg: (leg(JointId::LEFT_HIP, JointId::LEFT_KNEE, JointId::LEFT_ANKLE)
                + leg(
                    JointId::RIGHT_HIP,
                    JointId::RIGHT_KNEE,
                    JointId::RIGHT_ANKLE,
                ))
                / 2.0,
        }
    }

    /// The avatar's skeleton (the one this retargeter was made for).
    pub fn skeleton(&self) -> &Skeleton {
        &self.skeleton
    }

    /// The avatar's leg length (thigh plus shin), metres.
    pub fn leg_length(&self) -> f32 {
        self.leg
    }

    /// The factor a performer's pelvis motion is scaled by on this avatar: the avatar's
    /// leg length over the performer's (`performer_leg`, metres), clamped to ½–2, so a
    /// child's or a tall performer's steps and crouches fit the avatar's legs (as BVH
    /// root motion is scaled); 1 while the performer's legs are not known.
    pub fn root_scale(&self, performer_leg: Option<f32>) -> f32 {
        performer_leg.map_or(1.0, |l| (self.leg / l).clamp(0.5, 2.0))
    }

    fn rest(&self, j: JointId) -> Vec3 {
        self.skeleton.rest_position(j)
    }

    /// The pose for observed joints `obs`, starting from `previous` (untracked bones
    /// keep their rotation there), its pelvis placed by `at`.
    pub fn retarget(&self, obs: &KinectJoints, previous: &Pose, at: &Placement) -> Pose {
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
        // the previous pose's world rotations, for the twist a straight limb holds
        let before = world;
        // pelvis and chest: full orientation from the hip and shoulder lines, and up
        // the spine (or, with a lumbar point, from points fixed to each)
        let rest_hips = self.rest(J::LEFT_HIP) - self.rest(J::RIGHT_HIP);
        let rest_up = self.rest(J::SPINE3) - self.rest(J::PELVIS);
        let lumbar = obs.get(Lumbar);
        let (up, rest_pelvis_up) = match lumbar {
            Some(l) => (Some(l), self.rest(J::SPINE1) - self.rest(J::PELVIS)),
            None => (obs.get(Chest).or(obs.get(SpineMid)), rest_up),
        };
        let rest_frame = frame(rest_hips, rest_pelvis_up).unwrap_or(Quat::IDENTITY);
        let pelvis = match (obs.get(HipL), obs.get(HipR), obs.get(Pelvis), up) {
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
            let scale = self.root_scale(at.leg);
            pose.translation = (b - at.origin) * scale;
            if let Some(hips) = obs.hip_centre().filter(|_| at.on_floor) {
                // the avatar's hip centre (turned with its pelvis) at the performer's
                // hip height above the floor, scaled
                let rest_hips = (self.rest(J::LEFT_HIP) + self.rest(J::RIGHT_HIP)) / 2.0;
                let pelvis = self.rest(J::PELVIS);
                let avatar_hips = pelvis + world[J::PELVIS.index()] * (rest_hips - pelvis);
                pose.translation.y = hips.y * scale - avatar_hips.y;
            }
        }
        let rest_shoulders = self.rest(J::LEFT_SHOULDER) - self.rest(J::RIGHT_SHOULDER);
        let fixed = (
            lumbar,
            obs.get(ClavicleL),
            obs.get(ClavicleR),
            obs.get(Chest),
            obs.get(Neck),
        );
        let chest = match fixed {
            (Some(_), Some(l), Some(r), Some(c), Some(n)) => {
                let rest_clavicles = self.rest(J::LEFT_COLLAR) - self.rest(J::RIGHT_COLLAR);
                let rest_neck = self.rest(J::NECK) - self.rest(J::SPINE3);
                frame(l - r, n - c)
                    .zip(frame(rest_clavicles, rest_neck))
                    .map(|(f, r)| f * r.inverse())
            }
            _ => match (
                obs.get(ShoulderL),
                obs.get(ShoulderR),
                obs.get(Pelvis),
                obs.get(Chest).or(obs.get(Neck)),
            ) {
                (Some(l), Some(r), Some(b), Some(c)) => frame(l - r, c - b)
                    .zip(frame(rest_shoulders, rest_up))
                    .map(|(f, r)| f * r.inverse()),
                _ => None,
            },
        };
        if let Some(chest) = chest {
            // spread the turn from pelvis to chest over the three spine joints
            let base = world[J::PELVIS.index()];
            let mut parent = base;
            // with a lumbar point, the points up the spine (lumbar, mid-spine, chest)
            // also swing spine1 and spine2 onto the spine's observed bend
            let along = |a: Src, b: Src| lumbar.and(obs.get(a).zip(obs.get(b)));
            for (j, t, towards) in [
                (
                    J::SPINE1,
                    1.0 / 3.0,
                    along(Lumbar, SpineMid).map(|s| (s, J::SPINE2)),
                ),
                (
                    J::SPINE2,
                    2.0 / 3.0,
                    along(SpineMid, Chest).map(|s| (s, J::SPINE3)),
                ),
                (J::SPINE3, 1.0, None),
            ] {
                let mut w = base.slerp(chest, t).normalize();
                if let Some(((a, b), child)) = towards {
                    let rest_dir = w * (self.rest(child) - self.rest(j));
                    w = (arc(rest_dir, b - a) * w).normalize();
                }
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
                let mut w = (arc(rest_dir, pb - pa) * wp).normalize();
                if let Some(&(_, end, flex, _)) = HINGES.iter().find(|h| h.0 == j) {
                    let held = before[j.index()];
                    w = hinge_twist(w, pb - pa, obs.get(end).map(|e| e - pb), flex, held);
                }
                pose.set_rotation(j, (wp.inverse() * w).normalize());
                world[j.index()] = w;
            }
        }
        for side in [Side::Left, Side::Right] {
            self.hand(obs, side, &before, &mut world, &mut pose);
        }
        // the head turned about itself to the ears' line; the feet, and the head
        // without ears, kept as they were relative to their parents
        if let (Some(l), Some(r)) = (obs.get(EarL), obs.get(EarR)) {
            let neck = world[J::NECK.index()];
            let head = (neck * pose.rotation(J::HEAD)).normalize();
            if let Some(turned) = twist_onto(head, head * Vec3::Y, Vec3::X, l - r) {
                pose.set_rotation(J::HEAD, (neck.inverse() * turned).normalize());
            }
        }
        pose
    }

    /// The hand on `side`: swung onto the wrist → fingertips direction (or the hand's
    /// centre where the tips are not tracked), then turned about itself so that the thumb
    /// points where it is seen (the palm-down T-pose has it forwards), the forearm
    /// taking [`FOREARM_TWIST_SHARE`] of that turn, as the radius turns about the ulna.
    /// The turn stays in the forearm's range ([`HAND_TURN`]: pronation to supination,
    /// palm down to palm up and a little past), and while the thumb lies nearly along
    /// the hand (seen edge on, or lost in noise), or is not tracked, the last frame's
    /// turn is kept. Without a wrist or a tracked hand point the hand keeps its rotation
    /// relative to the forearm (MediaPipe's sources have no hand points: its hand
    /// landmarks on the webcam fixture were 43–63° off the clip's hands).
    fn hand(
        &self,
        obs: &KinectJoints,
        side: Side,
        before: &[Quat; JOINT_COUNT],
        world: &mut [Quat; JOINT_COUNT],
        pose: &mut Pose,
    ) {
        use JointId as J;
        use Src::*;
        // the hand's rest axis is the T-pose's, outwards along ±x (palm down, the thumb
        // forwards along +z); supination (palm up) turns the left hand backwards about
        // it, the right forwards
        let (wrist, elbow, w, tip, centre, thumb, rest_dir) = match side {
            Side::Left => (
                J::LEFT_WRIST,
                J::LEFT_ELBOW,
                WristL,
                HandTipL,
                HandL,
                ThumbL,
                Vec3::X,
            ),
            Side::Right => (
                J::RIGHT_WRIST,
                J::RIGHT_ELBOW,
                WristR,
                HandTipR,
                HandR,
                ThumbR,
                Vec3::NEG_X,
            ),
        };
        let supinate = -rest_dir.x;
        // the hand's points only where the sensor measured them: guessed ones (v2's
        // inferred, Azure's low confidence) are too rough to turn a hand by
        let (Some(pw), Some(pt)) = (obs.get(w), obs.tracked(tip).or(obs.tracked(centre))) else {
            return;
        };
        let Some(shoulder) = elbow.parent() else {
            return;
        };
        let upper = world[shoulder.index()];
        // the forearm as the elbow bends it, without the turn it held: the hand's turn
        // is measured from there, and the forearm given its share of it afresh
        let (bend, _) = swing_twist(
            (upper.inverse() * world[elbow.index()]).normalize(),
            rest_dir,
        );
        let base = (upper * bend).normalize();
        let (mut forearm, mut hand) = (base, (arc(base * rest_dir, pt - pw) * base).normalize());
        if let Some(axis) = (pt - pw).try_normalize() {
            // turns about the hand's axis from where the bent forearm leaves the thumb, as
            // supination (palm up) positive, unwrapped in the middle of the turns a
            // forearm cannot make
            let range = |t: f32| {
                let u = supinate * t;
                let u = if u < HAND_WRAP.to_radians() {
                    u + std::f32::consts::TAU
                } else {
                    u
                };
                u.clamp(HAND_TURN.0.to_radians(), HAND_TURN.1.to_radians())
            };
            let rest_thumb = hand * Vec3::Z;
            let held = turn_about(axis, rest_thumb, before[wrist.index()] * Vec3::Z)
                .map(range)
                .unwrap_or(0.0);
            let turn = match obs.tracked(thumb) {
                Some(pth) => {
                    // how far across the hand the thumb lies (sine of its angle to the
                    // axis): nearly along it, it says nothing
                    let across = (pth - pw).normalize_or_zero().cross(axis).length();
                    let blend = ramp(across, THUMB_ACROSS);
                    let seen = turn_about(axis, rest_thumb, pth - pw).map(range);
                    seen.map_or(held, |s| held + blend * (s - held))
                }
                None => held,
            };
            if turn.is_finite() {
                let turn = supinate * turn;
                let along = (base * rest_dir).normalize_or_zero();
                forearm =
                    (Quat::from_axis_angle(along, FOREARM_TWIST_SHARE * turn) * base).normalize();
                hand = (Quat::from_axis_angle(axis, turn) * hand).normalize();
            }
        }
        pose.set_rotation(elbow, (upper.inverse() * forearm).normalize());
        pose.set_rotation(wrist, (forearm.inverse() * hand).normalize());
        world[elbow.index()] = forearm;
        world[wrist.index()] = hand;
    }
}

/// Which hand.
#[derive(Clone, Copy)]
enum Side {
    Left,
    Right,
}

/// The share of a hand's turn about itself the forearm takes (the rest is the wrist's):
/// a forearm's pronation and supination happen along it, and with no twist bone
/// between elbow and wrist, half each keeps both ends of the skinned forearm from
/// collapsing.
pub const FOREARM_TWIST_SHARE: f32 = 0.5;

/// The range of a hand's turn about itself from the palm-down T-pose, degrees,
/// supination (palm up) positive: from 90° of pronation to palm up.
pub const HAND_TURN: (f32, f32) = (-90.0, 180.0);

/// Where a hand's turn is unwrapped, degrees: in the middle of the turns a forearm
/// cannot make (past palm up, or pronated past 90°), so that turns it can make never
/// jump by a full turn.
const HAND_WRAP: f32 = -135.0;

/// How far across the hand the thumb must lie (sine of its angle to the hand's axis)
/// to start to turn it, and to turn it alone; nearer the axis the last turn is kept.
const THUMB_ACROSS: (f32, f32) = (0.25, 0.5);

#[cfg(test)]
mod tests;
