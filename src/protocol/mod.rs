//! Wire messages (DESIGN §5), version [`PROTOCOL_VERSION`]. One WebSocket endpoint:
//! binary frames are MessagePack **maps** (`rmp_serde::to_vec_named`; field names as
//! below), text frames are JSON with the same fields. Every message has a `type`.
//! Byte payloads (codec setup and frames, float arrays) are MessagePack `bin` (in JSON:
//! arrays of numbers; viewers should use MessagePack).
//!
//! Client → server: `hello`, `pose`, `calibrate`, `wear`, `subscribe`, `resync`, `ping`.
//! Server → client: `welcome`, `asset`,
//! `frame`, `gone`, `error`.

mod body;
mod compact;

pub use body::{BodyAsset, BodyPose};
use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;

/// Protocol version spoken by this build.
pub const PROTOCOL_VERSION: u32 = 1;

/// The rule [`valid_sensor_name`] checks, in words (for error messages).
pub const SENSOR_NAME_RULE: &str = "sensor name must be 1–32 ASCII letters, digits, - or _";

/// Whether `name` may name a sensor in a `hello` (it becomes part of the avatar ids
/// `kinect-<sensor>-<body id>`): 1–32 ASCII letters, digits, `-` or `_`.
pub fn valid_sensor_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Most characters (Unicode scalar values) in an avatar id.
pub const MAX_AVATAR_ID_CHARS: usize = 64;

/// The rule [`valid_avatar_id`] checks, in words (for error messages).
pub const AVATAR_ID_RULE: &str =
    "an avatar id is 1–64 characters, none of them a control or invisible formatting character";

/// Whether `id` may name an avatar: 1 to [`MAX_AVATAR_ID_CHARS`] characters, none of
/// them a control character (C0, DEL, C1) or an invisible formatting one (bidirectional
/// overrides and isolates, zero-width characters, the byte-order mark, soft hyphen).
/// Ids come from publishers and are printed by `clothcast watch`, written to the
/// server's logs and metrics and shown by viewers: such characters would let a
/// publisher rewrite an operator's terminal (escape sequences), forge log lines
/// (newlines) or make one avatar's name look like another's.
pub fn valid_avatar_id(id: &str) -> bool {
    (1..=MAX_AVATAR_ID_CHARS).contains(&id.chars().count()) && !id.chars().any(unprintable)
}

/// A control character (C0, DEL, C1) or an invisible formatting one (bidirectional
/// overrides and isolates, zero-width characters, the byte-order mark, soft hyphen):
/// what outside text must not carry into a terminal or a log line as it is.
fn unprintable(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206F}'
            | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}')
}

/// Text that came from outside (a peer's message quoted in an error, a server's error
/// reply), displayed for a log line or a terminal: every [unprintable](valid_avatar_id)
/// character is written as its Rust escape (`\n`, `\u{1b}`, `\u{202e}`), so that a
/// peer cannot start a forged log line, send escape sequences to an operator's
/// terminal, or reorder what follows; everything else as it is.
pub struct Escaped<T>(pub T);

impl<T: std::fmt::Display> std::fmt::Display for Escaped<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        /// Passes text through to `f`, escaping the unprintable characters.
        struct Filter<'a, 'b>(&'a mut std::fmt::Formatter<'b>);
        impl std::fmt::Write for Filter<'_, '_> {
            fn write_str(&mut self, s: &str) -> std::fmt::Result {
                let mut rest = s;
                while let Some(at) = rest.find(unprintable) {
                    self.0.write_str(&rest[..at])?;
                    let c = rest[at..].chars().next().unwrap_or_default();
                    match c {
                        '\n' => self.0.write_str("\\n")?,
                        '\r' => self.0.write_str("\\r")?,
                        '\t' => self.0.write_str("\\t")?,
                        c => write!(self.0, "{}", c.escape_unicode())?,
                    }
                    rest = &rest[at + c.len_utf8()..];
                }
                self.0.write_str(rest)
            }
        }
        std::fmt::Write::write_fmt(&mut Filter(f), format_args!("{}", self.0))
    }
}

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
    /// Tracking confidence in [0, 1] (Kinect profiles: below 0.25 the joint is not
    /// tracked, below 0.5 it is a guess that poses the avatar but measures nothing;
    /// absent: tracked).
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
    /// Kinect profiles: the floor plane the sensor reports, `[a, b, c, d]` with
    /// `a x + b y + c z + d = 0` in its camera coordinates and units and `(a, b, c)` the
    /// unit normal (Kinect v2's `FloorClipPlane`). The avatar then stands on the floor
    /// and a tilted sensor's tilt is taken out. Absent or all-zero (not found yet):
    /// the last one stays. `mediapipe`: the floor's normal in MediaPipe's camera axes
    /// (`d` unused), levelling a tilted webcam. Other profiles ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor: Option<[f32; 4]>,
}

