//! Cloth self-contact: a vertex is kept `margin` away from every triangle of the same
//! garment that is not next to it, so that a sleeve lies on the torso instead of
//! passing through it, and a fold of cloth lies on the cloth below.
//!
//! Energy of a vertex–triangle pair: IPC's barrier E = −A·κ·(d − δ)²·ln(d/δ) for
//! d < δ (A the vertex's area, κ the stiffness, δ the margin), d the unsigned distance
//! from the vertex to the closest point of the triangle: C² at d = δ, so Newton's
//! method meets no kink where two layers come within reach, and unbounded as d → 0.
//! The body contact's cubic penalty, whose force stays finite, let a sleeve squeezed
//! between arm and torso be pushed through the torso's cloth by the body contact.
//! Cloth has two sides, so d is unsigned (a layer is repelled from either side); a
//! vertex near an edge feels both triangles of the edge.
//!
//! Derivatives: d² = min over the triangle's barycentric coordinates β of
//! |p − Σ_k λ_k(β) x_k|², so by the envelope theorem ∇(d²) is that of the fixed closest
//! point, and its Hessian is f_qq − f_qβ f_ββ⁻¹ f_βq over the coordinates left free by
//! the closest feature (two on the face, one on an edge, none at a corner): exact
//! inside each feature's region.
//!
//! What is not a contact: a triangle that holds the vertex or one of its neighbours
//! (it is the cloth's own surface there, and the membrane and bending keep it), and a
//! pair that the garment as modelled already places within the margin (layers stitched
//! together, a collar lying on the shirt, or a model that crosses itself: the penalty
//! would push them apart and could not tell which side is which).
//!
//! Not covered: two edges crossing with all their vertices farther than the margin from
//! the other's triangles (rare at cloth resolutions a margin apart), and a solve that
//! starts with layers already crossed (they stay crossed; [`SelfContact::crossing`]
//! only keeps a step from crossing them).

use glam::{DMat3, DVec3};

use crate::mesh::{Feature, closest_on_triangle_f64};

/// A vertex–triangle pair within reach: vertex index and triangle index.
pub(crate) type Pair = (u32, u32);

/// The self-contact model of one garment.
///
/// Invariants: `ring[ring_start[v]..ring_start[v + 1]]` holds `v` and its neighbours
/// (sorted); `excluded` is sorted.
pub(crate) struct SelfContact {
    /// Margin δ, metres.
    pub(crate) margin: f64,
    /// Stiffness κ, N/m³.
    pub(crate) stiffness: f64,
    ring_start: Vec<u32>,
    ring: Vec<u32>,
    excluded: Vec<Pair>,
    /// Grid cell size, metres (the longest edge of the garment as modelled, at least
    /// the margin).
    cell: f64,
}

/// One pair's distance d (metres) with its gradient and Hessian over the 12
/// coordinates q = (p, x₀, x₁, x₂).
#[derive(Clone, Debug)]
pub(crate) struct PairDistance {
    pub(crate) d: f64,
    pub(crate) grad: [DVec3; 4],
    /// `hess[i][j]` = ∂²d/∂q_i∂q_j.
    pub(crate) hess: [[DMat3; 4]; 4],
}

impl SelfContact {
    /// The model of a garment with `triangles` over `positions` (as modelled), its
    /// neighbour lists given by `neighbors(v)`.
    pub(crate) fn new(
        positions: &[DVec3],
        triangles: &[[u32; 3]],
        neighbors: impl Fn(u32) -> Vec<u32>,
        margin: f64,
        stiffness: f64,
    ) -> Self {
        let mut ring_start = Vec::with_capacity(positions.len() + 1);
        let mut ring = Vec::new();
        ring_start.push(0);
        for v in 0..positions.len() as u32 {
            let mut r = neighbors(v);
            r.push(v);
            r.sort_unstable();
            r.dedup();
            ring.extend(r);
            ring_start.push(ring.len() as u32);
        }
        let longest = triangles
            .iter()
            .flat_map(|t| {
                [(0, 1), (1, 2), (2, 0)]
                    .map(|(i, j)| positions[t[i] as usize].distance(positions[t[j] as usize]))
            })
            .fold(0.0, f64::max);
        let mut model = SelfContact {
            margin,
            stiffness,
            ring_start,
            ring,
            excluded: Vec::new(),
            cell: longest.max(margin).max(1e-4),
        };
        let mut excluded = model.pairs(positions, triangles, margin);
        excluded.sort_unstable();
        model.excluded = excluded;
        model
    }

