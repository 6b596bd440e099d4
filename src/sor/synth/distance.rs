//! The distance weights U of SOR Eq. 9, per example or pooled (Wu Eq. 7's form), and
//! the weighted sum of squared joint-angle differences they give a distance.

use super::super::db::Database;
use crate::skeleton::DOF_COUNT;

/// Which distance weights U the per-region distances D_g^J = Σ_m U_{g,m} Θ_m² use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Distance {
    /// Each example's own U^J_{g,m}, SOR Eq. 9 as written: the error of that example's
    /// rig along each degree of freedom.
    PerExample,
    /// One U_{g,m} per region shared by every example, the mean of the examples'
    /// U^J_{g,m}: SOR Eq. 9's content in the form of Wu Eq. 7 (a per-region metric of
    /// the joints that move that region's cloth). One example's rig errors are noisy
    /// (they follow where its cloth happened to fold); pooled, they rank the examples
    /// by pose alone. On CMU 131_03 held out: 1.94 cm mean error against 2.14 with
    /// `k` = 3 (`docs/notes/sor.md`, *Where SOR's error lies*).
    #[default]
    Pooled,
}

/// The distance weights of every example (`examples × regions × 66`) for `distance`;
/// pooled, with `own_share` (0–1, clamped) of each example's own mixed in (see
/// [`super::SynthParams::own_share`]).
pub(super) fn distance_weights(db: &Database, distance: Distance, own_share: f32) -> Vec<f32> {
    let per_example: Vec<f32> = db
        .examples
        .iter()
        .flat_map(|e| e.distance_weights.iter().copied())
        .collect();
    match distance {
        Distance::PerExample => per_example,
        Distance::Pooled => {
            let len = db.region_count() * DOF_COUNT;
            let ne = db.examples.len().max(1);
            let mut mean = vec![0f64; len];
            for e in &db.examples {
                for (m, u) in mean.iter_mut().zip(&e.distance_weights) {
                    *m += f64::from(*u);
                }
            }
            let mean: Vec<f32> = mean.iter().map(|m| (m / ne as f64) as f32).collect();
            let s = if own_share.is_finite() {
                own_share.clamp(0.0, 1.0)
            } else {
                0.0
            };
            per_example
                .chunks_exact(len.max(1))
                .flat_map(|own| {
                    own.iter()
                        .zip(&mean)
                        .map(move |(u, m)| (1.0 - s) * m + s * u)
                })
                .collect()
        }
    }
}

/// Σ_m u_m t_m over the degrees of freedom, summed in eight independent lanes (a
/// single running sum is a chain of 66 dependent additions; the lanes vectorise).
#[inline]
pub(super) fn weighted_sum(u: &[f32], t: &[f32; DOF_COUNT]) -> f32 {
    let mut lanes = [0f32; 8];
    let (uc, tc) = (u.chunks_exact(8), t.chunks_exact(8));
    let tail: f32 = uc
        .remainder()
        .iter()
        .zip(tc.remainder())
        .map(|(u, t)| u * t)
        .sum();
    for (u, t) in uc.zip(tc) {
        for i in 0..8 {
            lanes[i] += u[i] * t[i];
        }
    }
    lanes.iter().sum::<f32>() + tail
}
