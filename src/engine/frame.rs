//! One avatar's frame in a tick: its SOR synthesis and the encoding of its garment
//! into ready-made `frame` messages (delta, keyframe), many avatars at once on rayon.

use bytes::Bytes;
use glam::Vec3;
use rayon::prelude::*;
use serde_bytes::ByteBuf;

use super::{Avatar, AvatarFrame, EngineError, Garment};
use crate::codec::BoneTransform;
use crate::protocol::{FrameMessage, ServerMessage};
use crate::skeleton::{JOINT_COUNT, canonicalize};
use crate::sor::{AvatarJob, Synthesizer, synthesize_job};

/// Synthesises and encodes one group of streaming avatars, each avatar's two steps
/// together in one parallel pass (rayon): one result per avatar, in `group`'s order.
pub(super) fn synthesise_and_encode(
    garments: &[Garment],
    synths: &[Synthesizer<'_>],
    group: &mut [(&String, &mut Avatar)],
    now: f64,
    keyframe_interval: f64,
) -> Vec<Result<AvatarFrame, EngineError>> {
    group
        .par_iter_mut()
        .map(|(id, a)| {
            if !a.held {
                let mut job = AvatarJob {
                    state: &mut a.state,
                    pose: a.pose,
                    dt: a.dt,
                    out: &mut a.out,
                    frame: None,
                };
                synthesize_job(&synths[a.garment], &mut job);
                if job.frame.is_none() {
                    // its synthesis panicked (a bug): no frame this tick
                    return Err(EngineError::Panicked("synthesis"));
                }
            }
            // an encoder panic (a bug) costs this avatar its frame, as an error does
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                encode_avatar(&garments[a.garment], id, a, now, keyframe_interval)
            }))
            .unwrap_or(Err(EngineError::Panicked("encoding")))
        })
        .collect()
}

/// Encodes one avatar's synthesised garment (`a.out`) into its ready-made `frame`
/// messages: the delta, and a keyframe where its stream (re)starts, or where a viewer
/// asked and the last keyframe is `keyframe_interval` seconds old.
fn encode_avatar(
    garment: &Garment,
    id: &str,
    a: &mut Avatar,
    now: f64,
    keyframe_interval: f64,
) -> Result<AvatarFrame, EngineError> {
    let skeleton = &garment.skeleton;
    let asset = &garment.asset_hash;
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
    let first = a.encoder.last_frame().is_none() || a.paused;
    a.paused = false;
    let h = a.encoder.encode(
        bytemuck::cast_slice::<Vec3, f32>(&a.out),
        &a.bones,
        first,
        &mut a.delta,
    )?;
    // the body pose bytes, shared by the delta and keyframe messages
    let mut pose = Vec::with_capacity(4 * (3 + 4 * JOINT_COUNT));
    a.pose
        .translation
        .to_array()
        .iter()
        .chain(a.pose.rotations.iter().flat_map(|q| q.as_ref()))
        .for_each(|x| pose.extend_from_slice(&x.to_le_bytes()));
    let (pose_timestamp, world) = (a.pose_timestamp, a.world);
    let message = |garment: &[u8]| -> Result<Bytes, EngineError> {
        Ok(Bytes::from(
            ServerMessage::Frame(FrameMessage {
                avatar: id.to_string(),
                seq: h.frame,
                timestamp: now,
                pose_timestamp,
                asset: asset.clone(),
                pose: ByteBuf::from(pose.clone()),
                world,
                garment: ByteBuf::from(garment.to_vec()),
            })
            .to_msgpack()?,
        ))
    };
    let due = a
        .keyed_at
        .is_none_or(|t| !(0.0..keyframe_interval).contains(&(now - t)));
    let (delta, key) = if first {
        (None, Some(message(&a.delta)?))
    } else if a.want_key && due {
        a.encoder.keyframe(&mut a.key)?;
        (Some(message(&a.delta)?), Some(message(&a.key)?))
    } else {
        (Some(message(&a.delta)?), None)
    };
    if key.is_some() {
        a.keyed_at = Some(now);
        a.want_key = false;
    }
    Ok(AvatarFrame {
        avatar: id.to_string(),
        frame: h.frame,
        delta,
        key,
    })
}
