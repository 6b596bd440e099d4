//! The runtime (SOR §5): for an input pose, the sensitivity-based distance to every
//! example per region (Eq. 9), distance damping, top-K weights per region (Eq. 10), SOR
//! skinning of the used examples (Eq. 1) and their blend (Eq. 2), then penetration
//! re-projection against the body posed this frame (Eq. 11–13).
//!
//! Synthesis runs in the canonical frame (root translation and heading removed, as
//! DESIGN §2 asks); the [`RootFrame`] returned puts them back. A [`Synthesizer`] is
//! shared read-only by any number of avatars; each avatar keeps an [`AvatarState`]
//! (damped distances), each worker thread a [`Scratch`]: after the first frame nothing
//! is allocated.

use glam::{Mat3A, Vec3, Vec3A, Vec4};

use crate::body::LbsMatrices;
use crate::skeleton::{
    DOF_COUNT, JOINT_COUNT, Pose, Rigid, RootFrame, Skeleton, canonicalize, theta_into,
};

use super::db::Database;
use super::local::LocalExamples;

mod cross;
mod distance;
pub use distance::Distance;
use distance::{distance_weights, weighted_sum};

/// Most distinct examples blended at one vertex (regions × K is far below this).
const MAX_SLOTS: usize = 48;

/// The input pose's bone rotations and joint positions, plus a zero entry at
/// `JOINT_COUNT` that records without a remote bone point at (so no example branches).
type InputFrames<'a> = (&'a [Mat3A; JOINT_COUNT + 1], &'a [Vec3A; JOINT_COUNT + 1]);

/// Runtime parameters, with the papers' defaults.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SynthParams {
    /// Exponent k of the distance weights W = (D + ε)^−k (Wu, Eq. 7–8: k = 3; SOR §5
    /// uses 6 with its per-example distances).
    pub k: f64,
    /// Examples kept per region (Wu: K = 5).
    pub top_k: usize,
    /// Damping time constant t_mix, seconds (SOR §5: 0.05 s).
    pub t_mix: f32,
    /// Penetration clearance ε_p, metres (SOR §5: 5 mm, the simulator's margin).
    pub penetration_margin: f32,
    /// ε of the distance weights (SOR §5: 1e-15), m².
    pub epsilon: f64,
    /// Re-project penetrating vertices (SOR Eq. 11–13); off only for diagnostics.
    pub resolve_penetration: bool,
    /// An example is used in a region only when its weight there (Eq. 10, normalised
    /// over the region's top K) is at least this share; a vertex blends the examples
    /// used in any of its regions, renormalised (a speed/accuracy knob of ours, not the
    /// paper's; 0 keeps all).
    pub min_share: f32,
    /// Sum the examples with AVX2 fused multiply-adds where the CPU has AVX2 and FMA
    /// (checked at run time; elsewhere, and with `false`, SSE2). The two differ only in
    /// rounding (~1e-7 m).
    pub wide: bool,
    /// Which distance weights rank and weigh the examples (see [`Distance`]).
    pub distance: Distance,
    /// With [`Distance::Pooled`], the share of each example's own U^J mixed into the
    /// pooled Ū: U = (1 − s) Ū + s U^J (0: pooled alone; 1: each example's own, as
    /// [`Distance::PerExample`]). Ū ranks the examples by pose; U^J keeps an example
    /// away along the degrees of freedom its own rig cannot follow (a hem held by a
    /// hand on the hip, rigged to the arm, stays out of poses whose arm is elsewhere).
    /// Ours, not the papers': 0.25 cut the default database's worst left-out example
    /// from 22.1 to 10.1 cm (a flap of the hem), for 1.97 → 2.00 cm of mean error on a
    /// held-out clip (`docs/notes/sor.md`).
    pub own_share: f32,
    /// Exponent β of the cross-check of each example's distance weights against its
    /// neighbours' simulated garments (see `cross`): per region, an example whose rig
    /// carries its cloth to its nearest examples' poses worse than its peers' has its
    /// distance weights multiplied by (its error per unit of distance / the region's
    /// median)^β, clamped to [1, 8]. 0 turns it off. Ours, not the papers': 0.5 took
    /// the default database's crumpled hem out of a running stride (CMU 131_03 frames
    /// 786–810, largest error 13–19 → 7–9 cm) for 2.00 → 2.01 cm of held-out mean
    /// error (`docs/notes/sor.md`, *Cross-checked distances*).
    pub cross_scale: f32,
}