/// Messages a client sends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ClientMessage {
    /// First message of every connection.
    Hello(HelloMessage),
    /// A pose for an avatar (publishers).
    Pose(PoseMessage),
    /// The performer of `avatar` holds their rest pose (T-pose, facing where "forward"
    /// should be): capture it (publishers).
    Calibrate(CalibrateMessage),
    /// Dress `avatar` in one of the server's garments, or in an outfit of several worn
    /// at once (publishers; a try-on kiosk switching garments). Exactly one of
    /// `garment` and `garments` is given ([`ClientMessage::outfit`] reads them).
    /// Applies to avatars of any source, from any publisher connection; an avatar not
    /// seen yet wears it from its first pose.
    Wear(WearMessage),
    /// Which avatars to receive (viewers); `None`: all.
    Subscribe(SubscribeMessage),
    /// This viewer cannot decode these avatars' frames: a frame of theirs was refused
    /// (its reference missing, or the frame itself corrupt), so every delta after it
    /// is refused too, until a keyframe (viewers; a decoder that lacks a frame's
    /// reference refuses the frame and asks for a keyframe). The server sends
    /// each avatar named, that this connection watches, a keyframe with its next
    /// frames; it makes at most one keyframe per avatar per `keyframe_interval` for
    /// such requests, so asking again and again costs the server little. Avatars it
    /// does not watch are ignored. At most the server's avatar limit of ids.
    Resync(ResyncMessage),
    /// Are you there? (any role, after `hello`): the server answers `pong`. For clients
    /// that cannot see WebSocket pings (browsers) to tell a quiet server from a link
    /// that died without closing.
    Ping,
}

/// The fields of [`ClientMessage::Hello`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HelloMessage {
    /// The client's protocol version (must equal [`PROTOCOL_VERSION`]).
    pub version: u32,
    /// What the connection does.
    pub role: Role,
    /// Access token for the role.
    #[serde(default)]
    pub token: Option<String>,
    /// A publisher's sensor name (1–32 ASCII letters, digits, `-` or `_`): Kinect
    /// body frames on this connection become avatars `kinect-<sensor>-<body id>`
    /// rather than `kinect-<body id>`, so that several sensors (kiosks) whose body
    /// ids overlap can share a server.
    #[serde(default)]
    pub sensor: Option<String>,
}

/// The fields of [`ClientMessage::Resync`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResyncMessage {
    /// The avatars whose streams need a keyframe.
    #[serde(default)]
    pub avatars: Vec<String>,
    /// Assets (content hashes) the viewer lacks: frames name them, and their `asset`
    /// message never came (a `have` that listed it wrongly) or was refused. The server
    /// sends each `asset` again, at most once per [`ASSET_AGAIN_SECONDS`] a connection.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assets: Vec<String>,
}

/// Seconds before a connection is sent the same `asset` again for a `resync` (an asset
/// is up to a few MB: a viewer asking at its message rate would multiply them).
pub const ASSET_AGAIN_SECONDS: f64 = 1.0;

/// Whether a `resync` is one the server takes: 0 to `max` avatar ids (the server's
/// avatar limit), each a [`valid_avatar_id`], and 0 to [`MAX_HAVE`] asset hashes of at
/// most 64 characters, one of the two lists not empty; what is wrong otherwise.
pub fn check_resync(m: &ResyncMessage, max: usize) -> Result<(), String> {
    let avatars = &m.avatars;
    if avatars.is_empty() && m.assets.is_empty() {
        return Err(
            "a resync names the avatars that need a keyframe or the assets missing, this one none"
                .into(),
        );
    }
    if m.assets.len() > MAX_HAVE {
        return Err(format!(
            "a resync names at most {MAX_HAVE} assets, this one {}",
            m.assets.len()
        ));
    }
    if m.assets.iter().any(|h| h.len() > 64) {
        return Err("a resync names asset hashes of at most 64 characters".into());
    }
    if avatars.len() > max {
        return Err(format!(
            "a resync names at most {max} avatars (the server's limit), this one {}",
            avatars.len()
        ));
    }
    match avatars.iter().find(|a| !valid_avatar_id(a)) {
        Some(a) => Err(format!("resync of {a:?}: {AVATAR_ID_RULE}")),
        None => Ok(()),
    }
}

