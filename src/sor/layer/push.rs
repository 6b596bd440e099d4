//! The outer garment pushed out over the inner one: SOR's penetration re-projection
//! (Eq. 11–13) with the inner garment in the body's place (see the module docs of
//! [`super`]).

use glam::Vec3;

use super::{LayerError, LayerParams, LayerScratch, LayerState, zone_normals};
use crate::mesh::{MeshError, NearestVertex, Topology, TriMesh};
use crate::sor::db::Database;

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

/// The outer garment pushed out over the inner one (SOR Eq. 11–13 with the inner
/// garment as the body).
#[derive(Clone, Debug)]
pub(super) struct Push {
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

impl Push {
    /// Outer vertices examined each frame.
    pub(super) fn len(&self) -> usize {
        self.outer_near.len()
    }

    /// The vertices of each garment that may come near the other.
    pub(super) fn new(
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
    pub(super) fn apply(
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
        let triangles = &self.inner.mesh.triangles;
        let zone = self.zone_triangles.iter().map(|&t| triangles[t as usize]);
        zone_normals(inner, zone, &self.zone_vertices, &mut scratch.normals);
        let normals = &scratch.normals;
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
