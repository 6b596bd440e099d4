//! Finite-difference checks of every energy, patch tests, and a hanging square cloth.

use glam::{DVec3, Vec3};

use super::bending::Hinge;
use super::contact::{self, Collider};
use super::membrane::{self, MembraneRest};
use super::*;
use crate::mesh::TriMesh;

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64) / ((1u64 << 53) as f64) * 2.0 - 1.0
    }
    fn vec(&mut self) -> DVec3 {
        DVec3::new(self.next(), self.next(), self.next())
    }
}

fn rel(a: f64, b: f64, scale: f64) -> f64 {
    (a - b).abs() / scale.max(1e-300)
}

fn material(compression: f64) -> membrane::Material {
    let (mu, lambda) = SimParams::default().lame();
    membrane::Material {
        mu,
        lambda,
        compression,
    }
}

/// StVK (c = 1) and the membrane softened in compression (c = 0.3, 0.05), on random
/// stretches, shears and compressions (both principal strains negative, one, or none).
#[test]
fn membrane_gradient_and_hessian_match_finite_differences() {
    let mut r = Lcg(1);
    let mut compressed = [0usize; 3];
    for c in [1.0, 0.3, 0.05] {
        let mat = material(c);
        for _ in 0..30 {
            let rest = [
                DVec3::ZERO,
                DVec3::new(0.02, 0.0, 0.001),
                DVec3::new(0.007, 0.018, -0.002),
            ];
            let m = MembraneRest::new(rest[0], rest[1], rest[2]).expect("rest");
            // random deformation: stretch, shear, compression
            let x: [DVec3; 3] =
                std::array::from_fn(|i| rest[i] * (1.0 + 0.25 * r.next()) + r.vec() * 0.004);
            let (e1, e2) = membrane::principal_strains(&m, &x);
            compressed[usize::from(e1 < 0.0) + usize::from(e2 < 0.0)] += 1;
            // softening lowers the energy by at most the factor c, and only in compression
            let stiff = membrane::energy(&m, &x, &material(1.0));
            let e = membrane::energy(&m, &x, &mat);
            assert!(e <= stiff * (1.0 + 1e-12) && e >= c * stiff * (1.0 - 1e-12));
            if e2 >= 0.0 {
                assert_eq!(e, stiff);
            }
            let g = membrane::gradient(&m, &x, &mat);
            let h = membrane::hessian(&m, &x, &mat, false);
            let eps = 1e-7;
            let gscale = g.iter().map(|v| v.length()).fold(0.0, f64::max);
            let hscale = h.iter().flatten().map(|v| v.abs()).fold(0.0, f64::max);
            for i in 0..3 {
                for a in 0..3 {
                    let (mut xp, mut xm) = (x, x);
                    xp[i][a] += eps;
                    xm[i][a] -= eps;
                    let fd = (membrane::energy(&m, &xp, &mat) - membrane::energy(&m, &xm, &mat))
                        / (2.0 * eps);
                    assert!(
                        rel(fd, g[i][a], gscale) < 1e-5,
                        "c {c} grad ({i},{a}): fd {fd} vs {}",
                        g[i][a]
                    );
                    let (gp, gm) = (
                        membrane::gradient(&m, &xp, &mat),
                        membrane::gradient(&m, &xm, &mat),
                    );
                    for j in 0..3 {
                        for b in 0..3 {
                            let fdh = (gp[j][b] - gm[j][b]) / (2.0 * eps);
                            assert!(
                                rel(fdh, h[3 * j + b][3 * i + a], hscale) < 1e-5,
                                "c {c} hess ({j},{b}),({i},{a}): fd {fdh} vs {}",
                                h[3 * j + b][3 * i + a]
                            );
                        }
                    }
                }
            }
            // the projected Hessian is PSD
            let hp = membrane::hessian(&m, &x, &mat, true);
            let (w, _) = super::dense::sym_eigen(&hp);
            assert!(w.iter().all(|&e| e > -1e-9 * hscale), "{w:?}");
        }
    }
    // the draws covered pure tension, and compression along one and along both axes
    assert!(compressed.iter().all(|&n| n >= 5), "{compressed:?}");
}