    /// Pairs the garment as modelled places within the margin (not contacts).
    #[cfg(test)]
    pub(crate) fn excluded_count(&self) -> usize {
        self.excluded.len()
    }

    fn near(&self, v: u32, tri: &[u32; 3]) -> bool {
        let r = &self.ring
            [self.ring_start[v as usize] as usize..self.ring_start[v as usize + 1] as usize];
        tri.iter().any(|w| r.binary_search(w).is_ok())
    }

    /// Every vertex–triangle pair at `y` closer than `reach` (metres) that is a
    /// contact (not next to each other, not excluded), sorted by vertex then triangle.
    pub(crate) fn pairs(&self, y: &[DVec3], triangles: &[[u32; 3]], reach: f64) -> Vec<Pair> {
        self.pairs_where(y, triangles, reach, true)
    }

    /// Pairs a step must not carry a vertex through: as [`SelfContact::pairs`], and also
    /// the triangles that hold a neighbour of the vertex (not contacts, since the two
    /// sides of a crease that close lie within the margin, but a vertex passing through
    /// one is the cloth crumpling through itself).
    pub(crate) fn guarded_pairs(
        &self,
        y: &[DVec3],
        triangles: &[[u32; 3]],
        reach: f64,
    ) -> Vec<Pair> {
        self.pairs_where(y, triangles, reach, false)
    }

    fn pairs_where(
        &self,
        y: &[DVec3],
        triangles: &[[u32; 3]],
        reach: f64,
        contacts: bool,
    ) -> Vec<Pair> {
        let h = self.cell.max(reach);
        let key = |p: DVec3| -> u64 {
            let c = (p / h).floor();
            let pack = |x: f64| (x as i64 as u64) & 0x1f_ffff;
            (pack(c.x) << 42) | (pack(c.y) << 21) | pack(c.z)
        };
        let mut grid: Vec<(u64, u32)> = Vec::with_capacity(triangles.len() * 4);
        for (t, tri) in triangles.iter().enumerate() {
            let [a, b, c] = tri.map(|v| y[v as usize]);
            let lo = ((a.min(b).min(c) - DVec3::splat(reach)) / h).floor();
            let hi = ((a.max(b).max(c) + DVec3::splat(reach)) / h).floor();
            // a triangle stretched over absurdly many cells (a diverging state) is
            // left out of the grid rather than filling memory
            let span = (hi - lo + DVec3::ONE).element_product();
            if !(span.is_finite() && span <= 4096.0) {
                continue;
            }
            for i in lo.x as i64..=hi.x as i64 {
                for j in lo.y as i64..=hi.y as i64 {
                    for k in lo.z as i64..=hi.z as i64 {
                        let p = (DVec3::new(i as f64, j as f64, k as f64) + 0.5) * h;
                        grid.push((key(p), t as u32));
                    }
                }
            }
        }
        grid.sort_unstable();
        let mut out = Vec::new();
        for (v, &p) in y.iter().enumerate() {
            if !p.is_finite() {
                continue;
            }
            let k = key(p);
            let start = grid.partition_point(|e| e.0 < k);
            let mut last = None;
            // sorted by (cell, triangle): a triangle listed twice under one key (cells
            // whose packed coordinates wrap onto each other) is taken once
            for &(_, t) in grid[start..].iter().take_while(|e| e.0 == k) {
                if last == Some(t) {
                    continue;
                }
                last = Some(t);
                let tri = &triangles[t as usize];
                if if contacts {
                    self.near(v as u32, tri)
                } else {
                    tri.contains(&(v as u32))
                } {
                    continue;
                }
                if self.excluded.binary_search(&(v as u32, t)).is_ok() {
                    continue;
                }
                let [a, b, c] = tri.map(|w| y[w as usize]);
                // the triangle's box first: most of a cell's triangles are out of reach
                let outside = (a.min(b).min(c) - p)
                    .max(p - a.max(b).max(c))
                    .max(DVec3::ZERO);
                if outside.length_squared() >= reach * reach {
                    continue;
                }
                let (q, _, _) = closest_on_triangle_f64(p, a, b, c);
                if p.distance_squared(q) < reach * reach {
                    out.push((v as u32, t));
                }
            }
        }
        out
    }

