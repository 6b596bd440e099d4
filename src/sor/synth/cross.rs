//! Cross-checked distances: each example's distance weights scaled by how well its rig
//! actually carries its garment to its neighbours' poses.
//!
//! SOR Eq. 9's U^J measures an example's rig against the simulator's sensitivities,
//! that is for infinitesimal motions; pooled over the examples (Wu Eq. 7's form,
//! [`super::Distance::Pooled`]) it ranks the examples by pose alone. Neither sees a rig
//! that is right near its own pose and wrong a few tens of degrees away: a hem whose
//! remote bone is a raised arm (SOR Eq. 5–8 fit α ≈ 1 there, since the arm lifts that
//! cloth) is thrown about with the arm once the arm is elsewhere. The database already
//! holds the measurement that shows it: every other example is a pose with its
//! simulated garment. Here each example J is skinned with its own rig (SOR Eq. 1) to
//! the poses of the examples nearest it by its own distance, and per region g
//!
//!   c_g^J = Σ_I e_g(J → I)² / Σ_I D_g^J(p^I),
//!
//! with e_g the ŵ-weighted RMS distance (m) from example I's garment over the region's
//! vertices: how much error a unit of the example's distance turns out to cost. The
//! example's distance weights in that region are then multiplied by
//! (c_g^J / median_J c_g^J)^β, clamped to [[`MIN_SCALE`], [`MAX_SCALE`]], so an
//! example whose rig carries its cloth worse than its peers' is kept to poses nearer
//! its own (its weight, (D + ε)^−k, falls as the scale's k-th power); at its own pose,
//! where its distance is zero, it still reproduces itself. Dividing by the region's
//! median keeps the distances' overall size, and so ε and the damping, as they were.
//!
//! Ours, not the papers' (`docs/notes/sor.md`, *Cross-checked distances*); computed
//! once when a database is loaded (a few hundred skinnings of the garment), so the
//! runtime's cost is unchanged.

use glam::Vec3;
use rayon::prelude::*;

use super::Synthesizer;
use super::distance::weighted_sum;
use crate::skeleton::{DOF_COUNT, theta_into};

/// How many of its nearest examples (by its own distance in each region, SOR Eq. 9)
/// each example is checked against: the poses where it would carry weight.
pub(super) const NEIGHBOURS: usize = 8;

/// The smallest and largest scale one example's distance weights may be given. At
/// least 1: the check keeps a rig that carries its cloth worse than its peers' nearer
/// its own pose, and pulls none further out (on CMU 131_03 held out, letting the
/// better ones reach further too cost 0.03 cm of mean error).
pub(super) const MIN_SCALE: f32 = 1.0;
/// See [`MIN_SCALE`].
pub(super) const MAX_SCALE: f32 = 8.0;

