//! Cloth self-contact: a vertex is kept `margin` away from every triangle of the same
//! garment that does not hold it, so that a sleeve lies on the torso instead of
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
//! What is not a contact: a triangle that holds the vertex (its own surface), and a
//! pair that the garment as modelled already places within the margin (layers stitched
//! together, a collar lying on the shirt, or a model that crosses itself: the penalty
//! would push them apart and could not tell which side is which). A triangle that
//! holds one of the vertex's neighbours but not the vertex is a contact: at rest it
//! lies an edge's length away, many margins, and where a fold at the scale of one edge
//! closes, the vertex would otherwise pass through it (the default T-shirt's rest
//! drape crumpled through itself at 50 edges in a pinch on one shoulder that way; 18
//! with them as contacts).
//!
//! Two edges that share no vertex are a contact too ([`edges`]): without them two edges
//! could cross with all four vertices farther than the margin from the other's
//! triangles.
//!
//! Not covered: a solve that starts with layers already crossed (they stay crossed;
//! [`SelfContact::crossing`] only keeps a step from crossing them).
//! `docs/notes/simulator.md`, *Cloth self-contact*, says where the default T-shirt
//! still crosses itself.

use glam::{DMat3, DVec3};

use crate::mesh::{Feature, closest_on_triangle_f64};

use super::contact::outer;

mod edges;
mod intersections;
mod search;
use edges::{
    cross_norm2, edge_area, edge_crossing_time, edge_distance, mollifier, segment_closest,
    sign_change,
};
pub use intersections::self_intersections;
#[cfg(test)]
use search::relative_move;
pub(crate) use search::{PairCache, relative_moves};
use search::{box_gap, boxes_within, segment_gap, segments_within};

/// A contact pair within reach: a vertex–triangle pair as (vertex index, triangle
/// index), or an edge–edge pair as ([`EDGE_PAIR`] | e, f) for edges e < f of
/// [`SelfContact`]'s edge list. Sorted, the vertex–triangle pairs come first.
pub(crate) type Pair = (u32, u32);

/// The tag of an edge–edge [`Pair`] (vertex and edge counts stay far below it:
/// `MAX_VERTICES` is 2²²).
pub(crate) const EDGE_PAIR: u32 = 1 << 31;

/// What a [`Pair`] holds: a vertex and a triangle, or two edges.
#[derive(Clone, Copy, Debug)]
enum Contact {
    Vertex {
        v: u32,
        tri: [u32; 3],
    },
    /// `rest`: the product of the two edges' squared lengths as modelled, m⁴.
    Edges {
        e: [u32; 2],
        f: [u32; 2],
        rest: f64,
    },
}

impl Contact {
    /// The pair's four vertices: (v, x₀, x₁, x₂) or (a, b, c, d).
    fn stencil(self) -> [u32; 4] {
        match self {
            Contact::Vertex { v, tri } => [v, tri[0], tri[1], tri[2]],
            Contact::Edges { e, f, .. } => [e[0], e[1], f[0], f[1]],
        }
    }
}

