//! Isometric (quadratic) bending, Bergou, Wardetzky, Harmon, Zorin, Grinspun 2006,
//! "A Quadratic Bending Model for Inextensible Surfaces": per interior edge with stencil
//! (x0, x1 the edge, x2, x3 the opposite corners), E = ½·k_b·3/(A0+A1)·‖Σ K_i x_i‖²
//! with cotangent weights K of the rest shape. The Hessian is constant: assembled once.
//!
//! The energy is measured against a flat rest state (cloth is cut from flat panels, as
//! in SOR §6): it is invariant under rigid motions and zero for flat configurations, and
//! the garment's gentle rest curvature costs ~10⁻⁴ J/m², negligible against gravity.

use glam::DVec3;

/// Cotangent stencil of one hinge: vertex ids and the scaled weights.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Hinge {
    pub(crate) v: [u32; 4],
    /// √(3/(A0+A1))·K_i: the energy is ½·k_b·‖Σ w_i x_i‖².
    pub(crate) w: [f64; 4],
}

fn cot(a: DVec3, b: DVec3) -> f64 {
    let c = a.dot(b);
    let s = a.cross(b).length();
    if s <= 1e-300 { 0.0 } else { c / s }
}

impl Hinge {
    /// From the rest positions of the stencil `[x0, x1, x2, x3]`.
    pub(crate) fn new(v: [u32; 4], x: [DVec3; 4]) -> Option<Self> {
        let e0 = x[1] - x[0];
        let e1 = x[2] - x[0];
        let e2 = x[3] - x[0];
        let e3 = x[2] - x[1];
        let e4 = x[3] - x[1];
        let c01 = cot(e0, e1);
        let c02 = cot(e0, e2);
        let c03 = cot(-e0, e3);
        let c04 = cot(-e0, e4);
        let a0 = 0.5 * e0.cross(e1).length();
        let a1 = 0.5 * e0.cross(e2).length();
        if a0 + a1 <= 1e-14 {
            return None;
        }
        let s = (3.0 / (a0 + a1)).sqrt();
        let w = [
            (c03 + c04) * s,
            (c01 + c02) * s,
            -(c01 + c03) * s,
            -(c02 + c04) * s,
        ];
        w.iter().all(|x| x.is_finite()).then_some(Hinge { v, w })
    }

    /// Σ w_i x_i.
    pub(crate) fn curvature(&self, x: &[DVec3]) -> DVec3 {
        (0..4).map(|i| x[self.v[i] as usize] * self.w[i]).sum()
    }
}
