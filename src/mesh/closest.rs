//! Closest-point and signed-distance queries on a triangle mesh, with a bounding-volume
//! hierarchy (AABB tree) that can be refitted when the mesh moves (posed bodies).
//!
//! Signed distance uses angle-weighted pseudo-normals (Bærentzen & Aanæs 2005), which
//! give the correct inside/outside sign for closed, consistently oriented meshes even
//! when the closest point lies on an edge or a vertex.
//!
//! A mesh of several closed parts (an imported avatar's head modelled apart from its
//! body, a face laid over the head) is read as their union: inside any part is inside.
//! The nearest point of the whole mesh alone cannot tell that: a point inside one part
//! may lie nearest another part's surface, and a point beside where two parts meet may
//! lie nearest the other part's cap. So each part is a subtree of its own, and
//! [`MeshQuery::closest_signed`] asks every part whose box holds the point.

use glam::{DVec3, Vec3};

use super::topology::{NO_FACE, Topology};
use super::trimesh::{MeshError, TriMesh};

const LEAF_SIZE: usize = 4;

#[derive(Copy, Clone, Debug)]
struct Node {
    lo: Vec3,
    hi: Vec3,
    /// Leaf: first triangle slot in `order`; inner: index of the left child (right = left + 1).
    start: u32,
    /// Leaf: number of triangles (> 0); inner: 0.
    count: u32,
}

/// Which feature of the triangle the closest point lies on.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Feature {
    /// Inside the face.
    Face,
    /// On side `k` (from corner `k` to corner `k + 1`).
    Edge(u8),
    /// At corner `k`.
    Vertex(u8),
}

/// Result of a closest-point query.
#[derive(Copy, Clone, Debug)]
pub struct Hit {
    /// Triangle index.
    pub triangle: u32,
    /// Closest point on the mesh, metres.
    pub point: Vec3,
    /// Barycentric coordinates of `point` in the triangle (sum 1).
    pub bary: Vec3,
    /// Distance from the query point, metres (unsigned).
    pub distance: f32,
    /// Feature the closest point lies on.
    pub feature: Feature,
    /// Outward pseudo-normal at the feature (unit).
    pub normal: Vec3,
}

impl Hit {
    /// Signed distance of the query point `p`: negative inside a closed mesh.
    pub fn signed_distance(&self, p: Vec3) -> f32 {
        if (p - self.point).dot(self.normal) < 0.0 {
            -self.distance
        } else {
            self.distance
        }
    }
}

/// Closest-point acceleration structure over a mesh's triangles.
///
/// Invariant: `positions` has the vertex count of the mesh it was built from; after
/// [`MeshQuery::update`] the tree's boxes bound the new positions (refit, same tree).
#[derive(Clone, Debug)]
pub struct MeshQuery {
    positions: Vec<Vec3>,
    triangles: Vec<[u32; 3]>,
    nodes: Vec<Node>,
    order: Vec<u32>,
    face_normals: Vec<Vec3>,
    /// Pseudo-normal of side k of each triangle (sum of the two face normals).
    edge_normals: Vec<[Vec3; 3]>,
    vertex_normals: Vec<Vec3>,
    /// For each triangle side, the other triangle (or NO_FACE).
    side_neighbor: Vec<[u32; 3]>,
    /// Part (vertex-connected component) of each triangle.
    part: Vec<u32>,
    /// Root node of each part's subtree (one entry, node 0, for a mesh of one part).
    part_root: Vec<u32>,
}

