//! Retargeting a source skeleton's motion onto the canonical skeleton.
//!
//! Rotation sources retarget as world-space rotation deltas from the source's own rest
//! pose: canonical joint `c` gets world rotation `B · G_d · G0_d⁻¹ · Q_c`, where `G_d` is
//! the world rotation of the source joint that drives `c`'s bone, `G0_d` its rest value,
//! `B` turns the source's up axis (the world axis nearest its spine) onto +Y, and `Q_c` is the rest-pose correction: the
//! rotation that turns the canonical T-pose bone direction into the source's rest bone
//! direction (minimal swing after the source body's overall orientation `F`). So a
//! source whose rest is an A-pose, or faces another way, still drives a T-pose skeleton.

use glam::{Mat3, Quat, Vec3};

use super::profile::Profile;
use crate::skeleton::{JOINT_COUNT, JointId, Pose, Skeleton, quat_exp, rotation_between};

/// A source skeleton's rest geometry (source units, source world frame).
#[derive(Clone, Debug)]
pub struct SourceSkeleton {
    /// Joint names.
    pub names: Vec<String>,
    /// Parent of each joint (parents precede children).
    pub parents: Vec<Option<usize>>,
    /// World position of each joint in the rest pose.
    pub rest_positions: Vec<Vec3>,
    /// World rotation of each joint in the rest pose.
    pub rest_rotations: Vec<Quat>,
    /// World position of each joint's end site, if it has one.
    pub end_sites: Vec<Option<Vec3>>,
}

/// Why retargeting could not be set up.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum RetargetError {
    /// The profile's pelvis joint is not in the source.
    #[error("source has no joint {0:?} for the pelvis")]
    NoPelvis(String),
    /// A mapped joint does not lie below its canonical parent's source joint.
    #[error(
        "joint {child:?} is mapped to {source_name:?}, which is not below the source joint of its canonical parent"
    )]
    NotDescendant {
        /// Canonical joint.
        child: &'static str,
        /// Its source joint.
        source_name: String,
    },
    /// The source's rest pose is degenerate (all joints at one point).
    #[error("source rest pose is degenerate: cannot tell up from down")]
    Degenerate,
}

/// A prepared mapping from one source skeleton onto the canonical skeleton.
#[derive(Clone, Debug)]
pub struct Retargeter {
    scale: f32,
    map: [Option<usize>; JOINT_COUNT],
    driver: [usize; JOINT_COUNT],
    correction: [Quat; JOINT_COUNT],
    rest_inv: Vec<Quat>,
    basis: Quat,
    share: Vec<Vec<JointId>>,
    /// Height of the source's pelvis above its lowest rest point, metres.
    source_pelvis_height: f32,
    fitted: Skeleton,
}

/// End direction of a canonical leaf joint in the T-pose (head up, hands out, toes forward).
fn leaf_direction(j: JointId) -> Vec3 {
    match j {
        JointId::HEAD | JointId::NECK => Vec3::Y,
        JointId::LEFT_WRIST => Vec3::X,
        JointId::RIGHT_WRIST => -Vec3::X,
        _ => Vec3::Z,
    }
}

impl SourceSkeleton {
    fn is_descendant(&self, mut j: usize, ancestor: usize) -> bool {
        let mut guard = 0;
        while let Some(p) = self.parents[j] {
            if p == ancestor {
                return true;
            }
            j = p;
            guard += 1;
            if guard > self.parents.len() {
                return false;
            }
        }
        false
    }

    /// Rest position of the first point beyond joint `j` along its first-child chain
    /// (or its end site): where the bone of a leaf joint points.
    fn tip(&self, j: usize) -> Option<Vec3> {
        let here = self.rest_positions[j];
        let mut cur = j;
        for _ in 0..self.names.len() {
            if let Some(e) = self.end_sites[cur]
                && (e - here).length() > 1e-6
            {
                return Some(e);
            }
            let child = (0..self.names.len()).find(|&c| self.parents[c] == Some(cur))?;
            if (self.rest_positions[child] - here).length() > 1e-6 {
                return Some(self.rest_positions[child]);
            }
            cur = child;
        }
        None
    }

    fn lowest_point(&self) -> f32 {
        self.rest_positions
            .iter()
            .chain(self.end_sites.iter().flatten())
            .map(|p| p.y)
            .fold(f32::MAX, f32::min)
    }
}

