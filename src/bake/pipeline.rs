//! The bake: example poses in, database out. Each example is the garment carried
//! quasi-statically to the example pose (SOR Alg. 1) from the nearer of its draped rest
//! state and that drape carried once to an arms-down pose, its
//! sensitivities (SOR Eq. 3) and its SOR rig (SOR §4). K-means examples are independent
//! and built in parallel; the MCMC sampler adds one example at a time.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use glam::Vec3;
use rayon::prelude::*;

use crate::body::{Body, SelfContactGuard, SkinningMethod};
use crate::garment::Garment;
use crate::mesh::TriMesh;
use crate::mocap::Clip;
use crate::sim::{Equilibrium, Sensitivity, SimParams, Simulator, SolveError, continuation_steps};
use crate::skeleton::{
    DOF_COUNT, Pose, canonicalize, clamp_pose, joint_limits, quat_exp, quat_log, theta,
};
use crate::sor::{
    BakeInfo, BodyData, Database, DbError, Example, GarmentData, GarmentRigInput, PosedBody,
    RigParams, SynthParams, Synthesizer, decode_example, encode_example, fit_example,
};

use super::kmeans::{Chosen, joint_weights, representatives};
use super::poses::{Rng, clip_poses, limit_samples};

/// Gap kept between arms and torso in example poses, metres (two cloth margins plus
/// half a centimetre, so a sleeve fits between them).
pub const GUARD_CLEARANCE: f32 = 0.015;

/// What a database records as the origin of its rest example (SOR's p¹, the drape).
pub(crate) const REST_ORIGIN: &str = "rest pose";

/// Which sampler chooses the example poses.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Sampler {
    /// Weighted K-means over clip frames and joint-limit samples (Wu §3.6), parallel.
    Kmeans,
    /// Greedy Metropolis–Hastings search for the pose of largest residual (SOR §6).
    Mcmc,
}

/// Settings of a bake.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BakeConfig {
    /// Number of examples, the rest pose included.
    pub examples: usize,
    /// Sampler.
    pub sampler: Sampler,
    /// Random seed (bakes are reproducible).
    pub seed: u64,
    /// Use every n-th clip frame as a candidate pose.
    pub clip_step: usize,
    /// Number of joint-limit samples added to the candidates.
    pub limit_samples: usize,
    /// Joint limits are shrunk by this factor when sampling (0–1): the extremes of the
    /// anatomical range are rare in real motion.
    pub limit_scale: f32,
    /// MCMC: Metropolis–Hastings proposals per example (SOR: 2000).
    pub mcmc_samples: usize,
    /// MCMC: proposal width μ of SOR Eq. 15: per-DOF Gaussian steps with
    /// σ = range/√(2μ). SOR's μ = 0.1 gives σ ≈ 2.2 ranges, i.e. independent uniform
    /// draws; the default 50 (σ = 10 % of each joint's range) is a local random walk
    /// that climbs towards large residuals, as the greedy search intends.
    pub mcmc_mu: f32,
    /// Arms-down pose examples may start from, degrees below the T-pose at the
    /// shoulders (0: none). Each K-means example is carried from whichever start pose
    /// is nearer, the rest drape or this one (the rest drape carried here once), so a
    /// walking or standing pose takes a few continuation steps instead of the dozen
    /// from the T-pose (walking arms hang 70–80° down).
    pub start_arm_angle: f32,
    /// Simulator parameters.
    pub sim: SimParams,
    /// Rigging parameters.
    pub rig: RigParams,
}

impl Default for BakeConfig {
    fn default() -> Self {
        Self {
            examples: 40,
            sampler: Sampler::Kmeans,
            seed: 1,
            clip_step: 4,
            limit_samples: 400,
            limit_scale: 0.5,
            mcmc_samples: 200,
            mcmc_mu: 50.0,
            start_arm_angle: 65.0,
            sim: SimParams::default(),
            rig: RigParams::default(),
        }
    }
}

impl BakeConfig {
    /// How many candidate poses [`Baker::candidates`] draws from `clips` (every
    /// `clip_step`-th frame of each) and the joint-limit samples: K-means chooses at
    /// most this many examples besides the rest pose.
    pub fn candidate_count(&self, clips: &[Clip]) -> usize {
        let step = self.clip_step.max(1);
        clips
            .iter()
            .map(|c| c.poses.len().div_ceil(step))
            .sum::<usize>()
            + self.limit_samples
    }
}

