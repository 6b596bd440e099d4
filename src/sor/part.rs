//! Single-example part files (one per example of a resumable or sharded bake):
//! one [`Example`] with the database's format version and a checksum, refused by
//! name ([`DbError`]) when truncated, corrupt or of another version.

use glam::{Quat, Vec3};
use xxhash_rust::xxh3::xxh3_64;

use crate::skeleton::{DOF_COUNT, JOINT_COUNT, Pose};

use super::db::{DB_VERSION, DbError, MAX_VERTICES, bytes_of, le_u32, le_u64};
use super::rig::Example;

/// Magic of a single-example part file (resumable and sharded bakes).
const PART_MAGIC: [u8; 8] = *b"CCSOREX\0";

/// Serialises one example (for resumable bakes): magic, version, counts, the arrays,
/// and an xxh3-64 of everything before it.
pub fn encode_example(e: &Example) -> Vec<u8> {
    let n = e.positions.len() as u64;
    let g = (e.distance_weights.len() / DOF_COUNT) as u64;
    let mut out = Vec::new();
    out.extend_from_slice(&PART_MAGIC);
    out.extend_from_slice(&DB_VERSION.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&g.to_le_bytes());
    out.extend_from_slice(bytes_of(&e.pose.translation.to_array()));
    for q in &e.pose.rotations {
        out.extend_from_slice(bytes_of(&q.to_array()));
    }
    out.extend_from_slice(bytes_of(&e.distance_weights));
    out.extend_from_slice(bytes_of(&e.positions));
    out.extend_from_slice(bytes_of(&e.alpha));
    out.extend_from_slice(bytes_of(&e.translation));
    out.extend_from_slice(bytes_of(&e.body_vertex));
    out.extend_from_slice(bytes_of(&e.clearance));
    out.extend_from_slice(&e.remote_bone);
    let sum = xxh3_64(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// Parses a part file written by [`encode_example`].
pub fn decode_example(b: &[u8]) -> Result<Example, DbError> {
    if b.len() < 40 || b[..8] != PART_MAGIC {
        return Err(DbError::BadMagic);
    }
    let version = le_u32(b, 8);
    if version != DB_VERSION {
        return Err(DbError::Version {
            found: version,
            supported: DB_VERSION,
        });
    }
    let body = &b[..b.len() - 8];
    if xxh3_64(body) != le_u64(b, b.len() - 8) {
        return Err(DbError::Checksum("example part".into()));
    }
    let (n, g) = (le_u64(b, 16) as usize, le_u64(b, 24) as usize);
    if n == 0 || n > MAX_VERTICES || g == 0 || g > 64 {
        return Err(DbError::Corrupt(format!(
            "example part with {n} vertices, {g} regions"
        )));
    }
    let mut at = 32;
    let mut take = |len: usize| -> Result<&[u8], DbError> {
        let s = body.get(at..at + len).ok_or_else(|| DbError::Truncated {
            what: "example part".into(),
            needed: (at + len) as u64,
            len: body.len() as u64,
        })?;
        at += len;
        Ok(s)
    };
    let pose_f: Vec<f32> = bytemuck::pod_collect_to_vec(take(4 * (3 + 4 * JOINT_COUNT))?);
    let pose = Pose {
        translation: Vec3::new(pose_f[0], pose_f[1], pose_f[2]),
        rotations: std::array::from_fn(|k| Quat::from_slice(&pose_f[3 + 4 * k..7 + 4 * k])),
    };
    pose.clone()
        .validate()
        .map_err(|e| DbError::Corrupt(format!("example pose: {e}")))?;
    let e = Example {
        pose,
        distance_weights: bytemuck::pod_collect_to_vec(take(4 * g * DOF_COUNT)?),
        positions: bytemuck::pod_collect_to_vec(take(12 * n)?),
        alpha: bytemuck::pod_collect_to_vec(take(4 * n)?),
        translation: bytemuck::pod_collect_to_vec(take(36 * n)?),
        body_vertex: bytemuck::pod_collect_to_vec(take(4 * n)?),
        clearance: bytemuck::pod_collect_to_vec(take(4 * n)?),
        remote_bone: take(n)?.to_vec(),
    };
    if at != body.len() {
        return Err(DbError::Corrupt("example part has trailing bytes".into()));
    }
    Ok(e)
}