impl MeshQuery {
    /// Builds the tree and pseudo-normals. The mesh must be an oriented manifold (it may
    /// have a boundary, where edge pseudo-normals fall back to the face normal).
    pub fn build(mesh: &TriMesh) -> Result<Self, MeshError> {
        mesh.validate(0.0)?;
        let topo = Topology::build(mesh)?;
        let nt = mesh.triangles.len();
        let mut side_neighbor = vec![[NO_FACE; 3]; nt];
        for t in 0..nt {
            for k in 0..3 {
                let e = topo.face_edges[t][k] as usize;
                let [f0, f1] = topo.edge_faces[e];
                side_neighbor[t][k] = if f0 as usize == t { f1 } else { f0 };
            }
        }
        let (label, parts) = topo.components(mesh);
        let part: Vec<u32> = mesh
            .triangles
            .iter()
            .map(|t| label[t[0] as usize])
            .collect();
        let mut part_size = vec![0u32; parts];
        for &k in &part {
            part_size[k as usize] += 1;
        }
        // each part's triangles contiguous, so that every part can have a subtree
        let mut order: Vec<u32> = (0..nt as u32).collect();
        order.sort_by_key(|&t| part[t as usize]);
        let mut q = MeshQuery {
            positions: mesh.positions.clone(),
            triangles: mesh.triangles.clone(),
            nodes: Vec::new(),
            order,
            face_normals: vec![Vec3::ZERO; nt],
            edge_normals: vec![[Vec3::ZERO; 3]; nt],
            vertex_normals: vec![Vec3::ZERO; mesh.positions.len()],
            side_neighbor,
            part,
            part_root: vec![0; parts],
        };
        let centroids: Vec<Vec3> = (0..nt)
            .map(|t| q.tri(t).iter().copied().sum::<Vec3>() / 3.0)
            .collect();
        q.nodes.reserve(2 * nt / LEAF_SIZE + 2);
        q.nodes.push(Node {
            lo: Vec3::ZERO,
            hi: Vec3::ZERO,
            start: 0,
            count: nt as u32,
        });
        let mut stack = vec![0usize];
        while let Some(n) = stack.pop() {
            let Node { start, count, .. } = q.nodes[n];
            let (first, last) = (
                q.part[q.order[start as usize] as usize],
                q.part[q.order[(start + count - 1) as usize] as usize],
            );
            let mid = if first != last {
                // several parts: split between two of them, the nearest to the middle
                let slice = &q.order[start as usize..(start + count) as usize];
                (1..slice.len())
                    .filter(|&i| q.part[slice[i] as usize] != q.part[slice[i - 1] as usize])
                    .min_by_key(|&i| i.abs_diff(slice.len() / 2))
                    .unwrap_or(slice.len() / 2)
            } else {
                if count == part_size[first as usize] {
                    q.part_root[first as usize] = n as u32;
                }
                if count as usize <= LEAF_SIZE {
                    continue;
                }
                let slice = &mut q.order[start as usize..(start + count) as usize];
                median_split(slice, &centroids)
            };
            let left = q.nodes.len() as u32;
            q.nodes.push(Node {
                lo: Vec3::ZERO,
                hi: Vec3::ZERO,
                start,
                count: mid as u32,
            });
            q.nodes.push(Node {
                lo: Vec3::ZERO,
                hi: Vec3::ZERO,
                start: start + mid as u32,
                count: count - mid as u32,
            });
            q.nodes[n] = Node {
                lo: Vec3::ZERO,
                hi: Vec3::ZERO,
                start: left,
                count: 0,
            };
            stack.push(left as usize);
            stack.push(left as usize + 1);
        }
        q.refresh();
        Ok(q)
    }

    /// Moves the vertices (same topology) and refits the tree and normals.
    ///
    /// # Panics
    /// If `positions` does not have the mesh's vertex count (a programming error).
    #[track_caller]
    pub fn update(&mut self, positions: &[Vec3]) {
        assert_eq!(
            positions.len(),
            self.positions.len(),
            "MeshQuery::update: vertex count changed"
        );
        self.positions.copy_from_slice(positions);
        self.refresh();
    }

    /// Current vertex positions.
    pub fn positions(&self) -> &[Vec3] {
        &self.positions
    }

    /// Outward angle-weighted pseudo-normal of vertex `v`.
    pub fn vertex_normal(&self, v: usize) -> Vec3 {
        self.vertex_normals[v]
    }

    fn tri(&self, t: usize) -> [Vec3; 3] {
        let [a, b, c] = self.triangles[t];
        [
            self.positions[a as usize],
            self.positions[b as usize],
            self.positions[c as usize],
        ]
    }

