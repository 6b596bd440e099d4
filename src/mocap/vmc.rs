//! VMC protocol (Virtual Motion Capture, OSC over UDP) ↔ canonical poses. Bytes in,
//! `Pose` out ([`VmcPerformer`]), and the other way ([`vmc_packet`], what `clothcast
//! play --vmc` sends to VMC receivers); the sockets live in `net` and the CLI.
//!
//! Read: `/VMC/Ext/Root/Pos` (name, position xyz, rotation xyzw), `/VMC/Ext/Bone/Pos`
//! (Unity HumanBodyBones name, local position, local rotation), `/VMC/Ext/OK` (loaded
//! status), `/VMC/Ext/T` (time). Bare messages, bundles and nested bundles; unknown
//! addresses and extra arguments are ignored and messages with wrong argument types
//! dropped, as the VMC specification asks. Unity is left-handed (+X right, +Z forward);
//! clothcast is right-handed with the character's left at +X, so positions map
//! (x, y, z) → (−x, y, z) and rotations (x, y, z, w) → (x, −y, −z, w). Bone rotations are
//! taken relative to the T-pose (VRM-normalised rigs, which VMC senders stream).

use glam::{Quat, Vec3};
use rosc::{OscBundle, OscMessage, OscPacket, OscTime, OscType};

use crate::skeleton::{JointId, Pose, Skeleton};

/// Unity HumanBodyBones names of the canonical joints (UpperChest optional: without it
/// Chest drives spine2 and spine3 stays at rest).
const BONES: [(&str, JointId); 22] = [
    ("Hips", JointId::PELVIS),
    ("LeftUpperLeg", JointId::LEFT_HIP),
    ("RightUpperLeg", JointId::RIGHT_HIP),
    ("Spine", JointId::SPINE1),
    ("LeftLowerLeg", JointId::LEFT_KNEE),
    ("RightLowerLeg", JointId::RIGHT_KNEE),
    ("Chest", JointId::SPINE2),
    ("LeftFoot", JointId::LEFT_ANKLE),
    ("RightFoot", JointId::RIGHT_ANKLE),
    ("UpperChest", JointId::SPINE3),
    ("LeftToes", JointId::LEFT_FOOT),
    ("RightToes", JointId::RIGHT_FOOT),
    ("Neck", JointId::NECK),
    ("LeftShoulder", JointId::LEFT_COLLAR),
    ("RightShoulder", JointId::RIGHT_COLLAR),
    ("Head", JointId::HEAD),
    ("LeftUpperArm", JointId::LEFT_SHOULDER),
    ("RightUpperArm", JointId::RIGHT_SHOULDER),
    ("LeftLowerArm", JointId::LEFT_ELBOW),
    ("RightLowerArm", JointId::RIGHT_ELBOW),
    ("LeftHand", JointId::LEFT_WRIST),
    ("RightHand", JointId::RIGHT_WRIST),
];

/// Why a packet was refused as a whole.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VmcError {
    /// Not an OSC packet.
    #[error("bad OSC packet: {0}")]
    Osc(String),
    /// Bundles nested deeper than [`MAX_BUNDLE_DEPTH`].
    #[error("OSC bundles nested more than {MAX_BUNDLE_DEPTH} deep")]
    TooDeep,
    /// A pose that cannot be sent.
    #[error("pose cannot be sent over VMC: {0}")]
    Pose(String),
    /// A datagram whose `/VMC/Ext/T` is earlier than the frame already applied, by at
    /// most [`REORDER_WINDOW`]: it was overtaken on the way (UDP keeps no order) and
    /// would move the performer back in time, so nothing of it is used.
    #[error("datagram of an earlier frame (T = {time} s after T = {last} s): arrived out of order")]
    Stale {
        /// The datagram's `/VMC/Ext/T`, seconds.
        time: f64,
        /// The latest `/VMC/Ext/T` applied, seconds.
        last: f64,
    },
}

/// How far back (seconds of sender time) a datagram's `/VMC/Ext/T` may lie behind the
/// latest applied one and still be taken as overtaken on the way ([`VmcError::Stale`]).
/// A larger step back is a sender that restarted its clock (taken as it comes), so a
/// sender restarted on the same port loses at most this much of its new motion;
/// networks reorder datagrams by milliseconds.
pub const REORDER_WINDOW: f64 = 1.0;

