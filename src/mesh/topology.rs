//! Edge and vertex adjacency of a triangle mesh, with the manifold checks that every
//! consumer relies on (closed body, garment with boundary, bending stencils).

use super::trimesh::{MeshError, TriMesh, union_root};

/// Marker for "no triangle" on the far side of a boundary edge.
pub const NO_FACE: u32 = u32::MAX;

/// Adjacency of an oriented 2-manifold triangle mesh (possibly with boundary).
///
/// Invariants (established by [`Topology::build`]): every undirected edge has one or
/// two incident triangles; two triangles sharing an edge traverse it in opposite
/// directions; the triangles around every vertex form a single fan.
#[derive(Clone, Debug)]
pub struct Topology {
    /// Undirected edges `(a, b)` with `a < b`.
    pub edges: Vec<[u32; 2]>,
    /// The triangles on each edge: `[left, right]`, `right == NO_FACE` on the boundary.
    /// When there are two, `left` traverses the edge as `a → b`.
    pub edge_faces: Vec<[u32; 2]>,
    /// Edge index of each triangle side: side `k` joins corners `k` and `k + 1`.
    pub face_edges: Vec<[u32; 3]>,
    neighbor_offsets: Vec<u32>,
    neighbors: Vec<u32>,
}

impl Topology {
    /// Builds adjacency and checks the manifold invariants.
    pub fn build(mesh: &TriMesh) -> Result<Self, MeshError> {
        let nv = mesh.positions.len();
        let nt = mesh.triangles.len();
        // half-edges sorted by undirected key
        let mut half: Vec<(u32, u32, u32, u8)> = Vec::with_capacity(3 * nt);
        for (t, tri) in mesh.triangles.iter().enumerate() {
            for k in 0..3 {
                let (a, b) = (tri[k], tri[(k + 1) % 3]);
                if a as usize >= nv || b as usize >= nv {
                    return Err(MeshError::IndexOutOfRange {
                        triangle: t,
                        vertex: a.max(b),
                        count: nv,
                    });
                }
                if a == b {
                    return Err(MeshError::Degenerate(t));
                }
                half.push((a.min(b), a.max(b), t as u32, k as u8));
            }
        }
        half.sort_unstable();
        let mut edges = Vec::with_capacity(half.len() / 2 + 8);
        let mut edge_faces = Vec::with_capacity(half.len() / 2 + 8);
        let mut face_edges = vec![[u32::MAX; 3]; nt];
        let mut i = 0;
        while i < half.len() {
            let (a, b, t0, k0) = half[i];
            let mut j = i + 1;
            while j < half.len() && half[j].0 == a && half[j].1 == b {
                j += 1;
            }
            let e = edges.len() as u32;
            match j - i {
                1 => {
                    edge_faces.push([t0, NO_FACE]);
                }
                2 => {
                    let (_, _, t1, k1) = half[i + 1];
                    let dir = |t: u32, k: u8| mesh.triangles[t as usize][k as usize] == a;
                    if dir(t0, k0) == dir(t1, k1) {
                        return Err(MeshError::NonManifoldEdge(a, b));
                    }
                    if dir(t0, k0) {
                        edge_faces.push([t0, t1])
                    } else {
                        edge_faces.push([t1, t0])
                    }
                    face_edges[t1 as usize][k1 as usize] = e;
                }
                _ => return Err(MeshError::NonManifoldEdge(a, b)),
            }
            face_edges[t0 as usize][k0 as usize] = e;
            edges.push([a, b]);
            i = j;
        }
        // vertex adjacency (CSR)
        let mut deg = vec![0u32; nv + 1];
        for &[a, b] in &edges {
            deg[a as usize] += 1;
            deg[b as usize] += 1;
        }
        let mut offsets = vec![0u32; nv + 1];
        for v in 0..nv {
            offsets[v + 1] = offsets[v] + deg[v];
        }
        let mut fill = offsets.clone();
        let mut neighbors = vec![0u32; edges.len() * 2];
        for &[a, b] in &edges {
            neighbors[fill[a as usize] as usize] = b;
            fill[a as usize] += 1;
            neighbors[fill[b as usize] as usize] = a;
            fill[b as usize] += 1;
        }
        let topo = Topology {
            edges,
            edge_faces,
            face_edges,
            neighbor_offsets: offsets,
            neighbors,
        };
        topo.check_vertex_fans(mesh)?;
        Ok(topo)
    }

