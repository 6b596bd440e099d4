//! `clothcast retarget`: a BVH clip on the default body, as an animated glTF.

use std::path::PathBuf;

use clap::Args;

use super::common::{BodyArgs, GarmentArgs, read_clip, write_glb_file};
use crate::body::{ExportAnimation, glb_skeleton};
use crate::mesh::GlbScene;
use crate::mocap::{HINGE_FIT_MIN_BEND, HINGE_FIT_SUGGEST, Profile, hinge_fit};
use crate::skeleton::{Pose, Skeleton};

/// Arguments of `clothcast retarget`.
#[derive(Args, Debug)]
pub(crate) struct RetargetArgs {
    /// BVH motion file.
    clip: PathBuf,
    /// Output .glb file.
    #[arg(long)]
    out: PathBuf,
    /// Skeleton profile: a built-in name (cmu, mixamo, unity, vroid, smpl) or a TOML
    /// file; detected from the joint names when omitted.
    #[arg(long)]
    profile: Option<String>,
    /// Output frame rate (frames are taken from the clip, no interpolation).
    #[arg(long, default_value_t = 30.0)]
    fps: f32,
    /// Also put the default T-shirt and pants on the body (skinned, not simulated).
    #[arg(long)]
    garments: bool,
    #[command(flatten)]
    body: BodyArgs,
    #[command(flatten)]
    garment: GarmentArgs,
}

pub(crate) fn run(a: RetargetArgs) -> anyhow::Result<()> {
    if !(a.fps.is_finite() && a.fps > 0.0 && a.fps <= 1000.0) {
        anyhow::bail!("--fps must be between 0 and 1000");
    }
    let file = read_clip(&a.clip, a.profile.as_deref())?;
    let body = a.body.build()?;
    let clip = file.onto(&body.skeleton)?;
    report_hinges(&clip.poses, &body.skeleton, &file.profile()?);
    let step = ((1.0 / a.fps) / clip.frame_time).round().max(1.0) as usize;
    let clip = clip.every(step);
    eprintln!(
        "{}: {} frames at {:.1} fps, profile {}",
        a.clip.display(),
        clip.poses.len(),
        1.0 / clip.frame_time,
        clip.profile
    );
    let anim = ExportAnimation::new(&clip.poses, clip.frame_time, &body.skeleton);
    let data = body.export_mesh();
    let mut meshes = vec![body.glb_mesh(&data)];
    let mut garments = Vec::new();
    if a.garments {
        for (name, color) in [
            ("tshirt", [0.15, 0.35, 0.75, 1.0]),
            ("pants", [0.18, 0.18, 0.22, 1.0]),
        ] {
            let g = a.garment.build(&body, name)?;
            let n = g.mesh.vertex_normals();
            garments.push((g, n, color));
        }
    }
    for (g, n, c) in &garments {
        meshes.push(g.glb_mesh(n, *c));
    }
    let name = a
        .clip
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("clip")
        .to_string();
    write_glb_file(
        &a.out,
        &GlbScene {
            skeleton: Some(glb_skeleton(&body.skeleton)),
            meshes,
            animation: Some(anim.glb(&name)),
        },
    )?;
    outln!(
        "{}  {} frames, {:.2} s",
        a.out.display(),
        clip.poses.len(),
        clip.duration()
    );
    Ok(())
}

/// Prints (stderr) how far the clip's elbows and knees bend from the canonical hinges
/// (`mocap::hinge_fit`) and, where a limb is consistently turned, the profile
/// `[correction]` lines that turn it back.
fn report_hinges(poses: &[Pose], skeleton: &Skeleton, profile: &Profile) {
    eprintln!(
        "hinges: where the lower bone bends, against the canonical hinge (frames bent over {HINGE_FIT_MIN_BEND}°):"
    );
    let mut lines = Vec::new();
    for fit in hinge_fit(poses, skeleton) {
        let limb = fit
            .upper
            .name()
            .replace("_shoulder", " arm")
            .replace("_hip", " leg");
        let verdict = if !fit.consistent() {
            "too few bent frames, or too varied, to tell"
        } else if fit.offset.abs() <= HINGE_FIT_SUGGEST {
            "fine"
        } else {
            "turned: a correction below"
        };
        eprintln!(
            "  {limb:<9} {:+6.1}° ±{:.1}° over {} frames: {verdict}",
            fit.offset, fit.spread, fit.frames
        );
        lines.extend(fit.correction(profile).unwrap_or_default());
    }
    if !lines.is_empty() {
        eprintln!(
            "  profile {}: put these in its [correction] (degrees), so that the limbs bend about the canonical hinges:",
            profile.name
        );
        for (j, v) in lines {
            eprintln!("    {} = [{:.1}, {:.1}, {:.1}]", j.name(), v.x, v.y, v.z);
        }
    }
}
