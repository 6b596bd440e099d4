//! Implicit surfaces: the `Field` trait, signed-distance primitives with smooth blending,
//! and polygonisation by marching tetrahedra on a regular grid.
//!
//! Marching tetrahedra over the Kuhn (Freudenthal) subdivision of each grid cube is used
//! instead of marching cubes because it has no ambiguous cases: the zero set of a
//! piecewise-linear field over a simplicial complex is always a closed 2-manifold, so
//! the output needs no repair.

use std::collections::HashMap;

use glam::Vec3;
use rayon::prelude::*;

use super::trimesh::TriMesh;

/// A scalar field in space (metres): negative inside, positive outside, and close to a
/// signed distance near its zero set.
pub trait Field: Sync {
    /// Field value at `p`.
    fn value(&self, p: Vec3) -> f32;

    /// Gradient at `p` (central differences with a 0.5 mm step unless overridden).
    fn gradient(&self, p: Vec3) -> Vec3 {
        let h = 5e-4;
        Vec3::new(
            self.value(p + Vec3::X * h) - self.value(p - Vec3::X * h),
            self.value(p + Vec3::Y * h) - self.value(p - Vec3::Y * h),
            self.value(p + Vec3::Z * h) - self.value(p - Vec3::Z * h),
        ) / (2.0 * h)
    }

    /// Moves `p` onto the zero set by a few Newton steps along the gradient.
    fn project(&self, mut p: Vec3) -> Vec3 {
        for _ in 0..4 {
            let f = self.value(p);
            if f.abs() < 1e-6 {
                break;
            }
            let g = self.gradient(p);
            let g2 = g.length_squared();
            if g2 < 1e-12 {
                break;
            }
            p -= g * (f / g2);
        }
        p
    }
}

impl<F: Fn(Vec3) -> f32 + Sync> Field for F {
    fn value(&self, p: Vec3) -> f32 {
        self(p)
    }
}

/// Polynomial smooth minimum (Quílez): equals `min(a, b)` when they differ by more
/// than `k` (metres) and blends them smoothly within `k`.
#[inline]
pub fn smooth_min(a: f32, b: f32, k: f32) -> f32 {
    if k <= 0.0 {
        return a.min(b);
    }
    let h = (k - (a - b).abs()).max(0.0) / k;
    a.min(b) - h * h * k * 0.25
}

/// Signed distance to a "round cone": the convex hull of two spheres (centre `a`
/// radius `ra`, centre `b` radius `rb`). Exact (Quílez's formulation).
pub fn sd_round_cone(p: Vec3, a: Vec3, b: Vec3, ra: f32, rb: f32) -> f32 {
    let ba = b - a;
    let l2 = ba.length_squared();
    if l2 < 1e-12 {
        return (p - a).length() - ra.max(rb);
    }
    let rr = ra - rb;
    let a2 = l2 - rr * rr;
    if a2 <= 0.0 {
        // one sphere contains the other
        return ((p - a).length() - ra).min((p - b).length() - rb);
    }
    let il2 = 1.0 / l2;
    let pa = p - a;
    let y = pa.dot(ba);
    let z = y - l2;
    let x2 = (pa * l2 - ba * y).length_squared();
    let y2 = y * y * l2;
    let z2 = z * z * l2;
    let k = rr.signum() * rr * rr * x2;
    if z.signum() * a2 * z2 > k {
        return (x2 + z2).sqrt() * il2 - rb;
    }
    if y.signum() * a2 * y2 < k {
        return (x2 + y2).sqrt() * il2 - ra;
    }
    ((x2 * a2 * il2).sqrt() + y * rr) * il2 - ra
}

/// Approximate signed distance to an axis-aligned ellipsoid (centre `c`, radii `r`),
/// the first-order bound of Quílez; exact on the axes, good near the surface.
pub fn sd_ellipsoid(p: Vec3, c: Vec3, r: Vec3) -> f32 {
    let q = p - c;
    let k0 = (q / r).length();
    let k1 = (q / (r * r)).length();
    if k1 < 1e-12 {
        return -r.min_element();
    }
    k0 * (k0 - 1.0) / k1
}

/// Signed distance to an axis-aligned box with rounded edges (centre `c`, half-extents
/// `half` including the rounding radius `r`).
pub fn sd_round_box(p: Vec3, c: Vec3, half: Vec3, r: f32) -> f32 {
    let q = (p - c).abs() - (half - Vec3::splat(r));
    q.max(Vec3::ZERO).length() + q.max_element().min(0.0) - r
}

