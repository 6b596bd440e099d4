//! Making an imported avatar's mesh a body the simulator can collide with: closed,
//! outward-oriented 2-manifolds, nothing else.
//!
//! Avatars made for VR and games (VRoid/VRM, Ready Player Me, Mixamo characters) are
//! seldom one closed mesh. Their skin has openings where another part joins it (the
//! neck under a separate face, the eyes' sockets), and they carry parts that are not a
//! body at all: hair cards, eyelashes, eyes and teeth, accessories, some not even
//! manifold. A garment is simulated against the body's inside and outside
//! ([`crate::mesh::MeshQuery`]'s sign: the union of the closed parts), which an opening leaves undefined: a collar
//! can fall into an open neck. So the import first stitches openings that meet (within
//! [`SEAM_TOLERANCE`], vertex to vertex: a head modelled apart from the body), copies
//! each vertex where two openings touch once per fan of triangles around it (so every
//! opening is one simple loop), then keeps each connected part that is an
//! oriented 2-manifold with boundary and encloses at least [`MIN_VOLUME_SHARE`] of the
//! largest part's volume, caps each of its openings (triangulated as seen along its
//! mean normal, or where it crosses itself seen so, with a fan of triangles around its
//! centroid, skinned as the opening's vertices on average), turns a part
//! whose triangles face inwards outwards, and drops the rest, saying what it dropped.

use glam::{DVec2, DVec3, Vec3};

use crate::mesh::{Topology, TriMesh, union_root, vertex_forest};

use super::super::skin::SkinWeights;

/// Parts enclosing less than this share of the largest part's volume (once their
/// openings are capped) are dropped: eyes, teeth, hair cards, eyelashes.
pub const MIN_VOLUME_SHARE: f64 = 0.02;

/// Openings of different parts (or of one part) whose vertices lie closer than this,
/// metres, are stitched together, vertex to vertex, before anything is capped: a head
/// modelled apart from the body meets it at the neck, and two closed parts touching
/// there would make the skin near the seam look inside one of them (a collar vertex
/// next to the seam, measured against the head's cap, is "inside" by its distance).
pub const SEAM_TOLERANCE: f32 = 0.001;

/// Openings of more vertices than this are capped with a fan, not ear-clipped: checking
/// the opening for crossings and its corners for ears takes time in the square of its
/// vertex count (a neck or a sleeve has a few dozen to a few hundred).
pub(super) const MAX_CLIPPED_OPENING: usize = 4096;

/// How many times ear clipping measures every corner again when no measured corner is
/// an ear (see [`ear_clip`]) before it gives the opening up to a fan: each time costs
/// the square of the opening's vertex count.
const EAR_REMEASURES: usize = 8;

/// Why a part that is not an oriented 2-manifold is dropped.
const NOT_MANIFOLD: &str = "not an oriented 2-manifold";

/// What closing an imported mesh did, for the user to check.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CloseReport {
    /// Parts kept, with their triangle counts as imported (before capping).
    pub kept: Vec<usize>,
    /// Parts dropped, with their triangle counts and why.
    pub dropped: Vec<(usize, &'static str)>,
    /// Openings of the kept parts capped.
    pub capped: usize,
    /// Of those, openings capped with a fan about their centroid because they could not
    /// be triangulated as seen along their mean normal (see [`MAX_CLIPPED_OPENING`]):
    /// where such an opening bends, the fan can stand out of the skin, and the body
    /// near it is worth a look.
    pub fanned: usize,
    /// Parts turned outwards (their triangles faced inwards).
    pub flipped: usize,
    /// Opening vertices joined to another opening's within [`SEAM_TOLERANCE`].
    pub stitched: usize,
    /// Vertices where two openings touched (the triangles around them in more than one
    /// fan), copied once per extra fan so that each opening is one simple loop.
    pub separated: usize,
}

impl CloseReport {
    /// Whether the mesh was used as it came.
    pub fn unchanged(&self) -> bool {
        self.dropped.is_empty()
            && self.capped == 0
            && self.flipped == 0
            && self.stitched == 0
            && self.separated == 0
    }
}

/// A usable part, capped and turned outwards.
struct ClosedPart {
    mesh: TriMesh,
    skin: SkinWeights,
    /// Enclosed volume, m³ (positive).
    volume: f64,
    /// Triangles as imported.
    triangles: usize,
    /// Openings capped.
    openings: usize,
    /// Of those, openings capped with a fan.
    fanned: usize,
    /// Whether its triangles faced inwards.
    turned: bool,
}

