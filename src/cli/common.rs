//! Shared command-line pieces: body shape flags, garment flags, file output.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, ValueEnum};

use crate::body::{Body, BodyOptions, BodyShape};
use crate::garment::{Garment, GarmentConfig, GarmentSpec, Legs, Sleeves};
use crate::mesh::{GlbScene, Image, write_glb};
use crate::mocap::{Bvh, Clip, Profile};
use crate::skeleton::{Pose, Skeleton};

/// Set when the command writes a file into this process's own stdout (`--out
/// /dev/stdout`, see [`data_to_stdout`]): report and status lines then go to stderr, so
/// that the file comes out whole.
static REPORT_TO_STDERR: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether an `--out` or `--png` of `args` (the command line, program name first) is
/// this process's stdout: a device, pipe or socket ([`crate::sor::is_stream`]) that is
/// the same file as `/dev/stdout`. [`crate::cli::run`] then sends the report lines to
/// stderr, which would otherwise be written into the file's bytes (after a PNG, a
/// database) or before them.
pub(crate) fn data_to_stdout(args: impl IntoIterator<Item = std::ffi::OsString>) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let Ok(stdout) = std::fs::metadata("/dev/stdout") else {
            return false;
        };
        let same = |path: &Path| {
            crate::sor::is_stream(path)
                && std::fs::metadata(path)
                    .is_ok_and(|m| m.dev() == stdout.dev() && m.ino() == stdout.ino())
        };
        let mut args = args.into_iter().skip(1);
        while let Some(a) = args.next() {
            let value = match a.to_str() {
                Some("--out" | "--png") => args.next(),
                Some(s) => s
                    .strip_prefix("--out=")
                    .or_else(|| s.strip_prefix("--png="))
                    .map(std::ffi::OsString::from),
                None => None,
            };
            if value.is_some_and(|v| same(Path::new(&v))) {
                return true;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = args;
    false
}

/// Sends [`say`] and [`outln!`] lines to stderr from now on (see [`data_to_stdout`]).
pub(crate) fn report_to_stderr() {
    REPORT_TO_STDERR.store(true, std::sync::atomic::Ordering::Relaxed);
}

fn to_stderr() -> bool {
    REPORT_TO_STDERR.load(std::sync::atomic::Ordering::Relaxed)
}

/// Writes a status line to stdout, and goes on if nobody reads it: a server (`serve`,
/// `demo`) or a publisher (`play`) whose stdout was closed (`| head`, a log pipe that
/// died) keeps running instead of panicking in `println!`.
pub(crate) fn say(line: std::fmt::Arguments<'_>) {
    if to_stderr() {
        eprintln!("{line}");
        return;
    }
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}

/// What [`outln!`] does: writes a report line; exits with status 0 when nobody reads
/// stdout any more, with status 1 and the error on stderr when it cannot be written.
pub(crate) fn out_line(line: std::fmt::Arguments<'_>) {
    if to_stderr() {
        eprintln!("{line}");
        return;
    }
    if let Err(e) = writeln!(std::io::stdout().lock(), "{line}") {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("error: writing to stdout: {e}");
            std::process::exit(1);
        }
        std::process::exit(0);
    }
}

