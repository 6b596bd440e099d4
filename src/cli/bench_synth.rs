//! `clothcast bench synth`: avatar-frames per second of SOR synthesis (many avatars
//! sharing one database, rayon over avatars) with 1 and 2 threads, next to plain LBS of
//! the same mesh in the same run.

use std::time::Instant;

use clap::Args;
use glam::Vec3;

use super::binding::Binding;
use crate::bake::DEFAULT_CLIP;
use crate::body::{Body, LbsMatrices, lbs_into};
use crate::garment::{Garment, GarmentConfig};
use crate::mesh::TriMesh;
use crate::mocap::Clip;
use crate::skeleton::{Pose, canonicalize};
use crate::sor::{
    AvatarJob, AvatarState, Database, Example, GarmentData, SynthParams, Synthesizer,
    synthesize_all,
};

/// Arguments of `clothcast bench synth`.
#[derive(Args, Debug)]
pub(crate) struct SynthBench {
    /// Example database (default: the default database).
    #[arg(long)]
    db: Option<std::path::PathBuf>,
    /// Number of avatars (1 to 4096).
    #[arg(long, default_value_t = 64, value_parser = super::common::parse_count::<4096>)]
    avatars: usize,
    /// Seconds to measure each figure for.
    #[arg(long, default_value_t = 2.0, value_parser = super::common::parse_seconds)]
    seconds: f32,
    /// Vertex count of the large garment.
    #[arg(long, default_value_t = 12500)]
    large: usize,
    /// Examples used per region (K), 1–64.
    #[arg(long, default_value_t = 5, value_parser = super::common::parse_count::<64>)]
    top_k: usize,
    /// Each figure's measuring time is split into this many equal windows and the
    /// fastest window is reported (on a shared machine the slow windows measure the
    /// neighbours).
    #[arg(long, default_value_t = 5)]
    passes: usize,
    /// Run SOR's SSE2 vertex loop even where the CPU has AVX2 and FMA (to compare).
    #[arg(long)]
    sse2: bool,
    /// A database of a garment worn under the first (`pants.ccdb`, baked for the same
    /// body): also time an outfit's frame, both syntheses and their layering.
    #[arg(long)]
    under: Option<std::path::PathBuf>,
    /// A database of a garment worn over the first (`pants.ccdb`: the shirt tucked into
    /// the pants): times and counts that outfit as `--under` does.
    #[arg(long)]
    over: Option<std::path::PathBuf>,
    /// Which garment of the outfit gives way where the two overlap: `looser` (the
    /// server's default), `outer` or `inner` (`[engine.layers] gives_way`).
    #[arg(long, default_value = "looser", value_parser = parse_gives_way)]
    gives_way: crate::sor::GivesWay,
    #[command(flatten)]
    synth: super::common::SynthArgs,
}

/// `looser`, `outer` or `inner`, as the config spells them.
fn parse_gives_way(s: &str) -> Result<crate::sor::GivesWay, String> {
    #[derive(serde::Deserialize)]
    struct W {
        w: crate::sor::GivesWay,
    }
    toml::from_str::<W>(&format!("w = {s:?}"))
        .map(|w| w.w)
        .map_err(|_| format!("{s:?}: expected looser, outer or inner"))
}

/// Runs `step` (which returns the avatar-frames it did) for `seconds`, split into
/// `passes` windows; returns the avatar-frames per second of the fastest window.
fn best_rate(seconds: f32, passes: usize, mut step: impl FnMut() -> usize) -> f64 {
    let passes = passes.max(1);
    let window = seconds / passes as f32;
    let mut best = 0f64;
    for _ in 0..passes {
        let t = Instant::now();
        let mut done = 0usize;
        while t.elapsed().as_secs_f32() < window {
            done += step();
        }
        best = best.max(done as f64 / t.elapsed().as_secs_f64());
    }
    best
}