    fn refresh(&mut self) {
        let nt = self.triangles.len();
        self.vertex_normals.fill(Vec3::ZERO);
        for t in 0..nt {
            let p = self.tri(t);
            let n = (p[1] - p[0]).cross(p[2] - p[0]).normalize_or_zero();
            self.face_normals[t] = n;
            for k in 0..3 {
                let e1 = (p[(k + 1) % 3] - p[k]).normalize_or_zero();
                let e2 = (p[(k + 2) % 3] - p[k]).normalize_or_zero();
                let angle = e1.dot(e2).clamp(-1.0, 1.0).acos();
                self.vertex_normals[self.triangles[t][k] as usize] += angle * n;
            }
        }
        for n in &mut self.vertex_normals {
            *n = n.normalize_or_zero();
        }
        for t in 0..nt {
            for k in 0..3 {
                let o = self.side_neighbor[t][k];
                let other = if o == NO_FACE {
                    self.face_normals[t]
                } else {
                    self.face_normals[o as usize]
                };
                self.edge_normals[t][k] = (self.face_normals[t] + other).normalize_or_zero();
            }
        }
        // refit boxes bottom-up: children always have larger indices than parents
        for n in (0..self.nodes.len()).rev() {
            let node = self.nodes[n];
            let (mut lo, mut hi) = (Vec3::splat(f32::MAX), Vec3::splat(f32::MIN));
            if node.count > 0 {
                for &t in &self.order[node.start as usize..(node.start + node.count) as usize] {
                    for p in self.tri(t as usize) {
                        lo = lo.min(p);
                        hi = hi.max(p);
                    }
                }
            } else {
                let (l, r) = (
                    self.nodes[node.start as usize],
                    self.nodes[node.start as usize + 1],
                );
                lo = l.lo.min(r.lo);
                hi = l.hi.max(r.hi);
            }
            self.nodes[n].lo = lo;
            self.nodes[n].hi = hi;
        }
    }

    /// Number of parts (vertex-connected components) of the mesh, at least 1.
    pub fn part_count(&self) -> usize {
        self.part_root.len()
    }

    /// The part (vertex-connected component, `0..part_count()`) triangle `t` belongs to.
    pub fn part_of(&self, t: u32) -> u32 {
        self.part[t as usize]
    }

    /// The closest point on the mesh to `p`.
    pub fn closest(&self, p: Vec3) -> Hit {
        // an empty mesh cannot be built, so a hit always exists
        self.closest_within(p, f32::INFINITY).unwrap_or(Hit {
            triangle: 0,
            point: p,
            bary: Vec3::X,
            distance: f32::INFINITY,
            feature: Feature::Face,
            normal: Vec3::Y,
        })
    }

    /// The point that decides `p`'s signed distance to the union of the mesh's closed
    /// parts: the closest point of the part that `p` lies deepest inside, or where it is
    /// inside none, the closest point of the mesh. Its
    /// [`Hit::signed_distance`] is the least of the parts' signed distances (metres,
    /// negative inside any part); its normal points out of that part. For a mesh of one
    /// part this is [`MeshQuery::closest`].
    pub fn closest_signed(&self, p: Vec3) -> Hit {
        let nearest = self.closest(p);
        if self.part_root.len() == 1 {
            return nearest;
        }
        let own = self.part[nearest.triangle as usize];
        let mut best = (nearest.signed_distance(p), nearest);
        for (k, &root) in self.part_root.iter().enumerate() {
            let node = self.nodes[root as usize];
            // outside a part's box is outside the part
            if k == own as usize || box_dist2(p, node.lo, node.hi) > 0.0 {
                continue;
            }
            if let Some(h) = self.closest_from(root, p, f32::INFINITY) {
                let d = h.signed_distance(p);
                if d < best.0 {
                    best = (d, h);
                }
            }
        }
        best.1
    }

    /// The closest point within `max_distance` of `p`, or `None` if the mesh is farther.
    pub fn closest_within(&self, p: Vec3, max_distance: f32) -> Option<Hit> {
        self.closest_from(0, p, max_distance)
    }

