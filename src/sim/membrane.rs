//! Membrane energy per triangle against the rest shape (SOR §7; Volino et al. 2009):
//! StVK, W = A·(μ‖E‖² + λ/2·tr(E)²), E = ½(FᵀF − I), F = Ds·Dm⁻¹ (3×2), optionally
//! softened in compression: written in E's principal strains e₁, e₂ as
//! W = A·(μ(g(e₁) + g(e₂)) + λ/2·g(tr E)) with g(e) = e² for e ≥ 0 and c·e² for e < 0
//! (c = [`Material::compression`]; c = 1 is StVK exactly). Value, gradient and exact
//! Hessian, and a PSD projection of the stress derivative for Newton.

use glam::{DVec2, DVec3};

/// The membrane's material: 2D Lamé pair and the compression ratio.
#[derive(Copy, Clone, Debug, PartialEq)]
pub(crate) struct Material {
    /// Shear modulus μ, N/m.
    pub mu: f64,
    /// Lamé λ (plane stress), N/m.
    pub lambda: f64,
    /// Stiffness in compression as a share of the stiffness in tension, in (0, 1]; 1 is
    /// StVK.
    pub compression: f64,
}

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

/// A symmetric 2×2 matrix.
type Sym2 = [[f64; 2]; 2];

fn deformation(r: &MembraneRest, x: &[DVec3; 3]) -> Def {
    let d1 = x[1] - x[0];
    let d2 = x[2] - x[0];
    let m = r.dm_inv;
    [d1 * m[0][0] + d2 * m[1][0], d1 * m[0][1] + d2 * m[1][1]]
}

/// Green strain E (2×2 symmetric) from F.
fn green(f: &Def) -> Sym2 {
    let e01 = 0.5 * f[0].dot(f[1]);
    [
        [0.5 * (f[0].dot(f[0]) - 1.0), e01],
        [e01, 0.5 * (f[1].dot(f[1]) - 1.0)],
    ]
}

/// Eigenvalues (l₁ ≥ l₂) and the unit eigenvector of l₁ of a symmetric 2×2 matrix (the
/// other is its perpendicular).
fn eigen2(s: &Sym2) -> (f64, f64, DVec2) {
    let (a, b, d) = (s[0][0], s[0][1], s[1][1]);
    let mean = 0.5 * (a + d);
    let rad = (0.25 * (a - d) * (a - d) + b * b).sqrt();
    let (l1, l2) = (mean + rad, mean - rad);
    let v = if b.abs() > 1e-300 {
        // of the two equivalent forms take the better conditioned one
        let p = DVec2::new(l1 - d, b);
        let q = DVec2::new(b, l1 - a);
        if p.length_squared() >= q.length_squared() {
            p
        } else {
            q
        }
        .normalize()
    } else if a >= d {
        DVec2::X
    } else {
        DVec2::Y
    };
    (l1, l2, v)
}

/// The stiffness factor of a strain: 1 in tension, `c` in compression.
fn k(e: f64, c: f64) -> f64 {
    if e < 0.0 { c } else { 1.0 }
}

/// g(e) = k(e)·e², the softened square.
fn g(e: f64, c: f64) -> f64 {
    k(e, c) * e * e
}

/// A strain's principal decomposition, where the softened energy differs from StVK.
struct Principal {
    /// Principal strains, e₁ ≥ e₂ (e₂ < 0).
    e1: f64,
    e2: f64,
    /// Unit principal directions of e₁ and e₂.
    v: DVec2,
    w: DVec2,
    /// tr E = e₁ + e₂.
    tr: f64,
}

/// `None` where the plain StVK formulas apply (no principal strain negative, so the
/// trace is not either, or c = 1); else the decomposition the softened formulas use,
/// computed once per strain.
fn softened(e: &Sym2, mat: &Material) -> Option<Principal> {
    if mat.compression == 1.0 {
        return None;
    }
    let (e1, e2, v) = eigen2(e);
    (e2 < 0.0).then(|| Principal {
        e1,
        e2,
        v,
        w: DVec2::new(-v.y, v.x),
        tr: e1 + e2,
    })
}