/// The database's examples carried to a finer mesh of the same garment: positions by
/// barycentric binding to the coarse rest shape (plus the normal offset), per-vertex
/// rig data from the coarse triangle's dominant vertex. Same poses, example count and
/// regions, so synthesis costs what a database baked at that resolution would.
fn refine(db: &Database, fine: &Garment) -> anyhow::Result<Database> {
    let coarse = TriMesh::new(db.garment.rest.clone(), db.garment.triangles.clone());
    let binding = Binding::new(&coarse, &fine.mesh.positions)?;
    let dominant = binding.dominant();
    let n = dominant.len();
    let examples = db
        .examples
        .iter()
        .map(|e| Example {
            pose: e.pose,
            positions: (0..n).map(|v| binding.point(&e.positions, v)).collect(),
            remote_bone: dominant.iter().map(|&c| e.remote_bone[c]).collect(),
            alpha: dominant.iter().map(|&c| e.alpha[c]).collect(),
            translation: dominant.iter().map(|&c| e.translation[c]).collect(),
            body_vertex: dominant.iter().map(|&c| e.body_vertex[c]).collect(),
            clearance: dominant.iter().map(|&c| e.clearance[c]).collect(),
            distance_weights: e.distance_weights.clone(),
        })
        .collect();
    Ok(Database {
        garment: GarmentData::from_garment(fine),
        body: db.body.clone(),
        examples,
        bake: db.bake.clone(),
    })
}

pub(crate) fn run(b: SynthBench) -> anyhow::Result<()> {
    let db = super::serve::load_db(b.db.as_ref())?;
    let body = db.body.to_body();
    let clip = Clip::from_bvh_text(DEFAULT_CLIP, None, &body.skeleton)?;
    // the arms kept out of the torso, as the server keeps them
    let guard = crate::body::SelfContactGuard::new(&body, crate::bake::GUARD_CLEARANCE);
    let poses: Vec<Pose> = clip
        .poses
        .iter()
        .step_by(4)
        .map(|p| canonicalize(&guard.apply(p), &body.skeleton).0)
        .collect();
    let mut cfg = GarmentConfig::builtin("tshirt")?;
    cfg.target_vertices = b.large;
    let large = refine(&db, &Garment::generate(&Body::default_body()?, &cfg)?)?;
    accuracy_of_min_share(&db, &poses, &b.synth, b.top_k);
    outln!(
        "SOR synthesis: {} avatars sharing one database, {} examples, K = {}, walking poses (CMU 131_01)",
        b.avatars,
        db.examples.len(),
        b.top_k
    );
    // both tables use the same two synthesizers (preparing one re-expresses every
    // example at every vertex: seconds at 12 500 vertices)
    let mut params = SynthParams {
        top_k: b.top_k,
        wide: !b.sse2,
        ..SynthParams::default()
    };
    b.synth.apply(&mut params);
    let synths = [&db, &large].map(|d| Synthesizer::new(d, params.clone()));
    outln!("SOR's vertex loop: {}", synths[0].vertex_loop());
    outln!(
        "{:>8} {:>7} | {:>14} {:>14} | {:>9}",
        "vertices",
        "threads",
        "SOR avatar-fps",
        "LBS avatar-fps",
        "SOR / LBS"
    );
    for synth in &synths {
        let d = synth.database();
        for threads in [1usize, 2] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()?;
            let sor = pool.install(|| measure_sor(synth, &poses, b.avatars, b.seconds, b.passes));
            let lbs =
                pool.install(|| measure_lbs(d, &body, &poses, b.avatars, b.seconds, b.passes));
            outln!(
                "{:>8} {:>7} | {:>14.0} {:>14.0} | {:>8.2}×",
                d.vertex_count(),
                threads,
                sor,
                lbs,
                lbs / sor
            );
        }
    }
    outln!(
        "one frame, one avatar, one thread: mean over {} walking poses of the fastest of {} runs each",
        FRAME_POSES,
        FRAME_RUNS
    );
    outln!(
        "{:>8} | {:>10} {:>10} | {:>9}",
        "vertices",
        "SOR µs",
        "LBS µs",
        "SOR / LBS"
    );
    for synth in &synths {
        let (sor, lbs) = frame_times(synth, &body, &poses);
        outln!(
            "{:>8} | {:>10.1} {:>10.1} | {:>8.2}×",
            synth.database().vertex_count(),
            sor * 1e6,
            lbs * 1e6,
            sor / lbs
        );
    }
    if let Some(path) = &b.under {
        let under = super::serve::load_db(Some(path))?;
        let inner = Synthesizer::new(&under, params.clone());
        outfit_times(&inner, &synths[0], &body, &poses, b.gives_way)?;
    }
    if let Some(path) = &b.over {
        let over = super::serve::load_db(Some(path))?;
        let outer = Synthesizer::new(&over, params.clone());
        outfit_times(&synths[0], &outer, &body, &poses, b.gives_way)?;
    }
    Ok(())
}

