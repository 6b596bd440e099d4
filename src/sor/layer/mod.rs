//! Garments worn over one another (an outfit: pants, and a T-shirt over them).
//!
//! Each garment is synthesised on its own, against the body (SOR §5), so where two
//! overlap (a shirt's hem over the pants' hips) nothing keeps the outer one outside the
//! inner: both lie a couple of centimetres from the skin and cut through each other.
//! A [`Layering`] resolves that each frame the way SOR resolves the body: it is SOR's
//! penetration re-projection (Eq. 11–13) with the inner garment, as synthesised this
//! frame, in the body's place. Every outer vertex that lies over the inner garment is
//! pushed out along the inner surface's normal until it is at least
//! [`LayerParams::clearance`] outside it; the inner garment does not move.
//!
//! Where each outer vertex lies over the inner garment is found afresh each frame,
//! since the two slide over each other as the body moves (a stride swings the thigh
//! under the hem): the nearest inner vertex, by a walk over the inner mesh's edges
//! from where the same avatar's walk ended last frame (at first, from the vertex
//! nearest at rest), then the point of the triangles around it under the outer vertex
//! along its normal, and the normal there. Pushing the outer vertices out of the inner
//! surface does not keep a fold of the inner garment that rises between them from
//! showing through the outer triangles, so a second pass looks from the inner side:
//! each inner vertex finds the outer triangle above it (along its normal, around its
//! nearest outer vertex) and, where that triangle is less than the clearance above
//! it, lifts the triangle's corners by just enough, shared by their barycentric
//! weights.
//!
//! Only the outer vertices within twice [`LayerParams::reach`] of the inner garment at
//! rest take part (the hem and hips of a shirt over pants), and the inner vertices
//! within four times (the pants' hips, and the thighs that come up under the hem when
//! the wearer sits). The pushes fade out over an edge's length beyond the other
//! garment's edge, where nothing is under or over the vertex, and for vertices more
//! than the reach through it, where the walk found the wrong side; so a vertex's push
//! never jumps from one frame to the next. Both garments must have been baked for the
//! same body, so that their canonical frames and rest shapes agree.
//!
//! That is right where the outer garment is the looser (a T-shirt's hem over pants, a
//! jacket over a shirt). Pants worn over a shirt mean the shirt is tucked in, and then
//! the loose garment is the inner one: pushing the pants' waist out over the shirt's
//! hem, which hangs up to 9 cm in front of them, bulges the waist and leaves the shirt
//! showing through. So the garment with more room between it and the body where the
//! two overlap gives way ([`GivesWay`]); where that is the inner garment, it is tucked
//! in: every inner vertex that lies over the outer garment at rest (its closest point
//! on a face, not beyond the outer garment's edge) is bound to that point of the outer
//! garment, and each frame is put at the clearance under it, as a waistband holds a
//! tucked shirt to the pants. (Where the outer garment fits closer to the body than
//! the clearance, that puts the inner one into the body, unseen under the outer; a
//! smaller gap there left the two garments on top of each other, showing through in
//! specks, and the garment codec moves each by up to a millimetre.) Inner vertices beyond the outer
//! garment's edge (a shirt above the waist) are bound to the edge's nearest point too
//! and blend from there back to their own synthesis over the reach: near the edge
//! towards where they were at rest relative to that point, carried by the outer
//! surface's frame, so the shirt bellies over the waistband into the pants as it did
//! at rest rather than cutting across the body when it rides up. What is tucked in
//! is hidden under the outer garment, and follows it without a search: the tuck costs
//! a surface frame and a weighted sum per bound vertex.

use glam::Vec3;

use crate::mesh::{MeshError, NearestVertex};

use super::db::{Database, body_hash};
use push::Push;
use tuck::Tuck;