/// Body shape and resolution flags.
#[derive(Args, Debug, Clone)]
pub(crate) struct BodyArgs {
    /// Standing height, metres (1.5–2.0).
    #[arg(long, default_value_t = 1.75)]
    pub(crate) height: f32,
    /// Body mass, kilograms (40–150).
    #[arg(long, default_value_t = 70.0)]
    pub(crate) weight: f32,
    /// Shoulder (biacromial) width, metres (0.30–0.50).
    #[arg(long, default_value_t = 0.40)]
    pub(crate) shoulder_width: f32,
    /// Hip width, metres (0.28–0.46).
    #[arg(long, default_value_t = 0.34)]
    pub(crate) hip_width: f32,
    /// Body mesh resolution, vertices.
    #[arg(long, default_value_t = 6000)]
    pub(crate) body_vertices: usize,
    /// A skinned humanoid of one's own (glTF or GLB, bound in a T- or A-pose) instead
    /// of the generated body: its joints are mapped onto the canonical skeleton and its
    /// mesh brought into the canonical T-pose, its openings capped and parts that are
    /// no body (eyes, hair cards, non-manifold bits) dropped. The shape
    /// and resolution flags do not apply; garments on it are imported meshes (a
    /// garment TOML with `mesh = …`), since procedural ones are cut around the
    /// generated body.
    #[arg(long = "body", value_name = "FILE.glb")]
    pub(crate) file: Option<PathBuf>,
    /// Skeleton profile of `--body`'s joints (built-in name or TOML file; detected
    /// from the joint names when omitted).
    #[arg(long, requires = "file", value_name = "PROFILE")]
    pub(crate) body_profile: Option<String>,
}

/// What closing an imported body's mesh did, in one line (see
/// [`crate::body::CloseReport`]).
fn close_line(r: &crate::body::CloseReport) -> String {
    let mut parts = vec![format!(
        "body mesh: kept {} part{} ({} triangles)",
        r.kept.len(),
        if r.kept.len() == 1 { "" } else { "s" },
        r.kept.iter().sum::<usize>()
    )];
    if r.stitched > 0 {
        parts.push(format!(
            "stitched {} seam vertices to their neighbours'",
            r.stitched
        ));
    }
    if r.separated > 0 {
        parts.push(format!(
            "separated {} vertices where two openings touched",
            r.separated
        ));
    }
    if r.capped > 0 {
        parts.push(format!(
            "capped {} opening{}",
            r.capped,
            if r.capped == 1 { "" } else { "s" }
        ));
    }
    if r.fanned > 0 {
        parts.push(format!(
            "{} of them with a fan about its centre (it crosses itself seen along its \
             normal; where it bends the cap may stand out of the skin: look at the body \
             there)",
            r.fanned
        ));
    }
    if r.flipped > 0 {
        parts.push(format!(
            "turned {} inside-out part{} outwards",
            r.flipped,
            if r.flipped == 1 { "" } else { "s" }
        ));
    }
    for (why, label) in [
        ("not an oriented 2-manifold", "not manifold"),
        (
            "too small to be part of the body",
            "too small (eyes, teeth, hair cards…)",
        ),
    ] {
        let dropped: Vec<usize> = r
            .dropped
            .iter()
            .filter(|d| d.1 == why)
            .map(|d| d.0)
            .collect();
        if !dropped.is_empty() {
            parts.push(format!(
                "dropped {} part{} {label}: {} triangles",
                dropped.len(),
                if dropped.len() == 1 { "" } else { "s" },
                dropped.iter().sum::<usize>()
            ));
        }
    }
    parts.join(", ")
}

impl BodyArgs {
    /// What the body is, for a status line.
    pub(crate) fn describe(&self) -> String {
        match &self.file {
            Some(f) => format!("importing the body {}", f.display()),
            None => format!(
                "generating the body (height {} m, weight {} kg)",
                self.height, self.weight
            ),
        }
    }

    pub(crate) fn build(&self) -> anyhow::Result<Body> {
        if let Some(path) = &self.file {
            let profile = self.body_profile.as_deref().map(load_profile).transpose()?;
            let loaded = crate::mesh::read_gltf_skinned(path)
                .with_context(|| format!("reading the body {}", path.display()))?;
            let (body, report) = Body::import_humanoid(&loaded, profile.as_ref())
                .with_context(|| format!("importing the body {}", path.display()))?;
            if !report.unchanged() {
                eprintln!("{}", close_line(&report));
            }
            return Ok(body);
        }
        let shape = BodyShape {
            height: self.height,
            weight: self.weight,
            shoulder_width: self.shoulder_width,
            hip_width: self.hip_width,
        };
        Body::generate(
            &shape,
            &BodyOptions {
                target_vertices: self.body_vertices,
            },
        )
        .context("generating the body")
    }
}

