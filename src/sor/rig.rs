//! Sensitivity-optimized rigging of one example (SOR §4): per garment vertex the remote
//! bone and its ratio α (Eq. 5–8), the translation weights (§4, last paragraph), the
//! associated body vertex and clearance for penetration handling (Eq. 11–12), and the
//! example's distance weights U_{g,m} (Eq. 9).

use glam::{DVec3, Mat3, Vec3};

use crate::body::SkinWeights;
use crate::mesh::NearestVertex;
use crate::skeleton::{DOF_COUNT, JOINT_COUNT, Pose, Skeleton};

use super::motion::PoseDerivatives;

/// Parameters of the rigging fit.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RigParams {
    /// Ridge regularisation of the translation weights, relative to the mean eigenvalue
    /// of the regressor's Gram matrix (dimensionless). 0.1 keeps τ small where the joint
    /// translations barely vary, as SOR's "regularized least squares" asks.
    pub translation_ridge: f64,
}

impl Default for RigParams {
    fn default() -> Self {
        Self {
            translation_ridge: 0.1,
        }
    }
}

/// One example of the database: pose, garment shape and its SOR rig.
///
/// All per-vertex arrays have the garment's vertex count; positions are in the
/// canonical frame (metres).
#[derive(Clone, Debug, PartialEq)]
pub struct Example {
    /// Example pose p^J (canonical: no root translation or heading).
    pub pose: Pose,
    /// Garment shape y^J at static equilibrium, metres.
    pub positions: Vec<Vec3>,
    /// Remote bone b^J per vertex (SOR Eq. 5).
    pub remote_bone: Vec<u8>,
    /// Blend ratio α^J per vertex, 0–1 (SOR Eq. 5).
    pub alpha: Vec<f32>,
    /// Translation weight τ^J per vertex (3×3, row-major), applied to the skin-weighted
    /// joint translation and rotated with the vertex's dominant bone.
    pub translation: Vec<[f32; 9]>,
    /// Associated body vertex v^J (nearest posed body vertex, SOR Eq. 11–12).
    pub body_vertex: Vec<u32>,
    /// Clearance h₀^J over the associated body vertex along its normal, metres.
    pub clearance: Vec<f32>,
    /// Distance weights U^J_{g,m}, `regions × 66`, row-major (SOR Eq. 9), m²/rad².
    pub distance_weights: Vec<f32>,
}

/// Diagnostics of a fit (for tests and reports).
#[derive(Clone, Debug, Default)]
pub struct RigReport {
    /// ρ with the nearest body vertex's weights only (α = 0), per vertex.
    pub rho_naive: Vec<f64>,
    /// ρ with the optimised remote bone and α, per vertex.
    pub rho_optimised: Vec<f64>,
}

/// Everything the fit needs about the garment.
pub struct GarmentRigInput<'a> {
    /// Skin weights of the garment (the nearby bones, SOR §4).
    pub skin: &'a SkinWeights,
    /// Region weights ŵ_{g,y}, `vertices × regions`.
    pub region_weights: &'a [f32],
    /// Number of regions N_G.
    pub regions: usize,
}

/// The body surface posed at an example's pose, in the canonical frame (metres).
#[derive(Clone, Copy, Debug)]
pub struct PosedBody<'a> {
    /// Body vertex positions.
    pub positions: &'a [Vec3],
    /// Unit outward vertex normals, one per position.
    pub normals: &'a [Vec3],
}