/// `mesh` (un-skinned to the T-pose) and its per-vertex `skin`, reduced to its closed
/// body parts (see the module docs). `None` when no part is an oriented 2-manifold
/// enclosing a volume.
pub(super) fn close_body(
    mesh: &TriMesh,
    skin: &SkinWeights,
) -> Option<(TriMesh, SkinWeights, CloseReport)> {
    let (stitched, joined) = stitch(mesh, SEAM_TOLERANCE);
    if joined == 0 {
        return close_parts(mesh, skin);
    }
    let not_manifold = |r: &Option<(TriMesh, SkinWeights, CloseReport)>| -> usize {
        r.as_ref().map_or(usize::MAX, |(_, _, report)| {
            report
                .dropped
                .iter()
                .filter(|d| d.1 == NOT_MANIFOLD)
                .map(|d| d.0)
                .sum()
        })
    };
    let with = close_parts(&stitched, skin);
    // a stitch that made a part non-manifold (two rims of one slit, seams that do not
    // match vertex for vertex) is not taken; a clean one needs no comparison
    let clean = not_manifold(&with) == 0;
    let without = (!clean).then(|| close_parts(mesh, skin)).flatten();
    if with.is_some() && (clean || not_manifold(&with) <= not_manifold(&without)) {
        with.map(|(m, s, mut report)| {
            report.stitched = joined;
            (m, s, report)
        })
    } else {
        without
    }
}

/// [`close_body`] without stitching.
fn close_parts(mesh: &TriMesh, skin: &SkinWeights) -> Option<(TriMesh, SkinWeights, CloseReport)> {
    let (separated, separated_skin, copies) = separate_fans(mesh, skin);
    let (mesh, skin) = (&separated, &separated_skin);
    let parts = split_parts(mesh);
    let mut report = CloseReport {
        separated: copies,
        ..CloseReport::default()
    };
    let mut closed: Vec<ClosedPart> = Vec::new();
    for tris in parts {
        let (mut part, mut part_skin) = extract(mesh, skin, &tris);
        let topo = match Topology::build(&part) {
            Ok(t) => t,
            Err(_) => {
                report.dropped.push((tris.len(), NOT_MANIFOLD));
                continue;
            }
        };
        let loops = topo.boundary_loops(&part);
        let fanned = loops
            .iter()
            .filter(|lp| !cap(&mut part, &mut part_skin, lp))
            .count();
        let mut volume = part.signed_volume();
        let turned = volume < 0.0;
        if turned {
            for t in &mut part.triangles {
                t.swap(1, 2);
            }
            volume = -volume;
        }
        closed.push(ClosedPart {
            mesh: part,
            skin: part_skin,
            volume,
            triangles: tris.len(),
            openings: loops.len(),
            fanned,
            turned,
        });
    }
    let largest = closed.iter().map(|c| c.volume).fold(0.0f64, f64::max);
    if largest <= 0.0 {
        return None;
    }
    let mut out = TriMesh::default();
    let mut out_skin = SkinWeights {
        joints: Vec::new(),
        weights: Vec::new(),
    };
    for c in closed {
        if c.volume < MIN_VOLUME_SHARE * largest {
            report
                .dropped
                .push((c.triangles, "too small to be part of the body"));
            continue;
        }
        report.kept.push(c.triangles);
        report.capped += c.openings;
        report.fanned += c.fanned;
        report.flipped += usize::from(c.turned);
        let base = out.positions.len() as u32;
        out.positions.extend_from_slice(&c.mesh.positions);
        out.triangles
            .extend(c.mesh.triangles.iter().map(|t| t.map(|v| v + base)));
        out_skin.joints.extend_from_slice(&c.skin.joints);
        out_skin.weights.extend_from_slice(&c.skin.weights);
    }
    Some((out, out_skin, report))
}

/// `mesh` with the vertices on its openings (edges of one triangle) that lie within
/// `tol` of an earlier such vertex replaced by it, and the triangles that collapse
/// dropped; the vertices replaced are left unused. Returns how many were replaced.
fn stitch(mesh: &TriMesh, tol: f32) -> (TriMesh, usize) {
    let n = mesh.positions.len();
    let mut uses: std::collections::HashMap<(u32, u32), u32> = std::collections::HashMap::new();
    for t in &mesh.triangles {
        for k in 0..3 {
            let (a, b) = (t[k], t[(k + 1) % 3]);
            *uses.entry((a.min(b), a.max(b))).or_default() += 1;
        }
    }
    let mut on_rim = vec![false; n];
    for (&(a, b), &count) in &uses {
        if count == 1 {
            on_rim[a as usize] = true;
            on_rim[b as usize] = true;
        }
    }
    let rim: Vec<u32> = (0..n as u32).filter(|&v| on_rim[v as usize]).collect();
    let points = TriMesh::new(
        rim.iter().map(|&v| mesh.positions[v as usize]).collect(),
        Vec::new(),
    );
    let (_, cluster) = crate::mesh::weld(&points, tol);
    let mut first: std::collections::HashMap<u32, u32> = std::collections::HashMap::new();
    let mut map: Vec<u32> = (0..n as u32).collect();
    let mut joined = 0;
    for (&v, &c) in rim.iter().zip(&cluster) {
        match first.get(&c) {
            Some(&r) => {
                map[v as usize] = r;
                joined += 1;
            }
            None => {
                first.insert(c, v);
            }
        }
    }
    if joined == 0 {
        return (mesh.clone(), 0);
    }
    let triangles = crate::mesh::remap_triangles(&mesh.triangles, &map);
    (TriMesh::new(mesh.positions.clone(), triangles), joined)
}

