//! Wire messages (DESIGN §5), version [`PROTOCOL_VERSION`]. One WebSocket endpoint:
//! binary frames are MessagePack **maps** (`rmp_serde::to_vec_named`; field names as
//! below), text frames are JSON with the same fields. Every message has a `type`.
//! Byte payloads (codec setup and frames, float arrays) are MessagePack `bin` (in JSON:
//! arrays of numbers; viewers should use MessagePack).
//!
//! Client → server: `hello`, `pose`, `subscribe`. Server → client: `welcome`, `asset`,
//! `frame`, `gone`, `error`.

use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;

/// Protocol version spoken by this build.
pub const PROTOCOL_VERSION: u32 = 1;

/// What a connection does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Sends poses.
    Publisher,
    /// Receives garment frames.
    Viewer,
    /// Both.
    Both,
}

/// One joint of a pose message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JointSample {
    /// Joint name in the source profile (for `canonical`: the canonical names, e.g.
    /// `left_shoulder`).
    pub name: String,
    /// Local rotation relative to the parent, unit quaternion (x, y, z, w).
    #[serde(default)]
    pub rotation: Option<[f32; 4]>,
    /// Position, metres (position-only sources).
    #[serde(default)]
    pub position: Option<[f32; 3]>,
    /// Tracking confidence in [0, 1].
    #[serde(default)]
    pub confidence: Option<f32>,
}

/// A performer's pose.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoseMessage {
    /// Avatar (performer) id, 1–64 characters.
    pub avatar: String,
    /// Source profile (`canonical` for local rotations of the canonical skeleton).
    pub profile: String,
    /// Sender's timestamp, seconds.
    pub timestamp: f64,
    /// Pelvis displacement from its rest position, metres.
    #[serde(default)]
    pub root: Option<[f32; 3]>,
    /// The joints; joints not listed keep their last value.
    pub joints: Vec<JointSample>,
}

/// Messages a client sends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ClientMessage {
    /// First message of every connection.
    Hello {
        /// The client's protocol version (must equal [`PROTOCOL_VERSION`]).
        version: u32,
        /// What the connection does.
        role: Role,
        /// Access token for the role.
        #[serde(default)]
        token: Option<String>,
        /// A publisher's sensor name (1–32 ASCII letters, digits, `-` or `_`): Kinect
        /// body frames on this connection become avatars `kinect-<sensor>-<body id>`
        /// rather than `kinect-<body id>`, so that several sensors (kiosks) whose body
        /// ids overlap can share a server.
        #[serde(default)]
        sensor: Option<String>,
    },
    /// A pose for an avatar (publishers).
    Pose(PoseMessage),
    /// The performer of `avatar` holds their rest pose (T-pose, facing where "forward"
    /// should be): capture it (publishers).
    Calibrate {
        /// Avatar id.
        avatar: String,
    },
    /// Dress `avatar` in the server's garment `garment` (publishers; a try-on kiosk
    /// switching garments). Applies to avatars of any source, from any publisher
    /// connection; an avatar not seen yet wears it from its first pose.
    Wear {
        /// Avatar id.
        avatar: String,
        /// Garment name (as in the server's databases: `tshirt`, `pants`, …).
        garment: String,
    },
    /// Which avatars to receive (viewers); `None`: all.
    Subscribe {
        /// Avatar ids.
        #[serde(default)]
        avatars: Option<Vec<String>>,
    },
}

/// Static data of an avatar's assets, sent once per viewer, keyed by content hash.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AssetMessage {
    /// Content hash (hex) that frames refer to.
    pub hash: String,
    /// The garment's name (`tshirt`, `pants`, …: what `wear` takes); empty from servers
    /// older than this field.
    #[serde(default)]
    pub garment: String,
    /// The garment's codec setup (`codec::GarmentSetup::to_bytes`).
    pub setup: ByteBuf,
    /// Body rest vertex positions, f32 LE triples, metres.
    pub body_positions: ByteBuf,
    /// Body triangles, u32 LE triples.
    pub body_triangles: ByteBuf,
    /// Body skin: per vertex 4 joint indices (u8).
    pub body_joints: ByteBuf,
    /// Body skin: per vertex 4 weights (f32 LE).
    pub body_weights: ByteBuf,
    /// Rest joint positions, f32 LE triples (22 joints), metres.
    pub skeleton: ByteBuf,
    /// Parent of each joint (-1 for the pelvis).
    pub parents: Vec<i32>,
}

/// One avatar's frame of one tick.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FrameMessage {
    /// Avatar id.
    pub avatar: String,
    /// Tick sequence number of this avatar's stream (= the codec frame number).
    pub seq: u32,
    /// Server time of the tick, seconds since the server started.
    pub timestamp: f64,
    /// Timestamp of the pose used (the publisher's clock), seconds.
    pub pose_timestamp: f64,
    /// The asset hash.
    pub asset: String,
    /// Body pose, world frame: pelvis translation (3 floats) then 22 local rotations
    /// (x, y, z, w), f32 LE.
    pub pose: ByteBuf,
    /// Canonical → world rigid motion of the garment: rotation (x, y, z, w), translation.
    pub world: [f32; 7],
    /// Garment codec frame (keyframe or delta).
    pub garment: ByteBuf,
}