/// Polygonises the zero set of `field` inside the box `[lo, hi]` with grid spacing `h`
/// (metres), by marching tetrahedra. The field must be positive on the box's faces for
/// the result to be closed. Triangles face the positive side (outward normals).
///
/// Returns an indexed mesh whose vertices lie on grid edges; no vertex is shared by two
/// separate sheets.
pub fn polygonize(field: &dyn Field, lo: Vec3, hi: Vec3, h: f32) -> TriMesh {
    let n = ((hi - lo) / h).ceil().as_uvec3() + glam::UVec3::ONE;
    let (nx, ny, nz) = (n.x as usize, n.y as usize, n.z as usize);
    let idx = |x: usize, y: usize, z: usize| (z * ny + y) * nx + x;
    let eps = 1e-4 * h;
    // Sample the field. Blocks of B³ points whose centre is far from the surface are
    // filled with the centre's value without evaluating each point: the field is
    // (close to) 1-Lipschitz, so no point of such a block, nor any grid neighbour of
    // one, is near the zero set, and no output vertex is interpolated from a filled
    // value. One z-slab of blocks per task.
    const B: usize = 4;
    let half_diag = (B as f32) * h * 3f32.sqrt() * 0.5;
    let mut values = vec![0f32; nx * ny * nz];
    values
        .par_chunks_mut(nx * ny * B)
        .enumerate()
        .for_each(|(bz, slab)| {
            let z0 = bz * B;
            let zn = slab.len() / (nx * ny);
            for by in (0..ny).step_by(B) {
                for bx in (0..nx).step_by(B) {
                    let centre = lo
                        + Vec3::new(
                            bx as f32 + 0.5 * B as f32,
                            by as f32 + 0.5 * B as f32,
                            z0 as f32 + 0.5 * B as f32,
                        ) * h;
                    let vc = field.value(centre);
                    let far = vc.abs() > 1.5 * half_diag + 2.0 * h;
                    for dz in 0..zn {
                        for y in by..(by + B).min(ny) {
                            for x in bx..(bx + B).min(nx) {
                                let v = if far {
                                    vc
                                } else {
                                    field.value(
                                        lo + Vec3::new(x as f32, y as f32, (z0 + dz) as f32) * h,
                                    )
                                };
                                // keep values off zero so no vertex lands on a grid point
                                slab[(dz * ny + y) * nx + x] = if v.abs() < eps { eps } else { v };
                            }
                        }
                    }
                }
            }
        });
    let point = |i: usize| {
        let x = i % nx;
        let y = (i / nx) % ny;
        let z = i / (nx * ny);
        lo + Vec3::new(x as f32, y as f32, z as f32) * h
    };
    // the 6 Kuhn tetrahedra: paths from corner 000 to 111, one axis per step
    const PERMS: [[usize; 3]; 6] = [
        [0, 1, 2],
        [0, 2, 1],
        [1, 0, 2],
        [1, 2, 0],
        [2, 0, 1],
        [2, 1, 0],
    ];
    const PARITY_EVEN: [bool; 6] = [true, false, false, true, true, false];
    let mut positions: Vec<Vec3> = Vec::new();
    let mut triangles: Vec<[u32; 3]> = Vec::new();
    let mut edge_vertex: HashMap<(u32, u32), u32> = HashMap::new();
    let mut vertex_on = |a: usize, b: usize, positions: &mut Vec<Vec3>| -> u32 {
        let key = (a.min(b) as u32, a.max(b) as u32);
        *edge_vertex.entry(key).or_insert_with(|| {
            let (fa, fb) = (values[a], values[b]);
            let t = fa / (fa - fb);
            positions.push(point(a).lerp(point(b), t));
            (positions.len() - 1) as u32
        })
    };
    for z in 0..nz - 1 {
        for y in 0..ny - 1 {
            for x in 0..nx - 1 {
                // skip cells without a sign change
                let c = |dx: usize, dy: usize, dz: usize| idx(x + dx, y + dy, z + dz);
                let corners = [
                    c(0, 0, 0),
                    c(1, 0, 0),
                    c(0, 1, 0),
                    c(1, 1, 0),
                    c(0, 0, 1),
                    c(1, 0, 1),
                    c(0, 1, 1),
                    c(1, 1, 1),
                ];
                let neg = corners.iter().filter(|&&i| values[i] < 0.0).count();
                if neg == 0 || neg == 8 {
                    continue;
                }
                for (pi, perm) in PERMS.iter().enumerate() {
                    let mut d = [0usize; 3];
                    let mut tet = [c(0, 0, 0); 4];
                    for (s, &axis) in perm.iter().enumerate() {
                        d[axis] = 1;
                        tet[s + 1] = c(d[0], d[1], d[2]);
                    }
                    if !PARITY_EVEN[pi] {
                        tet.swap(2, 3);
                    }
                    emit_tet(tet, &values, &mut positions, &mut triangles, &mut vertex_on);
                }
            }
        }
    }
    TriMesh::new(positions, triangles)
}

