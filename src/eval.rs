//! Evaluation of synthesis against simulated ground truth (DESIGN §6): for poses of a
//! clip the bake did not use, the garment is carried quasi-statically along the clip by
//! the simulator (or, with [`Truth::Fresh`], to each pose afresh, as the bake builds
//! its examples), and compared per frame with SOR synthesis, plain LBS of the draped
//! rest garment, and skinning of the nearest example. Reported: mean and max vertex
//! error (cm), penetrating vertices (> 2 mm inside the body), and jitter (mean vertex
//! acceleration, m/s², SOR Fig. 14).

use glam::Vec3;

use crate::bake::nearest_start;
use crate::body::{LbsMatrices, SelfContactGuard, lbs_into};
use crate::mesh::MeshQuery;
use crate::sim::{Equilibrium, Simulator};
use crate::skeleton::{Pose, Rigid, canonicalize, theta};
use crate::sor::{AvatarState, Database, Scratch, SynthParams, Synthesizer};

mod oracle;
mod truth;
use oracle::Oracle;
pub use oracle::OracleSummary;
pub use truth::{GroundTruth, TRUTH_MAGIC, TRUTH_VERSION, TruthFileError, TruthFrame, truth_key};

/// The methods compared.
pub const METHODS: [&str; 3] = ["SOR", "LBS", "nearest"];

/// Penetration depth that counts, metres (DESIGN §6: 2 mm).
pub const PENETRATION_DEPTH: f32 = 0.002;

/// One frame's figures for one method.
#[derive(Copy, Clone, Debug, Default)]
pub struct FrameError {
    /// Mean vertex distance to the ground truth, metres.
    pub mean: f32,
    /// Largest vertex distance, metres.
    pub max: f32,
    /// Vertices more than [`PENETRATION_DEPTH`] inside the body.
    pub penetrating: usize,
    /// Garment edges that pass through the garment's own triangles
    /// ([`crate::sim::self_intersections`]): where it crosses itself.
    pub crossings: usize,
}

/// Per-frame results.
#[derive(Clone, Debug)]
pub struct FrameResult {
    /// Index of the frame in the clip.
    pub frame: usize,
    /// Time in the clip, seconds.
    pub time: f32,
    /// Whether the simulator reached its tolerance at this frame.
    pub converged: bool,
    /// Ground truth's own penetrating vertices.
    pub truth_penetrating: usize,
    /// Ground truth's own edges through itself (as [`FrameError::crossings`]).
    pub truth_crossings: usize,
    /// One entry per method of [`METHODS`].
    pub errors: [FrameError; 3],
}

/// Summary of one method over all frames.
#[derive(Clone, Debug, Default)]
pub struct MethodSummary {
    /// Method name.
    pub name: &'static str,
    /// Mean of per-frame mean errors, metres.
    pub mean: f32,
    /// Largest per-frame max error, metres.
    pub max: f32,
    /// Mean penetrating vertices per frame.
    pub penetrating: f32,
    /// Mean garment edges through the garment itself per frame.
    pub crossings: f32,
    /// Mean vertex acceleration, m/s².
    pub jitter: f32,
}

/// A whole evaluation.
#[derive(Clone, Debug)]
pub struct Evaluation {
    /// Per frame.
    pub frames: Vec<FrameResult>,
    /// Per method, in the order of [`METHODS`].
    pub summary: Vec<MethodSummary>,
    /// Jitter of the ground truth itself, m/s².
    pub truth_jitter: f32,
    /// Frames skipped because the simulator found no equilibrium there.
    pub skipped: usize,
    /// The oracles, when asked for ([`EvalOptions::oracle`]).
    pub oracle: Option<OracleSummary>,
}