/// Sleeve length flag.
#[derive(ValueEnum, Debug, Clone, Copy)]
pub(crate) enum SleeveArg {
    /// To the middle of the upper arm.
    Short,
    /// To the wrist.
    Long,
}

/// Pants length flag.
#[derive(ValueEnum, Debug, Clone, Copy)]
pub(crate) enum LegArg {
    /// To the ankle.
    Long,
    /// Above the knee.
    Shorts,
}

/// Garment flags.
#[derive(Args, Debug, Clone)]
pub(crate) struct GarmentArgs {
    /// Garment resolution, vertices, 500 to 100 000 (default: the garment config's,
    /// ~3000).
    #[arg(long, value_parser = parse_garment_vertices)]
    pub(crate) garment_vertices: Option<usize>,
    /// T-shirt sleeve length.
    #[arg(long, value_enum, default_value_t = SleeveArg::Short)]
    pub(crate) sleeves: SleeveArg,
    /// Pants length.
    #[arg(long, value_enum, default_value_t = LegArg::Long)]
    pub(crate) legs: LegArg,
}

impl GarmentArgs {
    /// A procedural garment's configuration with the resolution, sleeve and leg flags
    /// applied.
    fn with_flags(&self, mut cfg: GarmentConfig) -> GarmentConfig {
        if let Some(n) = self.garment_vertices {
            cfg.target_vertices = n;
        }
        cfg.sleeves = match self.sleeves {
            SleeveArg::Short => Sleeves::Short,
            SleeveArg::Long => Sleeves::Long,
        };
        cfg.length = match self.legs {
            LegArg::Long => Legs::Long,
            LegArg::Shorts => Legs::Shorts,
        };
        cfg
    }

    /// The garment `name_or_path` names: a built-in procedural garment, or a garment
    /// TOML file (procedural, or with `mesh = …` a mesh file imported and bound to
    /// `body`; the resolution, sleeve and leg flags apply to procedural ones only).
    pub(crate) fn build(&self, body: &Body, name_or_path: &str) -> anyhow::Result<Garment> {
        let path = Path::new(name_or_path);
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        if matches!(ext.as_deref(), Some("obj" | "gltf" | "glb")) {
            anyhow::bail!(
                "{name_or_path}: a garment mesh is imported through a garment TOML file that names it and its regions, e.g.\n  name = \"my_shirt\"\n  mesh = \"{}\"\n  regions_like = \"tshirt\"\n(see the README, \"Your own garment (and body)\")",
                path.file_name()
                    .map(|f| f.to_string_lossy())
                    .unwrap_or_default()
            );
        }
        let spec = if ext.as_deref() == Some("toml") {
            let text =
                std::fs::read_to_string(path).with_context(|| format!("reading {name_or_path}"))?;
            GarmentSpec::from_toml(&text).with_context(|| format!("reading {name_or_path}"))?
        } else {
            GarmentSpec::Pattern(GarmentConfig::builtin(name_or_path)?)
        };
        match spec {
            GarmentSpec::Pattern(cfg) => Garment::generate(body, &self.with_flags(cfg))
                .with_context(|| format!("generating the {name_or_path}")),
            GarmentSpec::Mesh(cfg) => {
                if self.garment_vertices.is_some() {
                    tracing::warn!(
                        garment = name_or_path,
                        "--garment-vertices does not apply to an imported mesh: it is used as it is"
                    );
                }
                let dir = path.parent().unwrap_or(Path::new(""));
                Garment::import(&cfg, dir, body)
                    .with_context(|| format!("importing the garment of {name_or_path}"))
            }
        }
    }
}