/// The fields of [`ClientMessage::Calibrate`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CalibrateMessage {
    /// Avatar id.
    pub avatar: String,
}

/// The fields of [`ClientMessage::Wear`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WearMessage {
    /// Avatar id.
    pub avatar: String,
    /// Garment name (as in the server's databases: `tshirt`, `pants`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub garment: Option<String>,
    /// An outfit: at most [`MAX_OUTFIT`] different garments worn at once, inner
    /// to outer (`["pants", "tshirt"]`: the shirt over the pants).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub garments: Option<Vec<String>>,
}

/// The fields of [`ClientMessage::Subscribe`]. Its [`Default`] is what a bare
/// `{"type": "subscribe"}` means: every avatar, frames with the body pose in the map
/// form, every asset sent (so `SubscribeMessage { compact: true, ..Default::default() }`
/// changes one thing).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SubscribeMessage {
    /// Avatar ids; `None` (absent or null): all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avatars: Option<Vec<String>>,
    /// Whether `frame` messages carry the body pose (`pose`, 364 bytes a frame);
    /// default `true`. A viewer that decodes the garment can leave it out and skin
    /// the body with the bones every codec frame carries (`Decoder::bones`,
    /// `GarmentDecoder.bones`), as the web viewer does: about a sixth of a walking
    /// 3 000-vertex avatar's frame.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub pose: bool,
    /// Whether `frame` messages come in the compact form (a MessagePack array, see
    /// [`FrameMessage::to_compact`]: ~65 bytes less per frame, ~3.5 % of a walking
    /// 3 000-vertex avatar's); default `false`, the map form. The web client and
    /// `clothcast watch` ask for it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub compact: bool,
    /// `[index, count]`: of the avatars subscribed to, only those whose
    /// [`shard_of`] among `count` shards is `index` (1 ≤ `count` ≤ [`MAX_SHARDS`]).
    /// A client that decodes on several threads opens one connection per thread,
    /// each with its own shard, so that every avatar is received and decoded once
    /// without knowing the avatars in advance (the web worker client with
    /// `{ workers: n }`). Absent: every avatar subscribed to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<[u32; 2]>,
    /// Hashes of `asset`s the viewer already holds (from an earlier connection):
    /// the server does not send those again (at most [`MAX_HAVE`], each at most
    /// 64 characters). A reconnecting viewer so skips re-downloading its garments'
    /// setups and bodies (~330 kB a garment at 3 000 vertices). Absent: every asset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub have: Option<Vec<String>>,
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
    /// (x, y, z, w), f32 LE. Empty (absent) in frames to a viewer that subscribed with
    /// `pose: false`.
    #[serde(default, skip_serializing_if = "no_bytes")]
    pub pose: ByteBuf,
    /// Canonical → world rigid motion of the garment: rotation (x, y, z, w), translation.
    pub world: [f32; 7],
    /// Garment codec frame (keyframe or delta).
    pub garment: ByteBuf,
    /// The garments an outfit wears over the first (`asset` and `garment` above), inner
    /// to outer; absent (empty) for an avatar in one garment. Every layer's codec
    /// frame has the number `seq`, and is a keyframe exactly when the first is.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<GarmentLayer>,
}

impl FrameMessage {
    /// The asset hashes of the garments it carries, inner to outer.
    pub fn assets(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.asset.as_str()).chain(self.layers.iter().map(|l| l.asset.as_str()))
    }
}

/// `true`: a default of serde fields that are on unless said otherwise.
fn yes() -> bool {
    true
}

/// Whether a flag is at its default, `true` (left out of messages then).
fn is_true(b: &bool) -> bool {
    *b
}

/// Whether a flag is at its default, `false` (left out of messages then).
fn is_false(b: &bool) -> bool {
    !*b
}

/// Whether a byte field is empty (left out of messages then).
fn no_bytes(b: &ByteBuf) -> bool {
    b.is_empty()
}

/// One more garment of an avatar's outfit in a [`FrameMessage`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GarmentLayer {
    /// The asset hash of the garment.
    pub asset: String,
    /// Its codec frame (keyframe or delta).
    pub garment: ByteBuf,
}