    /// The contact pairs at `y`: those of `candidates` (a superset, when given: pairs
    /// within reach of a state no vertex has moved far from) or found anew.
    fn contacts<'a>(
        &self,
        y: &[DVec3],
        triangles: &[[u32; 3]],
        candidates: Option<&'a [Pair]>,
    ) -> std::borrow::Cow<'a, [Pair]> {
        match candidates {
            Some(c) => std::borrow::Cow::Borrowed(c),
            None => std::borrow::Cow::Owned(self.pairs(y, triangles, self.margin)),
        }
    }

    /// Energy of the pairs at `y`, J (`area[v]` the vertex's area, m²; `candidates` as
    /// in [`SelfContact::contacts`]).
    pub(crate) fn energy(
        &self,
        y: &[DVec3],
        triangles: &[[u32; 3]],
        area: &[f64],
        candidates: Option<&[Pair]>,
    ) -> f64 {
        self.contacts(y, triangles, candidates)
            .iter()
            .copied()
            .map(|(v, t)| {
                let tri = triangles[t as usize].map(|w| y[w as usize]);
                let (q, _, _) = closest_on_triangle_f64(y[v as usize], tri[0], tri[1], tri[2]);
                penalty(y[v as usize].distance(q), area[v as usize], self).0
            })
            .sum()
    }

    /// Adds the gradient of the energy at `y` into `g`, N.
    pub(crate) fn add_gradient(
        &self,
        y: &[DVec3],
        triangles: &[[u32; 3]],
        area: &[f64],
        candidates: Option<&[Pair]>,
        g: &mut [DVec3],
    ) {
        for &(v, t) in self.contacts(y, triangles, candidates).iter() {
            let tri = triangles[t as usize];
            if let Some(pd) = pair_distance(y[v as usize], tri.map(|w| y[w as usize]), false)
                && pd.d < self.margin
            {
                let (_, de, _) = penalty(pd.d, area[v as usize], self);
                g[v as usize] += pd.grad[0] * de;
                for k in 0..3 {
                    g[tri[k] as usize] += pd.grad[k + 1] * de;
                }
            }
        }
    }

    /// The 4×4 blocks of the energy's Hessian for each pair at `y`, with the vertices
    /// they belong to. `exact`: E′·∇²d included (may be indefinite); otherwise only the
    /// Gauss–Newton part E″·∇d∇dᵀ (positive semi-definite).
    pub(crate) fn hessian_blocks(
        &self,
        y: &[DVec3],
        triangles: &[[u32; 3]],
        area: &[f64],
        candidates: Option<&[Pair]>,
        exact: bool,
    ) -> Vec<([u32; 4], [[DMat3; 4]; 4])> {
        let mut out = Vec::new();
        for &(v, t) in self.contacts(y, triangles, candidates).iter() {
            let tri = triangles[t as usize];
            let Some(pd) = pair_distance(y[v as usize], tri.map(|w| y[w as usize]), exact) else {
                continue;
            };
            if pd.d >= self.margin {
                continue;
            }
            let (_, de, dde) = penalty(pd.d, area[v as usize], self);
            let mut h = [[DMat3::ZERO; 4]; 4];
            for i in 0..4 {
                for j in 0..4 {
                    h[i][j] = outer(pd.grad[i], pd.grad[j]) * dde;
                    if exact {
                        h[i][j] += pd.hess[i][j] * de;
                    }
                }
            }
            out.push(([v, tri[0], tri[1], tri[2]], h));
        }
        out
    }

    /// Whether moving from `from` to `to` (linearly) carries a vertex through a triangle
    /// it is within `reach` of at `from` (the sign of its height over the triangle's
    /// plane changes, and where the height is zero along the linear path the vertex is
    /// inside the triangle), or much closer to one ([`SelfContact::closes_in`]).
    /// `candidates` from [`SelfContact::pairs`] at `from`.
    pub(crate) fn crossing(
        &self,
        from: &[DVec3],
        to: &[DVec3],
        triangles: &[[u32; 3]],
        candidates: &[Pair],
    ) -> bool {
        candidates.iter().any(|&(v, t)| {
            let tri = triangles[t as usize];
            crossing_time(from, to, tri, v).is_some() || self.closes_in(from, to, tri, v)
        })
    }

    /// Whether the move from `from` to `to` brings vertex `v` within a fifth of the
    /// margin of the triangle `tri` and closer than a tenth of where it was: the
    /// barrier's energy grows
    /// only as the logarithm of the gap, so a line search could otherwise accept a state
    /// a nanometre from the cloth, where the force is beyond anything Newton recovers
    /// from (IPC keeps steps short of contact the same way).
    fn closes_in(&self, from: &[DVec3], to: &[DVec3], tri: [u32; 3], v: u32) -> bool {
        let dist = |y: &[DVec3]| {
            let [a, b, c] = tri.map(|w| y[w as usize]);
            let p = y[v as usize];
            p.distance(closest_on_triangle_f64(p, a, b, c).0)
        };
        let after = dist(to);
        after < 0.2 * self.margin && after < 0.1 * dist(from)
    }

    /// Limits a move of the whole garment from `from` to `to` (a prediction: the garment
    /// carried with the body) so that no vertex passes through a triangle on the way: a
    /// vertex that would meet a triangle is carried by it instead (it moves as the
    /// triangle's point nearest to it does, so it stays on its side: a sleeve that the
    /// arm brings down onto the torso's cloth moves with that cloth). Crossings left
    /// after 8 rounds (a vertex carried into another triangle) are held where they were.
    /// Returns how many vertices were not moved as predicted.
    pub(crate) fn limit_move(
        &self,
        from: &[DVec3],
        to: &mut [DVec3],
        triangles: &[[u32; 3]],
    ) -> usize {
        let longest = from
            .iter()
            .zip(to.iter())
            .map(|(a, b)| a.distance(*b))
            .fold(0.0, f64::max);
        if !(longest.is_finite() && longest > 0.0) {
            return 0;
        }
        let candidates = self.guarded_pairs(from, triangles, 2.0 * longest + self.margin);
        let mut changed = vec![false; to.len()];
        let rounds = 8;
        for round in 0..=rounds {
            let mut met = false;
            for &(v, t) in &candidates {
                let tri = triangles[t as usize];
                if crossing_time(from, to, tri, v).is_none() {
                    continue;
                }
                met = true;
                changed[v as usize] = true;
                if round == rounds {
                    for w in [v, tri[0], tri[1], tri[2]] {
                        to[w as usize] = from[w as usize];
                        changed[w as usize] = true;
                    }
                } else {
                    let [a, b, c] = tri.map(|w| from[w as usize]);
                    let (_, l, _) = closest_on_triangle_f64(from[v as usize], a, b, c);
                    let moved = tri.map(|w| to[w as usize] - from[w as usize]);
                    to[v as usize] =
                        from[v as usize] + moved[0] * l.x + moved[1] * l.y + moved[2] * l.z;
                }
            }
            if !met {
                break;
            }
        }
        changed.iter().filter(|c| **c).count()
    }
}

