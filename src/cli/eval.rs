//! `clothcast eval`: SOR, plain LBS and nearest-example skinning against the simulated
//! ground truth on a clip the bake did not use; prints a summary table and writes a CSV
//! and a PNG plot of error over time.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;

use super::bake::progress_bar;
use super::common::{FrameRange, SynthArgs, parse_frames, read_clip, write_file};
use crate::bake::default_database;
use crate::eval::{
    EvalOptions, Evaluation, GroundTruth, METHODS, Truth, TruthFileError, canonical_poses, compare,
    simulate_truth, truth_key,
};

/// Arguments of `clothcast eval`.
#[derive(Args, Debug)]
pub(crate) struct EvalArgs {
    /// Example database; the default database (baked and cached when missing) if omitted.
    #[arg(long)]
    db: Option<PathBuf>,
    /// Motion clip (BVH) the bake did not use, e.g. tests/fixtures/mocap/cmu_131_03.bvh.
    #[arg(long)]
    bvh: PathBuf,
    /// Skeleton profile of the clip (detected from joint names when omitted).
    #[arg(long)]
    profile: Option<String>,
    /// Frames of the clip: `A..B` or `A..B:STEP` (B exclusive; default: the whole clip
    /// every 4th frame, i.e. 30 fps for a 120 fps CMU clip).
    #[arg(long, value_parser = parse_frames)]
    frames: Option<FrameRange>,
    /// Output folder for eval.csv, eval.png and summary.md.
    #[arg(long, default_value = "eval-out")]
    out: PathBuf,
    /// How each frame's ground truth is reached.
    #[arg(long, value_enum, default_value_t = TruthArg::Carried)]
    truth: TruthArg,
    /// SOR's distance damping time constant t_mix, seconds (default: SOR §5's 0.05;
    /// 0 turns damping off).
    #[arg(long, value_parser = parse_t_mix)]
    t_mix: Option<f32>,
    /// SOR's examples blended per region, K (default: Wu's 5).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=64))]
    top_k: Option<u32>,
    #[command(flatten)]
    synth: SynthArgs,
    /// Keeps the simulated ground truth in this file, and reuses it when it was
    /// simulated for the same garment and body, clip, frames and truth (simulating is
    /// nearly all of an evaluation's time; comparing with a kept truth takes seconds, so
    /// a sweep of `--top-k`, `--k` or `--t-mix` simulates once, and so do databases
    /// of the same garment baked with other examples or regions). A stale or damaged file
    /// is simulated afresh and replaced, the old one set aside as `T.cct.old` (one
    /// generation: a typo in `--frames` costs no simulation); a file that is not a
    /// ground truth is refused.
    #[arg(long)]
    truth_file: Option<PathBuf>,
    /// Also report where SOR's error lies: against the same truth, the best any
    /// per-region blend of the examples' SOR skinning could do, the best single example
    /// per region and per vertex, and SOR before penetration handling (every example is
    /// skinned at every frame: slower).
    #[arg(long)]
    oracle: bool,
    /// Drive SOR, LBS and the nearest example with what a Kinect sensor (`v2` or
    /// `azure`) makes of a performer who moves as the clip (as `render --kinect`: bridge
    /// body frames read back through the server's Kinect path, filtered), against the
    /// ground truth of the clip's own motion (the same truth, so `--truth-file` is
    /// reused): the error a try-on kiosk's customer sees, retargeting and filter lag
    /// included.
    #[arg(long, value_enum)]
    kinect: Option<super::play::KinectArg>,
}

fn parse_t_mix(s: &str) -> Result<f32, String> {
    match s.trim().parse::<f32>() {
        Ok(t) if t.is_finite() && (0.0..=10.0).contains(&t) => Ok(t),
        _ => Err(format!("t_mix must be 0–10 seconds, not {s:?}")),
    }
}

/// `--truth`.
#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub(crate) enum TruthArg {
    /// Carried from the previous frame along the clip, as cloth worn through the
    /// motion (the error SOR makes in use).
    Carried,
    /// Carried afresh to every frame from the rest or the arms-down drape, as the
    /// bake builds its examples (SOR's interpolation error alone, without the cloth's
    /// dependence on the path to a pose).
    Fresh,
}