/// Most shards a subscription may divide the avatars into (`subscribe`'s `shard`).
pub const MAX_SHARDS: u32 = 64;

/// The shard among `count` that `avatar` falls in: FNV-1a (32-bit) of its id's UTF-8
/// bytes, mixed by MurmurHash3's 32-bit finaliser, times `count`, divided by 2^32. (FNV-1a
/// alone spreads ids that differ in their last character badly: its lowest bit is
/// the parity of the bytes, and its high bits hardly move.) Stable across servers and
/// versions, so a client may predict which of its connections an avatar arrives on.
pub fn shard_of(avatar: &str, count: u32) -> u32 {
    let mut h = avatar.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    ((u64::from(h) * u64::from(count.max(1))) >> 32) as u32
}

/// Whether `shard` (`subscribe`'s `[index, count]`) is one: `None`, or
/// 1 ≤ `count` ≤ [`MAX_SHARDS`] and `index` < `count`; what is wrong otherwise.
pub fn check_shard(shard: Option<[u32; 2]>) -> Result<(), String> {
    match shard {
        Some([index, count]) if count == 0 || count > MAX_SHARDS || index >= count => Err(format!(
            "a shard is [index, count] with 1 ≤ count ≤ {MAX_SHARDS} and index < count, this one [{index}, {count}]"
        )),
        _ => Ok(()),
    }
}

/// Most asset hashes a `subscribe` may list in `have`.
pub const MAX_HAVE: usize = 64;

/// Whether `have` (`subscribe`'s) is one: `None`, or at most [`MAX_HAVE`] hashes of at
/// most 64 characters; what is wrong otherwise.
pub fn check_have(have: Option<&[String]>) -> Result<(), String> {
    match have {
        Some(list) if list.len() > MAX_HAVE => Err(format!(
            "`have` lists at most {MAX_HAVE} asset hashes, this one {}",
            list.len()
        )),
        Some(list) if list.iter().any(|h| h.len() > 64) => {
            Err("`have` lists asset hashes of at most 64 characters".into())
        }
        _ => Ok(()),
    }
}

/// Most garments an avatar wears at once (an outfit).
pub const MAX_OUTFIT: usize = 4;

impl Default for SubscribeMessage {
    fn default() -> Self {
        Self {
            avatars: None,
            pose: true,
            compact: false,
            shard: None,
            have: None,
        }
    }
}

impl ClientMessage {
    /// A `subscribe` to `avatars` (`None`: all) with every other field at its wire
    /// default ([`SubscribeMessage`]'s [`Default`]).
    pub fn subscribe(avatars: Option<Vec<String>>) -> Self {
        ClientMessage::Subscribe(SubscribeMessage {
            avatars,
            ..Default::default()
        })
    }

    /// A `wear` message dressing `avatar` in `outfit` (inner to outer): as `garment`
    /// for one garment, so that servers older than outfits understand it.
    pub fn wear(avatar: impl Into<String>, outfit: &[impl AsRef<str>]) -> Self {
        let names: Vec<String> = outfit.iter().map(|g| g.as_ref().to_string()).collect();
        let (garment, garments) = match names.as_slice() {
            [one] => (Some(one.clone()), None),
            _ => (None, Some(names)),
        };
        ClientMessage::Wear(WearMessage {
            avatar: avatar.into(),
            garment,
            garments,
        })
    }

    /// The outfit a `wear` message names, inner to outer: its `garment` alone, or its
    /// `garments`; refused (with what is wrong) when it gives both or neither, or the
    /// list is empty, longer than [`MAX_OUTFIT`] or names a garment twice. `None` for
    /// other messages.
    pub fn outfit(&self) -> Option<Result<Vec<String>, String>> {
        let ClientMessage::Wear(WearMessage {
            garment, garments, ..
        }) = self
        else {
            return None;
        };
        Some(wear_outfit(garment.clone(), garments.clone()))
    }
}

/// The outfit of a `wear` message's `garment` and `garments` fields (see
/// [`ClientMessage::outfit`]).
pub fn wear_outfit(
    garment: Option<String>,
    garments: Option<Vec<String>>,
) -> Result<Vec<String>, String> {
    match (garment, garments) {
        (Some(g), None) => Ok(vec![g]),
        (None, Some(list)) => check_outfit(&list).map(|()| list),
        _ => Err("a wear message gives either `garment` or `garments`, not both or neither".into()),
    }
}