/// StVK's linear stress–strain map, 2μE + λ tr(E) I: the stress of a strain, and
/// the stress increment of a strain increment.
fn stvk(e: &Sym2, mat: &Material) -> Sym2 {
    let (mu, lambda) = (mat.mu, mat.lambda);
    let tr = e[0][0] + e[1][1];
    [
        [2.0 * mu * e[0][0] + lambda * tr, 2.0 * mu * e[0][1]],
        [2.0 * mu * e[1][0], 2.0 * mu * e[1][1] + lambda * tr],
    ]
}

/// Second Piola–Kirchhoff stress S = ∂ψ/∂E for the strain `e` (`soft`: its
/// [`softened`] decomposition).
fn stress(e: &Sym2, soft: Option<&Principal>, mat: &Material) -> Sym2 {
    let Some(p) = soft else {
        return stvk(e, mat);
    };
    let (mu, lambda, c) = (mat.mu, mat.lambda, mat.compression);
    let (v, w) = (p.v, p.w);
    // S = Σ 2μ k(eᵢ) eᵢ vᵢvᵢᵀ + λ k(tr) tr I
    let (s1, s2) = (2.0 * mu * k(p.e1, c) * p.e1, 2.0 * mu * k(p.e2, c) * p.e2);
    let iso = lambda * k(p.tr, c) * p.tr;
    [
        [
            s1 * v.x * v.x + s2 * w.x * w.x + iso,
            s1 * v.x * v.y + s2 * w.x * w.y,
        ],
        [
            s1 * v.x * v.y + s2 * w.x * w.y,
            s1 * v.y * v.y + s2 * w.y * w.y + iso,
        ],
    ]
}

/// The stress's derivative dS = (∂²ψ/∂E²)[dE] at a strain whose [`softened`]
/// decomposition is `soft`.
fn stress_differential(de: &Sym2, soft: Option<&Principal>, mat: &Material) -> Sym2 {
    let Some(p) = soft else {
        return stvk(de, mat);
    };
    let (mu, lambda, c) = (mat.mu, mat.lambda, mat.compression);
    let (e1, e2, v, w) = (p.e1, p.e2, p.v, p.w);
    let dtr = de[0][0] + de[1][1];
    // spectral function f(e) = 2μ k(e) e: dS = Σ f'(eᵢ)(vᵢᵀdE vᵢ) vᵢvᵢᵀ
    //   + (f(e₁) − f(e₂))/(e₁ − e₂) · (v₁ᵀdE v₂)(v₁v₂ᵀ + v₂v₁ᵀ), plus λ k(tr) tr(dE) I
    let f = |x: f64| 2.0 * mu * k(x, c) * x;
    let (d1, d2) = (2.0 * mu * k(e1, c), 2.0 * mu * k(e2, c));
    let divided = if e1 - e2 > 1e-12 * (e1.abs() + e2.abs()).max(1e-300) {
        (f(e1) - f(e2)) / (e1 - e2)
    } else {
        0.5 * (d1 + d2)
    };
    let quad = |a: DVec2, b: DVec2| {
        a.x * (de[0][0] * b.x + de[0][1] * b.y) + a.y * (de[1][0] * b.x + de[1][1] * b.y)
    };
    let (p1, p2, p12) = (d1 * quad(v, v), d2 * quad(w, w), divided * quad(v, w));
    let iso = lambda * k(p.tr, c) * dtr;
    [
        [
            p1 * v.x * v.x + p2 * w.x * w.x + 2.0 * p12 * v.x * w.x + iso,
            p1 * v.x * v.y + p2 * w.x * w.y + p12 * (v.x * w.y + w.x * v.y),
        ],
        [
            p1 * v.x * v.y + p2 * w.x * w.y + p12 * (v.x * w.y + w.x * v.y),
            p1 * v.y * v.y + p2 * w.y * w.y + 2.0 * p12 * v.y * w.y + iso,
        ],
    ]
}

