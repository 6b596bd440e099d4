//! Rotation helpers: quaternion log/exp maps, swing–twist split and a rigid transform.

use glam::{Mat4, Quat, Vec3};

/// Rotation vector (axis × angle, radians) of a unit quaternion, taking the shorter
/// arc, so the result has norm ≤ π.
pub fn quat_log(q: Quat) -> Vec3 {
    log_with(q, f32::atan2)
}

/// [`quat_log`] with a polynomial arctangent instead of libm's (absolute angle error
/// below 2·10⁻⁷ rad, several times faster): for the runtime's Θ, computed for every
/// example every frame.
#[inline]
pub(crate) fn quat_log_fast(q: Quat) -> Vec3 {
    log_with(q, |s, w| {
        // atan2(s, w) with s ≥ 0, w ≥ 0
        if s <= w {
            atan_unit(s / w)
        } else {
            std::f32::consts::FRAC_PI_2 - atan_unit(w / s)
        }
    })
}

/// The log map with `atan2(s, w)` (s ≥ 0, w ≥ 0: the half angle) supplied.
#[inline(always)]
fn log_with(q: Quat, atan2: impl Fn(f32, f32) -> f32) -> Vec3 {
    let q = if q.w < 0.0 { -q } else { q };
    let v = Vec3::new(q.x, q.y, q.z);
    let s = v.length();
    if s < 1e-12 {
        return 2.0 * v;
    }
    v * (2.0 * atan2(s, q.w) / s)
}

/// The coefficients of P in [`atan_unit`]'s x·P(x²) ≈ arctan(x) on [0, 1], constant
/// term first: a degree-7 least-squares fit on Chebyshev nodes (max error 9·10⁻⁸ rad
/// in exact arithmetic). The runtime's 8-wide Θ evaluates the same polynomial.
#[allow(
    clippy::excessive_precision,
    reason = "the fit's digits, rounded by the compiler"
)]
pub(crate) const ATAN_COEFFS: [f32; 8] = [
    9.999_999_582e-1,
    -3.333_230_283e-1,
    1.997_368_031e-1,
    -1.404_012_865e-1,
    9.967_885_269e-2,
    -6.021_844_773e-2,
    2.475_620_657e-2,
    -4.830_982_786e-3,
];

/// arctan(x) for x in [0, 1]: x·P(x²) with [`ATAN_COEFFS`].
#[inline]
fn atan_unit(x: f32) -> f32 {
    let t = x * x;
    let mut p = ATAN_COEFFS[7];
    for c in ATAN_COEFFS[..7].iter().rev() {
        p = p * t + c;
    }
    x * p
}

/// Unit quaternion of a rotation vector (axis × angle, radians); inverse of [`quat_log`]
/// for angles below π.
pub fn quat_exp(r: Vec3) -> Quat {
    let angle = r.length();
    if angle < 1e-12 {
        return Quat::from_xyzw(0.5 * r.x, 0.5 * r.y, 0.5 * r.z, 1.0).normalize();
    }
    Quat::from_axis_angle(r / angle, angle)
}

/// Swing–twist decomposition: returns `(swing, twist)` with `q = swing * twist`, where
/// `twist` turns about the unit `axis` and `swing` about an axis perpendicular to it.
pub fn swing_twist(q: Quat, axis: Vec3) -> (Quat, Quat) {
    let v = Vec3::new(q.x, q.y, q.z);
    let p = axis * v.dot(axis);
    let twist = Quat::from_xyzw(p.x, p.y, p.z, q.w);
    let twist = if twist.length_squared() < 1e-20 {
        Quat::IDENTITY
    } else {
        twist.normalize()
    };
    (q * twist.conjugate(), twist)
}

/// Rotation that takes unit direction `from` onto unit direction `to` by the shortest
/// arc (no twist about either). Handles opposite vectors by turning about any
/// perpendicular axis.
pub fn rotation_between(from: Vec3, to: Vec3) -> Quat {
    let (a, b) = (from.normalize_or_zero(), to.normalize_or_zero());
    if a == Vec3::ZERO || b == Vec3::ZERO {
        return Quat::IDENTITY;
    }
    Quat::from_rotation_arc(a, b)
}