/// Prints what one frame of an outfit costs, `inner` worn under `outer` (both baked
/// for `body`), one avatar on this thread: each garment's synthesis and their layering
/// (`sor::Layering`), per frame of the walk in order (the layering's walks start where
/// the last frame's ended, as an avatar's do), the fastest of 5 passes per frame,
/// averaged; then how far the two overlap, and how many of each garment's vertices are
/// inside the body, before and after layering.
fn outfit_times(
    inner: &Synthesizer<'_>,
    outer: &Synthesizer<'_>,
    body: &Body,
    poses: &[Pose],
    gives_way: crate::sor::GivesWay,
) -> anyhow::Result<()> {
    use crate::sor::{LayerParams, LayerScratch, LayerState, Layering, Scratch};
    let (inner_db, outer_db) = (inner.database(), outer.database());
    let params = LayerParams {
        gives_way,
        ..LayerParams::default()
    };
    let layering = Layering::new(inner_db, outer_db, &params)?;
    let (no, ni) = (outer_db.vertex_count(), inner_db.vertex_count());
    let (mut out_o, mut out_i) = (vec![Vec3::ZERO; no], vec![Vec3::ZERO; ni]);
    let (mut scratch, mut layer_scratch) = (Scratch::default(), LayerScratch::default());
    let mut best = vec![[f64::INFINITY; 3]; poses.len()];
    for _ in 0..5 {
        let (mut so, mut si, mut sl) = (
            AvatarState::new(),
            AvatarState::new(),
            LayerState::default(),
        );
        for (p, best) in poses.iter().zip(best.iter_mut()) {
            let t = Instant::now();
            outer.synthesize(&mut so, &mut scratch, p, 1.0 / 30.0, &mut out_o);
            let t1 = t.elapsed().as_secs_f64();
            inner.synthesize(&mut si, &mut scratch, p, 1.0 / 30.0, &mut out_i);
            let t2 = t.elapsed().as_secs_f64();
            layering.apply(&mut out_i, &mut out_o, &mut sl, &mut layer_scratch);
            let t3 = t.elapsed().as_secs_f64();
            std::hint::black_box((&out_o, &out_i));
            for (b, v) in best.iter_mut().zip([t1, t2 - t1, t3 - t2]) {
                *b = b.min(v);
            }
        }
    }
    // how well the layering keeps them apart, over the same frames in order
    let (mut sl, mut so, mut si) = (
        LayerState::default(),
        AvatarState::new(),
        AvatarState::new(),
    );
    let (mut layered_o, mut layered_i) = (vec![Vec3::ZERO; no], vec![Vec3::ZERO; ni]);
    let (mut bare, mut after) = (Overlap::default(), Overlap::default());
    // closest-point trees built once and refitted to each frame's positions
    let query = |positions: &[Vec3], triangles: &[[u32; 3]]| {
        crate::mesh::MeshQuery::build(&TriMesh::new(positions.to_vec(), triangles.to_vec()))
    };
    let (ti, to) = (&inner_db.garment.triangles, &outer_db.garment.triangles);
    let (mut q_inner, mut q_outer) = (
        query(&inner_db.garment.rest, ti)?,
        query(&outer_db.garment.rest, to)?,
    );
    let mut q_body = query(&body.mesh.positions, &body.mesh.triangles)?;
    let mut body_at = body.mesh.positions.clone();
    // vertices more than eval's depth inside the body: [inner, outer] × [unlayered, layered]
    let mut in_body = [[0usize; 2]; 2];
    for p in poses {
        outer.synthesize(&mut so, &mut scratch, p, 1.0 / 30.0, &mut out_o);
        inner.synthesize(&mut si, &mut scratch, p, 1.0 / 30.0, &mut out_i);
        layered_o.copy_from_slice(&out_o);
        layered_i.copy_from_slice(&out_i);
        layering.apply(&mut layered_i, &mut layered_o, &mut sl, &mut layer_scratch);
        for (o, (i_at, o_at)) in [
            (&mut bare, (&out_i, &out_o)),
            (&mut after, (&layered_i, &layered_o)),
        ] {
            q_inner.update(i_at);
            q_outer.update(o_at);
            o.add((&q_inner, i_at), (&q_outer, o_at));
        }
        body.pose_into(p, crate::body::SkinningMethod::Lbs, &mut body_at);
        q_body.update(&body_at);
        let inside = |ys: &[Vec3]| {
            ys.iter()
                .filter(|y| q_body.signed_distance(**y) < -crate::eval::PENETRATION_DEPTH)
                .count()
        };
        for (k, (a, b)) in [(&out_i, &layered_i), (&out_o, &layered_o)]
            .into_iter()
            .enumerate()
        {
            in_body[k][0] += inside(a);
            in_body[k][1] += inside(b);
        }
    }
    let mean = |k: usize| best.iter().map(|b| b[k]).sum::<f64>() / best.len().max(1) as f64;
    let (iname, oname) = (&inner_db.garment.name, &outer_db.garment.name);
    outln!(
        "an outfit, {iname} under {oname} ({} gives way): one avatar, one thread, {} walking frames in order, the fastest of 5 passes each",
        if layering.tucks() { iname } else { oname },
        poses.len()
    );
    outln!(
        "{:>14} {:>14} {:>14} | {:>15}",
        format!("{oname} µs"),
        format!("{iname} µs"),
        "layering µs",
        "layering / outer"
    );
    outln!(
        "{:>14.1} {:>14.1} {:>14.1} | {:>14.2}×",
        mean(0) * 1e6,
        mean(1) * 1e6,
        mean(2) * 1e6,
        mean(2) / mean(0)
    );
    outln!(
        "{:>10} | {:>27} | {:>27} | {:>12} {:>12}",
        "",
        format!("{oname} inside {iname}"),
        format!("{iname} out through {oname}"),
        format!("{iname} in body"),
        format!("{oname} in body"),
    );
    outln!(
        "{:>10} | {:>14} {:>12} | {:>14} {:>12} | {:>25}",
        "",
        "vertex-frames",
        "deepest mm",
        "vertex-frames",
        "farthest mm",
        "vertex-frames (> 2 mm)"
    );
    for (k, (name, o)) in [("unlayered", &bare), ("layered", &after)]
        .into_iter()
        .enumerate()
    {
        outln!(
            "{:>10} | {:>14} {:>12.1} | {:>14} {:>12.1} | {:>12} {:>12}",
            name,
            o.inside,
            o.deepest * 1e3,
            o.poking,
            o.farthest * 1e3,
            in_body[0][k],
            in_body[1][k]
        );
    }
    Ok(())
}

