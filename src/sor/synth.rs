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

use glam::{Vec3, Vec3A};
use rayon::prelude::*;

use crate::body::LbsMatrices;
use crate::skeleton::{
    DOF_COUNT, JOINT_COUNT, Pose, Rigid, RootFrame, Skeleton, canonicalize, theta_into,
};

use super::db::Database;
use super::motion::BoneMotion;
use super::rig::tau_matrix;

/// Runtime parameters, with the papers' defaults.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SynthParams {
    /// Exponent k of the distance weights W = (D + ε)^−k (SOR §5: k = 6).
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
    /// Examples whose blended weight at a vertex is below this share of the total are
    /// skipped there (a speed/accuracy knob of ours, not the paper's; 0 keeps all).
    pub min_share: f32,
}

impl Default for SynthParams {
    fn default() -> Self {
        Self {
            k: 6.0,
            top_k: 5,
            t_mix: 0.05,
            penetration_margin: 0.005,
            epsilon: 1e-15,
            resolve_penetration: true,
            min_share: 0.01,
        }
    }
}

/// Per-avatar state: the damped distances of the previous frame.
#[derive(Clone, Debug, Default)]
pub struct AvatarState {
    damped: Vec<f64>,
    started: bool,
}

impl AvatarState {
    /// A fresh avatar (the first frame is not damped).
    pub fn new() -> Self {
        Self::default()
    }
}

/// Per-thread working memory.
#[derive(Clone, Debug, Default)]
pub struct Scratch {
    theta: Vec<f32>,
    dist: Vec<f64>,
    /// Per region: (example, normalised weight), top-K.
    top: Vec<(u32, f32)>,
    order: Vec<u32>,
    slot_of: Vec<u32>,
    used: Vec<u32>,
    motions: Vec<BoneMotion>,
    body_pos: Vec<Vec3>,
    body_nrm: Vec<Vec3>,
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
    example_frames: Vec<[Rigid; JOINT_COUNT]>,
    /// Per vertex: (region, ŵ) with ŵ > 0, flattened with offsets.
    region_offsets: Vec<u32>,
    region_list: Vec<(u8, f32)>,
    body_normals: Vec<Vec3>,
    /// Body vertices some example associates a garment vertex with (the only ones
    /// penetration handling reads), sorted.
    body_used: Vec<u32>,
}

impl<'db> Synthesizer<'db> {
    /// Prepares the runtime (precomputes example frames and sparse region lists).
    pub fn new(db: &'db Database, params: SynthParams) -> Self {
        let skeleton = Skeleton::from_rest_positions(db.body.skeleton);
        let example_frames = db
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
        Self {
            db,
            params,
            skeleton,
            example_frames,
            region_offsets,
            region_list,
            body_normals: body_mesh.vertex_normals(),
            body_used,
        }
    }

    /// The database.
    pub fn database(&self) -> &Database {
        self.db
    }

