//! `clothcast bake`, `clothcast merge`, `clothcast inspect`: building, combining and
//! describing example databases.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, ValueEnum};

use super::common::{BodyArgs, GarmentArgs, read_clip};
use crate::bake::{BakeConfig, Baker, DEFAULT_CLIP, Sampler, Shard, merge};
use crate::mocap::Clip;
use crate::sor::Database;

#[derive(ValueEnum, Debug, Clone, Copy)]
pub(crate) enum SamplerArg {
    /// Weighted K-means over clip frames and joint-limit samples (parallel).
    Kmeans,
    /// SOR's greedy Metropolis–Hastings search for the largest residual.
    Mcmc,
}

/// Arguments of `clothcast bake`.
#[derive(Args, Debug)]
pub(crate) struct BakeArgs {
    /// Bake the default database (default body and T-shirt) into the cache where
    /// `serve` and `demo` look for it (`$CLOTHCAST_CACHE`, else the user's cache
    /// folder), unless it is there already, and print its path: for an image or a
    /// provisioning step, so that the first start does not bake. Takes no other option.
    #[arg(long = "default", exclusive = true)]
    default_db: bool,
    /// Garment: built-in name (tshirt, pants) or a garment TOML file (procedural, or with
    /// `mesh = "FILE.obj|gltf|glb"` a mesh of one's own: see the README).
    #[arg(long, default_value = "tshirt")]
    garment: String,
    /// Number of examples (the rest pose included), 1 to 100 000. The kmeans sampler
    /// chooses them among the candidate poses (every 4th clip frame and the joint-limit
    /// samples), so it makes at most one more than there are candidates.
    #[arg(long, default_value_t = 40, value_parser = super::common::parse_examples)]
    examples: usize,
    /// Sampler.
    #[arg(long, value_enum, default_value_t = SamplerArg::Kmeans)]
    sampler: SamplerArg,
    /// Motion clips whose frames are candidate poses (BVH); the built-in walk when none.
    #[arg(long = "clip")]
    clips: Vec<PathBuf>,
    /// Skeleton profile of the clips (detected when omitted).
    #[arg(long)]
    profile: Option<String>,
    /// Number of joint-limit samples among the candidates.
    #[arg(long, default_value_t = 400)]
    limit_samples: usize,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Compute only shard i of n ("i/n", 0-based; SLURM_ARRAY_TASK_ID-style batch
    /// jobs); combine the shards with `clothcast merge`.
    #[arg(long, value_parser = parse_shard)]
    shard: Option<Shard>,
    /// Output database (.ccdb). Finished examples are kept in OUT.parts/ until the
    /// bake completes, so rerunning an interrupted bake resumes it.
    #[arg(long, required_unless_present = "default_db")]
    out: Option<PathBuf>,
    /// Simulate the examples with cloth self-contact (the garment kept from passing
    /// through itself; off by default as in SOR §7, and ~1.2× slower; the default
    /// database is baked with it). `eval` simulates its ground truth with the
    /// database's own settings.
    #[arg(long)]
    self_contact: bool,
    #[command(flatten)]
    body: BodyArgs,
    #[command(flatten)]
    garment_args: GarmentArgs,
}

fn parse_shard(s: &str) -> Result<Shard, String> {
    let (i, n) = s.split_once('/').ok_or("shard must look like i/n")?;
    let (index, count): (usize, usize) = (
        i.trim().parse().map_err(|_| "bad shard index")?,
        n.trim().parse().map_err(|_| "bad shard count")?,
    );
    if count == 0 || index >= count {
        return Err(format!("shard {index}/{count}: need 0 ≤ i < n"));
    }
    Ok(Shard { index, count })
}

/// A terminal progress bar with ETA (hidden when stderr is not a terminal).
pub(crate) fn progress_bar(label: &str) -> impl Fn(usize, usize) + Sync {
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{msg} [{bar:30}] {pos}/{len} examples, {elapsed} elapsed, ETA {eta}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    bar.set_message(label.to_string());
    move |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        if done == total {
            bar.finish();
        } else if bar.is_hidden() && (done.is_multiple_of(5) || done == 1) {
            eprintln!("{done}/{total} examples");
        }
    }
}

