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
    /// The vertex at that largest distance (the first, on a tie).
    pub worst: usize,
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
    (0..db.examples.len())
        .filter_map(|j| left_out_with(&synth, &mut scratch, j, &mut out))
        .collect()
}

/// Example `example` of `db` as [`leave_one_out`] predicts it: the garment SOR
/// synthesises at the example's pose from the other examples (canonical frame, metres)
/// into `out` (the database's vertex count long), and how far it lies from the
/// example's own garment. `None` (and `out` untouched) when the database has no such
/// example, fewer than two examples, or `out` is not the garment's length.
pub fn left_out(
    db: &Database,
    params: &SynthParams,
    example: usize,
    out: &mut [Vec3],
) -> Option<LeftOut> {
    if db.examples.len() < 2 {
        return None;
    }
    let synth = Synthesizer::new(db, params.clone());
    left_out_with(&synth, &mut Scratch::default(), example, out)
}

fn left_out_with(
    synth: &Synthesizer<'_>,
    scratch: &mut Scratch,
    example: usize,
    out: &mut [Vec3],
) -> Option<LeftOut> {
    let ex = synth.db.examples.get(example)?;
    if out.len() != ex.positions.len() {
        return None;
    }
    let mut state = AvatarState::new();
    synth.synthesize_without(&mut state, scratch, &ex.pose, 0.0, Some(example), out);
    let (mut sum, mut max, mut worst) = (0f64, 0f32, 0);
    for (i, (a, b)) in out.iter().zip(&ex.positions).enumerate() {
        let d = (*a - *b).length();
        sum += f64::from(d);
        if d > max {
            (max, worst) = (d, i);
        }
    }
    Some(LeftOut {
        example,
        mean: (sum / out.len().max(1) as f64) as f32,
        max,
        worst,
    })
}
