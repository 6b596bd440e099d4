//! StVK membrane energy per triangle against the rest shape (SOR §7; Volino et al. 2009):
//! W = A·(μ‖E‖² + λ/2·tr(E)²), E = ½(FᵀF − I), F = Ds·Dm⁻¹ (3×2), with value,
//! gradient and exact Hessian, and a PSD projection of the stress derivative for Newton.

use glam::{DVec2, DVec3};

/// Rest data of one triangle: inverse of the rest edge matrix in a local 2D frame, and
/// the rest area (m²).
#[derive(Copy, Clone, Debug)]
pub(crate) struct MembraneRest {
    dm_inv: [[f64; 2]; 2],
    area: f64,
}

impl MembraneRest {
    /// From the rest corners; `None` for a degenerate triangle.
    pub(crate) fn new(x0: DVec3, x1: DVec3, x2: DVec3) -> Option<Self> {
        let e1 = x1 - x0;
        let e2 = x2 - x0;
        let n = e1.cross(e2);
        let area = 0.5 * n.length();
        if area <= 1e-14 || !area.is_finite() {
            return None;
        }
        let u = e1.normalize();
        let v = n.normalize().cross(u);
        let dm = [[e1.dot(u), e2.dot(u)], [e1.dot(v), e2.dot(v)]];
        let det = dm[0][0] * dm[1][1] - dm[0][1] * dm[1][0];
        let dm_inv = [
            [dm[1][1] / det, -dm[0][1] / det],
            [-dm[1][0] / det, dm[0][0] / det],
        ];
        Some(Self { dm_inv, area })
    }

    /// Rest area, m².
    pub(crate) fn area(&self) -> f64 {
        self.area
    }
}

/// F (3×2) as two columns.
type Def = [DVec3; 2];

fn deformation(r: &MembraneRest, x: &[DVec3; 3]) -> Def {
    let d1 = x[1] - x[0];
    let d2 = x[2] - x[0];
    let m = r.dm_inv;
    [d1 * m[0][0] + d2 * m[1][0], d1 * m[0][1] + d2 * m[1][1]]
}

/// Green strain E (2×2 symmetric) from F.
fn green(f: &Def) -> [[f64; 2]; 2] {
    let e01 = 0.5 * f[0].dot(f[1]);
    [
        [0.5 * (f[0].dot(f[0]) - 1.0), e01],
        [e01, 0.5 * (f[1].dot(f[1]) - 1.0)],
    ]
}

/// First Piola–Kirchhoff stress P = F·S for a strain, S = 2μE + λ tr(E) I.
fn pk1(f: &Def, e: &[[f64; 2]; 2], mu: f64, lambda: f64) -> Def {
    let tr = e[0][0] + e[1][1];
    let s = [
        [2.0 * mu * e[0][0] + lambda * tr, 2.0 * mu * e[0][1]],
        [2.0 * mu * e[1][0], 2.0 * mu * e[1][1] + lambda * tr],
    ];
    [
        f[0] * s[0][0] + f[1] * s[1][0],
        f[0] * s[0][1] + f[1] * s[1][1],
    ]
}

/// Energy of one triangle, J.
pub(crate) fn energy(r: &MembraneRest, x: &[DVec3; 3], mu: f64, lambda: f64) -> f64 {
    let f = deformation(r, x);
    let e = green(&f);
    let tr = e[0][0] + e[1][1];
    let ee = e[0][0] * e[0][0] + 2.0 * e[0][1] * e[0][1] + e[1][1] * e[1][1];
    r.area * (mu * ee + 0.5 * lambda * tr * tr)
}

/// Gradient with respect to the three corners, J/m.
pub(crate) fn gradient(r: &MembraneRest, x: &[DVec3; 3], mu: f64, lambda: f64) -> [DVec3; 3] {
    let f = deformation(r, x);
    let p = pk1(&f, &green(&f), mu, lambda);
    let m = r.dm_inv;
    // G = A·P·Dm⁻ᵀ; columns are the forces' negatives on corners 1 and 2
    let g1 = (p[0] * m[0][0] + p[1] * m[0][1]) * r.area;
    let g2 = (p[0] * m[1][0] + p[1] * m[1][1]) * r.area;
    [-(g1 + g2), g1, g2]
}

