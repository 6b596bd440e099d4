//! Body contact: a smooth one-sided penalty E = A·κ/(3δ)·(δ − d)³ for d < δ (δ the
//! contact margin, A the vertex's area), zero beyond; C² at d = δ, so Newton's method
//! converges without chattering at the contact onset. (A quadratic penalty, C¹ only,
//! made resting cloth flicker in and out of contact between iterations.)
//!
//! d is a smooth signed distance to the posed body: the implicit moving-least-squares
//! surface of the body's triangles (Shen, O'Brien, Shewchuk 2004, "Interpolating and
//! approximating implicit surfaces from polygon soup"), d(p) = Σ_t φ_t·s_t / Σ_t φ_t
//! (with a pseudo-facet reading "far", [`FAR_WEIGHT`]),
//! where s_t = (p − a_t)·n_t is the signed distance to triangle t's plane and
//! φ_t = (1 − r_t²/R²)⁴ weighs it by the point's distance r_t to the triangle (closest
//! point on the triangle, found with the AABB tree). The exact distance to a polyhedron
//! has gradient jumps at every concave edge, which stall Newton's method on resting
//! cloth; this blend is C¹ everywhere with piecewise-smooth second derivatives, lies
//! within about a millimetre of the mesh (the sagitta of its facets), and comes with
//! an exact gradient and Hessian. R is 1.5 body edge lengths (≈ 3 cm on the default
//! body): several facets always contribute near the surface.

use glam::{DMat3, DVec3, Vec3};

use crate::body::Body;
use crate::mesh::{Feature, MeshError, MeshQuery, TriMesh, closest_on_triangle_f64};
use crate::skeleton::Pose;

use super::params::SimParams;

/// Kernel radius in body edge lengths.
const KERNEL_EDGES: f32 = 1.5;

/// Weight of a pseudo-facet blended into the field that reads one kernel radius away
/// (no contact): as the last facet within the kernel leaves it, the field tends
/// continuously to "far". Without it a point whose only facet within reach sat at the
/// kernel's edge read that facet's plane distance, which can be anything, and the
/// energy jumped by up to a contact's worth when the facet left (CMU 131_03 frames 852
/// and 978 stalled on such a jump, 2.8 cm from the body). Near the body the facets'
/// weights sum to about 1 or more, so it moves the field by ~1/1000 of the gap to the
/// kernel radius (≤ 0.03 mm at the contact margin).
const FAR_WEIGHT: f64 = 1e-3;

/// The posed body as a collision surface.
pub struct Collider {
    query: MeshQuery,
    triangles: Vec<[u32; 3]>,
    positions: Vec<DVec3>,
    normals: Vec<DVec3>,
    scratch: Vec<Vec3>,
    radius: f64,
    /// Which posed body this is: unique to this collider and pose among every collider
    /// of the process (see [`Collider::generation`]).
    generation: u64,
}

/// Source of [`Collider::generation`]s (0 is never handed out).
static GENERATIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Signed distance of a point and its first two derivatives.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Distance {
    /// Signed distance, metres (negative inside the body).
    pub(crate) d: f64,
    /// ∇d.
    pub(crate) grad: DVec3,
    /// ∇²d.
    pub(crate) hess: DMat3,
}

/// One facet's contribution: φ, s = plane distance, n, p − c (c the closest point),
/// the feature projector P, and u = 1 − r²/R².
type Term = (f64, f64, DVec3, DVec3, DMat3, f64);