impl Default for SynthParams {
    fn default() -> Self {
        Self {
            k: 3.0,
            top_k: 5,
            t_mix: 0.05,
            penetration_margin: 0.005,
            epsilon: 1e-15,
            resolve_penetration: true,
            min_share: 0.01,
            wide: true,
            distance: Distance::default(),
            own_share: 0.25,
            cross_scale: 0.5,
        }
    }
}

/// Per-avatar state: the damped distances of the previous frame.
#[derive(Clone, Debug, Default)]
pub struct AvatarState {
    damped: Vec<f64>,
    started: bool,
    settled: bool,
}

/// Damping has settled when no damped distance moved by more than this share of
/// itself in the last frame: the weights then stand still to within float rounding.
const SETTLED: f64 = 1e-7;

impl AvatarState {
    /// A fresh avatar (the first frame is not damped).
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the damping had settled in the last frame (no damped distance moved by
    /// more than 1e-7 of itself): synthesising the same pose again would give the
    /// same garment, so a caller may keep the last one. False before the first frame
    /// and after a frame that was not damped.
    pub fn settled(&self) -> bool {
        self.settled
    }
}

/// Per-thread working memory.
#[derive(Clone, Debug, Default)]
pub struct Scratch {
    dist: Vec<f64>,
    /// Per region: (example, normalised weight), top-K.
    top: Vec<(u32, f32)>,
    order: Vec<u32>,
    slot_of: Vec<u32>,
    used: Vec<u32>,
    /// Per region: (example, weight) after the `min_share` cut, normalised; stride K.
    region_cut: Vec<(u32, f32)>,
    region_len: Vec<u32>,
    /// Per region set: the union of its regions' top-K (example ids, after the cut),
    /// and per example its weight in each region of the set (row-major, each row
    /// padded with zeros to whole `Vec4`s).
    combo_offsets: Vec<u32>,
    combo_slots: Vec<u32>,
    combo_weight_offsets: Vec<u32>,
    combo_weights: Vec<Vec4>,
    /// The body posed this frame: per body vertex, position and normal (only the
    /// vertices in `Synthesizer::body_used` are kept current).
    body: Vec<[Vec3A; 2]>,
}

/// What one synthesis did.
#[derive(Copy, Clone, Debug)]
pub struct SynthFrame {
    /// Puts canonical positions into the world frame.
    pub root: RootFrame,
    /// Number of distinct examples blended.
    pub examples_used: usize,
}

/// The runtime for one database.
pub struct Synthesizer<'db> {
    db: &'db Database,
    params: SynthParams,
    skeleton: Skeleton,
    /// The examples in bone-local frames (see [`super::local`]).
    local: LocalExamples,
    /// The distance weights in use (see [`Distance`]): per example, `regions × 66`,
    /// row-major, m²/rad².
    distance_weights: Vec<f32>,
    /// The cross-check's scale of every example's distance weights in every region
    /// (`examples × regions`; all ones with `cross_scale` 0; see `cross`).
    distance_scales: Vec<f32>,
    /// Per vertex: (region, ŵ) with ŵ > 0, flattened with offsets.
    region_offsets: Vec<u32>,
    region_list: Vec<(u8, f32)>,
    /// Distinct sets of regions a vertex lies in (region ids ascending, as in
    /// `region_list`), and each vertex's set.
    combos: Vec<Vec<u8>>,
    vertex_combo: Vec<u32>,
    /// Per vertex, its ŵ in the order of its region set, padded with zeros to whole
    /// `Vec4`s (⌈regions/4⌉ of them, from `region_vec_start[v]`), so that an example's
    /// weight at a vertex is a dot product with the set's row (see `gather`).
    region_vec: Vec<Vec4>,
    region_vec_start: Vec<u32>,
    body_normals: Vec<Vec3>,
    /// Body vertices some example associates a garment vertex with (the only ones
    /// penetration handling reads), sorted.
    body_used: Vec<u32>,
    /// The order the runtime visits the vertices in (and `local` stores them in):
    /// grouped by region set, so that consecutive vertices blend the same examples and
    /// every per-vertex loop runs the same number of times as the last one's.
    order: Vec<u32>,
    /// Whether the vertex loop runs its AVX2 + FMA version (the CPU has both; see
    /// [`SynthParams::wide`]).
    #[cfg(target_arch = "x86_64")]
    wide: bool,
    /// The examples' rotations and distance weights eight examples abreast, for the
    /// AVX2 distances (`Some` exactly when `wide`).
    #[cfg(target_arch = "x86_64")]
    examples8: Option<wide::Examples8>,
}