/// Softened, a triangle shrunk uniformly by 10 % costs `c` times StVK's energy, and one
/// stretched by 10 % costs exactly StVK's.
#[test]
fn membrane_softening_scales_compression_only() {
    let rest = [
        DVec3::ZERO,
        DVec3::new(0.02, 0.0, 0.0),
        DVec3::new(0.0, 0.02, 0.0),
    ];
    let m = MembraneRest::new(rest[0], rest[1], rest[2]).expect("rest");
    for c in [0.5, 0.1] {
        for (scale, ratio) in [(0.9, c), (1.1, 1.0)] {
            let x = rest.map(|p| p * scale);
            let soft = membrane::energy(&m, &x, &material(c));
            let stvk = membrane::energy(&m, &x, &material(1.0));
            assert!(stvk > 0.0);
            assert!(
                (soft / stvk - ratio).abs() < 1e-12,
                "c {c} scale {scale}: {}",
                soft / stvk
            );
        }
    }
}

#[test]
fn membrane_patch_tests() {
    let mat = material(0.2);
    let mut r = Lcg(7);
    let rest = [
        DVec3::new(0.1, 0.2, 0.3),
        DVec3::new(0.12, 0.21, 0.3),
        DVec3::new(0.1, 0.23, 0.31),
    ];
    let m = MembraneRest::new(rest[0], rest[1], rest[2]).expect("rest");
    assert!(membrane::energy(&m, &rest, &mat).abs() < 1e-18);
    assert!(
        membrane::gradient(&m, &rest, &mat)
            .iter()
            .all(|g| g.length() < 1e-15)
    );
    for _ in 0..20 {
        let q = glam::DQuat::from_scaled_axis(r.vec() * 2.0);
        let t = r.vec();
        let moved = rest.map(|p| q * p + t);
        assert!(membrane::energy(&m, &moved, &mat).abs() < 1e-15);
    }
}

#[test]
fn bending_gradient_hessian_and_rigid_invariance() {
    let mut r = Lcg(3);
    let kb = 1e-5;
    for _ in 0..20 {
        let rest = [
            DVec3::ZERO,
            DVec3::new(0.02, 0.0, 0.0),
            DVec3::new(0.01, 0.017, 0.0),
            DVec3::new(0.009, -0.018, 0.0),
        ];
        let h = Hinge::new([0, 1, 2, 3], rest).expect("hinge");
        let e = |x: &[DVec3]| 0.5 * kb * h.curvature(x).length_squared();
        // flat rest: zero energy; any rigid motion of it: still zero
        assert!(e(&rest) < 1e-20);
        let q = glam::DQuat::from_scaled_axis(r.vec() * 2.0);
        let t = r.vec();
        let moved: Vec<DVec3> = rest.iter().map(|p| q * *p + t).collect();
        assert!(e(&moved) < 1e-20);
        // a bent state: FD gradient and Hessian of E = ½k‖Σ w_i x_i‖²
        let x: Vec<DVec3> = rest.iter().map(|p| *p + r.vec() * 0.005).collect();
        let c = h.curvature(&x) * kb;
        let eps = 1e-7;
        for i in 0..4 {
            for a in 0..3 {
                let (mut xp, mut xm) = (x.clone(), x.clone());
                xp[i][a] += eps;
                xm[i][a] -= eps;
                let fd = (e(&xp) - e(&xm)) / (2.0 * eps);
                let an = c[a] * h.w[i];
                assert!(
                    rel(
                        fd,
                        an,
                        c.length() * h.w.iter().map(|w| w.abs()).fold(0.0, f64::max)
                    ) < 1e-5
                );
                for j in 0..4 {
                    let gp = h.curvature(&xp) * kb * h.w[j];
                    let gm = h.curvature(&xm) * kb * h.w[j];
                    let fdh = (gp[a] - gm[a]) / (2.0 * eps);
                    let an = kb * h.w[i] * h.w[j];
                    assert!(
                        rel(
                            fdh,
                            an,
                            kb * 100.0 * h.w.iter().map(|w| w * w).fold(0.0, f64::max)
                        ) < 1e-5
                    );
                }
            }
        }
    }
    // a rigid motion of a curved garment patch leaves its bending energy unchanged
    let curved = [
        DVec3::ZERO,
        DVec3::new(0.02, 0.0, 0.0),
        DVec3::new(0.01, 0.017, 0.004),
        DVec3::new(0.009, -0.018, 0.003),
    ];
    let h = Hinge::new([0, 1, 2, 3], curved).expect("hinge");
    let q = glam::DQuat::from_scaled_axis(DVec3::new(0.3, -1.2, 0.7));
    let moved: Vec<DVec3> = curved
        .iter()
        .map(|p| q * *p + DVec3::new(1.0, 2.0, 3.0))
        .collect();
    assert!((h.curvature(&curved).length() - h.curvature(&moved).length()).abs() < 1e-12);
}