thread_local! {
    static NEAR: std::cell::RefCell<(Vec<u32>, Vec<Term>)> = const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

impl Collider {
    /// The body posed at `pose`.
    pub fn new(body: &Body, pose: &Pose, params: &SimParams) -> Result<Self, MeshError> {
        let scratch = body.posed_positions(pose, params.body_skinning);
        let query = MeshQuery::build(&TriMesh::new(scratch.clone(), body.mesh.triangles.clone()))?;
        let radius = (KERNEL_EDGES * query.mean_edge_length()) as f64;
        let mut c = Self {
            query,
            triangles: body.mesh.triangles.clone(),
            positions: vec![DVec3::ZERO; scratch.len()],
            normals: vec![DVec3::ZERO; body.mesh.triangles.len()],
            scratch,
            radius,
            generation: 0,
        };
        c.refresh();
        Ok(c)
    }

    /// A collider of a fixed mesh (no body, no pose) with kernel radius `radius`, metres.
    #[cfg(test)]
    pub(crate) fn of_mesh(mesh: &TriMesh, radius: f64) -> Result<Self, MeshError> {
        let mut c = Self {
            query: MeshQuery::build(mesh)?,
            triangles: mesh.triangles.clone(),
            positions: vec![DVec3::ZERO; mesh.positions.len()],
            normals: vec![DVec3::ZERO; mesh.triangles.len()],
            scratch: mesh.positions.clone(),
            radius,
            generation: 0,
        };
        c.refresh();
        Ok(c)
    }

    fn refresh(&mut self) {
        self.generation = GENERATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        for (d, s) in self.positions.iter_mut().zip(&self.scratch) {
            *d = s.as_dvec3();
        }
        for (n, t) in self.normals.iter_mut().zip(&self.triangles) {
            let [a, b, c] = t.map(|v| self.positions[v as usize]);
            *n = (b - a).cross(c - a).normalize_or_zero();
        }
    }

    /// Re-poses the body (same mesh), refitting the tree.
    pub fn set_pose(&mut self, body: &Body, pose: &Pose, params: &SimParams) {
        body.pose_into(pose, params.body_skinning, &mut self.scratch);
        self.query.update(&self.scratch);
        self.refresh();
    }

    /// An id of this collider in its current pose, never 0 and never shared with another
    /// collider or pose in this process: [`Collider::distance`] at a point is a function
    /// of it, so values computed under one generation can be reused while it lasts.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// Posed body vertex positions, metres.
    pub fn body_positions(&self) -> &[DVec3] {
        &self.positions
    }

    /// The deepest point (index, exact signed distance) among those more than half the
    /// kernel radius inside the body, if any: there the smooth field no longer points
    /// reliably outwards (the other side of a limb is as near), so such a state is
    /// refused rather than simulated.
    pub fn deepest_inside(&self, y: &[DVec3]) -> Option<(usize, f64)> {
        let limit = -0.5 * self.radius;
        y.iter()
            .enumerate()
            .map(|(i, p)| (i, self.signed_distance(*p)))
            .filter(|(_, d)| *d < limit)
            .min_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// Exact signed distance to the body mesh (for reporting penetration), metres.
    pub fn signed_distance(&self, p: DVec3) -> f64 {
        self.query.signed_distance(p.as_vec3()) as f64
    }

    /// The smooth signed distance with derivatives, or `None` when no body triangle is
    /// within the kernel radius (the point feels no contact; a point that deep inside
    /// the body is refused before solving, see [`Collider::deepest_inside`]).
    ///
    /// A body of several closed parts (an imported avatar's head apart from its body)
    /// is their union: only the triangles of the part that decides the exact signed
    /// distance ([`MeshQuery::closest_signed`]: the part the point is deepest inside,
    /// or else the nearest part) are blended. Blending every part's triangles together
    /// would let a point inside one part read as outside because another part's surface
    /// is as near; taking the least of every part's blend would let a part whose only
    /// triangle near the point lies at the kernel's edge, where one facet's plane can
    /// put the point behind it, win with a spurious depth. The field may step by about
    /// the facets' sagitta where the deciding part changes (points as far from two
    /// parts, or as deep in both).
    ///
    /// Beyond `cutoff` (the contact margin for callers that only need the penalty) the
    /// derivatives are not computed and are returned as zero.
    pub(crate) fn distance(&self, p: DVec3, cutoff: f64) -> Option<Distance> {
        NEAR.with(|cell| {
            let (near, terms) = &mut *cell.borrow_mut();
            near.clear();
            self.query
                .triangles_near(p.as_vec3(), self.radius as f32, near);
            if self.query.part_count() == 1 || near.is_empty() {
                return self.blend(p, near, terms, cutoff);
            }
            let part = self
                .query
                .part_of(self.query.closest_signed(p.as_vec3()).triangle);
            near.retain(|&t| self.query.part_of(t) == part);
            self.blend(p, near, terms, cutoff)
        })
    }

    fn blend(
        &self,
        p: DVec3,
        near: &[u32],
        terms: &mut Vec<Term>,
        cutoff: f64,
    ) -> Option<Distance> {
        let r2max = self.radius * self.radius;
        // sums: D = Σφ, N = Σφ s, and derivative accumulators
        let (mut d_sum, mut n_sum) = (0.0, 0.0);
        terms.clear();
        for &t in near {
            let [a, b, c] = self.triangles[t as usize].map(|v| self.positions[v as usize]);
            let n = self.normals[t as usize];
            // the plane is a lower bound of the distance to the triangle
            if (p - a).dot(n).abs() >= self.radius {
                continue;
            }
            let (q, _, feature) = closest_on_triangle_f64(p, a, b, c);
            let diff = p - q;
            let r2 = diff.length_squared();
            if r2 >= r2max {
                continue;
            }
            let s = (p - a).dot(n);
            let u = 1.0 - r2 / r2max;
            let phi = u * u * u * u;
            d_sum += phi;
            n_sum += phi * s;
            let proj = match feature {
                Feature::Face => outer(n, n),
                Feature::Edge(k) => {
                    let k = k as usize;
                    let e = ([a, b, c][(k + 1) % 3] - [a, b, c][k]).normalize_or_zero();
                    DMat3::IDENTITY - outer(e, e)
                }
                Feature::Vertex(_) => DMat3::IDENTITY,
            };
            terms.push((phi, s, n, diff, proj, u));
        }
        if terms.is_empty() {
            return None;
        }
        d_sum += FAR_WEIGHT;
        n_sum += FAR_WEIGHT * self.radius;
        if n_sum / d_sum >= cutoff {
            return Some(Distance {
                d: n_sum / d_sum,
                grad: DVec3::ZERO,
                hess: DMat3::ZERO,
            });
        }
        let f = n_sum / d_sum;
        // φ as a function of q = r²: φ' = −4u³/R², φ'' = 12u²/R⁴;
        // ∇(r²) = 2(p − c), ∇²(r²) = 2·P with P by the closest feature
        let dphi = |u: f64| -4.0 * u * u * u / r2max;
        let mut grad_d = DVec3::ZERO;
        let mut g = DVec3::ZERO;
        for &(phi, s, n, diff, _, u) in terms.iter() {
            let gphi = diff * (2.0 * dphi(u));
            grad_d += gphi;
            g += gphi * (s - f) + n * phi;
        }
        // ∇f = G/D with G = Σ ∇φ_t (s_t − f) + φ_t n_t
        let grad = g / d_sum;
        // ∇G = Σ ∇²φ (s − f) + ∇φ (n − ∇f)ᵀ + n ∇φᵀ;  ∇²f = (∇G − ∇f ∇Dᵀ)/D
        let mut hg = DMat3::ZERO;
        for &(_, s, n, diff, proj, u) in terms.iter() {
            let gphi = diff * (2.0 * dphi(u));
            let ddphi = 12.0 * u * u / (r2max * r2max);
            let hphi = outer(diff, diff) * (4.0 * ddphi) + proj * (2.0 * dphi(u));
            hg += hphi * (s - f) + outer(gphi, n - grad) + outer(n, gphi);
        }
        let mut hess = (hg - outer(grad, grad_d)) * (1.0 / d_sum);
        // symmetrise (exact up to rounding)
        hess = (hess + hess.transpose()) * 0.5;
        Some(Distance { d: f, grad, hess })
    }
}

pub(crate) fn outer(a: DVec3, b: DVec3) -> DMat3 {
    DMat3::from_cols(a * b.x, a * b.y, a * b.z)
}

/// Penalty energy of one vertex of area `area` at distance `dist`.
pub(crate) fn energy(dist: &Distance, area: f64, p: &SimParams) -> f64 {
    let e = p.contact_margin - dist.d;
    if e <= 0.0 {
        0.0
    } else {
        area * p.contact_stiffness / (3.0 * p.contact_margin) * e * e * e
    }
}

/// Gradient of the penalty with respect to the vertex.
pub(crate) fn gradient(dist: &Distance, area: f64, p: &SimParams) -> DVec3 {
    let e = p.contact_margin - dist.d;
    if e <= 0.0 {
        DVec3::ZERO
    } else {
        -dist.grad * (area * p.contact_stiffness / p.contact_margin * e * e)
    }
}

/// Hessian of the penalty; `exact` adds the curvature term of the distance field (not
/// PSD), otherwise the Gauss–Newton part only.
pub(crate) fn hessian(dist: &Distance, area: f64, p: &SimParams, exact: bool) -> DMat3 {
    let e = p.contact_margin - dist.d;
    if e <= 0.0 {
        return DMat3::ZERO;
    }
    let k = area * p.contact_stiffness / p.contact_margin;
    let mut h = outer(dist.grad, dist.grad) * (2.0 * k * e);
    if exact {
        h -= dist.hess * (k * e * e);
    }
    h
}