impl Synthesizer<'_> {
    /// The scale of every example's distance weights in every region (`examples ×
    /// regions`, row-major), `beta` the exponent (0: all ones). All ones when the
    /// database has fewer than three examples (nothing to compare one with).
    pub(super) fn cross_scales(&self, beta: f32) -> Vec<f32> {
        let db = self.db;
        let (n, g, nv) = (db.examples.len(), db.region_count(), db.vertex_count());
        let mut scales = vec![1.0f32; n * g];
        if n < 3 || g == 0 || nv == 0 || !beta.is_finite() || beta <= 0.0 {
            return scales;
        }
        // per region, the sum of the vertices' region weights ŵ (the mean's divisor)
        let mut region_total = vec![0f64; g];
        for w in db.garment.region_weights.chunks_exact(g) {
            for (t, w) in region_total.iter_mut().zip(w) {
                *t += f64::from(*w);
            }
        }
        // c_g^J for every example, in parallel (each needs its own output buffer)
        let ratios: Vec<Vec<f64>> = (0..n)
            .into_par_iter()
            .map_init(
                || vec![Vec3::ZERO; nv],
                |out, j| self.cross_ratios(j, &region_total, out),
            )
            .collect();
        for r in 0..g {
            let mut column: Vec<f64> = ratios
                .iter()
                .map(|c| c[r])
                .filter(|c| c.is_finite() && *c > 0.0)
                .collect();
            if column.is_empty() {
                continue;
            }
            column.sort_by(f64::total_cmp);
            let median = column[column.len() / 2];
            for (j, c) in ratios.iter().enumerate() {
                let c = c[r];
                if c.is_finite() && c > 0.0 {
                    let s = ((c / median) as f32).powf(beta);
                    scales[j * g + r] = s.clamp(MIN_SCALE, MAX_SCALE);
                }
            }
        }
        scales
    }

    /// c_g^J of example `j` in every region (NaN where it has no neighbour at a
    /// distance above zero); `out` is scratch of the garment's length.
    fn cross_ratios(&self, j: usize, region_total: &[f64], out: &mut [Vec3]) -> Vec<f64> {
        let db = self.db;
        let (n, g) = (db.examples.len(), db.region_count());
        let me = &db.examples[j];
        // every other example's distance from this one, per region
        let mut th = [0f32; DOF_COUNT];
        let mut dist = vec![0f64; n * g];
        for (i, other) in db.examples.iter().enumerate() {
            theta_into(&me.pose, &other.pose, &mut th);
            let th2 = th.map(|t| t * t);
            for r in 0..g {
                let row = (j * g + r) * DOF_COUNT;
                let u = &self.distance_weights[row..row + DOF_COUNT];
                dist[i * g + r] = f64::from(weighted_sum(u, &th2));
            }
        }
        // the neighbours of any region: skin once per neighbour, measure every region
        let mut near: Vec<usize> = Vec::new();
        let mut order: Vec<usize> = (0..n).filter(|&i| i != j).collect();
        for r in 0..g {
            order.sort_by(|&a, &b| dist[a * g + r].total_cmp(&dist[b * g + r]));
            near.extend(order.iter().take(NEIGHBOURS));
        }
        near.sort_unstable();
        near.dedup();
        let mut err2 = vec![vec![0f64; g]; n];
        for &i in &near {
            let other = &db.examples[i];
            self.skin_example(j, &other.pose, out);
            let e = &mut err2[i];
            for (v, (a, b)) in out.iter().zip(&other.positions).enumerate() {
                let d2 = f64::from((*a - *b).length_squared());
                for (r, e) in e.iter_mut().enumerate() {
                    *e += f64::from(db.garment.region_weights[v * g + r]) * d2;
                }
            }
        }
        (0..g)
            .map(|r| {
                order.sort_by(|&a, &b| dist[a * g + r].total_cmp(&dist[b * g + r]));
                let (mut num, mut den) = (0f64, 0f64);
                for &i in order.iter().take(NEIGHBOURS) {
                    num += err2[i][r] / region_total[r].max(1e-12);
                    den += dist[i * g + r];
                }
                if den > 0.0 { num / den } else { f64::NAN }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::{AvatarState, Scratch};
    use super::*;
    use crate::sor::{Database, SynthParams};

    fn small_db() -> Database {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/db/v1/small.ccdb");
        Database::read(&path).expect("golden database")
    }

    /// The scales of `db` with the default settings otherwise.
    fn scales(db: &Database, beta: f32) -> Vec<f32> {
        let params = SynthParams {
            cross_scale: 0.0,
            ..SynthParams::default()
        };
        Synthesizer::new(db, params).cross_scales(beta)
    }

    #[test]
    fn scales_are_bounded_and_off_at_zero() {
        let db = small_db();
        let s = scales(&db, 0.5);
        assert_eq!(s.len(), db.examples.len() * db.region_count());
        assert!(
            s.iter().all(|s| (MIN_SCALE..=MAX_SCALE).contains(s)),
            "{s:?}"
        );
        // the regions a T-shirt covers are measured, so not every scale is the default
        assert!(s.iter().any(|s| (s - 1.0).abs() > 1e-3), "{s:?}");
        assert!(scales(&db, 0.0).iter().all(|s| *s == 1.0));
        assert!(scales(&db, f32::NAN).iter().all(|s| *s == 1.0));
        let mut two = db.clone();
        two.examples.truncate(2);
        assert!(scales(&two, 1.0).iter().all(|s| *s == 1.0));
    }

    /// An example whose rig moves its hips' cloth with the right wrist (α = 1: SOR
    /// Eq. 5 with a remote bone no cloth there follows) reproduces its own pose, where
    /// no bone moves, but throws that cloth about at its neighbours' poses: its
    /// distance weights in that region are scaled up above every other example's, and
    /// so it weighs less at a pose between two examples than it did.
    #[test]
    fn an_example_that_carries_its_cloth_badly_is_kept_nearer_its_pose() {
        let db = small_db();
        let g = db.region_count();
        let hips = 0;
        assert_eq!(db.garment.region_names[hips], "hips_and_legs");
        let bad = 2;
        let mut worse = db.clone();
        let ex = &mut worse.examples[bad];
        for v in 0..ex.positions.len() {
            if db.garment.region_weights[v * g + hips] > 0.5 {
                ex.remote_bone[v] = crate::skeleton::JointId::RIGHT_WRIST.0;
                ex.alpha[v] = 1.0;
            }
        }
        let before = scales(&db, 0.5);
        let after = scales(&worse, 0.5);
        let column =
            |s: &[f32]| -> Vec<f32> { (0..db.examples.len()).map(|j| s[j * g + hips]).collect() };
        let (b, a) = (column(&before), column(&after));
        assert!(a[bad] > 1.5 * b[bad], "before {b:?}, after {a:?}");
        for (j, s) in a.iter().enumerate() {
            if j != bad {
                assert!(a[bad] > *s, "example {j} {s} not below {}: {a:?}", a[bad]);
            }
        }
        // at a pose halfway between two examples, the bad one's share of the hips falls
        let pose = db.examples[1].pose.slerp(&db.examples[bad].pose, 0.5);
        let share = |db: &Database, cross_scale: f32| -> f32 {
            let params = SynthParams {
                cross_scale,
                ..SynthParams::default()
            };
            let synth = Synthesizer::new(db, params);
            let (mut state, mut scratch) = (AvatarState::new(), Scratch::default());
            let mut out = vec![Vec3::ZERO; db.vertex_count()];
            synth.synthesize(&mut state, &mut scratch, &pose, 0.0, &mut out);
            let k = synth.params.top_k.min(db.examples.len());
            scratch.top[hips * k..(hips + 1) * k]
                .iter()
                .filter(|(j, _)| *j as usize == bad)
                .map(|(_, w)| *w)
                .sum()
        };
        let (off, on) = (share(&worse, 0.0), share(&worse, 0.5));
        assert!(on < 0.9 * off, "the bad example's weight {off} → {on}");
    }
}