/// Emits the zero-set triangles of one positively oriented tetrahedron.
fn emit_tet(
    tet: [usize; 4],
    values: &[f32],
    positions: &mut Vec<Vec3>,
    triangles: &mut Vec<[u32; 3]>,
    vertex_on: &mut impl FnMut(usize, usize, &mut Vec<Vec3>) -> u32,
) {
    let inside: Vec<usize> = (0..4).filter(|&k| values[tet[k]] < 0.0).collect();
    // even permutations that put the chosen corners first
    const ONE: [[usize; 4]; 4] = [[0, 1, 2, 3], [1, 0, 3, 2], [2, 0, 1, 3], [3, 0, 2, 1]];
    match inside.len() {
        1 | 3 => {
            let lone = if inside.len() == 1 {
                inside[0]
            } else {
                (0..4).find(|k| !inside.contains(k)).unwrap_or(0)
            };
            let o = ONE[lone];
            let (a, b, c, d) = (tet[o[0]], tet[o[1]], tet[o[2]], tet[o[3]]);
            let (ab, ac, ad) = (
                vertex_on(a, b, positions),
                vertex_on(a, c, positions),
                vertex_on(a, d, positions),
            );
            if inside.len() == 1 {
                triangles.push([ab, ac, ad]);
            } else {
                triangles.push([ab, ad, ac]);
            }
        }
        2 => {
            let o = match (inside[0], inside[1]) {
                (0, 1) => [0, 1, 2, 3],
                (0, 2) => [0, 2, 3, 1],
                (0, 3) => [0, 3, 1, 2],
                (1, 2) => [1, 2, 0, 3],
                (1, 3) => [1, 3, 2, 0],
                _ => [2, 3, 0, 1],
            };
            let (a, b, c, d) = (tet[o[0]], tet[o[1]], tet[o[2]], tet[o[3]]);
            let ac = vertex_on(a, c, positions);
            let ad = vertex_on(a, d, positions);
            let bd = vertex_on(b, d, positions);
            let bc = vertex_on(b, c, positions);
            triangles.push([ac, ad, bd]);
            triangles.push([ac, bd, bc]);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::Topology;

    #[test]
    fn sphere_is_closed_manifold_with_right_volume() {
        let r = 0.3;
        let sphere = |p: Vec3| p.length() - r;
        let m = polygonize(&sphere, Vec3::splat(-0.4), Vec3::splat(0.4), 0.02);
        let t = Topology::build(&m).expect("manifold");
        assert!(t.is_closed());
        assert_eq!(t.euler_characteristic(&m), 2);
        let v = m.signed_volume();
        let exact = 4.0 / 3.0 * std::f64::consts::PI * (r as f64).powi(3);
        assert!((v - exact).abs() / exact < 0.02, "volume {v} vs {exact}");
        for p in &m.positions {
            assert!((p.length() - r).abs() < 0.005);
        }
    }

    #[test]
    fn smooth_blend_of_two_capsules_is_one_torus_free_surface() {
        let f = |p: Vec3| {
            let a = sd_round_cone(
                p,
                Vec3::new(-0.2, 0.0, 0.0),
                Vec3::new(0.2, 0.0, 0.0),
                0.08,
                0.05,
            );
            let b = sd_round_cone(
                p,
                Vec3::new(0.0, -0.2, 0.0),
                Vec3::new(0.0, 0.2, 0.0),
                0.06,
                0.06,
            );
            smooth_min(a, b, 0.03)
        };
        let m = polygonize(&f, Vec3::splat(-0.35), Vec3::splat(0.35), 0.015);
        let t = Topology::build(&m).expect("manifold");
        assert!(t.is_closed());
        assert_eq!(t.component_count(&m), 1);
        assert_eq!(t.euler_characteristic(&m), 2);
        assert!(m.signed_volume() > 0.0);
    }

    #[test]
    fn round_cone_distance_is_exact_on_simple_points() {
        let (a, b) = (Vec3::ZERO, Vec3::new(1.0, 0.0, 0.0));
        assert!((sd_round_cone(Vec3::new(0.5, 0.5, 0.0), a, b, 0.1, 0.1) - 0.4).abs() < 1e-5);
        assert!((sd_round_cone(Vec3::new(-0.5, 0.0, 0.0), a, b, 0.2, 0.1) - 0.3).abs() < 1e-5);
        assert!(
            (sd_ellipsoid(
                Vec3::new(2.0, 0.0, 0.0),
                Vec3::ZERO,
                Vec3::new(1.0, 0.5, 0.5)
            ) - 1.0)
                .abs()
                < 1e-5
        );
        assert!(sd_round_box(Vec3::ZERO, Vec3::ZERO, Vec3::splat(0.5), 0.1) < 0.0);
    }
}