    /// Every vertex's triangles must form one fan: the triangle corners at a vertex,
    /// joined across the interior edges at that vertex, form one connected set.
    fn check_vertex_fans(&self, mesh: &TriMesh) -> Result<(), MeshError> {
        let nt = mesh.triangles.len();
        let mut parent: Vec<u32> = (0..3 * nt as u32).collect();
        let corner = |t: u32, v: u32| -> u32 {
            let tri = mesh.triangles[t as usize];
            let k = tri.iter().position(|&x| x == v).unwrap_or(0);
            3 * t + k as u32
        };
        for (e, &[a, b]) in self.edges.iter().enumerate() {
            let [f0, f1] = self.edge_faces[e];
            if f1 == NO_FACE {
                continue;
            }
            for v in [a, b] {
                let (x, y) = (
                    union_root(&mut parent, corner(f0, v)),
                    union_root(&mut parent, corner(f1, v)),
                );
                if x != y {
                    parent[x as usize] = y;
                }
            }
        }
        let mut root_of_vertex = vec![u32::MAX; mesh.positions.len()];
        for (t, tri) in mesh.triangles.iter().enumerate() {
            for (k, &v) in tri.iter().enumerate() {
                let r = union_root(&mut parent, (3 * t + k) as u32);
                let slot = &mut root_of_vertex[v as usize];
                if *slot == u32::MAX {
                    *slot = r;
                } else if *slot != r {
                    return Err(MeshError::NonManifoldVertex(v));
                }
            }
        }
        Ok(())
    }

    /// Number of edges at vertex `v`.
    #[inline]
    pub fn degree(&self, v: u32) -> u32 {
        self.neighbor_offsets[v as usize + 1] - self.neighbor_offsets[v as usize]
    }

    /// Neighbouring vertices of `v` (one-ring), in no particular order.
    #[inline]
    pub fn neighbors(&self, v: u32) -> &[u32] {
        &self.neighbors[self.neighbor_offsets[v as usize] as usize
            ..self.neighbor_offsets[v as usize + 1] as usize]
    }

    /// Whether the edge has only one triangle.
    #[inline]
    pub fn is_boundary_edge(&self, e: usize) -> bool {
        self.edge_faces[e][1] == NO_FACE
    }

    /// True when no edge is on a boundary.
    pub fn is_closed(&self) -> bool {
        self.edge_faces.iter().all(|f| f[1] != NO_FACE)
    }

    /// Per vertex, whether it lies on a boundary edge.
    pub fn boundary_vertices(&self, vertex_count: usize) -> Vec<bool> {
        let mut out = vec![false; vertex_count];
        for (e, &[a, b]) in self.edges.iter().enumerate() {
            if self.is_boundary_edge(e) {
                out[a as usize] = true;
                out[b as usize] = true;
            }
        }
        out
    }

    /// Boundary loops as ordered vertex cycles (each loop follows the boundary in the
    /// direction of its triangle).
    pub fn boundary_loops(&self, mesh: &TriMesh) -> Vec<Vec<u32>> {
        let mut next = std::collections::HashMap::new();
        for (e, _) in self.edges.iter().enumerate() {
            if !self.is_boundary_edge(e) {
                continue;
            }
            let t = self.edge_faces[e][0] as usize;
            let k = self.face_edges[t]
                .iter()
                .position(|&x| x == e as u32)
                .unwrap_or(0);
            let tri = mesh.triangles[t];
            next.insert(tri[k], tri[(k + 1) % 3]);
        }
        let mut loops = Vec::new();
        let mut starts: Vec<u32> = next.keys().copied().collect();
        starts.sort_unstable();
        let mut seen = std::collections::HashSet::new();
        for s in starts {
            if seen.contains(&s) {
                continue;
            }
            let mut lp = vec![s];
            seen.insert(s);
            let mut v = s;
            while let Some(&n) = next.get(&v) {
                if n == s || !seen.insert(n) {
                    break;
                }
                lp.push(n);
                v = n;
            }
            loops.push(lp);
        }
        loops
    }

    /// Number of connected components (vertices without triangles are not counted).
    pub fn component_count(&self, mesh: &TriMesh) -> usize {
        self.components(mesh).1
    }

