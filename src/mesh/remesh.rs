//! Turns a dense polygonisation into a well-shaped mesh of a requested size: shortest
//! edge collapses (with the link condition), Delaunay edge flips, and tangential
//! relaxation with projection back onto the implicit surface.
//!
//! Open meshes keep their boundary: boundary vertices never move off it, an interior
//! edge between two boundary vertices is never collapsed, and boundary vertices are
//! re-projected onto the intersection of the surface and the boundary's own field.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use glam::Vec3;

use super::isosurface::Field;
use super::topology::Topology;
use super::trimesh::{MeshError, TriMesh};

/// How [`remesh`] shapes its output.
#[derive(Copy, Clone, Debug)]
pub struct RemeshOptions {
    /// Number of vertices to stop collapsing at.
    pub target_vertices: usize,
    /// Rounds of (flip pass + relaxation).
    pub rounds: usize,
    /// Relaxation sweeps per round.
    pub relax_iterations: usize,
    /// Edges shorter than this share of the target edge length are collapsed even
    /// where every triangle around them is a sliver: the shape floor (no surviving
    /// triangle worse than the worst it replaces) is waived for them, so that a mesh
    /// that comes with near-degenerate triangles (an artist's, or a polygonisation's
    /// boundary) loses them. 0 waives nothing.
    pub sliver_edge: f32,
}

impl RemeshOptions {
    /// Defaults for a target size: three rounds of three relaxation sweeps.
    pub fn with_target(target_vertices: usize) -> Self {
        Self {
            target_vertices,
            rounds: 3,
            relax_iterations: 3,
            sliver_edge: 0.0,
        }
    }
}

struct Work<'a> {
    pos: Vec<Vec3>,
    nrm: Vec<Vec3>,
    tris: Vec<[u32; 3]>,
    tri_alive: Vec<bool>,
    vt: Vec<Vec<u32>>,
    v_alive: Vec<bool>,
    boundary: Vec<bool>,
    surface: &'a dyn Field,
    clip: Option<&'a dyn Field>,
    alive_count: usize,
    /// Edges shorter than this (metres) are collapsed without the shape floor (see
    /// [`RemeshOptions::sliver_edge`]); set once the target edge is known.
    sliver_len: f32,
    sliver_edge: f32,
    /// The target edge length, metres (set by `collapse_to`).
    edge_len: f32,
}

/// Remeshes `mesh` (an oriented manifold lying on the zero set of `surface`) down to
/// about `opts.target_vertices` vertices with near-equilateral triangles. When the mesh
/// is open, `clip` is the field whose zero set its boundary lies on.
pub fn remesh(
    mesh: &TriMesh,
    surface: &dyn Field,
    clip: Option<&dyn Field>,
    opts: RemeshOptions,
) -> Result<TriMesh, MeshError> {
    let topo = Topology::build(mesh)?;
    let boundary = topo.boundary_vertices(mesh.positions.len());
    let nv = mesh.positions.len();
    let mut vt = vec![Vec::new(); nv];
    for (t, tri) in mesh.triangles.iter().enumerate() {
        for &v in tri {
            vt[v as usize].push(t as u32);
        }
    }
    let v_alive: Vec<bool> = vt.iter().map(|l| !l.is_empty()).collect();
    let alive_count = v_alive.iter().filter(|&&a| a).count();
    let nrm = mesh
        .positions
        .iter()
        .map(|&p| surface.gradient(p).normalize_or_zero())
        .collect();
    let mut w = Work {
        pos: mesh.positions.clone(),
        nrm,
        tris: mesh.triangles.clone(),
        tri_alive: vec![true; mesh.triangles.len()],
        vt,
        v_alive,
        boundary,
        surface,
        clip,
        alive_count,
        sliver_len: 0.0,
        sliver_edge: opts.sliver_edge,
        edge_len: 0.0,
    };
    w.collapse_to(opts.target_vertices);
    for _ in 0..opts.rounds {
        w.flip_pass();
        for _ in 0..opts.relax_iterations {
            w.relax();
        }
    }
    w.flip_pass();
    if w.sliver_len > 0.0 {
        // relaxation along a boundary can crowd its vertices (projection snaps points
        // near a corner of the boundary onto it): collapse what is still too short
        w.collapse_short();
        w.flip_pass();
    }
    let out = w.compact();
    Topology::build(&out)?;
    Ok(out)
}