/// Messages the server sends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerMessage {
    /// Reply to `hello`.
    Welcome {
        /// The server's protocol version.
        version: u32,
        /// Tick rate, Hz.
        tick_hz: f32,
    },
    /// Static data (before the first frame that refers to it).
    Asset(AssetMessage),
    /// A garment frame.
    Frame(FrameMessage),
    /// An avatar left.
    Gone {
        /// Avatar id.
        avatar: String,
    },
    /// A refused message; `code` is stable, `message` explains.
    Error {
        /// Machine-readable code.
        code: String,
        /// Human-readable explanation.
        message: String,
    },
}

/// Why a message could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// Not valid MessagePack for any message.
    #[error("bad MessagePack: {0}")]
    MessagePack(String),
    /// Not valid JSON for any message.
    #[error("bad JSON: {0}")]
    Json(String),
    /// A message of ours could not be written (a value MessagePack cannot hold).
    #[error("encoding a message: {0}")]
    Encode(String),
    /// Larger than allowed.
    #[error("message of {size} bytes exceeds the limit of {limit}")]
    TooLarge {
        /// Size received.
        size: usize,
        /// The limit.
        limit: usize,
    },
}

impl ClientMessage {
    /// Reads a binary (MessagePack) message.
    pub fn from_msgpack(bytes: &[u8]) -> Result<Self, ProtocolError> {
        rmp_serde::from_slice(bytes).map_err(|e| ProtocolError::MessagePack(e.to_string()))
    }

    /// Reads a text (JSON) message.
    pub fn from_json(text: &str) -> Result<Self, ProtocolError> {
        serde_json::from_str(text).map_err(|e| ProtocolError::Json(e.to_string()))
    }

    /// Writes the message as MessagePack (maps).
    pub fn to_msgpack(&self) -> Result<Vec<u8>, ProtocolError> {
        rmp_serde::to_vec_named(self).map_err(|e| ProtocolError::Encode(e.to_string()))
    }
}

impl ServerMessage {
    /// Writes the message as MessagePack (maps).
    pub fn to_msgpack(&self) -> Result<Vec<u8>, ProtocolError> {
        rmp_serde::to_vec_named(self).map_err(|e| ProtocolError::Encode(e.to_string()))
    }

    /// Reads a binary (MessagePack) message.
    pub fn from_msgpack(bytes: &[u8]) -> Result<Self, ProtocolError> {
        rmp_serde::from_slice(bytes).map_err(|e| ProtocolError::MessagePack(e.to_string()))
    }

    /// An error reply.
    pub fn error(code: &str, message: impl Into<String>) -> Self {
        ServerMessage::Error {
            code: code.to_string(),
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_in_both_encodings() {
        let pose = ClientMessage::Pose(PoseMessage {
            avatar: "alice".into(),
            profile: "canonical".into(),
            timestamp: 1.5,
            root: Some([0.0, 0.1, 0.0]),
            joints: vec![JointSample {
                name: "left_shoulder".into(),
                rotation: Some([0.0, 0.0, 0.38, 0.92]),
                position: None,
                confidence: Some(1.0),
            }],
        });
        assert_eq!(
            ClientMessage::from_msgpack(&pose.to_msgpack().expect("encodes")).expect("msgpack"),
            pose
        );
        let json = serde_json::to_string(&pose).expect("json");
        assert!(json.contains("\"type\":\"pose\""), "{json}");
        assert_eq!(ClientMessage::from_json(&json).expect("json"), pose);
        let frame = ServerMessage::Frame(FrameMessage {
            avatar: "a".into(),
            seq: 3,
            timestamp: 0.1,
            pose_timestamp: 0.0,
            asset: "ff".into(),
            pose: ByteBuf::from(vec![0u8; 12]),
            world: [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0],
            garment: ByteBuf::from(vec![1u8, 2, 3]),
        });
        let bytes = frame.to_msgpack().expect("encodes");
        // byte payloads are MessagePack bin (0xc4), not arrays of integers
        assert!(bytes.windows(2).any(|w| w == [0xc4, 3]));
        assert_eq!(ServerMessage::from_msgpack(&bytes).expect("back"), frame);
    }

    #[test]
    fn bad_messages_are_named() {
        assert!(matches!(
            ClientMessage::from_msgpack(&[0xc1]),
            Err(ProtocolError::MessagePack(_))
        ));
        assert!(matches!(
            ClientMessage::from_json("{\"type\":\"pose\"}"),
            Err(ProtocolError::Json(_))
        ));
        assert!(ClientMessage::from_json("{\"type\":\"launch\"}").is_err());
        assert!(
            ClientMessage::from_json(
                "{\"type\":\"hello\",\"version\":\"one\",\"role\":\"viewer\"}"
            )
            .is_err()
        );
    }
}
