//! Xsens MVN real-time network streaming (the Network Streamer of MVN Animate and
//! Analyze, UDP) ↔ observed joints. Bytes in, [`KinectJoints`] out ([`parse_mvn`],
//! [`MvnStream`]), and the other way ([`mvn_datagram`], what `clothcast play --mvn`
//! sends); the sockets live in `net` and the CLI.
//!
//! Read: the "Position + Orientation (Quaternion)" datagram, message type 02. Every
//! datagram starts with a 24-byte big-endian header: the ID string `MXTP` + two digits
//! of message type, sample counter (u32), datagram counter (u8: its index within the
//! sample, the top bit set on the sample's last), number of items (u8), time code
//! (u32, ms), character id (u8: one per suit of a multi-person capture), numbers of
//! body segments, props and finger segments (u8 each; MVN 2019 and later, zero
//! before), two reserved bytes and the payload size (u16; zero before MVN 2019). A
//! type-02 item is 32 bytes: segment id (u32, 1–23 for the body) and the segment's
//! position (3 × f32, metres) and orientation (4 × f32, w x y z), in MVN's Z-up,
//! right-handed frame, the floor at z = 0. Body segments come first (so in a sample's
//! first datagram); props and finger segments after them are skipped. Other message
//! types (joint angles, centre of mass, metadata, …) are valid datagrams of the stream
//! and are ignored.
//!
//! The segments' origins are their proximal joint centres (MVN user manual §19.7):
//! they go to the Kinect path's position retargeter (bone directions; the upper arms'
//! and thighs' twist from the elbows' and knees' bend, the rest held). The
//! orientations' per-segment axes conventions differ between MVN's output settings, so
//! they are used only relative to a calibration ([`orient_segments`]): once the
//! performer has been calibrated standing in a T-pose, each segment's rotation since
//! then gives its bone's turn about itself (forearm twist) and the hands, head and toes
//! their whole orientation, which no segment origin shows. MVN's frame maps to
//! clothcast's as x → z (the performer's forward at calibration), y → x (their left),
//! z → y (up); MVN stands the performer on its floor, so positions are already
//! levelled.

use glam::{Quat, Vec3};

use super::kinect::{KinectJoints, Src};
use crate::skeleton::{JOINT_COUNT, JointId, Pose, Skeleton, swing_twist};

/// UDP port MVN's network streamer sends to by default.
pub const MVN_PORT: u16 = 9763;

/// Header bytes of every datagram.
const HEADER: usize = 24;
/// Bytes of one type-02 item.
const ITEM: usize = 32;
/// Body segments of the MVN model (ids 1–23).
pub const MVN_SEGMENTS: usize = 23;
/// Farthest a segment may lie from MVN's origin on any axis, metres: beyond it the
/// datagram is refused.
const MAX_POSITION: f32 = 1e4;

/// How far a segment orientation's norm may lie from 1 (MVN sends unit quaternions as
/// f32): beyond it the datagram is refused.
const UNIT_TOLERANCE: f32 = 0.01;

/// How far back (samples) a datagram's sample counter may lie behind the latest
/// applied one and still be taken as overtaken on the way ([`MvnError::Stale`]): a
/// second at MVN's highest rate (240 Hz). A larger step back is a restarted stream,
/// taken as it comes.
pub const MVN_REORDER_SAMPLES: u32 = 240;

/// The canonical joints each body segment's origin is (segment id − 1 → [`Src`] of the
/// position retargeter, and the canonical joint `mvn_datagram` places it at).
const SEGMENTS: [(Option<Src>, JointId); MVN_SEGMENTS] = [
    (Some(Src::Pelvis), JointId::PELVIS),            // 1 Pelvis
    (Some(Src::Lumbar), JointId::SPINE1),            // 2 L5
    (None, JointId::SPINE1),                         // 3 L3
    (Some(Src::SpineMid), JointId::SPINE2),          // 4 T12
    (Some(Src::Chest), JointId::SPINE3),             // 5 T8
    (Some(Src::Neck), JointId::NECK),                // 6 Neck
    (Some(Src::Head), JointId::HEAD),                // 7 Head
    (Some(Src::ClavicleR), JointId::RIGHT_COLLAR),   // 8 RightShoulder
    (Some(Src::ShoulderR), JointId::RIGHT_SHOULDER), // 9 RightUpperArm
    (Some(Src::ElbowR), JointId::RIGHT_ELBOW),       // 10 RightForeArm
    (Some(Src::WristR), JointId::RIGHT_WRIST),       // 11 RightHand
    (Some(Src::ClavicleL), JointId::LEFT_COLLAR),    // 12 LeftShoulder
    (Some(Src::ShoulderL), JointId::LEFT_SHOULDER),  // 13 LeftUpperArm
    (Some(Src::ElbowL), JointId::LEFT_ELBOW),        // 14 LeftForeArm
    (Some(Src::WristL), JointId::LEFT_WRIST),        // 15 LeftHand
    (Some(Src::HipR), JointId::RIGHT_HIP),           // 16 RightUpperLeg
    (Some(Src::KneeR), JointId::RIGHT_KNEE),         // 17 RightLowerLeg
    (Some(Src::AnkleR), JointId::RIGHT_ANKLE),       // 18 RightFoot
    (Some(Src::FootR), JointId::RIGHT_FOOT),         // 19 RightToe
    (Some(Src::HipL), JointId::LEFT_HIP),            // 20 LeftUpperLeg
    (Some(Src::KneeL), JointId::LEFT_KNEE),          // 21 LeftLowerLeg
    (Some(Src::AnkleL), JointId::LEFT_ANKLE),        // 22 LeftFoot
    (Some(Src::FootL), JointId::LEFT_FOOT),          // 23 LeftToe
];

