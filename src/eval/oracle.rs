//! Where SOR's error lies (`eval --oracle`): against the same ground truth, the best
//! that any blend of the examples' SOR skinning (SOR Eq. 1) could do, per region and
//! per vertex. If the best blend is far below SOR, the weights (SOR Eq. 9–10) are what
//! loses accuracy; if it is close, the skinning of the examples is.

use glam::Vec3;

use crate::sor::{Database, Synthesizer};

/// Mean errors of the oracles over the evaluated frames, metres.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct OracleSummary {
    /// SOR without penetration handling (what the oracles are comparable with).
    pub sor_unprojected: f32,
    /// Per region, the convex blend of all examples' skinning closest to the truth
    /// (least squares): the floor of any per-region weighting, SOR's included.
    pub best_blend: f32,
    /// Per region, the one example whose skinning is closest to the truth.
    pub best_example: f32,
    /// Per vertex, the example whose skinning is closest there (a floor for any
    /// weighting at all).
    pub best_per_vertex: f32,
}

/// Per-frame work of the oracles: every example skinned to the frame's pose.
pub(super) struct Oracle<'a> {
    synth: &'a Synthesizer<'a>,
    /// Vertices of each region (each vertex in its region of largest weight).
    regions: Vec<Vec<usize>>,
    skinned: Vec<Vec<Vec3>>,
    sums: [f64; 3],
    frames: usize,
}

impl<'a> Oracle<'a> {
    pub(super) fn new(db: &Database, synth: &'a Synthesizer<'a>) -> Self {
        let (n, g) = (db.vertex_count(), db.region_count().max(1));
        let mut regions = vec![Vec::new(); g];
        for v in 0..n {
            let row = db
                .garment
                .region_weights
                .get(v * g..(v + 1) * g)
                .unwrap_or(&[]);
            let r = row
                .iter()
                .enumerate()
                .max_by(|a, b| a.1.total_cmp(b.1))
                .map_or(0, |(r, _)| r);
            regions[r].push(v);
        }
        Self {
            synth,
            regions,
            skinned: vec![vec![Vec3::ZERO; n]; db.examples.len()],
            sums: [0.0; 3],
            frames: 0,
        }
    }

    /// Adds a frame: `pose` canonical, `truth` its ground truth.
    pub(super) fn push(&mut self, pose: &crate::skeleton::Pose, truth: &[Vec3]) {
        for (j, out) in self.skinned.iter_mut().enumerate() {
            self.synth.skin_example(j, pose, out);
        }
        let n = truth.len().max(1) as f64;
        let mut blend = 0.0;
        let mut example = 0.0;
        for vs in &self.regions {
            if vs.is_empty() {
                continue;
            }
            let w = best_blend(&self.skinned, vs, truth);
            for &v in vs {
                let y: Vec3 = self
                    .skinned
                    .iter()
                    .zip(&w)
                    .map(|(s, &w)| s[v] * w as f32)
                    .sum();
                blend += f64::from((y - truth[v]).length());
            }
            example += self
                .skinned
                .iter()
                .map(|s| {
                    vs.iter()
                        .map(|&v| f64::from((s[v] - truth[v]).length()))
                        .sum::<f64>()
                })
                .fold(f64::INFINITY, f64::min);
        }
        let per_vertex: f64 = (0..truth.len())
            .map(|v| {
                self.skinned
                    .iter()
                    .map(|s| f64::from((s[v] - truth[v]).length()))
                    .fold(f64::INFINITY, f64::min)
            })
            .sum();
        self.sums[0] += blend / n;
        self.sums[1] += example / n;
        self.sums[2] += per_vertex / n;
        self.frames += 1;
    }

    /// The means, with SOR's own unprojected mean error `sor_unprojected`.
    pub(super) fn summary(&self, sor_unprojected: f32) -> OracleSummary {
        let f = self.frames.max(1) as f64;
        OracleSummary {
            sor_unprojected,
            best_blend: (self.sums[0] / f) as f32,
            best_example: (self.sums[1] / f) as f32,
            best_per_vertex: (self.sums[2] / f) as f32,
        }
    }
}