/// How each frame's ground truth is reached.
#[derive(Copy, Clone, Debug, PartialEq, Default)]
pub enum Truth {
    /// Carried from the previous frame's equilibrium along the clip: what cloth worn
    /// through the motion does (the cloth's equilibrium depends on the path to it).
    #[default]
    Carried,
    /// Carried afresh for every frame from the rest drape or the drape with the arms
    /// `start_arm_angle` degrees below the T-pose, whichever is fewer continuation
    /// steps away, as the bake builds its examples
    /// ([`crate::bake::BakeConfig::start_arm_angle`]): SOR's interpolation error
    /// without the cloth's path dependence.
    Fresh {
        /// Degrees below the T-pose at the shoulders.
        start_arm_angle: f32,
    },
}

/// What an evaluation compares against, and with which runtime settings.
#[derive(Clone, Debug, Default)]
pub struct EvalOptions {
    /// How each frame's ground truth is reached.
    pub truth: Truth,
    /// SOR's runtime parameters (the papers' defaults).
    pub synth: SynthParams,
    /// Also measure the oracles ([`OracleSummary`]): slower (every example is skinned
    /// at every frame).
    pub oracle: bool,
    /// Poses that drive the methods instead of those the truth is simulated at
    /// (canonical, one per frame; e.g. what a Kinect made of the clip,
    /// [`crate::engine::through_kinect`]): the error of cloth made for what a sensor saw
    /// of a performer against the cloth of the performer's own motion. The methods'
    /// penetrations are then counted against the body at these poses (the body a viewer
    /// sees), the truth's against the body at its own.
    pub driven: Option<Vec<Pose>>,
}

/// Why an evaluation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    /// The simulator failed before any frame.
    #[error("ground truth: {0}")]
    Sim(#[from] crate::sim::SolveError),
    /// No frame to evaluate.
    #[error("no frames to evaluate")]
    NoFrames,
    /// Driving poses of another count than the evaluation's frames.
    #[error("{driven} driving poses for {frames} frames")]
    DrivenMismatch {
        /// Driving poses given.
        driven: usize,
        /// Frames evaluated.
        frames: usize,
    },
    /// Bad mesh data in the database.
    #[error(transparent)]
    Mesh(#[from] crate::mesh::MeshError),
    /// A ground truth of another size than the evaluation's.
    #[error(
        "ground truth has {frames} frames of {vertices} vertices; this evaluation needs {expected_frames} of {expected_vertices}"
    )]
    TruthMismatch {
        /// Frames in the ground truth.
        frames: usize,
        /// Vertices per frame in the ground truth.
        vertices: usize,
        /// Frames evaluated.
        expected_frames: usize,
        /// The database's garment vertex count.
        expected_vertices: usize,
    },
}

/// Mean vertex acceleration of a sequence, accumulated frame by frame (keeps only the
/// two previous frames).
#[derive(Default)]
struct Jitter {
    prev: Vec<Vec3>,
    prev2: Vec<Vec3>,
    frames: usize,
    total: f64,
    count: usize,
}

impl Jitter {
    fn push(&mut self, ys: &[Vec3], dt: f32) {
        if self.frames >= 2 {
            for ((a, b), c) in ys.iter().zip(&self.prev).zip(&self.prev2) {
                self.total += f64::from(((*a - 2.0 * *b + *c) / (dt * dt)).length());
                self.count += 1;
            }
        }
        std::mem::swap(&mut self.prev, &mut self.prev2);
        self.prev.clear();
        self.prev.extend_from_slice(ys);
        self.frames += 1;
    }

    /// m/s², 0 with fewer than three frames.
    fn mean(&self) -> f32 {
        (self.total / self.count.max(1) as f64) as f32
    }
}

/// The poses an evaluation measures: `poses` with the bake's arm guard applied, in the
/// canonical frame (what the ground truth is simulated at and SOR is given).
pub fn canonical_poses(db: &Database, poses: &[Pose]) -> Vec<Pose> {
    let body = db.body.to_body();
    let guard = SelfContactGuard::new(&body, crate::bake::GUARD_CLEARANCE);
    poses
        .iter()
        .map(|p| canonicalize(&guard.apply(p), &body.skeleton).0)
        .collect()
}

