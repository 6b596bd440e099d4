//! `TriMesh`: an indexed triangle mesh with the measurements the rest of the crate needs.

use glam::{DVec3, Vec3};

/// Index of a mesh vertex. Used where a vertex index crosses module boundaries (e.g. a
/// garment vertex bound to a body vertex) so it is not confused with other indices.
#[derive(
    Copy,
    Clone,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(transparent)]
pub struct VertexId(pub u32);

impl VertexId {
    /// Index into per-vertex arrays.
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// An indexed triangle mesh. Positions in metres (frame stated by the owner); triangles
/// are counter-clockwise seen from outside (outward normals by the right-hand rule).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TriMesh {
    /// Vertex positions, metres.
    pub positions: Vec<Vec3>,
    /// Vertex indices per triangle, counter-clockwise seen from the front side.
    pub triangles: Vec<[u32; 3]>,
}

/// Why a mesh was refused.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum MeshError {
    /// The mesh has no triangles.
    #[error("mesh has no triangles")]
    Empty,
    /// A triangle refers to a vertex that does not exist.
    #[error("triangle {triangle} refers to vertex {vertex}, but the mesh has {count} vertices")]
    IndexOutOfRange {
        /// Triangle index.
        triangle: usize,
        /// The bad vertex index.
        vertex: u32,
        /// Number of vertices.
        count: usize,
    },
    /// A vertex position is NaN or infinite.
    #[error("vertex {0} has a non-finite position")]
    NonFinite(usize),
    /// A triangle repeats a vertex or has (almost) zero area.
    #[error("triangle {0} is degenerate (repeated vertex or zero area)")]
    Degenerate(usize),
    /// An edge is shared by more than two triangles, or two triangles that share it
    /// disagree on orientation.
    #[error("mesh is not an oriented 2-manifold at edge ({0}, {1})")]
    NonManifoldEdge(u32, u32),
    /// The triangles around a vertex do not form one fan.
    #[error("mesh is not a 2-manifold at vertex {0} (its triangles form more than one fan)")]
    NonManifoldVertex(u32),
    /// Too many vertices or triangles for this use.
    #[error("mesh too large: {0}")]
    TooLarge(String),
}

impl TriMesh {
    /// A mesh from its parts (not validated; see [`TriMesh::validate`]).
    pub fn new(positions: Vec<Vec3>, triangles: Vec<[u32; 3]>) -> Self {
        Self {
            positions,
            triangles,
        }
    }

    /// Number of vertices.
    pub fn vertex_count(&self) -> usize {
        self.positions.len()
    }

    /// Checks indices, finiteness and degenerate triangles (area below `min_area` m²).
    pub fn validate(&self, min_area: f32) -> Result<(), MeshError> {
        if self.triangles.is_empty() {
            return Err(MeshError::Empty);
        }
        let n = self.positions.len();
        if let Some(i) = self.positions.iter().position(|p| !p.is_finite()) {
            return Err(MeshError::NonFinite(i));
        }
        for (t, tri) in self.triangles.iter().enumerate() {
            for &v in tri {
                if v as usize >= n {
                    return Err(MeshError::IndexOutOfRange {
                        triangle: t,
                        vertex: v,
                        count: n,
                    });
                }
            }
            if tri[0] == tri[1]
                || tri[1] == tri[2]
                || tri[0] == tri[2]
                || self.triangle_area(t) <= min_area
            {
                return Err(MeshError::Degenerate(t));
            }
        }
        Ok(())
    }

    /// Corner positions of triangle `t`.
    #[inline]
    pub fn corners(&self, t: usize) -> [Vec3; 3] {
        let [a, b, c] = self.triangles[t];
        [
            self.positions[a as usize],
            self.positions[b as usize],
            self.positions[c as usize],
        ]
    }

    /// Area of triangle `t`, m².
    pub fn triangle_area(&self, t: usize) -> f32 {
        let [a, b, c] = self.corners(t);
        0.5 * (b - a).cross(c - a).length()
    }

    /// Unit normal of every triangle (zero for degenerate ones).
    pub fn face_normals(&self) -> Vec<Vec3> {
        (0..self.triangles.len())
            .map(|t| {
                let [a, b, c] = self.corners(t);
                (b - a).cross(c - a).normalize_or_zero()
            })
            .collect()
    }