/// How two garments of an outfit overlap, summed over frames: outer vertices inside
/// the inner garment and inner vertices out through the outer one, each counted where
/// its closest point on the other garment (within 3 cm) is on a face (not beyond the
/// other's edge, where neither is over the other).
#[derive(Default)]
struct Overlap {
    inside: usize,
    deepest: f32,
    poking: usize,
    farthest: f32,
}

impl Overlap {
    /// Adds one frame: each garment's positions with its closest-point tree (already
    /// refitted to them).
    fn add(
        &mut self,
        (inner_query, inner): (&crate::mesh::MeshQuery, &[Vec3]),
        (outer_query, outer): (&crate::mesh::MeshQuery, &[Vec3]),
    ) {
        use crate::mesh::{Feature, MeshQuery};
        // signed distances of `points` from the surface, where over one of its faces
        let over = |q: &MeshQuery, points: &[Vec3]| -> Vec<f32> {
            points
                .iter()
                .filter_map(|&p| {
                    q.closest_within(p, 0.03)
                        .filter(|h| h.feature == Feature::Face)
                        .map(|h| h.signed_distance(p))
                })
                .collect()
        };
        for d in over(inner_query, outer) {
            if d < 0.0 {
                self.inside += 1;
                self.deepest = self.deepest.max(-d);
            }
        }
        for d in over(outer_query, inner) {
            if d > 0.0 {
                self.poking += 1;
                self.farthest = self.farthest.max(d);
            }
        }
    }
}