/// Why a bake failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BakeError {
    /// A simulation did not converge or its input was bad.
    #[error("simulating example {index}: {source}")]
    Sim {
        /// Example index.
        index: usize,
        /// The solver's error.
        source: SolveError,
    },
    /// The database or a part file could not be written or read.
    #[error(transparent)]
    Db(#[from] DbError),
    /// Rigging failed (degenerate body).
    #[error("rigging: {0}")]
    Rig(#[from] crate::mesh::MeshError),
    /// Nothing to bake.
    #[error("{0}")]
    Config(String),
}

/// Which part of a sharded bake this run computes: examples with index ≡ `index`
/// (mod `count`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Shard {
    /// This shard, 0-based.
    pub index: usize,
    /// Number of shards.
    pub count: usize,
}

impl Shard {
    /// The whole bake.
    pub const ALL: Shard = Shard { index: 0, count: 1 };

    fn owns(&self, i: usize) -> bool {
        i % self.count.max(1) == self.index
    }
}

/// A bake of one garment on one body.
pub struct Baker<'a> {
    body: &'a Body,
    garment: &'a Garment,
    cfg: BakeConfig,
    rest: Equilibrium,
    rest_sensitivity: Sensitivity,
}

/// Progress callback: (examples done, examples to do).
pub type Progress<'p> = &'p (dyn Fn(usize, usize) + Sync);

impl<'a> Baker<'a> {
    /// Drapes the garment at rest and computes its sensitivities (the joint weights of
    /// the K-means distance come from them).
    pub fn new(body: &'a Body, garment: &'a Garment, cfg: BakeConfig) -> Result<Self, BakeError> {
        if cfg.examples == 0 {
            return Err(BakeError::Config(
                "a database needs at least one example".into(),
            ));
        }
        let mut sim = Simulator::new(body, garment, &cfg.sim)
            .map_err(|source| BakeError::Sim { index: 0, source })?;
        let rest = sim
            .drape_rest()
            .map_err(|source| BakeError::Sim { index: 0, source })?;
        let rest_sensitivity = sim
            .sensitivity(&rest)
            .map_err(|source| BakeError::Sim { index: 0, source })?;
        Ok(Self {
            body,
            garment,
            cfg,
            rest,
            rest_sensitivity,
        })
    }

    /// The arms-down pose examples may start from (see
    /// [`BakeConfig::start_arm_angle`]), canonical; `None` when switched off.
    fn arms_down_pose(&self) -> Option<Pose> {
        (self.cfg.start_arm_angle > 0.0).then(|| {
            canonicalize(
                &Pose::arms_lowered(self.cfg.start_arm_angle),
                &self.body.skeleton,
            )
            .0
        })
    }

    /// The rest drape carried to [`Self::arms_down_pose`]; `None` when switched off or
    /// not reached (every example can then start from the rest drape: slower, not
    /// wrong).
    fn arms_down_drape(&self) -> Option<Equilibrium> {
        let pose = self.arms_down_pose()?;
        let carried = Simulator::new(self.body, self.garment, &self.cfg.sim)
            .and_then(|mut sim| sim.carry(&self.rest, &pose));
        match carried {
            Ok(eq) => Some(eq),
            Err(e) => {
                tracing::warn!(error = %e, angle = self.cfg.start_arm_angle, "no equilibrium with the arms lowered; every example starts from the rest drape");
                None
            }
        }
    }

    /// The garment draped at the rest pose.
    pub fn rest(&self) -> &Equilibrium {
        &self.rest
    }