/// Farthest a VMC position may lie from the origin on any axis, metres (the bound a
/// pose message's root has); beyond it the message is dropped, so that sums of
/// positions cannot overflow.
const MAX_POSITION: f32 = 1e4;

/// Unity (left-handed) position → clothcast; `None` beyond [`MAX_POSITION`].
fn position(x: f32, y: f32, z: f32) -> Option<Vec3> {
    let p = Vec3::new(-x, y, z);
    (p.is_finite() && p.abs().max_element() <= MAX_POSITION).then_some(p)
}

/// Unity (left-handed) rotation → clothcast, normalised; `None` unless its length is
/// within a factor of two of 1 (measured in f64: the squares of finite f32 components
/// can overflow f32, and normalising by an infinite length gives a zero quaternion).
fn rotation(x: f32, y: f32, z: f32, w: f32) -> Option<Quat> {
    let len = [x, y, z, w]
        .iter()
        .map(|c| f64::from(*c).powi(2))
        .sum::<f64>()
        .sqrt();
    (len > 0.5 && len < 2.0).then(|| {
        let s = (1.0 / len) as f32;
        Quat::from_xyzw(x * s, -y * s, -z * s, w * s)
    })
}

/// clothcast position → Unity (the mapping is its own inverse).
fn unity_position(p: Vec3) -> [f32; 3] {
    [-p.x, p.y, p.z]
}

/// clothcast rotation → Unity (the mapping is its own inverse).
fn unity_rotation(q: Quat) -> [f32; 4] {
    [q.x, -q.y, -q.z, q.w]
}

/// One VMC datagram that puts a model shaped as `model` (a VRM-normalised rig: its
/// T-pose is `model`'s rest pose) in `pose` at sender time `time` (seconds): a bundle
/// of `/VMC/Ext/OK 1`, `/VMC/Ext/T`, `/VMC/Ext/Root/Pos` (the origin, unrotated) and a
/// `/VMC/Ext/Bone/Pos` per canonical joint by its HumanBodyBones name, local rotations
/// relative to the T-pose in Unity's left-handed frame. Each bone's position is its
/// rest offset from its parent, as VMC senders send their model's bones; `Hips`
/// carries the pelvis rotation and its position `model`'s rest pelvis +
/// `pose.translation` (metres). [`VmcPerformer`] reads it back to `pose`, its
/// translation taken from the first packet's hips as VMC receivers do, and the model's
/// legs from the bones. Refuses a pose with non-finite values or rotations that are
/// not unit (checked by [`Pose::validate`]).
pub fn vmc_packet(pose: &Pose, model: &Skeleton, time: f64) -> Result<Vec<u8>, VmcError> {
    let mut pose = *pose;
    pose.validate().map_err(|e| VmcError::Pose(e.to_string()))?;
    if !time.is_finite() {
        return Err(VmcError::Pose("time not finite".into()));
    }
    let rest = |j: JointId| model.rest_position(j);
    let message = |addr: &str, args: Vec<OscType>| {
        OscPacket::Message(OscMessage {
            addr: addr.to_string(),
            args,
        })
    };
    let transform = |name: &str, p: [f32; 3], q: [f32; 4]| {
        let mut args = vec![OscType::String(name.to_string())];
        args.extend(p.into_iter().chain(q).map(OscType::Float));
        args
    };
    let mut content = vec![
        message("/VMC/Ext/OK", vec![OscType::Int(1)]),
        message("/VMC/Ext/T", vec![OscType::Float(time as f32)]),
        message(
            "/VMC/Ext/Root/Pos",
            transform("root", [0.0; 3], [0.0, 0.0, 0.0, 1.0]),
        ),
    ];
    for &(name, j) in &BONES {
        let p = match j.parent() {
            None => unity_position(rest(j) + pose.translation),
            Some(parent) => unity_position(rest(j) - rest(parent)),
        };
        content.push(message(
            "/VMC/Ext/Bone/Pos",
            transform(name, p, unity_rotation(pose.rotation(j))),
        ));
    }
    let bundle = OscPacket::Bundle(OscBundle {
        // "immediately" (OSC 1.0)
        timetag: OscTime {
            seconds: 0,
            fractional: 1,
        },
        content,
    });
    rosc::encoder::encode(&bundle).map_err(|e| VmcError::Osc(format!("{e:?}")))
}

