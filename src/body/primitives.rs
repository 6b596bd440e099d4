//! The body as a smooth union of signed-distance primitives, each attached to one bone.
//! Shapes are placed relative to the skeleton's joints and sized by the body shape;
//! segment proportions follow anthropometric tables (Drillis & Contini 1966).

use glam::Vec3;

use crate::mesh::{Field, sd_ellipsoid, sd_round_box, sd_round_cone, smooth_min};
use crate::skeleton::{JointId, Skeleton};

use super::shape::BodyShape;

#[derive(Copy, Clone, Debug)]
pub(crate) enum Shape {
    Cone { a: Vec3, b: Vec3, ra: f32, rb: f32 },
    Ellipsoid { c: Vec3, r: Vec3 },
    RoundBox { c: Vec3, half: Vec3, r: f32 },
}

/// One primitive: its shape, the bone it moves with, and the radius (metres) over
/// which it blends into the primitives before it.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Primitive {
    pub(crate) shape: Shape,
    pub(crate) bone: JointId,
    pub(crate) blend: f32,
}

impl Primitive {
    #[inline]
    pub(crate) fn distance(&self, p: Vec3) -> f32 {
        match self.shape {
            Shape::Cone { a, b, ra, rb } => sd_round_cone(p, a, b, ra, rb),
            Shape::Ellipsoid { c, r } => sd_ellipsoid(p, c, r),
            Shape::RoundBox { c, half, r } => sd_round_box(p, c, half, r),
        }
    }

    /// The primitive after the map x ↦ ((x, y − y0, z) · s) (uniform scale about the
    /// origin after a vertical shift), with radii and blend scaled alike.
    pub(crate) fn transformed(&self, s: f32, y0: f32) -> Primitive {
        let m = |p: Vec3| Vec3::new(p.x, p.y - y0, p.z) * s;
        let shape = match self.shape {
            Shape::Cone { a, b, ra, rb } => Shape::Cone {
                a: m(a),
                b: m(b),
                ra: ra * s,
                rb: rb * s,
            },
            Shape::Ellipsoid { c, r } => Shape::Ellipsoid { c: m(c), r: r * s },
            Shape::RoundBox { c, half, r } => Shape::RoundBox {
                c: m(c),
                half: half * s,
                r: r * s,
            },
        };
        Primitive {
            shape,
            bone: self.bone,
            blend: self.blend * s,
        }
    }

    /// Conservative bounding box (with the blend radius added).
    fn bounds(&self) -> (Vec3, Vec3) {
        let (lo, hi) = match self.shape {
            Shape::Cone { a, b, ra, rb } => {
                let r = ra.max(rb);
                (a.min(b) - Vec3::splat(r), a.max(b) + Vec3::splat(r))
            }
            Shape::Ellipsoid { c, r } => (c - r, c + r),
            Shape::RoundBox { c, half, .. } => (c - half, c + half),
        };
        (lo - Vec3::splat(self.blend), hi + Vec3::splat(self.blend))
    }
}

/// The body's implicit surface: smooth union of its primitives.
#[derive(Clone, Debug)]
pub(crate) struct BodyField {
    pub(crate) prims: Vec<Primitive>,
    boxes: Vec<(Vec3, Vec3)>,
}

impl BodyField {
    pub(crate) fn new(prims: Vec<Primitive>) -> Self {
        let boxes = prims.iter().map(|p| p.bounds()).collect();
        Self { prims, boxes }
    }

    /// A field made of the primitives attached to the given bones only, blended with at
    /// least `min_blend` and offset outwards by `offset` (metres): the loose shell a
    /// garment is cut from.
    pub(crate) fn subset(&self, bones: &[JointId], min_blend: f32) -> BodyField {
        let prims = self
            .prims
            .iter()
            .filter(|p| bones.contains(&p.bone))
            .map(|p| Primitive {
                blend: p.blend.max(min_blend),
                ..*p
            })
            .collect();
        BodyField::new(prims)
    }

    /// Applies [`Primitive::transformed`] to every primitive.
    pub(crate) fn transformed(&self, s: f32, y0: f32) -> BodyField {
        BodyField::new(self.prims.iter().map(|p| p.transformed(s, y0)).collect())
    }

    /// Bounds of the whole body with a margin, metres.
    pub(crate) fn bounds(&self, margin: f32) -> (Vec3, Vec3) {
        let lo = self
            .boxes
            .iter()
            .fold(Vec3::splat(f32::MAX), |a, b| a.min(b.0));
        let hi = self
            .boxes
            .iter()
            .fold(Vec3::splat(f32::MIN), |a, b| a.max(b.1));
        (lo - Vec3::splat(margin), hi + Vec3::splat(margin))
    }
}

