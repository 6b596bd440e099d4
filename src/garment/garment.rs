//! `Garment`: a garment mesh bound to a body, with its skin weights and regions.

use glam::Vec3;

use crate::body::{Body, SkinWeights};
use crate::mesh::{
    Hit, MeshQuery, NearestVertex, RemeshOptions, Topology, TriMesh, VertexId, clip_mesh,
    polygonize, remesh,
};

use super::config::{GarmentConfig, GarmentError, RegionTable};
use super::pattern::pattern;

/// A garment in the body's rest pose (T-pose, metres, world frame), bound to that body.
///
/// Invariants: `mesh` is an oriented 2-manifold with boundary; `binding`, `skin` and the
/// region weights have one row per vertex; `skin` rows are copies of the bound body
/// vertex's weights (SOR §4).
#[derive(Clone, Debug)]
pub struct Garment {
    /// Garment name.
    pub name: String,
    /// Shape in the body's rest pose (T-pose): where the garment is bound and skinned
    /// from, and the starting state of a drape.
    pub mesh: TriMesh,
    /// The cloth's unstressed geometry (same topology): the sewn pattern, which for a
    /// T-shirt has its sleeves hanging `pattern_arm_angle` (55°) down (patterns are cut
    /// for relaxed arms), so a T-posed shirt is stretched under the arms and bunched on the
    /// shoulders, as a real one is. The simulator measures strain against it.
    pub metric: Vec<Vec3>,
    /// Nearest body vertex of each garment vertex at rest (SOR §4).
    pub binding: Vec<VertexId>,
    /// Skin weights copied from the bound body vertices.
    pub skin: SkinWeights,
    /// Bone regions (SOR §5).
    pub regions: RegionTable,
    /// Region weight ŵ_{g,y} (SOR §5), `vertex_count × regions.len()`, row-major: the
    /// sum of the bound body vertex's skin weights over the region's bones.
    pub region_weights: Vec<f32>,
}

/// Garment vertices may be at most this far from the body when binding (metres).
const MAX_BIND_DISTANCE: f32 = 0.25;

/// Smallest clearance from the body a generated garment keeps at rest (metres).
pub const REST_CLEARANCE: f32 = 0.006;

impl Garment {
    /// Generates a procedural garment for `body` from a configuration. The body must be
    /// the procedural one (its implicit surface is the pattern's base).
    pub fn generate(body: &Body, cfg: &GarmentConfig) -> Result<Garment, GarmentError> {
        cfg.check()?;
        let field = body.field().ok_or(GarmentError::NoBodyField)?;
        let regions = RegionTable::from_config(&cfg.regions)?;
        let pat = pattern(body, cfg, field);
        // polygonise at a spacing well below the target edge length
        let area_guess = (pat.hi - pat.lo).x * (pat.hi - pat.lo).y * 1.6;
        let edge = ((2.0 * area_guess) / (3f32.sqrt() * cfg.target_vertices as f32)).sqrt();
        let h = (edge / 2.2).clamp(0.003, 0.012);
        let dense = polygonize(&pat.shell, pat.lo, pat.hi, h);
        let cut = clip_mesh(&dense, &pat.clip);
        let mut mesh = remesh(
            &cut,
            &pat.shell,
            Some(&pat.clip),
            RemeshOptions::with_target(cfg.target_vertices),
        )?;
        push_out_of_body(&mut mesh, body, REST_CLEARANCE)?;
        let mut g = Self::bind(&cfg.name, mesh, body, regions)?;
        g.metric = g.pattern_metric(body, cfg.pattern_arm_angle);
        g.gather_waistband(body, cfg.waistband, cfg.waistband_height);
        Ok(g)
    }

    /// Shortens the unstressed circumference of the top `height` metres of the garment
    /// by `fraction` at the top edge, tapering linearly to nothing (an elastic
    /// waistband): the metric is pulled towards the body's vertical axis through the
    /// pelvis joint.
    fn gather_waistband(&mut self, body: &Body, fraction: f32, height: f32) {
        if fraction <= 0.0 || height <= 0.0 {
            return;
        }
        let top = self
            .mesh
            .positions
            .iter()
            .map(|p| p.y)
            .fold(f32::MIN, f32::max);
        let axis = body.skeleton.rest_positions()[crate::skeleton::JointId::PELVIS.index()];
        for (m, p) in self.metric.iter_mut().zip(&self.mesh.positions) {
            let depth = top - p.y;
            if depth < height {
                let f = 1.0 - fraction * (1.0 - depth / height);
                m.x = axis.x + (m.x - axis.x) * f;
                m.z = axis.z + (m.z - axis.z) * f;
            }
        }
    }

