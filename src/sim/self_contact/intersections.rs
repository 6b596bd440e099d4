//! Where a garment crosses itself: a count of its edges that pass through its own
//! triangles (reported by `drape` and `eval`).

use glam::DVec3;

/// Edges of `triangles` at `y` that pass through a triangle they do not share a vertex
/// with: where the garment crosses itself (each crossing line between two layers shows
/// as a few such edges). Counted over edges as (edge, triangle) pairs.
pub fn self_intersections(y: &[DVec3], triangles: &[[u32; 3]]) -> usize {
    let mut edges: Vec<(u32, u32)> = triangles
        .iter()
        .flat_map(|t| [(t[0], t[1]), (t[1], t[2]), (t[2], t[0])])
        .map(|(a, b)| (a.min(b), a.max(b)))
        .collect();
    edges.sort_unstable();
    edges.dedup();
    let longest = edges
        .iter()
        .map(|&(a, b)| y[a as usize].distance(y[b as usize]))
        .fold(0.0, f64::max);
    if !(longest.is_finite() && longest > 0.0) {
        return 0;
    }
    // a grid of triangles by their boxes, cells the longest edge wide; an edge asks the
    // cells its box covers
    let h = longest;
    let cell = |p: DVec3| (p / h).floor().as_i64vec3();
    let mut grid: std::collections::HashMap<glam::I64Vec3, Vec<u32>> = Default::default();
    for (t, tri) in triangles.iter().enumerate() {
        let [a, b, c] = tri.map(|v| y[v as usize]);
        let (lo, hi) = (cell(a.min(b).min(c)), cell(a.max(b).max(c)));
        for i in lo.x..=hi.x {
            for j in lo.y..=hi.y {
                for k in lo.z..=hi.z {
                    grid.entry(glam::I64Vec3::new(i, j, k))
                        .or_default()
                        .push(t as u32);
                }
            }
        }
    }
    let mut count = 0;
    let mut seen = Vec::new();
    for &(ea, eb) in &edges {
        let (p, q) = (y[ea as usize], y[eb as usize]);
        let (lo, hi) = (cell(p.min(q)), cell(p.max(q)));
        seen.clear();
        for i in lo.x..=hi.x {
            for j in lo.y..=hi.y {
                for k in lo.z..=hi.z {
                    if let Some(ts) = grid.get(&glam::I64Vec3::new(i, j, k)) {
                        seen.extend_from_slice(ts);
                    }
                }
            }
        }
        seen.sort_unstable();
        seen.dedup();
        for &t in &seen {
            let tri = triangles[t as usize];
            if tri.contains(&ea) || tri.contains(&eb) {
                continue;
            }
            let [a, b, c] = tri.map(|v| y[v as usize]);
            if segment_hits_triangle(p, q, a, b, c) {
                count += 1;
            }
        }
    }
    count
}

/// Whether the segment p–q passes through the triangle a b c (Möller–Trumbore).
fn segment_hits_triangle(p: DVec3, q: DVec3, a: DVec3, b: DVec3, c: DVec3) -> bool {
    let dir = q - p;
    let (e1, e2) = (b - a, c - a);
    let pv = dir.cross(e2);
    let det = e1.dot(pv);
    if det.abs() < 1e-18 {
        return false;
    }
    let inv = 1.0 / det;
    let tv = p - a;
    let u = tv.dot(pv) * inv;
    if !(0.0..=1.0).contains(&u) {
        return false;
    }
    let qv = tv.cross(e1);
    let v = dir.dot(qv) * inv;
    if v < 0.0 || u + v > 1.0 {
        return false;
    }
    let t = e2.dot(qv) * inv;
    (0.0..=1.0).contains(&t)
}
