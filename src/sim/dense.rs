//! Small dense symmetric eigen-decomposition (cyclic Jacobi): tests check with it that
//! projected element Hessians are positive semi-definite, and self-contact's edge pairs
//! project their 12×12 Hessians with it.

/// Eigen-decomposition of a symmetric `N×N` matrix by cyclic Jacobi rotations:
/// returns (eigenvalues, eigenvectors as columns `v[k][i]` = component `k` of vector `i`).
pub(crate) fn sym_eigen<const N: usize>(a: &[[f64; N]; N]) -> ([f64; N], [[f64; N]; N]) {
    let mut m = *a;
    let mut v = [[0.0; N]; N];
    for (i, row) in v.iter_mut().enumerate() {
        row[i] = 1.0;
    }
    let scale: f64 = m
        .iter()
        .flatten()
        .map(|x| x * x)
        .sum::<f64>()
        .sqrt()
        .max(1e-300);
    for _sweep in 0..64 {
        let mut off = 0.0;
        for p in 0..N {
            for q in p + 1..N {
                off += m[p][q] * m[p][q];
            }
        }
        if off.sqrt() <= 1e-13 * scale {
            break;
        }
        for p in 0..N {
            for q in p + 1..N {
                if m[p][q].abs() <= 1e-300 {
                    continue;
                }
                let theta = (m[q][q] - m[p][p]) / (2.0 * m[p][q]);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let t = if theta == 0.0 { 1.0 } else { t };
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for k in 0..N {
                    let (mkp, mkq) = (m[k][p], m[k][q]);
                    m[k][p] = c * mkp - s * mkq;
                    m[k][q] = s * mkp + c * mkq;
                }
                for k in 0..N {
                    let (mpk, mqk) = (m[p][k], m[q][k]);
                    m[p][k] = c * mpk - s * mqk;
                    m[q][k] = s * mpk + c * mqk;
                }
                for k in 0..N {
                    let (vkp, vkq) = (v[k][p], v[k][q]);
                    v[k][p] = c * vkp - s * vkq;
                    v[k][q] = s * vkp + c * vkq;
                }
            }
        }
    }
    let mut w = [0.0; N];
    for i in 0..N {
        w[i] = m[i][i];
    }
    (w, v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eigen_reconstructs() {
        let a = [[4.0, 1.0, -2.0], [1.0, -3.0, 0.5], [-2.0, 0.5, 1.0]];
        let (w, v) = sym_eigen(&a);
        for i in 0..3 {
            for j in 0..3 {
                let r: f64 = (0..3).map(|k| w[k] * v[i][k] * v[j][k]).sum();
                assert!((r - a[i][j]).abs() < 1e-10);
            }
        }
    }
}
