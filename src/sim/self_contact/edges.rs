//! Edge–edge contact: two edges of the garment that share no vertex are kept `margin`
//! apart too, by the same barrier as a vertex and a triangle. Vertex–triangle pairs
//! alone let two edges cross with all four of their vertices farther than the margin
//! from the other's triangles: a fold's ridge sliding through the cloth under it. The
//! default T-shirt's rest drape crossed itself at 18 edges that way, from a state with
//! none, while no vertex passed through a triangle.
//!
//! Energy of an edge pair (IPC, Li et al. 2020, §4.3 and Eq. 23–24):
//! E = m(x)·b(d), b the barrier of [`super::penalty`] at the two segments' distance d
//! with the area the edges carry ([`edge_area`]), and m a mollifier of
//! x = |u × v|² (u, v the edge vectors) that fades the pair out as the edges turn
//! parallel, m(x) = (2 − x/εₓ)·x/εₓ below εₓ = c·|u₀|²·|v₀|² (rest lengths, c =
//! `SimParams::self_contact_parallel`, IPC's 1e-3 by default) and 1
//! above: there the nearest points of the two segments jump along them, d has no
//! Hessian, and the vertex–triangle pairs at the edges' ends already hold the two
//! layers apart.
//!
//! Newton's projected Hessian of a pair is its exact 12×12 Hessian with the negative
//! eigenvalues dropped (IPC's projection), not the Gauss–Newton part the vertex–triangle
//! pairs use: near-parallel edges' distance curves sharply and the mollifier's terms
//! matter, and with only m·b″·∇d∇dᵀ the crouch of CMU 131_01 (frame 382) stalled in its
//! second continuation step with steps of a thousandth.

use glam::{DMat3, DVec3};

use super::super::contact::outer;
use super::{PairDistance, weighted_distance};