/// Simulates the ground truth at `canonical` (see [`canonical_poses`]), reached as
/// `truth_from` says. `progress(done, total)` is called per frame.
pub fn simulate_truth(
    db: &Database,
    canonical: &[Pose],
    truth_from: Truth,
    progress: &dyn Fn(usize, usize),
) -> Result<GroundTruth, EvalError> {
    if canonical.is_empty() {
        return Err(EvalError::NoFrames);
    }
    let body = db.body.to_body();
    let garment = db.garment.to_garment();
    // the simulator that baked the database (its self-contact, say)
    let params = db.bake.sim_params();
    let mut sim = Simulator::new(&body, &garment, &params)?;
    let rest = sim.drape_rest()?;
    let rest_eq = rest.clone();
    let rest_shape = rest.positions_f32();
    // fresh ground truth: the arms-down start the bake carries its examples from
    let arms_down = match truth_from {
        Truth::Fresh { start_arm_angle } if start_arm_angle > 0.0 => {
            let pose = canonicalize(&Pose::arms_lowered(start_arm_angle), &body.skeleton).0;
            match sim.carry(&rest_eq, &pose) {
                Ok(eq) => Some(eq),
                Err(e) => {
                    tracing::warn!(error = %e, "no equilibrium with the arms lowered; every frame starts from the rest drape");
                    None
                }
            }
        }
        _ => None,
    };
    let mut current: Equilibrium = rest;
    let mut frames = Vec::with_capacity(canonical.len());
    for (k, canonical) in canonical.iter().enumerate() {
        progress(k, frames.capacity());
        // carried from the previous frame; where that fails (cloth pinched between
        // moving limbs), carried afresh from the rest drape so one failure does not
        // strand every later frame
        let carried = match truth_from {
            Truth::Carried => sim.carry(&current, canonical).or_else(|e| {
                tracing::debug!(k, error = %e, "carry from the previous frame failed; carrying from rest");
                sim.carry(&rest_eq, canonical)
            }),
            Truth::Fresh { .. } => {
                let step = params.continuation_step_deg;
                let from = match &arms_down {
                    Some(a) if nearest_start(&[rest_eq.pose, a.pose], canonical, step) == 1 => a,
                    _ => &rest_eq,
                };
                sim.carry(from, canonical)
            }
        };
        frames.push(match carried {
            Ok(eq) => {
                let frame = TruthFrame {
                    converged: eq.report.converged() && eq.report.unconverged_steps == 0,
                    positions: eq.positions_f32(),
                };
                current = eq;
                Some(frame)
            }
            Err(e) => {
                tracing::warn!(k, error = %e, "no equilibrium; frame skipped");
                None
            }
        });
    }
    progress(canonical.len(), canonical.len());
    Ok(GroundTruth {
        key: truth_key(db, canonical, truth_from, &params),
        vertices: garment.vertex_count(),
        rest: rest_shape,
        frames,
    })
}

/// Evaluates `db` on `poses` (world-frame clip poses, `dt` seconds apart; `frames`
/// their indices in the clip): simulates the ground truth, then [`compare`]s.
/// `progress(done, total)` is called per frame of the simulation.
pub fn evaluate(
    db: &Database,
    poses: &[Pose],
    frames: &[usize],
    dt: f32,
    options: &EvalOptions,
    progress: &dyn Fn(usize, usize),
) -> Result<Evaluation, EvalError> {
    let canonical = canonical_poses(db, poses);
    let truth = simulate_truth(db, &canonical, options.truth, progress)?;
    compare(db, &canonical, frames, dt, &truth, options)
}