fn test_body() -> &'static crate::body::Body {
    static B: std::sync::OnceLock<crate::body::Body> = std::sync::OnceLock::new();
    B.get_or_init(|| {
        crate::body::Body::generate(
            &Default::default(),
            &crate::body::BodyOptions {
                target_vertices: 2000,
            },
        )
        .expect("body")
    })
}

#[test]
fn contact_gradient_and_hessian_match_finite_differences() {
    let params = SimParams::default();
    let body = test_body();
    let col = Collider::new(body, &crate::skeleton::Pose::rest(), &params).expect("collider");
    let mut r = Lcg(11);
    let mut checked = 0;
    for (i, bp) in body.mesh.positions.iter().enumerate().step_by(37) {
        let n = body.mesh.vertex_normals()[i].as_dvec3();
        // points inside the margin, some slightly inside the body
        let p = bp.as_dvec3() + n * (0.004 * r.next()) + r.vec() * 0.001;
        let Some(d0) = col.distance(p, f64::INFINITY) else {
            continue;
        };
        let area = 4e-4;
        let e = |q: DVec3| {
            col.distance(q, f64::INFINITY)
                .map(|d| contact::energy(&d, area, &params))
                .unwrap_or(0.0)
        };
        let g = contact::gradient(&d0, area, &params);
        let h = contact::hessian(&d0, area, &params, true);
        if g.length() == 0.0 {
            continue;
        }
        let eps = 1e-8;
        let mut ok = true;
        let mut fd_g = DVec3::ZERO;
        let mut fd_h = [DVec3::ZERO; 3];
        for a in 0..3 {
            let mut dp = DVec3::ZERO;
            dp[a] = eps;
            // skip points where a feature switch lies within the stencil (non-smooth)
            let (dpp, dmm) = (
                col.distance(p + dp, f64::INFINITY),
                col.distance(p - dp, f64::INFINITY),
            );
            match (dpp, dmm) {
                (Some(x), Some(y)) => {
                    fd_g[a] = (e(p + dp) - e(p - dp)) / (2.0 * eps);
                    fd_h[a] = (contact::gradient(&x, area, &params)
                        - contact::gradient(&y, area, &params))
                        / (2.0 * eps);
                }
                _ => ok = false,
            }
        }
        if !ok {
            continue;
        }
        let gs = g.length();
        if (fd_g - g).length() / gs > 1e-4 {
            continue; // a feature boundary inside the stencil
        }
        assert!((fd_g - g).length() / gs < 1e-5, "grad fd {fd_g} vs {g}");
        let hs = h
            .to_cols_array()
            .iter()
            .map(|x| x.abs())
            .fold(0.0, f64::max);
        for a in 0..3 {
            assert!(
                (fd_h[a] - h.col(a)).length() / hs < 1e-4,
                "hess col {a}: fd {} vs {}",
                fd_h[a],
                h.col(a)
            );
        }
        checked += 1;
    }
    assert!(checked > 20, "only {checked} contact points checked");
}

