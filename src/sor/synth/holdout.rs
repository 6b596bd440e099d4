//! Leave-one-out: how well the other examples predict each example at its own pose.
//! A check of a database that needs no ground truth (`eval` simulates one, minutes),
//! run in well under a second: an example that settled into a fold its neighbours do
//! not share (a buckled state the bake's path to its pose left behind) is predicted
//! worst. Between two bakes of the default T-shirt the mean over the examples moved
//! with `eval`'s mean error (`docs/notes/sor.md`).

use glam::Vec3;

use super::{AvatarState, Scratch, SynthParams, Synthesizer};
use crate::sor::Database;

/// One example predicted by the others.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LeftOut {
    /// The example's index in the database.
    pub example: usize,
    /// Mean distance, metres, between the example's garment and SOR's synthesis at the
    /// example's pose from the other examples alone (canonical frame).
    pub mean: f32,
    /// The largest such distance over the garment's vertices, metres.
    pub max: f32,
}

/// Every example of `db` synthesised at its own pose from the others (SOR §5 with
/// `params`, the example given no weight, no damping), against its own garment. Empty
/// when the database has fewer than two examples (nothing is left to predict from).
/// With pooled distance weights ([`super::Distance::Pooled`]) the pool still includes
/// the example left out: it is a mean over all of them, so one example moves it little.
pub fn leave_one_out(db: &Database, params: &SynthParams) -> Vec<LeftOut> {
    if db.examples.len() < 2 {
        return Vec::new();
    }
    let synth = Synthesizer::new(db, params.clone());
    let mut scratch = Scratch::default();
    let mut out = vec![Vec3::ZERO; db.vertex_count()];
    db.examples
        .iter()
        .enumerate()
        .map(|(j, ex)| {
            let mut state = AvatarState::new();
            synth.synthesize_without(&mut state, &mut scratch, &ex.pose, 0.0, Some(j), &mut out);
            let (mut sum, mut max) = (0f64, 0f32);
            for (a, b) in out.iter().zip(&ex.positions) {
                let d = (*a - *b).length();
                sum += f64::from(d);
                max = max.max(d);
            }
            LeftOut {
                example: j,
                mean: (sum / out.len().max(1) as f64) as f32,
                max,
            }
        })
        .collect()
}