impl<'db> Synthesizer<'db> {
    /// Prepares the runtime: the examples re-expressed in bone-local frames (160 bytes
    /// per example and vertex: 23 MB for 48 examples of a 3 000-vertex garment), sparse
    /// per-vertex region lists and the distinct region sets.
    pub fn new(db: &'db Database, params: SynthParams) -> Self {
        let skeleton = Skeleton::from_rest_positions(db.body.skeleton);
        let example_frames: Vec<[Rigid; JOINT_COUNT]> = db
            .examples
            .iter()
            .map(|e| skeleton.world_frames(&e.pose))
            .collect();
        let g = db.region_count();
        let mut region_offsets = vec![0u32];
        let mut region_list = Vec::new();
        for v in 0..db.vertex_count() {
            for r in 0..g {
                let w = db.garment.region_weights[v * g + r];
                if w > 1e-6 {
                    region_list.push((r as u8, w));
                }
            }
            region_offsets.push(region_list.len() as u32);
        }
        let mut combos: Vec<Vec<u8>> = Vec::new();
        let vertex_combo: Vec<u32> = (0..db.vertex_count())
            .map(|v| {
                let set: Vec<u8> = region_list
                    [region_offsets[v] as usize..region_offsets[v + 1] as usize]
                    .iter()
                    .map(|e| e.0)
                    .collect();
                let at = combos.iter().position(|c| *c == set).unwrap_or_else(|| {
                    combos.push(set);
                    combos.len() - 1
                });
                at as u32
            })
            .collect();
        let mut region_vec = Vec::new();
        let mut region_vec_start = Vec::with_capacity(db.vertex_count());
        for v in 0..db.vertex_count() {
            region_vec_start.push(region_vec.len() as u32);
            let list = &region_list[region_offsets[v] as usize..region_offsets[v + 1] as usize];
            for chunk in list.chunks(4) {
                let mut w = [0.0f32; 4];
                for (w, e) in w.iter_mut().zip(chunk) {
                    *w = e.1;
                }
                region_vec.push(Vec4::from_array(w));
            }
        }
        // in garment order the number of examples blended changes from one vertex to
        // the next and the loops over them mispredict; grouped by region set they
        // repeat (−6 % per 3 000-vertex frame, −15 % at 12 500; `bench synth`)
        let mut order: Vec<u32> = (0..db.vertex_count() as u32).collect();
        order.sort_by_key(|&v| (vertex_combo[v as usize], v));
        let local = LocalExamples::new(db, &example_frames, params.penetration_margin, &order);
        let body_mesh =
            crate::mesh::TriMesh::new(db.body.positions.clone(), db.body.triangles.clone());
        let mut body_used: Vec<u32> = db
            .examples
            .iter()
            .flat_map(|e| e.body_vertex.iter().copied())
            .filter(|&b| (b as usize) < db.body.positions.len())
            .collect();
        body_used.sort_unstable();
        body_used.dedup();
        #[cfg(target_arch = "x86_64")]
        let wide = params.wide
            && std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma");
        let distance_weights = distance_weights(db, params.distance, params.own_share);
        #[cfg(target_arch = "x86_64")]
        let examples8 = (wide && db.region_count() <= wide::MAX_REGIONS)
            .then(|| wide::Examples8::new(db, &distance_weights));
        let cross_scale = params.cross_scale;
        let mut synth = Self {
            db,
            params,
            skeleton,
            local,
            distance_weights,
            distance_scales: Vec::new(),
            region_offsets,
            region_list,
            combos,
            vertex_combo,
            region_vec,
            region_vec_start,
            body_normals: body_mesh.vertex_normals(),
            body_used,
            order,
            #[cfg(target_arch = "x86_64")]
            wide,
            #[cfg(target_arch = "x86_64")]
            examples8,
        };
        synth.distance_scales = synth.cross_scales(cross_scale);
        if synth.distance_scales.iter().any(|s| *s != 1.0) {
            let row = DOF_COUNT;
            let scales = &synth.distance_scales;
            for (u, s) in synth.distance_weights.chunks_exact_mut(row).zip(scales) {
                u.iter_mut().for_each(|u| *u *= s);
            }
            #[cfg(target_arch = "x86_64")]
            if synth.examples8.is_some() {
                synth.examples8 = Some(wide::Examples8::new(db, &synth.distance_weights));
            }
        }
        synth
    }