/// A square cloth of side `size` metres with `n`×`n` vertices in the XZ plane at y = 0.
fn square(n: usize, size: f32) -> TriMesh {
    let mut p = Vec::new();
    let mut t = Vec::new();
    for j in 0..n {
        for i in 0..n {
            p.push(Vec3::new(
                i as f32 / (n - 1) as f32 * size,
                0.0,
                j as f32 / (n - 1) as f32 * size,
            ));
        }
    }
    for j in 0..n - 1 {
        for i in 0..n - 1 {
            let a = (j * n + i) as u32;
            let (b, c, d) = (a + 1, a + n as u32, a + n as u32 + 1);
            if (i + j) % 2 == 0 {
                t.push([a, c, b]);
                t.push([b, c, d]);
            } else {
                t.push([a, c, d]);
                t.push([a, d, b]);
            }
        }
    }
    TriMesh::new(p, t)
}

/// Checks the cloth's gradient at `y` against central differences (step `eps`) of its
/// energy, and its assembled exact Hessian times a random direction against differences
/// of the gradient (relative to the largest entry: `hess_tol`).
fn assert_assembled_derivatives(
    cloth: &mut Cloth,
    y: &[DVec3],
    r: &mut Lcg,
    eps: f64,
    hess_tol: f64,
) {
    let n = y.len();
    let mut g = vec![DVec3::ZERO; n];
    cloth.gradient(y, None, &mut g);
    let gs = g.iter().map(|v| v.length()).fold(0.0, f64::max);
    for v in 0..n {
        for a in 0..3 {
            let (mut yp, mut ym) = (y.to_vec(), y.to_vec());
            yp[v][a] += eps;
            ym[v][a] -= eps;
            let fd = (cloth.energy(&yp, None) - cloth.energy(&ym, None)) / (2.0 * eps);
            assert!(
                rel(fd, g[v][a], gs) < 1e-5,
                "∂E/∂y[{v}][{a}]: {fd} vs {}",
                g[v][a]
            );
        }
    }
    cloth.assemble(y, None, 0.0, false);
    let dir: Vec<f64> = (0..3 * n).map(|_| r.next()).collect();
    let mut hv = vec![0.0; 3 * n];
    cloth.matrix.mul(&dir, &mut hv);
    let shift = |s: f64| -> Vec<DVec3> {
        (0..n)
            .map(|v| y[v] + DVec3::new(dir[3 * v], dir[3 * v + 1], dir[3 * v + 2]) * s)
            .collect()
    };
    let (mut gp, mut gm) = (vec![DVec3::ZERO; n], vec![DVec3::ZERO; n]);
    cloth.gradient(&shift(eps), None, &mut gp);
    cloth.gradient(&shift(-eps), None, &mut gm);
    let hs = hv.iter().map(|x| x.abs()).fold(0.0, f64::max);
    for v in 0..n {
        for a in 0..3 {
            let fd = (gp[v][a] - gm[v][a]) / (2.0 * eps);
            assert!(
                rel(fd, hv[3 * v + a], hs) < hess_tol,
                "H·v at ({v},{a}): {fd} vs {}",
                hv[3 * v + a]
            );
        }
    }
}

#[test]
fn assembled_gradient_and_hessian_of_the_cloth_match_finite_differences() {
    let mesh = square(6, 0.2);
    let mut cloth = Cloth::new(&mesh, &SimParams::default()).expect("cloth");
    let mut r = Lcg(5);
    let y: Vec<DVec3> = cloth
        .rest_positions()
        .iter()
        .map(|p| *p + r.vec() * 0.01)
        .collect();
    assert_assembled_derivatives(&mut cloth, &y, &mut r, 1e-7, 1e-5);
}

