//! The body data a viewer receives: an asset's rest body (mesh, skin, skeleton) and a
//! frame's body pose, read from their byte fields with every length, index and number
//! checked, since they come from the network.

use super::{AssetMessage, FrameMessage, ProtocolError};

/// An asset's body, checked: every triangle index names a vertex, every skin joint a
/// joint of the skeleton, every parent an earlier joint (the root's is −1), every
/// number finite.
#[derive(Clone, Debug, PartialEq)]
pub struct BodyAsset {
    /// Rest vertex positions, metres (canonical frame: +Y up, facing +Z).
    pub positions: Vec<[f32; 3]>,
    /// Counter-clockwise triangles.
    pub triangles: Vec<[u32; 3]>,
    /// Per vertex: four joint indices.
    pub joints: Vec<[u8; 4]>,
    /// Per vertex: the four joints' weights.
    pub weights: Vec<[f32; 4]>,
    /// Rest joint positions (T-pose, world), metres.
    pub skeleton: Vec<[f32; 3]>,
    /// Parent of each joint (−1 for the root).
    pub parents: Vec<i32>,
}

/// A frame's body pose: the root joint's translation from its rest position (metres)
/// and every joint's rotation relative to its parent (x, y, z, w).
#[derive(Clone, Debug, PartialEq)]
pub struct BodyPose {
    /// Root translation, metres.
    pub translation: [f32; 3],
    /// Local rotation of each joint, one per joint of the asset's skeleton.
    pub rotations: Vec<[f32; 4]>,
}

fn bad(what: impl Into<String>) -> ProtocolError {
    ProtocolError::BadBody(what.into())
}

/// `bytes` as little-endian `N`-tuples of 4-byte words, refused by `field` name unless
/// the length is a whole number of tuples.
fn words<const N: usize, T>(
    bytes: &[u8],
    field: &str,
    word: fn([u8; 4]) -> T,
) -> Result<Vec<[T; N]>, ProtocolError> {
    if !bytes.len().is_multiple_of(4 * N) {
        return Err(bad(format!(
            "{field}: {} bytes is not a whole number of {N}-tuples",
            bytes.len()
        )));
    }
    Ok(bytes
        .chunks_exact(4 * N)
        .map(|t| {
            std::array::from_fn(|i| word([t[4 * i], t[4 * i + 1], t[4 * i + 2], t[4 * i + 3]]))
        })
        .collect())
}

fn finite<const N: usize>(v: &[[f32; N]], field: &str) -> Result<(), ProtocolError> {
    match v.iter().position(|t| t.iter().any(|x| !x.is_finite())) {
        Some(i) => Err(bad(format!("{field}: entry {i} is not finite"))),
        None => Ok(()),
    }
}

impl AssetMessage {
    /// The body this asset's frames pose, checked (see [`BodyAsset`]).
    pub fn body(&self) -> Result<BodyAsset, ProtocolError> {
        let positions =
            words::<3, f32>(&self.body_positions, "body_positions", f32::from_le_bytes)?;
        let triangles =
            words::<3, u32>(&self.body_triangles, "body_triangles", u32::from_le_bytes)?;
        let weights = words::<4, f32>(&self.body_weights, "body_weights", f32::from_le_bytes)?;
        let skeleton = words::<3, f32>(&self.skeleton, "skeleton", f32::from_le_bytes)?;
        if !self.body_joints.len().is_multiple_of(4) {
            return Err(bad("body_joints: not four joints per vertex"));
        }
        let joints: Vec<[u8; 4]> = self
            .body_joints
            .chunks_exact(4)
            .map(|j| [j[0], j[1], j[2], j[3]])
            .collect();
        finite(&positions, "body_positions")?;
        finite(&weights, "body_weights")?;
        finite(&skeleton, "skeleton")?;
        let n = positions.len();
        if joints.len() != n || weights.len() != n {
            return Err(bad(format!(
                "{n} body vertices but skin for {} and {}",
                joints.len(),
                weights.len()
            )));
        }
        if let Some(i) = triangles
            .iter()
            .position(|t| t.iter().any(|&v| v as usize >= n))
        {
            return Err(bad(format!("body triangle {i} names a vertex past {n}")));
        }
        if skeleton.len() != self.parents.len() || skeleton.is_empty() {
            return Err(bad(format!(
                "{} skeleton joints but {} parents",
                skeleton.len(),
                self.parents.len()
            )));
        }
        for (j, &p) in self.parents.iter().enumerate() {
            let ok = if j == 0 {
                p == -1
            } else {
                (0..j as i32).contains(&p)
            };
            if !ok {
                return Err(bad(format!(
                    "joint {j}'s parent {p} (the root's is -1, others an earlier joint)"
                )));
            }
        }
        if let Some(i) = joints
            .iter()
            .position(|j| j.iter().any(|&b| usize::from(b) >= skeleton.len()))
        {
            return Err(bad(format!(
                "body vertex {i}'s skin names a joint past {}",
                skeleton.len()
            )));
        }
        Ok(BodyAsset {
            positions,
            triangles,
            joints,
            weights,
            skeleton,
            parents: self.parents.clone(),
        })
    }
}

impl FrameMessage {
    /// The body pose of this frame for a skeleton of `joints` joints, checked: the
    /// right length, finite, rotations of unit length (within 1 %).
    pub fn body_pose(&self, joints: usize) -> Result<BodyPose, ProtocolError> {
        let want = 4 * (3 + 4 * joints);
        if self.pose.is_empty() {
            return Err(bad(
                "the frame carries no body pose (the subscription said `pose: false`; the codec frame's bones pose the body)",
            ));
        }
        if self.pose.len() != want {
            return Err(bad(format!(
                "pose of {} bytes for {joints} joints (want {want})",
                self.pose.len()
            )));
        }
        let f: Vec<f32> = self
            .pose
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        if let Some(i) = f.iter().position(|x| !x.is_finite()) {
            return Err(bad(format!("pose: number {i} is not finite")));
        }
        let rotations: Vec<[f32; 4]> = f[3..]
            .chunks_exact(4)
            .map(|q| [q[0], q[1], q[2], q[3]])
            .collect();
        if let Some(j) = rotations
            .iter()
            .position(|q| (q.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() > 0.02)
        {
            return Err(bad(format!(
                "pose: joint {j}'s rotation is not a unit quaternion"
            )));
        }
        Ok(BodyPose {
            translation: [f[0], f[1], f[2]],
            rotations,
        })
    }
}