    /// The database.
    pub fn database(&self) -> &Database {
        self.db
    }

    /// The skeleton of the database's body.
    pub fn skeleton(&self) -> &Skeleton {
        &self.skeleton
    }

    /// The scale the cross-check gave each example's distance weights in each region
    /// (`examples × regions`, row-major; 1 where it left them, and everywhere with
    /// [`SynthParams::cross_scale`] 0): above 1 where the example's rig carries its
    /// cloth to its nearest examples' poses worse than its peers' (see `cross`).
    pub fn distance_scales(&self) -> &[f32] {
        &self.distance_scales
    }

    /// Which vertex loop runs: `"AVX2 + FMA"` or `"SSE2"` (see [`SynthParams::wide`]).
    pub fn vertex_loop(&self) -> &'static str {
        if self.wide_active() {
            "AVX2 + FMA"
        } else {
            "SSE2"
        }
    }

    /// SOR Eq. 9's distances of every example to `canon` into `dist` with AVX2 (see
    /// [`wide::Examples8::distances`]); `false` (nothing done) where that does not run.
    fn distances_wide(&self, canon: &Pose, dist: &mut [f64]) -> bool {
        #[cfg(target_arch = "x86_64")]
        if let Some(ex8) = &self.examples8 {
            // SAFETY: `examples8` is made only where the CPU has AVX2 and FMA
            unsafe { ex8.distances(canon, dist) };
            return true;
        }
        let _ = (canon, dist);
        false
    }

    /// Poses the body vertices penetration handling reads into `body` with AVX2, for
    /// the skinning transforms `t` (see [`wide::pose_body`]); `false` (nothing done)
    /// where that does not run.
    fn pose_body_wide(&self, t: &[Rigid; JOINT_COUNT], body: &mut [[Vec3A; 2]]) -> bool {
        #[cfg(target_arch = "x86_64")]
        if self.wide {
            let bones = t.map(|r| {
                let m = Mat3A::from_quat(r.rot);
                wide::BoneLanes(
                    [m.x_axis, m.y_axis, m.z_axis, Vec3A::from(r.trans)].map(|c| c.extend(0.0)),
                )
            });
            let db = self.db;
            // SAFETY: `wide` is set only where the CPU has AVX2 and FMA
            unsafe {
                wide::pose_body(
                    &bones,
                    (&db.body.positions, &self.body_normals, &db.body.skin),
                    &self.body_used,
                    body,
                );
            }
            return true;
        }
        let _ = (t, body);
        false
    }

    /// Whether the AVX2 + FMA loops run.
    fn wide_active(&self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            self.wide
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    }

    /// Parameters.
    pub fn params(&self) -> &SynthParams {
        &self.params
    }

    /// Synthesises the garment for `pose` into `out` (canonical frame, metres); `dt` is
    /// the time since this avatar's previous frame (seconds; damping). Allocation-free
    /// once `scratch` and `state` have been used with this database.
    ///
    /// # Panics
    /// If `out` does not have the garment's vertex count (a programming error).
    #[track_caller]
    pub fn synthesize(
        &self,
        state: &mut AvatarState,
        scratch: &mut Scratch,
        pose: &Pose,
        dt: f32,
        out: &mut [Vec3],
    ) -> SynthFrame {
        self.synthesize_without(state, scratch, pose, dt, None, out)
    }

    /// [`Synthesizer::synthesize`], with example `without` (if any) given no weight in
    /// any region, as if the database lacked it (see [`leave_one_out`]).
    #[track_caller]
    fn synthesize_without(
        &self,
        state: &mut AvatarState,
        scratch: &mut Scratch,
        pose: &Pose,
        dt: f32,
        without: Option<usize>,
        out: &mut [Vec3],
    ) -> SynthFrame {
        assert_eq!(
            out.len(),
            self.db.vertex_count(),
            "output buffer has the wrong vertex count"
        );
        let (canon, root) = canonicalize(pose, &self.skeleton);
        let db = self.db;
        let nj = db.examples.len();
        let g = db.region_count();
        // K is at most 64 (the size of the per-region buffers below)
        let k = self.params.top_k.min(nj).clamp(1, 64);
        // distances D_g^J = Σ_m U^J_{g,m} Θ_m² (SOR Eq. 9)
        scratch.dist.resize(g * nj, 0.0);
        if !self.distances_wide(&canon, &mut scratch.dist) {
            let mut th = [0.0f32; DOF_COUNT];
            for (j, ex) in db.examples.iter().enumerate() {
                theta_into(&ex.pose, &canon, &mut th);
                let th2 = th.map(|t| t * t);
                let row = (j * g) * DOF_COUNT;
                for r in 0..g {
                    let u = &self.distance_weights[row + r * DOF_COUNT..row + (r + 1) * DOF_COUNT];
                    scratch.dist[r * nj + j] = f64::from(weighted_sum(u, &th2));
                }
            }
        }
        // an example left out is infinitely far: never in a top K, or of weight 0
        if let Some(x) = without.filter(|&x| x < nj) {
            for r in 0..g {
                scratch.dist[r * nj + x] = f64::INFINITY;
            }
        }
        // distance damping D ← ξ D' + (1 − ξ) D, ξ = exp(−dt / t_mix)
        state.settled = false;
        if state.damped.len() != scratch.dist.len() {
            state.damped.clear();
            state.damped.extend_from_slice(&scratch.dist);
            state.started = true;
        } else if state.started {
            let xi = (-(dt.max(0.0) as f64) / self.params.t_mix.max(1e-6) as f64).exp();
            let mut settled = true;
            for (d, prev) in scratch.dist.iter_mut().zip(state.damped.iter_mut()) {
                let next = xi * *prev + (1.0 - xi) * *d;
                settled &= (next - *prev).abs() <= SETTLED * next.abs();
                *d = next;
                *prev = next;
            }
            state.settled = settled;
        }
        // weights W = (D + ε)^−k, top-K per region, normalised (SOR Eq. 10)
        scratch.top.clear();
        scratch.slot_of.clear();
        scratch.slot_of.resize(nj, u32::MAX);
        scratch.used.clear();
        for r in 0..g {
            let d = &scratch.dist[r * nj..(r + 1) * nj];
            scratch.order.clear();
            scratch.order.extend(0..nj as u32);
            if k < nj {
                scratch.order.select_nth_unstable_by(k - 1, |a, b| {
                    d[*a as usize].total_cmp(&d[*b as usize])
                });
            }
            let chosen = &scratch.order[..k];
            let logs: [f64; 64] = std::array::from_fn(|i| {
                if i < k {
                    -self.params.k * (d[chosen[i] as usize] + self.params.epsilon).ln()
                } else {
                    f64::MIN
                }
            });
            let maxl = logs[..k].iter().copied().fold(f64::MIN, f64::max);
            let sum: f64 = logs[..k].iter().map(|l| (l - maxl).exp()).sum();
            for i in 0..k {
                let w = ((logs[i] - maxl).exp() / sum) as f32;
                let j = chosen[i];
                scratch.top.push((j, w));
                if w > 1e-6 && scratch.slot_of[j as usize] == u32::MAX {
                    scratch.slot_of[j as usize] = scratch.used.len() as u32;
                    scratch.used.push(j);
                }
            }
        }
        // the input pose's bone frames, and the body posed this frame
        let (rot, pos) = self.input_frames(&canon);
        let t = self.skeleton.skinning_transforms(&canon);
        scratch
            .body
            .resize(db.body.positions.len(), [Vec3A::ZERO; 2]);
        if self.params.resolve_penetration && !self.pose_body_wide(&t, &mut scratch.body) {
            let lbs = LbsMatrices::new(&t);
            let skin = &db.body.skin;
            for &b in &self.body_used {
                let b = b as usize;
                let (p, n) = lbs.apply_with_normal(
                    db.body.positions[b],
                    self.body_normals[b],
                    &skin.joints[b],
                    &skin.weights[b],
                );
                scratch.body[b] = [p.into(), n.into()];
            }
        }
        self.cut_regions(scratch, k);
        if self.wide_active() {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `wide` is set only where the CPU has AVX2 and FMA (checked at run
            // time in `new`).
            unsafe {
                self.vertices_wide(scratch, k, (&rot, &pos), out)
            };
        } else {
            self.vertices::<false>(scratch, k, (&rot, &pos), out);
        }
        SynthFrame {
            root,
            examples_used: scratch.used.len(),
        }
    }
}

