//! Procedural garment patterns: each garment is the zero set of a loose "shell" field
//! around part of the body (the body's own primitives, blended more softly and offset
//! by the ease), cut open by a "clip" field at the neck, hem, sleeves or legs.

use glam::Vec3;

use crate::body::{Body, BodyField};
use crate::mesh::{Field, sd_ellipsoid, sd_round_cone, smooth_min};
use crate::skeleton::JointId;

use super::config::{GarmentConfig, GarmentKind, Legs, Sleeves};

/// Shell and clip fields of one garment, with the box to polygonise in.
pub(crate) struct Pattern {
    pub(crate) shell: Shell,
    pub(crate) clip: Clip,
    pub(crate) lo: Vec3,
    pub(crate) hi: Vec3,
}

/// Extra volumes that make cloth hang instead of hugging the body.
#[derive(Clone, Debug)]
enum Drape {
    Ellipsoid { c: Vec3, r: Vec3 },
    Cone { a: Vec3, b: Vec3, ra: f32, rb: f32 },
}

pub(crate) struct Shell {
    body: BodyField,
    drapes: Vec<Drape>,
    blend: f32,
    ease: f32,
    /// Keeps the legs apart below the crotch: removes the slab |x| < half width under
    /// the crotch height (metres).
    leg_gap: Option<(f32, f32)>,
}

impl Field for Shell {
    fn value(&self, p: Vec3) -> f32 {
        let mut d = self.body.value(p);
        for dr in &self.drapes {
            let di = match *dr {
                Drape::Ellipsoid { c, r } => sd_ellipsoid(p, c, r),
                Drape::Cone { a, b, ra, rb } => sd_round_cone(p, a, b, ra, rb),
            };
            d = smooth_min(d, di, self.blend);
        }
        d -= self.ease;
        if let Some((half, crotch)) = self.leg_gap {
            d = d.max((half - p.x.abs()).min(crotch - p.y));
        }
        d
    }
}

/// Where the garment is cut: it keeps the points where every term is negative.
pub(crate) struct Clip {
    /// Keep y > hem (T-shirt hem, pants leg openings).
    below: f32,
    /// Keep y < top (pants waist); +∞ for shirts.
    above: f32,
    /// Keep |x| < sleeve (T-shirt sleeves); +∞ for pants.
    sleeve: f32,
    /// Remove the inside of this ellipsoid (neck opening), if any.
    neck: Option<(Vec3, Vec3)>,
}

impl Field for Clip {
    fn value(&self, p: Vec3) -> f32 {
        let mut c = (self.below - p.y)
            .max(p.y - self.above)
            .max(p.x.abs() - self.sleeve);
        if let Some((centre, r)) = self.neck {
            c = c.max(-sd_ellipsoid(p, centre, r));
        }
        c
    }
}