/// How high the source's pelvis stands above its soles with straight legs (source
/// units, after `basis` turns its up to +Y): the drop from the pelvis to the hip
/// joints, the thigh and shin lengths, and the ankles' height above the lowest rest
/// point, both legs averaged. A rest pose with the legs apart (CMU's) or bent measures
/// lower than the performer stands, which made every root translation too large (a
/// retargeted CMU walk floated 11–14 cm above the floor and strode 6 % too far).
/// `None` when a leg joint is not mapped.
fn straight_leg_height(
    pos: &impl Fn(JointId) -> Option<Vec3>,
    pelvis: Vec3,
    lowest: Vec3,
    basis: Quat,
) -> Option<f32> {
    let up = |v: Vec3| (basis * v).y;
    let legs = [
        (JointId::LEFT_HIP, JointId::LEFT_KNEE, JointId::LEFT_ANKLE),
        (
            JointId::RIGHT_HIP,
            JointId::RIGHT_KNEE,
            JointId::RIGHT_ANKLE,
        ),
    ];
    let mut sum = 0.0;
    for (hip, knee, ankle) in legs {
        let (h, k, a) = (pos(hip)?, pos(knee)?, pos(ankle)?);
        sum += up(pelvis - h) + (k - h).length() + (a - k).length() + up(a - lowest);
    }
    Some(sum / 2.0)
}