/// Two squares of cloth as one garment: a lower one of `n`×`n` vertices and side
/// `size` at y = 0, and an upper one of `m`×`m` vertices and side `top` centred over it
/// at height `gap` (metres).
fn two_sheets(n: usize, size: f32, m: usize, top: f32, gap: f32) -> TriMesh {
    let lower = square(n, size);
    let upper = square(m, top);
    let offset = Vec3::new((size - top) / 2.0, gap, (size - top) / 2.0);
    let base = lower.positions.len() as u32;
    let mut positions = lower.positions.clone();
    positions.extend(upper.positions.iter().map(|p| *p + offset));
    let mut triangles = lower.triangles.clone();
    triangles.extend(upper.triangles.iter().map(|t| t.map(|v| v + base)));
    TriMesh::new(positions, triangles)
}

/// The self-contact barrier in the assembled system: two sheets modelled 5 cm apart
/// (so that no pair is excluded as modelled) and evaluated 1–2.5 mm apart, every
/// vertex jittered; the gradient against central differences of the energy and the
/// exact Hessian (the pattern grown for the new pairs) against differences of the
/// gradient.
#[test]
fn self_contact_in_the_assembled_gradient_and_hessian_matches_finite_differences() {
    let mesh = two_sheets(6, 0.1, 5, 0.08, 0.05);
    let params = SimParams::default().with_self_contact();
    let mut cloth = Cloth::new(&mesh, &params).expect("cloth");
    let mut r = Lcg(11);
    let lower = 36;
    let y: Vec<DVec3> = cloth
        .rest_positions()
        .iter()
        .enumerate()
        .map(|(v, p)| {
            let down = if v >= lower {
                DVec3::new(0.0, -0.0482, 0.0)
            } else {
                DVec3::ZERO
            };
            *p + down + r.vec() * 0.0003
        })
        .collect();
    let pairs = cloth.self_contact_pairs(&y, params.self_contact_margin);
    assert!(pairs.len() > 20, "only {} pairs in contact", pairs.len());
    assert!(cloth.self_contact_energy(&y) > 0.0);
    assert_assembled_derivatives(&mut cloth, &y, &mut r, 1e-8, 1e-4);
}

/// A square of cloth dropped onto a larger one held flat comes to rest on it, just
/// inside the self-contact margin and without passing through; without self-contact
/// nothing holds it and it falls through.
#[test]
fn a_sheet_dropped_onto_a_held_sheet_rests_on_it() {
    let mesh = two_sheets(9, 0.2, 7, 0.12, 0.01);
    let lower = 81;
    let drop = |params: &SimParams| {
        let mut cloth = Cloth::new(&mesh, params).expect("cloth");
        for v in 0..lower {
            cloth.pin(v);
        }
        let mut y = cloth.rest_positions().to_vec();
        let r = cloth.solve(&mut y, None);
        (r, y)
    };
    let params = SimParams::default().with_self_contact();
    let (r, y) = drop(&params);
    let report = r.expect("the upper sheet comes to rest");
    assert!(report.residual <= report.tolerance);
    let (lowest, highest) = y[lower..].iter().fold((f64::MAX, f64::MIN), |(lo, hi), p| {
        (lo.min(p.y), hi.max(p.y))
    });
    assert!(
        lowest > 0.002 && highest < params.self_contact_margin,
        "upper sheet between {lowest} and {highest} m over the lower"
    );
    assert_eq!(self_intersections(&y, &mesh.triangles), 0);
    // without self-contact the upper sheet does not stop on the lower one
    let (r, y) = drop(&SimParams::default());
    let fell = y[lower..].iter().all(|p| p.y < 0.0);
    assert!(r.is_err() || fell, "without self-contact: {r:?}");
}

fn sag(bend: f64) -> (Vec<DVec3>, SolveReport) {
    let mesh = square(13, 0.4);
    let params = SimParams {
        bend_stiffness: bend,
        ..Default::default()
    };
    let mut cloth = Cloth::new(&mesh, &params).expect("cloth");
    // pinned at two adjacent corners, the cloth hangs like a curtain
    cloth.pin(0);
    cloth.pin(12);
    let mut y = cloth.rest_positions().to_vec();
    let report = cloth.solve(&mut y, None).expect("converges");
    (y, report)
}