    /// Area-weighted unit vertex normals.
    pub fn vertex_normals(&self) -> Vec<Vec3> {
        let mut n = vec![Vec3::ZERO; self.positions.len()];
        self.vertex_normals_into(&self.positions, &mut n);
        n
    }

    /// Area-weighted unit normals of the mesh's topology at `positions` (same length as
    /// the mesh's positions), written into `out` without allocating.
    pub fn vertex_normals_into(&self, positions: &[Vec3], out: &mut [Vec3]) {
        out.fill(Vec3::ZERO);
        for &[a, b, c] in &self.triangles {
            let (pa, pb, pc) = (
                positions[a as usize],
                positions[b as usize],
                positions[c as usize],
            );
            let fnrm = (pb - pa).cross(pc - pa);
            out[a as usize] += fnrm;
            out[b as usize] += fnrm;
            out[c as usize] += fnrm;
        }
        for v in out.iter_mut() {
            *v = v.normalize_or_zero();
        }
    }

    /// Total surface area, m².
    pub fn area(&self) -> f64 {
        (0..self.triangles.len())
            .map(|t| self.triangle_area(t) as f64)
            .sum()
    }

    /// Signed enclosed volume (m³; positive for a closed mesh with outward normals).
    pub fn signed_volume(&self) -> f64 {
        self.triangles
            .iter()
            .map(|&[a, b, c]| {
                let (pa, pb, pc) = (
                    self.positions[a as usize].as_dvec3(),
                    self.positions[b as usize].as_dvec3(),
                    self.positions[c as usize].as_dvec3(),
                );
                pa.dot(pb.cross(pc)) / 6.0
            })
            .sum()
    }

    /// Axis-aligned bounds `(min, max)`; `None` for a mesh without vertices.
    pub fn bounds(&self) -> Option<(Vec3, Vec3)> {
        let first = *self.positions.first()?;
        Some(
            self.positions
                .iter()
                .fold((first, first), |(lo, hi), &p| (lo.min(p), hi.max(p))),
        )
    }

    /// Mean edge length, metres (each edge counted once per triangle side).
    pub fn mean_edge_length(&self) -> f32 {
        if self.triangles.is_empty() {
            return 0.0;
        }
        let mut s = 0.0f64;
        for t in 0..self.triangles.len() {
            let [a, b, c] = self.corners(t);
            s += ((b - a).length() + (c - b).length() + (a - c).length()) as f64;
        }
        (s / (3 * self.triangles.len()) as f64) as f32
    }

    /// Centroid of the surface (area-weighted), metres.
    pub fn surface_centroid(&self) -> Vec3 {
        let mut acc = DVec3::ZERO;
        let mut area = 0.0;
        for t in 0..self.triangles.len() {
            let [a, b, c] = self.corners(t);
            let ar = self.triangle_area(t) as f64;
            acc += ((a + b + c) / 3.0).as_dvec3() * ar;
            area += ar;
        }
        if area > 0.0 {
            (acc / area).as_vec3()
        } else {
            Vec3::ZERO
        }
    }

    /// Reverses the orientation of every triangle.
    pub fn flip_orientation(&mut self) {
        for t in &mut self.triangles {
            t.swap(1, 2);
        }
    }
}

#[cfg(test)]
pub(crate) mod test_shapes {
    use super::*;

    /// A unit-radius octahedron, outward oriented.
    pub(crate) fn octahedron() -> TriMesh {
        let p = vec![Vec3::X, -Vec3::X, Vec3::Y, -Vec3::Y, Vec3::Z, -Vec3::Z];
        let t = vec![
            [0, 2, 4],
            [2, 1, 4],
            [1, 3, 4],
            [3, 0, 4],
            [2, 0, 5],
            [1, 2, 5],
            [3, 1, 5],
            [0, 3, 5],
        ];
        TriMesh::new(p, t)
    }