    fn rig_input(&self) -> GarmentRigInput<'_> {
        GarmentRigInput {
            skin: &self.garment.skin,
            region_weights: &self.garment.region_weights,
            regions: self.garment.regions.len(),
        }
    }

    /// Builds the example at `pose` by carrying `from` there. Where the body pinches
    /// the cloth so that no equilibrium is found, the pose half way from `from` is tried
    /// instead (the example then sits there).
    pub fn example(
        &self,
        index: usize,
        from: &Equilibrium,
        pose: &Pose,
    ) -> Result<Example, BakeError> {
        let sim_err = |source| BakeError::Sim { index, source };
        let mut sim = Simulator::new(self.body, self.garment, &self.cfg.sim).map_err(sim_err)?;
        let mut target = *pose;
        let mut attempt = 0;
        let eq = loop {
            if target == from.pose {
                break from.clone();
            }
            match sim.carry(from, &target) {
                Ok(eq) => break eq,
                Err(e @ (SolveError::Stalled { .. } | SolveError::NotConverged { .. }))
                    if attempt < 2 =>
                {
                    tracing::warn!(example = index, error = %e, "no equilibrium at the example pose; trying half way");
                    // canonical again: the synthesis compares canonical poses
                    target = canonicalize(&from.pose.slerp(&target, 0.5), &self.body.skeleton).0;
                    attempt += 1;
                }
                Err(e) => return Err(sim_err(e)),
            }
        };
        let sens = sim.sensitivity(&eq).map_err(sim_err)?;
        self.rig(&eq, &sens)
    }

    fn rig(&self, eq: &Equilibrium, sens: &Sensitivity) -> Result<Example, BakeError> {
        let body_pos = self.body.posed_positions(&eq.pose, SkinningMethod::Lbs);
        let body_nrm =
            TriMesh::new(body_pos.clone(), self.body.mesh.triangles.clone()).vertex_normals();
        let (ex, _) = fit_example(
            &self.body.skeleton,
            &eq.pose,
            &eq.positions_f32(),
            &sens.values,
            &self.rig_input(),
            PosedBody {
                positions: &body_pos,
                normals: &body_nrm,
            },
            &self.cfg.rig,
        )?;
        Ok(ex)
    }

    /// The rest example (SOR's p¹), from the drape.
    pub fn rest_example(&self) -> Result<Example, BakeError> {
        self.rig(&self.rest, &self.rest_sensitivity)
    }

    /// Candidate poses: clip frames and joint-limit samples, deterministic in the seed,
    /// with the arms kept out of the torso (see [`SelfContactGuard`]).
    pub fn candidates(&self, clips: &[Clip]) -> Vec<Pose> {
        let mut rng = Rng::new(self.cfg.seed);
        let mut pool: Vec<Pose> = clips
            .iter()
            .flat_map(|c| clip_poses(c, self.cfg.clip_step, &self.body.skeleton))
            .collect();
        pool.extend(limit_samples(
            self.cfg.limit_samples,
            self.cfg.limit_scale,
            &mut rng,
        ));
        let guard = SelfContactGuard::new(self.body, GUARD_CLEARANCE);
        // the synthesis runs in the canonical frame: examples must be canonical poses
        pool.iter()
            .map(|p| canonicalize(&guard.apply(p), &self.body.skeleton).0)
            .collect()
    }

    /// Where each of [`Baker::candidates`]' poses came from, in the same order: `CLIP,
    /// frame F` (the clip's [`Clip::name`], or `clip N` counting from 1 when it has
    /// none, and F the frame's number in the clip as given, from 0) or `joint-limit
    /// sample I` (from 1). The candidate is that pose with the arms kept out of the
    /// torso, in the canonical frame.
    pub fn candidate_origins(&self, clips: &[Clip]) -> Vec<String> {
        let step = self.cfg.clip_step.max(1);
        clips
            .iter()
            .enumerate()
            .flat_map(|(c, clip)| {
                let name = clip_label(c, clip);
                (0..clip.poses.len())
                    .step_by(step)
                    .map(move |f| format!("{name}, frame {f}"))
            })
            .chain((1..=self.cfg.limit_samples).map(|i| format!("joint-limit sample {i}")))
            .collect()
    }

    /// The example poses K-means chooses (the rest pose first), each with where it came
    /// from ([`Baker::candidate_origins`]; `rest pose` for the first).
    pub fn kmeans_poses(&self, clips: &[Clip]) -> (Vec<Pose>, Vec<String>) {
        let pool = self.candidates(clips);
        let origins = self.candidate_origins(clips);
        let weights = joint_weights(&self.rest_sensitivity.values);
        let mut rng = Rng::new(self.cfg.seed.wrapping_add(17));
        let fixed = [Pose::rest()];
        representatives(&pool, &fixed, self.cfg.examples, &weights, &mut rng)
            .into_iter()
            .map(|c| match c {
                Chosen::Fixed(i) => (fixed[i], REST_ORIGIN.to_string()),
                Chosen::Pool(i) => (pool[i], origins.get(i).cloned().unwrap_or_default()),
            })
            .unzip()
    }

    /// Bakes with K-means poses, in parallel. Finished examples are also written to
    /// `parts` (when given) and read back from there on a rerun, so an interrupted bake
    /// resumes; with a shard, only that shard's examples are built.
    pub fn bake_kmeans(
        &self,
        clips: &[Clip],
        parts: Option<&Path>,
        shard: Shard,
        progress: Progress<'_>,
    ) -> Result<Database, BakeError> {
        let start = Instant::now();
        let (poses, origins) = self.kmeans_poses(clips);
        let mine: Vec<usize> = (0..poses.len()).filter(|&i| shard.owns(i)).collect();
        let done = AtomicUsize::new(0);
        progress(0, mine.len());
        if let Some(dir) = parts {
            std::fs::create_dir_all(dir).map_err(|e| DbError::Io {
                path: dir.display().to_string(),
                message: e.to_string(),
            })?;
        }
        if let Some(dir) = parts {
            self.claim_parts(dir)?;
        }
        // parts finished by an interrupted run of the same settings, read once; a part
        // of another pose (another sampler, seed or example count) is rebuilt
        let cached = |i: usize| {
            parts
                .and_then(|d| std::fs::read(part_path(d, i)).ok())
                .and_then(|b| decode_example(&b).ok())
                .filter(|e| e.positions.len() == self.garment.vertex_count() && e.pose == poses[i])
        };
        let build = |(i, prior): (usize, Option<Example>),
                     from: &Equilibrium|
         -> Result<(usize, Example), BakeError> {
            let ex = match prior {
                Some(e) => e,
                None => {
                    let e = if i == 0 && poses[i] == Pose::rest() {
                        self.rest_example()?
                    } else {
                        self.example(i, from, &poses[i])?
                    };
                    if let Some(d) = parts {
                        write_part(&part_path(d, i), &e)?;
                    }
                    e
                }
            };
            progress(done.fetch_add(1, Ordering::Relaxed) + 1, mine.len());
            Ok((i, ex))
        };
        // each example starts from whichever drape is fewer continuation steps away; the
        // arms-down one is carried while the examples from the rest drape are built
        let step = self.cfg.sim.continuation_step_deg;
        let arms = self.arms_down_pose();
        let (from_arms, from_rest): (Vec<_>, Vec<_>) = mine
            .iter()
            .map(|&i| (i, cached(i)))
            .partition(|(i, _)| match &arms {
                Some(a) => nearest_start(&[Pose::rest(), *a], &poses[*i], step) == 1,
                None => false,
            });
        let carry_arms = from_arms.iter().any(|(_, prior)| prior.is_none());
        let (arms_down, mut results) = rayon::join(
            || carry_arms.then(|| self.arms_down_drape()).flatten(),
            || {
                from_rest
                    .into_par_iter()
                    .map(|job| build(job, &self.rest))
                    .collect::<Vec<_>>()
            },
        );
        let from = arms_down.as_ref().unwrap_or(&self.rest);
        results.par_extend(from_arms.into_par_iter().map(|job| build(job, from)));
        let mut examples = Vec::with_capacity(results.len());
        for r in results {
            examples.push(r?);
        }
        examples.sort_by_key(|(i, _)| *i);
        let sources = self.pose_sources(clips);
        // a shard's database records the origins of its own examples only
        let origins = examples
            .iter()
            .map(|(i, _)| origins.get(*i).cloned().unwrap_or_default())
            .collect();
        let mut db = self.database(
            examples.into_iter().map(|(_, e)| e).collect(),
            "kmeans",
            sources,
            start.elapsed().as_secs_f64(),
        );
        db.bake.origins = origins;
        Ok(db)
    }

    /// Bakes with SOR's greedy sampler (SOR §6, Alg. 1): starting from the rest example,
    /// each new example is the pose of largest residual ‖F‖ of the garment synthesised
    /// from the examples so far, found by Metropolis–Hastings with SOR Eq. 14–15, and
    /// simulated from its nearest example.
    pub fn bake_mcmc(&self, clips: &[Clip], progress: Progress<'_>) -> Result<Database, BakeError> {
        let start = Instant::now();
        let pool = self.candidates(clips);
        let pool_origins = self.candidate_origins(clips);
        let mut origins = vec![REST_ORIGIN.to_string()];
        let mut rng = Rng::new(self.cfg.seed.wrapping_add(31));
        let limits = joint_limits();
        let range: Vec<f32> = (0..DOF_COUNT)
            .map(|m| (limits[m / 3].hi - limits[m / 3].lo)[m % 3].max(1e-3))
            .collect();
        let rest = Pose::rest();
        let theta_norm = |p: &Pose| theta(&rest, p).iter().map(|x| x * x).sum::<f32>().sqrt();
        let c = 0.1 * pool.iter().map(theta_norm).fold(0.0f32, f32::max).max(1e-3);
        let mut examples = vec![self.rest_example()?];
        // new examples are simulated from the nearest equilibrium so far
        let mut equilibria = vec![self.rest.clone()];
        equilibria.extend(self.arms_down_drape());
        let mut sim = Simulator::new(self.body, self.garment, &self.cfg.sim)
            .map_err(|source| BakeError::Sim { index: 0, source })?;
        progress(1, self.cfg.examples);
        let n = self.garment.vertex_count();
        let mut out = vec![Vec3::ZERO; n];
        let mut y64 = vec![glam::DVec3::ZERO; n];
        let mut scale = 0.0f32;
        while examples.len() < self.cfg.examples {
            let db = self.database(examples.clone(), "mcmc", Vec::new(), 0.0);
            let synth = Synthesizer::new(&db, SynthParams::default());
            let mut residual = |p: &Pose| -> f32 {
                let mut st = crate::sor::AvatarState::new();
                let mut sc = crate::sor::Scratch::default();
                synth.synthesize(&mut st, &mut sc, p, 0.0, &mut out);
                for (d, s) in y64.iter_mut().zip(&out) {
                    *d = s.as_dvec3();
                }
                sim.residual(p, &y64).map(|r| r as f32).unwrap_or(0.0)
            };
            // with no candidates at all (no clip, no joint-limit samples) every chain
            // starts from the rest pose
            let chain_start = (rng.next_u64() % pool.len().max(1) as u64) as usize;
            let mut p = pool.get(chain_start).copied().unwrap_or(rest);
            let mut r = residual(&p);
            if scale == 0.0 {
                scale = r.max(1e-9);
            }
            // ξ grows as the database fills: wide exploration first, then local
            let xi = (2.0 + 8.0 * examples.len() as f32 / self.cfg.examples as f32) / scale;
            let objective = |r: f32, p: &Pose| xi * r / (theta_norm(p) + c);
            let (mut best, mut best_r) = (p, r);
            for _ in 0..self.cfg.mcmc_samples {
                // proposal of SOR Eq. 15: Gaussian per DOF, σ = range / √(2μ)
                let mut q = p;
                for j in 0..22 {
                    let rv = quat_log(q.rotations[j]);
                    let d = Vec3::from_array(std::array::from_fn(|a| {
                        rng.normal() * range[3 * j + a] / (2.0 * self.cfg.mcmc_mu).sqrt()
                    }));
                    q.rotations[j] = quat_exp(rv + d);
                }
                let q = canonicalize(&clamp_pose(&q), &self.body.skeleton).0;
                let rq = residual(&q);
                if rq > best_r {
                    best_r = rq;
                    best = q;
                }
                let accept = (objective(rq, &q) - objective(r, &p)).exp().min(1.0);
                if rng.uniform() < accept {
                    p = q;
                    r = rq;
                }
            }
            // simulate the worst pose from its nearest example
            let nearest = (0..equilibria.len())
                .min_by(|&a, &b| {
                    let da: f32 = theta(&equilibria[a].pose, &best)
                        .iter()
                        .map(|x| x * x)
                        .sum();
                    let db: f32 = theta(&equilibria[b].pose, &best)
                        .iter()
                        .map(|x| x * x)
                        .sum();
                    da.total_cmp(&db)
                })
                .unwrap_or(0);
            let index = examples.len();
            let mut esim = Simulator::new(self.body, self.garment, &self.cfg.sim)
                .map_err(|source| BakeError::Sim { index, source })?;
            let eq = esim
                .carry(&equilibria[nearest], &best)
                .map_err(|source| BakeError::Sim { index, source })?;
            let sens = esim
                .sensitivity(&eq)
                .map_err(|source| BakeError::Sim { index, source })?;
            examples.push(self.rig(&eq, &sens)?);
            origins.push(format!(
                "MCMC search from {}",
                pool_origins
                    .get(chain_start)
                    .map_or("the rest pose", String::as_str)
            ));
            equilibria.push(eq);
            progress(examples.len(), self.cfg.examples);
        }
        let sources = self.pose_sources(clips);
        let mut db = self.database(examples, "mcmc", sources, start.elapsed().as_secs_f64());
        db.bake.origins = origins;
        Ok(db)
    }

    /// Where candidate poses came from, for the database's bake record.
    fn pose_sources(&self, clips: &[Clip]) -> Vec<String> {
        clips
            .iter()
            .enumerate()
            .map(|(i, c)| {
                format!(
                    "{} ({} frames, profile {})",
                    clip_label(i, c),
                    c.poses.len(),
                    c.profile
                )
            })
            .chain(std::iter::once(format!(
                "{} joint-limit samples",
                self.cfg.limit_samples
            )))
            .collect()
    }

    /// A database of the given examples for this garment and body.
    pub fn database(
        &self,
        examples: Vec<Example>,
        sampler: &str,
        sources: Vec<String>,
        seconds: f64,
    ) -> Database {
        Database {
            garment: GarmentData::from_garment(self.garment),
            body: BodyData::from_body(self.body),
            examples,
            bake: BakeInfo {
                sampler: sampler.to_string(),
                sources,
                seed: self.cfg.seed,
                built_by: concat!("clothcast ", env!("CARGO_PKG_VERSION")).to_string(),
                sim: serde_json::to_value(&self.cfg.sim).unwrap_or_default(),
                rig: serde_json::to_value(&self.cfg.rig).unwrap_or_default(),
                seconds,
                origins: Vec::new(),
            },
        }
    }
}

