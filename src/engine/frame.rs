//! One avatar's frame in a tick: its SOR synthesis (each garment of its outfit, then
//! layered) and the encoding of its garments into ready-made `frame` messages (delta,
//! keyframe), many avatars at once on rayon.

use bytes::Bytes;
use glam::Vec3;
use rayon::prelude::*;
use serde_bytes::ByteBuf;

use super::outfit::{self, Layer, Layerings};
use super::{Avatar, EngineError, Garment};
use crate::codec::BoneTransform;
use crate::protocol::{FrameMessage, GarmentLayer, ServerMessage};
use crate::skeleton::{JOINT_COUNT, canonicalize};
use crate::sor::{AvatarJob, Synthesizer, synthesize_job};

/// One avatar's output of one tick: the same bytes go to every viewer.
#[derive(Clone, Debug)]
pub struct AvatarFrame {
    /// Avatar id.
    pub avatar: String,
    /// Codec frame number.
    pub frame: u32,
    /// The `frame` message with a delta (for viewers in step); `None` when the stream
    /// (re)starts: the avatar's first frame, or its first after ticks that skipped it
    /// because nobody watched it.
    pub delta: Option<Bytes>,
    /// The `frame` message with a keyframe of the same frame (when the stream
    /// (re)starts, or when a viewer asked for one).
    pub key: Option<Bytes>,
    /// The same two messages without the body pose, for viewers that subscribed with
    /// `pose: false`: each avatar's garment is still encoded once per tick; its message
    /// is serialised once per form a viewer may ask for (a few microseconds each).
    pub bare: Messages,
    /// The compact form of the messages (`compact: true`, [`crate::protocol::FrameMessage::to_compact`]),
    /// with the body pose ...
    pub compact_pose: Messages,
    /// ... and without it.
    pub compact: Messages,
}

impl AvatarFrame {
    /// The delta and keyframe messages in the form a viewer subscribed to: with or
    /// without the body pose, map or compact.
    pub fn messages(&self, pose: bool, compact: bool) -> (&Option<Bytes>, &Option<Bytes>) {
        let m = match (pose, compact) {
            (true, false) => return (&self.delta, &self.key),
            (false, false) => &self.bare,
            (true, true) => &self.compact_pose,
            (false, true) => &self.compact,
        };
        (&m.delta, &m.key)
    }
}

/// [`AvatarFrame`]'s messages in one of its other forms (without the body pose, or
/// compact): present exactly where the map messages with the pose are.
#[derive(Clone, Debug, Default)]
pub struct Messages {
    /// The delta message.
    pub delta: Option<Bytes>,
    /// The keyframe message.
    pub key: Option<Bytes>,
}

/// One `frame` message in each of its forms: map with the body pose, map without it,
/// compact with it, compact without it (the order of [`AvatarFrame::messages`]'s cases).
type Forms = [Bytes; 4];

/// Synthesises and encodes one group of streaming avatars, each avatar's two steps
/// together in one parallel pass (rayon): one result per avatar, in `group`'s order.
/// An avatar in an outfit has each garment synthesised, then layered (see
/// [`super::outfit`]).
pub(super) fn synthesise_and_encode(
    garments: &[Garment],
    layerings: &Layerings,
    synths: &[Synthesizer<'_>],
    group: &mut [(&String, &mut Avatar)],
    now: f64,
    keyframe_interval: f64,
) -> Vec<Result<AvatarFrame, EngineError>> {
    group
        .par_iter_mut()
        .map(|(id, a)| {
            if !a.held {
                for layer in a.layers.iter_mut() {
                    let mut job = AvatarJob {
                        state: &mut layer.state,
                        pose: a.pose,
                        dt: a.dt,
                        out: &mut layer.out,
                        frame: None,
                    };
                    synthesize_job(&synths[layer.garment], &mut job);
                    if job.frame.is_none() {
                        // its synthesis panicked (a bug): no frame this tick
                        return Err(EngineError::Panicked("synthesis"));
                    }
                }
                let layered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    outfit::layer(layerings, &mut a.layers)
                }));
                if layered.is_err() {
                    return Err(EngineError::Panicked("layering"));
                }
            }
            // an encoder panic (a bug) costs this avatar its frame, as an error does
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                encode_avatar(garments, id, a, now, keyframe_interval)
            }))
            .unwrap_or(Err(EngineError::Panicked("encoding")))
        })
        .collect()
}