/// Nearest points of the segments a + s·(b − a) and c + t·(d − c), s, t ∈ [0, 1]:
/// (s, t, whether s is free, whether t is free), free meaning strictly inside (0, 1)
/// where the distance is least (a clamped parameter sits at an end). `None` for an
/// edge of no length or a non-finite input.
pub(crate) fn segment_closest(
    a: DVec3,
    b: DVec3,
    c: DVec3,
    d: DVec3,
) -> Option<(f64, f64, bool, bool)> {
    let (u, v, r0) = (b - a, d - c, a - c);
    let (aa, bb, cc) = (u.dot(u), u.dot(v), v.dot(v));
    let (dd, ee) = (u.dot(r0), v.dot(r0));
    if !(aa > 0.0 && cc > 0.0 && aa.is_finite() && cc.is_finite() && r0.is_finite()) {
        return None;
    }
    // the least of a convex quadratic over the unit square (Ericson, *Real-Time
    // Collision Detection*, §5.1.9): s where the lines come nearest, clamped (0 for
    // parallel lines), t best for that s; if t must be clamped, s best for that t
    let det = aa * cc - bb * bb;
    let mut s = if det > 1e-12 * aa * cc {
        ((bb * ee - cc * dd) / det).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let mut t = (bb * s + ee) / cc;
    if t < 0.0 {
        t = 0.0;
        s = (-dd / aa).clamp(0.0, 1.0);
    } else if t > 1.0 {
        t = 1.0;
        s = ((bb - dd) / aa).clamp(0.0, 1.0);
    }
    let free = |x: f64| x > 0.0 && x < 1.0;
    Some((s, t, free(s), free(t)))
}

/// Distance between the segments `e` = (a, b) and `f` = (c, d), with its gradient and
/// (with `hessian`) its Hessian over (a, b, c, d): exact inside each region of the
/// nearest points (both inside their edges, one at an end, both at ends; the envelope
/// theorem over the free parameters, as for a vertex and a triangle). `None` where the
/// segments touch (within 1e-12 m), are degenerate, or are parallel enough that the
/// nearest points are not unique to rounding.
pub(crate) fn edge_distance(x: [DVec3; 4], hessian: bool) -> Option<PairDistance> {
    let (s, t, sf, tf) = segment_closest(x[0], x[1], x[2], x[3])?;
    let w = [1.0 - s, s, t - 1.0, -t];
    const DS: [f64; 4] = [-1.0, 1.0, 0.0, 0.0];
    const DT: [f64; 4] = [0.0, 0.0, 1.0, -1.0];
    let free: &[[f64; 4]] = match (sf, tf) {
        (true, true) => &[DS, DT],
        (true, false) => &[DS],
        (false, true) => &[DT],
        (false, false) => &[],
    };
    weighted_distance(x, w, free, hessian)
}

/// x = |u × v|² of the edges u = b − a, v = d − c, with its gradient over (a, b, c, d)
/// and (with `hessian`; zero otherwise) its Hessian (`hess[i][j]` = ∂²x/∂q_i∂q_j).
pub(crate) fn cross_norm2(x: [DVec3; 4], hessian: bool) -> (f64, [DVec3; 4], [[DMat3; 4]; 4]) {
    let (u, v) = (x[1] - x[0], x[3] - x[2]);
    let (aa, bb, cc) = (u.dot(u), u.dot(v), v.dot(v));
    let val = aa * cc - bb * bb;
    let gu = u * (2.0 * cc) - v * (2.0 * bb);
    let gv = v * (2.0 * aa) - u * (2.0 * bb);
    let grad = [-gu, gu, -gv, gv];
    let mut hess = [[DMat3::ZERO; 4]; 4];
    if !hessian {
        return (val, grad, hess);
    }
    let huu = DMat3::from_diagonal(DVec3::splat(2.0 * cc)) - outer(v, v) * 2.0;
    let hvv = DMat3::from_diagonal(DVec3::splat(2.0 * aa)) - outer(u, u) * 2.0;
    // (∂²x/∂u_i∂v_j) = 4 u_i v_j − 2 v_i u_j − 2 (u·v) δ_ij
    let huv = outer(u, v) * 4.0 - outer(v, u) * 2.0 - DMat3::from_diagonal(DVec3::splat(2.0 * bb));
    // q = (a, b, c, d): u = b − a, v = d − c
    let sign = [-1.0, 1.0, -1.0, 1.0];
    for i in 0..4 {
        for j in 0..4 {
            let block = match (i < 2, j < 2) {
                (true, true) => huu,
                (false, false) => hvv,
                (true, false) => huv,
                (false, true) => huv.transpose(),
            };
            hess[i][j] = block * (sign[i] * sign[j]);
        }
    }
    (val, grad, hess)
}

/// The mollifier m(x) of IPC Eq. 23 with threshold `eps` (> 0), and its first two
/// derivatives: (2 − x/ε)·x/ε below ε, 1 from ε on (C¹ there).
pub(crate) fn mollifier(x: f64, eps: f64) -> (f64, f64, f64) {
    if x >= eps {
        return (1.0, 0.0, 0.0);
    }
    let r = x / eps;
    ((2.0 - r) * r, 2.0 * (1.0 - r) / eps, -2.0 / (eps * eps))
}

/// The area an edge pair's barrier is weighted with, m²: a sixth of the areas of each
/// edge's two vertices, averaged over the two edges. A vertex has about six edges, so
/// the edges share the garment's area as its vertices do, and an edge pair pushes about
/// as hard as a vertex–triangle pair at the same gap.
pub(crate) fn edge_area(area: &[f64], e: [u32; 2], f: [u32; 2]) -> f64 {
    let sum = |g: [u32; 2]| area[g[0] as usize] + area[g[1] as usize];
    (sum(e) + sum(f)) / 12.0
}

/// The signed volume (b − a) × (c − a) · (d − a) of two edges: zero where they are
/// coplanar, so its sign tells on which side of each other they pass.
fn volume([a, b, c, d]: [DVec3; 4]) -> f64 {
    (b - a).cross(c - a).dot(d - a)
}

/// Where in [0, 1] `f` changes sign, by 48 bisections from `f(0) = f0` (the other end
/// of the opposite sign or zero): the middle of the last bracket.
pub(super) fn sign_change(f: impl Fn(f64) -> f64, f0: f64) -> f64 {
    let (mut lo, mut hi) = (0.0, 1.0);
    for _ in 0..48 {
        let mid = 0.5 * (lo + hi);
        let fm = f(mid);
        if (fm < 0.0) == (f0 < 0.0) && fm != 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// When (as a share of the step, in [0, 1]) the edges `x` pass through each other while
/// every vertex moves linearly from `from` to `to` (`x` indexes both): their volume
/// changes sign over the step, and where it is zero (found by bisection) the two lines
/// meet inside both segments. As for a vertex and a triangle, a volume that changes
/// sign twice within one step is taken as no crossing.
pub(crate) fn edge_crossing_time(from: &[DVec3], to: &[DVec3], x: [u32; 4]) -> Option<f64> {
    let at = |s: f64| x.map(|w| from[w as usize].lerp(to[w as usize], s));
    let (v0, v1) = (volume(at(0.0)), volume(at(1.0)));
    if (v0 * v1).is_nan() || v0 * v1 > 0.0 || (v0 == 0.0 && v1 == 0.0) {
        return None;
    }
    let s = sign_change(|s| volume(at(s)), v0);
    let [a, b, c, d] = at(s);
    // where the two lines come nearest (they meet, up to the bisection's width)
    let (u, v, r0) = (b - a, d - c, a - c);
    let (aa, bb, cc) = (u.dot(u), u.dot(v), v.dot(v));
    let det = aa * cc - bb * bb;
    if det.is_nan() || det <= 1e-12 * aa * cc {
        return None;
    }
    let (dd, ee) = (u.dot(r0), v.dot(r0));
    let p = (bb * ee - cc * dd) / det;
    let q = (aa * ee - bb * dd) / det;
    let tol = 1e-9;
    ((-tol..=1.0 + tol).contains(&p) && (-tol..=1.0 + tol).contains(&q)).then_some(s)
}