/// A rigid motion `x ↦ rot · x + trans` (metres; the frame is stated where it is used).
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Rigid {
    /// Rotation, unit quaternion.
    pub rot: Quat,
    /// Translation, metres.
    pub trans: Vec3,
}

impl Default for Rigid {
    fn default() -> Self {
        Self::IDENTITY
    }
}

impl Rigid {
    /// The identity motion.
    pub const IDENTITY: Rigid = Rigid {
        rot: Quat::IDENTITY,
        trans: Vec3::ZERO,
    };

    /// A motion from its parts.
    pub fn new(rot: Quat, trans: Vec3) -> Self {
        Self { rot, trans }
    }

    /// Applies the motion to a point.
    #[inline]
    pub fn apply(&self, p: Vec3) -> Vec3 {
        self.rot * p + self.trans
    }

    /// Applies only the rotation (for directions and normals).
    #[inline]
    pub fn apply_vector(&self, v: Vec3) -> Vec3 {
        self.rot * v
    }

    /// `self ∘ other`: first `other`, then `self`.
    #[inline]
    pub fn compose(&self, other: &Rigid) -> Rigid {
        Rigid {
            rot: (self.rot * other.rot).normalize(),
            trans: self.rot * other.trans + self.trans,
        }
    }

    /// The inverse motion.
    #[inline]
    pub fn inverse(&self) -> Rigid {
        let inv = self.rot.conjugate();
        Rigid {
            rot: inv,
            trans: -(inv * self.trans),
        }
    }

    /// The 4×4 homogeneous matrix of the motion.
    pub fn to_mat4(&self) -> Mat4 {
        Mat4::from_rotation_translation(self.rot, self.trans)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_log_matches_log() {
        let mut worst = 0f32;
        for i in 0..20_000 {
            let t = i as f32 * 0.618_034;
            let axis = Vec3::new(t.sin(), (1.7 * t).cos(), (0.3 * t).sin() + 0.2).normalize();
            // angles over the whole range, including near 0, π/2 (s = w) and π
            let angle = (i as f32 / 20_000.0) * std::f32::consts::PI;
            let q = Quat::from_axis_angle(axis, angle);
            for q in [q, -q] {
                worst = worst.max((quat_log_fast(q) - quat_log(q)).length());
            }
        }
        assert!(worst < 1e-6, "fast log differs by {worst} rad");
        assert_eq!(quat_log_fast(Quat::IDENTITY), Vec3::ZERO);
    }

    #[test]
    fn log_exp_round_trip() {
        for r in [
            Vec3::new(0.1, -0.2, 0.3),
            Vec3::new(2.0, 1.0, -1.5),
            Vec3::new(1e-9, 0.0, 0.0),
            Vec3::ZERO,
        ] {
            let back = quat_log(quat_exp(r));
            assert!((back - r).length() < 1e-5, "{r} -> {back}");
        }
    }

    #[test]
    fn swing_twist_recomposes() {
        let q = quat_exp(Vec3::new(0.4, 0.9, -0.3));
        let (s, t) = swing_twist(q, Vec3::Y);
        assert!((s * t).abs_diff_eq(q, 1e-6) || (s * t).abs_diff_eq(-q, 1e-6));
        let tv = quat_log(t);
        assert!(tv.x.abs() < 1e-6 && tv.z.abs() < 1e-6);
        let sv = quat_log(s);
        assert!(sv.y.abs() < 1e-5, "swing has no Y part: {sv}");
    }

    #[test]
    fn rigid_inverse_and_compose() {
        let a = Rigid::new(
            quat_exp(Vec3::new(0.3, -0.1, 0.7)),
            Vec3::new(1.0, 2.0, 3.0),
        );
        let b = Rigid::new(
            quat_exp(Vec3::new(-0.2, 0.5, 0.1)),
            Vec3::new(-0.5, 0.0, 0.25),
        );
        let p = Vec3::new(0.3, 0.4, -0.8);
        assert!((a.inverse().apply(a.apply(p)) - p).length() < 1e-5);
        assert!((a.compose(&b).apply(p) - a.apply(b.apply(p))).length() < 1e-5);
    }
}
