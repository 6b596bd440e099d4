//! The examples re-expressed in bone-local frames, so that the runtime blends examples
//! *before* it rotates anything.
//!
//! SOR Eq. 1 moves example J's vertex by each bone's motion from pose p^J to the input
//! pose, R_b^J = W_b^in (W_b^J)⁻¹ (W world rotations, c joint positions):
//!
//! R_b^J (y^J − c_b^J) + c_b^in = W_b^in ℓ_b^J + c_b^in,  ℓ_b^J = (W_b^J)⁻¹ (y^J − c_b^J),
//!
//! and the translation term R_{b₀}^J τ^J (c̄^in − c̄^J) (c̄ = Σ_q w_q c_q, b₀ the vertex's
//! first skin bone) is W_{b₀}^in (A^J c̄^in − a^J) with A^J = (W_{b₀}^J)⁻¹ τ^J and
//! a^J = A^J c̄^J. Everything carrying the superscript J is fixed per example, so it is
//! computed once here; the blend of SOR Eq. 2 is then a weighted sum of these local
//! quantities followed by one rotation per bone, instead of one rotation per bone *per
//! example*. The result is the same expression, reordered.

use glam::{Mat3A, Vec3, Vec3A, Vec4};

use crate::skeleton::{JOINT_COUNT, Rigid};

use super::db::Database;
use super::rig::tau_matrix;

/// One example's data at one vertex, in bone-local frames (metres), laid out as
/// 16-byte lanes so that the runtime loads each with one aligned SIMD load, and the
/// lanes it sums for every example (`near`, `tau`, `tau_offset`: 128 bytes) first, as
/// four aligned 32-byte pairs.
#[derive(Copy, Clone, Debug, Default)]
#[repr(C, align(32))]
pub(super) struct LocalVertex {
    /// Per skin bone q (zero where w_q = 0): xyz: c_q ℓ_q, w: c_q, with
    /// c_q = (1 − α) w_q, plus α when the remote bone is q (SOR Eq. 5's rotation weight).
    pub near: [Vec4; 4],
    /// Columns of A = (W_{b₀}^J)⁻¹ τ^J; w: 0.
    pub tau: [Vec4; 3],
    /// xyz: a = A c̄^J; w: d₀ = min(h₀^J, ε_p), metres (SOR Eq. 12).
    pub tau_offset: Vec4,
    /// A remote bone r that is not one of the skin bones: xyz: α ℓ_r, w: α (zero when
    /// `remote_bone` is [`NO_BONE`]).
    pub remote: Vec4,
    /// The remote bone when it is held apart in `remote`, else [`NO_BONE`].
    pub remote_bone: u32,
    /// The associated body vertex v^J (SOR Eq. 11).
    pub body_vertex: u32,
    _pad: [u32; 2],
}

/// `remote_bone` of a record whose remote bone is folded into `near` (or has α = 0).
pub(super) const NO_BONE: u32 = u32::MAX;

impl LocalVertex {
    /// d₀ = min(h₀^J, ε_p).
    #[inline]
    pub(super) fn clearance(&self) -> f32 {
        self.tau_offset.w
    }
}

/// [`LocalVertex`] for every example and vertex, example-major, the vertices of each
/// example in the order the runtime visits them.
pub(super) struct LocalExamples {
    vertices: usize,
    data: Vec<LocalVertex>,
}

impl LocalExamples {
    /// Re-expresses every example of `db`; `frames[j]` are example j's world frames,
    /// `margin` is ε_p (metres), `order` the garment's vertices in the order records
    /// are stored (a permutation).
    pub(super) fn new(
        db: &Database,
        frames: &[[Rigid; JOINT_COUNT]],
        margin: f32,
        order: &[u32],
    ) -> Self {
        let n = db.vertex_count();
        let skin = &db.garment.skin;
        let mut data = Vec::with_capacity(n * db.examples.len());
        for (ex, f) in db.examples.iter().zip(frames) {
            let inv: [Mat3A; JOINT_COUNT] =
                std::array::from_fn(|b| Mat3A::from_quat(f[b].rot.conjugate()));
            let local =
                |b: usize, y: Vec3| -> Vec3 { (inv[b] * Vec3A::from(y - f[b].trans)).into() };
            for &v in order {
                let v = v as usize;
                let (joints, weights) = (skin.joints[v], skin.weights[v]);
                let y = ex.positions[v];
                let mut rec = LocalVertex {
                    remote_bone: NO_BONE,
                    body_vertex: ex.body_vertex[v],
                    ..LocalVertex::default()
                };
                let (alpha, r) = (ex.alpha[v], ex.remote_bone[v] as usize);
                let mut folded = alpha == 0.0;
                let mut cbar = Vec3::ZERO;
                for q in 0..4 {
                    let (b, w) = (joints[q] as usize, weights[q]);
                    if w > 0.0 {
                        let mut c = (1.0 - alpha) * w;
                        if b == r && !folded {
                            c += alpha;
                            folded = true;
                        }
                        rec.near[q] = (local(b, y) * c).extend(c);
                        cbar += f[b].trans * w;
                    }
                }
                if !folded {
                    rec.remote = (local(r, y) * alpha).extend(alpha);
                    rec.remote_bone = r as u32;
                }
                let a = inv[joints[0] as usize] * Mat3A::from(tau_matrix(&ex.translation[v]));
                rec.tau = [a.x_axis, a.y_axis, a.z_axis].map(|c| c.extend(0.0));
                rec.tau_offset = (a * Vec3A::from(cbar)).extend(ex.clearance[v].min(margin));
                data.push(rec);
            }
        }
        Self { vertices: n, data }
    }

    /// Example `j`'s data at the vertex stored `i`-th.
    #[inline]
    pub(super) fn get(&self, j: usize, i: usize) -> &LocalVertex {
        &self.data[j * self.vertices + i]
    }
}
