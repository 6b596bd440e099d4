//! The inner garment tucked in under the outer one, bound to it at rest (see the
//! module docs of [`super`]).

use glam::Vec3;

use super::{LayerError, LayerParams, LayerScratch, zone_normals};
use crate::mesh::{Feature, MeshQuery, Topology, TriMesh};
use crate::sor::db::Database;

/// An inner vertex tucked in under the outer garment: the point of the outer garment
/// it is bound to, how far under it it is kept, and how much of the way it goes.
#[derive(Clone, Copy, Debug)]
struct Bound {
    vertex: u32,
    /// The outer triangle's corners and the point's barycentric coordinates in it.
    corners: [u32; 3],
    bary: [f32; 3],
    /// 1 over the outer garment's faces, falling to 0 over the reach beyond its edge.
    weight: f32,
    /// Where the vertex was at rest from the point, metres, in the outer surface's
    /// frame there ([`surface_frame`]: along its two tangents and its normal).
    offset: Vec3,
}

/// The point of a garment (at `at`, with unit vertex `normals`) at `bary` in the
/// triangle `corners`, and the surface's frame there: a tangent along the triangle's
/// first side, the tangent across it, and the (interpolated) normal.
#[inline]
fn surface_frame(
    at: &[Vec3],
    normals: &[Vec3],
    corners: [u32; 3],
    bary: [f32; 3],
) -> (Vec3, [Vec3; 3]) {
    let [c0, c1, c2] = corners.map(|c| c as usize);
    let [w0, w1, w2] = bary;
    let point = at[c0] * w0 + at[c1] * w1 + at[c2] * w2;
    let n = (normals[c0] * w0 + normals[c1] * w1 + normals[c2] * w2).normalize_or_zero();
    let side = at[c1] - at[c0];
    let along = (side - n * side.dot(n)).normalize_or_zero();
    (point, [along, n.cross(along), n])
}

/// The inner garment tucked in under the outer one (see the module docs).
#[derive(Clone, Debug)]
pub(super) struct Tuck {
    bound: Vec<Bound>,
    /// The outer garment's triangles around the bound points' corners, and those
    /// corners: the only normals `apply` needs.
    zone: Vec<[u32; 3]>,
    corners: Vec<u32>,
    outer_vertices: usize,
    inner_vertices: usize,
    clearance: f32,
}

impl Tuck {
    /// Inner vertices tucked in each frame.
    pub(super) fn len(&self) -> usize {
        self.bound.len()
    }

    /// Binds the inner vertices over `outer` (its rest shape `outer_rest`) at rest.
    pub(super) fn new(
        inner_rest: &[Vec3],
        outer: &Database,
        outer_rest: &[Vec3],
        params: &LayerParams,
    ) -> Result<Self, LayerError> {
        let triangles = &outer.garment.triangles;
        let mesh = TriMesh::new(outer_rest.to_vec(), triangles.clone());
        let edge = Topology::build(&mesh)?.boundary_vertices(mesh.vertex_count());
        let query = MeshQuery::build(&mesh)?;
        let rest_normals = mesh.vertex_normals();
        let mut bound = Vec::new();
        for (v, &p) in inner_rest.iter().enumerate() {
            let Some(hit) = query.closest_within(p, 4.0 * params.reach) else {
                continue;
            };
            let corners = triangles[hit.triangle as usize];
            // beyond the edge: the closest point on a side or corner of the outer
            // garment's boundary (a side whose two ends are on it)
            let beyond = match hit.feature {
                Feature::Face => false,
                Feature::Edge(k) => {
                    edge[corners[k as usize] as usize]
                        && edge[corners[(k as usize + 1) % 3] as usize]
                }
                Feature::Vertex(k) => edge[corners[k as usize] as usize],
            };
            let weight = if beyond {
                // how far past the edge along the outer surface: the offset across
                // its face's normal
                let [a, b, c] = corners.map(|i| outer_rest[i as usize]);
                let n = (b - a).cross(c - a).normalize_or_zero();
                let d = p - hit.point;
                let past = (d - n * d.dot(n)).length();
                1.0 - smoothstep(past / params.reach)
            } else {
                1.0
            };
            if weight <= 0.0 {
                continue;
            }
            let bary = hit.bary.to_array();
            let (point, axes) = surface_frame(outer_rest, &rest_normals, corners, bary);
            let d = p - point;
            bound.push(Bound {
                vertex: v as u32,
                corners,
                bary,
                weight,
                offset: Vec3::from(axes.map(|a| a.dot(d))),
            });
        }
        let mut corners: Vec<u32> = bound.iter().flat_map(|b| b.corners).collect();
        corners.sort_unstable();
        corners.dedup();
        let mut is_corner = vec![false; outer_rest.len()];
        corners.iter().for_each(|&c| is_corner[c as usize] = true);
        let zone = triangles
            .iter()
            .filter(|t| t.iter().any(|&v| is_corner[v as usize]))
            .copied()
            .collect();
        Ok(Self {
            bound,
            zone,
            corners,
            outer_vertices: outer_rest.len(),
            inner_vertices: inner_rest.len(),
            clearance: params.clearance,
        })
    }

    /// Puts each bound inner vertex under this frame's outer garment; returns how many.
    #[track_caller]
    pub(super) fn apply(
        &self,
        inner: &mut [Vec3],
        outer: &[Vec3],
        scratch: &mut LayerScratch,
    ) -> usize {
        assert_eq!(inner.len(), self.inner_vertices, "inner vertex count");
        assert_eq!(outer.len(), self.outer_vertices, "outer vertex count");
        // area-weighted unit normals of the outer garment at the bound points' corners
        zone_normals(
            outer,
            self.zone.iter().copied(),
            &self.corners,
            &mut scratch.normals,
        );
        let normals = &scratch.normals;
        for b in &self.bound {
            let (point, [t1, t2, n]) = surface_frame(outer, normals, b.corners, b.bary);
            let under = point - n * self.clearance;
            // past the outer garment's edge, towards where the vertex was at rest
            // relative to the point, carried by the outer surface, then under it
            let held = if b.weight < 1.0 {
                let carried = point + t1 * b.offset.x + t2 * b.offset.y + n * b.offset.z;
                carried + (under - carried) * b.weight
            } else {
                under
            };
            let o = &mut inner[b.vertex as usize];
            *o += (held - *o) * b.weight;
        }
        self.bound.len()
    }
}

/// 3t² − 2t³ on [0, 1], 0 below and 1 above.
#[inline]
fn smoothstep(t: f32) -> f32 {
    let t = t.clamp(0.0, 1.0);
    t * t * (3.0 - 2.0 * t)
}