/// When (as a share of the step, in [0, 1]) vertex `v` passes through the triangle
/// `tri` while every vertex moves linearly from `from` to `to`, if it does: its height
/// over the triangle's plane changes sign, and where it is zero the vertex lies inside
/// the triangle (the plane taken as turning little within one step).
fn crossing_time(from: &[DVec3], to: &[DVec3], tri: [u32; 3], v: u32) -> Option<f64> {
    let height = |y: &[DVec3]| {
        let [a, b, c] = tri.map(|w| y[w as usize]);
        let n = (b - a).cross(c - a);
        (y[v as usize] - a).dot(n)
    };
    let (h0, h1) = (height(from), height(to));
    if (h0 * h1).is_nan() || h0 * h1 >= 0.0 {
        return None;
    }
    let s = h0 / (h0 - h1);
    let at = |w: u32| from[w as usize].lerp(to[w as usize], s);
    let [a, b, c] = tri.map(at);
    let p = at(v);
    let n = (b - a).cross(c - a);
    let nn = n.length_squared();
    if nn.is_nan() || nn <= 0.0 {
        return None;
    }
    // barycentric coordinates of p's projection on the plane at that instant
    let u = (c - b).cross(p - b).dot(n) / nn;
    let w = (a - c).cross(p - c).dot(n) / nn;
    let x = 1.0 - u - w;
    let tol = -1e-9;
    (u >= tol && w >= tol && x >= tol).then_some(s)
}

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