#[test]
fn pinned_square_sags_converges_and_never_gains_energy() {
    let (y, report) = sag(1e-5);
    eprintln!(
        "sag: {} iterations, residual {:.3e} (tol {:.3e})",
        report.iterations, report.residual, report.tolerance
    );
    assert!(report.residual <= report.tolerance);
    for w in report.energies.windows(2) {
        assert!(w[1] <= w[0] + 1e-12, "energy rose: {} → {}", w[0], w[1]);
    }
    // the free edge hangs down, the pinned corners stay
    assert_eq!(y[0], DVec3::ZERO);
    let lowest = y.iter().map(|p| p.y).fold(f64::MAX, f64::min);
    assert!(lowest < -0.3, "free edge at {lowest}");
    // halving the bending stiffness visibly changes the shape
    let (y2, _) = sag(0.5e-5);
    let diff = y
        .iter()
        .zip(&y2)
        .map(|(a, b)| (*a - *b).length())
        .fold(0.0, f64::max);
    assert!(
        diff > 1e-3,
        "halving bending moved the cloth by only {diff} m"
    );
}

#[test]
fn bad_inputs_give_named_errors() {
    use crate::mesh::MeshError;
    // degenerate triangle
    let mut m = square(4, 0.1);
    m.positions[5] = m.positions[4];
    assert!(matches!(
        Cloth::new(&m, &SimParams::default()),
        Err(SolveError::Mesh(MeshError::Degenerate(_)))
    ));
    // non-manifold: an edge shared by three triangles
    let mut m = square(4, 0.1);
    let extra = m.positions.len() as u32;
    m.positions.push(Vec3::new(0.05, 0.05, 0.0));
    let [a, b, _] = m.triangles[0];
    m.triangles.push([a, b, extra]);
    assert!(matches!(
        Cloth::new(&m, &SimParams::default()),
        Err(SolveError::Mesh(MeshError::NonManifoldEdge(..)))
    ));
    // a compression ratio outside (0, 1] is named
    for c in [0.0, -0.5, 1.5, f64::NAN] {
        let params = SimParams {
            compression_ratio: c,
            ..SimParams::default()
        };
        let err = Cloth::new(&square(4, 0.1), &params).err().expect("refused");
        assert!(matches!(
            err,
            SolveError::Param {
                name: "compression_ratio",
                ..
            }
        ));
        assert!(err.to_string().contains("compression_ratio"), "{err}");
    }
    // NaN state
    let mut cloth = Cloth::new(&square(4, 0.1), &SimParams::default()).expect("cloth");
    let mut y = cloth.rest_positions().to_vec();
    y[3].x = f64::NAN;
    assert_eq!(
        cloth.solve(&mut y, None).err(),
        Some(SolveError::NonFinite("garment state"))
    );
    // a garment far from the body, and NaN poses
    let body = test_body();
    let g = crate::garment::Garment::generate(
        body,
        &crate::garment::GarmentConfig {
            target_vertices: 800,
            ..crate::garment::GarmentConfig::builtin("tshirt").expect("cfg")
        },
    )
    .expect("shirt");
    let mut far = g.clone();
    for p in &mut far.mesh.positions {
        p.x += 3.0;
    }
    let mut sim = Simulator::new(body, &far, &SimParams::default()).expect("sim");
    assert!(matches!(
        sim.drape_rest(),
        Err(SolveError::FarFromBody { .. })
    ));
    let mut sim = Simulator::new(body, &g, &SimParams::default()).expect("sim");
    let eq = sim.drape_rest().expect("drape");
    let mut nan_pose = crate::skeleton::Pose::rest();
    nan_pose.rotations[5].x = f32::NAN;
    assert_eq!(
        sim.carry(&eq, &nan_pose).err(),
        Some(SolveError::NonFinite("pose"))
    );
    assert_eq!(
        sim.residual(&nan_pose, &eq.positions).err(),
        Some(SolveError::NonFinite("pose"))
    );
    // a garment sunk into the body is refused instead of being simulated inside out
    let mut sunk = g.clone();
    for (p, n) in sunk.mesh.positions.iter_mut().zip(g.mesh.vertex_normals()) {
        *p -= n * 0.06;
    }
    let mut sim = Simulator::new(body, &sunk, &SimParams::default()).expect("sim");
    assert!(matches!(
        sim.drape_rest(),
        Err(SolveError::InsideBody { .. })
    ));
}