/// What a bake's records call clip `index` (from 0) of its clips: its
/// [`Clip::name`], or `clip N` (counting from 1) when it has none.
fn clip_label(index: usize, clip: &Clip) -> String {
    if clip.name.is_empty() {
        format!("clip {}", index + 1)
    } else {
        clip.name.clone()
    }
}

/// Index of the start pose fewest continuation steps of `step_deg` from `pose` (the
/// first of equals; 0 when there is none).
pub fn nearest_start(starts: &[Pose], pose: &Pose, step_deg: f64) -> usize {
    (0..starts.len())
        .min_by_key(|&i| continuation_steps(&starts[i], pose, step_deg))
        .unwrap_or(0)
}

/// Name of the file in a parts folder that records which settings its parts were
/// built with.
const PARTS_KEY_FILE: &str = "settings.key";

impl Baker<'_> {
    /// A hash of everything an example's cloth depends on besides its pose: the body,
    /// the garment (shape, unstressed metric, skin, regions), the simulator and rigging
    /// parameters and the arms-down start.
    fn parts_key(&self) -> String {
        let settings = serde_json::json!({
            "garment": crate::sor::garment_hash(&GarmentData::from_garment(self.garment)),
            "body": crate::sor::body_hash(&BodyData::from_body(self.body)),
            "sim": self.cfg.sim,
            "rig": self.cfg.rig,
            "start_arm_angle": self.cfg.start_arm_angle,
        });
        format!(
            "{:016x}",
            xxhash_rust::xxh3::xxh3_64(settings.to_string().as_bytes())
        )
    }

    /// Makes `dir` hold parts of this bake's settings: parts left by a bake of other
    /// settings (another garment, body or simulator; an older build) are deleted, with
    /// a warning, instead of being mixed into this database.
    fn claim_parts(&self, dir: &Path) -> Result<(), BakeError> {
        let key = self.parts_key();
        let key_path = dir.join(PARTS_KEY_FILE);
        let io = |e: std::io::Error| {
            BakeError::Db(DbError::Io {
                path: dir.display().to_string(),
                message: e.to_string(),
            })
        };
        if std::fs::read_to_string(&key_path).ok().as_deref() == Some(key.as_str()) {
            return Ok(());
        }
        let mut stale = 0;
        for entry in std::fs::read_dir(dir).map_err(io)?.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|x| x == "ccex") {
                std::fs::remove_file(&path).map_err(io)?;
                stale += 1;
            }
        }
        if stale > 0 {
            tracing::warn!(
                parts = stale,
                dir = %dir.display(),
                "finished examples of a bake with other settings discarded"
            );
        }
        std::fs::write(&key_path, &key).map_err(io)
    }
}