/// Why a datagram was refused as a whole.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum MvnError {
    /// Shorter than the header.
    #[error("{0} bytes is shorter than the 24-byte MVN header")]
    Short(usize),
    /// The ID string is not `MXTP` and two digits.
    #[error("not an MVN datagram: it starts {0:?}, not \"MXTP\" and a two-digit message type")]
    Magic(String),
    /// The header's payload size (MVN 2019 and later) is not what follows it.
    #[error("the header says {said} payload bytes, {has} follow it")]
    PayloadSize {
        /// From the header.
        said: usize,
        /// After the header.
        has: usize,
    },
    /// The header's number of items does not fill the payload.
    #[error("{items} items of 32 bytes are not the {has}-byte payload")]
    Items {
        /// From the header.
        items: usize,
        /// After the header.
        has: usize,
    },
    /// A body item names no body segment, or one already given.
    #[error("item {item}: segment id {id} is not a body segment (1–23) or is repeated")]
    Segment {
        /// Index of the item (0 first).
        item: usize,
        /// Its segment id.
        id: u32,
    },
    /// A segment position that is not finite or lies beyond 10 km.
    #[error("segment {id}: position {x}, {y}, {z} is not a position (finite, within 10 km)")]
    Position {
        /// Segment id.
        id: u32,
        /// MVN x, metres.
        x: f32,
        /// MVN y, metres.
        y: f32,
        /// MVN z, metres.
        z: f32,
    },
    /// A segment orientation that is not finite or not a unit quaternion.
    #[error("segment {id}: orientation (w x y z) {w}, {x}, {y}, {z} is not a unit quaternion")]
    Orientation {
        /// Segment id.
        id: u32,
        /// w.
        w: f32,
        /// MVN x.
        x: f32,
        /// MVN y.
        y: f32,
        /// MVN z.
        z: f32,
    },
    /// A sample older than the latest applied one of the same character, by at most
    /// [`MVN_REORDER_SAMPLES`]: overtaken on the way (UDP keeps no order), or sent twice.
    #[error("sample {sample} after sample {last}: arrived out of order")]
    Stale {
        /// This datagram's sample counter.
        sample: u32,
        /// The latest applied sample counter.
        last: u32,
    },
    /// A pose that cannot be sent.
    #[error("pose cannot be sent over MVN: {0}")]
    Pose(String),
}

/// One sample's body segments, as read from its first type-02 datagram.
#[derive(Clone, Debug, PartialEq)]
pub struct MvnSample {
    /// The character (suit) it is of.
    pub character: u8,
    /// The sender's sample counter (wraps).
    pub sample: u32,
    /// The sender's time code, milliseconds.
    pub time_ms: u32,
    /// Each body segment's origin (id − 1), clothcast world frame (metres, +Y up, the
    /// floor at y = 0); `None` when the datagram left it out.
    pub segments: [Option<Vec3>; MVN_SEGMENTS],
    /// Each body segment's orientation (id − 1) in clothcast's world frame, unit; in
    /// axes of MVN's choosing, so meaningful only relative to another sample's
    /// ([`orient_segments`]); `None` when the datagram left the segment out.
    pub orientations: [Option<Quat>; MVN_SEGMENTS],
}

impl MvnSample {
    /// The segments as observed joints for [`crate::mocap::PositionRetargeter`] (every
    /// one tracked: the suit measures them all).
    pub fn joints(&self) -> KinectJoints {
        let mut j = KinectJoints::default();
        for (p, (src, _)) in self.segments.iter().zip(SEGMENTS) {
            if let (Some(p), Some(s)) = (p, src) {
                j.put_source(s, *p, false);
            }
        }
        j
    }
}

