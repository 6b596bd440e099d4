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

use crate::mesh::{Topology, TriMesh, union_root, vertex_forest};

use super::super::skin::SkinWeights;

mod cap;

use cap::cap;

/// Parts enclosing less than this share of the largest part's volume (once their
/// openings are capped) are dropped: eyes, teeth, hair cards, eyelashes.
pub const MIN_VOLUME_SHARE: f64 = 0.02;

/// Openings of different parts (or of one part) whose vertices lie closer than this,
/// metres, are stitched together, vertex to vertex, before anything is capped: a head
/// modelled apart from the body meets it at the neck, and two closed parts touching
/// there would make the skin near the seam look inside one of them (a collar vertex
/// next to the seam, measured against the head's cap, is "inside" by its distance).
pub const SEAM_TOLERANCE: f32 = 0.001;

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
    /// be triangulated as seen along their mean normal (they cross themselves seen so,
    /// or have over 4 096 vertices): where such an opening bends, the fan can stand out
    /// of the skin, and the body near it is worth a look.
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

/// Number of parts of `mesh` connected through shared vertices.
pub(super) fn part_count(mesh: &TriMesh) -> usize {
    split_parts(mesh).len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::{Body, small_test_body as shared_body};
    use glam::Vec3;

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