pub(crate) fn run(args: EvalArgs) -> anyhow::Result<()> {
    // the clip and the frames asked of it are checked before the database is read or
    // baked, so that a typo is refused at once rather than after minutes of baking
    let file = read_clip(&args.bvh, args.profile.as_deref())?;
    let range = args.frames.unwrap_or(FrameRange {
        start: 0,
        end: None,
        step: 4,
    });
    let frames = range
        .frames(file.frame_count())
        .with_context(|| args.bvh.display().to_string())?;
    // and the folder the results go to, before the minutes of simulation
    super::common::create_folder(&args.out)?;
    let db = match &args.db {
        Some(p) => super::common::read_database(p)?,
        None => {
            let (db, path) = default_database(&progress_bar("baking the default database"))
                .context("baking the default database")?;
            eprintln!("default database: {}", path.display());
            db
        }
    };
    let body = db.body.to_body();
    let clip = file.onto(&body.skeleton)?;
    // a retargeted clip has a pose per frame of its file
    let poses = frames
        .iter()
        .map(|&f| {
            clip.poses
                .get(f)
                .copied()
                .with_context(|| format!("{} has no frame {f}", args.bvh.display()))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let dt = clip.frame_time * range.step as f32;
    let bar = indicatif::ProgressBar::new(frames.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "ground truth [{bar:30}] {pos}/{len} frames, ETA {eta}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    let mut options = EvalOptions {
        truth: match args.truth {
            TruthArg::Carried => Truth::Carried,
            TruthArg::Fresh => Truth::Fresh {
                start_arm_angle: crate::bake::BakeConfig::default().start_arm_angle,
            },
        },
        ..EvalOptions::default()
    };
    if let Some(t) = args.t_mix {
        options.synth.t_mix = t;
    }
    if let Some(k) = args.top_k {
        options.synth.top_k = k as usize;
    }
    args.synth.apply(&mut options.synth);
    options.oracle = args.oracle;
    let canonical = canonical_poses(&db, &poses);
    let key = truth_key(&db, &canonical, options.truth, &db.bake.sim_params());
    let mut stale = false;
    let kept = match &args.truth_file {
        Some(p) if p.exists() => match GroundTruth::read(p, Some(key)) {
            Ok(t) => {
                eprintln!("ground truth read from {}", p.display());
                Some(t)
            }
            Err(e @ (TruthFileError::NotTruthFile(_) | TruthFileError::Io { .. })) => {
                return Err(anyhow::Error::new(e)).context(
                    "--truth-file names a file that is not a ground truth; not replacing it",
                );
            }
            Err(e) => {
                eprintln!("{}: {e}; simulating the ground truth afresh", p.display());
                stale = true;
                None
            }
        },
        _ => None,
    };
    let truth = match kept {
        Some(t) => t,
        None => {
            // the bar is hidden where stderr is not a terminal (a log, CI, nohup): there
            // a line every twentieth of the frames says that the simulation is alive
            let logged = !std::io::IsTerminal::is_terminal(&std::io::stderr());
            let every = (frames.len() / 20).max(1);
            let t = simulate_truth(&db, &canonical, options.truth, &|done, total| {
                bar.set_position(done as u64);
                if logged && done > 0 && (done.is_multiple_of(every) || done == total) {
                    eprintln!("ground truth: {done}/{total} frames");
                }
            })
            .context("simulating the ground truth")?;
            if let Some(p) = &args.truth_file {
                // the stale truth may be hours of simulation (a typo in `--frames`
                // makes it stale): it is set aside, one generation deep, not lost
                // (a failure to set it aside must not cost the new truth either)
                if stale {
                    let old = aside(p);
                    match std::fs::rename(p, &old) {
                        Ok(()) => eprintln!("the stale ground truth is kept as {}", old.display()),
                        Err(e) => eprintln!(
                            "could not set the stale ground truth aside as {} ({e}); replacing it",
                            old.display()
                        ),
                    }
                }
                t.write(p)
                    .with_context(|| format!("keeping the ground truth in {}", p.display()))?;
                eprintln!("ground truth kept in {}", p.display());
            }
            t
        }
    };
    if let Some(kind) = args.kinect {
        let last = frames.iter().copied().max().unwrap_or(0);
        let seen = super::render::through_kinect(
            &clip.poses[..=last],
            clip.frame_time,
            kind,
            &body.skeleton,
        )?;
        let seen: Vec<_> = frames.iter().map(|&f| seen[f]).collect();
        options.driven = Some(canonical_poses(&db, &seen));
    }
    let eval = compare(&db, &canonical, &frames, dt, &truth, &options).context("evaluating")?;
    bar.finish_and_clear();
    let table = summary_table(&eval);
    outln!("{table}");
    write_file(&args.out.join("summary.md"), |w| {
        w.write_all(table.as_bytes())
    })?;
    write_file(&args.out.join("eval.csv"), |w| write_csv(w, &eval))?;
    plot(&args.out.join("eval.png"), &eval)?;
    outln!(
        "wrote {}/{{summary.md,eval.csv,eval.png}}",
        args.out.display()
    );
    Ok(())
}

/// The summary as a Markdown table: one row per method, name then mean error (cm).
pub(crate) fn summary_table(eval: &Evaluation) -> String {
    let mut s = String::from(
        "| method | mean error (cm) | max error (cm) | penetrating vertices / frame | jitter (m/s²) | edges through itself / frame |\n|---|---|---|---|---|---|\n",
    );
    for m in &eval.summary {
        s += &format!(
            "| {} | {:.2} | {:.2} | {:.1} | {:.3} | {:.1} |\n",
            m.name,
            m.mean * 100.0,
            m.max * 100.0,
            m.penetrating,
            m.jitter,
            m.crossings
        );
    }
    let unconverged = eval.frames.iter().filter(|f| !f.converged).count();
    s += &format!(
        "\n{} frames; ground truth jitter {:.3} m/s²; {} frames skipped (no equilibrium), {} reached with loosened tolerance; ground truth itself has {:.1} penetrating vertices and {:.1} edges through itself / frame\n",
        eval.frames.len(),
        eval.truth_jitter,
        eval.skipped,
        unconverged,
        eval.frames
            .iter()
            .map(|f| f.truth_penetrating as f32)
            .sum::<f32>()
            / eval.frames.len().max(1) as f32,
        eval.frames
            .iter()
            .map(|f| f.truth_crossings as f32)
            .sum::<f32>()
            / eval.frames.len().max(1) as f32,
    );
    if let Some(o) = &eval.oracle {
        s += &format!(
            "\nWhere SOR's error lies (before penetration handling, mean error in cm):\n\n| blend | mean error (cm) |\n|---|---|\n| SOR's weights | {:.2} |\n| best blend per region | {:.2} |\n| best example per region | {:.2} |\n| best example per vertex | {:.2} |\n",
            o.sor_unprojected * 100.0,
            o.best_blend * 100.0,
            o.best_example * 100.0,
            o.best_per_vertex * 100.0,
        );
    }
    s
}

fn write_csv(w: &mut impl Write, eval: &Evaluation) -> std::io::Result<()> {
    write!(
        w,
        "frame,time_s,converged,truth_penetrating,truth_crossings"
    )?;
    for m in METHODS {
        write!(w, ",{m}_mean_cm,{m}_max_cm,{m}_penetrating,{m}_crossings")?;
    }
    writeln!(w)?;
    for f in &eval.frames {
        write!(
            w,
            "{},{:.4},{},{},{}",
            f.frame, f.time, f.converged, f.truth_penetrating, f.truth_crossings
        )?;
        for e in &f.errors {
            write!(
                w,
                ",{:.4},{:.4},{},{}",
                e.mean * 100.0,
                e.max * 100.0,
                e.penetrating,
                e.crossings
            )?;
        }
        writeln!(w)?;
    }
    Ok(())
}

/// Registers a system sans-serif TrueType font for the plot's text, if one is installed
/// (nothing is downloaded; without one the plot is drawn without text).
fn register_system_font() -> bool {
    static DONE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *DONE.get_or_init(|| {
        const CANDIDATES: [&str; 4] = [
            "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
            "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
            "/usr/share/fonts/TTF/DejaVuSans.ttf",
            "/Library/Fonts/Arial.ttf",
        ];
        CANDIDATES.iter().any(|p| {
            std::fs::read(p).is_ok_and(|bytes| {
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                plotters::style::register_font(
                    "sans-serif",
                    plotters::style::FontStyle::Normal,
                    bytes,
                )
                .is_ok()
            })
        })
    })
}

fn plot(path: &Path, eval: &Evaluation) -> anyhow::Result<()> {
    use plotters::prelude::*;
    let text = register_system_font();
    if !text {
        tracing::warn!("no system TrueType font found; the plot has no labels");
    }
    let tmp = path.with_extension("partial.png");
    {
        let root = BitMapBackend::new(&tmp, (1000, 500)).into_drawing_area();
        root.fill(&WHITE)?;
        let t_end = eval.frames.last().map_or(1.0, |f| f.time).max(1e-3);
        let y_max = eval
            .frames
            .iter()
            .flat_map(|f| f.errors.iter().map(|e| e.mean * 100.0))
            .fold(0.5f32, f32::max)
            // the top quarter stays empty for the legend, so no curve runs under it
            * 1.35;
        let mut builder = ChartBuilder::on(&root);
        builder.margin(15);
        if text {
            builder
                .caption(
                    "mean vertex error against the simulated ground truth",
                    ("sans-serif", 22),
                )
                .x_label_area_size(40)
                .y_label_area_size(55);
        }
        let mut chart = builder.build_cartesian_2d(0f32..t_end, 0f32..y_max)?;
        let mut mesh = chart.configure_mesh();
        if text {
            mesh.x_desc("time (s)").y_desc("error (cm)");
        } else {
            mesh.disable_x_axis().disable_y_axis();
        }
        mesh.draw()?;
        let colours = [
            RGBColor(200, 30, 30),
            RGBColor(40, 90, 200),
            RGBColor(40, 150, 60),
        ];
        for (m, name) in METHODS.iter().enumerate() {
            let c = colours[m];
            let series = chart.draw_series(LineSeries::new(
                eval.frames
                    .iter()
                    .map(|f| (f.time, f.errors[m].mean * 100.0)),
                c.stroke_width(2),
            ))?;
            if text {
                series.label(*name).legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                });
            }
        }
        if text {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()?;
        }
        root.present()?;
    }
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Where a stale ground-truth file is set aside before a new one takes its name:
/// `T.cct` → `T.cct.old` (replacing an earlier one).
fn aside(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".old");
    path.with_file_name(name)
}
