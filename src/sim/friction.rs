//! Lagged static friction between cloth and body (SOR §7: coefficient 0.3), as the
//! smoothed friction potential of Incremental Potential Contact (Li et al. 2020, §5):
//! for a vertex in contact with lagged normal force λ and tangent projector T, and its
//! anchor a (where the previous step left it, moved with the body),
//! D = μ·λ·f0(‖T(y − a)‖), f0 the C¹ smoothing of |x| over the slip length ε.
//! Below ε the contact sticks (stiffness 2μλ/ε), beyond it slides with force μλ.
//! Friction makes quasi-static continuation follow the body the way real cloth does
//! (a sleeve does not slip down a raised arm) and makes the sensitivity of SOR Eq. 3
//! well posed (no zero-stiffness sliding modes).

use glam::{DMat3, DVec3};

use super::contact::outer;

/// Friction state of a solve: per vertex the anchor, μ·λ (N) and tangent projector.
#[derive(Clone, Debug)]
pub(crate) struct Friction {
    /// Anchor positions, metres.
    pub(crate) anchor: Vec<DVec3>,
    /// μ·λ per vertex, N (0 where not in contact).
    pub(crate) mu_lambda: Vec<f64>,
    /// I − n nᵀ per vertex, n a unit normal (so a projector; the Hessian is PSD only
    /// then).
    pub(crate) tangent: Vec<DMat3>,
    /// Slip length ε, metres.
    pub(crate) slip: f64,
}

/// f1(x) = f0'(x): −x²/ε² + 2x/ε below ε, 1 above.
fn f1(x: f64, eps: f64) -> f64 {
    if x >= eps {
        1.0
    } else {
        -x * x / (eps * eps) + 2.0 * x / eps
    }
}

/// f0: smoothed |x| (C¹), f0(0) = ε/3.
fn f0(x: f64, eps: f64) -> f64 {
    if x >= eps {
        x
    } else {
        -x * x * x / (3.0 * eps * eps) + x * x / eps + eps / 3.0
    }
}

impl Friction {
    /// Energy of vertex `v` at `y`, J.
    pub(crate) fn energy(&self, v: usize, y: DVec3) -> f64 {
        let ml = self.mu_lambda[v];
        if ml == 0.0 {
            return 0.0;
        }
        let u = self.tangent[v] * (y - self.anchor[v]);
        ml * (f0(u.length(), self.slip) - self.slip / 3.0)
    }

    /// Gradient of vertex `v`'s energy.
    pub(crate) fn gradient(&self, v: usize, y: DVec3) -> DVec3 {
        let ml = self.mu_lambda[v];
        if ml == 0.0 {
            return DVec3::ZERO;
        }
        let u = self.tangent[v] * (y - self.anchor[v]);
        let x = u.length();
        // f1(x)/x → 2/ε as x → 0
        let k = if x < 1e-12 {
            2.0 / self.slip
        } else {
            f1(x, self.slip) / x
        };
        u * (ml * k)
    }

    /// Hessian of vertex `v`'s energy (PSD).
    pub(crate) fn hessian(&self, v: usize, y: DVec3) -> DMat3 {
        let ml = self.mu_lambda[v];
        if ml == 0.0 {
            return DMat3::ZERO;
        }
        let t = self.tangent[v];
        let u = t * (y - self.anchor[v]);
        let x = u.length();
        let eps = self.slip;
        if x < 1e-12 {
            return t * (ml * 2.0 / eps);
        }
        let uh = u / x;
        let f1x = f1(x, eps) / x;
        let df1 = if x >= eps {
            0.0
        } else {
            -2.0 * x / (eps * eps) + 2.0 / eps
        };
        (t - outer(uh, uh)) * (ml * f1x) + outer(uh, uh) * (ml * df1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gradient_and_hessian_match_finite_differences() {
        let n = DVec3::new(0.3, 0.9, 0.1).normalize();
        let f = Friction {
            anchor: vec![DVec3::new(0.1, 0.2, 0.3)],
            mu_lambda: vec![0.02],
            tangent: vec![DMat3::IDENTITY - outer(n, n)],
            slip: 1e-3,
        };
        for off in [
            DVec3::new(3e-4, -1e-4, 2e-4),
            DVec3::new(2e-3, 1e-3, -3e-3),
            DVec3::new(-1e-5, 4e-6, 0.0),
        ] {
            let y = f.anchor[0] + off;
            let g = f.gradient(0, y);
            let h = f.hessian(0, y);
            let e = 1e-8;
            for a in 0..3 {
                let mut d = DVec3::ZERO;
                d[a] = e;
                let fd = (f.energy(0, y + d) - f.energy(0, y - d)) / (2.0 * e);
                assert!(
                    (fd - g[a]).abs() <= 1e-5 * g.length().max(1e-12),
                    "grad {a}: {fd} vs {}",
                    g[a]
                );
                let fdh = (f.gradient(0, y + d) - f.gradient(0, y - d)) / (2.0 * e);
                assert!(
                    (fdh - h.col(a)).length()
                        <= 1e-4 * h.to_cols_array().iter().fold(0.0f64, |m, x| m.max(x.abs())),
                    "hess {a}"
                );
            }
        }
    }
}