/// Compares SOR (runtime parameters `options.synth`), LBS of the draped rest garment and
/// skinning of the nearest example with `truth` at `canonical` (see
/// [`canonical_poses`]; `frames` their indices in the clip, `dt` seconds apart).
/// Frames without a ground truth are skipped (SOR's damping sees the gap).
pub fn compare(
    db: &Database,
    canonical: &[Pose],
    frames: &[usize],
    dt: f32,
    truth: &GroundTruth,
    options: &EvalOptions,
) -> Result<Evaluation, EvalError> {
    if canonical.is_empty() {
        return Err(EvalError::NoFrames);
    }
    let driven = options.driven.as_deref().unwrap_or(canonical);
    if driven.len() != canonical.len() {
        return Err(EvalError::DrivenMismatch {
            driven: driven.len(),
            frames: canonical.len(),
        });
    }
    let n = db.vertex_count();
    if truth.frames.len() != canonical.len() || truth.vertices != n || truth.rest.len() != n {
        return Err(EvalError::TruthMismatch {
            frames: truth.frames.len(),
            vertices: truth.vertices,
            expected_frames: canonical.len(),
            expected_vertices: n,
        });
    }
    let body = db.body.to_body();
    let garment = db.garment.to_garment();
    // the simulator that baked the database (its self-contact, say)
    let params = db.bake.sim_params();
    let synth = Synthesizer::new(db, options.synth.clone());
    // the oracles, and SOR before penetration handling to compare them with (only when
    // asked for: preparing a synthesizer re-expresses every example at every vertex)
    let unprojected = options.oracle.then(|| {
        Synthesizer::new(
            db,
            SynthParams {
                resolve_penetration: false,
                ..options.synth.clone()
            },
        )
    });
    let mut oracle = unprojected
        .as_ref()
        .map(|u| (Oracle::new(db, u), u, AvatarState::new(), 0.0f64));
    // LBS skins the rest drape the truth started from
    let rest_shape = &truth.rest;
    let mut state = AvatarState::new();
    let mut scratch = Scratch::default();
    let mut sor_out = vec![Vec3::ZERO; n];
    let mut lbs_out = vec![Vec3::ZERO; n];
    let mut near_out = vec![Vec3::ZERO; n];
    let mut unprojected_out = vec![Vec3::ZERO; n];
    let mut body_pos = vec![Vec3::ZERO; body.mesh.vertex_count()];
    let mut query = MeshQuery::build(&body.mesh)?;
    let mut results = Vec::new();
    let mut jitter: [Jitter; 4] = Default::default();
    let mut skipped = 0;
    let mut truth_body = options
        .driven
        .is_some()
        .then(|| (body_pos.clone(), query.clone()));
    for (k, (((at, canonical), &frame), truth)) in canonical
        .iter()
        .zip(driven)
        .zip(frames)
        .zip(&truth.frames)
        .enumerate()
    {
        let Some(truth) = truth else {
            skipped += 1;
            continue;
        };
        let truth32 = &truth.positions;
        // SOR (damped across frames), LBS of the draped rest shape, nearest example
        synth.synthesize(&mut state, &mut scratch, canonical, dt, &mut sor_out);
        let t = body.skeleton.skinning_transforms(canonical);
        lbs_into(
            rest_shape,
            &garment.skin,
            &LbsMatrices::new(&t),
            &mut lbs_out,
        );
        let nearest = db
            .examples
            .iter()
            .enumerate()
            .min_by(|a, b| {
                let d = |e: &crate::sor::Example| -> f32 {
                    let th = theta(&e.pose, canonical);
                    (0..db.region_count())
                        .map(|g| {
                            e.distance_weights[g * 66..(g + 1) * 66]
                                .iter()
                                .zip(&th)
                                .map(|(u, t)| u * t * t)
                                .sum::<f32>()
                        })
                        .sum()
                };
                d(a.1).total_cmp(&d(b.1))
            })
            .map(|(i, _)| i)
            .unwrap_or(0);
        let ex = &db.examples[nearest];
        let te = body.skeleton.skinning_transforms(&ex.pose);
        let rel: [Rigid; 22] = std::array::from_fn(|b| t[b].compose(&te[b].inverse()));
        lbs_into(
            &ex.positions,
            &garment.skin,
            &LbsMatrices::new(&rel),
            &mut near_out,
        );
        // penetration against the body posed at this frame
        body.pose_into(canonical, params.body_skinning, &mut body_pos);
        query.update(&body_pos);
        let count_inside = |ys: &[Vec3]| {
            ys.iter()
                .filter(|p| query.signed_distance(**p) < -PENETRATION_DEPTH)
                .count()
        };
        let crossings_of = |ys: &[Vec3]| {
            let y: Vec<glam::DVec3> = ys.iter().map(|p| p.as_dvec3()).collect();
            crate::sim::self_intersections(&y, &garment.mesh.triangles)
        };
        let error_of = |ys: &[Vec3]| {
            let d: Vec<f32> = ys
                .iter()
                .zip(truth32)
                .map(|(a, b)| (*a - *b).length())
                .collect();
            FrameError {
                mean: d.iter().sum::<f32>() / d.len() as f32,
                max: d.iter().copied().fold(0.0, f32::max),
                penetrating: count_inside(ys),
                crossings: crossings_of(ys),
            }
        };
        let errors = [error_of(&sor_out), error_of(&lbs_out), error_of(&near_out)];
        if let Some((o, unprojected, state, sum)) = &mut oracle {
            o.push(canonical, truth32);
            unprojected.synthesize(state, &mut scratch, canonical, dt, &mut unprojected_out);
            *sum += f64::from(error_of(&unprojected_out).mean);
        }
        let truth_penetrating = match &mut truth_body {
            Some((positions, q)) => {
                body.pose_into(at, params.body_skinning, positions);
                q.update(positions);
                truth32
                    .iter()
                    .filter(|p| q.signed_distance(**p) < -PENETRATION_DEPTH)
                    .count()
            }
            None => count_inside(truth32),
        };
        results.push(FrameResult {
            frame,
            time: k as f32 * dt,
            converged: truth.converged,
            truth_penetrating,
            truth_crossings: crossings_of(truth32),
            errors,
        });
        for (j, ys) in jitter
            .iter_mut()
            .zip([&sor_out, &lbs_out, &near_out, truth32])
        {
            j.push(ys, dt);
        }
    }
    if results.is_empty() {
        return Err(EvalError::NoFrames);
    }
    let summary = METHODS
        .iter()
        .enumerate()
        .map(|(m, name)| MethodSummary {
            name,
            mean: results.iter().map(|r| r.errors[m].mean).sum::<f32>() / results.len() as f32,
            max: results.iter().map(|r| r.errors[m].max).fold(0.0, f32::max),
            penetrating: results
                .iter()
                .map(|r| r.errors[m].penetrating as f32)
                .sum::<f32>()
                / results.len() as f32,
            crossings: results
                .iter()
                .map(|r| r.errors[m].crossings as f32)
                .sum::<f32>()
                / results.len() as f32,
            jitter: jitter[m].mean(),
        })
        .collect();
    let oracle = oracle.map(|(o, _, _, sum)| o.summary((sum / results.len() as f64) as f32));
    Ok(Evaluation {
        frames: results,
        summary,
        truth_jitter: jitter[3].mean(),
        skipped,
        oracle,
    })
}

#[cfg(test)]
mod tests {
    use super::Jitter;
    use glam::Vec3;

    #[test]
    fn jitter_is_the_mean_vertex_acceleration() {
        // x = ½ a t² with a = 2 m/s², sampled at 10 Hz, two vertices
        let (dt, mut j) = (0.1f32, Jitter::default());
        for k in 0..6 {
            let t = k as f32 * dt;
            j.push(
                &[Vec3::new(t * t, 0.0, 0.0), Vec3::new(0.0, 5.0, t * t)],
                dt,
            );
        }
        assert!((j.mean() - 2.0).abs() < 1e-3, "{}", j.mean());
        let mut short = Jitter::default();
        short.push(&[Vec3::ONE], dt);
        short.push(&[Vec3::ZERO], dt);
        assert_eq!(short.mean(), 0.0);
    }
}
