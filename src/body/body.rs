//! `Body`: the skinned procedural body (mesh + skeleton + skin weights).

use glam::Vec3;

use crate::mesh::{MeshQuery, RemeshOptions, Topology, TriMesh, polygonize, remesh};
use crate::skeleton::{JOINT_COUNT, Pose, Rigid, Skeleton};

use super::primitives::{BodyField, body_primitives};
use super::shape::{BodyError, BodyShape};
use super::skin::{SkinWeights, SkinningMethod, skin_into};

/// Resolution of the generated body.
#[derive(Copy, Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BodyOptions {
    /// Target vertex count (the result is within a few percent); 500–100 000.
    pub target_vertices: usize,
}

impl Default for BodyOptions {
    /// About 6 000 vertices: ~1.9 cm edges on an adult, fine enough for cloth contact
    /// at the garment's ~2 cm resolution.
    fn default() -> Self {
        Self {
            target_vertices: 6000,
        }
    }
}

/// A skinned human body in the T-pose (metres, +Y up, facing +Z, soles on y = 0).
///
/// Invariants: `mesh` is a closed, consistently outward-oriented 2-manifold; `skin`
/// has one row per vertex with at most four influences summing to 1; `skeleton` is the
/// canonical skeleton with this body's proportions.
#[derive(Clone, Debug)]
pub struct Body {
    /// The shape parameters that made this body.
    pub shape: BodyShape,
    /// Canonical skeleton scaled to this body.
    pub skeleton: Skeleton,
    /// Rest-pose (T-pose) surface.
    pub mesh: TriMesh,
    /// Skin weights of `mesh`'s vertices.
    pub skin: SkinWeights,
    /// The implicit surface the procedural body was made from (`None` for imported
    /// bodies); procedural garments are cut from offsets of it.
    pub(crate) field: Option<BodyField>,
}

impl Body {
    /// Generates the procedural body for a shape: smooth union of bone-attached
    /// primitives, polygonised by marching tetrahedra, remeshed to the target size,
    /// skinned from the primitives' distances and smoothed over the surface.
    pub fn generate(shape: &BodyShape, opts: &BodyOptions) -> Result<Body, BodyError> {
        shape.validate()?;
        if !(500..=100_000).contains(&opts.target_vertices) {
            return Err(BodyError::Resolution(opts.target_vertices));
        }
        let skeleton = Skeleton::from_proportions(&shape.proportions());
        let field = BodyField::new(body_primitives(&skeleton, shape));
        // grid spacing: a fraction of the target edge length, so thin parts (fingers,
        // wrists) are resolved before remeshing
        let area_estimate = 1.85 * (shape.height / 1.75).powi(2) * shape.girth();
        let edge = ((2.0 * area_estimate) / (3f32.sqrt() * opts.target_vertices as f32)).sqrt();
        let h = (edge / 2.5).clamp(0.003, 0.012);
        let (lo, hi) = field.bounds(2.0 * h);
        let dense = polygonize(&field, lo, hi, h);
        let mut mesh = remesh(
            &dense,
            &field,
            None,
            RemeshOptions::with_target(opts.target_vertices),
        )?;
        // make the measured height exact: scale about the origin (soles stay on y = 0)
        let (mlo, mhi) = mesh.bounds().ok_or(crate::mesh::MeshError::Empty)?;
        let s = shape.height / (mhi.y - mlo.y);
        for p in &mut mesh.positions {
            *p = Vec3::new(p.x * s, (p.y - mlo.y) * s, p.z * s);
        }
        let skeleton = Skeleton::from_rest_positions(
            skeleton
                .rest_positions()
                .map(|p| Vec3::new(p.x * s, (p.y - mlo.y) * s, p.z * s)),
        );
        let field = field.transformed(s, mlo.y);
        let sigma = 0.015 * shape.height / 1.75;
        let skin = weights_from_primitives(&mesh, &field, sigma)?;
        Ok(Body {
            shape: *shape,
            skeleton,
            mesh,
            skin,
            field: Some(field),
        })
    }

