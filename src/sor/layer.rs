//! Garments worn over one another (an outfit: pants, and a T-shirt over them).
//!
//! Each garment is synthesised on its own, against the body (SOR §5), so where two
//! overlap (a shirt's hem over the pants' hips) nothing keeps the outer one outside the
//! inner: both lie a couple of centimetres from the skin and cut through each other.
//! A [`Layering`] resolves that each frame the way SOR resolves the body: it is SOR's
//! penetration re-projection (Eq. 11–13) with the inner garment, as synthesised this
//! frame, in the body's place. Every outer vertex that lies over the inner garment is
//! pushed out along the inner surface's normal until it is at least
//! [`LayerParams::clearance`] outside it; the inner garment does not move.
//!
//! Where each outer vertex lies over the inner garment is found afresh each frame,
//! since the two slide over each other as the body moves (a stride swings the thigh
//! under the hem): the nearest inner vertex, by a walk over the inner mesh's edges
//! from where the same avatar's walk ended last frame (at first, from the vertex
//! nearest at rest), then the point of the triangles around it under the outer vertex
//! along its normal, and the normal there. Pushing the outer vertices out of the inner
//! surface does not keep a fold of the inner garment that rises between them from
//! showing through the outer triangles, so a second pass looks from the inner side:
//! each inner vertex finds the outer triangle above it (along its normal, around its
//! nearest outer vertex) and, where that triangle is less than the clearance above
//! it, lifts the triangle's corners by just enough, shared by their barycentric
//! weights.
//!
//! Only the outer vertices within twice [`LayerParams::reach`] of the inner garment at
//! rest take part (the hem and hips of a shirt over pants), and the inner vertices
//! within four times (the pants' hips, and the thighs that come up under the hem when
//! the wearer sits). The pushes fade out over an edge's length beyond the other
//! garment's edge, where nothing is under or over the vertex, and for vertices more
//! than the reach through it, where the walk found the wrong side; so a vertex's push
//! never jumps from one frame to the next. Both garments must have been baked for the
//! same body, so that their canonical frames and rest shapes agree.
//!
//! That is right where the outer garment is the looser (a T-shirt's hem over pants, a
//! jacket over a shirt). Pants worn over a shirt mean the shirt is tucked in, and then
//! the loose garment is the inner one: pushing the pants' waist out over the shirt's
//! hem, which hangs up to 9 cm in front of them, bulges the waist and leaves the shirt
//! showing through. So the garment with more room between it and the body where the
//! two overlap gives way ([`GivesWay`]); where that is the inner garment, it is tucked
//! in: every inner vertex that lies over the outer garment at rest (its closest point
//! on a face, not beyond the outer garment's edge) is bound to that point of the outer
//! garment, and each frame is put at the clearance under it, as a waistband holds a
//! tucked shirt to the pants. (Where the outer garment fits closer to the body than
//! the clearance, that puts the inner one into the body, unseen under the outer; a
//! smaller gap there left the two garments on top of each other, showing through in
//! specks, and the garment codec moves each by up to a millimetre.) Inner vertices beyond the outer
//! garment's edge (a shirt above the waist) are bound to the edge's nearest point too
//! and blend from there back to their own synthesis over the reach: near the edge
//! towards where they were at rest relative to that point, carried by the outer
//! surface's frame, so the shirt bellies over the waistband into the pants as it did
//! at rest rather than cutting across the body when it rides up. What is tucked in
//! is hidden under the outer garment, and follows it without a search: the tuck costs
//! a surface frame and a weighted sum per bound vertex.

use glam::Vec3;

use crate::mesh::{Feature, MeshError, MeshQuery, NearestVertex, Topology, TriMesh};

use super::db::{Database, body_hash};

/// How garments worn over one another are kept apart. Ours, not a paper's.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LayerParams {
    /// Least distance, metres, of an outer garment's vertex outside the inner garment's
    /// surface (4 mm: the garment codec moves each layer by up to 1 mm, and what is
    /// left keeps the two apart on screen).
    pub clearance: f32,
    /// How near at rest, metres, the garments' vertices must be to take part: outer
    /// vertices within twice this of the inner garment, inner ones within four times of
    /// the outer (3 cm: the garments' ease is 2 cm each); and a vertex more than this
    /// through the other garment is pushed less, and not at all past 1.5 times it.
    pub reach: f32,
    /// Which garment moves where the two overlap.
    pub gives_way: GivesWay,
}

impl Default for LayerParams {
    fn default() -> Self {
        Self {
            clearance: 0.004,
            reach: 0.03,
            gives_way: GivesWay::Looser,
        }
    }
}