/// Deepest nesting of OSC bundles a datagram may have (a bare message: 0, a bundle of
/// messages: 1). VMC senders nest one or two.
pub const MAX_BUNDLE_DEPTH: usize = 8;

/// The deepest nesting of OSC bundles in `datagram`, walked without recursion and
/// without decoding anything else; it stops counting past [`MAX_BUNDLE_DEPTH`].
///
/// Asked before the OSC decoder runs, because that decoder recurses once per level: a
/// single 64 KB datagram can nest ~3 000 bundles, which overflowed a 2 MB thread stack
/// and aborted the whole server. It follows every element the decoder could descend
/// into (an element whose first 8 bytes are `#bundle\0`, its size prefix within the
/// datagram), so the decoder never goes deeper than this says.
fn bundle_depth(datagram: &[u8]) -> usize {
    const TAG: &[u8] = b"#bundle\0";
    let mut deepest = 0;
    // (packet bytes, depth of the bundle that holds it); each entry takes >= 4 bytes
    // of the datagram, so the stack holds at most datagram.len() / 4
    let mut stack = vec![(datagram, 0usize)];
    while let Some((packet, outer)) = stack.pop() {
        if !packet.starts_with(TAG) {
            continue;
        }
        let depth = outer + 1;
        deepest = deepest.max(depth);
        if depth > MAX_BUNDLE_DEPTH {
            break;
        }
        // tag, time tag, then elements: a big-endian u32 size and that many bytes
        let mut rest = packet.get(16..).unwrap_or_default();
        while let Some((size, after)) = rest.split_first_chunk::<4>() {
            let Some(element) = after.get(..u32::from_be_bytes(*size) as usize) else {
                break;
            };
            stack.push((element, depth));
            rest = &after[element.len()..];
        }
    }
    deepest
}

/// The pose of one VMC performer, updated packet by packet.
#[derive(Clone, Debug, Default)]
pub struct VmcPerformer {
    /// Latest pose (world frame: root transform applied to the pelvis).
    pub pose: Pose,
    /// Sender time of the last `/VMC/Ext/T`, seconds.
    pub time: Option<f64>,
    /// Whether the sender reported a loaded model (`/VMC/Ext/OK 1`).
    pub loaded: bool,
    /// `/VMC/Ext/T` messages applied: senders send one per frame, so this counts frames
    /// however many datagrams each spans (0 from a sender that never sends it).
    pub frames: u64,
    root_pos: Vec3,
    root_rot: Quat,
    /// Lengths of the model's thighs and shins (left, right), metres: the local
    /// positions of its lower legs and feet.
    thigh: [Option<f32>; 2],
    shin: [Option<f32>; 2],
    hips_local: Option<Vec3>,
    hips_rest: Option<Vec3>,
    hips_rot: Quat,
    messages: u64,
}

impl VmcPerformer {
    /// Applies one UDP datagram; returns how many messages were used.
    pub fn feed(&mut self, datagram: &[u8]) -> Result<usize, VmcError> {
        if bundle_depth(datagram) > MAX_BUNDLE_DEPTH {
            return Err(VmcError::TooDeep);
        }
        let (_, packet) =
            rosc::decoder::decode_udp(datagram).map_err(|e| VmcError::Osc(format!("{e:?}")))?;
        // applied to a copy, so a packet refused half-way changes nothing
        let mut next = self.clone();
        let used = next.packet(&packet, 0)?;
        if let (Some(last), Some(time)) = (self.time, next.time)
            && next.frames > self.frames
            && time < last
            && last - time <= REORDER_WINDOW
        {
            return Err(VmcError::Stale { time, last });
        }
        next.update_root();
        *self = next;
        Ok(used)
    }

    /// Messages applied so far.
    pub fn messages(&self) -> u64 {
        self.messages
    }

    /// The sender's model's leg length, thigh plus shin (metres), from the local
    /// positions of its `LowerLeg` and `Foot` bones (each bone's offset from its parent),
    /// averaged over the legs it sent; `None` until it sent one, or when that is not a
    /// plausible leg ([`PLAUSIBLE_LEG`](crate::mocap::PLAUSIBLE_LEG), 0.3–1.4 m: a
    /// sender that sends zero positions, or a model in centimetres).
    pub fn leg_length(&self) -> Option<f32> {
        let (mut sum, mut n) = (0.0, 0u8);
        for (thigh, shin) in self.thigh.iter().zip(&self.shin) {
            if let (Some(t), Some(s)) = (thigh, shin) {
                sum += t + s;
                n += 1;
            }
        }
        let leg = sum / f32::from(n.max(1));
        (n > 0 && super::PLAUSIBLE_LEG.contains(&leg)).then_some(leg)
    }