/// `mesh` with every vertex whose triangles form more than one fan (triangles joined
/// through the edges at the vertex; two openings touching there, as when a triangle
/// pair is missing corner to corner) copied for each fan but the first, with its skin;
/// and how many copies were made. Triangles on an edge of three or more are joined to
/// all of them (such a part is dropped later).
fn separate_fans(mesh: &TriMesh, skin: &SkinWeights) -> (TriMesh, SkinWeights, usize) {
    let n = mesh.positions.len();
    let mut around: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (t, tri) in mesh.triangles.iter().enumerate() {
        for &v in tri {
            around[v as usize].push(t as u32);
        }
    }
    let mut out = mesh.clone();
    let mut out_skin = skin.clone();
    let mut copies = 0;
    for (v, tris) in around.iter().enumerate() {
        if tris.len() < 2 {
            continue;
        }
        // fans: union of the triangles at v that share a second vertex
        let mut fan: Vec<u32> = (0..tris.len() as u32).collect();
        for a in 0..tris.len() {
            for b in a + 1..tris.len() {
                let (ta, tb) = (
                    mesh.triangles[tris[a] as usize],
                    mesh.triangles[tris[b] as usize],
                );
                let shares = ta.iter().any(|&u| u as usize != v && tb.contains(&u));
                if shares {
                    let (ra, rb) = (
                        union_root(&mut fan, a as u32),
                        union_root(&mut fan, b as u32),
                    );
                    fan[rb as usize] = ra;
                }
            }
        }
        let first = union_root(&mut fan, 0);
        let mut copy_of: std::collections::HashMap<u32, u32> = std::collections::HashMap::new();
        for k in 0..tris.len() {
            let r = union_root(&mut fan, k as u32);
            if r == first {
                continue;
            }
            let c = *copy_of.entry(r).or_insert_with(|| {
                out.positions.push(mesh.positions[v]);
                out_skin.joints.push(skin.joints[v]);
                out_skin.weights.push(skin.weights[v]);
                copies += 1;
                (out.positions.len() - 1) as u32
            });
            for corner in out.triangles[tris[k] as usize].iter_mut() {
                if *corner as usize == v {
                    *corner = c;
                }
            }
        }
    }
    (out, out_skin, copies)
}

/// The triangles of each part connected through shared vertices (whatever the
/// manifoldness), each list ascending; parts in the order of their first triangle.
fn split_parts(mesh: &TriMesh) -> Vec<Vec<usize>> {
    let mut parent = vertex_forest(mesh);
    let mut index = std::collections::HashMap::new();
    let mut parts: Vec<Vec<usize>> = Vec::new();
    for (i, t) in mesh.triangles.iter().enumerate() {
        let root = union_root(&mut parent, t[0]);
        let k = *index.entry(root).or_insert_with(|| {
            parts.push(Vec::new());
            parts.len() - 1
        });
        parts[k].push(i);
    }
    parts
}

/// The sub-mesh of triangles `tris`, its vertices in their order in `mesh` (so a mesh
/// of one part comes out as it went in).
fn extract(mesh: &TriMesh, skin: &SkinWeights, tris: &[usize]) -> (TriMesh, SkinWeights) {
    let mut used: Vec<u32> = tris.iter().flat_map(|&t| mesh.triangles[t]).collect();
    used.sort_unstable();
    used.dedup();
    let map: std::collections::HashMap<u32, u32> = used
        .iter()
        .enumerate()
        .map(|(new, &old)| (old, new as u32))
        .collect();
    let part = TriMesh::new(
        used.iter().map(|&v| mesh.positions[v as usize]).collect(),
        tris.iter()
            .map(|&t| mesh.triangles[t].map(|v| map[&v]))
            .collect(),
    );
    let part_skin = SkinWeights {
        joints: used.iter().map(|&v| skin.joints[v as usize]).collect(),
        weights: used.iter().map(|&v| skin.weights[v as usize]).collect(),
    };
    (part, part_skin)
}