pub(crate) fn pattern(body: &Body, cfg: &GarmentConfig, field: &BodyField) -> Pattern {
    let sk = &body.skeleton;
    let j = |id: JointId| sk.rest_position(id);
    let s = body.shape.height / 1.75;
    let g = body.shape.girth();
    match cfg.kind {
        GarmentKind::Tshirt => {
            let mut bones = vec![
                JointId::PELVIS,
                JointId::SPINE1,
                JointId::SPINE2,
                JointId::SPINE3,
                JointId::LEFT_COLLAR,
                JointId::RIGHT_COLLAR,
                JointId::LEFT_SHOULDER,
                JointId::RIGHT_SHOULDER,
                JointId::LEFT_HIP,
                JointId::RIGHT_HIP,
            ];
            if cfg.sleeves == Sleeves::Long {
                bones.extend([JointId::LEFT_ELBOW, JointId::RIGHT_ELBOW]);
            }
            let hip_y = j(JointId::LEFT_HIP).y;
            let chest = j(JointId::SPINE3);
            let hem = hip_y - 0.01 * s;
            // a boxy torso: the shirt falls from the chest instead of following the waist
            let torso = Drape::Ellipsoid {
                c: Vec3::new(0.0, 0.5 * (hem + chest.y) + 0.02 * s, 0.0),
                r: Vec3::new(
                    0.39 * body.shape.shoulder_width * g.sqrt(),
                    0.5 * (chest.y - hem) + 0.1 * s,
                    0.108 * g * s,
                ),
            };
            let sh = j(JointId::LEFT_SHOULDER);
            let el = j(JointId::LEFT_ELBOW);
            let wr = j(JointId::LEFT_WRIST);
            let sleeve = if cfg.sleeves == Sleeves::Long {
                wr.x - 0.015 * s
            } else {
                sh.x + 0.5 * (el.x - sh.x)
            };
            // sleeves hang a little wider than the arm
            let mut drapes = vec![torso];
            for side in [1.0f32, -1.0] {
                let a = Vec3::new(side * sh.x * 0.8, sh.y - 0.01 * s, sh.z);
                let b = Vec3::new(side * (sleeve + 0.05), el.y, el.z);
                drapes.push(Drape::Cone {
                    a,
                    b,
                    ra: 0.058 * g * s,
                    rb: 0.045 * g * s,
                });
            }
            let neck = j(JointId::NECK);
            let neck_hole = (
                Vec3::new(0.0, neck.y + 0.01 * s, neck.z + 0.012 * s),
                Vec3::new(0.085, 0.075, 0.095) * s * g.sqrt(),
            );
            let shell = Shell {
                body: field.subset(&bones, 0.06 * s),
                drapes,
                blend: 0.06 * s,
                ease: cfg.ease,
                leg_gap: None,
            };
            let clip = Clip {
                below: hem,
                above: f32::INFINITY,
                sleeve,
                neck: Some(neck_hole),
            };
            let margin = 0.08 * s;
            Pattern {
                shell,
                clip,
                lo: Vec3::new(-sleeve - margin, hem - margin, -0.25 * s * g),
                hi: Vec3::new(sleeve + margin, j(JointId::HEAD).y, 0.28 * s * g),
            }
        }
        GarmentKind::Pants => {
            let bones = [
                JointId::PELVIS,
                JointId::SPINE1,
                JointId::LEFT_HIP,
                JointId::RIGHT_HIP,
                JointId::LEFT_KNEE,
                JointId::RIGHT_KNEE,
            ];
            let waist = j(JointId::PELVIS).y + 0.035 * s;
            let knee_y = j(JointId::LEFT_KNEE).y;
            let bottom = match cfg.length {
                Legs::Long => j(JointId::LEFT_ANKLE).y + 0.035 * s,
                Legs::Shorts => knee_y + 0.12 * s,
            };
            // straight legs: a cone from the thigh top to the hem around each leg
            let mut drapes = Vec::new();
            for (hip, ankle) in [
                (JointId::LEFT_HIP, JointId::LEFT_ANKLE),
                (JointId::RIGHT_HIP, JointId::RIGHT_ANKLE),
            ] {
                let (h, a) = (j(hip), j(ankle));
                drapes.push(Drape::Cone {
                    a: h,
                    b: Vec3::new(a.x, bottom - 0.02, a.z),
                    ra: 0.08 * g * s,
                    rb: 0.052 * s * g.sqrt(),
                });
            }
            // the crotch sits where the body's inner thighs are a few centimetres apart
            let crotch = j(JointId::LEFT_HIP).y - 0.16 * s;
            let shell = Shell {
                body: field.subset(&bones, 0.05 * s),
                drapes,
                blend: 0.04 * s,
                ease: cfg.ease,
                leg_gap: Some((0.006 * s, crotch)),
            };
            let clip = Clip {
                below: bottom,
                above: waist,
                sleeve: f32::INFINITY,
                neck: None,
            };
            let half = 0.5 * body.shape.hip_width + 0.12 * s;
            let margin = 0.06 * s;
            Pattern {
                shell,
                clip,
                lo: Vec3::new(-half, bottom - margin, -0.24 * s * g),
                hi: Vec3::new(half, waist + margin, 0.22 * s * g),
            }
        }
    }
}