/// Fits the SOR rig of one example.
///
/// `sensitivity[m][v]` is s_m at vertex v (metres per radian, SOR Eq. 3);
/// `body` is the body posed at `pose` (canonical frame).
pub fn fit_example(
    skeleton: &Skeleton,
    pose: &Pose,
    positions: &[Vec3],
    sensitivity: &[Vec<DVec3>],
    garment: &GarmentRigInput<'_>,
    body: PosedBody<'_>,
    params: &RigParams,
) -> Result<(Example, RigReport), crate::mesh::MeshError> {
    let n = positions.len();
    let d = PoseDerivatives::new(skeleton, pose);
    let mut ex = Example {
        pose: *pose,
        positions: positions.to_vec(),
        remote_bone: vec![0; n],
        alpha: vec![0.0; n],
        translation: vec![[0.0; 9]; n],
        body_vertex: vec![0; n],
        clearance: vec![0.0; n],
        distance_weights: vec![0.0; garment.regions * DOF_COUNT],
    };
    let mut report = RigReport {
        rho_naive: vec![0.0; n],
        rho_optimised: vec![0.0; n],
    };
    let nearest = NearestVertex::build(body.positions)?;
    let mut a = [Vec3::ZERO; DOF_COUNT];
    let mut r = [Vec3::ZERO; DOF_COUNT];
    let mut e = [Vec3::ZERO; DOF_COUNT];
    let mut z = [Vec3::ZERO; DOF_COUNT];
    for v in 0..n {
        let y = positions[v];
        let (joints, weights) = (garment.skin.joints[v], garment.skin.weights[v]);
        // A_m: the nearby bones' response (α = 0), and r_m = s_m − A_m
        for m in 0..DOF_COUNT {
            let mut acc = Vec3::ZERO;
            for k in 0..4 {
                if weights[k] > 0.0 {
                    acc += d.point_velocity(joints[k] as usize, m, y) * weights[k];
                }
            }
            a[m] = acc;
            r[m] = sensitivity[m][v].as_vec3() - acc;
        }
        let rho0: f64 = r.iter().map(|x| x.length_squared() as f64).sum();
        // remote bone and α: ρ(α, b) = Σ‖r_m − α d_m‖², d_m = u_{b,m} − A_m (Eq. 6–8)
        let (mut best_b, mut best_alpha, mut best_rho) = (joints[0] as usize, 0.0f64, rho0);
        for b in 0..JOINT_COUNT {
            let (mut rd, mut dd) = (0.0f64, 0.0f64);
            for m in 0..DOF_COUNT {
                let dm = d.point_velocity(b, m, y) - a[m];
                rd += r[m].dot(dm) as f64;
                dd += dm.length_squared() as f64;
            }
            if dd <= 1e-20 {
                continue;
            }
            let alpha = (rd / dd).clamp(0.0, 1.0);
            let rho = rho0 - 2.0 * alpha * rd + alpha * alpha * dd;
            if rho < best_rho - 1e-15 * rho0 {
                best_rho = rho;
                best_b = b;
                best_alpha = alpha;
            }
        }
        report.rho_naive[v] = rho0;
        report.rho_optimised[v] = best_rho;
        ex.remote_bone[v] = best_b as u8;
        ex.alpha[v] = best_alpha as f32;
        // residual after the rotation weights, and the translation regressor z_m = ∂t̄/∂Θ_m
        let alpha = best_alpha as f32;
        for m in 0..DOF_COUNT {
            let sbar = a[m] * (1.0 - alpha) + d.point_velocity(best_b, m, y) * alpha;
            e[m] = sensitivity[m][v].as_vec3() - sbar;
            let mut t = Vec3::ZERO;
            for k in 0..4 {
                if weights[k] > 0.0 {
                    t += d.joint_velocity(joints[k] as usize, m) * weights[k];
                }
            }
            z[m] = t;
        }
        let tau = fit_translation(&e, &z, params.translation_ridge);
        ex.translation[v] = tau.transpose().to_cols_array();
        // U_{g,m} accumulates ŵ_{g,y} ‖s_m − s̄_m‖² with the full SOR prediction
        for m in 0..DOF_COUNT {
            let err = (e[m] - tau * z[m]).length_squared();
            for g in 0..garment.regions {
                ex.distance_weights[g * DOF_COUNT + m] +=
                    garment.region_weights[v * garment.regions + g] * err;
            }
        }
        // associated body vertex and clearance (SOR Eq. 11–12)
        let (bv, _) = nearest.nearest(y);
        ex.body_vertex[v] = bv.0;
        ex.clearance[v] = (y - body.positions[bv.index()]).dot(body.normals[bv.index()]);
    }
    Ok((ex, report))
}

/// τ = (Σ e zᵀ)(Σ z zᵀ + λI)⁻¹ with λ relative to the Gram matrix's mean eigenvalue.
fn fit_translation(e: &[Vec3; DOF_COUNT], z: &[Vec3; DOF_COUNT], ridge: f64) -> Mat3 {
    let mut ez = Mat3::ZERO;
    let mut zz = Mat3::ZERO;
    for m in 0..DOF_COUNT {
        ez += outer(e[m], z[m]);
        zz += outer(z[m], z[m]);
    }
    let tr = (zz.x_axis.x + zz.y_axis.y + zz.z_axis.z) as f64 / 3.0;
    if tr <= 1e-12 {
        return Mat3::ZERO;
    }
    let lambda = (ridge * tr) as f32;
    let reg = zz + Mat3::from_diagonal(Vec3::splat(lambda));
    if reg.determinant().abs() < 1e-20 {
        return Mat3::ZERO;
    }
    ez * reg.inverse()
}

fn outer(a: Vec3, b: Vec3) -> Mat3 {
    Mat3::from_cols(a * b.x, a * b.y, a * b.z)
}

/// τ of an example vertex as a matrix.
#[inline]
pub fn tau_matrix(t: &[f32; 9]) -> Mat3 {
    Mat3::from_cols_array(t).transpose()
}