/// Whether `names` can be an outfit: 1 to [`MAX_OUTFIT`] garments, none twice.
pub fn check_outfit(names: &[String]) -> Result<(), String> {
    if names.is_empty() || names.len() > MAX_OUTFIT {
        return Err(format!(
            "an outfit is 1 to {MAX_OUTFIT} garments, this one {}",
            names.len()
        ));
    }
    let twice = names
        .iter()
        .enumerate()
        .find_map(|(i, g)| names[..i].contains(g).then_some(g));
    if let Some(g) = twice {
        return Err(format!("an outfit names {g:?} twice"));
    }
    Ok(())
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
        /// The hashes of the `asset`s a viewer's `subscribe` is answered with (all the
        /// server serves), so that a client knows when it has them all (the web worker
        /// client then starts its other connections with them in `have`). Empty from
        /// servers older than this field, and for publishers.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        assets: Vec<String>,
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
    /// Reply to `ping`.
    Pong,
}

/// A message's `type` alone (every other field skipped unread), so that the messages
/// that come 30 times a second per avatar, `pose` and `frame`, are read straight into
/// their structs: serde's internally tagged enums first copy the whole message into a
/// tree of owned values (a `String` per key, a copy of every byte payload) to find the
/// tag, which took about half the time of reading a pose (`clothcast bench serve`
/// prints both).
#[derive(Deserialize)]
struct Kind<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<std::borrow::Cow<'a, str>>,
}

fn kind_msgpack(bytes: &[u8]) -> Option<std::borrow::Cow<'_, str>> {
    if let Some(kind) = leading_type_msgpack(bytes) {
        return Some(std::borrow::Cow::Borrowed(kind));
    }
    rmp_serde::from_slice::<Kind<'_>>(bytes).ok()?.kind
}

fn kind_json(text: &str) -> Option<std::borrow::Cow<'_, str>> {
    if let Some(kind) = leading_type_json(text) {
        return Some(std::borrow::Cow::Borrowed(kind));
    }
    serde_json::from_str::<Kind<'_>>(text).ok()?.kind
}

/// The `type` of a MessagePack map whose first entry is `type` with a string value, as
/// serde writes tagged enums (our clients included); `None` for anything else, which
/// [`Kind`] then scans for. Skipping every other entry of a pose to find its `type`
/// took a third of the time of reading it. Only routes the message: the reader it picks
/// validates the whole map (a second `type` entry included), and falls back to serde's
/// enum on any failure.
fn leading_type_msgpack(b: &[u8]) -> Option<&str> {
    // a map of at least one entry
    let at = match *b.first()? {
        0x81..=0x8f => 1,
        0xde if b.get(1..3)? != [0, 0] => 3,
        0xdf if b.get(1..5)? != [0, 0, 0, 0] => 5,
        _ => return None,
    };
    let (key, at) = msgpack_str(b, at)?;
    if key != b"type" {
        return None;
    }
    std::str::from_utf8(msgpack_str(b, at)?.0).ok()
}

/// The MessagePack string at `b[at..]` and the offset after it.
fn msgpack_str(b: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let (len, start) = match *b.get(at)? {
        m @ 0xa0..=0xbf => (usize::from(m & 0x1f), at + 1),
        0xd9 => (usize::from(*b.get(at + 1)?), at + 2),
        0xda => (
            usize::from(u16::from_be_bytes(b.get(at + 1..at + 3)?.try_into().ok()?)),
            at + 3,
        ),
        _ => return None,
    };
    let end = start.checked_add(len)?;
    Some((b.get(start..end)?, end))
}

/// [`leading_type_msgpack`] for JSON: `{"type": "…"` at the start (a value without
/// escapes), else `None`.
fn leading_type_json(text: &str) -> Option<&str> {
    const WS: [char; 4] = [' ', '\t', '\n', '\r'];
    let rest = text.trim_start_matches(WS).strip_prefix('{')?;
    let rest = rest.trim_start_matches(WS).strip_prefix("\"type\"")?;
    let rest = rest.trim_start_matches(WS).strip_prefix(':')?;
    let rest = rest.trim_start_matches(WS).strip_prefix('"')?;
    let end = rest.find(['"', '\\'])?;
    (rest.as_bytes()[end] == b'"').then(|| &rest[..end])
}

mod tagged;

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
    /// An asset's body or a frame's pose is malformed (see [`BodyAsset`]).
    #[error("bad body data: {0}")]
    BadBody(String),
    /// Larger than allowed.
    #[error("message of {size} bytes exceeds the limit of {limit}")]
    TooLarge {
        /// Size received.
        size: usize,
        /// The limit.
        limit: usize,
    },
}