    fn packet(&mut self, p: &OscPacket, depth: usize) -> Result<usize, VmcError> {
        match p {
            OscPacket::Message(m) => Ok(usize::from(self.message(&m.addr, &m.args))),
            OscPacket::Bundle(b) => {
                if depth >= MAX_BUNDLE_DEPTH {
                    return Err(VmcError::TooDeep);
                }
                let mut n = 0;
                for c in &b.content {
                    n += self.packet(c, depth + 1)?;
                }
                Ok(n)
            }
        }
    }

    fn message(&mut self, addr: &str, args: &[OscType]) -> bool {
        let f = |i: usize| match args.get(i) {
            Some(OscType::Float(x)) if x.is_finite() => Some(*x),
            Some(OscType::Double(x)) if x.is_finite() => Some(*x as f32),
            _ => None,
        };
        let s = |i: usize| match args.get(i) {
            Some(OscType::String(x)) => Some(x.as_str()),
            _ => None,
        };
        let used = match addr {
            "/VMC/Ext/Root/Pos" => match (s(0), f(1), f(2), f(3), f(4), f(5), f(6), f(7)) {
                (Some(_), Some(px), Some(py), Some(pz), Some(qx), Some(qy), Some(qz), Some(qw)) => {
                    match (position(px, py, pz), rotation(qx, qy, qz, qw)) {
                        (Some(p), Some(q)) => {
                            self.root_pos = p;
                            self.root_rot = q;
                            true
                        }
                        _ => false,
                    }
                }
                _ => false,
            },
            "/VMC/Ext/Bone/Pos" => match (s(0), f(1), f(2), f(3), f(4), f(5), f(6), f(7)) {
                (
                    Some(name),
                    Some(px),
                    Some(py),
                    Some(pz),
                    Some(qx),
                    Some(qy),
                    Some(qz),
                    Some(qw),
                ) => {
                    match (
                        BONES.iter().find(|(n, _)| *n == name),
                        rotation(qx, qy, qz, qw),
                        position(px, py, pz),
                    ) {
                        (Some(&(_, j)), Some(q), Some(p)) => {
                            if j == JointId::PELVIS {
                                self.hips_rest.get_or_insert(p);
                                self.hips_local = Some(p);
                                self.hips_rot = q;
                            } else {
                                self.pose.set_rotation(j, q);
                            }
                            match j {
                                JointId::LEFT_KNEE => self.thigh[0] = Some(p.length()),
                                JointId::RIGHT_KNEE => self.thigh[1] = Some(p.length()),
                                JointId::LEFT_ANKLE => self.shin[0] = Some(p.length()),
                                JointId::RIGHT_ANKLE => self.shin[1] = Some(p.length()),
                                _ => {}
                            }
                            true
                        }
                        _ => false,
                    }
                }
                _ => false,
            },
            "/VMC/Ext/OK" => match args.first() {
                Some(OscType::Int(v)) => {
                    self.loaded = *v == 1;
                    true
                }
                _ => false,
            },
            "/VMC/Ext/T" => match f(0) {
                Some(t) => {
                    self.time = Some(f64::from(t));
                    self.frames += 1;
                    true
                }
                None => false,
            },
            _ => false,
        };
        self.messages += u64::from(used);
        used
    }