/// Caps the opening `lp` (a boundary loop in its triangles' direction).
/// [`Topology::build`] has checked that the triangles around every vertex form one fan,
/// so every loop is simple in space (each boundary vertex has one boundary edge out).
///
/// Seen along its mean normal (Newell's), an opening that does not cross itself there
/// is triangulated in that view by ear clipping, its best-shaped ear first: a cut
/// across the shoulders is an opening that bends round the neck and the arms, and a
/// fan about its centroid would stand out of the skin between them (the part's inside
/// then reaches out of the body). Otherwise the opening gets a fan about its centroid.
///
/// Returns whether the opening was triangulated (`false`: it has the fan).
fn cap(part: &mut TriMesh, skin: &mut SkinWeights, lp: &[u32]) -> bool {
    match ear_clip(part, lp) {
        Some(triangles) => {
            part.triangles.extend(triangles);
            true
        }
        None => {
            cap_with_fan(part, skin, lp);
            false
        }
    }
}

/// The cap of `lp` (see [`cap`]) as triangles of the loop's own vertices, facing out of
/// the part (the loop reversed), or `None` where the opening seen along its mean normal
/// crosses itself, is too thin to have one, leaves no ear to clip, or has more than
/// [`MAX_CLIPPED_OPENING`] vertices.
fn ear_clip(part: &TriMesh, lp: &[u32]) -> Option<Vec<[u32; 3]>> {
    // the cap runs against the loop
    let ring: Vec<u32> = lp.iter().rev().copied().collect();
    let n = ring.len();
    if !(3..=MAX_CLIPPED_OPENING).contains(&n) {
        return None;
    }
    let at = |i: usize| part.positions[ring[i] as usize].as_dvec3();
    let mut normal = DVec3::ZERO;
    for i in 0..n {
        normal += at(i).cross(at((i + 1) % n));
    }
    let perimeter: f64 = (0..n).map(|i| (at((i + 1) % n) - at(i)).length()).sum();
    // twice the area seen along the normal, against the perimeter's square
    if normal.length() < 1e-6 * perimeter * perimeter {
        return None;
    }
    let w = normal.normalize();
    let u = w.any_orthonormal_vector();
    let v = w.cross(u);
    let q: Vec<DVec2> = (0..n)
        .map(|i| DVec2::new(at(i).dot(u), at(i).dot(v)))
        .collect();
    // seen so, the loop must not cross itself
    let crosses = |a: DVec2, b: DVec2, c: DVec2, d: DVec2| {
        let side = |p: DVec2, q: DVec2, r: DVec2| (q - p).perp_dot(r - p);
        side(a, b, c) * side(a, b, d) < 0.0 && side(c, d, a) * side(c, d, b) < 0.0
    };
    for i in 0..n {
        for j in i + 2..n {
            if (j + 1) % n == i {
                continue;
            }
            if crosses(q[i], q[(i + 1) % n], q[j], q[(j + 1) % n]) {
                return None;
            }
        }
    }
    let tiny = 1e-9 * perimeter * perimeter;
    // a diagonal along an edge the part already has would give that edge three faces
    let on_loop: std::collections::HashSet<u32> = ring.iter().copied().collect();
    let key = |a: u32, b: u32| (a.min(b), a.max(b));
    let edges: std::collections::HashSet<(u32, u32)> = part
        .triangles
        .iter()
        .flat_map(|t| [(t[0], t[1]), (t[1], t[2]), (t[2], t[0])])
        .filter(|(a, b)| on_loop.contains(a) && on_loop.contains(b))
        .map(|(a, b)| key(a, b))
        .collect();
    let mut left: Vec<usize> = (0..n).collect();
    // whether the corner at left[k] is an ear, and how well shaped (0 when not)
    let ear = |left: &[usize], k: usize| -> f64 {
        let m = left.len();
        let (a, b, c) = (left[(k + m - 1) % m], left[k], left[(k + 1) % m]);
        let area2 = (q[b] - q[a]).perp_dot(q[c] - q[a]);
        if area2 <= tiny || (m > 3 && edges.contains(&key(ring[a], ring[c]))) {
            return 0.0; // reflex or flat, or a diagonal the part has as an edge
        }
        let inside = |p: DVec2| {
            (q[b] - q[a]).perp_dot(p - q[a]) >= 0.0
                && (q[c] - q[b]).perp_dot(p - q[b]) >= 0.0
                && (q[a] - q[c]).perp_dot(p - q[c]) >= 0.0
        };
        let blocked = left
            .iter()
            .any(|&o| o != a && o != b && o != c && q[o] != q[a] && q[o] != q[c] && inside(q[o]));
        if blocked {
            return 0.0;
        }
        // 1 for an equilateral triangle, towards 0 for a sliver
        let sq = (q[b] - q[a]).length_squared()
            + (q[c] - q[b]).length_squared()
            + (q[a] - q[c]).length_squared();
        2.0 * 3f64.sqrt() * area2 / sq
    };
    let mut quality: Vec<f64> = (0..n).map(|k| ear(&left, k)).collect();
    let mut triangles = Vec::with_capacity(n - 2);
    let best = |quality: &[f64]| {
        quality
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(k, &x)| (k, x))
    };
    let mut remeasures = 0;
    while left.len() > 3 {
        let (mut k, mut top) = best(&quality)?;
        if top <= 0.0 {
            remeasures += 1;
            if remeasures > EAR_REMEASURES {
                return None;
            }
            // only the clipped corner's neighbours were measured again, and an ear
            // that the clipped tip alone blocked may have opened elsewhere
            quality = (0..left.len()).map(|k| ear(&left, k)).collect();
            (k, top) = best(&quality)?;
            if top <= 0.0 {
                return None;
            }
        }
        let m = left.len();
        triangles.push([
            ring[left[(k + m - 1) % m]],
            ring[left[k]],
            ring[left[(k + 1) % m]],
        ]);
        left.remove(k);
        quality.remove(k);
        let m = left.len();
        let (before, after) = ((k + m - 1) % m, k % m);
        quality[before] = ear(&left, before);
        quality[after] = ear(&left, after);
    }
    let (a, b, c) = (left[0], left[1], left[2]);
    if (q[b] - q[a]).perp_dot(q[c] - q[a]) <= tiny {
        return None;
    }
    triangles.push([ring[a], ring[b], ring[c]]);
    Some(triangles)
}

