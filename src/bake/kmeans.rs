//! Weighted K-means over candidate poses (Wu §3.6): the distance between two poses is
//! Σ_L ω_L ‖θ_L‖² with joint weights ω_L = Σ_y Σ_{m∈L} ‖s_{y,m}‖ from the garment's
//! sensitivities (Wu Eq. 11), so joints that move the cloth count more. Each cluster is
//! represented by its member nearest to the centre (a real pose, never an average of
//! incompatible rotations).

use crate::skeleton::{JOINT_COUNT, Pose};

use super::poses::{Rng, pose_coordinates};

/// Joint weights of Wu Eq. 11 from a sensitivity set (`values[m][v]`).
pub fn joint_weights(sensitivity: &[Vec<glam::DVec3>]) -> [f32; JOINT_COUNT] {
    let mut w = [0.0f32; JOINT_COUNT];
    for (m, s) in sensitivity.iter().enumerate() {
        w[m / 3] += s.iter().map(|v| v.length() as f32).sum::<f32>();
    }
    let max = w.iter().copied().fold(0.0f32, f32::max).max(1e-12);
    w.map(|x| x / max)
}

fn dist(a: &[f32], b: &[f32], w: &[f32; JOINT_COUNT]) -> f32 {
    let mut d = 0.0;
    for j in 0..JOINT_COUNT {
        let (x, y, z) = (
            a[3 * j] - b[3 * j],
            a[3 * j + 1] - b[3 * j + 1],
            a[3 * j + 2] - b[3 * j + 2],
        );
        d += w[j] * (x * x + y * y + z * z);
    }
    d
}

/// One pose [`representatives`] chose: which of its inputs it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chosen {
    /// The pose at this index of `fixed`, kept as given.
    Fixed(usize),
    /// The pose at this index of `pool`.
    Pool(usize),
}

/// Picks `k` representative poses from `pool` (k-means++ seeding, Lloyd iterations).
/// The first of `fixed` poses are kept as given and act as fixed centres (e.g. the rest
/// pose). Returns which poses it chose, `fixed` first, then one distinct pool member
/// nearest each free centre.
pub fn representatives(
    pool: &[Pose],
    fixed: &[Pose],
    k: usize,
    weights: &[f32; JOINT_COUNT],
    rng: &mut Rng,
) -> Vec<Chosen> {
    let coords: Vec<[f32; 3 * JOINT_COUNT]> = pool.iter().map(pose_coordinates).collect();
    let mut centres: Vec<[f32; 3 * JOINT_COUNT]> = fixed.iter().map(pose_coordinates).collect();
    let free = k.saturating_sub(fixed.len()).min(pool.len());
    if free == 0 || pool.is_empty() {
        return (0..fixed.len().min(k)).map(Chosen::Fixed).collect();
    }
    // k-means++ seeding
    let mut best: Vec<f32> = coords
        .iter()
        .map(|c| {
            centres
                .iter()
                .map(|z| dist(c, z, weights))
                .fold(f32::MAX, f32::min)
        })
        .collect();
    while centres.len() < fixed.len() + free {
        let total: f32 = best
            .iter()
            .map(|d| if d.is_finite() { *d } else { 0.0 })
            .sum();
        let pick = if total <= 0.0 {
            (rng.next_u64() % coords.len() as u64) as usize
        } else {
            let mut t = rng.uniform() * total;
            let mut i = 0;
            while i + 1 < best.len() && t > best[i] {
                t -= best[i];
                i += 1;
            }
            i
        };
        centres.push(coords[pick]);
        for (b, c) in best.iter_mut().zip(&coords) {
            *b = b.min(dist(c, &coords[pick], weights));
        }
    }
    // Lloyd iterations on the free centres
    let nf = fixed.len();
    let mut assign = vec![0usize; coords.len()];
    for _ in 0..30 {
        let mut changed = false;
        for (i, c) in coords.iter().enumerate() {
            let a = (0..centres.len())
                .min_by(|&x, &y| {
                    dist(c, &centres[x], weights).total_cmp(&dist(c, &centres[y], weights))
                })
                .unwrap_or(0);
            if a != assign[i] {
                assign[i] = a;
                changed = true;
            }
        }
        for ci in nf..centres.len() {
            let members: Vec<&[f32; 3 * JOINT_COUNT]> = coords
                .iter()
                .zip(&assign)
                .filter(|(_, a)| **a == ci)
                .map(|(c, _)| c)
                .collect();
            if members.is_empty() {
                continue;
            }
            let mut mean = [0.0f32; 3 * JOINT_COUNT];
            for m in &members {
                for (a, b) in mean.iter_mut().zip(m.iter()) {
                    *a += b;
                }
            }
            mean.iter_mut().for_each(|x| *x /= members.len() as f32);
            centres[ci] = mean;
        }
        if !changed {
            break;
        }
    }
    // each free centre → its nearest pool member (distinct)
    let mut out: Vec<Chosen> = (0..nf).map(Chosen::Fixed).collect();
    let mut taken = vec![false; pool.len()];
    for c in &centres[nf..] {
        if let Some(i) = (0..pool.len())
            .filter(|&i| !taken[i])
            .min_by(|&x, &y| dist(&coords[x], c, weights).total_cmp(&dist(&coords[y], c, weights)))
        {
            taken[i] = true;
            out.push(Chosen::Pool(i));
        }
    }
    out
}