/// Creates the folder `dir` (and its parents) if missing; names the path when it
/// exists as something else (`creating take: File exists` said less).
pub(crate) fn create_folder(dir: &Path) -> anyhow::Result<()> {
    if std::fs::metadata(dir).is_ok_and(|m| !m.is_dir()) {
        anyhow::bail!("{} exists and is not a folder", dir.display());
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))
}

/// Writes a file whole ([`crate::sor::write_with`]: a temporary name of its own, then
/// rename; a device or pipe such as `/dev/stdout` written into), its folder made first
/// with [`create_folder`]'s message for a file in the way.
pub(crate) fn write_file(
    path: &Path,
    f: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        create_folder(dir)?;
    }
    crate::sor::write_with(path, f).with_context(|| format!("writing {}", path.display()))
}

pub(crate) fn write_glb_file(path: &Path, scene: &GlbScene<'_>) -> anyhow::Result<()> {
    write_file(path, |w| write_glb(w, scene))
}

pub(crate) fn write_png(path: &Path, img: &Image) -> anyhow::Result<()> {
    write_file(path, |w| {
        let mut enc = png::Encoder::new(w, img.width, img.height);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut wr = enc.write_header().map_err(std::io::Error::other)?;
        wr.write_image_data(&img.rgb)
            .map_err(std::io::Error::other)?;
        wr.finish().map_err(std::io::Error::other)
    })
}

/// Loads a profile: a built-in name, or a path to a profile TOML file.
pub(crate) fn load_profile(name_or_path: &str) -> anyhow::Result<Profile> {
    if Path::new(name_or_path)
        .extension()
        .is_some_and(|e| e == "toml")
    {
        let text = std::fs::read_to_string(name_or_path)
            .with_context(|| format!("reading profile {name_or_path}"))?;
        Ok(Profile::from_toml(&text)?)
    } else {
        Ok(Profile::builtin(name_or_path)?)
    }
}

/// A BVH clip read and parsed, with its profile, before anything is built for it: the
/// commands read their clips first, so that a wrong path or a malformed file is reported
/// at once rather than after seconds of building the body and the garment.
pub(crate) struct ClipFile {
    path: PathBuf,
    bvh: Bvh,
    profile: Option<Profile>,
}

/// Reads the database at `path`, the error saying "reading PATH" once (an I/O
/// error's own message names the path too).
pub(crate) fn read_database(path: &Path) -> anyhow::Result<crate::sor::Database> {
    let reading = format!("reading {}", path.display());
    crate::sor::Database::read(path).map_err(|e| match e {
        crate::sor::DbError::Io { message, .. } => anyhow::anyhow!("{reading}: {message}"),
        e => anyhow::Error::new(e).context(reading),
    })
}

/// Reads and parses the BVH clip at `path` and the profile named (a built-in name or a
/// TOML file; detected from the joint names later when `None`).
pub(crate) fn read_clip(path: &Path, profile: Option<&str>) -> anyhow::Result<ClipFile> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let bvh = Bvh::parse(&text).with_context(|| format!("reading {}", path.display()))?;
    Ok(ClipFile {
        path: path.to_path_buf(),
        bvh,
        profile: profile.map(load_profile).transpose()?,
    })
}

/// [`read_clip`] for a command that poses the body at one `frame` of an optional clip:
/// the clip read and the frame checked to be in it.
pub(crate) fn read_clip_at(
    path: Option<&Path>,
    profile: Option<&str>,
    frame: usize,
) -> anyhow::Result<Option<ClipFile>> {
    let Some(path) = path else { return Ok(None) };
    let file = read_clip(path, profile)?;
    file.has_frame(frame)?;
    Ok(Some(file))
}

impl ClipFile {
    /// Refuses a frame number past the clip's end, naming the clip and its length.
    pub(crate) fn has_frame(&self, frame: usize) -> anyhow::Result<()> {
        let count = self.bvh.frame_count();
        anyhow::ensure!(
            frame < count,
            "{} has {count} frames, asked for frame {frame}",
            self.path.display()
        );
        Ok(())
    }