/// The weights w ≥ 0, Σ w = 1 minimising Σ_{v ∈ vs} |Σ_j w_j y_j(v) − t(v)|²
/// (accelerated projected gradient on the examples' Gram matrix).
fn best_blend(skinned: &[Vec<Vec3>], vs: &[usize], truth: &[Vec3]) -> Vec<f64> {
    let m = skinned.len();
    let mut gram = vec![0.0f64; m * m];
    let mut c = vec![0.0f64; m];
    for a in 0..m {
        for b in a..m {
            let s: f64 = vs
                .iter()
                .map(|&v| f64::from(skinned[a][v].dot(skinned[b][v])))
                .sum();
            gram[a * m + b] = s;
            gram[b * m + a] = s;
        }
        c[a] = vs
            .iter()
            .map(|&v| f64::from(skinned[a][v].dot(truth[v])))
            .sum();
    }
    // step 1/L, L ≥ the largest eigenvalue (Gershgorin)
    let lip = (0..m)
        .map(|a| {
            gram[a * m..(a + 1) * m]
                .iter()
                .map(|g| g.abs())
                .sum::<f64>()
        })
        .fold(1e-12, f64::max);
    let mut w = vec![1.0 / m as f64; m];
    let mut z = w.clone();
    let mut t = 1.0f64;
    let mut next = vec![0.0f64; m];
    for _ in 0..2000 {
        for (a, x) in next.iter_mut().enumerate() {
            let grad = (0..m).map(|b| gram[a * m + b] * z[b]).sum::<f64>() - c[a];
            *x = z[a] - grad / lip;
        }
        project_to_simplex(&mut next);
        let t_next = (1.0 + (1.0 + 4.0 * t * t).sqrt()) / 2.0;
        for a in 0..m {
            z[a] = next[a] + (t - 1.0) / t_next * (next[a] - w[a]);
        }
        std::mem::swap(&mut w, &mut next);
        t = t_next;
    }
    w
}

/// Euclidean projection onto {w ≥ 0, Σ w = 1}.
fn project_to_simplex(w: &mut [f64]) {
    let mut s: Vec<f64> = w.to_vec();
    s.sort_by(|a, b| b.total_cmp(a));
    let (mut acc, mut theta) = (0.0, 0.0);
    for (i, &x) in s.iter().enumerate() {
        acc += x;
        let t = (acc - 1.0) / (i + 1) as f64;
        if x - t > 0.0 {
            theta = t;
        }
    }
    for x in w.iter_mut() {
        *x = (*x - theta).max(0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn projection_lands_on_the_simplex() {
        let mut w = [0.5, 2.0, -1.0, 0.2];
        project_to_simplex(&mut w);
        assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-12, "{w:?}");
        assert!(w.iter().all(|&x| x >= 0.0));
        // a point already on the simplex stays
        let mut on = [0.25, 0.75, 0.0];
        project_to_simplex(&mut on);
        assert_eq!(on, [0.25, 0.75, 0.0]);
    }

    /// The truth is a known blend of three "examples": the best blend finds it.
    #[test]
    fn best_blend_recovers_a_known_mix() {
        let n = 40;
        let ex: Vec<Vec<Vec3>> = (0..3)
            .map(|j| {
                (0..n)
                    .map(|v| {
                        // independent shapes (no example a blend of the others)
                        let x = v as f32 * 0.1 * (j + 1) as f32;
                        Vec3::new(x.sin(), x.cos(), (x * 0.7).sin() * x)
                    })
                    .collect()
            })
            .collect();
        let mix = [0.2, 0.0, 0.8];
        let truth: Vec<Vec3> = (0..n)
            .map(|v| (0..3).map(|j| ex[j][v] * mix[j] as f32).sum())
            .collect();
        let vs: Vec<usize> = (0..n).collect();
        let w = best_blend(&ex, &vs, &truth);
        for j in 0..3 {
            assert!((w[j] - mix[j]).abs() < 1e-3, "{w:?}");
        }
    }
}