/// Caps the opening `lp` with a fan around its centroid, a new vertex skinned as the
/// opening's vertices on average.
fn cap_with_fan(part: &mut TriMesh, skin: &mut SkinWeights, lp: &[u32]) {
    let centroid = lp.iter().map(|&v| part.positions[v as usize]).sum::<Vec3>() / lp.len() as f32;
    let mut acc = [0f32; crate::skeleton::JOINT_COUNT];
    for &v in lp {
        let v = v as usize;
        for k in 0..skin.joints[v].len() {
            if let Some(a) = acc.get_mut(skin.joints[v][k] as usize) {
                *a += skin.weights[v][k];
            }
        }
    }
    let mut pairs: Vec<(u16, f32)> = acc
        .iter()
        .enumerate()
        .filter(|(_, w)| **w > 0.0)
        .map(|(b, w)| (b as u16, *w))
        .collect();
    let (j, w) = SkinWeights::pack(&mut pairs);
    let c = part.positions.len() as u32;
    part.positions.push(centroid);
    skin.joints.push(j);
    skin.weights.push(w);
    for k in 0..lp.len() {
        let (a, b) = (lp[k], lp[(k + 1) % lp.len()]);
        // the existing triangle runs a → b; the cap runs b → a
        part.triangles.push([b, a, c]);
    }
}