pub(crate) fn run(a: BakeArgs) -> anyhow::Result<()> {
    if a.default_db {
        let (db, path) =
            crate::bake::default_database(&progress_bar("baking the default database"))
                .context("baking the default database")?;
        eprintln!(
            "default database: {} examples of {}",
            db.examples.len(),
            db.garment.name
        );
        outln!("{}", path.display());
        return Ok(());
    }
    let Some(out) = a.out else {
        anyhow::bail!("--out is required");
    };
    let files = a
        .clips
        .iter()
        .map(|p| read_clip(p, a.profile.as_deref()))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let body = a.body.build()?;
    let garment = a.garment_args.build(&body, &a.garment)?;
    let clips: Vec<Clip> = if files.is_empty() {
        vec![
            Clip::from_bvh_text(DEFAULT_CLIP, None, &body.skeleton)
                .context("built-in clip")?
                .named(crate::bake::DEFAULT_CLIP_NAME),
        ]
    } else {
        files
            .iter()
            .map(|f| f.onto(&body.skeleton))
            .collect::<anyhow::Result<_>>()?
    };
    let cfg = BakeConfig {
        examples: a.examples,
        sampler: match a.sampler {
            SamplerArg::Kmeans => Sampler::Kmeans,
            SamplerArg::Mcmc => Sampler::Mcmc,
        },
        seed: a.seed,
        limit_samples: a.limit_samples,
        ..BakeConfig::default()
    };
    let cfg = if a.self_contact {
        BakeConfig {
            sim: cfg.sim.clone().with_self_contact(),
            ..cfg
        }
    } else {
        cfg
    };
    let candidates = cfg.candidate_count(&clips);
    if cfg.sampler == Sampler::Kmeans && cfg.examples > candidates + 1 {
        eprintln!(
            "note: {} examples asked for, but there are {candidates} candidate poses (clip frames and joint-limit samples): the kmeans sampler makes {} (the rest pose and every candidate); more clips, --limit-samples or --sampler mcmc give more",
            cfg.examples,
            candidates + 1
        );
    }
    eprintln!(
        "draping {} ({} vertices) at rest …",
        garment.name,
        garment.vertex_count()
    );
    let baker = Baker::new(&body, &garment, cfg.clone())?;
    let progress = progress_bar("baking");
    let db = match cfg.sampler {
        Sampler::Kmeans => {
            let parts = out.with_extension("parts");
            let db = baker.bake_kmeans(
                &clips,
                Some(&parts),
                a.shard.unwrap_or(Shard::ALL),
                &progress,
            )?;
            db.write(&out)?;
            let _ = std::fs::remove_dir_all(&parts);
            db
        }
        Sampler::Mcmc => {
            if a.shard.is_some() {
                anyhow::bail!(
                    "--shard needs the kmeans sampler (MCMC examples depend on each other)"
                );
            }
            let db = baker.bake_mcmc(&clips, &progress)?;
            db.write(&out)?;
            db
        }
    };
    outln!(
        "{}  {} examples of {} ({} vertices), {:.0} s",
        out.display(),
        db.examples.len(),
        db.garment.name,
        db.vertex_count(),
        db.bake.seconds
    );
    for line in leave_one_out_lines(&db, &out) {
        outln!("{line}");
    }
    Ok(())
}

/// Examples named in [`leave_one_out_lines`]' `worst` lines.
const WORST_SHOWN: usize = 3;

/// `inspect`'s, `bake`'s and `merge`'s summary of [`crate::sor::leave_one_out`] with the server's
/// synthesis settings: the mean over the examples, the examples the others predict
/// worst (by their largest vertex distance), and the command that draws the worst
/// (`render --example`) for the database at `path`; none for under two examples.
fn leave_one_out_lines(db: &Database, path: &std::path::Path) -> Vec<String> {
    left_out_lines(
        db,
        crate::sor::leave_one_out(db, &crate::sor::SynthParams::default()),
        path,
    )
}

/// [`leave_one_out_lines`] of the check's `rows`, already run.
fn left_out_lines(
    db: &Database,
    mut rows: Vec<crate::sor::LeftOut>,
    path: &std::path::Path,
) -> Vec<String> {
    if rows.is_empty() {
        return Vec::new();
    }
    let mean = rows.iter().map(|r| f64::from(r.mean)).sum::<f64>() / rows.len() as f64;
    rows.sort_by(|a, b| b.max.total_cmp(&a.max));
    let mut lines = vec![format!(
        "left out     each example synthesised from the others at its own pose: {:.2} cm mean vertex error",
        100.0 * mean
    )];
    // one line per example, with where its pose came from where the bake recorded it
    for (i, r) in rows.iter().take(WORST_SHOWN).enumerate() {
        lines.push(format!(
            "{}example {} {:.1} cm (mean {:.1}){}",
            if i == 0 {
                "  worst      "
            } else {
                "             "
            },
            r.example,
            100.0 * r.max,
            100.0 * r.mean,
            db.bake
                .origin(r.example)
                .map_or(String::new(), |o| format!(", pose from {o}"))
        ));
    }
    lines.push(format!(
        "  look       clothcast render --db {} --example {k} --out example-{k}.png",
        shell_word(&path.display().to_string()),
        k = rows[0].example
    ));
    lines.extend(cross_check_line(db));
    lines
}

