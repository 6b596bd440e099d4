//! VMC protocol (Virtual Motion Capture, OSC over UDP) → canonical poses. Bytes in,
//! `Pose` out; the socket lives in `net`.
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
use rosc::{OscPacket, OscType};

use crate::skeleton::{JointId, Pose};

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
    /// Bundles nested deeper than 8.
    #[error("OSC bundles nested too deeply")]
    TooDeep,
}

/// Unity (left-handed) position → clothcast.
fn position(x: f32, y: f32, z: f32) -> Vec3 {
    Vec3::new(-x, y, z)
}

/// Unity (left-handed) rotation → clothcast.
fn rotation(x: f32, y: f32, z: f32, w: f32) -> Option<Quat> {
    let q = Quat::from_xyzw(x, -y, -z, w);
    (q.is_finite() && q.length() > 0.5).then(|| q.normalize())
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
    root_pos: Vec3,
    root_rot: Quat,
    hips_local: Option<Vec3>,
    hips_rest: Option<Vec3>,
    hips_rot: Quat,
    messages: u64,
}

impl VmcPerformer {
    /// Applies one UDP datagram; returns how many messages were used.
    pub fn feed(&mut self, datagram: &[u8]) -> Result<usize, VmcError> {
        let (_, packet) =
            rosc::decoder::decode_udp(datagram).map_err(|e| VmcError::Osc(format!("{e:?}")))?;
        // applied to a copy, so a packet refused half-way changes nothing
        let mut next = self.clone();
        let used = next.packet(&packet, 0)?;
        next.update_root();
        *self = next;
        Ok(used)
    }

    /// Messages applied so far.
    pub fn messages(&self) -> u64 {
        self.messages
    }

    fn packet(&mut self, p: &OscPacket, depth: usize) -> Result<usize, VmcError> {
        match p {
            OscPacket::Message(m) => Ok(usize::from(self.message(&m.addr, &m.args))),
            OscPacket::Bundle(b) => {
                if depth >= 8 {
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
                    match rotation(qx, qy, qz, qw) {
                        Some(q) => {
                            self.root_pos = position(px, py, pz);
                            self.root_rot = q;
                            true
                        }
                        None => false,
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
                    ) {
                        (Some(&(_, j)), Some(q)) => {
                            if j == JointId::PELVIS {
                                let p = position(px, py, pz);
                                self.hips_rest.get_or_insert(p);
                                self.hips_local = Some(p);
                                self.hips_rot = q;
                            } else {
                                self.pose.set_rotation(j, q);
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
    use rosc::{OscBundle, OscMessage, OscTime};

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
        let mut deep = bone("Head", [0.0, 0.0, 0.0, 1.0]);
        for _ in 0..10 {
            deep = bundle(vec![deep]);
        }
        assert!(matches!(p.feed(&bytes(&deep)), Err(VmcError::TooDeep)));
        assert_eq!(p.pose.rotations, before.rotations);
    }
}