/// Number of parts of `mesh` connected through shared vertices.
pub(super) fn part_count(mesh: &TriMesh) -> usize {
    split_parts(mesh).len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::{Body, small_test_body as shared_body};

    /// The body's mesh with the triangles above `cut` (metres) removed: an opening at
    /// the top of the head, as where a separate scalp or hair mesh joins.
    fn opened(b: &Body, cut: f32) -> TriMesh {
        let mut m = b.mesh.clone();
        m.triangles.retain(|t| {
            t.iter()
                .map(|&v| m.positions[v as usize].y)
                .fold(f32::MIN, f32::max)
                < cut
        });
        m
    }

    fn append(m: &mut TriMesh, skin: &mut SkinWeights, pos: &[Vec3], tris: &[[u32; 3]]) {
        let base = m.positions.len() as u32;
        m.positions.extend_from_slice(pos);
        m.triangles.extend(tris.iter().map(|t| t.map(|v| v + base)));
        skin.joints.extend(pos.iter().map(|_| [15, 0, 0, 0]));
        skin.weights
            .extend(pos.iter().map(|_| [1.0, 0.0, 0.0, 0.0]));
    }

    /// A prism 1 m high on a U-shaped floor (3 × 3 m with a 1 × 2 m notch), open at the
    /// top: the opening's centroid lies in the notch, outside the U, so a fan about it
    /// would span the notch and a point over it would read as inside. The
    /// cap is the U itself: the part is closed, encloses the U's 7 m² × 1 m, every cap
    /// triangle lies inside the U, and there is no new vertex.
    #[test]
    fn a_u_shaped_opening_is_capped_with_the_u_itself() {
        let u = [
            (0.0, 0.0),
            (3.0, 0.0),
            (3.0, 3.0),
            (2.0, 3.0),
            (2.0, 1.0),
            (1.0, 1.0),
            (1.0, 3.0),
            (0.0, 3.0),
        ];
        let n = u.len() as u32;
        let mut positions: Vec<Vec3> = u.iter().map(|&(x, z)| Vec3::new(x, 0.0, z)).collect();
        positions.extend(u.iter().map(|&(x, z)| Vec3::new(x, 1.0, z)));
        // the floor, facing down, and the walls, facing out
        let mut triangles = vec![
            [0, 1, 4],
            [0, 4, 5],
            [1, 2, 3],
            [1, 3, 4],
            [0, 5, 6],
            [0, 6, 7],
        ];
        for i in 0..n {
            let j = (i + 1) % n;
            triangles.extend([[j, i, i + n], [j, i + n, j + n]]);
        }
        let mut part = TriMesh::new(positions, triangles);
        let mut skin = SkinWeights {
            joints: vec![[3, 0, 0, 0]; 2 * n as usize],
            weights: vec![[1.0, 0.0, 0.0, 0.0]; 2 * n as usize],
        };
        let walls = part.triangles.len();
        let loops = Topology::build(&part)
            .expect("open prism")
            .boundary_loops(&part);
        assert_eq!(loops.len(), 1);
        assert!(cap(&mut part, &mut skin, &loops[0]), "triangulated");
        assert_eq!(part.vertex_count(), 2 * n as usize, "no new vertex");
        assert!(Topology::build(&part).expect("manifold").is_closed());
        assert!(
            (part.signed_volume().abs() - 7.0).abs() < 1e-5,
            "{}",
            part.signed_volume()
        );
        let inside_u = |p: Vec3| {
            (0.0..=3.0).contains(&p.x)
                && (0.0..=3.0).contains(&p.z)
                && !(p.x > 1.0 && p.x < 2.0 && p.z > 1.0)
        };
        for t in &part.triangles[walls..] {
            let c = t.iter().map(|&v| part.positions[v as usize]).sum::<Vec3>() / 3.0;
            assert!(inside_u(c) && c.y == 1.0, "cap triangle {t:?} at {c}");
        }
        // what a fan about the centroid would have given
        let mut fanned = part.clone();
        fanned.triangles.truncate(walls);
        let mut fan_skin = skin.clone();
        cap_with_fan(&mut fanned, &mut fan_skin, &loops[0]);
        // a point over the notch, 5 cm above the rim, is outside the part; a fan about
        // the centroid (which lies in the notch) spans the notch, its triangles there
        // facing down, and the point reads as inside
        let notch = Vec3::new(1.8, 1.05, 1.5);
        let outside = |m: &TriMesh| {
            let mut m = m.clone();
            if m.signed_volume() < 0.0 {
                m.flip_orientation();
            }
            crate::mesh::MeshQuery::build(&m)
                .expect("query")
                .signed_distance(notch)
                > 0.0
        };
        assert!(outside(&part));
        assert!(!outside(&fanned));
        // the fan's centre is skinned as the opening's vertices
        assert_eq!(fanned.vertex_count(), 2 * n as usize + 1);
        assert_eq!(fan_skin.joints.last().map(|j| j[0]), Some(3));
    }

    #[test]
    fn an_opened_body_with_eyes_and_a_fin_is_capped_and_the_rest_dropped() {
        let b = shared_body();
        let top = b.mesh.bounds().expect("bounds").1.y;
        let mut mesh = opened(b, top - 0.03);
        let removed = b.mesh.triangles.len() - mesh.triangles.len();
        assert!(removed > 5, "{removed} triangles removed");
        let mut skin = b.skin.clone();
        // an eye: a closed tetrahedron of 1 cm inside the head
        let c = Vec3::new(0.03, top - 0.1, 0.08);
        let s = 0.01;
        let eye = [
            c + Vec3::new(s, s, s),
            c + Vec3::new(s, -s, -s),
            c + Vec3::new(-s, s, -s),
            c + Vec3::new(-s, -s, s),
        ];
        append(
            &mut mesh,
            &mut skin,
            &eye,
            &[[0, 1, 2], [0, 3, 1], [0, 2, 3], [1, 3, 2]],
        );
        // a fin: three triangles on one edge, not a manifold
        let f = Vec3::new(0.5, 1.0, 0.0);
        let fin = [
            f,
            f + Vec3::Y * 0.1,
            f + Vec3::X * 0.1,
            f + Vec3::Z * 0.1,
            f - Vec3::X * 0.1,
        ];
        append(
            &mut mesh,
            &mut skin,
            &fin,
            &[[0, 1, 2], [0, 1, 3], [0, 1, 4]],
        );
        // the mesh as it comes is no closed manifold at all
        assert!(Topology::build(&mesh).is_err());

        let (closed, closed_skin, report) = close_body(&mesh, &skin).expect("a body");
        assert_eq!(report.kept.len(), 1, "{report:?}");
        assert_eq!(report.capped, 1, "{report:?}");
        assert_eq!(report.flipped, 0);
        assert_eq!(report.dropped.len(), 2, "{report:?}");
        assert!(report.dropped.contains(&(3, "not an oriented 2-manifold")));
        assert!(
            report
                .dropped
                .contains(&(4, "too small to be part of the body"))
        );
        assert!(!report.unchanged());
        let topo = Topology::build(&closed).expect("manifold");
        assert!(topo.is_closed());
        assert_eq!(topo.component_count(&closed), 1);
        closed_skin.validate(closed.vertex_count()).expect("skin");
        // the cap is the opening triangulated: no new vertex, nearly the same volume
        assert_eq!(
            closed.vertex_count(),
            b.mesh.vertex_count() - {
                // vertices only the removed triangles used
                let mut used = vec![false; b.mesh.vertex_count()];
                for t in &opened(b, top - 0.03).triangles {
                    for &v in t {
                        used[v as usize] = true;
                    }
                }
                used.iter().filter(|u| !**u).count()
            }
        );
        let (v0, v1) = (b.mesh.signed_volume(), closed.signed_volume());
        assert!(
            v1 > 0.0 && ((v1 - v0) / v0).abs() < 0.01,
            "volume {v0} → {v1}"
        );
    }

    #[test]
    fn an_inside_out_body_is_turned_outwards_and_a_whole_body_is_kept_as_it_is() {
        let b = shared_body();
        let (same, _, report) = close_body(&b.mesh, &b.skin).expect("a body");
        assert!(report.unchanged(), "{report:?}");
        assert!(same.triangles == b.mesh.triangles && same.positions == b.mesh.positions);

        let mut inverted = b.mesh.clone();
        for t in &mut inverted.triangles {
            t.swap(0, 1);
        }
        assert!(inverted.signed_volume() < 0.0);
        let (fixed, _, report) = close_body(&inverted, &b.skin).expect("a body");
        assert_eq!(report.flipped, 1);
        assert!((fixed.signed_volume() - b.mesh.signed_volume()).abs() < 1e-9);
    }

    proptest::proptest! {
        /// An opening of any star-shaped outline (3–60 corners at random angles and
        /// radii, as jagged as they come), at the top of a prism whose floor is a fan
        /// about the star's centre: the cap is triangles of the opening's own corners,
        /// each facing up and inside the outline, together covering the outline once
        /// (their areas sum to its area), and the prism is closed.
        #[test]
        fn any_star_shaped_opening_is_covered_once(
            corners in proptest::collection::vec((0.0f32..1.0, 0.2f32..1.0), 3..60),
        ) {
            let mut angles: Vec<(f32, f32)> = corners
                .iter()
                .enumerate()
                .map(|(i, &(a, r))| {
                    // spread over the turn so that no gap reaches half of it
                    let step = std::f32::consts::TAU / corners.len() as f32;
                    (step * (i as f32 + 0.8 * a), r)
                })
                .collect();
            angles.sort_by(|a, b| a.0.total_cmp(&b.0));
            let ring: Vec<Vec3> = angles
                .iter()
                .map(|&(a, r)| Vec3::new(r * a.cos(), 0.0, -r * a.sin()))
                .collect();
            let n = ring.len() as u32;
            let mut positions = ring.clone();
            positions.extend(ring.iter().map(|p| *p + Vec3::Y));
            positions.push(Vec3::ZERO);
            let mut triangles = Vec::new();
            for i in 0..n {
                let j = (i + 1) % n;
                // the floor faces down, the walls out
                triangles.extend([[j, i, 2 * n], [i, j, j + n], [i, j + n, i + n]]);
            }
            let mut part = TriMesh::new(positions, triangles);
            if part.signed_volume() < 0.0 {
                part.flip_orientation();
            }
            let loops = Topology::build(&part).expect("open prism").boundary_loops(&part);
            proptest::prop_assert_eq!(loops.len(), 1);
            let cap = ear_clip(&part, &loops[0]);
            proptest::prop_assert!(cap.is_some());
            let cap = cap.unwrap_or_default();
            proptest::prop_assert_eq!(cap.len(), n as usize - 2);
            let area2 = |p: Vec3, q: Vec3, r: Vec3| (q - p).cross(r - p).y;
            let outline: f32 = (0..n as usize)
                .map(|i| area2(Vec3::ZERO, ring[i], ring[(i + 1) % n as usize]))
                .sum();
            let mut covered = 0.0;
            for t in &cap {
                let [a, b, c] = t.map(|v| part.positions[v as usize]);
                let a2 = area2(a, b, c);
                proptest::prop_assert!(a2 > 0.0, "{t:?} faces down");
                covered += a2;
            }
            proptest::prop_assert!((covered - outline).abs() < 1e-4 * outline, "{covered} against {outline}");
            part.triangles.extend(cap);
            proptest::prop_assert!(Topology::build(&part).map(|t| t.is_closed()).unwrap_or(false));
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(32))]
        /// Whatever holes an avatar's mesh has (a patch of up to 15 cm around a random
        /// vertex removed, or up to 10 % of the triangles anywhere, openings touching
        /// corner to corner), what comes out is a closed, outward-oriented 2-manifold
        /// with a skin row per vertex, or nothing.
        #[test]
        fn whatever_is_removed_the_result_is_closed_or_nothing(
            seed in 0u64..u64::MAX,
            share in 0.0f32..1.0,
            patch in proptest::bool::ANY,
        ) {
            let b = shared_body();
            let mut rng = crate::bake::Rng::new(seed);
            let centre = b.mesh.positions[(rng.next_u64() % b.mesh.positions.len() as u64) as usize];
            let mut mesh = b.mesh.clone();
            mesh.triangles.retain(|t| {
                if patch {
                    t.iter().all(|&v| (mesh.positions[v as usize] - centre).length() > 0.15 * share)
                } else {
                    rng.uniform() >= 0.1 * share
                }
            });
            let got = close_body(&mesh, &b.skin);
            if let Some((closed, skin, report)) = got {
                let topo = Topology::build(&closed);
                proptest::prop_assert!(topo.is_ok(), "{report:?}");
                proptest::prop_assert!(topo.map(|t| t.is_closed()).unwrap_or(false));
                proptest::prop_assert!(closed.signed_volume() > 0.0);
                proptest::prop_assert!(skin.validate(closed.vertex_count()).is_ok());
                proptest::prop_assert!(!report.kept.is_empty());
            }
        }
    }

    /// Two triangles removed corner to corner leave two openings touching at one
    /// vertex: it is copied, one for each fan of triangles around it, and the two
    /// openings, now one loop through both copies, are capped.
    #[test]
    fn openings_touching_at_a_vertex_are_separated_and_capped() {
        let b = shared_body();
        let topo = Topology::build(&b.mesh).expect("manifold");
        // a vertex and two of its triangles that share only it
        let mut around: Vec<Vec<usize>> = vec![Vec::new(); b.mesh.vertex_count()];
        for (t, tri) in b.mesh.triangles.iter().enumerate() {
            for &v in tri {
                around[v as usize].push(t);
            }
        }
        let (v, ta, tb) = (0..b.mesh.vertex_count())
            .filter(|&v| topo.degree(v as u32) >= 6)
            .find_map(|v| {
                let ts = &around[v];
                let ta = ts[0];
                ts.iter()
                    .copied()
                    .find(|&tb| {
                        b.mesh.triangles[tb]
                            .iter()
                            .filter(|u| b.mesh.triangles[ta].contains(u))
                            .count()
                            == 1
                    })
                    .map(|tb| (v, ta, tb))
            })
            .expect("a vertex of degree 6");
        let mut mesh = b.mesh.clone();
        mesh.triangles = mesh
            .triangles
            .iter()
            .enumerate()
            .filter(|(t, _)| *t != ta && *t != tb)
            .map(|(_, t)| *t)
            .collect();
        assert!(Topology::build(&mesh).is_err(), "vertex {v} pinches");
        let (closed, _, report) = close_body(&mesh, &b.skin).expect("a body");
        assert_eq!(report.separated, 1, "{report:?}");
        assert_eq!(report.capped, 1, "{report:?}");
        assert_eq!(closed.vertex_count(), b.mesh.vertex_count() + 2);
        assert!(Topology::build(&closed).expect("manifold").is_closed());
    }

    #[test]
    fn a_mesh_with_no_volume_is_no_body() {
        let mut mesh = TriMesh::default();
        let mut skin = SkinWeights {
            joints: Vec::new(),
            weights: Vec::new(),
        };
        // a flat quad: capping its one opening encloses nothing
        append(
            &mut mesh,
            &mut skin,
            &[Vec3::ZERO, Vec3::X, Vec3::X + Vec3::Y, Vec3::Y],
            &[[0, 1, 2], [0, 2, 3]],
        );
        assert!(close_body(&mesh, &skin).is_none());
        assert!(close_body(&TriMesh::default(), &skin).is_none());
    }
}
