//! Which examples each vertex blends, and with what weights, once the top K of every
//! region are known (SOR Eq. 10): the `min_share` cut per region, and per vertex the
//! region-weighted sum over the regions it lies in.

use glam::Vec4;

use super::{MAX_SLOTS, Scratch, Synthesizer};

impl Synthesizer<'_> {
    /// Per region, the top-K examples that survive the `min_share` cut, normalised
    /// (the whole weight list of every vertex that lies in one region only).
    pub(super) fn cut_regions(&self, scratch: &mut Scratch, k: usize) {
        let g = self.db.region_count();
        scratch.region_cut.clear();
        scratch.region_len.clear();
        // an example is used in a region when its weight there is at least `min_share`
        let keep = self.params.min_share.max(1e-6);
        for r in 0..g {
            let mut buf = [(0u32, 0.0f32); 64];
            let mut n = 0;
            for &(j, w) in &scratch.top[r * k..(r + 1) * k] {
                let s = scratch.slot_of[j as usize];
                if s != u32::MAX && w >= keep {
                    buf[n] = (j, w);
                    n += 1;
                }
            }
            n = normalise(&mut buf[..n]);
            scratch.region_cut.extend_from_slice(&buf[..k]);
            scratch.region_len.push(n as u32);
        }
        // per set of regions: the examples used in any of them, with their weight in each
        scratch.combo_offsets.clear();
        scratch.combo_slots.clear();
        scratch.combo_weights.clear();
        scratch.combo_weight_offsets.clear();
        scratch.combo_offsets.push(0);
        for set in &self.combos {
            let first = scratch.combo_slots.len();
            for &r in set {
                let r = r as usize;
                for &(j, w) in &scratch.top[r * k..(r + 1) * k] {
                    let s = scratch.slot_of[j as usize];
                    if s != u32::MAX && w >= keep && !scratch.combo_slots[first..].contains(&j) {
                        scratch.combo_slots.push(j);
                    }
                }
            }
            scratch
                .combo_weight_offsets
                .push(scratch.combo_weights.len() as u32);
            for e in first..scratch.combo_slots.len() {
                let j = scratch.combo_slots[e];
                for regions in set.chunks(4) {
                    let mut row = [0.0f32; 4];
                    for (w, &r) in row.iter_mut().zip(regions) {
                        let r = r as usize;
                        *w = scratch.top[r * k..(r + 1) * k]
                            .iter()
                            .find(|t| t.0 == j)
                            .map_or(0.0, |t| t.1);
                    }
                    scratch.combo_weights.push(Vec4::from_array(row));
                }
            }
            scratch.combo_offsets.push(scratch.combo_slots.len() as u32);
        }
    }

    /// The examples blended at vertex `v` as (example, weight), weights summing to one
    /// (empty: none carries weight). Vertices in one region share their region's list;
    /// the others' lists are written into `slots`.
    #[inline(always)]
    pub(super) fn gather<'a>(
        &self,
        scratch: &'a Scratch,
        k: usize,
        v: usize,
        slots: &'a mut [(u32, f32); MAX_SLOTS],
    ) -> &'a [(u32, f32)] {
        let (a, b) = (
            self.region_offsets[v] as usize,
            self.region_offsets[v + 1] as usize,
        );
        if b == a + 1 {
            let r = self.region_list[a].0 as usize;
            let n = scratch.region_len[r] as usize;
            return &scratch.region_cut[r * k..r * k + n];
        }
        // several regions: w^J = Σ_g ŵ_g W_g^J over the set's union of examples
        let chunks = (b - a).div_ceil(4);
        let start = self.region_vec_start[v] as usize;
        let rw = &self.region_vec[start..start + chunks];
        let c = self.vertex_combo[v] as usize;
        let (lo, hi) = (
            scratch.combo_offsets[c] as usize,
            scratch.combo_offsets[c + 1] as usize,
        );
        let base = scratch.combo_weight_offsets[c] as usize;
        let mut ns = 0;
        for e in 0..(hi - lo).min(MAX_SLOTS) {
            let row = &scratch.combo_weights[base + e * chunks..base + (e + 1) * chunks];
            let w: f32 = if chunks == 1 {
                row[0].dot(rw[0])
            } else {
                row.iter().zip(rw).map(|(w, r)| w.dot(*r)).sum()
            };
            slots[ns] = (scratch.combo_slots[lo + e], w);
            ns += 1;
        }
        let n = normalise(&mut slots[..ns]);
        &slots[..n]
    }
}

/// Normalises the weights to sum to one; returns how many entries there are (0 when
/// nothing carries weight).
#[inline]
fn normalise(slots: &mut [(u32, f32)]) -> usize {
    let total: f32 = slots.iter().map(|e| e.1).sum();
    if total <= 0.0 {
        return 0;
    }
    let scale = 1.0 / total;
    for e in slots.iter_mut() {
        e.1 *= scale;
    }
    slots.len()
}