/// `read(input)` as the [`ClientMessage`] of type `kind` (its `type` entry), mapped into
/// the variant; `None` for a type without fields (`ping`) or none of ours.
macro_rules! by_kind {
    ($kind:expr, $read:path, $input:expr) => {
        match $kind {
            "hello" => Some($read($input).map(ClientMessage::Hello)),
            "pose" => Some($read($input).map(ClientMessage::Pose)),
            "calibrate" => Some($read($input).map(ClientMessage::Calibrate)),
            "wear" => Some($read($input).map(ClientMessage::Wear)),
            "subscribe" => Some($read($input).map(ClientMessage::Subscribe)),
            "resync" => Some($read($input).map(ClientMessage::Resync)),
            _ => None,
        }
    };
}

impl ClientMessage {
    /// Reads a binary (MessagePack) message.
    ///
    /// A message of a known `type` is read straight into its struct; one that does
    /// not fit it is refused naming its type and the field that is wrong
    /// (``bad MessagePack: `subscribe` message, field `shard[0]`: invalid value:
    /// integer `-1`, expected u32``). Anything else (no `type`, an unknown one) gets
    /// serde's error, which lists the types there are.
    pub fn from_msgpack(bytes: &[u8]) -> Result<Self, ProtocolError> {
        Self::read(
            kind_msgpack(bytes).as_deref(),
            |kind| by_kind!(kind, tagged::from_msgpack, bytes),
            || rmp_serde::from_slice(bytes).map_err(|e| e.to_string()),
            |kind| by_kind!(kind, tagged::from_msgpack_traced, bytes),
        )
        .map_err(ProtocolError::MessagePack)
    }

    /// Reads a text (JSON) message.
    ///
    /// Errors as [`ClientMessage::from_msgpack`]'s, with serde_json's line and column.
    pub fn from_json(text: &str) -> Result<Self, ProtocolError> {
        Self::read(
            kind_json(text).as_deref(),
            |kind| by_kind!(kind, tagged::from_json, text),
            || serde_json::from_str(text).map_err(|e| e.to_string()),
            |kind| by_kind!(kind, tagged::from_json_traced, text),
        )
        .map_err(ProtocolError::Json)
    }

    /// A message of type `kind` read straight into its struct (`fast`), else as serde's
    /// enum reads it (`serde`: what that accepts is a message, a second `type` say);
    /// serde's error inside a tagged enum names no field, so a refusal is read again
    /// tracking the path (`traced`) for the error.
    fn read(
        kind: Option<&str>,
        fast: impl FnOnce(&str) -> Option<Option<Self>>,
        serde: impl FnOnce() -> Result<Self, String>,
        traced: impl FnOnce(&str) -> Option<Result<Self, String>>,
    ) -> Result<Self, String> {
        if let Some(Some(m)) = kind.and_then(fast) {
            return Ok(m);
        }
        serde().map_err(|e| {
            kind.and_then(|kind| Some(format!("`{kind}` message, {}", traced(kind)?.err()?)))
                .unwrap_or(e)
        })
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

    /// Writes the message as JSON text: what the server sends a client whose `hello`
    /// was JSON, for the [control](Self::is_control) messages.
    pub fn to_json(&self) -> Result<String, ProtocolError> {
        serde_json::to_string(self).map_err(|e| ProtocolError::Encode(e.to_string()))
    }

    /// `welcome`, `error`, `gone` and `pong`: messages without binary payloads, which the
    /// server writes in the encoding of the client's `hello` (`asset` and `frame`
    /// are always MessagePack).
    pub fn is_control(&self) -> bool {
        !matches!(self, ServerMessage::Asset(_) | ServerMessage::Frame(_))
    }

    /// Reads a binary (MessagePack) message: a map, or a compact frame (an array,
    /// [`FrameMessage::from_compact`]).
    pub fn from_msgpack(bytes: &[u8]) -> Result<Self, ProtocolError> {
        if compact::is_array(bytes) {
            return FrameMessage::from_compact(bytes).map(ServerMessage::Frame);
        }
        if kind_msgpack(bytes).as_deref() == Some("frame")
            && let Some(frame) = tagged::from_msgpack(bytes)
        {
            return Ok(ServerMessage::Frame(frame));
        }
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
mod tests;