impl Synthesizer<'_> {
    /// The canonical input pose's bone rotations and joint positions (world frame),
    /// with the zero entry at `JOINT_COUNT` (see [`InputFrames`]).
    fn input_frames(&self, canon: &Pose) -> ([Mat3A; JOINT_COUNT + 1], [Vec3A; JOINT_COUNT + 1]) {
        let frames = self.skeleton.world_frames(canon);
        let rot = std::array::from_fn(|b| {
            frames
                .get(b)
                .map_or(Mat3A::ZERO, |f| Mat3A::from_quat(f.rot))
        });
        let pos =
            std::array::from_fn(|b| frames.get(b).map_or(Vec3A::ZERO, |f| Vec3A::from(f.trans)));
        (rot, pos)
    }

    /// SOR Eq. 1 for example `j` alone at `pose` (any frame; the garment comes out in
    /// the canonical frame, metres, into `out`): the example's garment moved by its own
    /// rig, before any blending and penetration handling. A diagnostic (what the best
    /// blend of the examples could reach: `eval --oracle`), not the runtime's path.
    ///
    /// # Panics
    /// If `j` is not an example or `out` does not have the garment's vertex count
    /// (programming errors).
    #[track_caller]
    pub fn skin_example(&self, j: usize, pose: &Pose, out: &mut [Vec3]) {
        assert!(j < self.db.examples.len(), "no example {j}");
        assert_eq!(
            out.len(),
            self.db.vertex_count(),
            "output buffer has the wrong vertex count"
        );
        let (canon, _) = canonicalize(pose, &self.skeleton);
        let (rot, pos) = self.input_frames(&canon);
        let skin = &self.db.garment.skin;
        let one = [(j as u32, 1.0f32)];
        for (i, &v) in self.order.iter().enumerate() {
            let v = v as usize;
            let sums = self.sums(i, &one, (&rot, &pos));
            out[v] = Vec3::from(blend_sums(
                &sums,
                (skin.joints[v], skin.weights[v]),
                (&rot, &pos),
            ));
        }
    }
}