/// Poses and runs per pose of [`frame_times`].
const FRAME_POSES: usize = 24;
const FRAME_RUNS: usize = 60;

/// Seconds per frame of SOR synthesis and of plain LBS of the same mesh for one avatar
/// on this thread: for each of [`FRAME_POSES`] poses spread over the clip, the fastest
/// of [`FRAME_RUNS`] runs (a fresh avatar each run, so no damping), averaged. Unlike a
/// throughput figure, the fastest run hardly depends on what the machine's neighbours
/// do, so this is the figure to compare two builds by.
fn frame_times(synth: &Synthesizer<'_>, body: &Body, poses: &[Pose]) -> (f64, f64) {
    let db = synth.database();
    let n = db.vertex_count();
    let picked: Vec<&Pose> = poses
        .iter()
        .step_by((poses.len() / FRAME_POSES).max(1))
        .take(FRAME_POSES)
        .collect();
    let mut out = vec![Vec3::ZERO; n];
    let mut scratch = crate::sor::Scratch::default();
    let rest = &db.examples[0].positions;
    let mut sor = vec![f64::INFINITY; picked.len()];
    let mut lbs = vec![f64::INFINITY; picked.len()];
    for _ in 0..FRAME_RUNS {
        for (i, p) in picked.iter().enumerate() {
            let mut state = AvatarState::new();
            let t = Instant::now();
            synth.synthesize(&mut state, &mut scratch, p, 1.0 / 30.0, &mut out);
            sor[i] = sor[i].min(t.elapsed().as_secs_f64());
            std::hint::black_box(&out);
            let t = Instant::now();
            let m = LbsMatrices::new(&body.skeleton.skinning_transforms(p));
            lbs_into(rest, &db.garment.skin, &m, &mut out);
            lbs[i] = lbs[i].min(t.elapsed().as_secs_f64());
            std::hint::black_box(&out);
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    (mean(&sor), mean(&lbs))
}

/// Prints what skipping examples below `min_share` costs in accuracy, on the same poses.
fn accuracy_of_min_share(
    db: &Database,
    poses: &[Pose],
    settings: &super::common::SynthArgs,
    top_k: usize,
) {
    let mut params = SynthParams {
        top_k,
        ..SynthParams::default()
    };
    settings.apply(&mut params);
    let min_share = params.min_share;
    let exact = Synthesizer::new(
        db,
        SynthParams {
            min_share: 0.0,
            ..params.clone()
        },
    );
    let fast = Synthesizer::new(db, params);
    let n = db.vertex_count();
    let (mut a, mut c) = (vec![Vec3::ZERO; n], vec![Vec3::ZERO; n]);
    let (mut sa, mut sc) = (AvatarState::new(), AvatarState::new());
    let (mut xa, mut xc) = (
        crate::sor::Scratch::default(),
        crate::sor::Scratch::default(),
    );
    let (mut worst, mut sum, mut count) = (0f32, 0f64, 0usize);
    // the deviation's change from one frame to the next: the jump (pop) the cut adds
    let mut last = vec![Vec3::ZERO; n];
    let mut jump = 0f32;
    for (f, p) in poses.iter().take(200).enumerate() {
        exact.synthesize(&mut sa, &mut xa, p, 1.0 / 30.0, &mut a);
        fast.synthesize(&mut sc, &mut xc, p, 1.0 / 30.0, &mut c);
        for ((x, y), l) in a.iter().zip(&c).zip(&mut last) {
            let dev = *y - *x;
            let d = dev.length();
            worst = worst.max(d);
            if f > 0 {
                jump = jump.max((dev - *l).length());
            }
            *l = dev;
            sum += f64::from(d);
            count += 1;
        }
    }
    outln!(
        "min_share = {}: vertices move by {:.3} mm on average, {:.2} mm at most, against keeping every example (200 walking poses at 30 fps); the cut adds at most {:.2} mm to a vertex's motion between two frames",
        min_share,
        sum / count.max(1) as f64 * 1000.0,
        worst * 1000.0,
        jump * 1000.0
    );
}

/// Avatar-frames per second of SOR synthesis (after one warm-up frame per avatar), best
/// window of [`best_rate`].
fn measure_sor(
    synth: &Synthesizer<'_>,
    poses: &[Pose],
    avatars: usize,
    seconds: f32,
    passes: usize,
) -> f64 {
    let n = synth.database().vertex_count();
    let mut states: Vec<AvatarState> = (0..avatars).map(|_| AvatarState::new()).collect();
    let mut outs: Vec<Vec<Vec3>> = (0..avatars).map(|_| vec![Vec3::ZERO; n]).collect();
    let mut frame = 0usize;
    let step = |frame: usize, states: &mut [AvatarState], outs: &mut [Vec<Vec3>]| {
        let mut jobs: Vec<AvatarJob<'_>> = states
            .iter_mut()
            .zip(outs.iter_mut())
            .enumerate()
            .map(|(a, (state, out))| AvatarJob {
                state,
                pose: poses[(frame + 7 * a) % poses.len()],
                dt: 1.0 / 30.0,
                out,
                frame: None,
            })
            .collect();
        synthesize_all(synth, &mut jobs);
    };
    step(frame, &mut states, &mut outs);
    best_rate(seconds, passes, || {
        frame += 1;
        step(frame, &mut states, &mut outs);
        avatars
    })
}

/// Avatar-frames per second of plain LBS of the draped rest garment (the first
/// example), same avatars, poses, thread pool and windows.
fn measure_lbs(
    db: &Database,
    body: &Body,
    poses: &[Pose],
    avatars: usize,
    seconds: f32,
    passes: usize,
) -> f64 {
    use rayon::prelude::*;
    let rest = &db.examples[0].positions;
    let skin = &db.garment.skin;
    let mut outs: Vec<Vec<Vec3>> = (0..avatars).map(|_| vec![Vec3::ZERO; rest.len()]).collect();
    let mut frame = 0usize;
    best_rate(seconds, passes, || {
        outs.par_iter_mut().enumerate().for_each(|(a, out)| {
            let m = LbsMatrices::new(
                &body
                    .skeleton
                    .skinning_transforms(&poses[(frame + 7 * a) % poses.len()]),
            );
            lbs_into(rest, skin, &m, out);
        });
        frame += 1;
        avatars
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A square of two triangles, `half` metres across each way from the axis, in the
    /// plane z = `z`, facing +z, and its corners.
    fn square(z: f32, half: f32) -> (Vec<[u32; 3]>, Vec<Vec3>) {
        let p = [(-1.0, -1.0), (1.0, -1.0), (1.0, 1.0), (-1.0, 1.0)]
            .map(|(x, y)| Vec3::new(x * half, y * half, z))
            .to_vec();
        (vec![[0, 1, 2], [0, 2, 3]], p)
    }

    /// Points under the inner surface count as inside, points over the outer one as
    /// out through it, each with how far; points beyond an edge or 3 cm off count not.
    #[test]
    fn overlap_counts_each_side_over_faces_only() {
        let (tri, inner) = square(0.0, 0.1);
        let (_, mut outer) = square(0.01, 0.1);
        // two outer points 5 mm and 2 cm under the inner square, one beyond its edge
        outer[0] = Vec3::new(0.02, 0.03, -0.005);
        outer[1] = Vec3::new(-0.05, 0.01, -0.02);
        outer[2] = Vec3::new(0.3, 0.0, -0.005);
        let q = |p: &[Vec3]| {
            crate::mesh::MeshQuery::build(&crate::mesh::TriMesh::new(p.to_vec(), tri.clone()))
                .expect("mesh")
        };
        let mut o = Overlap::default();
        o.add((&q(&inner), &inner), (&q(&outer), &outer));
        assert_eq!(o.inside, 2);
        assert!((o.deepest - 0.02).abs() < 1e-5, "{}", o.deepest);
        // inner corners over a wider outer square: one 5 mm above it, the others under
        let (_, high) = square(0.01, 0.2);
        let mut inner_up = inner.clone();
        inner_up[2] = Vec3::new(0.1, 0.05, 0.015); // off the outer square's diagonal
        let mut o = Overlap::default();
        o.add((&q(&inner_up), &inner_up), (&q(&high), &high));
        assert_eq!((o.inside, o.poking), (0, 1));
        assert!((o.farthest - 0.005).abs() < 1e-5, "{}", o.farthest);
    }
}