impl Retargeter {
    /// Prepares the mapping of `src` through `profile`.
    pub fn new(profile: &Profile, src: &SourceSkeleton) -> Result<Retargeter, RetargetError> {
        let map = profile.resolve(&src.names);
        let Some(pelvis_src) = map[0] else {
            return Err(RetargetError::NoPelvis(
                profile.joints[0].clone().unwrap_or_default(),
            ));
        };
        let template = Skeleton::default();
        let pos = |c: JointId| map[c.index()].map(|s| src.rest_positions[s]);
        // nearest mapped canonical ancestor, and descendant checks
        let mapped_ancestor = |c: JointId| {
            let mut p = c.parent();
            while let Some(a) = p {
                if map[a.index()].is_some() {
                    return Some(a);
                }
                p = a.parent();
            }
            None
        };
        for c in JointId::all().skip(1) {
            if let (Some(s), Some(a)) = (map[c.index()], mapped_ancestor(c))
                && let Some(sa) = map[a.index()]
                && !src.is_descendant(s, sa)
            {
                return Err(RetargetError::NotDescendant {
                    child: c.name(),
                    source_name: src.names[s].clone(),
                });
            }
        }
        // overall orientation F of the source body at rest, relative to the template's:
        // the same construction (spine up, hips left) on both, so a source with the
        // template's own geometry gets F = identity
        let frame = |pelvis: Vec3,
                     up_to: Option<Vec3>,
                     hips: Option<(Vec3, Vec3)>,
                     shoulders: Option<(Vec3, Vec3)>|
         -> Option<Mat3> {
            let up = match up_to {
                Some(p) if (p - pelvis).length() > 1e-6 => (p - pelvis).normalize(),
                _ => Vec3::Y,
            };
            let left = match (hips, shoulders) {
                (Some((l, r)), _) if (l - r).length() > 1e-6 => l - r,
                (_, Some((l, r))) if (l - r).length() > 1e-6 => l - r,
                _ => Vec3::X,
            };
            let x = (left - up * left.dot(up)).normalize_or_zero();
            (x != Vec3::ZERO && up.is_finite()).then(|| Mat3::from_cols(x, up, x.cross(up)))
        };
        let up_joint = [
            JointId::NECK,
            JointId::HEAD,
            JointId::SPINE3,
            JointId::SPINE2,
            JointId::SPINE1,
        ]
        .into_iter()
        .find(|j| map[j.index()].is_some());
        let pair = |a: JointId, b: JointId, get: &dyn Fn(JointId) -> Option<Vec3>| {
            Some((get(a)?, get(b)?))
        };
        let tpos = |j: JointId| Some(template.rest_position(j));
        let both_hips =
            map[JointId::LEFT_HIP.index()].is_some() && map[JointId::RIGHT_HIP.index()].is_some();
        let both_shoulders = map[JointId::LEFT_SHOULDER.index()].is_some()
            && map[JointId::RIGHT_SHOULDER.index()].is_some();
        let pelvis_pos = src.rest_positions[pelvis_src];
        let ms = frame(
            pelvis_pos,
            up_joint.and_then(pos),
            if both_hips {
                pair(JointId::LEFT_HIP, JointId::RIGHT_HIP, &pos)
            } else {
                None
            },
            if both_shoulders {
                pair(JointId::LEFT_SHOULDER, JointId::RIGHT_SHOULDER, &pos)
            } else {
                None
            },
        )
        .ok_or(RetargetError::Degenerate)?;
        let mt = frame(
            template.rest_position(JointId::PELVIS),
            up_joint.and_then(tpos),
            if both_hips {
                pair(JointId::LEFT_HIP, JointId::RIGHT_HIP, &tpos)
            } else {
                None
            },
            if both_shoulders {
                pair(JointId::LEFT_SHOULDER, JointId::RIGHT_SHOULDER, &tpos)
            } else {
                None
            },
        )
        .ok_or(RetargetError::Degenerate)?;
        let f = Quat::from_mat3(&(ms * mt.transpose())).normalize();
        let up = ms.col(1);
        // B: the world axis the source calls up (the nearest of ±X, ±Y, ±Z to its
        // spine direction, so a leaning rest pose does not tilt the world) onto +Y
        let axes = [Vec3::X, -Vec3::X, Vec3::Y, -Vec3::Y, Vec3::Z, -Vec3::Z];
        let world_up = axes
            .into_iter()
            .max_by(|a, b| a.dot(up).total_cmp(&b.dot(up)))
            .unwrap_or(Vec3::Y);
        let basis = rotation_between(world_up, Vec3::Y);
        // per-joint driver and rest-pose correction
        let mut driver = [pelvis_src; JOINT_COUNT];
        let mut correction = [f; JOINT_COUNT];
        for c in JointId::all() {
            let Some(s) = map[c.index()] else { continue };
            driver[c.index()] = s;
            if c == JointId::PELVIS {
                correction[0] = f * quat_exp(profile.correction[0]);
                continue;
            }
            // primary canonical child: the one farthest from c in the template
            let primary = c.children().max_by(|a, b| {
                template
                    .offset(*a)
                    .length()
                    .total_cmp(&template.offset(*b).length())
            });
            let (t_dir, s_tip) = match primary {
                Some(k) => {
                    let t = template.offset(k).normalize();
                    match map[k.index()] {
                        Some(sk) => {
                            if let Some(p) = src.parents[sk]
                                && src.is_descendant(sk, s)
                            {
                                driver[c.index()] = p;
                            }
                            (t, Some(src.rest_positions[sk]))
                        }
                        None => (t, src.tip(s)),
                    }
                }
                None => (leaf_direction(c), src.tip(s)),
            };
            let q = match s_tip {
                Some(tip) if (tip - src.rest_positions[s]).length() > 1e-6 => {
                    rotation_between(f * t_dir, (tip - src.rest_positions[s]).normalize()) * f
                }
                // nothing beyond a leaf joint (glTF rigs without end bones): the bone is
                // taken to continue its parent's, so it gets the parent's correction
                _ => c.parent().map(|p| correction[p.index()]).unwrap_or(f),
            };
            correction[c.index()] = (q * quat_exp(profile.correction[c.index()])).normalize();
        }
        let rest_inv = src.rest_rotations.iter().map(|q| q.conjugate()).collect();
        let scale = profile.scale;
        let lowest = Vec3::new(0.0, src.lowest_point(), 0.0);
        let source_pelvis_height = (straight_leg_height(&pos, pelvis_pos, lowest, basis)
            .unwrap_or((basis * (pelvis_pos - lowest)).y)
            * scale)
            .max(1e-3);
        // the canonical skeleton fitted to the source's proportions
        let mut rest = [Vec3::ZERO; JOINT_COUNT];
        rest[0] = Vec3::new(0.0, source_pelvis_height, 0.0);
        for c in JointId::all().skip(1) {
            let parent = c.parent().unwrap_or(JointId::PELVIS);
            rest[c.index()] = match (map[c.index()], mapped_ancestor(c)) {
                (Some(s), Some(a)) => {
                    let sa = map[a.index()].unwrap_or(pelvis_src);
                    let d = basis * ((src.rest_positions[s] - src.rest_positions[sa]) * scale);
                    let wa = (basis * correction[a.index()]).normalize();
                    rest[a.index()] + wa.conjugate() * d
                }
                _ => rest[parent.index()],
            };
        }
        Ok(Retargeter {
            scale,
            map,
            driver,
            correction,
            rest_inv,
            basis,
            share: profile.share.clone(),
            source_pelvis_height,
            fitted: Skeleton::from_rest_positions(rest),
        })
    }

