//! Importing a user's skinned humanoid (glTF) as a [`Body`]: its joints are mapped onto
//! the canonical skeleton by name through a skeleton profile (Mixamo, Unity/VRM, VRoid,
//! SMPL, or the caller's), the canonical skeleton is fitted to its proportions, its skin
//! weights are folded onto the 22 canonical bones (finger, twist and other extra joints
//! go to their nearest mapped ancestor), and its mesh is brought into the canonical
//! T-pose by inverting the skinning of its own rest pose (so A-pose avatars work), and
//! reduced to its closed body parts (see [`CloseReport`]).

use glam::{Mat3, Vec3};

use crate::mesh::{LoadedSkinnedMesh, MeshError, Topology};
use crate::mocap::{Profile, ProfileError, RetargetError, Retargeter, SourceSkeleton};
use crate::skeleton::JOINT_COUNT;

mod close;

use close::close_body;
pub use close::{CloseReport, MIN_VOLUME_SHARE, SEAM_TOLERANCE};

use super::body::Body;
use super::shape::BodyShape;
use super::skin::SkinWeights;

/// Why a humanoid could not be imported.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// No profile matches the joint names.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// The mapped skeleton is unusable.
    #[error(transparent)]
    Retarget(#[from] RetargetError),
    /// The mesh is not an oriented manifold, or has bad values.
    #[error("imported mesh: {0}")]
    Mesh(#[from] MeshError),
    /// No part of the mesh is a closed (or closable) oriented 2-manifold enclosing a
    /// volume.
    #[error(
        "no part of the avatar's mesh is an oriented 2-manifold enclosing a volume (is it a body? its parts: {0})"
    )]
    NoBody(String),
    /// A vertex's skinning cannot be inverted (its bones' blend is singular).
    #[error("vertex {0}: skinning transform is not invertible")]
    Singular(usize),
}

impl Body {
    /// Imports a skinned humanoid read by [`crate::mesh::read_gltf_skinned`]. The
    /// profile is detected from the joint names when `profile` is `None`; glTF is in
    /// metres, so the profile's unit scale is ignored. The mesh is reduced to its closed
    /// body parts (openings capped, eyes, hair cards and the like dropped: see
    /// [`CloseReport`]), and the report says what that changed.
    pub fn import_humanoid(
        loaded: &LoadedSkinnedMesh,
        profile: Option<&Profile>,
    ) -> Result<(Body, CloseReport), ImportError> {
        let mut profile = match profile {
            Some(p) => p.clone(),
            None => Profile::detect(&loaded.skin.names)?,
        };
        profile.scale = 1.0;
        let (rest_positions, rest_rotations) = loaded
            .skin
            .rest_world
            .iter()
            .map(|m| {
                let (_, r, t) = m.to_scale_rotation_translation();
                (t, r.normalize())
            })
            .unzip();
        let src = SourceSkeleton {
            names: loaded.skin.names.clone(),
            parents: loaded.skin.parents.clone(),
            rest_positions,
            rest_rotations,
            end_sites: vec![None; loaded.skin.names.len()],
        };
        let rt = Retargeter::new(&profile, &src)?;
        let skeleton = rt.fitted_skeleton().clone();
        // fold source joints onto canonical bones
        let map = rt.mapping();
        let canonical_of = |mut j: usize| -> u16 {
            for _ in 0..src.names.len() {
                if let Some(c) = map.iter().position(|m| *m == Some(j)) {
                    return c as u16;
                }
                match src.parents.get(j).copied().flatten() {
                    Some(p) => j = p,
                    None => break,
                }
            }
            0
        };
        let folded: Vec<u16> = (0..src.names.len()).map(canonical_of).collect();
        let n = loaded.mesh.vertex_count();
        let mut skin = SkinWeights {
            joints: Vec::with_capacity(n),
            weights: Vec::with_capacity(n),
        };
        for v in 0..n {
            let mut acc = [0f32; JOINT_COUNT];
            for k in 0..4 {
                let j = loaded.joints[v][k] as usize;
                acc[*folded.get(j).unwrap_or(&0) as usize] += loaded.weights[v][k];
            }
            let mut pairs: Vec<(u16, f32)> = acc
                .iter()
                .enumerate()
                .filter(|(_, w)| **w > 1e-4)
                .map(|(b, w)| (b as u16, *w))
                .collect();
            let (j, w) = SkinWeights::pack(&mut pairs);
            skin.joints.push(j);
            skin.weights.push(w);
        }
        // the canonical pose that reproduces the file's rest pose, then un-skin
        let root = map[0].map(|s| src.rest_positions[s]).unwrap_or(Vec3::ZERO);
        let rest_pose = rt.pose(&src.rest_rotations, root, &skeleton);
        let t = skeleton.skinning_transforms(&rest_pose);
        let mut positions = Vec::with_capacity(n);
        for (v, p) in loaded.mesh.positions.iter().enumerate() {
            let (mut m, mut o) = (Mat3::ZERO, Vec3::ZERO);
            for k in 0..4 {
                let w = skin.weights[v][k];
                if w > 0.0 {
                    let b = skin.joints[v][k] as usize;
                    m += Mat3::from_quat(t[b].rot) * w;
                    o += t[b].trans * w;
                }
            }
            if m.determinant().abs() < 1e-6 {
                return Err(ImportError::Singular(v));
            }
            positions.push(m.inverse() * (*p - o));
        }
        let raw = crate::mesh::TriMesh::new(positions, loaded.mesh.triangles.clone());
        raw.validate(0.0)?;
        let (mut mesh, skin, report) = close_body(&raw, &skin).ok_or_else(|| {
            ImportError::NoBody(format!(
                "{} triangles in {} connected parts",
                raw.triangles.len(),
                close::part_count(&raw)
            ))
        })?;
        mesh.validate(0.0)?;
        Topology::build(&mesh)?;
        // stand the body on y = 0 (the fitted skeleton's placement is arbitrary)
        let (lo, hi) = mesh.bounds().ok_or(MeshError::Empty)?;
        let shift = Vec3::new(0.0, -lo.y, 0.0);
        for p in &mut mesh.positions {
            *p += shift;
        }
        let skeleton = crate::skeleton::Skeleton::from_rest_positions(
            skeleton.rest_positions().map(|p| p + shift),
        );
        let shape = BodyShape {
            height: hi.y - lo.y,
            ..BodyShape::default()
        };
        Ok((
            Body {
                shape,
                skeleton,
                mesh,
                skin,
                field: None,
            },
            report,
        ))
    }
}

#[cfg(test)]
mod tests;