    /// The clip's number of frames.
    pub(crate) fn frame_count(&self) -> usize {
        self.bvh.frame_count()
    }

    /// Frame `frame` of the clip retargeted onto `target`.
    pub(crate) fn pose_at(&self, frame: usize, target: &Skeleton) -> anyhow::Result<Pose> {
        self.has_frame(frame)?;
        let clip = self.onto(target)?;
        clip.poses.get(frame).copied().ok_or_else(|| {
            anyhow::anyhow!("{} has {} frames", self.path.display(), clip.poses.len())
        })
    }

    /// The profile the clip is read with: the one given, else the one its joint names
    /// select.
    pub(crate) fn profile(&self) -> anyhow::Result<Profile> {
        match &self.profile {
            Some(p) => Ok(p.clone()),
            None => Profile::detect(&self.bvh.joint_names())
                .with_context(|| format!("reading {}", self.path.display())),
        }
    }

    /// The clip retargeted onto `target`.
    pub(crate) fn onto(&self, target: &Skeleton) -> anyhow::Result<Clip> {
        let clip = Clip::from_bvh(&self.bvh, self.profile.as_ref(), target)
            .with_context(|| format!("reading {}", self.path.display()))?;
        let name = self.path.file_name().unwrap_or(self.path.as_os_str());
        Ok(clip.named(name.to_string_lossy()))
    }
}

/// Reads a BVH clip and retargets it onto `target` ([`read_clip`], then [`ClipFile::onto`]).
pub(crate) fn load_clip(
    path: &Path,
    profile: Option<&str>,
    target: &Skeleton,
) -> anyhow::Result<Clip> {
    read_clip(path, profile)?.onto(target)
}

/// Longest duration a command-line option takes, seconds (~116 days: longer is a typo,
/// and would overflow the timers).
pub(crate) const MAX_SECONDS: f32 = 1e7;

/// A duration option (`--seconds`, `--keyframe-interval`): a number of seconds above 0
/// and at most [`MAX_SECONDS`]; NaN, infinities and the rest are refused by clap with
/// this message.
pub(crate) fn parse_seconds(s: &str) -> Result<f32, String> {
    let v: f32 = s.trim().parse().map_err(|e| format!("{e}"))?;
    if v.is_finite() && v > 0.0 && v <= MAX_SECONDS {
        Ok(v)
    } else {
        Err(format!(
            "{v} is not a duration: give seconds above 0 and at most {MAX_SECONDS:e}"
        ))
    }
}

/// A count of at least 1 (`--avatars`).
pub(crate) fn parse_positive(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        Ok(_) => Err("must be at least 1".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// A number of examples, 1 to [`crate::sor::MAX_EXAMPLES`] (what a database may hold;
/// `bake --examples`).
pub(crate) fn parse_examples(s: &str) -> Result<usize, String> {
    match parse_positive(s)? {
        n if n <= crate::sor::MAX_EXAMPLES => Ok(n),
        n => Err(format!(
            "{n} is more than a database holds ({})",
            crate::sor::MAX_EXAMPLES
        )),
    }
}

/// A garment resolution, 500 to 100 000 vertices (as a garment config's
/// `target_vertices`).
fn parse_garment_vertices(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n @ 500..=100_000) => Ok(n),
        Ok(n) => Err(format!("{n} vertices is outside 500–100000")),
        Err(e) => Err(e.to_string()),
    }
}

/// A count from 1 to `MAX` (`--top-k`, the benches' avatars and viewers, `play --avatars`).
pub(crate) fn parse_count<const MAX: usize>(s: &str) -> Result<usize, String> {
    match parse_positive(s)? {
        n if n <= MAX => Ok(n),
        n => Err(format!("{n} is more than {MAX}")),
    }
}