    /// The skeleton of the database's body.
    pub fn skeleton(&self) -> &Skeleton {
        &self.skeleton
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
        assert_eq!(
            out.len(),
            self.db.vertex_count(),
            "output buffer has the wrong vertex count"
        );
        let (canon, root) = canonicalize(pose, &self.skeleton);
        let db = self.db;
        let nj = db.examples.len();
        let g = db.region_count();
        let k = self.params.top_k.min(nj).max(1);
        // distances D_g^J = Σ_m U^J_{g,m} Θ_m² (SOR Eq. 9)
        scratch.theta.resize(DOF_COUNT, 0.0);
        scratch.dist.resize(g * nj, 0.0);
        let mut th = [0.0f32; DOF_COUNT];
        for (j, ex) in db.examples.iter().enumerate() {
            theta_into(&ex.pose, &canon, &mut th);
            for r in 0..g {
                let u = &ex.distance_weights[r * DOF_COUNT..(r + 1) * DOF_COUNT];
                let d: f32 = u.iter().zip(&th).map(|(u, t)| u * t * t).sum();
                scratch.dist[r * nj + j] = d as f64;
            }
        }
        // distance damping D ← ξ D' + (1 − ξ) D, ξ = exp(−dt / t_mix)
        if state.damped.len() != scratch.dist.len() {
            state.damped.clear();
            state.damped.extend_from_slice(&scratch.dist);
            state.started = true;
        } else if state.started {
            let xi = (-(dt.max(0.0) as f64) / self.params.t_mix.max(1e-6) as f64).exp();
            for (d, prev) in scratch.dist.iter_mut().zip(state.damped.iter_mut()) {
                *d = xi * *prev + (1.0 - xi) * *d;
                *prev = *d;
            }
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
        // bone motions of the used examples, and the body posed this frame
        let input_frames = self.skeleton.world_frames(&canon);
        scratch.motions.clear();
        for &j in &scratch.used {
            scratch.motions.push(BoneMotion::new(
                &self.example_frames[j as usize],
                &input_frames,
            ));
        }
        let t = self.skeleton.skinning_transforms(&canon);
        let lbs = LbsMatrices::new(&t);
        scratch.body_pos.resize(db.body.positions.len(), Vec3::ZERO);
        scratch.body_nrm.resize(db.body.positions.len(), Vec3::ZERO);
        if self.params.resolve_penetration {
            let skin = &db.body.skin;
            for &b in &self.body_used {
                let b = b as usize;
                scratch.body_pos[b] =
                    lbs.apply(db.body.positions[b], &skin.joints[b], &skin.weights[b]);
                scratch.body_nrm[b] =
                    lbs.rotate_normal(self.body_normals[b], &skin.joints[b], &skin.weights[b]);
            }
        }
        // per vertex: blend of SOR-skinned examples, then penetration re-projection
        let eps_p = self.params.penetration_margin;
        let skin = &db.garment.skin;
        for (v, o) in out.iter_mut().enumerate() {
            let mut slots = [(0u32, 0.0f32); 48];
            let mut ns = 0;
            let (a, b) = (
                self.region_offsets[v] as usize,
                self.region_offsets[v + 1] as usize,
            );
            for &(r, rw) in &self.region_list[a..b] {
                for &(j, w) in &scratch.top[r as usize * k..(r as usize + 1) * k] {
                    let s = scratch.slot_of[j as usize];
                    if s == u32::MAX || w <= 1e-6 {
                        continue;
                    }
                    let cap = slots.len();
                    match slots[..ns].iter_mut().find(|e| e.0 == s) {
                        Some(e) => e.1 += rw * w,
                        None if ns < cap => {
                            slots[ns] = (s, rw * w);
                            ns += 1;
                        }
                        None => {}
                    }
                }
            }
            let total: f32 = slots[..ns].iter().map(|e| e.1).sum();
            if ns == 0 || total <= 0.0 {
                *o = db
                    .examples
                    .first()
                    .map(|e| e.positions[v])
                    .unwrap_or(db.garment.rest[v]);
                continue;
            }
            // examples whose share is negligible are skipped (renormalised); the
            // threshold comes from config
            let cut = total * self.params.min_share;
            let mut kept = 0;
            for i in 0..ns {
                if slots[i].1 >= cut {
                    slots[kept] = slots[i];
                    kept += 1;
                }
            }
            ns = kept;
            let total: f32 = slots[..ns].iter().map(|e| e.1).sum();
            let (joints, weights) = (skin.joints[v], skin.weights[v]);
            let mut y_in = Vec3A::ZERO;
            for &(s, w) in &slots[..ns] {
                let j = scratch.used[s as usize] as usize;
                let ex = &db.examples[j];
                let m = &scratch.motions[s as usize];
                let yj = Vec3A::from(ex.positions[v]);
                let alpha = ex.alpha[v];
                let mut y = Vec3A::ZERO;
                let mut tbar = Vec3A::ZERO;
                for q in 0..4 {
                    let wq = weights[q];
                    if wq > 0.0 {
                        let bq = joints[q] as usize;
                        y += m.apply(bq, yj) * (wq * (1.0 - alpha));
                        tbar += m.translation(bq) * wq;
                    }
                }
                if alpha > 0.0 {
                    y += m.apply(ex.remote_bone[v] as usize, yj) * alpha;
                }
                let tau = tau_matrix(&ex.translation[v]);
                y += m.rot[joints[0] as usize] * Vec3A::from(tau * Vec3::from(tbar));
                y_in += y * (w / total);
            }
            if !self.params.resolve_penetration {
                *o = Vec3::from(y_in);
                continue;
            }
            // SOR Eq. 11–13: per example, push out along the associated body vertex's normal
            let mut y_out = Vec3A::ZERO;
            for &(s, w) in &slots[..ns] {
                let ex = &db.examples[scratch.used[s as usize] as usize];
                let bv = ex.body_vertex[v] as usize;
                let n = Vec3A::from(scratch.body_nrm[bv]);
                let h = (y_in - Vec3A::from(scratch.body_pos[bv])).dot(n);
                let d0 = ex.clearance[v].min(eps_p);
                y_out += (y_in + n * (d0 - h).max(0.0)) * (w / total);
            }
            *o = Vec3::from(y_out);
        }
        SynthFrame {
            root,
            examples_used: scratch.used.len(),
        }
    }
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}

/// One avatar's synthesis job for [`synthesize_all`].
pub struct AvatarJob<'a> {
    /// The avatar's damping state.
    pub state: &'a mut AvatarState,
    /// Its pose this frame.
    pub pose: Pose,
    /// Seconds since its previous frame.
    pub dt: f32,
    /// Output positions (canonical frame).
    pub out: &'a mut [Vec3],
    /// Filled with the frame's info.
    pub frame: Option<SynthFrame>,
}

/// Synthesises many avatars sharing one database, in parallel (rayon; one scratch per
/// worker thread, kept between calls). Results are identical to calling
/// [`Synthesizer::synthesize`] serially.
pub fn synthesize_all(synth: &Synthesizer<'_>, jobs: &mut [AvatarJob<'_>]) {
    jobs.par_iter_mut().for_each(|job| {
        SCRATCH.with(|s| {
            let mut s = s.borrow_mut();
            job.frame = Some(synth.synthesize(job.state, &mut s, &job.pose, job.dt, job.out));
        });
    });
}