    /// The garment skinned to the pattern pose (arms lowered by `arm_angle_deg`
    /// degrees from the T-pose): its unstressed geometry.
    pub(super) fn pattern_metric(&self, body: &Body, arm_angle_deg: f32) -> Vec<Vec3> {
        if arm_angle_deg == 0.0 {
            return self.mesh.positions.clone();
        }
        let pose = crate::skeleton::Pose::arms_lowered(arm_angle_deg);
        let t = body.skeleton.skinning_transforms(&pose);
        let mut out = vec![Vec3::ZERO; self.mesh.vertex_count()];
        crate::body::lbs_into(
            &self.mesh.positions,
            &self.skin,
            &crate::body::LbsMatrices::new(&t),
            &mut out,
        );
        out
    }

    /// Binds any garment mesh (in the body's rest pose) to `body`: nearest body vertex per
    /// garment vertex, skin weights and region weights from it (SOR §4–5).
    pub fn bind(
        name: &str,
        mesh: TriMesh,
        body: &Body,
        regions: RegionTable,
    ) -> Result<Garment, GarmentError> {
        mesh.validate(0.0)?;
        Topology::build(&mesh)?;
        let index = NearestVertex::build(&body.mesh.positions)?;
        let n = mesh.vertex_count();
        let ng = regions.len();
        let mut binding = Vec::with_capacity(n);
        let mut skin = SkinWeights {
            joints: Vec::with_capacity(n),
            weights: Vec::with_capacity(n),
        };
        let mut region_weights = vec![0f32; n * ng];
        for (v, p) in mesh.positions.iter().enumerate() {
            let (b, d) = index.nearest(*p);
            if d > MAX_BIND_DISTANCE {
                return Err(GarmentError::FarFromBody {
                    vertex: v,
                    distance: d,
                    limit: MAX_BIND_DISTANCE,
                });
            }
            binding.push(b);
            let (j, w) = (body.skin.joints[b.index()], body.skin.weights[b.index()]);
            skin.joints.push(j);
            skin.weights.push(w);
            for k in 0..4 {
                let g = regions.bone_region[(j[k] as usize).min(21)] as usize;
                region_weights[v * ng + g] += w[k];
            }
        }
        let metric = mesh.positions.clone();
        Ok(Garment {
            name: name.to_string(),
            mesh,
            metric,
            binding,
            skin,
            regions,
            region_weights,
        })
    }

    /// Region weights of vertex `v` (one per region, summing to 1).
    pub fn region_weights_of(&self, v: usize) -> &[f32] {
        let ng = self.regions.len();
        &self.region_weights[v * ng..(v + 1) * ng]
    }

    /// Number of vertices.
    pub fn vertex_count(&self) -> usize {
        self.mesh.vertex_count()
    }
}

/// Moves any vertex closer to the body than `clearance` out along the body's normal
/// (for generated garments this happens only near openings, where body parts outside
/// the pattern's bones pass).
fn push_out_of_body(mesh: &mut TriMesh, body: &Body, clearance: f32) -> Result<(), GarmentError> {
    let q = MeshQuery::build(&body.mesh)?;
    let hits: Vec<Hit> = mesh
        .positions
        .iter()
        .map(|p| q.closest_signed(*p))
        .collect();
    push_out(&mut mesh.positions, &hits, clearance)
}

/// Moves each position closer than `clearance` to the body out along the body's normal
/// at its closest point `hits[i]` (found for the position as it is).
pub(super) fn push_out(
    positions: &mut [Vec3],
    hits: &[Hit],
    clearance: f32,
) -> Result<(), GarmentError> {
    for (p, hit) in positions.iter_mut().zip(hits) {
        if hit.signed_distance(*p) < clearance {
            *p = hit.point + hit.normal * clearance;
        }
    }
    if positions.iter().any(|p| !p.is_finite()) {
        return Err(GarmentError::Mesh(crate::mesh::MeshError::NonFinite(0)));
    }
    Ok(())
}

#[cfg(test)]
mod tests;

impl Garment {
    /// A [`crate::mesh::GlbMesh`] of the garment (skinned with the body's skeleton),
    /// borrowing `normals` (unit, one per vertex).
    pub fn glb_mesh<'a>(
        &'a self,
        normals: &'a [Vec3],
        color: [f32; 4],
    ) -> crate::mesh::GlbMesh<'a> {
        crate::mesh::GlbMesh {
            name: &self.name,
            positions: &self.mesh.positions,
            normals,
            triangles: &self.mesh.triangles,
            skin: Some((&self.skin.joints, &self.skin.weights)),
            material: crate::mesh::GlbMaterial {
                name: format!("{} cloth", self.name),
                base_color: color,
                roughness: 0.9,
                double_sided: true,
            },
        }
    }
}