impl Synthesizer<'_> {
    /// The per-vertex part of [`Synthesizer::synthesize`] (after the weights and the
    /// posed body are in `scratch`): blend of SOR-skinned examples (Eq. 1–2), then
    /// penetration re-projection (Eq. 11–13). `WIDE` sums the examples' records with
    /// 256-bit AVX2 fused multiply-adds, and may only be `true` inside
    /// [`Synthesizer::vertices_wide`].
    #[inline(always)]
    fn vertices<const WIDE: bool>(
        &self,
        scratch: &Scratch,
        k: usize,
        frames: InputFrames<'_>,
        out: &mut [Vec3],
    ) {
        let db = self.db;
        let skin = &db.garment.skin;
        let mut slots = [(0u32, 0.0f32); MAX_SLOTS];
        for (i, &v) in self.order.iter().enumerate() {
            let v = v as usize;
            let o = &mut out[v];
            let used = self.gather(scratch, k, v, &mut slots);
            if used.is_empty() {
                *o = db
                    .examples
                    .first()
                    .map(|e| e.positions[v])
                    .unwrap_or(db.garment.rest[v]);
                continue;
            }
            let sums = if WIDE {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `WIDE` is true only when called from `vertices_wide`, which
                // runs only on CPUs with AVX2 and FMA.
                unsafe {
                    wide::sums(&self.local, i, used, frames)
                }
                #[cfg(not(target_arch = "x86_64"))]
                unreachable!("no wide path on this architecture")
            } else {
                self.sums(i, used, frames)
            };
            let y_in = blend_sums(&sums, (skin.joints[v], skin.weights[v]), frames);
            if !self.params.resolve_penetration {
                *o = Vec3::from(y_in);
                continue;
            }
            // SOR Eq. 11–13: per example, push out along the associated body vertex's
            // normal; Σ_J w^J (y + n^J max(0, d₀^J − h^J)) with Σ_J w^J = 1
            let mut push = Vec3A::ZERO;
            for &(j, w) in used {
                let lv = self.local.get(j as usize, i);
                let [p, n] = scratch.body[lv.body_vertex as usize];
                let h = (y_in - p).dot(n);
                push += n * ((lv.clearance() - h).max(0.0) * w);
            }
            *o = Vec3::from(y_in + push);
        }
    }

    /// [`Synthesizer::vertices`] compiled for AVX2 and FMA.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn vertices_wide(
        &self,
        scratch: &Scratch,
        k: usize,
        frames: InputFrames<'_>,
        out: &mut [Vec3],
    ) {
        self.vertices::<true>(scratch, k, frames, out);
    }

    /// SOR Eq. 2's blend at the vertex visited `i`-th (see `order`; its records are
    /// `local.get(j, i)`) of the (example, weight) pairs in `slots`, in bone-local
    /// frames (see [`super::local`]): the weighted sums of the records, the remote
    /// bones' terms already moved by the input pose `(rot, pos)`.
    #[inline(always)]
    fn sums(&self, i: usize, slots: &[(u32, f32)], (rot, pos): InputFrames<'_>) -> Sums {
        let mut s = Sums::default();
        for &(j, w) in slots {
            let lv = self.local.get(j as usize, i);
            for (acc, l) in s.near.iter_mut().zip(&lv.near) {
                *acc += *l * w;
            }
            let r = (lv.remote_bone as usize).min(JOINT_COUNT);
            let rw = lv.remote * w;
            s.remote += rot[r] * Vec3A::from_vec4(rw) + pos[r] * rw.w;
            for (acc, c) in s.tau.iter_mut().zip(&lv.tau) {
                *acc += *c * w;
            }
            s.tau_offset += lv.tau_offset * w;
        }
        s
    }
}