    /// [`MeshQuery::closest_within`] among the triangles under node `root`.
    fn closest_from(&self, root: u32, p: Vec3, max_distance: f32) -> Option<Hit> {
        let mut best_d2 = if max_distance.is_finite() {
            max_distance * max_distance
        } else {
            f32::INFINITY
        };
        let mut best: Option<(u32, Vec3, Vec3, Feature)> = None;
        let mut stack = [root; 64];
        let mut sp = 1usize;
        while sp > 0 {
            sp -= 1;
            let node = self.nodes[stack[sp] as usize];
            if box_dist2(p, node.lo, node.hi) > best_d2 {
                continue;
            }
            if node.count > 0 {
                for &t in &self.order[node.start as usize..(node.start + node.count) as usize] {
                    let [a, b, c] = self.tri(t as usize);
                    let (q, bary, feat) = closest_on_triangle(p, a, b, c);
                    let d2 = (q - p).length_squared();
                    if d2 <= best_d2 {
                        best_d2 = d2;
                        best = Some((t, q, bary, feat));
                    }
                }
            } else {
                let (l, r) = (node.start, node.start + 1);
                let dl = box_dist2(p, self.nodes[l as usize].lo, self.nodes[l as usize].hi);
                let dr = box_dist2(p, self.nodes[r as usize].lo, self.nodes[r as usize].hi);
                // push the farther child first so the nearer one is searched first
                let (first, second) = if dl <= dr { (r, l) } else { (l, r) };
                if sp + 2 <= stack.len() {
                    stack[sp] = first;
                    stack[sp + 1] = second;
                    sp += 2;
                }
            }
        }
        let (t, q, bary, feature) = best?;
        let normal = match feature {
            Feature::Face => self.face_normals[t as usize],
            Feature::Edge(k) => self.edge_normals[t as usize][k as usize],
            Feature::Vertex(k) => {
                self.vertex_normals[self.triangles[t as usize][k as usize] as usize]
            }
        };
        Some(Hit {
            triangle: t,
            point: q,
            bary,
            distance: best_d2.sqrt(),
            feature,
            normal,
        })
    }

    /// Appends to `out` every triangle whose bounding box is within `radius` of `p`
    /// (a superset of the triangles within `radius`; callers measure exactly).
    pub fn triangles_near(&self, p: Vec3, radius: f32, out: &mut Vec<u32>) {
        let r2 = radius * radius;
        let mut stack = [0u32; 64];
        let mut sp = 1usize;
        while sp > 0 {
            sp -= 1;
            let node = self.nodes[stack[sp] as usize];
            if box_dist2(p, node.lo, node.hi) > r2 {
                continue;
            }
            if node.count > 0 {
                out.extend_from_slice(
                    &self.order[node.start as usize..(node.start + node.count) as usize],
                );
            } else if sp + 2 <= stack.len() {
                stack[sp] = node.start;
                stack[sp + 1] = node.start + 1;
                sp += 2;
            }
        }
    }

    /// Mean edge length of the mesh, metres.
    pub fn mean_edge_length(&self) -> f32 {
        let mut s = 0.0f64;
        for t in 0..self.triangles.len() {
            let [a, b, c] = self.tri(t);
            s += ((b - a).length() + (c - b).length() + (a - c).length()) as f64;
        }
        (s / (3 * self.triangles.len().max(1)) as f64) as f32
    }

    /// Signed distance from `p` to the mesh, metres (negative inside a closed mesh; for
    /// several closed parts, inside any of them: see [`MeshQuery::closest_signed`]).
    pub fn signed_distance(&self, p: Vec3) -> f32 {
        self.closest_signed(p).signed_distance(p)
    }
}

/// Orders `slice` (triangle ids) about the median of their centroids along the axis of
/// the centroids' largest extent, and returns the median's index.
fn median_split(slice: &mut [u32], centroids: &[Vec3]) -> usize {
    let (mut lo, mut hi) = (Vec3::splat(f32::MAX), Vec3::splat(f32::MIN));
    for &t in slice.iter() {
        lo = lo.min(centroids[t as usize]);
        hi = hi.max(centroids[t as usize]);
    }
    let ext = hi - lo;
    let axis = if ext.x >= ext.y && ext.x >= ext.z {
        0
    } else if ext.y >= ext.z {
        1
    } else {
        2
    };
    let mid = slice.len() / 2;
    slice.select_nth_unstable_by(mid, |&a, &b| {
        centroids[a as usize][axis].total_cmp(&centroids[b as usize][axis])
    });
    mid
}

fn box_dist2(p: Vec3, lo: Vec3, hi: Vec3) -> f32 {
    let d = (lo - p).max(p - hi).max(Vec3::ZERO);
    d.length_squared()
}