/// Part file of example `i`.
pub fn part_path(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!("example-{i:05}.ccex"))
}

fn write_part(path: &Path, e: &Example) -> Result<(), DbError> {
    crate::sor::write_whole(path, &encode_example(e))
}

/// Merges databases of the same garment and body (e.g. the shards of one bake) into one:
/// the union of their examples, duplicates (same pose) dropped.
pub fn merge(dbs: Vec<Database>) -> Result<Database, DbError> {
    let mut it = dbs.into_iter();
    let mut out = it
        .next()
        .ok_or_else(|| DbError::Corrupt("nothing to merge".into()))?;
    for db in it {
        db.check_built_for(&out.garment, &out.body)?;
        for (what, a, b) in [
            ("simulator parameters", &out.bake.sim, &db.bake.sim),
            ("rigging parameters", &out.bake.rig, &db.bake.rig),
        ] {
            if a != b {
                return Err(DbError::SettingsDiffer {
                    what,
                    differences: json_differences(a, b),
                });
            }
        }
        // origins stay one per example: a database that lacks them (baked before they
        // were recorded) contributes empty ones, which read as unknown
        let mut origins: Vec<String> = (0..out.examples.len())
            .map(|i| out.bake.origin(i).unwrap_or_default().to_string())
            .collect();
        for (i, e) in db.examples.iter().enumerate() {
            if !out.examples.iter().any(|x| x.pose == e.pose) {
                out.examples.push(e.clone());
                origins.push(db.bake.origin(i).unwrap_or_default().to_string());
            }
        }
        out.bake.origins = if origins.iter().all(String::is_empty) {
            Vec::new()
        } else {
            origins
        };
        out.bake.seconds += db.bake.seconds;
        for s in db.bake.sources {
            if !out.bake.sources.contains(&s) {
                out.bake.sources.push(s);
            }
        }
    }
    Ok(out)
}

