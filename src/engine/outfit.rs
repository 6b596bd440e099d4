//! Outfits: an avatar wears one garment or several at once (pants, and a T-shirt over
//! them). Each garment of an outfit is a layer with its own SOR synthesis and codec
//! stream; after synthesis every layer is kept outside the layers under it, the outer
//! pushed out or the inner tucked in ([`Layering`], built once per pair of garments the
//! engine streams), and all layers go out in one `frame` message per tick with one
//! frame number.

use std::sync::Arc;

use glam::Vec3;

use super::{EngineError, Garment};
use crate::codec::{Effort, Encoder};
use crate::protocol::{MAX_OUTFIT, check_outfit};
use crate::sor::{AvatarState, LayerParams, LayerScratch, LayerState, Layering, body_hash};

/// Hashed after the avatar id's bytes, with the layer's index, into the stream id of
/// a layer over the first ("LAY" and the index: above any byte, so that no avatar id
/// hashes the same words).
const LAYER_MARK: u32 = 0x4C41_5900;

/// One garment of an avatar's outfit: its damping, codec stream and buffers.
pub(super) struct Layer {
    /// Index into the engine's garments.
    pub(super) garment: usize,
    pub(super) state: AvatarState,
    pub(super) encoder: Encoder,
    /// This tick's synthesis (canonical frame, metres), layered.
    pub(super) out: Vec<Vec3>,
    pub(super) delta: Vec<u8>,
    pub(super) key: Vec<u8>,
    /// Its layering state over each layer under it (inner to outer).
    pub(super) over: Vec<LayerState>,
}

impl Layer {
    /// A fresh layer of garment `index` on the stream of avatar `id` (its first frame
    /// is a keyframe). Each layer's stream id differs, the first's being the avatar's
    /// as it was before outfits.
    pub(super) fn new(id: &str, layer: usize, index: usize, g: &Garment, effort: Effort) -> Self {
        let stream = crate::codec::format::word_hash(
            id.bytes()
                .map(u32::from)
                .chain((layer > 0).then_some(LAYER_MARK | layer as u32)),
        );
        let mut encoder = Encoder::new(Arc::clone(&g.setup), stream);
        encoder.set_effort(effort);
        Layer {
            garment: index,
            state: AvatarState::new(),
            encoder,
            out: vec![Vec3::ZERO; g.db.vertex_count()],
            delta: Vec::new(),
            key: Vec::new(),
            over: vec![LayerState::default(); layer],
        }
    }
}

/// The layerings of every ordered pair of garments baked for the same body.
pub(super) struct Layerings {
    count: usize,
    /// `[inner * count + outer]`.
    table: Vec<Option<Layering>>,
}

impl Layerings {
    /// The layerings of `garments` and, in the [`Wardrobe`], why any pair cannot be
    /// worn together.
    pub(super) fn new(garments: &[Garment], params: &LayerParams) -> (Self, Wardrobe) {
        let count = garments.len();
        let (mut table, mut refusals) = (Vec::new(), Vec::new());
        for inner in garments {
            for outer in garments {
                let made = if std::ptr::eq(inner, outer) {
                    Err(format!("an outfit names {:?} twice", inner.name))
                } else if body_hash(&inner.db.body) != body_hash(&outer.db.body) {
                    Err(format!(
                        "{:?} and {:?} were baked for different bodies",
                        inner.name, outer.name
                    ))
                } else {
                    Layering::new(&inner.db, &outer.db, params).map_err(|e| e.to_string())
                };
                refusals.push(made.as_ref().err().cloned());
                table.push(made.ok());
            }
        }
        let names = garments.iter().map(|g| g.name.clone()).collect();
        (Self { count, table }, Wardrobe { names, refusals })
    }

    /// Layers every garment of `layers` (inner to outer, each synthesised this tick)
    /// over each one under it: for each layer from the second out, against each layer
    /// under it from the innermost, the one of the pair that gives way moves
    /// ([`crate::sor::GivesWay`]: the outer pushed out, or the inner tucked in). A
    /// layer tucked in under a later one may then come nearer a layer under it.
    pub(super) fn apply(&self, layers: &mut [Layer], scratch: &mut LayerScratch) {
        for outer in 1..layers.len() {
            let (under, over) = layers.split_at_mut(outer);
            let top = &mut over[0];
            for (inner, state) in under.iter_mut().zip(top.over.iter_mut()) {
                if let Some(l) = &self.table[inner.garment * self.count + top.garment] {
                    l.apply(&mut inner.out, &mut top.out, state, scratch);
                }
            }
        }
    }
}

/// The garments an engine streams and which of them can be worn together: what a
/// connection checks a `wear` message against before the engine sees it.
#[derive(Clone, Debug)]
pub struct Wardrobe {
    names: Vec<String>,
    /// `[inner * count + outer]`: why that pair cannot be worn together, if it cannot.
    refusals: Vec<Option<String>>,
}

impl Wardrobe {
    /// The garments' names, the default first.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The garments (indices, in [`Wardrobe::names`] order) of the outfit `names`,
    /// inner to outer: refused by name when it is empty, longer than [`MAX_OUTFIT`],
    /// names a garment twice ([`EngineError::BadOutfit`]) or one not streamed
    /// ([`EngineError::UnknownGarment`]), or puts together garments that cannot be
    /// layered (baked for different bodies).
    pub fn resolve(&self, names: &[impl AsRef<str>]) -> Result<Vec<usize>, EngineError> {
        let owned: Vec<String> = names.iter().map(|n| n.as_ref().to_string()).collect();
        check_outfit(&owned).map_err(EngineError::BadOutfit)?;
        debug_assert!(owned.len() <= MAX_OUTFIT);
        let outfit = owned
            .iter()
            .map(|name| {
                self.names
                    .iter()
                    .position(|g| g == name)
                    .ok_or_else(|| EngineError::UnknownGarment(name.clone(), self.names.join(", ")))
            })
            .collect::<Result<Vec<usize>, _>>()?;
        let count = self.names.len();
        for (i, &outer) in outfit.iter().enumerate() {
            for &inner in &outfit[..i] {
                if let Some(why) = &self.refusals[inner * count + outer] {
                    return Err(EngineError::BadOutfit(why.clone()));
                }
            }
        }
        Ok(outfit)
    }
}

thread_local! {
    static SCRATCH: std::cell::RefCell<LayerScratch> = std::cell::RefCell::new(LayerScratch::default());
}

/// [`Layerings::apply`] with this thread's scratch (kept between calls).
pub(super) fn layer(layerings: &Layerings, layers: &mut [Layer]) {
    if layers.len() > 1 {
        SCRATCH.with(|s| layerings.apply(layers, &mut s.borrow_mut()));
    }
}