    /// `m` with every triangle split in four at its sides' midpoints, `times` times
    /// (the same surface, four times the triangles each time).
    pub(crate) fn subdivided(m: &TriMesh, times: usize) -> TriMesh {
        let mut m = m.clone();
        for _ in 0..times {
            let mut mid = std::collections::HashMap::new();
            let mut positions = m.positions.clone();
            let mut at = |a: u32, b: u32| {
                *mid.entry((a.min(b), a.max(b))).or_insert_with(|| {
                    positions.push(0.5 * (m.positions[a as usize] + m.positions[b as usize]));
                    (positions.len() - 1) as u32
                })
            };
            let mut triangles = Vec::new();
            for &[a, b, c] in &m.triangles {
                let (ab, bc, ca) = (at(a, b), at(b, c), at(c, a));
                triangles.extend([[a, ab, ca], [ab, b, bc], [ca, bc, c], [ab, bc, ca]]);
            }
            m = TriMesh::new(positions, triangles);
        }
        m
    }

    /// A sphere of `radius` metres about `centre`: the octahedron subdivided `times`
    /// times, its vertices put on the sphere. Closed, facing outwards.
    pub(crate) fn sphere(centre: Vec3, radius: f32, times: usize) -> TriMesh {
        let mut m = subdivided(&octahedron(), times);
        for p in &mut m.positions {
            *p = centre + p.normalize() * radius;
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn octahedron_measures() {
        let m = test_shapes::octahedron();
        m.validate(0.0).expect("valid");
        assert!((m.signed_volume() - 4.0 / 3.0).abs() < 1e-6);
        assert!((m.area() - 8.0 * 3f64.sqrt() / 2.0).abs() < 1e-5);
        for (p, n) in m.positions.iter().zip(m.vertex_normals()) {
            assert!(p.dot(n) > 0.99);
        }
        let mut bad = m.clone();
        bad.triangles[0][1] = 99;
        assert!(matches!(
            bad.validate(0.0),
            Err(MeshError::IndexOutOfRange { .. })
        ));
        bad = m.clone();
        bad.positions[0].x = f32::NAN;
        assert_eq!(bad.validate(0.0), Err(MeshError::NonFinite(0)));
    }
}

/// The root of `x` in the disjoint-set forest `parent` (each entry its parent, a root
/// its own), halving the path on the way.
pub(crate) fn union_root(parent: &mut [u32], mut x: u32) -> u32 {
    while parent[x as usize] != x {
        parent[x as usize] = parent[parent[x as usize] as usize];
        x = parent[x as usize];
    }
    x
}

/// Merges vertices closer than `tol` (metres) and drops triangles that become
/// degenerate. Returns the welded mesh and, for every old vertex, its new index.
pub fn weld(mesh: &TriMesh, tol: f32) -> (TriMesh, Vec<u32>) {
    use std::collections::HashMap;
    let cell = tol.max(1e-9) * 4.0;
    let key = |p: Vec3| {
        (
            (p.x / cell).floor() as i64,
            (p.y / cell).floor() as i64,
            (p.z / cell).floor() as i64,
        )
    };
    let mut grid: HashMap<(i64, i64, i64), Vec<u32>> = HashMap::new();
    let mut positions: Vec<Vec3> = Vec::new();
    let mut remap = Vec::with_capacity(mesh.positions.len());
    for &p in &mesh.positions {
        let (kx, ky, kz) = key(p);
        let mut found = None;
        'search: for dx in -1..=1 {
            for dy in -1..=1 {
                for dz in -1..=1 {
                    if let Some(list) = grid.get(&(kx + dx, ky + dy, kz + dz)) {
                        for &i in list {
                            if (positions[i as usize] - p).length() <= tol {
                                found = Some(i);
                                break 'search;
                            }
                        }
                    }
                }
            }
        }
        let idx = found.unwrap_or_else(|| {
            positions.push(p);
            let i = (positions.len() - 1) as u32;
            grid.entry((kx, ky, kz)).or_default().push(i);
            i
        });
        remap.push(idx);
    }
    let triangles = remap_triangles(&mesh.triangles, &remap);
    (TriMesh::new(positions, triangles), remap)
}

/// `triangles` with every vertex index `v` replaced by `map[v]`, those whose corners
/// came together (two or three the same vertex) dropped: what welding or stitching
/// vertices leaves of a mesh's faces.
pub(crate) fn remap_triangles(triangles: &[[u32; 3]], map: &[u32]) -> Vec<[u32; 3]> {
    triangles
        .iter()
        .map(|t| t.map(|v| map[v as usize]))
        .filter(|t| t[0] != t[1] && t[1] != t[2] && t[0] != t[2])
        .collect()
}