/// Which garment of two worn one over the other moves where they overlap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GivesWay {
    /// The one with more room between it and the body where the two come within twice
    /// the reach of each other at rest (each garment's mean distance from the body's
    /// nearest vertex there): a loose shirt over pants is pushed out over them, the same
    /// shirt with the pants listed over it is tucked in under their waist, a jacket over
    /// a shirt is pushed out over it.
    #[default]
    Looser,
    /// The outer garment, pushed out over the inner one.
    Outer,
    /// The inner garment, tucked in under the outer one.
    Inner,
}

/// Why two garments cannot be layered.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum LayerError {
    /// The garments were baked for different bodies.
    #[error("garments {inner:?} and {outer:?} were baked for different bodies")]
    DifferentBodies {
        /// The inner garment's name.
        inner: String,
        /// The outer garment's name.
        outer: String,
    },
    /// A parameter out of range.
    #[error("layer parameter {0} out of range")]
    BadParameter(&'static str),
    /// The inner garment's mesh is unusable.
    #[error(transparent)]
    Mesh(#[from] MeshError),
}

/// A vertex of one garment that may come near the other, and the other's vertex
/// nearest to it at rest (where its first walk starts).
#[derive(Clone, Copy, Debug)]
struct Candidate {
    vertex: u32,
    start: u32,
}

/// A garment's mesh as a layering walks it: triangles, edges, and the triangles around
/// each vertex.
#[derive(Clone, Debug)]
struct Surface {
    mesh: TriMesh,
    topology: Topology,
    /// Triangles around each vertex (CSR: `around[around_start[v]..around_start[v + 1]]`).
    around: Vec<u32>,
    around_start: Vec<u32>,
    /// Mean edge length at rest, metres.
    edge: f32,
}

impl Surface {
    fn new(positions: &[Vec3], triangles: &[[u32; 3]]) -> Result<Self, MeshError> {
        let mesh = TriMesh::new(positions.to_vec(), triangles.to_vec());
        let topology = Topology::build(&mesh)?;
        let mut around_start = vec![0u32; mesh.vertex_count() + 1];
        for t in &mesh.triangles {
            for &v in t {
                around_start[v as usize + 1] += 1;
            }
        }
        for v in 0..mesh.vertex_count() {
            around_start[v + 1] += around_start[v];
        }
        let mut fill = around_start.clone();
        let mut around = vec![0u32; 3 * mesh.triangles.len()];
        for (t, tri) in mesh.triangles.iter().enumerate() {
            for &v in tri {
                around[fill[v as usize] as usize] = t as u32;
                fill[v as usize] += 1;
            }
        }
        Ok(Self {
            edge: mesh.mean_edge_length(),
            mesh,
            topology,
            around,
            around_start,
        })
    }

    /// The vertex of this garment (at `at`) nearest to `p`, walking from `start` to
    /// ever nearer neighbours.
    #[inline]
    fn nearest_from(&self, at: &[Vec3], start: u32, p: Vec3) -> usize {
        let mut v = start;
        let mut best = (at[v as usize] - p).length_squared();
        for _ in 0..MAX_STEPS {
            let mut next = v;
            for &u in self.topology.neighbors(v) {
                let d = (at[u as usize] - p).length_squared();
                if d < best {
                    best = d;
                    next = u;
                }
            }
            if next == v {
                break;
            }
            v = next;
        }
        v as usize
    }

    /// The triangles touching `near`'s vertices or their two rings, and those
    /// triangles' vertices (sorted).
    fn zone(&self, near: &[Candidate]) -> (Vec<u32>, Vec<u32>) {
        let n = self.mesh.vertex_count();
        let mut inside = vec![false; n];
        near.iter().for_each(|c| inside[c.vertex as usize] = true);
        for _ in 0..2 {
            let ring: Vec<u32> = (0..n as u32)
                .filter(|&v| inside[v as usize])
                .flat_map(|v| self.topology.neighbors(v).iter().copied())
                .collect();
            ring.iter().for_each(|&v| inside[v as usize] = true);
        }
        let triangles: Vec<u32> = (0..self.mesh.triangles.len() as u32)
            .filter(|&t| {
                self.mesh.triangles[t as usize]
                    .iter()
                    .any(|&v| inside[v as usize])
            })
            .collect();
        let mut vertices: Vec<u32> = triangles
            .iter()
            .flat_map(|&t| self.mesh.triangles[t as usize])
            .collect();
        vertices.sort_unstable();
        vertices.dedup();
        (triangles, vertices)
    }

    /// The vertices within twice `reach` of `other` (its rest shape), each with the
    /// vertex of `other` nearest to it.
    fn near(&self, other: &[Vec3], reach: f32) -> Result<Vec<Candidate>, MeshError> {
        let nearest = NearestVertex::build(other)?;
        Ok(self
            .mesh
            .positions
            .iter()
            .enumerate()
            .filter_map(|(v, &p)| {
                let (o, d) = nearest.nearest(p);
                (d <= 2.0 * reach).then_some(Candidate {
                    vertex: v as u32,
                    start: o.index() as u32,
                })
            })
            .collect())
    }
}

/// Keeps one garment outside another (see the module docs). Built once per pair of
/// garments; [`Layering::apply`] allocates nothing once its state is made.
#[derive(Clone, Debug)]
pub struct Layering {
    kind: Kind,
}

/// How a [`Layering`] keeps its garments apart.
#[derive(Clone, Debug)]
enum Kind {
    /// The outer garment pushed out over the inner one.
    Push(Box<Push>),
    /// The inner garment tucked in under the outer one.
    Tuck(Tuck),
}

/// The outer garment pushed out over the inner one (SOR Eq. 11–13 with the inner
/// garment as the body).
#[derive(Clone, Debug)]
struct Push {
    inner: Surface,
    outer: Surface,
    /// Outer vertices that may come over the inner garment, and inner vertices that
    /// may come under the outer one.
    outer_near: Vec<Candidate>,
    inner_near: Vec<Candidate>,
    /// The inner garment's triangles near the outer one (its candidates' and two rings
    /// around them) and their vertices: the only normals `apply` needs.
    zone_triangles: Vec<u32>,
    zone_vertices: Vec<u32>,
    clearance: f32,
    reach: f32,
}

/// One avatar's state of a [`Layering`]: where each walk ended last frame (so that
/// this frame's takes a step or two).
#[derive(Clone, Debug, Default)]
pub struct LayerState {
    /// Per outer candidate, its nearest inner vertex; per inner candidate, its nearest
    /// outer vertex.
    outer_near: Vec<u32>,
    inner_near: Vec<u32>,
}

/// Per-thread working memory of [`Layering::apply`].
#[derive(Clone, Debug, Default)]
pub struct LayerScratch {
    normals: Vec<Vec3>,
}

/// The draped shape of the example nearest the rest pose (every bake includes the rest
/// pose), else the garment's rest shape.
fn rest_shape(db: &Database) -> &[Vec3] {
    db.examples
        .iter()
        .map(|e| {
            let th = crate::skeleton::theta(&crate::skeleton::Pose::rest(), &e.pose);
            (th.iter().map(|t| t * t).sum::<f32>(), &e.positions)
        })
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map_or(&db.garment.rest, |(_, p)| p)
}

/// Steps a nearest-vertex walk may take (a walk stops earlier, where no neighbour is
/// nearer: from last frame's vertex, a step or two).
const MAX_STEPS: usize = 64;

/// How much of a push applies to a vertex `along` metres along the other garment's
/// surface from the vertex it is nearest to (`edge`: that garment's mean edge) and
/// `depth` metres through it: all of it over the surface, fading to none an edge beyond
/// its boundary and from the reach to 1.5 × the reach through it.
#[inline]
fn fade(along: f32, edge: f32, depth: f32, reach: f32) -> f32 {
    ((edge - along) / (0.5 * edge)).clamp(0.0, 1.0)
        * ((1.5 * reach - depth) / (0.5 * reach)).clamp(0.0, 1.0)
}

impl Layering {
    /// The vertices of `outer` and `inner` that may come near each other, and which of
    /// the two gives way (see the module docs).
    pub fn new(
        inner: &Database,
        outer: &Database,
        params: &LayerParams,
    ) -> Result<Self, LayerError> {
        if body_hash(&inner.body) != body_hash(&outer.body) {
            return Err(LayerError::DifferentBodies {
                inner: inner.garment.name.clone(),
                outer: outer.garment.name.clone(),
            });
        }
        if !(params.clearance.is_finite() && (0.0..=0.05).contains(&params.clearance)) {
            return Err(LayerError::BadParameter("clearance (0 to 0.05 m)"));
        }
        if !(params.reach.is_finite() && (0.0..=0.2).contains(&params.reach)) {
            return Err(LayerError::BadParameter("reach (0 to 0.2 m)"));
        }
        let (inner_rest, outer_rest) = (rest_shape(inner), rest_shape(outer));
        let tuck = match params.gives_way {
            GivesWay::Outer => false,
            GivesWay::Inner => true,
            GivesWay::Looser => {
                let body = NearestVertex::build(&inner.body.positions)?;
                let within = 2.0 * params.reach;
                ease(&body, inner_rest, outer_rest, within)?
                    > ease(&body, outer_rest, inner_rest, within)?
            }
        };
        let kind = if tuck {
            Kind::Tuck(Tuck::new(inner_rest, outer, outer_rest, params)?)
        } else {
            Kind::Push(Box::new(Push::new(
                inner, inner_rest, outer, outer_rest, params,
            )?))
        };
        Ok(Self { kind })
    }

    /// Number of vertices of the garment that gives way examined each frame (0: the two
    /// garments never come near each other, and [`Layering::apply`] does nothing).
    pub fn len(&self) -> usize {
        match &self.kind {
            Kind::Push(p) => p.outer_near.len(),
            Kind::Tuck(t) => t.bound.len(),
        }
    }

    /// Whether no vertex of the garment that gives way comes near the other.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the inner garment gives way, tucked in under the outer one, rather than
    /// the outer pushed out over it.
    pub fn tucks(&self) -> bool {
        matches!(self.kind, Kind::Tuck(_))
    }

    /// Keeps this frame's syntheses of the two garments (`inner`, `outer`: canonical
    /// frame, metres) one inside the other by moving the one that gives way: the outer
    /// pushed out to at least the clearance outside the inner, or the inner tucked in
    /// under the outer (see the module docs). `state` is the avatar's (a fresh one for
    /// a fresh avatar). Returns how many moves it made (outer vertices pushed and outer
    /// triangles lifted, or inner vertices tucked in): 0 when nothing moved.
    ///
    /// # Panics
    /// If the slices do not have the garments' vertex counts (a programming error).
    #[track_caller]
    pub fn apply(
        &self,
        inner: &mut [Vec3],
        outer: &mut [Vec3],
        state: &mut LayerState,
        scratch: &mut LayerScratch,
    ) -> usize {
        match &self.kind {
            Kind::Push(p) => p.apply(inner, outer, state, scratch),
            Kind::Tuck(t) => t.apply(inner, outer, scratch),
        }
    }
}

/// Mean distance, metres, from the body (its nearest vertex, `body`) of the vertices
/// of `rest` within `within` of `other` (another garment at rest): how much room the
/// garment has where the two overlap; 0 where none is that near.
fn ease(
    body: &NearestVertex,
    rest: &[Vec3],
    other: &[Vec3],
    within: f32,
) -> Result<f32, MeshError> {
    let other = NearestVertex::build(other)?;
    let (sum, count) = rest
        .iter()
        .filter(|&&p| other.nearest(p).1 <= within)
        .fold((0.0f64, 0usize), |(s, n), &p| {
            (s + f64::from(body.nearest(p).1), n + 1)
        });
    Ok(if count == 0 {
        0.0
    } else {
        (sum / count as f64) as f32
    })
}

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
struct Tuck {
    bound: Vec<Bound>,
    /// The outer garment's triangles around the bound points' corners, and those
    /// corners: the only normals `apply` needs.
    zone_triangles: Vec<u32>,
    corners: Vec<u32>,
    outer_triangles: Vec<[u32; 3]>,
    outer_vertices: usize,
    inner_vertices: usize,
    clearance: f32,
}

impl Tuck {
    fn new(
        inner_rest: &[Vec3],
        outer: &Database,
        outer_rest: &[Vec3],
        params: &LayerParams,
    ) -> Result<Self, LayerError> {
        let triangles = &outer.garment.triangles;
        let mesh = TriMesh::new(outer_rest.to_vec(), triangles.clone());
        let edge = Topology::build(&mesh)?.boundary_vertices(mesh.vertex_count());
        let query = MeshQuery::build(&mesh)?;
        let mut rest_normals = vec![Vec3::ZERO; outer_rest.len()];
        for t in triangles {
            let [a, b, c] = t.map(|i| i as usize);
            let face = (outer_rest[b] - outer_rest[a]).cross(outer_rest[c] - outer_rest[a]);
            rest_normals[a] += face;
            rest_normals[b] += face;
            rest_normals[c] += face;
        }
        rest_normals
            .iter_mut()
            .for_each(|n| *n = n.normalize_or_zero());
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
        let zone_triangles = (0..triangles.len() as u32)
            .filter(|&t| triangles[t as usize].iter().any(|&v| is_corner[v as usize]))
            .collect();
        Ok(Self {
            bound,
            zone_triangles,
            corners,
            outer_triangles: triangles.clone(),
            outer_vertices: outer_rest.len(),
            inner_vertices: inner_rest.len(),
            clearance: params.clearance,
        })
    }

    #[track_caller]
    fn apply(&self, inner: &mut [Vec3], outer: &[Vec3], scratch: &mut LayerScratch) -> usize {
        assert_eq!(inner.len(), self.inner_vertices, "inner vertex count");
        assert_eq!(outer.len(), self.outer_vertices, "outer vertex count");
        // area-weighted unit normals of the outer garment at the bound points' corners
        let normals = &mut scratch.normals;
        normals.clear();
        normals.resize(outer.len(), Vec3::ZERO);
        for &t in &self.zone_triangles {
            let [a, b, c] = self.outer_triangles[t as usize].map(|i| i as usize);
            let face = (outer[b] - outer[a]).cross(outer[c] - outer[a]);
            normals[a] += face;
            normals[b] += face;
            normals[c] += face;
        }
        for &v in &self.corners {
            normals[v as usize] = normals[v as usize].normalize_or_zero();
        }
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

impl Push {
    fn new(
        inner: &Database,
        inner_rest: &[Vec3],
        outer: &Database,
        outer_rest: &[Vec3],
        params: &LayerParams,
    ) -> Result<Self, LayerError> {
        let inner = Surface::new(inner_rest, &inner.garment.triangles)?;
        let outer = Surface::new(outer_rest, &outer.garment.triangles)?;
        let inner_near = inner.near(outer_rest, 2.0 * params.reach)?;
        let (zone_triangles, zone_vertices) = inner.zone(&inner_near);
        Ok(Self {
            outer_near: outer.near(inner_rest, params.reach)?,
            inner_near,
            zone_triangles,
            zone_vertices,
            inner,
            outer,
            clearance: params.clearance,
            reach: params.reach,
        })
    }

    /// Moves the vertices of `outer` out over `inner`, to at least the clearance
    /// outside it; see [`Layering::apply`].
    #[track_caller]
    fn apply(
        &self,
        inner: &[Vec3],
        outer: &mut [Vec3],
        state: &mut LayerState,
        scratch: &mut LayerScratch,
    ) -> usize {
        assert_eq!(
            inner.len(),
            self.inner.mesh.vertex_count(),
            "inner vertex count"
        );
        assert_eq!(
            outer.len(),
            self.outer.mesh.vertex_count(),
            "outer vertex count"
        );
        if self.outer_near.is_empty() {
            return 0;
        }
        for (last, near) in [
            (&mut state.outer_near, &self.outer_near),
            (&mut state.inner_near, &self.inner_near),
        ] {
            if last.len() != near.len() {
                last.clear();
                last.extend(near.iter().map(|c| c.start));
            }
        }
        // area-weighted unit normals of the inner garment near the outer one; zero
        // elsewhere (a walk that strays there pushes nothing)
        let normals = &mut scratch.normals;
        normals.clear();
        normals.resize(inner.len(), Vec3::ZERO);
        for &t in &self.zone_triangles {
            let [a, b, c] = self.inner.mesh.triangles[t as usize].map(|i| i as usize);
            let face = (inner[b] - inner[a]).cross(inner[c] - inner[a]);
            normals[a] += face;
            normals[b] += face;
            normals[c] += face;
        }
        for &v in &self.zone_vertices {
            normals[v as usize] = normals[v as usize].normalize_or_zero();
        }
        let mut moved = 0;
        // outer vertices out of the inner surface
        for (c, last) in self.outer_near.iter().zip(state.outer_near.iter_mut()) {
            let o = &mut outer[c.vertex as usize];
            let v = self.inner.nearest_from(inner, *last, *o);
            *last = v as u32;
            // the plane through the nearest vertex is within half an edge of the
            // surface around it: a vertex farther outside than that is clear
            if (*o - inner[v]).dot(normals[v]) >= self.clearance + 0.5 * self.inner.edge {
                continue;
            }
            // the point of the triangles around v under o (along v's normal), and the
            // normal there; beyond the garment's edge, v's own
            let (q, n) = match self.inner.above(inner, v, *o, normals[v]) {
                Some((c, b)) => (
                    inner[c[0]] * b[0] + inner[c[1]] * b[1] + inner[c[2]] * b[2],
                    (normals[c[0]] * b[0] + normals[c[1]] * b[1] + normals[c[2]] * b[2])
                        .normalize_or_zero(),
                ),
                None => (inner[v], normals[v]),
            };
            // SOR Eq. 13 with the inner garment as the body: y + n max(d₀ − h, 0)
            let d = *o - q;
            let h = d.dot(n);
            if h >= self.clearance || n == Vec3::ZERO {
                continue;
            }
            let f = fade((d - n * h).length(), self.inner.edge, -h, self.reach);
            if f > 0.0 {
                *o += n * ((self.clearance - h) * f);
                moved += 1;
            }
        }
        // inner vertices under the outer triangles
        for (c, last) in self.inner_near.iter().zip(state.inner_near.iter_mut()) {
            let (p, n) = (inner[c.vertex as usize], normals[c.vertex as usize]);
            let u = self.outer.nearest_from(outer, *last, p);
            *last = u as u32;
            // beyond the outer garment's edge (below a shirt's hem) nothing is above p
            let d = outer[u] - p;
            let along = (d - n * d.dot(n)).length();
            if along >= self.outer.edge {
                continue;
            }
            // the triangles around u are clear when all their corners are
            let ring = self.outer.topology.neighbors(u as u32);
            let low = ring
                .iter()
                .map(|&k| (outer[k as usize] - p).dot(n))
                .fold((outer[u] - p).dot(n), f32::min);
            if low >= self.clearance || n == Vec3::ZERO {
                continue;
            }
            let Some((corners, bary)) = self.outer.above(outer, u, p, n) else {
                continue;
            };
            let h: f32 = (0..3)
                .map(|k| (outer[corners[k]] - p).dot(n) * bary[k])
                .sum();
            if h >= self.clearance {
                continue;
            }
            let f = fade(along, self.outer.edge, -h, self.reach);
            // the triangle's point above p rises by δ when each corner rises by
            // δ b_k / Σ b_j²
            let norm: f32 = bary.iter().map(|b| b * b).sum();
            if f > 0.0 && norm > 0.0 {
                let lift = (self.clearance - h) * f / norm;
                for k in 0..3 {
                    outer[corners[k]] += n * (lift * bary[k]);
                }
                moved += 1;
            }
        }
        moved
    }
}

impl Surface {
    /// The triangle around vertex `u` (at `at`) that the line through `p` along `n`
    /// (unit) crosses, and where (barycentric, each at least −1 %; the first that holds
    /// `p` wholly, else the one it is nearest to be in); `None` when none does.
    #[inline]
    fn above(&self, at: &[Vec3], u: usize, p: Vec3, n: Vec3) -> Option<([usize; 3], [f32; 3])> {
        // coordinates in the plane across n, p at the origin
        let (e1, e2) = n.any_orthonormal_pair();
        let flat = |v: Vec3| {
            let d = v - p;
            (d.dot(e1), d.dot(e2))
        };
        let (a, b) = (
            self.around_start[u] as usize,
            self.around_start[u + 1] as usize,
        );
        let mut best: Option<([usize; 3], [f32; 3])> = None;
        let mut best_low = -0.01f32;
        for &t in &self.around[a..b] {
            let c = self.mesh.triangles[t as usize].map(|i| i as usize);
            let [q0, q1, q2] = c.map(|i| flat(at[i]));
            // barycentric coordinates of the origin from signed areas
            let cross = |a: (f32, f32), b: (f32, f32)| a.0 * b.1 - a.1 * b.0;
            let area = cross((q1.0 - q0.0, q1.1 - q0.1), (q2.0 - q0.0, q2.1 - q0.1));
            if area.abs() <= f32::EPSILON {
                continue;
            }
            let bary = [
                cross(q1, q2) / area,
                cross(q2, q0) / area,
                cross(q0, q1) / area,
            ];
            let low = bary[0].min(bary[1]).min(bary[2]);
            if low >= best_low {
                best_low = low;
                best = Some((c, bary));
                if low >= 0.0 {
                    break;
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::mesh::MeshQuery;
    use crate::mocap::Clip;
    use crate::skeleton::{Pose, canonicalize};
    use crate::sor::{AvatarState, Scratch, SynthParams, Synthesizer};

    fn fixture(name: &str) -> Arc<Database> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/db/v1")
            .join(name);
        Arc::new(Database::read(&path).expect("fixture database"))
    }

    /// The small T-shirt and pants databases (same 2 000-vertex body).
    fn shirt_and_pants() -> (Arc<Database>, Arc<Database>) {
        (fixture("small.ccdb"), fixture("small-pants.ccdb"))
    }

    /// Poses from the built-in walk, the rest pose first.
    fn poses(db: &Database) -> Vec<Pose> {
        let skeleton = db.body.to_body().skeleton;
        let clip = Clip::from_bvh_text(crate::bake::DEFAULT_CLIP, None, &skeleton).expect("clip");
        std::iter::once(Pose::rest())
            .chain(
                clip.poses
                    .iter()
                    .step_by(60)
                    .map(|p| canonicalize(p, &skeleton).0),
            )
            .collect()
    }

    fn synthesize(db: &Database, pose: &Pose) -> Vec<Vec3> {
        let synth = Synthesizer::new(db, SynthParams::default());
        let mut out = vec![Vec3::ZERO; db.vertex_count()];
        synth.synthesize(
            &mut AvatarState::new(),
            &mut Scratch::default(),
            pose,
            1.0 / 30.0,
            &mut out,
        );
        out
    }

    /// Outer vertices within 3 cm of the inner surface (measured afresh on the posed
    /// inner garment, not through the layering's pairs) that lie less than `gap` outside
    /// it, over its surface rather than beyond its edge.
    fn too_close(inner_db: &Database, inner: &[Vec3], outer: &[Vec3], gap: f32) -> usize {
        let mesh = TriMesh::new(inner.to_vec(), inner_db.garment.triangles.clone());
        let q = MeshQuery::build(&mesh).expect("query");
        outer
            .iter()
            .filter(|&&p| {
                q.closest_within(p, 0.03).is_some_and(|hit| {
                    hit.feature == crate::mesh::Feature::Face && hit.signed_distance(p) < gap
                })
            })
            .count()
    }

    /// Inner vertices out through the outer garment: over its faces, within 3 cm,
    /// outside.
    fn outside(outer_db: &Database, outer: &[Vec3], inner: &[Vec3]) -> usize {
        let mesh = TriMesh::new(outer.to_vec(), outer_db.garment.triangles.clone());
        let q = MeshQuery::build(&mesh).expect("query");
        inner
            .iter()
            .filter(|&&p| {
                q.closest_within(p, 0.03).is_some_and(|hit| {
                    hit.feature == crate::mesh::Feature::Face && hit.signed_distance(p) > 0.0
                })
            })
            .count()
    }

    #[test]
    fn a_shirt_worn_over_pants_is_pushed_out_of_them_and_nowhere_else() {
        let (shirt_db, pants_db) = shirt_and_pants();
        let layering =
            Layering::new(&pants_db, &shirt_db, &LayerParams::default()).expect("layering");
        // the shirt is the looser of the two: it is pushed out, the pants keep still
        assert!(!layering.tucks());
        // the hem and hips come near the pants, the chest and sleeves do not
        assert!(
            (100..shirt_db.vertex_count() / 2).contains(&layering.len()),
            "{} of {} shirt vertices near the pants",
            layering.len(),
            shirt_db.vertex_count()
        );
        // shirt vertices farther than 15 cm from the pants at rest (the chest, the
        // sleeves) are never moved
        let pants_rest = NearestVertex::build(&pants_db.garment.rest).expect("index");
        let far: Vec<usize> = (0..shirt_db.vertex_count())
            .filter(|&v| pants_rest.nearest(shirt_db.garment.rest[v]).1 > 0.15)
            .collect();
        assert!(far.len() > shirt_db.vertex_count() / 3, "{} far", far.len());
        let (mut scratch, mut state) = (LayerScratch::default(), LayerState::default());
        let (mut before, mut inside, mut near) = (0, 0, 0);
        let (mut poking, mut poking_after) = (0, 0);
        for pose in poses(&shirt_db) {
            let pants = synthesize(&pants_db, &pose);
            let shirt = synthesize(&shirt_db, &pose);
            let mut layered = shirt.clone();
            let mut pants_after = pants.clone();
            let moved = layering.apply(&mut pants_after, &mut layered, &mut state, &mut scratch);
            assert_eq!(
                pants_after, pants,
                "the pants moved under a shirt that gives way"
            );
            let was_inside = too_close(&pants_db, &pants, &shirt, 0.0);
            assert!(
                moved >= was_inside / 2,
                "moved {moved}, {was_inside} were inside"
            );
            before += was_inside;
            inside += too_close(&pants_db, &pants, &layered, 0.0);
            near += too_close(&pants_db, &pants, &layered, 0.002);
            // the other way round: pants vertices out through the shirt
            poking += outside(&shirt_db, &shirt, &pants);
            poking_after += outside(&shirt_db, &layered, &pants);
            for &v in &far {
                assert_eq!(
                    shirt[v], layered[v],
                    "vertex {v}, far from the pants, moved"
                );
            }
            for (v, (a, b)) in shirt.iter().zip(&layered).enumerate() {
                let by = (*a - *b).length();
                assert!(by <= 0.1, "vertex {v} moved {by} m");
            }
        }
        // measured on this coarse fixture (900-vertex garments, 3.7 cm edges) over these
        // poses: 638 shirt vertices inside the pants, 16 after, 22 within 2 mm; 776
        // pants vertices out through the shirt, 54 after
        assert!(
            before > 300,
            "only {before} shirt vertices were inside the pants"
        );
        assert!(
            inside * 20 <= before,
            "{inside} of {before} shirt vertices still inside the pants"
        );
        assert!(
            near * 12 <= before,
            "{near} shirt vertices within 2 mm of the pants ({before} inside before)"
        );
        assert!(
            poking > 300,
            "only {poking} pants vertices were out through the shirt"
        );
        assert!(
            poking_after * 8 <= poking,
            "{poking_after} pants vertices out through the shirt ({poking} before)"
        );
    }

    #[test]
    fn a_shirt_worn_under_pants_is_tucked_in_and_the_pants_keep_their_shape() {
        let (shirt_db, pants_db) = shirt_and_pants();
        // the pants listed over the shirt: the shirt is the looser, so it gives way
        let tuck = Layering::new(&shirt_db, &pants_db, &LayerParams::default()).expect("tuck");
        assert!(tuck.tucks());
        // the same pair told that the outer garment gives way pushes the pants out
        let push = Layering::new(
            &shirt_db,
            &pants_db,
            &LayerParams {
                gives_way: GivesWay::Outer,
                ..LayerParams::default()
            },
        )
        .expect("push");
        assert!(!push.tucks());
        // the hem band is tucked in, the chest and sleeves are not
        assert!(
            (50..shirt_db.vertex_count() / 2).contains(&tuck.len()),
            "{} of {} shirt vertices tucked in",
            tuck.len(),
            shirt_db.vertex_count()
        );
        let pants_rest = NearestVertex::build(&pants_db.garment.rest).expect("index");
        let far: Vec<usize> = (0..shirt_db.vertex_count())
            .filter(|&v| pants_rest.nearest(shirt_db.garment.rest[v]).1 > 0.2)
            .collect();
        assert!(far.len() > shirt_db.vertex_count() / 4, "{} far", far.len());
        let (mut scratch, mut state) = (LayerScratch::default(), LayerState::default());
        let (mut before, mut after, mut pushed) = (0, 0, 0);
        for pose in poses(&shirt_db) {
            let pants = synthesize(&pants_db, &pose);
            let shirt = synthesize(&shirt_db, &pose);
            let (mut tucked, mut pants_after) = (shirt.clone(), pants.clone());
            let moved = tuck.apply(&mut tucked, &mut pants_after, &mut state, &mut scratch);
            assert_eq!(moved, tuck.len());
            assert_eq!(pants_after, pants, "the pants moved over a shirt tucked in");
            for &v in &far {
                assert_eq!(shirt[v], tucked[v], "vertex {v}, far from the pants, moved");
            }
            before += outside(&pants_db, &pants, &shirt);
            after += outside(&pants_db, &pants, &tucked);
            // pushing the pants out instead leaves the shirt showing where it hangs
            // farther out than the reach
            let (mut shirt_again, mut pushed_pants) = (shirt.clone(), pants.clone());
            push.apply(
                &mut shirt_again,
                &mut pushed_pants,
                &mut LayerState::default(),
                &mut scratch,
            );
            pushed += outside(&pants_db, &pushed_pants, &shirt);
        }
        // measured on this coarse fixture over these poses: 1 493 shirt vertices out
        // through the pants, 30 after tucking in (the shirt bellying over the
        // waistband, blended back to its own shape above it); 314 with the pants pushed
        // out instead
        assert!(
            before > 500,
            "only {before} shirt vertices were out through the pants"
        );
        assert!(
            after * 30 <= before,
            "{after} of {before} still out through the pants"
        );
        assert!(after * 4 <= pushed, "tucked {after}, pushed {pushed}");
    }

    #[test]
    fn garments_of_different_bodies_or_bad_parameters_are_refused_by_name() {
        let (shirt_db, pants_db) = shirt_and_pants();
        let mut other = (*pants_db).clone();
        other.body.positions[0].x += 0.001;
        let e =
            Layering::new(&other, &shirt_db, &LayerParams::default()).expect_err("bodies differ");
        assert_eq!(
            e,
            LayerError::DifferentBodies {
                inner: "pants".into(),
                outer: "tshirt".into()
            }
        );
        assert!(e.to_string().contains("different bodies"));
        for bad in [
            LayerParams {
                clearance: f32::NAN,
                ..LayerParams::default()
            },
            LayerParams {
                clearance: -0.001,
                ..LayerParams::default()
            },
            LayerParams {
                reach: 1.0,
                ..LayerParams::default()
            },
        ] {
            assert!(matches!(
                Layering::new(&pants_db, &shirt_db, &bad),
                Err(LayerError::BadParameter(_))
            ));
        }
    }

    #[test]
    fn a_garment_far_from_another_is_never_moved_by_it() {
        let (shirt_db, _) = shirt_and_pants();
        // the same shirt lifted 1 m: nothing of it comes within the reach
        let mut lifted = (*shirt_db).clone();
        for e in &mut lifted.examples {
            e.positions.iter_mut().for_each(|p| p.y += 1.0);
        }
        lifted.garment.rest.iter_mut().for_each(|p| p.y += 1.0);
        let layering =
            Layering::new(&lifted, &shirt_db, &LayerParams::default()).expect("same body");
        assert!(layering.is_empty());
        let shirt = synthesize(&shirt_db, &Pose::rest());
        let mut inner = synthesize(&lifted, &Pose::rest());
        let mut out = shirt.clone();
        let moved = layering.apply(
            &mut inner,
            &mut out,
            &mut LayerState::default(),
            &mut LayerScratch::default(),
        );
        assert_eq!((moved, out), (0, shirt));
    }
}