impl Field for BodyField {
    fn value(&self, p: Vec3) -> f32 {
        let mut d = f32::MAX;
        for (prim, (lo, hi)) in self.prims.iter().zip(&self.boxes) {
            // a primitive whose box is farther than the current distance cannot lower it
            let out = (*lo - p).max(p - *hi).max(Vec3::ZERO).length();
            if out > d + prim.blend {
                continue;
            }
            let di = prim.distance(p);
            d = if d == f32::MAX {
                di
            } else {
                smooth_min(d, di, prim.blend)
            };
        }
        d
    }
}

/// Builds the primitive list for a skeleton and shape (T-pose, world frame, metres).
pub(crate) fn body_primitives(skel: &Skeleton, shape: &BodyShape) -> Vec<Primitive> {
    let s = shape.height / 1.75;
    let g = shape.girth();
    let gs = g * s;
    let j = |id: JointId| skel.rest_position(id);
    let h = shape.height;
    let mut out = Vec::new();
    let mut push =
        |shape: Shape, bone: JointId, blend: f32| out.push(Primitive { shape, bone, blend });
    let ell = |c: Vec3, r: Vec3| Shape::Ellipsoid { c, r };
    let cone = |a: Vec3, b: Vec3, ra: f32, rb: f32| Shape::Cone { a, b, ra, rb };

    // --- torso, bottom to top; generous blend radii keep it one smooth trunk
    let hip_y = j(JointId::LEFT_HIP).y;
    push(
        ell(
            Vec3::new(0.0, hip_y + 0.03 * s, -0.012 * s),
            Vec3::new(0.45 * shape.hip_width, 0.10 * s, 0.095 * gs),
        ),
        JointId::PELVIS,
        0.0,
    );
    for side in [1.0f32, -1.0] {
        push(
            ell(
                Vec3::new(side * 0.058 * s, hip_y - 0.01 * s, -0.045 * gs),
                Vec3::new(0.072, 0.085, 0.068) * gs,
            ),
            JointId::PELVIS,
            0.05 * s,
        );
    }
    let sp1 = j(JointId::SPINE1);
    let sp2 = j(JointId::SPINE2);
    let sp3 = j(JointId::SPINE3);
    push(
        ell(
            Vec3::new(0.0, sp1.y - 0.01 * s, 0.004 * s),
            Vec3::new(0.132 * gs, 0.11 * s, 0.092 * g.powf(1.4) * s),
        ),
        JointId::SPINE1,
        0.09 * s,
    );
    push(
        ell(
            Vec3::new(0.0, sp2.y + 0.005 * s, 0.002 * s),
            Vec3::new(0.138 * gs, 0.10 * s, 0.097 * g.powf(1.2) * s),
        ),
        JointId::SPINE2,
        0.09 * s,
    );
    let chest_w = 0.36 * shape.shoulder_width * g.sqrt();
    push(
        ell(
            Vec3::new(0.0, sp3.y + 0.035 * s, 0.006 * s),
            Vec3::new(chest_w, 0.10 * s, 0.10 * gs),
        ),
        JointId::SPINE3,
        0.06 * s,
    );
    // back (latissimus): widens the upper trunk behind the chest
    push(
        ell(
            Vec3::new(0.0, sp3.y + 0.005 * s, -0.03 * s),
            Vec3::new(chest_w * 0.92, 0.11 * s, 0.085 * gs),
        ),
        JointId::SPINE3,
        0.06 * s,
    );

    // --- shoulder girdle (collars) and neck
    let neck = j(JointId::NECK);
    let head = j(JointId::HEAD);
    let neck_base = Vec3::new(0.0, neck.y - 0.03 * s, neck.z);
    for (side, shj) in [
        (JointId::LEFT_COLLAR, JointId::LEFT_SHOULDER),
        (JointId::RIGHT_COLLAR, JointId::RIGHT_SHOULDER),
    ] {
        let sh = j(shj);
        // shoulder line: from the sternum's top to the shoulder joint
        let inner = Vec3::new(sh.x * 0.25, sh.y - 0.035 * s, sh.z + 0.005 * s);
        push(
            cone(
                inner,
                Vec3::new(sh.x * 0.85, sh.y - 0.01 * s, sh.z),
                0.07 * gs,
                0.058 * gs,
            ),
            side,
            0.07 * s,
        );
        // trapezius: neck base to the top of the shoulder
        push(
            cone(
                neck_base,
                Vec3::new(sh.x * 0.8, sh.y + 0.01 * s, sh.z - 0.01 * s),
                0.055 * gs,
                0.045 * gs,
            ),
            side,
            0.06 * s,
        );
    }
    push(
        cone(
            Vec3::new(0.0, neck.y - 0.04 * s, neck.z),
            Vec3::new(0.0, head.y + 0.015 * s, head.z - 0.005 * s),
            0.058 * g.sqrt() * s,
            0.052 * s,
        ),
        JointId::NECK,
        0.035 * s,
    );

    // --- head: cranium, jaw, nose
    let head_ry = 0.105 * s;
    push(
        ell(
            Vec3::new(0.0, h - head_ry, 0.008 * s),
            Vec3::new(0.077 * s, head_ry, 0.098 * s),
        ),
        JointId::HEAD,
        0.035 * s,
    );
    push(
        ell(
            Vec3::new(0.0, h - 0.178 * s, 0.032 * s),
            Vec3::new(0.056, 0.052, 0.062) * s,
        ),
        JointId::HEAD,
        0.04 * s,
    );
    push(
        ell(
            Vec3::new(0.0, h - 0.13 * s, 0.102 * s),
            Vec3::new(0.011, 0.02, 0.017) * s,
        ),
        JointId::HEAD,
        0.012 * s,
    );

    // --- arms
    for (shj, elj, wrj, sign) in [
        (
            JointId::LEFT_SHOULDER,
            JointId::LEFT_ELBOW,
            JointId::LEFT_WRIST,
            1.0f32,
        ),
        (
            JointId::RIGHT_SHOULDER,
            JointId::RIGHT_ELBOW,
            JointId::RIGHT_WRIST,
            -1.0,
        ),
    ] {
        let (sh, el, wr) = (j(shj), j(elj), j(wrj));
        push(
            ell(
                sh + Vec3::new(sign * 0.02 * s, 0.008 * s, 0.0),
                Vec3::new(0.066, 0.06, 0.06) * gs,
            ),
            shj,
            0.035 * s,
        );
        push(cone(sh, el, 0.051 * gs, 0.039 * gs), shj, 0.03 * s);
        push(
            cone(el, wr, 0.039 * gs, 0.028 * g.sqrt() * s),
            elj,
            0.025 * s,
        );
        let palm = wr + Vec3::new(sign * 0.07 * s, -0.002 * s, 0.0);
        push(
            Shape::RoundBox {
                c: palm,
                half: Vec3::new(0.052 * s, 0.016 * s, 0.043 * s),
                r: 0.015 * s,
            },
            wrj,
            0.02 * s,
        );
        let fingers = wr + Vec3::new(sign * 0.145 * s, -0.004 * s, -0.004 * s);
        push(
            Shape::RoundBox {
                c: fingers,
                half: Vec3::new(0.04 * s, 0.011 * s, 0.039 * s),
                r: 0.01 * s,
            },
            wrj,
            0.015 * s,
        );
        let thumb_a = wr + Vec3::new(sign * 0.03 * s, -0.008 * s, 0.035 * s);
        let thumb_b = wr + Vec3::new(sign * 0.09 * s, -0.012 * s, 0.068 * s);
        push(cone(thumb_a, thumb_b, 0.013 * s, 0.01 * s), wrj, 0.012 * s);
    }

    // --- legs
    for (hipj, knj, anj, ftj) in [
        (
            JointId::LEFT_HIP,
            JointId::LEFT_KNEE,
            JointId::LEFT_ANKLE,
            JointId::LEFT_FOOT,
        ),
        (
            JointId::RIGHT_HIP,
            JointId::RIGHT_KNEE,
            JointId::RIGHT_ANKLE,
            JointId::RIGHT_FOOT,
        ),
    ] {
        let (hp, kn, an) = (j(hipj), j(knj), j(anj));
        let ft = j(ftj);
        push(
            cone(
                hp + Vec3::new(0.0, 0.01 * s, 0.0),
                kn,
                0.082 * gs,
                0.05 * g.powf(0.7) * s,
            ),
            hipj,
            0.04 * s,
        );
        push(
            cone(kn, an, 0.047 * g.powf(0.7) * s, 0.03 * s),
            knj,
            0.03 * s,
        );
        push(
            ell(
                Vec3::new(kn.x, kn.y - 0.11 * s, kn.z - 0.018 * s),
                Vec3::new(0.047, 0.1, 0.048) * g.powf(0.8) * s,
            ),
            knj,
            0.03 * s,
        );
        // foot: heel-to-ball box moves with the ankle, toe box with the foot joint
        let foot_len = 0.152 * h;
        let heel_z = an.z - 0.045 * s;
        let ball_z = heel_z + 0.72 * foot_len;
        let hb = Vec3::new(0.043 * s, 0.032 * s, 0.5 * (ball_z - heel_z));
        push(
            Shape::RoundBox {
                c: Vec3::new(an.x, hb.y, 0.5 * (heel_z + ball_z)),
                half: hb,
                r: 0.025 * s,
            },
            anj,
            0.015 * s,
        );
        push(
            cone(
                an,
                Vec3::new(an.x, 0.035 * s, an.z + 0.02 * s),
                0.035 * s,
                0.04 * s,
            ),
            anj,
            0.03 * s,
        );
        let toe_len = 0.28 * foot_len;
        let th = Vec3::new(0.044 * s, 0.02 * s, 0.5 * toe_len + 0.01 * s);
        push(
            Shape::RoundBox {
                c: Vec3::new(ft.x, th.y, ball_z + 0.5 * toe_len - 0.01 * s),
                half: th,
                r: 0.018 * s,
            },
            ftj,
            0.025 * s,
        );
    }
    out
}