/// Example regions named in [`cross_check_line`].
const CROSS_SHOWN: usize = 3;

/// Which examples the runtime's cross-check keeps nearer their own poses (with the
/// server's settings; see `SynthParams::cross_scale`): the example regions it scaled
/// most. `None` where it scaled none.
fn cross_check_line(db: &Database) -> Option<String> {
    let synth = crate::sor::Synthesizer::new(db, crate::sor::SynthParams::default());
    let g = db.region_count().max(1);
    let mut scaled: Vec<(usize, usize, f32)> = synth
        .distance_scales()
        .iter()
        .enumerate()
        .filter(|(_, s)| **s > 1.0)
        .map(|(i, s)| (i / g, i % g, *s))
        .collect();
    if scaled.is_empty() {
        return None;
    }
    scaled.sort_by(|a, b| b.2.total_cmp(&a.2));
    let most: Vec<String> = scaled
        .iter()
        .take(CROSS_SHOWN)
        .map(|(j, r, s)| {
            let region = db.garment.region_names.get(*r).map_or("?", String::as_str);
            format!("example {j} {region} ×{s:.2}")
        })
        .collect();
    Some(format!(
        "cross-check  kept nearest their poses (their rigs carry the cloth worst to their neighbours' poses; distance scale): {}",
        most.join(", ")
    ))
}

/// `inspect --examples`: one line per example: where its pose came from, how far it
/// turns a joint from rest, and how well the others predict it (the left-out check).
fn example_lines(db: &Database, left: &[crate::sor::LeftOut]) -> Vec<String> {
    let width = db.examples.len().saturating_sub(1).to_string().len().max(2);
    let mut lines = vec![format!(
        "  {:>width$}  {:>16}  {:>15} {:>7}  pose from",
        "#", "largest rotation", "left out: mean", "max"
    )];
    for (i, e) in db.examples.iter().enumerate() {
        let (mean, max) =
            left.iter()
                .find(|r| r.example == i)
                .map_or(("-".to_string(), "-".to_string()), |r| {
                    (
                        format!("{:.1} cm", 100.0 * r.mean),
                        format!("{:.1} cm", 100.0 * r.max),
                    )
                });
        lines.push(format!(
            "  {i:>width$}  {:>15.0}°  {mean:>15} {max:>7}  {}",
            largest_rotation(&e.pose).to_degrees(),
            db.bake
                .origin(i)
                .as_deref()
                .unwrap_or("(not recorded: baked before origins were)")
        ));
    }
    lines
}

/// The largest angle, radians, by which `pose` turns any joint from rest.
fn largest_rotation(pose: &crate::skeleton::Pose) -> f32 {
    crate::skeleton::theta(&crate::skeleton::Pose::rest(), pose)
        .chunks(3)
        .map(|c| (c[0] * c[0] + c[1] * c[1] + c[2] * c[2]).sqrt())
        .fold(0.0f32, f32::max)
}