/// Encodes one avatar's synthesised garments (each layer's `out`) into its ready-made
/// `frame` messages: the delta, and a keyframe where its streams (re)start, or where a
/// viewer asked and the last keyframe is `keyframe_interval` seconds old. Every layer's
/// stream started with the avatar's and codes every frame, so all have one frame number.
fn encode_avatar(
    garments: &[Garment],
    id: &str,
    a: &mut Avatar,
    now: f64,
    keyframe_interval: f64,
) -> Result<AvatarFrame, EngineError> {
    let first_garment = &garments[a.layers.first().map_or(0, |l| l.garment)];
    let skeleton = &first_garment.skeleton;
    let (canonical, root) = canonicalize(&a.pose, skeleton);
    for (b, t) in a
        .bones
        .iter_mut()
        .zip(skeleton.skinning_transforms(&canonical))
    {
        *b = BoneTransform {
            rotation: t.rot.to_array(),
            translation: t.trans.to_array(),
        };
    }
    let w = root.to_world();
    a.world = [
        w.rot.x, w.rot.y, w.rot.z, w.rot.w, w.trans.x, w.trans.y, w.trans.z,
    ];
    // a stream (re)starts with a keyframe alone: its first frame, or the first after
    // ticks that skipped it
    let first = a.layers.iter().any(|l| l.encoder.last_frame().is_none()) || a.paused;
    a.paused = false;
    let mut number = None;
    for layer in a.layers.iter_mut() {
        let h = layer.encoder.encode(
            bytemuck::cast_slice::<Vec3, f32>(&layer.out),
            &a.bones,
            first,
            &mut layer.delta,
        )?;
        if *number.get_or_insert(h.frame) != h.frame {
            return Err(EngineError::Panicked("layers out of step"));
        }
    }
    let seq = number.unwrap_or(0);
    // the body pose bytes, shared by the delta and keyframe messages
    let mut pose = Vec::with_capacity(4 * (3 + 4 * JOINT_COUNT));
    a.pose
        .translation
        .to_array()
        .iter()
        .chain(a.pose.rotations.iter().flat_map(|q| q.as_ref()))
        .for_each(|x| pose.extend_from_slice(&x.to_le_bytes()));
    let (pose_timestamp, world) = (a.pose_timestamp, a.world);
    // one message in each form a viewer may subscribe to (see `AvatarFrame::messages`):
    // the first layer's asset and codec frame, then the others'
    let message = |layers: &[Layer], key: bool| -> Result<Forms, EngineError> {
        let bytes = |l: &Layer| ByteBuf::from(if key { l.key.clone() } else { l.delta.clone() });
        let asset = |l: &Layer| garments[l.garment].asset_hash.clone();
        let (head, rest) = layers.split_first().ok_or(EngineError::NoGarment)?;
        let frame = FrameMessage {
            avatar: id.to_string(),
            seq,
            timestamp: now,
            pose_timestamp,
            asset: asset(head),
            pose: ByteBuf::from(pose.clone()),
            world,
            garment: bytes(head),
            layers: rest
                .iter()
                .map(|l| GarmentLayer {
                    asset: asset(l),
                    garment: bytes(l),
                })
                .collect(),
        };
        // (the frame moves into the map message and is read from there: no copy of
        // its payloads)
        let compact_pose = Bytes::from(frame.to_compact()?);
        let mut map = ServerMessage::Frame(frame);
        let map_pose = Bytes::from(map.to_msgpack()?);
        let mut compact = Bytes::new();
        if let ServerMessage::Frame(f) = &mut map {
            f.pose = ByteBuf::new();
            compact = Bytes::from(f.to_compact()?);
        }
        Ok([
            map_pose,
            Bytes::from(map.to_msgpack()?),
            compact_pose,
            compact,
        ])
    };
    let due = a
        .keyed_at
        .is_none_or(|t| !(0.0..keyframe_interval).contains(&(now - t)));
    let (delta, key) = if first {
        // a keyframe alone: its bytes are in `delta` (the encoder made a keyframe)
        (None, Some(message(&a.layers, false)?))
    } else if a.want_key && due {
        for layer in a.layers.iter_mut() {
            layer.encoder.keyframe(&mut layer.key)?;
        }
        (
            Some(message(&a.layers, false)?),
            Some(message(&a.layers, true)?),
        )
    } else {
        (Some(message(&a.layers, false)?), None)
    };
    if key.is_some() {
        a.keyed_at = Some(now);
        a.want_key = false;
    }
    let form = |i: usize| Messages {
        delta: delta.as_ref().map(|f| f[i].clone()),
        key: key.as_ref().map(|f| f[i].clone()),
    };
    let [with_pose, bare, compact_pose, compact] = std::array::from_fn(form);
    Ok(AvatarFrame {
        avatar: id.to_string(),
        frame: seq,
        delta: with_pose.delta,
        key: with_pose.key,
        bare,
        compact_pose,
        compact,
    })
}