/// A half-open frame range with a step.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FrameRange {
    /// First frame.
    pub(crate) start: usize,
    /// One past the last frame (`None`: the clip's end).
    pub(crate) end: Option<usize>,
    /// Every `step`-th frame.
    pub(crate) step: usize,
}

impl FrameRange {
    /// The frame numbers of this range in a clip of `len` frames (the end clamped to
    /// the clip's); refused, naming the clip's length, when none is left.
    pub(crate) fn frames(&self, len: usize) -> anyhow::Result<Vec<usize>> {
        let end = self.end.unwrap_or(len).min(len);
        anyhow::ensure!(
            self.start < end,
            "the clip has {len} frames; range {}..{end} is empty",
            self.start
        );
        Ok((self.start..end).step_by(self.step).collect())
    }
}

/// A `--frames` option: `A..B` or `A..B:STEP` (B exclusive, either end may be left out).
pub(crate) fn parse_frames(s: &str) -> Result<FrameRange, String> {
    let (range, step) = match s.split_once(':') {
        Some((r, st)) => (
            r,
            st.trim()
                .parse::<usize>()
                .map_err(|_| format!("bad step {st:?}"))?,
        ),
        None => (s, 1),
    };
    if step == 0 {
        return Err("step must be at least 1".into());
    }
    let (a, b) = range
        .split_once("..")
        .ok_or("frames must look like A..B or A..B:STEP")?;
    let start = if a.trim().is_empty() {
        0
    } else {
        a.trim()
            .parse()
            .map_err(|_| format!("bad start frame {a:?}"))?
    };
    let end = if b.trim().is_empty() {
        None
    } else {
        Some(
            b.trim()
                .parse()
                .map_err(|_| format!("bad end frame {b:?}"))?,
        )
    };
    if end.is_some_and(|e| e <= start) {
        return Err(format!("empty frame range {s}"));
    }
    Ok(FrameRange { start, end, step })
}

#[cfg(test)]
mod tests {
    /// The import's line names what it did, and asks for a look where an opening had
    /// to be fanned.
    #[test]
    fn the_body_line_says_what_closing_did() {
        let report = crate::body::CloseReport {
            kept: vec![3000, 900],
            dropped: vec![(6, "too small to be part of the body")],
            capped: 3,
            fanned: 1,
            ..Default::default()
        };
        assert_eq!(
            super::close_line(&report),
            "body mesh: kept 2 parts (3900 triangles), capped 3 openings, 1 of them with a \
             fan about its centre (it crosses itself seen along its normal; where it bends \
             the cap may stand out of the skin: look at the body there), dropped 1 part too \
             small (eyes, teeth, hair cards…): 6 triangles"
        );
        let neat = crate::body::CloseReport {
            fanned: 0,
            ..report
        };
        assert!(!super::close_line(&neat).contains("fan"));
    }

    #[test]
    fn durations_are_positive_finite_seconds() {
        assert_eq!(super::parse_seconds("2.5"), Ok(2.5));
        assert_eq!(super::parse_seconds(" 60 "), Ok(60.0));
        for bad in ["nan", "NaN", "inf", "-inf", "0", "-1", "1e30", "", "soon"] {
            assert!(super::parse_seconds(bad).is_err(), "{bad:?} was taken");
        }
    }

    #[test]
    fn counts_are_whole_and_within_their_range() {
        assert_eq!(super::parse_positive("3"), Ok(3));
        assert_eq!(super::parse_count::<64>("64"), Ok(64));
        for bad in ["0", "-1", "1.5", "", "many"] {
            assert!(super::parse_positive(bad).is_err(), "{bad:?} was taken");
        }
        assert!(super::parse_count::<64>("65").is_err());
    }