/// Closest point on triangle `abc` to `p` (Ericson, Real-Time Collision Detection §5.1.5),
/// with barycentric coordinates and the feature it lies on.
pub fn closest_on_triangle(p: Vec3, a: Vec3, b: Vec3, c: Vec3) -> (Vec3, Vec3, Feature) {
    let (q, bary, f) =
        closest_on_triangle_f64(p.as_dvec3(), a.as_dvec3(), b.as_dvec3(), c.as_dvec3());
    (q.as_vec3(), bary.as_vec3(), f)
}

/// [`closest_on_triangle`] in double precision (the simulator's contact energy needs a
/// distance that is smooth to rounding level in the query point).
pub fn closest_on_triangle_f64(p: DVec3, a: DVec3, b: DVec3, c: DVec3) -> (DVec3, DVec3, Feature) {
    let ab = b - a;
    let ac = c - a;
    let ap = p - a;
    let d1 = ab.dot(ap);
    let d2 = ac.dot(ap);
    if d1 <= 0.0 && d2 <= 0.0 {
        return (a, DVec3::X, Feature::Vertex(0));
    }
    let bp = p - b;
    let d3 = ab.dot(bp);
    let d4 = ac.dot(bp);
    if d3 >= 0.0 && d4 <= d3 {
        return (b, DVec3::Y, Feature::Vertex(1));
    }
    let vc = d1 * d4 - d3 * d2;
    if vc <= 0.0 && d1 >= 0.0 && d3 <= 0.0 {
        let v = d1 / (d1 - d3);
        return (a + v * ab, DVec3::new(1.0 - v, v, 0.0), Feature::Edge(0));
    }
    let cp = p - c;
    let d5 = ab.dot(cp);
    let d6 = ac.dot(cp);
    if d6 >= 0.0 && d5 <= d6 {
        return (c, DVec3::Z, Feature::Vertex(2));
    }
    let vb = d5 * d2 - d1 * d6;
    if vb <= 0.0 && d2 >= 0.0 && d6 <= 0.0 {
        let w = d2 / (d2 - d6);
        return (a + w * ac, DVec3::new(1.0 - w, 0.0, w), Feature::Edge(2));
    }
    let va = d3 * d6 - d5 * d4;
    if va <= 0.0 && (d4 - d3) >= 0.0 && (d5 - d6) >= 0.0 {
        let w = (d4 - d3) / ((d4 - d3) + (d5 - d6));
        return (
            b + w * (c - b),
            DVec3::new(0.0, 1.0 - w, w),
            Feature::Edge(1),
        );
    }
    let denom = 1.0 / (va + vb + vc);
    let v = vb * denom;
    let w = vc * denom;
    let u = 1.0 - v - w;
    if !(u.is_finite() && v.is_finite() && w.is_finite()) {
        // degenerate triangle: fall back to its first corner
        return (a, DVec3::X, Feature::Vertex(0));
    }
    (a + ab * v + ac * w, DVec3::new(u, v, w), Feature::Face)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::trimesh::test_shapes::{octahedron, subdivided};

    fn brute(m: &TriMesh, p: Vec3) -> f32 {
        (0..m.triangles.len())
            .map(|t| {
                let [a, b, c] = m.corners(t);
                (closest_on_triangle(p, a, b, c).0 - p).length()
            })
            .fold(f32::INFINITY, f32::min)
    }

    #[test]
    fn matches_brute_force_and_signs() {
        let m = octahedron();
        let q = MeshQuery::build(&m).expect("build");
        let mut s = 7u32;
        let mut r = || {
            s = s.wrapping_mul(1664525).wrapping_add(1013904223);
            (s >> 8) as f32 / (1u32 << 24) as f32 * 4.0 - 2.0
        };
        for _ in 0..500 {
            let p = Vec3::new(r(), r(), r());
            let h = q.closest(p);
            assert!((h.distance - brute(&m, p)).abs() < 1e-5);
            let inside = p.x.abs() + p.y.abs() + p.z.abs() < 1.0;
            assert_eq!(h.signed_distance(p) < 0.0, inside, "{p}");
            let recon = m.positions[m.triangles[h.triangle as usize][0] as usize] * h.bary.x
                + m.positions[m.triangles[h.triangle as usize][1] as usize] * h.bary.y
                + m.positions[m.triangles[h.triangle as usize][2] as usize] * h.bary.z;
            assert!((recon - h.point).length() < 1e-5);
        }
        // vertex and edge regions get the right sign just outside a corner
        assert!(q.signed_distance(Vec3::new(1.01, 0.0, 0.0)) > 0.0);
        assert!(q.signed_distance(Vec3::new(0.99, 0.0, 0.0)) < 0.0);
        assert!(q.closest_within(Vec3::new(5.0, 0.0, 0.0), 1.0).is_none());
    }

    /// Three closed parts, two of them overlapping, read as their union: inside either
    /// of the overlapping octahedra is inside, also where the point is nearer the other
    /// one's surface (where the nearest point of the whole mesh says "outside").
    #[test]
    fn several_closed_parts_are_read_as_their_union() {
        let one = subdivided(&octahedron(), 3);
        let centres = [
            Vec3::ZERO,
            Vec3::new(0.8, 0.3, 0.0),
            Vec3::new(4.0, 0.0, 0.0),
        ];
        let mut m = TriMesh::default();
        for c in centres {
            let base = m.positions.len() as u32;
            m.positions.extend(one.positions.iter().map(|p| *p + c));
            m.triangles
                .extend(one.triangles.iter().map(|t| t.map(|v| v + base)));
        }
        let q = MeshQuery::build(&m).expect("build");
        assert_eq!(q.part_count(), 3);
        let n = one.triangles.len();
        // each part's subtree holds exactly that part's triangles
        for (k, &root) in q.part_root.iter().enumerate() {
            let mut under = Vec::new();
            let mut stack = vec![root];
            while let Some(i) = stack.pop() {
                let node = q.nodes[i as usize];
                if node.count > 0 {
                    under.extend_from_slice(
                        &q.order[node.start as usize..(node.start + node.count) as usize],
                    );
                } else {
                    stack.extend([node.start, node.start + 1]);
                }
            }
            under.sort_unstable();
            let want: Vec<u32> = (0..m.triangles.len() as u32)
                .filter(|&t| q.part_of(t) == k as u32)
                .collect();
            assert_eq!(want.len(), n);
            assert_eq!(under, want, "part {k}");
        }
        let depth = |p: Vec3, c: Vec3| 1.0 - (p - c).abs().element_sum();
        let mut s = 11u32;
        let mut r = |lo: f32, hi: f32| {
            s = s.wrapping_mul(1664525).wrapping_add(1013904223);
            lo + (s >> 8) as f32 / (1u32 << 24) as f32 * (hi - lo)
        };
        let mut nearest_wrong = 0;
        for _ in 0..3000 {
            let p = Vec3::new(r(-1.5, 5.5), r(-1.5, 1.5), r(-1.5, 1.5));
            let inside = centres.iter().any(|&c| depth(p, c) > 0.0);
            let d = q.signed_distance(p);
            assert_eq!(d < 0.0, inside, "{p}: {d}");
            // the least of the parts' own signed distances (brute force, part by part)
            let by_part = (0..3)
                .map(|k| {
                    let part = TriMesh::new(
                        m.positions.clone(),
                        m.triangles[k * n..(k + 1) * n].to_vec(),
                    );
                    let u = brute(&part, p);
                    if depth(p, centres[k]) > 0.0 { -u } else { u }
                })
                .fold(f32::INFINITY, f32::min);
            assert!((d - by_part).abs() < 1e-5, "{p}: {d} against {by_part}");
            // the hit lies on the mesh, in the part that decides
            let h = q.closest_signed(p);
            assert!((h.point - p).length() - d.abs() < 1e-5);
            nearest_wrong += usize::from((q.closest(p).signed_distance(p) < 0.0) != inside);
        }
        // the case the union is for occurs among the samples
        assert!(nearest_wrong >= 10, "{nearest_wrong}");
    }

    #[test]
    fn refit_follows_moved_vertices() {
        let m = octahedron();
        let mut q = MeshQuery::build(&m).expect("build");
        let moved: Vec<Vec3> = m.positions.iter().map(|p| *p * 2.0 + Vec3::X).collect();
        q.update(&moved);
        assert!(q.signed_distance(Vec3::new(1.0, 0.0, 0.0)) < -0.5);
        assert!((q.signed_distance(Vec3::new(3.5, 0.0, 0.0)) - 0.5).abs() < 1e-5);
    }
}