    /// Pelvis rotation and translation from the root transform and the Hips bone.
    fn update_root(&mut self) {
        let root_rot = if self.root_rot.length_squared() > 0.5 {
            self.root_rot
        } else {
            Quat::IDENTITY
        };
        let hips_rot = if self.hips_rot.length_squared() > 0.5 {
            self.hips_rot
        } else {
            Quat::IDENTITY
        };
        self.pose
            .set_rotation(JointId::PELVIS, (root_rot * hips_rot).normalize());
        let hips = self.hips_local.unwrap_or_default();
        let rest = self.hips_rest.unwrap_or(hips);
        // displacement of the pelvis from where it stood in the first packet, turned and
        // moved by the root transform
        self.pose.translation = self.root_pos + root_rot * hips - rest;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bone(name: &str, q: [f32; 4]) -> OscPacket {
        OscPacket::Message(OscMessage {
            addr: "/VMC/Ext/Bone/Pos".into(),
            args: vec![
                OscType::String(name.into()),
                0.0.into(),
                0.0.into(),
                0.0.into(),
                q[0].into(),
                q[1].into(),
                q[2].into(),
                q[3].into(),
            ],
        })
    }

    fn bundle(content: Vec<OscPacket>) -> OscPacket {
        OscPacket::Bundle(OscBundle {
            timetag: OscTime {
                seconds: 0,
                fractional: 1,
            },
            content,
        })
    }

    fn bytes(p: &OscPacket) -> Vec<u8> {
        rosc::encoder::encode(p).expect("encodes")
    }

    #[test]
    fn nested_bundles_set_bones_converted_to_right_handed() {
        // Unity: the left arm lies along −X; +60° about Z turns it towards −Y (down)
        let (s, c) = (30f32.to_radians().sin(), 30f32.to_radians().cos());
        let inner = bundle(vec![
            bone("LeftUpperArm", [0.0, 0.0, s, c]),
            bone("Tail", [0.0, 0.0, 0.0, 1.0]),
        ]);
        let outer = bundle(vec![
            inner,
            OscPacket::Message(OscMessage {
                addr: "/VMC/Ext/OK".into(),
                args: vec![OscType::Int(1)],
            }),
            OscPacket::Message(OscMessage {
                addr: "/VMC/Ext/T".into(),
                args: vec![OscType::Float(12.5), OscType::Int(9)],
            }),
            OscPacket::Message(OscMessage {
                addr: "/VMC/Ext/Unknown".into(),
                args: vec![],
            }),
            // wrong types: dropped
            OscPacket::Message(OscMessage {
                addr: "/VMC/Ext/Bone/Pos".into(),
                args: vec![OscType::Int(3)],
            }),
        ]);
        let mut p = VmcPerformer::default();
        assert_eq!(p.feed(&bytes(&outer)).expect("parses"), 3);
        assert!(p.loaded);
        assert_eq!(p.time, Some(12.5));
        let q = p.pose.rotation(JointId::LEFT_SHOULDER);
        // in clothcast's frame the left arm lies along +X: the same physical motion must
        // turn it towards −Y as well
        let arm = q * Vec3::X;
        assert!(arm.y < -0.8, "{arm:?}");
    }

    /// A frame: the left upper arm turned by `angle` about Unity's Z, and `/VMC/Ext/T`.
    fn frame(angle: f32, t: f32) -> Vec<u8> {
        let (s, c) = ((angle / 2.0).sin(), (angle / 2.0).cos());
        bytes(&bundle(vec![
            bone("LeftUpperArm", [0.0, 0.0, s, c]),
            OscPacket::Message(OscMessage {
                addr: "/VMC/Ext/T".into(),
                args: vec![OscType::Float(t)],
            }),
        ]))
    }

    #[test]
    fn a_datagram_overtaken_on_the_way_is_dropped_and_a_restarted_clock_is_not() {
        let mut p = VmcPerformer::default();
        p.feed(&frame(0.2, 10.0)).expect("first frame");
        p.feed(&frame(0.4, 10.1)).expect("later frame");
        let arm = p.pose.rotation(JointId::LEFT_SHOULDER);
        // the frame of T = 10.05 s arrives after the one of 10.1 s: nothing of it is used
        match p.feed(&frame(0.3, 10.05)) {
            Err(e @ VmcError::Stale { .. }) => {
                assert!(e.to_string().contains("out of order"), "{e}");
            }
            other => panic!("expected Stale, got {other:?}"),
        }
        assert_eq!(p.pose.rotation(JointId::LEFT_SHOULDER), arm);
        assert_eq!((p.time, p.frames), (Some(f64::from(10.1f32)), 2));
        // a second datagram of the same frame (same T) is not stale
        p.feed(&frame(0.5, 10.1)).expect("same frame");
        assert_ne!(p.pose.rotation(JointId::LEFT_SHOULDER), arm);
        // a sender that restarted its clock (T back by more than the window) is followed
        p.feed(&frame(0.1, 0.0)).expect("restarted clock");
        assert_eq!(p.time, Some(0.0));
        p.feed(&frame(0.2, 0.033)).expect("next after the restart");
        // datagrams without a T (senders that never send it) are never stale
        let bare = bytes(&bone("LeftUpperArm", [0.0, 0.0, 0.0, 1.0]));
        p.feed(&bare).expect("no T");
        assert_eq!(p.pose.rotation(JointId::LEFT_SHOULDER), Quat::IDENTITY);
    }

    #[test]
    fn bad_packets_are_refused_and_lose_nothing() {
        let mut p = VmcPerformer::default();
        p.feed(&bytes(&bone("LeftLowerArm", [0.0, 0.3, 0.0, 0.95])))
            .expect("parses");
        let before = p.pose;
        assert!(p.feed(b"not osc at all").is_err());
        assert!(p.feed(&[]).is_err());
        assert_eq!(
            p.feed(&bytes(&bone("LeftLowerArm", [f32::NAN, 0.0, 0.0, 1.0])))
                .expect("parses"),
            0
        );
        assert_eq!(
            p.feed(&bytes(&bone("LeftLowerArm", [0.0, 0.0, 0.0, 0.0])))
                .expect("parses"),
            0
        );
        // found by the `ingest` fuzz target: finite components whose squares overflow
        // f32 normalised to a zero quaternion, which then reached the engine
        assert_eq!(
            p.feed(&bytes(&bone("LeftUpperArm", [1.6e10, 0.0, 2.7e23, 2.7e23])))
                .expect("parses"),
            0
        );
        assert_eq!(
            p.feed(&bytes(&bone("LeftLowerArm", [0.0, 0.0, 0.0, 3.0])))
                .expect("parses"),
            0
        );
        let root = |x: f32| {
            OscPacket::Message(OscMessage {
                addr: "/VMC/Ext/Root/Pos".into(),
                args: vec![
                    OscType::String("root".into()),
                    x.into(),
                    3e38f32.into(),
                    0.0.into(),
                    0.0.into(),
                    0.0.into(),
                    0.0.into(),
                    1.0.into(),
                ],
            })
        };
        assert_eq!(p.feed(&bytes(&root(3e38))).expect("parses"), 0);
        let mut checked = p.pose;
        checked.validate().expect("still a valid pose");
        let mut deep = bone("Head", [0.0, 0.0, 0.0, 1.0]);
        for _ in 0..10 {
            deep = bundle(vec![deep]);
        }
        assert!(matches!(p.feed(&bytes(&deep)), Err(VmcError::TooDeep)));
        assert_eq!(p.pose.rotations, before.rotations);
    }

    /// `levels` bundles, each holding the next, the innermost holding `inner`.
    fn nested(levels: usize, inner: OscPacket) -> OscPacket {
        (0..levels).fold(inner, |p, _| bundle(vec![p]))
    }

    #[test]
    fn a_datagram_of_thousands_of_nested_bundles_is_refused_without_deep_recursion() {
        // ~3 000 levels in one 64 KB datagram: decoding it recursed once per level and
        // overflowed a 2 MB stack (a tokio worker's), aborting the server; it is
        // refused by name before the decoder runs, here on a thread with such a stack
        let mut datagram = b"#bundle\0\0\0\0\0\0\0\0\x01".to_vec();
        while datagram.len() + 20 <= 65_507 {
            let mut outer = b"#bundle\0\0\0\0\0\0\0\0\x01".to_vec();
            outer.extend_from_slice(&(datagram.len() as u32).to_be_bytes());
            outer.extend_from_slice(&datagram);
            datagram = outer;
        }
        assert_eq!(
            bundle_depth(&datagram),
            MAX_BUNDLE_DEPTH + 1,
            "stops counting"
        );
        let refused = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                let mut p = VmcPerformer::default();
                matches!(p.feed(&datagram), Err(VmcError::TooDeep))
            })
            .expect("thread")
            .join()
            .expect("no overflow");
        assert!(refused);
        // the count is the nesting the decoder sees, at the limit and one past it
        let head = || bone("Head", [0.0, 0.0, 0.0, 1.0]);
        for levels in [0, 1, 2, MAX_BUNDLE_DEPTH, MAX_BUNDLE_DEPTH + 1] {
            let bytes = bytes(&nested(levels, head()));
            assert_eq!(bundle_depth(&bytes), levels);
            let fed = VmcPerformer::default().feed(&bytes);
            assert_eq!(fed.is_ok(), levels <= MAX_BUNDLE_DEPTH, "{levels}: {fed:?}");
        }
        // a bundle beside messages, and sizes that run past the end, count as rosc reads
        let wide = bundle(vec![head(), nested(3, head()), head()]);
        let mut wide = bytes(&wide);
        assert_eq!(bundle_depth(&wide), 4);
        wide.truncate(wide.len() - 3);
        assert!(bundle_depth(&wide) <= 4);
        assert_eq!(bundle_depth(b"#bundle"), 0);
        assert_eq!(bundle_depth(b""), 0);
    }

    proptest! {
        /// Whatever floats a sender puts in root and bone messages (any bit pattern:
        /// NaN, infinities, subnormals, values whose squares overflow), the performer's
        /// pose stays a valid pose.
        #[test]
        fn any_floats_leave_a_valid_pose(
            bones in proptest::collection::vec((0usize..BONES.len() + 1, prop::array::uniform7(any::<u32>())), 1..6),
            root in prop::array::uniform7(any::<u32>()),
        ) {
            fn floats(bits: &[u32; 7]) -> impl Iterator<Item = OscType> + '_ {
                bits.iter().map(|b| OscType::Float(f32::from_bits(*b)))
            }
            let mut content = vec![OscPacket::Message(OscMessage {
                addr: "/VMC/Ext/Root/Pos".into(),
                args: std::iter::once(OscType::String("root".into())).chain(floats(&root)).collect(),
            })];
            for (i, bits) in &bones {
                let name = BONES.get(*i).map_or("Hips", |b| b.0);
                content.push(OscPacket::Message(OscMessage {
                    addr: "/VMC/Ext/Bone/Pos".into(),
                    args: std::iter::once(OscType::String(name.into())).chain(floats(bits)).collect(),
                }));
            }
            let mut p = VmcPerformer::default();
            for packet in [bundle(content.clone()), bundle(content)] {
                let _ = p.feed(&bytes(&packet));
                let mut checked = p.pose;
                prop_assert!(checked.validate().is_ok(), "{:?}", p.pose);
            }
        }

        /// What `vmc_packet` sends, `VmcPerformer` reads back: every joint's rotation,
        /// the pelvis translation (relative to the first packet's) and the model's legs.
        #[test]
        fn sent_poses_read_back(seed in 0u64..1_000_000, spread in 0.1f32..1.2, dx in -2f32..2.0, dz in -2f32..2.0, height in 1.5f32..2.0) {
            use crate::skeleton::Proportions;
            let mut rng = crate::bake::Rng::new(seed);
            let pose = crate::skeleton::sample_pose(|| rng.uniform(), spread);
            let pose = Pose { translation: Vec3::new(dx, 0.1, dz), ..pose };
            let model = Skeleton::from_proportions(&Proportions { height, ..Default::default() });
            let mut p = VmcPerformer::default();
            prop_assert_eq!(p.leg_length(), None);
            p.feed(&vmc_packet(&Pose::rest(), &model, 0.0).expect("sends")).expect("reads");
            let used = p.feed(&vmc_packet(&pose, &model, 1.5).expect("sends")).expect("reads");
            let r = |j: JointId| model.rest_position(j);
            let leg = r(JointId::LEFT_HIP).distance(r(JointId::LEFT_KNEE))
                + r(JointId::LEFT_KNEE).distance(r(JointId::LEFT_ANKLE));
            let read = p.leg_length().expect("legs sent");
            prop_assert!((read - leg).abs() < 1e-5, "{} m, not {} m", read, leg);
            prop_assert_eq!(used, 3 + BONES.len());
            prop_assert!(p.loaded);
            prop_assert_eq!(p.time, Some(1.5));
            prop_assert_eq!(p.frames, 2);
            for j in JointId::all() {
                let (a, b) = (p.pose.rotation(j), pose.rotation(j));
                prop_assert!(a.dot(b).abs() > 1.0 - 1e-5, "{:?}: {:?} vs {:?}", j, a, b);
            }
            prop_assert!((p.pose.translation - pose.translation).length() < 1e-5);
        }
    }

    #[test]
    fn poses_that_cannot_be_sent_are_refused_by_name() {
        let mut pose = Pose::rest();
        pose.translation.x = f32::NAN;
        let model = Skeleton::from_proportions(&crate::skeleton::Proportions::default());
        let e = vmc_packet(&pose, &model, 0.0).expect_err("NaN refused");
        assert!(e.to_string().contains("pose cannot be sent"), "{e}");
        assert!(vmc_packet(&Pose::rest(), &model, f64::INFINITY).is_err());
    }
}