/// `s` as one word of a POSIX shell command line: as it is when it holds only
/// characters no shell treats specially, else in single quotes.
fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:,@%=".contains(c));
    if plain {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Arguments of `clothcast merge`.
#[derive(Args, Debug)]
pub(crate) struct MergeArgs {
    /// Databases to merge (same garment and body, e.g. the shards of one bake).
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Output database.
    #[arg(long)]
    out: PathBuf,
}

pub(crate) fn run_merge(a: MergeArgs) -> anyhow::Result<()> {
    let dbs = a
        .inputs
        .iter()
        .map(|p| super::common::read_database(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let given: usize = dbs.iter().map(|d| d.examples.len()).sum();
    let db = merge(dbs)?;
    db.write(&a.out)?;
    if db.examples.len() < given {
        eprintln!(
            "note: {} of the {given} examples given were left out: their poses are already in the merge (a database given twice, or shards that overlap)",
            given - db.examples.len()
        );
    }
    outln!("{}  {} examples", a.out.display(), db.examples.len());
    for line in leave_one_out_lines(&db, &a.out) {
        outln!("{line}");
    }
    Ok(())
}

/// Arguments of `clothcast inspect`.
#[derive(Args, Debug)]
pub(crate) struct InspectArgs {
    /// Database file.
    db: PathBuf,
    /// Also list every example: where its pose came from (a clip's frame, a joint-limit
    /// sample), its largest joint rotation from rest, and how well the other examples
    /// predict it.
    #[arg(long)]
    examples: bool,
}

pub(crate) fn run_inspect(a: InspectArgs) -> anyhow::Result<()> {
    let bytes = std::fs::read(&a.db).with_context(|| format!("reading {}", a.db.display()))?;
    let db = Database::from_bytes(&bytes).with_context(|| format!("reading {}", a.db.display()))?;
    outln!(
        "{}: clothcast database, format version {}, {} bytes",
        a.db.display(),
        crate::sor::DB_VERSION,
        bytes.len()
    );
    outln!(
        "garment      {} — {} vertices, {} triangles, hash {:016x}",
        db.garment.name,
        db.vertex_count(),
        db.garment.triangles.len(),
        crate::sor::garment_hash(&db.garment)
    );
    outln!(
        "regions      {} ({})",
        db.region_count(),
        db.garment.region_names.join(", ")
    );
    outln!(
        "body         {} vertices, {} triangles, height {:.3} m, hash {:016x}",
        db.body.positions.len(),
        db.body.triangles.len(),
        db.body.to_body().shape.height,
        crate::sor::body_hash(&db.body)
    );
    outln!("examples     {}", db.examples.len());
    let max_angle = db
        .examples
        .iter()
        .map(|e| largest_rotation(&e.pose))
        .fold(0.0f32, f32::max);
    outln!(
        "pose spread  largest joint rotation from rest {:.0}°",
        max_angle.to_degrees()
    );
    let remote = db
        .examples
        .iter()
        .flat_map(|e| e.alpha.iter())
        .filter(|&&a| a > 0.01)
        .count();
    let total = db.examples.len() * db.vertex_count();
    outln!(
        "remote bones α > 0.01 on {:.1} % of example vertices",
        100.0 * remote as f64 / total.max(1) as f64
    );
    outln!(
        "bake         sampler {}, seed {}, {:.0} s, {}",
        db.bake.sampler,
        db.bake.seed,
        db.bake.seconds,
        db.bake.built_by
    );
    for s in &db.bake.sources {
        outln!("  source     {s}");
    }
    outln!("material     {}", material_line(&db.bake.sim));
    let left = crate::sor::leave_one_out(&db, &crate::sor::SynthParams::default());
    for line in left_out_lines(&db, left.clone(), &a.db) {
        outln!("{line}");
    }
    if a.examples {
        for line in example_lines(&db, &left) {
            outln!("{line}");
        }
    }
    Ok(())
}

/// The cloth material a database was baked with, from its recorded simulator
/// parameters: stretch and bend stiffness, Poisson ratio, density and the membrane's
/// compression ratio (absent in databases baked before it existed, which were StVK).
fn material_line(sim: &serde_json::Value) -> String {
    let num = |k: &str| sim.get(k).and_then(serde_json::Value::as_f64);
    let show = |k: &str, unit: &str| match num(k) {
        None => "?".to_string(),
        // 1e-5 rather than 0.00001
        Some(v) if v != 0.0 && v.abs() < 1e-3 => format!("{v:e}{unit}"),
        Some(v) => format!("{v}{unit}"),
    };
    let compression = match num("compression_ratio") {
        Some(1.0) => "1 (StVK)".to_string(),
        Some(c) => format!("{c}"),
        None => "1 (StVK: baked before the ratio was recorded)".to_string(),
    };
    let self_contact = match num("self_contact_margin") {
        Some(m) if m > 0.0 => format!("self-contact {} mm", m * 1000.0),
        _ => "no self-contact".to_string(),
    };
    format!(
        "stretch {}, Poisson {}, compression ratio {compression}, bend {}, density {}, {self_contact}",
        show("stretch_stiffness", " N/m"),
        show("poisson", ""),
        show("bend_stiffness", " N·m"),
        show("density", " kg/m²"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path is printed as one shell word: plain when it can be, else single-quoted
    /// with its own single quotes escaped.
    #[test]
    fn paths_are_printed_as_one_shell_word() {
        assert_eq!(shell_word("/data/db-1.ccdb"), "/data/db-1.ccdb");
        assert_eq!(shell_word("my db.ccdb"), "'my db.ccdb'");
        assert_eq!(shell_word("it's;$x"), r"'it'\''s;$x'");
        assert_eq!(shell_word(""), "''");
    }

    /// The material line says whether the examples were simulated with self-contact.
    #[test]
    fn the_material_line_names_self_contact() {
        let on = serde_json::to_value(crate::sim::SimParams::default().with_self_contact())
            .expect("json");
        assert!(
            material_line(&on).ends_with("self-contact 3 mm"),
            "{}",
            material_line(&on)
        );
        let off = serde_json::to_value(crate::sim::SimParams::default()).expect("json");
        assert!(
            material_line(&off).ends_with("no self-contact"),
            "{}",
            material_line(&off)
        );
    }
}