/// How garments worn over one another are kept apart. Ours, not a paper's.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LayerParams {
    /// Least distance, metres, of an outer garment's vertex outside the inner garment's
    /// surface (4 mm: the garment codec moves each layer by up to 1 mm, and what is
    /// left keeps the two apart on screen).
    pub clearance: f32,
    /// How near at rest, metres, the garments' vertices must be to take part: outer
    /// vertices within twice this of the inner garment, inner ones within four times of
    /// the outer (3 cm: the garments' ease is 2 cm each); and a vertex more than this
    /// through the other garment is pushed less, and not at all past 1.5 times it.
    pub reach: f32,
    /// Which garment moves where the two overlap.
    pub gives_way: GivesWay,
}

impl Default for LayerParams {
    fn default() -> Self {
        Self {
            clearance: 0.004,
            reach: 0.03,
            gives_way: GivesWay::Looser,
        }
    }
}

/// Which garment of two worn one over the other moves where they overlap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GivesWay {
    /// The one with more room between it and the body where the two come within twice
    /// the reach of each other at rest (each garment's mean distance from the body's
    /// nearest vertex there): a loose shirt over pants is pushed out over them, the same
    /// shirt with the pants listed over it is tucked in under their waist, a jacket over
    /// a shirt is pushed out over it.
    #[default]
    Looser,
    /// The outer garment, pushed out over the inner one.
    Outer,
    /// The inner garment, tucked in under the outer one.
    Inner,
}