/// The top-level entries in which two JSON values differ, as `name: a vs b` (a key
/// one lacks shows as `absent`); the whole values where either is not an object.
fn json_differences(a: &serde_json::Value, b: &serde_json::Value) -> String {
    let (Some(ma), Some(mb)) = (a.as_object(), b.as_object()) else {
        return format!("{a} vs {b}");
    };
    let show = |v: Option<&serde_json::Value>| v.map_or("absent".to_string(), |v| v.to_string());
    let mut keys: Vec<&String> = ma.keys().chain(mb.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| ma.get(*k) != mb.get(*k))
        .map(|k| format!("{k}: {} vs {}", show(ma.get(k)), show(mb.get(k))))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skeleton::JointId;

    #[test]
    fn examples_start_from_the_drape_fewest_continuation_steps_away() {
        let starts = [Pose::rest(), Pose::arms_lowered(65.0)];
        // arms hanging as in walking: from the arms-down drape (1 step of 6°, not 12)
        assert_eq!(nearest_start(&starts, &Pose::arms_lowered(70.0), 6.0), 1);
        // arms level or raised: from the rest drape
        assert_eq!(nearest_start(&starts, &Pose::arms_lowered(10.0), 6.0), 0);
        assert_eq!(nearest_start(&starts, &Pose::arms_lowered(-30.0), 6.0), 0);
        // one arm level, one hanging: as far from both by the worst joint (65°); the
        // rest drape wins the tie
        let mut mixed = Pose::arms_lowered(65.0);
        mixed.set_rotation(
            JointId::RIGHT_SHOULDER,
            Pose::rest().rotation(JointId::RIGHT_SHOULDER),
        );
        assert_eq!(nearest_start(&starts, &mixed, 6.0), 0);
        // nothing to start from: index 0, which the caller maps to the rest drape
        assert_eq!(nearest_start(&[], &Pose::rest(), 6.0), 0);
    }
}