/// Triangle shape quality 2√3·|cross| / Σ edge²: 1 for equilateral, 0 for degenerate.
fn quality(c: [Vec3; 3]) -> f32 {
    let area2 = (c[1] - c[0]).cross(c[2] - c[0]).length();
    let perim2 = (c[1] - c[0]).length_squared()
        + (c[2] - c[1]).length_squared()
        + (c[0] - c[2]).length_squared();
    if perim2 <= 0.0 {
        0.0
    } else {
        2.0 * 3f32.sqrt() * area2 / perim2
    }
}

impl Work<'_> {
    fn neighbors(&self, v: u32, out: &mut Vec<u32>) {
        out.clear();
        for &t in &self.vt[v as usize] {
            for &x in &self.tris[t as usize] {
                if x != v && !out.contains(&x) {
                    out.push(x);
                }
            }
        }
    }

    fn project_point(&self, p: Vec3, on_boundary: bool) -> Vec3 {
        let mut q = self.surface.project(p);
        if on_boundary && let Some(c) = self.clip {
            for _ in 0..4 {
                q = c.project(q);
                q = self.surface.project(q);
            }
        }
        q
    }

    fn mean_edge(&self) -> f32 {
        let (mut s, mut n) = (0.0f64, 0usize);
        for (t, tri) in self.tris.iter().enumerate() {
            if !self.tri_alive[t] {
                continue;
            }
            for k in 0..3 {
                s += (self.pos[tri[k] as usize] - self.pos[tri[(k + 1) % 3] as usize]).length()
                    as f64;
                n += 1;
            }
        }
        if n == 0 { 0.0 } else { (s / n as f64) as f32 }
    }

    /// Surface-area estimate → the edge length that gives the target vertex count for
    /// equilateral triangles (F ≈ 2V, area per triangle √3/4·L²).
    fn target_edge(&self, target: usize) -> f32 {
        let mut area = 0.0f64;
        for (t, tri) in self.tris.iter().enumerate() {
            if self.tri_alive[t] {
                let [a, b, c] = tri.map(|v| self.pos[v as usize]);
                area += 0.5 * (b - a).cross(c - a).length() as f64;
            }
        }
        ((2.0 * area) / (3f64.sqrt() * target.max(4) as f64)).sqrt() as f32
    }

    fn collapse_to(&mut self, target: usize) {
        let edge = self.target_edge(target);
        self.edge_len = edge;
        self.sliver_len = self.sliver_edge * edge;
        let mut max_len = 1.5 * edge;
        // a pass ends when no edge can be collapsed under the current length cap; later
        // passes relax the cap a little (and quality floors are relative anyway)
        for _ in 0..6 {
            if self.alive_count <= target {
                break;
            }
            self.collapse_pass(target, max_len);
            max_len *= 1.2;
        }
    }

    /// Collapses every edge shorter than `sliver_len` that can be (shortest first),
    /// whatever the vertex count.
    fn collapse_short(&mut self) {
        let mut scratch = (Vec::new(), Vec::new());
        for _ in 0..3 {
            let mut short: Vec<(f32, u32, u32)> = Vec::new();
            for (t, tri) in self.tris.iter().enumerate() {
                if !self.tri_alive[t] {
                    continue;
                }
                for k in 0..3 {
                    let (a, b) = (tri[k], tri[(k + 1) % 3]);
                    let l = (self.pos[a as usize] - self.pos[b as usize]).length();
                    if l < self.sliver_len {
                        short.push((l, a.min(b), a.max(b)));
                    }
                }
            }
            short.sort_by(|x, y| x.0.total_cmp(&y.0));
            short.dedup_by(|x, y| (x.1, x.2) == (y.1, y.2));
            let mut done = 0;
            for (_, a, b) in short {
                if !self.v_alive[a as usize] || !self.v_alive[b as usize] {
                    continue;
                }
                if (self.pos[a as usize] - self.pos[b as usize]).length() >= self.sliver_len {
                    continue;
                }
                // neighbours may lie as far from the merged vertex as the last
                // collapse pass allowed
                if self
                    .try_collapse(a, b, 2.0 * self.edge_len, &mut scratch)
                    .is_some()
                {
                    done += 1;
                }
            }
            if done == 0 {
                break;
            }
        }
    }

    fn collapse_pass(&mut self, target: usize, max_len: f32) {
        let mut heap = BinaryHeap::new();
        for (t, tri) in self.tris.iter().enumerate() {
            if !self.tri_alive[t] {
                continue;
            }
            for k in 0..3 {
                let (a, b) = (tri[k], tri[(k + 1) % 3]);
                if a < b {
                    let l = (self.pos[a as usize] - self.pos[b as usize]).length();
                    heap.push(Reverse((l.to_bits(), a, b)));
                }
            }
        }
        let mut scratch = (Vec::new(), Vec::new());
        while self.alive_count > target {
            let Some(Reverse((bits, a, b))) = heap.pop() else {
                break;
            };
            if !self.v_alive[a as usize] || !self.v_alive[b as usize] {
                continue;
            }
            let l = (self.pos[a as usize] - self.pos[b as usize]).length();
            if l.to_bits() != bits {
                continue;
            }
            if let Some(kept) = self.try_collapse(a, b, max_len, &mut scratch) {
                self.neighbors(kept, &mut scratch.0);
                for &n in &scratch.0 {
                    let l = (self.pos[kept as usize] - self.pos[n as usize]).length();
                    heap.push(Reverse((l.to_bits(), kept.min(n), kept.max(n))));
                }
            }
        }
    }

    /// Tries to collapse edge (a, b); returns the surviving vertex.
    fn try_collapse(
        &mut self,
        a: u32,
        b: u32,
        max_len: f32,
        scratch: &mut (Vec<u32>, Vec<u32>),
    ) -> Option<u32> {
        let (ba, bb) = (self.boundary[a as usize], self.boundary[b as usize]);
        let shared: Vec<u32> = self.vt[a as usize]
            .iter()
            .copied()
            .filter(|&t| self.tris[t as usize].contains(&b))
            .collect();
        if shared.is_empty() {
            return None;
        }
        let boundary_edge = shared.len() == 1;
        if ba && bb && !boundary_edge {
            return None;
        }
        // keep the boundary vertex in place when only one end is on the boundary
        let (keep, gone, p) = match (ba, bb) {
            (false, true) => (b, a, self.pos[b as usize]),
            (true, false) => (a, b, self.pos[a as usize]),
            _ => {
                let mid = 0.5 * (self.pos[a as usize] + self.pos[b as usize]);
                (a, b, self.project_point(mid, ba && bb))
            }
        };
        if !p.is_finite() {
            return None;
        }
        // link condition: common neighbours are exactly the opposite vertices
        let opp: Vec<u32> = shared
            .iter()
            .map(|&t| {
                self.tris[t as usize]
                    .into_iter()
                    .find(|&x| x != a && x != b)
                    .unwrap_or(a)
            })
            .collect();
        self.neighbors(keep, &mut scratch.0);
        self.neighbors(gone, &mut scratch.1);
        let common = scratch.0.iter().filter(|x| scratch.1.contains(x)).count();
        if common != opp.len() {
            return None;
        }
        // opposite vertices must keep a proper fan
        for &o in &opp {
            let mut tmp = Vec::new();
            self.neighbors(o, &mut tmp);
            let min_deg = if self.boundary[o as usize] { 3 } else { 4 };
            if tmp.len() < min_deg {
                return None;
            }
        }
        if scratch.0.len() + scratch.1.len() < 6 {
            return None;
        }
        for &n in scratch.0.iter().chain(scratch.1.iter()) {
            if n != keep && n != gone && (self.pos[n as usize] - p).length() > max_len {
                return None;
            }
        }
        // the triangles that survive must keep facing outwards and not get worse than
        // the worst triangle they replace (or a fixed floor)
        let n_new = self.surface.gradient(p).normalize_or_zero();
        let mut worst_before = 1.0f32;
        for &t in self.vt[keep as usize]
            .iter()
            .chain(self.vt[gone as usize].iter())
        {
            let c = self.tris[t as usize].map(|v| self.pos[v as usize]);
            worst_before = worst_before.min(quality(c));
        }
        let short = (self.pos[a as usize] - self.pos[b as usize]).length() < self.sliver_len;
        let floor = if short { 0.0 } else { worst_before.min(0.15) };
        for &t in self.vt[keep as usize]
            .iter()
            .chain(self.vt[gone as usize].iter())
        {
            if shared.contains(&t) {
                continue;
            }
            let tri = self.tris[t as usize];
            let mut c = [Vec3::ZERO; 3];
            let mut nsum = Vec3::ZERO;
            for k in 0..3 {
                let v = tri[k];
                if v == keep || v == gone {
                    c[k] = p;
                    nsum += n_new;
                } else {
                    c[k] = self.pos[v as usize];
                    nsum += self.nrm[v as usize];
                }
            }
            let cr = (c[1] - c[0]).cross(c[2] - c[0]);
            let area2 = cr.length();
            if area2 < 1e-14 || quality(c) < floor {
                return None;
            }
            if cr.dot(nsum.normalize_or_zero()) < 0.35 * area2 {
                return None;
            }
        }
        // apply
        for &t in &shared {
            self.tri_alive[t as usize] = false;
            for v in self.tris[t as usize] {
                self.vt[v as usize].retain(|&x| x != t);
            }
        }
        let moved = std::mem::take(&mut self.vt[gone as usize]);
        for &t in &moved {
            for v in &mut self.tris[t as usize] {
                if *v == gone {
                    *v = keep;
                }
            }
        }
        self.vt[keep as usize].extend(moved);
        self.v_alive[gone as usize] = false;
        self.alive_count -= 1;
        self.pos[keep as usize] = p;
        self.nrm[keep as usize] = n_new;
        Some(keep)
    }

    fn flip_pass(&mut self) {
        let mut edges = Vec::new();
        for (t, tri) in self.tris.iter().enumerate() {
            if self.tri_alive[t] {
                for k in 0..3 {
                    if tri[k] < tri[(k + 1) % 3] {
                        edges.push((tri[k], tri[(k + 1) % 3]));
                    }
                }
            }
        }
        let mut nb = Vec::new();
        for (a, b) in edges {
            let shared: Vec<u32> = self.vt[a as usize]
                .iter()
                .copied()
                .filter(|&t| self.tris[t as usize].contains(&b))
                .collect();
            if shared.len() != 2 {
                continue;
            }
            // orient: t0 has a→b
            let dir = |t: u32| {
                let tri = self.tris[t as usize];
                let k = tri.iter().position(|&x| x == a).unwrap_or(0);
                tri[(k + 1) % 3] == b
            };
            let (t0, t1) = if dir(shared[0]) {
                (shared[0], shared[1])
            } else {
                (shared[1], shared[0])
            };
            let c = self.tris[t0 as usize]
                .into_iter()
                .find(|&x| x != a && x != b)
                .unwrap_or(a);
            let d = self.tris[t1 as usize]
                .into_iter()
                .find(|&x| x != a && x != b)
                .unwrap_or(a);
            if c == d {
                continue;
            }
            self.neighbors(c, &mut nb);
            if nb.contains(&d) {
                continue;
            }
            let [pa, pb, pc, pd] = [a, b, c, d].map(|v| self.pos[v as usize]);
            let angle = |p: Vec3, u: Vec3, v: Vec3| {
                (u - p)
                    .normalize_or_zero()
                    .dot((v - p).normalize_or_zero())
                    .clamp(-1.0, 1.0)
                    .acos()
            };
            if angle(pc, pa, pb) + angle(pd, pa, pb) <= std::f32::consts::PI + 1e-3 {
                continue;
            }
            // degrees of a and b drop by one
            let mut degrees_ok = true;
            for v in [a, b] {
                self.neighbors(v, &mut nb);
                let min_deg = if self.boundary[v as usize] { 3 } else { 4 };
                degrees_ok &= nb.len() >= min_deg;
            }
            if !degrees_ok {
                continue;
            }
            let n_old = ((pb - pa).cross(pc - pa) + (pa - pb).cross(pd - pb)).normalize_or_zero();
            let n1 = (pa - pc).cross(pd - pc);
            let n2 = (pb - pd).cross(pc - pd);
            if n1.dot(n_old) < 0.5 * n1.length() || n2.dot(n_old) < 0.5 * n2.length() {
                continue;
            }
            self.tris[t0 as usize] = [c, a, d];
            self.tris[t1 as usize] = [d, b, c];
            self.vt[a as usize].retain(|&t| t != t1);
            self.vt[b as usize].retain(|&t| t != t0);
            self.vt[c as usize].push(t1);
            self.vt[d as usize].push(t0);
        }
    }

    fn relax(&mut self) {
        let nv = self.pos.len();
        let mut next = self.pos.clone();
        let mut nb = Vec::new();
        let mean = self.mean_edge();
        for v in 0..nv {
            if !self.v_alive[v] {
                continue;
            }
            let p = self.pos[v];
            if self.boundary[v] {
                // average of the two boundary neighbours, along the boundary
                self.neighbors(v as u32, &mut nb);
                let bn: Vec<Vec3> = nb
                    .iter()
                    .copied()
                    .filter(|&n| self.boundary[n as usize] && self.is_boundary_edge(v as u32, n))
                    .map(|n| self.pos[n as usize])
                    .collect();
                if bn.len() == 2 {
                    let c = 0.5 * (bn[0] + bn[1]);
                    next[v] = self.project_point(p + 0.5 * (c - p), true);
                }
                continue;
            }
            // area-weighted centroid of the one-ring triangles, moved tangentially
            let mut acc = Vec3::ZERO;
            let mut wsum = 0.0;
            for &t in &self.vt[v] {
                let [a, b, c] = self.tris[t as usize].map(|x| self.pos[x as usize]);
                let ar = 0.5 * (b - a).cross(c - a).length();
                acc += ar * (a + b + c) / 3.0;
                wsum += ar;
            }
            if wsum <= 0.0 {
                continue;
            }
            let c = acc / wsum;
            let n = self.nrm[v];
            let mut d = c - p;
            d -= n * d.dot(n);
            let step = d.clamp_length_max(0.5 * mean);
            let q = self.project_point(p + step, false);
            if q.is_finite() && (q - p).length() < mean {
                next[v] = q;
            }
        }
        // accept moves that keep every triangle facing outwards
        for v in 0..nv {
            if !self.v_alive[v] || next[v] == self.pos[v] {
                continue;
            }
            let ok = self.vt[v].iter().all(|&t| {
                let tri = self.tris[t as usize];
                let c = tri.map(|x| {
                    if x as usize == v {
                        next[v]
                    } else {
                        self.pos[x as usize]
                    }
                });
                let cr = (c[1] - c[0]).cross(c[2] - c[0]);
                let nsum: Vec3 = tri.iter().map(|&x| self.nrm[x as usize]).sum();
                cr.dot(nsum) > 0.3 * cr.length() * nsum.length()
            });
            if ok {
                self.pos[v] = next[v];
                self.nrm[v] = self.surface.gradient(next[v]).normalize_or_zero();
            }
        }
    }

    fn is_boundary_edge(&self, a: u32, b: u32) -> bool {
        self.vt[a as usize]
            .iter()
            .filter(|&&t| self.tris[t as usize].contains(&b))
            .count()
            == 1
    }

    fn compact(&self) -> TriMesh {
        let mut remap = vec![u32::MAX; self.pos.len()];
        let mut positions = Vec::with_capacity(self.alive_count);
        for v in 0..self.pos.len() {
            if self.v_alive[v] && !self.vt[v].is_empty() {
                remap[v] = positions.len() as u32;
                positions.push(self.pos[v]);
            }
        }
        let triangles = self
            .tris
            .iter()
            .enumerate()
            .filter(|(t, _)| self.tri_alive[*t])
            .map(|(_, tri)| tri.map(|v| remap[v as usize]))
            .collect();
        TriMesh::new(positions, triangles)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::isosurface::{polygonize, sd_round_cone};

    #[test]
    fn remeshed_capsule_is_closed_regular_and_on_surface() {
        let f = |p: Vec3| {
            sd_round_cone(
                p,
                Vec3::new(-0.3, 0.0, 0.0),
                Vec3::new(0.3, 0.0, 0.0),
                0.12,
                0.08,
            )
        };
        let dense = polygonize(
            &f,
            Vec3::new(-0.5, -0.2, -0.2),
            Vec3::new(0.5, 0.2, 0.2),
            0.01,
        );
        let m = remesh(&dense, &f, None, RemeshOptions::with_target(800)).expect("remesh");
        let t = Topology::build(&m).expect("manifold");
        assert!(t.is_closed());
        assert_eq!(t.euler_characteristic(&m), 2);
        assert!(
            (m.vertex_count() as i64 - 800).abs() < 40,
            "{}",
            m.vertex_count()
        );
        for p in &m.positions {
            assert!(f(*p).abs() < 1e-3);
        }
        // near-equilateral: mean triangle quality high, no slivers
        let mut worst = 1.0f32;
        for tri in 0..m.triangles.len() {
            let [a, b, c] = m.corners(tri);
            let q = 2.0 * 3f32.sqrt() * 0.5 * (b - a).cross(c - a).length()
                / ((b - a).length_squared() + (c - b).length_squared() + (a - c).length_squared());
            worst = worst.min(q);
        }
        assert!(worst > 0.1, "worst triangle quality {worst}");
        assert!((m.signed_volume() - dense.signed_volume()).abs() / dense.signed_volume() < 0.03);
    }

    #[test]
    fn open_mesh_keeps_its_boundary_on_the_clip_plane() {
        let f = |p: Vec3| p.length() - 0.3;
        let clip = |p: Vec3| p.y - 0.1; // keep y < 0.1
        let dense = polygonize(&f, Vec3::splat(-0.4), Vec3::splat(0.4), 0.01);
        let cut = crate::mesh::clip_mesh(&dense, &clip);
        let m = remesh(&cut, &f, Some(&clip), RemeshOptions::with_target(600)).expect("remesh");
        let t = Topology::build(&m).expect("manifold");
        let loops = t.boundary_loops(&m);
        assert_eq!(loops.len(), 1);
        for &v in &loops[0] {
            assert!(clip(m.positions[v as usize]).abs() < 2e-3);
        }
        assert!(m.positions.iter().all(|p| p.y < 0.1 + 2e-3));
    }
}