/// F·S (first Piola–Kirchhoff stress from the second).
fn times(f: &Def, s: &Sym2) -> Def {
    [
        f[0] * s[0][0] + f[1] * s[1][0],
        f[0] * s[0][1] + f[1] * s[1][1],
    ]
}

/// The principal Green strains (e₁ ≥ e₂) of a triangle at `x`.
#[cfg(test)]
pub(crate) fn principal_strains(r: &MembraneRest, x: &[DVec3; 3]) -> (f64, f64) {
    let (e1, e2, _) = eigen2(&green(&deformation(r, x)));
    (e1, e2)
}

/// Energy of one triangle, J.
pub(crate) fn energy(r: &MembraneRest, x: &[DVec3; 3], mat: &Material) -> f64 {
    let f = deformation(r, x);
    let e = green(&f);
    let (mu, lambda, c) = (mat.mu, mat.lambda, mat.compression);
    match softened(&e, mat) {
        None => {
            let tr = e[0][0] + e[1][1];
            let ee = e[0][0] * e[0][0] + 2.0 * e[0][1] * e[0][1] + e[1][1] * e[1][1];
            r.area * (mu * ee + 0.5 * lambda * tr * tr)
        }
        Some(p) => r.area * (mu * (g(p.e1, c) + g(p.e2, c)) + 0.5 * lambda * g(p.tr, c)),
    }
}

/// Gradient with respect to the three corners, J/m.
pub(crate) fn gradient(r: &MembraneRest, x: &[DVec3; 3], mat: &Material) -> [DVec3; 3] {
    let f = deformation(r, x);
    let e = green(&f);
    let p = times(&f, &stress(&e, softened(&e, mat).as_ref(), mat));
    let m = r.dm_inv;
    // G = A·P·Dm⁻ᵀ; columns are the forces' negatives on corners 1 and 2
    let g1 = (p[0] * m[0][0] + p[1] * m[0][1]) * r.area;
    let g2 = (p[0] * m[1][0] + p[1] * m[1][1]) * r.area;
    [-(g1 + g2), g1, g2]
}

/// Hessian (9×9, corner-major: row 3i+a is corner i, axis a). With `project`, the
/// stress derivative ∂P/∂F = F·∂S/∂F (material part, always PSD: for StVK
/// dE:dS = 2μ|dE|² + λ tr(dE)² ≥ 0, and softened the spectral function's slopes and
/// divided difference stay non-negative) + dF·S (geometric part, with the eigenvalues
/// of the second Piola–Kirchhoff stress S) is made PSD by clamping S's negative
/// principal stresses (compression) to zero: a closed-form 2×2 projection, so the
/// element Hessian is PSD without an eigen-decomposition of the 9×9 (projected Newton).
pub(crate) fn hessian(
    r: &MembraneRest,
    x: &[DVec3; 3],
    mat: &Material,
    project: bool,
) -> [[f64; 9]; 9] {
    let f = deformation(r, x);
    let e = green(&f);
    let m = r.dm_inv;
    // second Piola–Kirchhoff stress, clamped to tension when projecting
    let soft = softened(&e, mat);
    let mut s2 = stress(&e, soft.as_ref(), mat);
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
        // geometric part dF·S, material part F·dS
        let a = times(df, &s2);
        let b = times(&f, &stress_differential(&de, soft.as_ref(), mat));
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
fn clamp_psd2(s: Sym2) -> Sym2 {
    let (l1, l2, v) = eigen2(&s);
    if l2 >= 0.0 {
        return s;
    }
    if l1 <= 0.0 {
        return [[0.0; 2]; 2];
    }
    [
        [l1 * v.x * v.x, l1 * v.x * v.y],
        [l1 * v.x * v.y, l1 * v.y * v.y],
    ]
}