    /// The canonical skeleton with the source's proportions: its joints land on the
    /// source joints they map to (after scaling) when driven by [`Retargeter::pose`].
    pub fn fitted_skeleton(&self) -> &Skeleton {
        &self.fitted
    }

    /// Source joint index of each canonical joint.
    pub fn mapping(&self) -> &[Option<usize>; JOINT_COUNT] {
        &self.map
    }

    /// Canonical world rotations for source world rotations `g` (one per source joint).
    pub fn world_rotations(&self, g: &[Quat]) -> [Quat; JOINT_COUNT] {
        let mut w = [Quat::IDENTITY; JOINT_COUNT];
        for c in JointId::all() {
            w[c.index()] = match self.map[c.index()] {
                Some(_) => {
                    let d = self.driver[c.index()];
                    let gd = g.get(d).copied().unwrap_or(Quat::IDENTITY);
                    let r0 = self.rest_inv.get(d).copied().unwrap_or(Quat::IDENTITY);
                    (self.basis * gd * r0 * self.correction[c.index()]).normalize()
                }
                None => c
                    .parent()
                    .map(|p| w[p.index()])
                    .unwrap_or(self.basis * self.correction[0]),
            };
        }
        w
    }

    /// The canonical pose for one source frame: `g` the world rotation of every source
    /// joint, `root` the world position of the source's root joint (source units).
    /// The root translation is scaled by the ratio of `target`'s pelvis height to the
    /// source's (so a short source drives a tall body without sliding feet); the source
    /// floor is taken to be y = 0 after up-alignment.
    pub fn pose(&self, g: &[Quat], root: Vec3, target: &Skeleton) -> Pose {
        let w = self.world_rotations(g);
        let mut pose = Pose::rest();
        for c in JointId::all() {
            pose.rotations[c.index()] = match c.parent() {
                None => w[0],
                Some(p) => (w[p.index()].conjugate() * w[c.index()]).normalize(),
            };
        }
        for chain in &self.share {
            let Some((&first, rest)) = chain.split_first() else {
                continue;
            };
            if self.map[first.index()].is_none()
                || rest.iter().any(|j| self.map[j.index()].is_some())
            {
                continue;
            }
            let n = chain.len() as f32;
            let part = Quat::IDENTITY
                .slerp(pose.rotations[first.index()], 1.0 / n)
                .normalize();
            for j in chain {
                pose.rotations[j.index()] = part;
            }
        }
        let pelvis_rest = target.rest_position(JointId::PELVIS);
        let ratio = pelvis_rest.y / self.source_pelvis_height;
        pose.translation = self.basis * (root * self.scale) * ratio - pelvis_rest;
        pose
    }
}

impl SourceSkeleton {
    /// A BVH file's skeleton; the rest pose is all channels zero, or frame `rest_frame`.
    pub fn from_bvh(bvh: &super::Bvh, rest_frame: Option<usize>) -> SourceSkeleton {
        let frame = rest_frame.filter(|&f| f < bvh.frame_count());
        let world = bvh.world(frame);
        let end_sites = bvh
            .joints
            .iter()
            .zip(&world)
            .map(|(j, (q, p))| j.end_site.map(|e| *p + *q * e))
            .collect();
        SourceSkeleton {
            names: bvh.joints.iter().map(|j| j.name.clone()).collect(),
            parents: bvh.joints.iter().map(|j| j.parent).collect(),
            rest_positions: world.iter().map(|w| w.1).collect(),
            rest_rotations: world.iter().map(|w| w.0).collect(),
            end_sites,
        }
    }
}

#[cfg(test)]
mod tests;