/// What a datagram carries.
#[derive(Clone, Debug, PartialEq)]
#[allow(
    clippy::large_enum_variant,
    reason = "the sample is what nearly every datagram carries: kept inline, not boxed per datagram"
)]
pub enum MvnDatagram {
    /// A sample's body segments (type 02, the sample's first datagram).
    Sample(MvnSample),
    /// A valid datagram with no body pose: another message type (given), or a later
    /// datagram of a sample split over several (props, fingers).
    Other(u8),
}

fn be_u32(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(w)
}

fn be_f32(b: &[u8], at: usize) -> f32 {
    f32::from_bits(be_u32(b, at))
}

/// MVN (Z-up) position → clothcast.
fn from_mvn(x: f32, y: f32, z: f32) -> Vec3 {
    Vec3::new(y, z, x)
}

/// clothcast position → MVN (the inverse of [`from_mvn`]).
fn to_mvn(p: Vec3) -> [f32; 3] {
    [p.z, p.x, p.y]
}

/// Reads one datagram. Everything is checked before anything is used: the header's
/// counts against the datagram's length (so nothing is allocated by what it claims),
/// each body item's segment id (1–23, once each), position (finite, within 10 km) and
/// orientation (finite, unit within 1 %).
pub fn parse_mvn(d: &[u8]) -> Result<MvnDatagram, MvnError> {
    if d.len() < HEADER {
        return Err(MvnError::Short(d.len()));
    }
    let digit = |b: u8| b.is_ascii_digit().then(|| b - b'0');
    let kind = match (&d[..4], digit(d[4]), digit(d[5])) {
        (b"MXTP", Some(hi), Some(lo)) => hi * 10 + lo,
        _ => {
            return Err(MvnError::Magic(
                String::from_utf8_lossy(&d[..6]).into_owned(),
            ));
        }
    };
    let has = d.len() - HEADER;
    let said = usize::from(u16::from_be_bytes([d[22], d[23]]));
    // before MVN 2019 these bytes were reserved (zero)
    if said != 0 && said != has {
        return Err(MvnError::PayloadSize { said, has });
    }
    let index = d[10] & 0x7f;
    if kind != 2 || index != 0 {
        return Ok(MvnDatagram::Other(kind));
    }
    let items = usize::from(d[11]);
    if items * ITEM != has {
        return Err(MvnError::Items { items, has });
    }
    let body = match usize::from(d[17]) {
        0 => items.min(MVN_SEGMENTS),
        n => n.min(items),
    };
    let mut segments = [None; MVN_SEGMENTS];
    let mut orientations = [None; MVN_SEGMENTS];
    for item in 0..body {
        let at = HEADER + item * ITEM;
        let id = be_u32(d, at);
        let slot = (id as usize)
            .checked_sub(1)
            .filter(|&i| i < MVN_SEGMENTS && segments[i].is_none())
            .ok_or(MvnError::Segment { item, id })?;
        let (x, y, z) = (be_f32(d, at + 4), be_f32(d, at + 8), be_f32(d, at + 12));
        let p = from_mvn(x, y, z);
        if !p.is_finite() || p.abs().max_element() > MAX_POSITION {
            return Err(MvnError::Position { id, x, y, z });
        }
        let [w, qx, qy, qz] = [16, 20, 24, 28].map(|o| be_f32(d, at + o));
        // conjugating by the axis permutation permutes the vector part as positions
        let q = Quat::from_xyzw(qy, qz, qx, w);
        if !q.is_finite() || (q.length() - 1.0).abs() > UNIT_TOLERANCE {
            return Err(MvnError::Orientation {
                id,
                w,
                x: qx,
                y: qy,
                z: qz,
            });
        }
        segments[slot] = Some(p);
        orientations[slot] = Some(q.normalize());
    }
    Ok(MvnDatagram::Sample(MvnSample {
        character: d[16],
        sample: be_u32(d, 6),
        time_ms: be_u32(d, 12),
        segments,
        orientations,
    }))
}

/// The segment (index, id − 1) whose orientation is each canonical joint's world
/// rotation: the segment whose origin is the joint (L3 left out: L5 is spine1's).
const ORIENTING: [Option<usize>; JOINT_COUNT] = {
    let mut out = [None; JOINT_COUNT];
    let mut i = 0;
    while i < MVN_SEGMENTS {
        if i != 2 {
            out[SEGMENTS[i].1.index()] = Some(i);
        }
        i += 1;
    }
    out
};