    /// The connected component of every vertex (`u32::MAX` for vertices without
    /// triangles), numbered from 0 in the order of their lowest vertex, and their count.
    pub fn components(&self, mesh: &TriMesh) -> (Vec<u32>, usize) {
        let nv = mesh.positions.len();
        let mut label = vec![u32::MAX; nv];
        let mut used = vec![false; nv];
        for tri in &mesh.triangles {
            for &v in tri {
                used[v as usize] = true;
            }
        }
        let mut count = 0;
        let mut stack = Vec::new();
        for s in 0..nv {
            if !used[s] || label[s] != u32::MAX {
                continue;
            }
            label[s] = count;
            stack.push(s as u32);
            while let Some(v) = stack.pop() {
                for &n in self.neighbors(v) {
                    if label[n as usize] == u32::MAX {
                        label[n as usize] = count;
                        stack.push(n);
                    }
                }
            }
            count += 1;
        }
        (label, count as usize)
    }

    /// For each interior edge, the four vertices of its two triangles:
    /// `[x0, x1, x2, x3]` with `(x0, x1)` the shared edge, `x2` opposite in the left
    /// triangle and `x3` opposite in the right one (the bending stencil of Bergou 2006).
    pub fn hinges(&self, mesh: &TriMesh) -> Vec<[u32; 4]> {
        let mut out = Vec::with_capacity(self.edges.len());
        for (e, &[a, b]) in self.edges.iter().enumerate() {
            let [f0, f1] = self.edge_faces[e];
            if f1 == NO_FACE {
                continue;
            }
            let opp = |f: u32| {
                let t = mesh.triangles[f as usize];
                t.into_iter().find(|&v| v != a && v != b).unwrap_or(a)
            };
            out.push([a, b, opp(f0), opp(f1)]);
        }
        out
    }

    /// Euler characteristic V − E + F of the mesh.
    pub fn euler_characteristic(&self, mesh: &TriMesh) -> i64 {
        let used = {
            let mut u = vec![false; mesh.positions.len()];
            for tri in &mesh.triangles {
                for &v in tri {
                    u[v as usize] = true;
                }
            }
            u.iter().filter(|&&x| x).count()
        };
        used as i64 - self.edges.len() as i64 + mesh.triangles.len() as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::trimesh::test_shapes::octahedron;

    #[test]
    fn closed_octahedron() {
        let m = octahedron();
        let t = Topology::build(&m).expect("manifold");
        assert!(t.is_closed());
        assert_eq!(t.edges.len(), 12);
        assert_eq!(t.euler_characteristic(&m), 2);
        assert_eq!(t.component_count(&m), 1);
        assert_eq!(t.hinges(&m).len(), 12);
        assert!(t.neighbors(0).len() == 4);
    }

    #[test]
    fn open_and_bad_meshes() {
        let mut m = octahedron();
        m.triangles.pop();
        let t = Topology::build(&m).expect("manifold with boundary");
        assert!(!t.is_closed());
        let loops = t.boundary_loops(&m);
        assert_eq!(loops.len(), 1);
        assert_eq!(loops[0].len(), 3);
        // flipped triangle: inconsistent orientation
        let mut f = octahedron();
        f.triangles[0].swap(1, 2);
        assert!(matches!(
            Topology::build(&f),
            Err(MeshError::NonManifoldEdge(..))
        ));
        // an edge with three triangles
        let mut g = octahedron();
        g.triangles.push([0, 2, 1]);
        assert!(Topology::build(&g).is_err());
        // two fans meeting at one vertex (bow tie)
        let bow = TriMesh::new(
            vec![
                glam::Vec3::ZERO,
                glam::Vec3::X,
                glam::Vec3::Y,
                -glam::Vec3::X,
                -glam::Vec3::Y,
            ],
            vec![[0, 1, 2], [0, 3, 4]],
        );
        assert_eq!(
            Topology::build(&bow).err(),
            Some(MeshError::NonManifoldVertex(0))
        );
        // two closed octahedra sharing one vertex (a pinch)
        let mut two = octahedron();
        let off = two.positions.len() as u32;
        let second = octahedron();
        two.positions
            .extend(second.positions.iter().map(|p| *p + glam::Vec3::X * 2.0));
        two.triangles.extend(
            second
                .triangles
                .iter()
                .map(|t| t.map(|v| if v == 1 { 0 } else { v + off })),
        );
        assert!(matches!(
            Topology::build(&two),
            Err(MeshError::NonManifoldVertex(0))
        ));
    }
}