/// The self-contact model of one garment.
///
/// Invariant: `excluded` is sorted.
pub(crate) struct SelfContact {
    /// Margin δ, metres.
    pub(crate) margin: f64,
    /// Stiffness κ, N/m³.
    pub(crate) stiffness: f64,
    excluded: Vec<Pair>,
    /// Grid cell size, metres (the longest edge of the garment as modelled, at least
    /// the margin).
    cell: f64,
    /// The garment's edges (each once, lower vertex first, sorted).
    edges: Vec<[u32; 2]>,
    /// Each edge's squared length as modelled, m².
    edge_rest2: Vec<f64>,
    /// The edge pairs' mollifier threshold c (dimensionless; see [`edges`]).
    parallel: f64,
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
    /// The model of a garment with `triangles` over `positions` (as modelled).
    pub(crate) fn new(
        positions: &[DVec3],
        triangles: &[[u32; 3]],
        margin: f64,
        stiffness: f64,
        parallel: f64,
    ) -> Self {
        let longest = triangles
            .iter()
            .flat_map(|t| {
                [(0, 1), (1, 2), (2, 0)]
                    .map(|(i, j)| positions[t[i] as usize].distance(positions[t[j] as usize]))
            })
            .fold(0.0, f64::max);
        let mut edges: Vec<[u32; 2]> = triangles
            .iter()
            .flat_map(|t| [(0, 1), (1, 2), (2, 0)].map(|(i, j)| [t[i].min(t[j]), t[i].max(t[j])]))
            .collect();
        edges.sort_unstable();
        edges.dedup();
        let edge_rest2 = edges
            .iter()
            .map(|e| positions[e[0] as usize].distance_squared(positions[e[1] as usize]))
            .collect();
        let mut model = SelfContact {
            margin,
            stiffness,
            excluded: Vec::new(),
            cell: longest.max(margin).max(1e-4),
            edges,
            edge_rest2,
            parallel,
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

    /// The four vertices of `pair`: (vertex, triangle's three) or (edge's two, other
    /// edge's two).
    pub(crate) fn stencil(&self, pair: Pair, triangles: &[[u32; 3]]) -> [u32; 4] {
        self.contact(pair, triangles).stencil()
    }

    /// What `pair` holds (`triangles` the garment's).
    fn contact(&self, pair: Pair, triangles: &[[u32; 3]]) -> Contact {
        let (p, q) = pair;
        if p & EDGE_PAIR != 0 {
            let (i, j) = ((p & !EDGE_PAIR) as usize, q as usize);
            Contact::Edges {
                e: self.edges[i],
                f: self.edges[j],
                rest: self.edge_rest2[i] * self.edge_rest2[j],
            }
        } else {
            Contact::Vertex {
                v: p,
                tri: triangles[q as usize],
            }
        }
    }

    /// The pair's distance at `y` (without derivatives), metres; infinite where it is
    /// undefined (a degenerate edge).
    fn pair_gap(&self, y: &[DVec3], c: Contact) -> f64 {
        let x = c.stencil().map(|w| y[w as usize]);
        match c {
            Contact::Vertex { .. } => {
                x[0].distance(closest_on_triangle_f64(x[0], x[1], x[2], x[3]).0)
            }
            Contact::Edges { .. } => segment_gap(x),
        }
    }

    /// A pair's energy (J), gradient over its stencil (N) and, with `hessian` (`Some
    /// (exact)`), Hessian blocks (see [`SelfContact::hessian_blocks`]); `None` where it
    /// has none (beyond the margin, or its distance undefined).
    fn pair_terms(
        &self,
        y: &[DVec3],
        area: &[f64],
        c: Contact,
        hessian: Option<bool>,
    ) -> Option<(f64, [DVec3; 4], [[DMat3; 4]; 4])> {
        let x = c.stencil().map(|w| y[w as usize]);
        let exact = hessian == Some(true);
        let mut h = [[DMat3::ZERO; 4]; 4];
        match c {
            Contact::Vertex { v, .. } => {
                let pd = pair_distance(x[0], [x[1], x[2], x[3]], exact)?;
                if pd.d >= self.margin {
                    return None;
                }
                let (e, de, dde) = penalty(pd.d, area[v as usize], self);
                if hessian.is_some() {
                    for i in 0..4 {
                        for j in 0..4 {
                            h[i][j] = outer(pd.grad[i], pd.grad[j]) * dde;
                            if exact {
                                h[i][j] += pd.hess[i][j] * de;
                            }
                        }
                    }
                }
                Some((e, pd.grad.map(|g| g * de), h))
            }
            Contact::Edges { e, f, rest } => {
                let pd = edge_distance(x, hessian.is_some())?;
                if pd.d >= self.margin {
                    return None;
                }
                let (b, db, ddb) = penalty(pd.d, edge_area(area, e, f), self);
                let (xv, gx, hx) = cross_norm2(x, hessian.is_some());
                let eps = self.parallel * rest;
                let (m, dm, ddm) = mollifier(xv, eps);
                let grad: [DVec3; 4] =
                    std::array::from_fn(|i| pd.grad[i] * (m * db) + gx[i] * (dm * b));
                if hessian.is_some() {
                    for i in 0..4 {
                        for j in 0..4 {
                            h[i][j] = outer(pd.grad[i], pd.grad[j]) * (m * ddb)
                                + pd.hess[i][j] * (m * db)
                                + (outer(gx[i], pd.grad[j]) + outer(pd.grad[i], gx[j])) * (dm * db)
                                + hx[i][j] * (dm * b)
                                + outer(gx[i], gx[j]) * (ddm * b);
                        }
                    }
                    // projected: the nearest positive semi-definite matrix (IPC §4.3
                    // projects each pair's Hessian so): the mollifier's terms and the
                    // distance's curvature, which a Gauss–Newton part leaves out, are
                    // what near-parallel edges' energy turns on
                    if !exact {
                        project_psd(&mut h);
                    }
                }
                Some((m * b, grad, h))
            }
        }
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
            .map(|&pair| match self.contact(pair, triangles) {
                Contact::Vertex { v, tri } => {
                    let [p, a, b, c] = [v, tri[0], tri[1], tri[2]].map(|w| y[w as usize]);
                    let (q, _, _) = closest_on_triangle_f64(p, a, b, c);
                    penalty(p.distance(q), area[v as usize], self).0
                }
                c @ Contact::Edges { .. } => {
                    // (the boxes first: most pairs lie beyond the margin; the
                    // distance itself is `pair_terms`')
                    let x = c.stencil().map(|w| y[w as usize]);
                    if !boxes_within(x, self.margin) {
                        0.0
                    } else {
                        match self.pair_terms(y, area, c, None) {
                            Some(t) => t.0,
                            // touching (or a degenerate edge); else at the margin to
                            // rounding
                            None if segment_gap(x) <= 1e-12 => f64::INFINITY,
                            None => 0.0,
                        }
                    }
                }
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
        for &pair in self.contacts(y, triangles, candidates).iter() {
            let c = self.contact(pair, triangles);
            if let Some((_, grad, _)) = self.pair_terms(y, area, c, None) {
                for (w, gw) in c.stencil().into_iter().zip(grad) {
                    g[w as usize] += gw;
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
        for &pair in self.contacts(y, triangles, candidates).iter() {
            let c = self.contact(pair, triangles);
            if let Some((_, _, h)) = self.pair_terms(y, area, c, Some(exact)) {
                out.push((c.stencil(), h));
            }
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
        candidates
            .iter()
            .any(|&pair| self.meets(from, to, self.contact(pair, triangles)))
    }

    /// Whether the move from `from` to `to` carries the pair's vertex through its
    /// triangle, or its edges through each other, or brings them much closer
    /// ([`SelfContact::closes_in`]): what neither a Newton step nor a carried
    /// prediction may do.
    fn meets(&self, from: &[DVec3], to: &[DVec3], c: Contact) -> bool {
        let crosses = match c {
            Contact::Vertex { v, tri } => crossing_time(from, to, tri, v).is_some(),
            Contact::Edges { e, f, .. } => {
                edge_crossing_time(from, to, [e[0], e[1], f[0], f[1]]).is_some()
            }
        };
        crosses || self.closes_in(from, to, c)
    }

    /// Whether the move from `from` to `to` brings the pair within a fifth of the
    /// margin and closer than a tenth of where it was: the barrier's energy grows
    /// only as the logarithm of the gap, so a line search could otherwise accept a state
    /// a nanometre from the cloth, where the force is beyond anything Newton recovers
    /// from (IPC keeps steps short of contact the same way).
    fn closes_in(&self, from: &[DVec3], to: &[DVec3], c: Contact) -> bool {
        // (two edges' boxes first: most pairs a step checks stay far apart)
        if let Contact::Edges { .. } = c
            && !segments_within(c.stencil().map(|w| to[w as usize]), 0.2 * self.margin)
        {
            return false;
        }
        let after = self.pair_gap(to, c);
        after < 0.2 * self.margin && after < 0.1 * self.pair_gap(from, c)
    }

    /// Limits a move of the whole garment from `from` to `to` (a prediction: the garment
    /// carried with the body) so that no vertex passes through a triangle on the way, or
    /// is brought much closer to one as a Newton step may not be
    /// ([`SelfContact::closes_in`]; a prediction that squeezes a fold to microns leaves
    /// the solve a barrier force it does not recover from): such a vertex is carried by
    /// the triangle instead (it moves as the triangle's point nearest to it does, so it
    /// stays on its side: a sleeve that the arm brings down onto the torso's cloth moves
    /// with that cloth). Vertices still meeting a triangle after 8 rounds (carried into
    /// another one) are held where they were, with the triangle.
    /// Returns how many vertices were not moved as predicted.
    pub(crate) fn limit_move(
        &self,
        from: &[DVec3],
        to: &mut [DVec3],
        triangles: &[[u32; 3]],
    ) -> usize {
        self.limit_move_with(from, to, triangles, true)
    }

    /// [`SelfContact::limit_move`]; with `skip_far`, a candidate pair none of whose
    /// vertices was carried yet in a round, and whose box gap at `from` exceeds what its
    /// own vertices' moves can close ([`search::pair_reach`]), is passed over without
    /// the crossing test: it cannot meet, so the result is the same (a test compares),
    /// while the candidates, all within twice the longest move, numbered 450 000–620 000
    /// per continuation step of a walking drape.
    fn limit_move_with(
        &self,
        from: &[DVec3],
        to: &mut [DVec3],
        triangles: &[[u32; 3]],
        skip_far: bool,
    ) -> usize {
        let longest = from
            .iter()
            .zip(to.iter())
            .map(|(a, b)| a.distance(*b))
            .fold(0.0, f64::max);
        if !(longest.is_finite() && longest > 0.0) {
            return 0;
        }
        let candidates = self.pairs(from, triangles, 2.0 * longest + self.margin);
        let mut changed = vec![false; to.len()];
        // per vertex, the round it was last carried in, and how far it moves from the
        // moves' common shift as the round starts
        let mut carried = vec![usize::MAX; to.len()];
        let mut moved = Vec::with_capacity(to.len());
        let rounds = 8;
        for round in 0..=rounds {
            if skip_far {
                relative_moves(to.len(), |v| to[v] - from[v], &mut moved);
            }
            let mut met = false;
            for &pair in &candidates {
                let c = self.contact(pair, triangles);
                if skip_far {
                    let w = c.stencil();
                    let far = w.iter().all(|&w| carried[w as usize] != round)
                        && box_gap(c, w.map(|w| from[w as usize]))
                            >= search::pair_reach(c, self.margin, &moved);
                    if far {
                        continue;
                    }
                }
                if !self.meets(from, to, c) {
                    continue;
                }
                met = true;
                if round == rounds {
                    for w in c.stencil() {
                        to[w as usize] = from[w as usize];
                        changed[w as usize] = true;
                        carried[w as usize] = round;
                    }
                    continue;
                }
                match c {
                    Contact::Vertex { v, tri } => {
                        changed[v as usize] = true;
                        carried[v as usize] = round;
                        let [a, b, c] = tri.map(|w| from[w as usize]);
                        let (_, l, _) = closest_on_triangle_f64(from[v as usize], a, b, c);
                        let moved = tri.map(|w| to[w as usize] - from[w as usize]);
                        to[v as usize] =
                            from[v as usize] + moved[0] * l.x + moved[1] * l.y + moved[2] * l.z;
                    }
                    // the first edge's ends move as the second edge's point nearest to
                    // it does (the edge stays on its side of the other)
                    Contact::Edges { e, f, .. } => {
                        let x = [e[0], e[1], f[0], f[1]].map(|w| from[w as usize]);
                        let t = segment_closest(x[0], x[1], x[2], x[3]).map_or(0.5, |r| r.1);
                        let moved = f.map(|w| to[w as usize] - from[w as usize]);
                        let carry = moved[0].lerp(moved[1], t);
                        for w in e {
                            to[w as usize] = from[w as usize] + carry;
                            changed[w as usize] = true;
                            carried[w as usize] = round;
                        }
                    }
                }
            }
            if !met {
                break;
            }
        }
        changed.iter().filter(|c| **c).count()
    }
}

/// `h` (a symmetric 12×12 matrix as 4×4 blocks) with its negative eigenvalues set to
/// zero.
fn project_psd(h: &mut [[DMat3; 4]; 4]) {
    let mut a = [[0.0; 12]; 12];
    for (r, row) in a.iter_mut().enumerate() {
        for (c, v) in row.iter_mut().enumerate() {
            *v = h[r / 3][c / 3].col(c % 3)[r % 3];
        }
    }
    let (values, vectors) = super::dense::sym_eigen(&a);
    if values.iter().all(|&l| l >= 0.0) {
        return;
    }
    for r in 0..12 {
        for c in 0..12 {
            a[r][c] = (0..12)
                .map(|k| values[k].max(0.0) * vectors[r][k] * vectors[c][k])
                .sum();
        }
    }
    for (i, hi) in h.iter_mut().enumerate() {
        for (j, hij) in hi.iter_mut().enumerate() {
            *hij = DMat3::from_cols_array_2d(&std::array::from_fn(|c| {
                std::array::from_fn(|r| a[3 * i + r][3 * j + c])
            }));
        }
    }
}

/// When (as a share of the step, in [0, 1]) vertex `v` passes through the triangle
/// `tri` while every vertex moves linearly from `from` to `to`, if it does: its height
/// over the triangle's plane, (p − a)·((b − a) × (c − a)), changes sign over the step,
/// and where it is zero (found by bisection: the height is a cubic in the step) the
/// vertex lies inside the triangle. A height that changes sign twice within one step
/// is taken as no crossing (as for two edges). (Until `sim::REVISION` 8 the zero was
/// placed by interpolating the height linearly, which a turning triangle puts far from
/// the true one: a vertex 5.6 cm from a triangle all the way could read as crossing it.)
fn crossing_time(from: &[DVec3], to: &[DVec3], tri: [u32; 3], v: u32) -> Option<f64> {
    let x = [v, tri[0], tri[1], tri[2]];
    let height = |[p, a, b, c]: [DVec3; 4]| (p - a).dot((b - a).cross(c - a));
    let (h0, h1) = (
        height(x.map(|w| from[w as usize])),
        height(x.map(|w| to[w as usize])),
    );
    if (h0 * h1).is_nan() || h0 * h1 >= 0.0 {
        return None;
    }
    let at = |s: f64| x.map(|w| from[w as usize].lerp(to[w as usize], s));
    let s = sign_change(|s| height(at(s)), h0);
    let [p, a, b, c] = at(s);
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
    let (_, lambda, feature) = closest_on_triangle_f64(p, x[0], x[1], x[2]);
    // r = p − Σ λ_k x_k; the directions the closest point is free to move in, as
    // changes of those weights
    let w = [1.0, -lambda.x, -lambda.y, -lambda.z];
    let free: &[[f64; 4]] = match feature {
        Feature::Face => &[[0.0, 1.0, -1.0, 0.0], [0.0, 1.0, 0.0, -1.0]],
        Feature::Edge(0) => &[[0.0, 1.0, -1.0, 0.0]],
        Feature::Edge(1) => &[[0.0, 0.0, 1.0, -1.0]],
        Feature::Edge(_) => &[[0.0, -1.0, 0.0, 1.0]],
        Feature::Vertex(_) => &[],
    };
    weighted_distance([p, x[0], x[1], x[2]], w, free, hessian)
}

/// d = |r| for r = Σ_i w_i x_i, the difference of the nearest points of two features
/// (a vertex and a triangle, two edges) whose weights `w` minimise d over the
/// parameters β left free (`free[k][i]` = ∂w_i/∂β_k; at most two), with its gradient
/// and (with `hessian`) its Hessian over the four points. By the envelope theorem
/// ∇(d²) is that of the fixed nearest points, 2 w_i r, and its Hessian is
/// f_qq − f_qβ f_ββ⁻¹ f_βq over the free parameters: exact inside each region of the
/// nearest points. `None` where d ≤ 1e-12 m (the direction is undefined) or the free
/// directions are degenerate.
pub(crate) fn weighted_distance(
    x: [DVec3; 4],
    w: [f64; 4],
    free: &[[f64; 4]],
    hessian: bool,
) -> Option<PairDistance> {
    let r = x[0] * w[0] + x[1] * w[1] + x[2] * w[2] + x[3] * w[3];
    let d = r.length();
    if d.is_nan() || d <= 1e-12 {
        return None;
    }
    let grad = w.map(|wi| r * (wi / d));
    let mut hess = [[DMat3::ZERO; 4]; 4];
    if hessian {
        let m = free.len().min(2);
        // e_k = ∂r/∂β_k
        let e: [DVec3; 2] = std::array::from_fn(|k| {
            free.get(k).map_or(DVec3::ZERO, |dk| {
                x[0] * dk[0] + x[1] * dk[1] + x[2] * dk[2] + x[3] * dk[3]
            })
        });
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
        if !(inv[0][0].is_finite()) {
            return None;
        }
        // f_{q_i β_k} = ∂(2 w_i r)/∂β_k = 2 (∂w_i/∂β_k) r + 2 w_i e_k
        let b = |i: usize, k: usize| -> DVec3 { 2.0 * free[k][i] * r + 2.0 * w[i] * e[k] };
        for i in 0..4 {
            for j in 0..4 {
                let mut hs = DMat3::from_diagonal(DVec3::splat(2.0 * w[i] * w[j]));
                for k in 0..m {
                    for l in 0..m {
                        hs -= outer(b(i, k), b(j, l)) * inv[k][l];
                    }
                }
                // d = √s: ∇²d = (∇²s − 2∇d∇dᵀ)/(2d)
                hess[i][j] = (hs - outer(grad[i], grad[j]) * 2.0) / (2.0 * d);
            }
        }
    }
    Some(PairDistance { d, grad, hess })
}

#[cfg(test)]
mod crossing_tests;
#[cfg(test)]
mod limit_tests;
#[cfg(test)]
mod tests;