    /// The default body (default shape and resolution).
    pub fn default_body() -> Result<Body, BodyError> {
        Self::generate(&BodyShape::default(), &BodyOptions::default())
    }

    /// Vertex positions of the body in `pose` (world frame, metres).
    pub fn posed_positions(&self, pose: &Pose, method: SkinningMethod) -> Vec<Vec3> {
        let mut out = vec![Vec3::ZERO; self.mesh.positions.len()];
        self.pose_into(pose, method, &mut out);
        out
    }

    /// [`Body::posed_positions`] into a caller's buffer.
    pub fn pose_into(&self, pose: &Pose, method: SkinningMethod, out: &mut [Vec3]) {
        let t = self.skeleton.skinning_transforms(pose);
        skin_into(method, &self.mesh.positions, &self.skin, &t, out);
    }

    /// The body posed as a mesh.
    pub fn posed_mesh(&self, pose: &Pose, method: SkinningMethod) -> TriMesh {
        TriMesh::new(
            self.posed_positions(pose, method),
            self.mesh.triangles.clone(),
        )
    }

    /// The implicit surface of the procedural body (`None` for imported bodies).
    pub(crate) fn field(&self) -> Option<&BodyField> {
        self.field.as_ref()
    }

    /// A closest-point structure of the rest-pose body.
    pub fn rest_query(&self) -> Result<MeshQuery, BodyError> {
        Ok(MeshQuery::build(&self.mesh)?)
    }

    /// Skinning transforms (rest → posed) of every bone for `pose`.
    pub fn skinning_transforms(&self, pose: &Pose) -> [Rigid; JOINT_COUNT] {
        self.skeleton.skinning_transforms(pose)
    }
}

/// Skin weights: per vertex, each bone's distance is the smallest distance to the
/// primitives attached to it; weights fall off as exp(−(d_b − d_min)/σ) with σ = 1.5 cm
/// (scaled with the body), then are smoothed over the surface (3 sweeps of one-ring
/// averaging) so they vary smoothly across joints, and truncated to four influences.
fn weights_from_primitives(
    mesh: &TriMesh,
    field: &BodyField,
    sigma: f32,
) -> Result<SkinWeights, BodyError> {
    let nv = mesh.positions.len();
    let mut dense = vec![[0f32; JOINT_COUNT]; nv];
    for (v, p) in mesh.positions.iter().enumerate() {
        let q = *p;
        let mut per_bone = [f32::MAX; JOINT_COUNT];
        for prim in &field.prims {
            let d = prim.distance(q);
            let b = prim.bone.index();
            per_bone[b] = per_bone[b].min(d);
        }
        let dmin = per_bone.iter().copied().fold(f32::MAX, f32::min);
        for b in 0..JOINT_COUNT {
            if per_bone[b] < f32::MAX {
                dense[v][b] = (-(per_bone[b] - dmin) / sigma).exp();
            }
        }
    }
    let topo = Topology::build(mesh)?;
    for _ in 0..3 {
        let prev = dense.clone();
        for v in 0..nv {
            let nb = topo.neighbors(v as u32);
            let mut acc = prev[v];
            for &n in nb {
                for b in 0..JOINT_COUNT {
                    acc[b] += prev[n as usize][b];
                }
            }
            let k = 1.0 / (nb.len() + 1) as f32;
            dense[v] = acc.map(|x| x * k);
        }
    }
    let mut skin = SkinWeights {
        joints: Vec::with_capacity(nv),
        weights: Vec::with_capacity(nv),
    };
    let mut pairs = Vec::with_capacity(JOINT_COUNT);
    for row in &dense {
        let total: f32 = row.iter().sum();
        pairs.clear();
        pairs.extend(
            row.iter()
                .enumerate()
                .filter(|(_, w)| **w > 0.01 * total)
                .map(|(b, w)| (b as u16, *w)),
        );
        let (j, w) = SkinWeights::pack(&mut pairs);
        skin.joints.push(j);
        skin.weights.push(w);
    }
    Ok(skin)
}

#[cfg(test)]
mod tests;