/// Hessian (9×9, corner-major: row 3i+a is corner i, axis a). With `project`, the
/// stress derivative ∂P/∂F = F·∂S/∂F (material part, always PSD for StVK since
/// dE:dS = 2μ|dE|² + λ tr(dE)² ≥ 0) + dF·S (geometric part, with the eigenvalues of the
/// second Piola–Kirchhoff stress S) is made PSD by clamping S's negative principal
/// stresses (compression) to zero: a closed-form 2×2 projection, so the element
/// Hessian is PSD without an eigen-decomposition of the 9×9 (projected Newton).
pub(crate) fn hessian(
    r: &MembraneRest,
    x: &[DVec3; 3],
    mu: f64,
    lambda: f64,
    project: bool,
) -> [[f64; 9]; 9] {
    let f = deformation(r, x);
    let e = green(&f);
    let m = r.dm_inv;
    // second Piola–Kirchhoff stress, clamped to tension when projecting
    let tr = e[0][0] + e[1][1];
    let mut s2 = [
        [2.0 * mu * e[0][0] + lambda * tr, 2.0 * mu * e[0][1]],
        [2.0 * mu * e[1][0], 2.0 * mu * e[1][1] + lambda * tr],
    ];
    if project {
        s2 = clamp_psd2(s2);
    }
    // dP/dF: apply the linearised stress to the six unit perturbations of F
    let unit = |k: usize| -> Def {
        let mut d = [DVec3::ZERO; 2];
        d[k / 3][k % 3] = 1.0;
        d
    };
    let dp = |df: &Def| -> Def {
        // dE = ½(dFᵀF + FᵀdF)
        let de01 = 0.5 * (df[0].dot(f[1]) + f[0].dot(df[1]));
        let de = [[df[0].dot(f[0]), de01], [de01, df[1].dot(f[1])]];
        // geometric part dF·S
        let a = [
            df[0] * s2[0][0] + df[1] * s2[1][0],
            df[0] * s2[0][1] + df[1] * s2[1][1],
        ];
        // F·dS with dS = 2μ dE + λ tr(dE) I
        let tr = de[0][0] + de[1][1];
        let ds = [
            [2.0 * mu * de[0][0] + lambda * tr, 2.0 * mu * de[0][1]],
            [2.0 * mu * de[1][0], 2.0 * mu * de[1][1] + lambda * tr],
        ];
        let b = [
            f[0] * ds[0][0] + f[1] * ds[1][0],
            f[0] * ds[0][1] + f[1] * ds[1][1],
        ];
        [a[0] + b[0], a[1] + b[1]]
    };
    let mut c = [[0.0; 6]; 6];
    for k in 0..6 {
        let col = dp(&unit(k));
        for i in 0..6 {
            c[i][k] = col[i / 3][i % 3];
        }
    }
    // symmetrise (exact arithmetic gives a symmetric C)
    for i in 0..6 {
        for k in i + 1..6 {
            let s = 0.5 * (c[i][k] + c[k][i]);
            c[i][k] = s;
            c[k][i] = s;
        }
    }
    // B: dF = dDs·Dm⁻¹, dDs = [dx1 − dx0, dx2 − dx0]; column j of F gets
    // Σ_i w[i][j] dx_i with w = [[−m00−m10, −m01−m11], [m00, m01], [m10, m11]]
    let w = [
        [-m[0][0] - m[1][0], -m[0][1] - m[1][1]],
        [m[0][0], m[0][1]],
        [m[1][0], m[1][1]],
    ];
    let mut h = [[0.0; 9]; 9];
    for i in 0..3 {
        for a in 0..3 {
            for j in 0..3 {
                for b in 0..3 {
                    // H[(i,a),(j,b)] = A Σ_{p,q} w[i][p] w[j][q] C[(p,a),(q,b)]
                    let mut s = 0.0;
                    for p in 0..2 {
                        for q in 0..2 {
                            s += w[i][p] * w[j][q] * c[3 * p + a][3 * q + b];
                        }
                    }
                    h[3 * i + a][3 * j + b] = r.area * s;
                }
            }
        }
    }
    h
}

/// The PSD part of a symmetric 2×2 matrix (negative eigenvalues set to zero).
fn clamp_psd2(s: [[f64; 2]; 2]) -> [[f64; 2]; 2] {
    let (a, b, d) = (s[0][0], s[0][1], s[1][1]);
    let mean = 0.5 * (a + d);
    let rad = (0.25 * (a - d) * (a - d) + b * b).sqrt();
    let (l1, l2) = (mean + rad, mean - rad);
    if l2 >= 0.0 {
        return s;
    }
    if l1 <= 0.0 {
        return [[0.0; 2]; 2];
    }
    // eigenvector of l1
    let v = if b.abs() > 1e-300 {
        DVec2::new(l1 - d, b).normalize()
    } else if a >= d {
        DVec2::X
    } else {
        DVec2::Y
    };
    [
        [l1 * v.x * v.x, l1 * v.x * v.y],
        [l1 * v.x * v.y, l1 * v.y * v.y],
    ]
}