/// Turns `pose` (a pose of `skeleton` retargeted from the segments' origins and
/// calibrated) by the segments' orientations `now` relative to `rest`, the orientations
/// the performer's calibration held (standing in the T-pose, the canonical rest): a
/// segment's rotation since then, q·q_rest⁻¹, is its bone's world rotation whatever axes
/// MVN gives its segments. Every bone keeps the direction its segment origins give it
/// (so every joint stays where it was) and takes its turn about itself from that
/// rotation (the forearms' twist, which no origin shows; the upper arms' and thighs' in
/// place of the elbows' and knees' bend); the hands, head and toes, which end their
/// chains, take their whole orientation from it. The pelvis keeps the orientation its
/// hip line and lumbar point give it. Joints whose segment either sample lacks are
/// left as they are.
pub fn orient_segments(
    pose: &mut Pose,
    skeleton: &Skeleton,
    now: &[Option<Quat>; MVN_SEGMENTS],
    rest: &[Option<Quat>; MVN_SEGMENTS],
) {
    let placed = skeleton.world_frames(pose).map(|f| f.rot);
    let mut world = placed;
    for j in JointId::all() {
        let Some(s) = ORIENTING[j.index()] else {
            continue;
        };
        let (Some(q), Some(r)) = (now[s], rest[s]) else {
            continue;
        };
        if j == JointId::PELVIS {
            continue;
        }
        let turned = (q * r.inverse()).normalize();
        world[j.index()] = match j.children().next() {
            // the first child is the one the bone points at (the spine's top: the neck)
            Some(c) => {
                let axis = skeleton.offset(c).normalize_or_zero();
                if axis == Vec3::ZERO {
                    continue;
                }
                let have = placed[j.index()];
                let (_, twist) = swing_twist(have.inverse() * turned, axis);
                (have * twist).normalize()
            }
            None => turned,
        };
    }
    for j in JointId::all() {
        pose.rotations[j.index()] = match j.parent() {
            None => world[j.index()],
            Some(p) => (world[p.index()].inverse() * world[j.index()]).normalize(),
        };
    }
}

/// The order of one character's samples: refuses one that arrived after a later one.
#[derive(Clone, Copy, Debug, Default)]
pub struct MvnStream {
    last: Option<u32>,
}

impl MvnStream {
    /// Takes `sample` as the character's latest, unless it is a repeat or lies at most
    /// [`MVN_REORDER_SAMPLES`] behind the latest taken ([`MvnError::Stale`]); counters
    /// wrap.
    pub fn accept(&mut self, sample: u32) -> Result<(), MvnError> {
        if let Some(last) = self.last {
            let behind = last.wrapping_sub(sample);
            if behind <= MVN_REORDER_SAMPLES {
                return Err(MvnError::Stale { sample, last });
            }
        }
        self.last = Some(sample);
        Ok(())
    }
}

/// One type-02 datagram (header and 23 body segments, 760 bytes) that puts a performer
/// shaped as `skeleton` in `pose`: each segment's origin at the canonical joint it
/// maps to (the spine's five segments on the canonical spine, L5 and L3 both at
/// spine1) and its orientation the joint's world rotation from the T-pose, both in
/// MVN's Z-up frame (clothcast's floor, y = 0, is MVN's z = 0). Refuses a pose with
/// non-finite values or rotations that are not unit (checked by [`Pose::validate`]).
pub fn mvn_datagram(
    pose: &Pose,
    skeleton: &Skeleton,
    character: u8,
    sample: u32,
    time_ms: u32,
) -> Result<Vec<u8>, MvnError> {
    let mut pose = *pose;
    pose.validate().map_err(|e| MvnError::Pose(e.to_string()))?;
    let frames = skeleton.world_frames(&pose);
    let payload = MVN_SEGMENTS * ITEM;
    let mut d = Vec::with_capacity(HEADER + payload);
    d.extend_from_slice(b"MXTP02");
    d.extend_from_slice(&sample.to_be_bytes());
    // the sample's only datagram, so also its last
    d.extend_from_slice(&[0x80, MVN_SEGMENTS as u8]);
    d.extend_from_slice(&time_ms.to_be_bytes());
    d.extend_from_slice(&[character, MVN_SEGMENTS as u8, 0, 0, 0, 0]);
    d.extend_from_slice(&(payload as u16).to_be_bytes());
    for (i, &(_, joint)) in SEGMENTS.iter().enumerate() {
        let f = frames[joint.index()];
        let q: Quat = f.rot;
        // the rotation conjugated into MVN's axes permutes its vector part as positions
        let [x, y, z] = to_mvn(Vec3::new(q.x, q.y, q.z));
        d.extend_from_slice(&(i as u32 + 1).to_be_bytes());
        for v in to_mvn(f.trans).into_iter().chain([q.w, x, y, z]) {
            d.extend_from_slice(&v.to_be_bytes());
        }
    }
    Ok(d)
}

#[cfg(test)]
mod tests;
