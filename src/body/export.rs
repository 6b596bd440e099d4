//! Conversion of the body and its skeleton into glTF export structures.

use glam::{Mat4, Quat, Vec3};

use crate::mesh::{GlbAnimation, GlbMaterial, GlbMesh, GlbSkeleton};
use crate::skeleton::{JointId, Pose, Skeleton};

use super::body::Body;

/// The canonical skeleton as a glTF joint hierarchy: node `i` is joint `i`, rest
/// translations are the parent-relative offsets (T-pose, identity rotations), inverse
/// bind matrices translate by minus the rest world position.
pub fn glb_skeleton(skel: &Skeleton) -> GlbSkeleton<'static> {
    GlbSkeleton {
        names: JointId::all().map(|j| j.name()).collect(),
        parents: JointId::all()
            .map(|j| j.parent().map(|p| p.index()))
            .collect(),
        rest_translation: JointId::all().map(|j| skel.offset(j)).collect(),
        rest_rotation: vec![Quat::IDENTITY; 22],
        inverse_bind: JointId::all()
            .map(|j| Mat4::from_translation(-skel.rest_position(j)))
            .collect(),
    }
}

/// Owned vertex data of a mesh ready for [`GlbMesh`].
pub struct ExportMesh {
    /// Positions, metres.
    pub positions: Vec<Vec3>,
    /// Unit normals.
    pub normals: Vec<Vec3>,
}

impl Body {
    /// The body's rest mesh with unit normals, for export.
    pub fn export_mesh(&self) -> ExportMesh {
        ExportMesh {
            positions: self.mesh.positions.clone(),
            normals: self.mesh.vertex_normals(),
        }
    }

    /// A [`GlbMesh`] of the body borrowing `data` (from [`Body::export_mesh`]).
    pub fn glb_mesh<'a>(&'a self, data: &'a ExportMesh) -> GlbMesh<'a> {
        GlbMesh {
            name: "body",
            positions: &data.positions,
            normals: &data.normals,
            triangles: &self.mesh.triangles,
            skin: Some((&self.skin.joints, &self.skin.weights)),
            material: skin_material(),
        }
    }
}

/// The body's appearance in exported files.
pub fn skin_material() -> GlbMaterial {
    GlbMaterial {
        name: "skin".into(),
        base_color: [0.80, 0.62, 0.52, 1.0],
        roughness: 0.7,
        double_sided: false,
    }
}

/// Per-frame joint rotations and root translations of a pose sequence, for
/// [`GlbAnimation`].
pub struct ExportAnimation {
    /// Key times, seconds.
    pub times: Vec<f32>,
    /// `rotations[frame][joint]`.
    pub rotations: Vec<Vec<Quat>>,
    /// Root joint translation per frame (rest offset + pose translation).
    pub root: Vec<Vec3>,
}

impl ExportAnimation {
    /// From poses sampled every `frame_time` seconds on `skel`.
    pub fn new(poses: &[Pose], frame_time: f32, skel: &Skeleton) -> Self {
        let times = (0..poses.len()).map(|i| i as f32 * frame_time).collect();
        Self::keyed(times, poses, skel)
    }

    /// From poses keyed at `times` (seconds, strictly increasing, one per pose) on
    /// `skel`.
    pub fn keyed(times: Vec<f32>, poses: &[Pose], skel: &Skeleton) -> Self {
        let pelvis = skel.rest_position(JointId::PELVIS);
        ExportAnimation {
            times,
            rotations: poses.iter().map(|p| p.rotations.to_vec()).collect(),
            root: poses.iter().map(|p| pelvis + p.translation).collect(),
        }
    }

    /// Borrowed view for the writer.
    pub fn glb<'a>(&'a self, name: &'a str) -> GlbAnimation<'a> {
        GlbAnimation {
            name,
            times: &self.times,
            rotations: &self.rotations,
            root_translation: &self.root,
        }
    }
}