/// The examples' bone-local records at one vertex, summed with their weights: the
/// skin bones' and τ's lanes of [`super::local::LocalVertex`] still bone-local, the
/// remote bones' terms moved by the input pose (Σ_J w^J α^J (W_r^in ℓ_r^J + c_r^in),
/// world frame, metres: a remote bone rarely repeats across a vertex's examples, so
/// summing per bone first cost more than it saved).
#[derive(Clone, Copy, Default)]
struct Sums {
    near: [Vec4; 4],
    tau: [Vec4; 3],
    tau_offset: Vec4,
    remote: Vec3A,
}

/// SOR Eq. 1–2 at one vertex from its blended records `s`: one rotation per skin bone
/// (bone rotations `rot`, joint positions `pos` of the input pose) instead of one per
/// bone per example. (Fused
/// multiply-adds here were slower: they chain what the plain products compute side
/// by side.)
#[inline(always)]
fn blend_sums(
    s: &Sums,
    (joints, weights): ([u16; 4], [f32; 4]),
    (rot, pos): InputFrames<'_>,
) -> Vec3A {
    // Σ_b W_b^in (Σ_J w^J c_b^J ℓ_b^J) + (Σ_J w^J c_b^J) c_b^in
    let mut y = s.remote;
    let mut cbar = Vec3A::ZERO;
    for q in 0..4 {
        if weights[q] > 0.0 {
            let b = joints[q] as usize;
            y += rot[b] * Vec3A::from_vec4(s.near[q]) + pos[b] * s.near[q].w;
            cbar += pos[b] * weights[q];
        }
    }
    let tau = Mat3A::from_cols(
        Vec3A::from_vec4(s.tau[0]),
        Vec3A::from_vec4(s.tau[1]),
        Vec3A::from_vec4(s.tau[2]),
    );
    let tau_offset = Vec3A::from_vec4(s.tau_offset);
    y + rot[joints[0] as usize] * (tau * cbar - tau_offset)
}

#[cfg(target_arch = "x86_64")]
mod wide;

mod holdout;
mod weights;
pub use holdout::{LeftOut, leave_one_out, left_out};
mod many;
pub use many::{AvatarJob, synthesize_all, synthesize_job};

#[cfg(test)]
mod tests;