/// Why two garments cannot be layered.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum LayerError {
    /// The garments were baked for different bodies.
    #[error("garments {inner:?} and {outer:?} were baked for different bodies")]
    DifferentBodies {
        /// The inner garment's name.
        inner: String,
        /// The outer garment's name.
        outer: String,
    },
    /// A parameter out of range.
    #[error("layer parameter {0} out of range")]
    BadParameter(&'static str),
    /// The inner garment's mesh is unusable.
    #[error(transparent)]
    Mesh(#[from] MeshError),
}

/// Keeps one garment outside another (see the module docs). Built once per pair of
/// garments; [`Layering::apply`] allocates nothing once its state is made.
#[derive(Clone, Debug)]
pub struct Layering {
    kind: Kind,
}

/// How a [`Layering`] keeps its garments apart.
#[derive(Clone, Debug)]
enum Kind {
    /// The outer garment pushed out over the inner one.
    Push(Box<Push>),
    /// The inner garment tucked in under the outer one.
    Tuck(Tuck),
}

/// One avatar's state of a [`Layering`]: where each walk ended last frame (so that
/// this frame's takes a step or two).
#[derive(Clone, Debug, Default)]
pub struct LayerState {
    /// Per outer candidate, its nearest inner vertex; per inner candidate, its nearest
    /// outer vertex.
    outer_near: Vec<u32>,
    inner_near: Vec<u32>,
}

/// Per-thread working memory of [`Layering::apply`].
#[derive(Clone, Debug, Default)]
pub struct LayerScratch {
    normals: Vec<Vec3>,
}

/// The draped shape of the example nearest the rest pose (every bake includes the rest
/// pose), else the garment's rest shape.
fn rest_shape(db: &Database) -> &[Vec3] {
    db.examples
        .iter()
        .map(|e| {
            let th = crate::skeleton::theta(&crate::skeleton::Pose::rest(), &e.pose);
            (th.iter().map(|t| t * t).sum::<f32>(), &e.positions)
        })
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map_or(&db.garment.rest, |(_, p)| p)
}

impl Layering {
    /// The vertices of `outer` and `inner` that may come near each other, and which of
    /// the two gives way (see the module docs).
    pub fn new(
        inner: &Database,
        outer: &Database,
        params: &LayerParams,
    ) -> Result<Self, LayerError> {
        if body_hash(&inner.body) != body_hash(&outer.body) {
            return Err(LayerError::DifferentBodies {
                inner: inner.garment.name.clone(),
                outer: outer.garment.name.clone(),
            });
        }
        if !(params.clearance.is_finite() && (0.0..=0.05).contains(&params.clearance)) {
            return Err(LayerError::BadParameter("clearance (0 to 0.05 m)"));
        }
        if !(params.reach.is_finite() && (0.0..=0.2).contains(&params.reach)) {
            return Err(LayerError::BadParameter("reach (0 to 0.2 m)"));
        }
        let (inner_rest, outer_rest) = (rest_shape(inner), rest_shape(outer));
        let tuck = match params.gives_way {
            GivesWay::Outer => false,
            GivesWay::Inner => true,
            GivesWay::Looser => {
                let body = NearestVertex::build(&inner.body.positions)?;
                let within = 2.0 * params.reach;
                ease(&body, inner_rest, outer_rest, within)?
                    > ease(&body, outer_rest, inner_rest, within)?
            }
        };
        let kind = if tuck {
            Kind::Tuck(Tuck::new(inner_rest, outer, outer_rest, params)?)
        } else {
            Kind::Push(Box::new(Push::new(
                inner, inner_rest, outer, outer_rest, params,
            )?))
        };
        Ok(Self { kind })
    }

    /// Number of vertices of the garment that gives way examined each frame (0: the two
    /// garments never come near each other, and [`Layering::apply`] does nothing).
    pub fn len(&self) -> usize {
        match &self.kind {
            Kind::Push(p) => p.len(),
            Kind::Tuck(t) => t.len(),
        }
    }

    /// Whether no vertex of the garment that gives way comes near the other.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the inner garment gives way, tucked in under the outer one, rather than
    /// the outer pushed out over it.
    pub fn tucks(&self) -> bool {
        matches!(self.kind, Kind::Tuck(_))
    }

    /// Keeps this frame's syntheses of the two garments (`inner`, `outer`: canonical
    /// frame, metres) one inside the other by moving the one that gives way: the outer
    /// pushed out to at least the clearance outside the inner, or the inner tucked in
    /// under the outer (see the module docs). `state` is the avatar's (a fresh one for
    /// a fresh avatar). Returns how many moves it made (outer vertices pushed and outer
    /// triangles lifted, or inner vertices tucked in): 0 when nothing moved.
    ///
    /// # Panics
    /// If the slices do not have the garments' vertex counts (a programming error).
    #[track_caller]
    pub fn apply(
        &self,
        inner: &mut [Vec3],
        outer: &mut [Vec3],
        state: &mut LayerState,
        scratch: &mut LayerScratch,
    ) -> usize {
        match &self.kind {
            Kind::Push(p) => p.apply(inner, outer, state, scratch),
            Kind::Tuck(t) => t.apply(inner, outer, scratch),
        }
    }
}

/// Mean distance, metres, from the body (its nearest vertex, `body`) of the vertices
/// of `rest` within `within` of `other` (another garment at rest): how much room the
/// garment has where the two overlap; 0 where none is that near.
fn ease(
    body: &NearestVertex,
    rest: &[Vec3],
    other: &[Vec3],
    within: f32,
) -> Result<f32, MeshError> {
    let other = NearestVertex::build(other)?;
    let (sum, count) = rest
        .iter()
        .filter(|&&p| other.nearest(p).1 <= within)
        .fold((0.0f64, 0usize), |(s, n), &p| {
            (s + f64::from(body.nearest(p).1), n + 1)
        });
    Ok(if count == 0 {
        0.0
    } else {
        (sum / count as f64) as f32
    })
}

/// Area-weighted unit normals of `positions` at `vertices`, from the `triangles` around
/// them, into `out` (resized to every vertex; zero elsewhere): the push's and the
/// tuck's normals of the part of a garment where the other one lies.
fn zone_normals(
    positions: &[Vec3],
    triangles: impl Iterator<Item = [u32; 3]>,
    vertices: &[u32],
    out: &mut Vec<Vec3>,
) {
    out.clear();
    out.resize(positions.len(), Vec3::ZERO);
    for t in triangles {
        let [a, b, c] = t.map(|i| i as usize);
        let face = (positions[b] - positions[a]).cross(positions[c] - positions[a]);
        out[a] += face;
        out[b] += face;
        out[c] += face;
    }
    for &v in vertices {
        out[v as usize] = out[v as usize].normalize_or_zero();
    }
}

mod push;
#[cfg(test)]
mod tests;
mod tuck;
