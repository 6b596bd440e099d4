//! Capping an imported part's openings, so that the part encloses a volume: each
//! opening triangulated as seen along its mean normal (ear clipping), or where that
//! cannot be done, a fan about its centroid.

use glam::{DVec2, DVec3, Vec3};

use crate::mesh::TriMesh;

use super::SkinWeights;

/// Openings of more vertices than this are capped with a fan, not ear-clipped: checking
/// the opening for crossings and its corners for ears takes time in the square of its
/// vertex count (a neck or a sleeve has a few dozen to a few hundred).
pub(super) const MAX_CLIPPED_OPENING: usize = 4096;

/// How many times ear clipping measures every corner again when no measured corner is
/// an ear (see [`ear_clip`]) before it gives the opening up to a fan: each time costs
/// the square of the opening's vertex count.
const EAR_REMEASURES: usize = 8;

/// Caps the opening `lp` (a boundary loop in its triangles' direction).
/// [`crate::mesh::Topology::build`] has checked that the triangles around every vertex form one fan,
/// so every loop is simple in space (each boundary vertex has one boundary edge out).
///
/// Seen along its mean normal (Newell's), an opening that does not cross itself there
/// is triangulated in that view by ear clipping, its best-shaped ear first: a cut
/// across the shoulders is an opening that bends round the neck and the arms, and a
/// fan about its centroid would stand out of the skin between them (the part's inside
/// then reaches out of the body). Otherwise the opening gets a fan about its centroid.
///
/// Returns whether the opening was triangulated (`false`: it has the fan).
pub(super) fn cap(part: &mut TriMesh, skin: &mut SkinWeights, lp: &[u32]) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::Topology;

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
}