/// Lagged friction's tangent projector is built from the body field's unit normal. The
/// smooth distance's gradient is not a unit vector where the blended facets' planes
/// disagree (a crease: armpit, crotch, a thigh raised against the belly), and I − ∇d∇dᵀ
/// from it is no projector: its Hessian then had a negative eigenvalue of up to
/// −2μλ(|∇d|² − 1)/ε, which no damping of the projected Newton system could outweigh
/// (CMU 131_03 frame 264 stalled at hip flexion with damping 1e7).
#[test]
fn friction_is_convex_where_the_body_field_is_not_a_unit_distance() {
    use super::dense::sym_eigen;
    let params = SimParams::default();
    let body = test_body();
    let col = Collider::new(body, &crate::skeleton::Pose::rest(), &params).expect("collider");
    // points 2 mm out from the body's vertices, those whose field gradient is longest
    // first (a shorter one leaves I − ∇d∇dᵀ positive definite)
    let normals = body.mesh.vertex_normals();
    let mut pts: Vec<(f64, DVec3)> = body
        .mesh
        .positions
        .iter()
        .zip(&normals)
        .filter_map(|(p, n)| {
            let q = (*p + *n * 0.002).as_dvec3();
            let d = col.distance(q, f64::INFINITY)?;
            (d.d < params.contact_margin).then(|| (d.grad.length() - 1.0, q))
        })
        .collect();
    pts.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mesh = square(5, 0.1);
    let n = mesh.positions.len();
    assert!(pts.len() >= n);
    assert!(
        pts[n - 1].0 > 0.02,
        "the body field's gradient is longer than unit by under {} at {n} points",
        pts[n - 1].0
    );
    let mut cloth = Cloth::new(&mesh, &params).expect("cloth");
    let y: Vec<DVec3> = pts[..n].iter().map(|p| p.1).collect();
    let forces = cloth.contact_forces(&y, &col);
    for (l, nrm) in &forces {
        assert!(*l > 0.0);
        assert!((nrm.length() - 1.0).abs() < 1e-9, "normal {nrm}");
    }
    // anchors a little behind, so every vertex is within the slip length
    let anchor: Vec<DVec3> = y
        .iter()
        .map(|p| *p + DVec3::new(1e-4, -2e-4, 5e-5))
        .collect();
    cloth.set_friction(Some((&anchor, &forces)));
    let f = cloth.friction.as_ref().expect("friction");
    for v in 0..n {
        let h = f.hessian(v, y[v]).to_cols_array_2d();
        let (ev, _) = sym_eigen(&h);
        let scale = ev.iter().map(|e| e.abs()).fold(0.0, f64::max);
        let least = ev.iter().copied().fold(f64::INFINITY, f64::min);
        assert!(least >= -1e-9 * scale, "vertex {v}: eigenvalues {ev:?}");
    }
}