fn outer(a: DVec3, b: DVec3) -> DMat3 {
    DMat3::from_cols(a * b.x, a * b.y, a * b.z)
}

/// The barrier E(d) = −A·κ·(d − δ)²·ln(d/δ) for 0 < d < δ, zero beyond (Li et al.
/// 2020, "Incremental Potential Contact", Eq. 6, scaled by the vertex's area), and its
/// first two derivatives in d: (E, E′, E″), J, N, N/m. C² at d = δ (E, E′ and E″ all
/// vanish there) and unbounded as d → 0, so that two layers pinched between body parts
/// give way to the body's contact instead of passing through each other; infinite at
/// d ≤ 0.
pub(crate) fn penalty(d: f64, area: f64, sc: &SelfContact) -> (f64, f64, f64) {
    let delta = sc.margin;
    if d >= delta {
        return (0.0, 0.0, 0.0);
    }
    if d.is_nan() || d <= 0.0 {
        return (f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY);
    }
    let k = area * sc.stiffness;
    let e = d - delta;
    let l = (d / delta).ln();
    (
        -k * e * e * l,
        k * (-2.0 * e * l - e * e / d),
        k * (-2.0 * l - 4.0 * e / d + e * e / (d * d)),
    )
}

/// Distance from `p` to the triangle `x` with its gradient and (with `hessian`) its
/// Hessian over (p, x₀, x₁, x₂); `None` where the point lies on the triangle (within
/// 1e-12 m: the direction is undefined there).
pub(crate) fn pair_distance(p: DVec3, x: [DVec3; 3], hessian: bool) -> Option<PairDistance> {
    let (c, lambda, feature) = closest_on_triangle_f64(p, x[0], x[1], x[2]);
    let r = p - c;
    let s = r.length_squared();
    let d = s.sqrt();
    if d.is_nan() || d <= 1e-12 {
        return None;
    }
    // ∇s_i = 2 w_i r, w = (1, −λ₀, −λ₁, −λ₂)
    let w = [1.0, -lambda.x, -lambda.y, -lambda.z];
    let mut grad = [DVec3::ZERO; 4];
    for i in 0..4 {
        grad[i] = r * (w[i] / d);
    }
    let mut hess = [[DMat3::ZERO; 4]; 4];
    if hessian {
        // directions the closest point is free to move in, over the corners
        let free: &[[f64; 3]] = match feature {
            Feature::Face => &[[-1.0, 1.0, 0.0], [-1.0, 0.0, 1.0]],
            Feature::Edge(0) => &[[-1.0, 1.0, 0.0]],
            Feature::Edge(1) => &[[0.0, -1.0, 1.0]],
            Feature::Edge(_) => &[[1.0, 0.0, -1.0]],
            Feature::Vertex(_) => &[],
        };
        let m = free.len();
        let e: Vec<DVec3> = free
            .iter()
            .map(|dm| x[0] * dm[0] + x[1] * dm[1] + x[2] * dm[2])
            .collect();
        // f_ββ = 2 EᵀE and its inverse
        let inv: [[f64; 2]; 2] = match m {
            0 => [[0.0; 2]; 2],
            1 => [[1.0 / (2.0 * e[0].length_squared()), 0.0], [0.0, 0.0]],
            _ => {
                let (g00, g01, g11) = (
                    2.0 * e[0].length_squared(),
                    2.0 * e[0].dot(e[1]),
                    2.0 * e[1].length_squared(),
                );
                let det = g00 * g11 - g01 * g01;
                if det.is_nan() || det == 0.0 {
                    return None;
                }
                [[g11 / det, -g01 / det], [-g01 / det, g00 / det]]
            }
        };
        // f_{q_i β_m} = −2 w_i E_m − 2 D_{m,i} r (D_{m,p} = 0)
        let b = |i: usize, k: usize| -> DVec3 {
            let dmi = if i == 0 { 0.0 } else { free[k][i - 1] };
            -2.0 * w[i] * e[k] - 2.0 * dmi * r
        };
        let mut hs = [[DMat3::ZERO; 4]; 4];
        for i in 0..4 {
            for j in 0..4 {
                let mut h = DMat3::from_diagonal(DVec3::splat(2.0 * w[i] * w[j]));
                for k in 0..m {
                    for l in 0..m {
                        h -= outer(b(i, k), b(j, l)) * inv[k][l];
                    }
                }
                hs[i][j] = h;
            }
        }
        // d = √s: ∇²d = (∇²s − 2∇d∇dᵀ)/(2d)
        for i in 0..4 {
            for j in 0..4 {
                hess[i][j] = (hs[i][j] - outer(grad[i], grad[j]) * 2.0) / (2.0 * d);
            }
        }
    }
    Some(PairDistance { d, grad, hess })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tri() -> [DVec3; 3] {
        [
            DVec3::new(0.0, 0.0, 0.0),
            DVec3::new(0.03, 0.002, -0.001),
            DVec3::new(0.004, 0.001, 0.025),
        ]
    }

    fn coords(p: DVec3, x: [DVec3; 3]) -> [f64; 12] {
        let mut q = [0.0; 12];
        for (i, v) in [p, x[0], x[1], x[2]].iter().enumerate() {
            q[3 * i..3 * i + 3].copy_from_slice(&v.to_array());
        }
        q
    }

    fn split(q: &[f64; 12]) -> (DVec3, [DVec3; 3]) {
        let v = |i: usize| DVec3::new(q[3 * i], q[3 * i + 1], q[3 * i + 2]);
        (v(0), [v(1), v(2), v(3)])
    }

    /// Finite differences of d (central, 1e-7 m) against the gradient, and of the
    /// gradient against the Hessian, for a point over each of the triangle's seven
    /// regions.
    #[test]
    fn the_pair_distance_derivatives_match_finite_differences() {
        let x = tri();
        let points = [
            (DVec3::new(0.01, 0.004, 0.008), "face"),
            (DVec3::new(0.015, 0.003, -0.006), "edge 0"),
            (DVec3::new(0.022, 0.006, 0.02), "edge 1"),
            (DVec3::new(-0.004, 0.002, 0.012), "edge 2"),
            (DVec3::new(-0.003, 0.002, -0.004), "corner 0"),
            (DVec3::new(0.034, 0.004, -0.002), "corner 1"),
            (DVec3::new(0.004, -0.002, 0.03), "corner 2"),
        ];
        let h = 1e-7;
        let mut features = Vec::new();
        for (p, name) in points {
            features.push(closest_on_triangle_f64(p, x[0], x[1], x[2]).2);
            let q0 = coords(p, x);
            let pd = pair_distance(p, x, true).expect("off the triangle");
            for k in 0..12 {
                let mut qp = q0;
                let mut qm = q0;
                qp[k] += h;
                qm[k] -= h;
                let (pp, xp) = split(&qp);
                let (pm, xm) = split(&qm);
                let dp = pair_distance(pp, xp, true).expect("off");
                let dm = pair_distance(pm, xm, true).expect("off");
                let fd = (dp.d - dm.d) / (2.0 * h);
                let an = pd.grad[k / 3][k % 3];
                assert!(
                    (fd - an).abs() < 1e-6,
                    "{name}: ∂d/∂q{k}: fd {fd} analytic {an}"
                );
                for l in 0..12 {
                    let fd = (dp.grad[l / 3][l % 3] - dm.grad[l / 3][l % 3]) / (2.0 * h);
                    // DMat3 is column-major: col(b)[a] = entry (a, b)
                    let an = pd.hess[l / 3][k / 3].col(k % 3)[l % 3];
                    let scale = 1.0 + an.abs();
                    assert!(
                        (fd - an).abs() < 1e-4 * scale,
                        "{name}: ∂²d/∂q{l}∂q{k}: fd {fd} analytic {an}"
                    );
                }
            }
        }
        // the points do reach every kind of region
        assert!(features.contains(&Feature::Face));
        for k in 0..3 {
            assert!(features.contains(&Feature::Edge(k)), "edge {k}");
            assert!(features.contains(&Feature::Vertex(k)), "corner {k}");
        }
    }

    /// Two triangles crossing each other count the edges that pierce the other; moved
    /// apart they count none, and triangles that share a corner are not tested.
    #[test]
    fn edges_through_the_garment_are_counted() {
        let mut y = vec![
            DVec3::new(0.0, 0.0, 0.0),
            DVec3::new(0.04, 0.0, 0.0),
            DVec3::new(0.0, 0.0, 0.04),
            // a second triangle standing up through the first
            DVec3::new(0.01, -0.01, 0.01),
            DVec3::new(0.01, 0.02, 0.01),
            DVec3::new(0.02, 0.02, 0.015),
        ];
        let triangles = vec![[0, 2, 1], [3, 4, 5]];
        // edges 3–4 and 3–5 pierce the first triangle; none of its edges pierces the
        // second
        assert_eq!(self_intersections(&y, &triangles), 2);
        for p in &mut y[3..] {
            p.y += 0.05;
        }
        assert_eq!(self_intersections(&y, &triangles), 0);
        // a fan of two triangles folded onto each other shares vertex 0: not a crossing
        let fan = vec![[0, 2, 1], [0, 1, 4]];
        let mut folded = y.clone();
        folded[4] = DVec3::new(0.01, 0.0, 0.02);
        assert_eq!(self_intersections(&folded, &fan), 0);
        assert_eq!(self_intersections(&[], &[]), 0);
    }

    fn model(margin: f64) -> SelfContact {
        SelfContact {
            margin,
            stiffness: 1e5,
            ring_start: vec![0, 1, 2, 3, 4],
            ring: vec![0, 1, 2, 3],
            excluded: Vec::new(),
            cell: 0.03,
        }
    }

    #[test]
    fn the_barrier_derivatives_match_finite_differences_and_vanish_at_the_margin() {
        let sc = model(0.003);
        let h = 1e-10;
        for d in [0.0001, 0.0005, 0.001, 0.002, 0.0029] {
            let (_, de, dde) = penalty(d, 1e-4, &sc);
            let fd = (penalty(d + h, 1e-4, &sc).0 - penalty(d - h, 1e-4, &sc).0) / (2.0 * h);
            assert!((fd - de).abs() < 1e-5 * de.abs(), "E′ at {d}: {fd} vs {de}");
            let fd2 = (penalty(d + h, 1e-4, &sc).1 - penalty(d - h, 1e-4, &sc).1) / (2.0 * h);
            assert!(
                (fd2 - dde).abs() < 1e-4 * dde.abs(),
                "E″ at {d}: {fd2} vs {dde}"
            );
            assert!(de < 0.0 && dde > 0.0, "repulsive and convex");
        }
        assert_eq!(penalty(0.003, 1e-4, &sc), (0.0, 0.0, 0.0));
        let (e, de, dde) = penalty(0.003 - 1e-7, 1e-4, &sc);
        assert!(
            e < 1e-15 && de.abs() < 1e-8 && dde < 1e-2,
            "C² at the margin"
        );
        // unbounded towards contact: the force at 1 µm is over 100× that at 1 mm
        assert!(penalty(1e-6, 1e-4, &sc).1 < 100.0 * penalty(1e-3, 1e-4, &sc).1);
        assert_eq!(penalty(0.0, 1e-4, &sc).0, f64::INFINITY);
    }

    #[test]
    fn a_vertex_is_paired_with_far_triangles_only_and_a_step_through_one_is_a_crossing() {
        // two triangles 2 mm apart, and a vertex of a third, unconnected
        let y = vec![
            DVec3::new(0.0, 0.0, 0.0),
            DVec3::new(0.03, 0.0, 0.0),
            DVec3::new(0.0, 0.0, 0.03),
            DVec3::new(0.005, 0.002, 0.005),
            DVec3::new(0.5, 0.002, 0.0),
            DVec3::new(0.5, 0.002, 0.5),
        ];
        let triangles = vec![[0, 2, 1], [3, 4, 5]];
        let neighbors = |v: u32| match v {
            0..=2 => vec![0, 1, 2],
            _ => vec![3, 4, 5],
        };
        let far = y
            .iter()
            .map(|p| *p + DVec3::Y * if p.y > 0.0 { 1.0 } else { 0.0 })
            .collect::<Vec<_>>();
        let sc = SelfContact::new(&far, &triangles, neighbors, 0.003, 1e5);
        assert_eq!(sc.excluded_count(), 0);
        let pairs = sc.pairs(&y, &triangles, 0.003);
        assert_eq!(
            pairs,
            vec![(3, 0)],
            "only vertex 3 is within 3 mm of a triangle not its own"
        );
        let area = vec![1e-4; 6];
        assert!(sc.energy(&y, &triangles, &area, None) > 0.0);
        let mut g = vec![DVec3::ZERO; 6];
        sc.add_gradient(&y, &triangles, &area, None, &mut g);
        assert!(
            g[3].y < 0.0,
            "vertex 3 is pushed up, away (∇E points down): {:?}",
            g[3]
        );
        let total: DVec3 = g.iter().copied().sum();
        assert!(
            total.length() < 1e-12 * g[3].length().max(1.0),
            "forces balance"
        );
        // the same layout as modelled is excluded
        let modelled = SelfContact::new(&y, &triangles, neighbors, 0.003, 1e5);
        assert_eq!(modelled.excluded_count(), 1);
        assert!(modelled.pairs(&y, &triangles, 0.003).is_empty());
        // vertex 3 stepping 4 mm down goes through triangle 0; 4 mm sideways does not
        let mut down = y.clone();
        down[3].y -= 0.004;
        // (vertex 3's pairs only: moving it alone also tilts triangle 1 over vertex 0)
        let reach: Vec<Pair> = sc
            .pairs(&y, &triangles, 0.01)
            .into_iter()
            .filter(|p| p.0 == 3)
            .collect();
        assert_eq!(reach, vec![(3, 0)]);
        assert!(sc.crossing(&y, &down, &triangles, &reach));
        // 2 mm → 0.1 mm over triangle 0 closes in on it; 2 mm → 1 mm does not
        let mut onto = y.clone();
        onto[3].y = 0.0001;
        assert!(sc.crossing(&y, &onto, &triangles, &reach));
        onto[3].y = 0.001;
        assert!(!sc.crossing(&y, &onto, &triangles, &reach));
        let mut side = y.clone();
        side[3].x += 0.004;
        assert!(!sc.crossing(&y, &side, &triangles, &reach));
        // a predicted move that carries vertex 3 through triangle 0 is limited: the
        // vertex moves as triangle 0 does (here: not at all)
        let mut limited = down.clone();
        assert_eq!(sc.limit_move(&y, &mut limited, &triangles), 1);
        assert_eq!(limited[3], y[3]);
        assert!(!sc.crossing(&y, &limited, &triangles, &reach));
        // triangle 0 lifted 5 mm through vertex 3, which stays: the vertex is carried up
        let mut lifted = y.clone();
        for v in 0..3 {
            lifted[v].y += 0.005;
        }
        assert!(sc.crossing(&y, &lifted, &triangles, &reach));
        let before = lifted.clone();
        assert_eq!(sc.limit_move(&y, &mut lifted, &triangles), 1);
        assert!((lifted[3] - (y[3] + DVec3::Y * 0.005)).length() < 1e-12);
        assert_eq!(lifted[..3], before[..3], "the triangle moves as predicted");
        assert!(!sc.crossing(&y, &lifted, &triangles, &reach));
        let mut past = y.clone();
        past[3] = DVec3::new(-0.02, -0.002, -0.02);
        assert!(
            !sc.crossing(&y, &past, &triangles, &reach),
            "passes beside the triangle"
        );
    }
}