    #[test]
    fn frame_ranges_parse_and_bad_ones_are_named() {
        use super::parse_frames;
        let r = parse_frames("10..50:5").expect("valid");
        assert_eq!((r.start, r.end, r.step), (10, Some(50), 5));
        assert_eq!(r.frames(30).expect("frames"), vec![10, 15, 20, 25]);
        assert!(r.frames(10).unwrap_err().to_string().contains("10 frames"));
        let r = parse_frames("..").expect("valid");
        assert_eq!((r.start, r.end, r.step), (0, None, 1));
        assert!(parse_frames("5..5").unwrap_err().contains("empty"));
        assert!(parse_frames("1..9:0").unwrap_err().contains("step"));
        assert!(parse_frames("x..9").unwrap_err().contains("start"));
        assert!(parse_frames("12").unwrap_err().contains("A..B"));
    }
}

/// SOR runtime settings a command may override (`eval`, `bench synth`); the defaults
/// are [`crate::sor::SynthParams`]'s.
#[derive(clap::Args, Debug, Clone, Default)]
pub(crate) struct SynthArgs {
    /// Exponent k of SOR's distance weights W = (D + ε)^−k (default: Wu's 3).
    #[arg(long, value_parser = parse_exponent)]
    pub(crate) k: Option<f64>,
    /// The share of a region's weight below which SOR drops an example there (a
    /// speed/accuracy knob; default 0.01, 0 keeps all).
    #[arg(long, value_parser = parse_share)]
    pub(crate) min_share: Option<f32>,
    /// SOR's distance weights: each example's own (SOR Eq. 9 as written) or their
    /// mean per region, shared by all examples (Wu Eq. 7's form; the default).
    #[arg(long, value_enum)]
    pub(crate) distance: Option<DistanceArg>,
    /// With pooled distance weights, the share of each example's own U mixed in
    /// (default 0.25; 0 pooled alone, 1 each example's own).
    #[arg(long, value_parser = parse_own_share)]
    pub(crate) own_share: Option<f32>,
    /// Exponent of the cross-check of each example's distance weights against its
    /// neighbours' garments (default 1; 0 off).
    #[arg(long, value_parser = parse_cross_scale)]
    pub(crate) cross_scale: Option<f32>,
}

impl SynthArgs {
    /// Overrides the settings given.
    pub(crate) fn apply(&self, p: &mut crate::sor::SynthParams) {
        if let Some(k) = self.k {
            p.k = k;
        }
        if let Some(m) = self.min_share {
            p.min_share = m;
        }
        if let Some(s) = self.own_share {
            p.own_share = s;
        }
        if let Some(b) = self.cross_scale {
            p.cross_scale = b;
        }
        if let Some(d) = self.distance {
            p.distance = match d {
                DistanceArg::PerExample => crate::sor::Distance::PerExample,
                DistanceArg::Pooled => crate::sor::Distance::Pooled,
            };
        }
    }
}

/// `--distance`.
#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub(crate) enum DistanceArg {
    /// Each example's own U (SOR Eq. 9 as written).
    PerExample,
    /// The examples' mean U per region, shared by all (Wu Eq. 7's form).
    Pooled,
}

fn parse_share(s: &str) -> Result<f32, String> {
    match s.trim().parse::<f32>() {
        Ok(v) if v.is_finite() && (0.0..=0.5).contains(&v) => Ok(v),
        _ => Err(format!("min_share must be 0–0.5, not {s:?}")),
    }
}

fn parse_own_share(s: &str) -> Result<f32, String> {
    match s.trim().parse::<f32>() {
        Ok(v) if v.is_finite() && (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!("own_share must be 0–1, not {s:?}")),
    }
}

fn parse_cross_scale(s: &str) -> Result<f32, String> {
    match s.trim().parse::<f32>() {
        Ok(v) if v.is_finite() && (0.0..=4.0).contains(&v) => Ok(v),
        _ => Err(format!("cross_scale must be 0–4, not {s:?}")),
    }
}

fn parse_exponent(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(k) if k.is_finite() && (0.0..=64.0).contains(&k) => Ok(k),
        _ => Err(format!("k must be 0–64, not {s:?}")),
    }
}