/// A point leaving the kernel of the last facet within reach: with only that facet in
/// reach the blend once read its plane distance (here 1 mm, inside the contact margin)
/// and fell to "no contact" when it left, a jump of a contact's energy that stalled
/// Newton (CMU 131_03 frames 852 and 978). The field now tends to "far" as the facet's
/// weight vanishes, so the contact energy falls continuously to zero.
#[test]
fn the_contact_field_fades_to_far_as_the_last_facet_leaves_its_kernel() {
    let params = SimParams::default();
    let radius = 0.03;
    // one facet in the plane y = 0, its edge along x = 0, and a point 1 mm above that
    // plane moving away from the edge
    let mesh = TriMesh::new(
        vec![
            Vec3::new(-1.0, 0.0, -1.0),
            Vec3::new(0.0, 0.0, 1.0),
            Vec3::new(0.0, 0.0, -1.0),
        ],
        vec![[0, 1, 2]],
    );
    let col = Collider::of_mesh(&mesh, radius).expect("collider");
    let energy = |x: f64| {
        col.distance(DVec3::new(x, 0.001, 0.0), f64::INFINITY)
            .map(|d| contact::energy(&d, 4e-4, &params))
            .unwrap_or(0.0)
    };
    // over the facet the point is 1 mm from it: in contact
    let touching = energy(-0.01);
    assert!(touching > 0.0);
    // stepping out across the kernel's edge (at x ≈ 30 mm): the largest change of the
    // energy from one step to the next shrinks with the step (no jump), and the energy
    // ends at zero
    let largest_step = |h: f64| {
        let (mut worst, mut last) = (0.0f64, energy(0.02));
        let steps = (0.015 / h).round() as usize;
        for k in 1..=steps {
            let e = energy(0.02 + k as f64 * h);
            worst = worst.max((e - last).abs());
            last = e;
        }
        assert_eq!(last, 0.0);
        worst
    };
    let (coarse, fine) = (largest_step(1e-4), largest_step(1e-5));
    assert!(coarse < 0.1 * touching, "{coarse} J in a 0.1 mm step");
    assert!(
        fine < 0.2 * coarse,
        "the energy jumps: {fine} J in a 0.01 mm step, {coarse} J in 0.1 mm"
    );
}

/// The cloth keeps the body field at its vertices between evaluations of the same
/// state; once the body moves, every value is evaluated afresh: the energy, gradient
/// and Hessian of a cloth that evaluated the old pose are those of a new cloth, to the
/// bit, and not those of the old pose.
#[test]
fn the_body_field_is_evaluated_afresh_when_the_body_moves() {
    let params = SimParams::default();
    let body = test_body();
    let mesh = square(6, 0.2);
    let mut cloth = Cloth::new(&mesh, &params).expect("cloth");
    // the square's vertices 2 mm outside scattered body vertices (within the margin)
    let normals = body.mesh.vertex_normals();
    let y: Vec<DVec3> = (0..cloth.vertex_count())
        .map(|i| {
            let k = i * 37 % body.mesh.positions.len();
            (body.mesh.positions[k] + normals[k] * 0.002).as_dvec3()
        })
        .collect();
    let mut col = Collider::new(body, &crate::skeleton::Pose::rest(), &params).expect("collider");
    let n = y.len();
    let evaluate = |cloth: &mut Cloth, col: &Collider| {
        let e = cloth.contact_energy(&y, Some(col));
        let mut g = vec![DVec3::ZERO; n];
        cloth.gradient(&y, Some(col), &mut g);
        cloth.assemble(&y, Some(col), 0.0, false);
        (e, g, cloth.matrix.values.clone())
    };
    let at_rest = evaluate(&mut cloth, &col);
    assert!(at_rest.0 > 0.0, "the square touches the body");
    // the same state again: the same values
    assert_eq!(evaluate(&mut cloth, &col), at_rest);
    // the body moved by 1 mm
    let mut pose = crate::skeleton::Pose::rest();
    pose.translation = Vec3::new(0.001, 0.0, 0.0);
    col.set_pose(body, &pose, &params);
    let moved = evaluate(&mut cloth, &col);
    let fresh = evaluate(&mut Cloth::new(&mesh, &params).expect("cloth"), &col);
    assert_eq!(moved, fresh);
    assert_ne!(moved.0, at_rest.0);
    assert_ne!(moved.1, at_rest.1);
}
