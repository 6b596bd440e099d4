//! `clothcast drape`: a garment simulated to static equilibrium on the body at a pose.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, ValueEnum};
use glam::Vec3;

use super::common::{BodyArgs, GarmentArgs, read_clip_at, write_glb_file, write_png};
use crate::body::{Body, SkinningMethod, glb_skeleton};
use crate::mesh::{Camera, DrawItem, GlbMaterial, GlbMesh, GlbScene, Image, TriMesh, render};
use crate::sim::{SimParams, Simulator};
use crate::skeleton::{JointId, Pose, canonicalize, quat_exp};

/// Built-in poses for draping without a clip.
#[derive(ValueEnum, Debug, Clone, Copy)]
pub(crate) enum NamedPose {
    /// The T-pose.
    Rest,
    /// Arms 45° down.
    APose,
    /// Right arm raised 90° (pointing up) and the torso twisted 30°.
    ArmUpTwist,
}

impl NamedPose {
    pub(crate) fn pose(self) -> Pose {
        let mut p = Pose::rest();
        match self {
            NamedPose::Rest => {}
            NamedPose::APose => p = Pose::arms_lowered(45.0),
            NamedPose::ArmUpTwist => {
                p.set_rotation(
                    JointId::RIGHT_SHOULDER,
                    quat_exp(Vec3::new(0.0, 0.0, -90f32.to_radians())),
                );
                for j in [JointId::SPINE1, JointId::SPINE2, JointId::SPINE3] {
                    p.set_rotation(j, quat_exp(Vec3::new(0.0, 10f32.to_radians(), 0.0)));
                }
            }
        }
        p
    }
}

/// Arguments of `clothcast drape`.
#[derive(Args, Debug)]
pub(crate) struct DrapeArgs {
    /// Garment: built-in name (tshirt, pants) or a garment TOML file (procedural, or with
    /// `mesh = "FILE.obj|gltf|glb"` a mesh of one's own: see the README).
    #[arg(long, default_value = "tshirt")]
    garment: String,
    /// Pose from this BVH clip (with --frame); otherwise --pose.
    #[arg(long)]
    bvh: Option<PathBuf>,
    /// Frame of the clip.
    #[arg(long, default_value_t = 0)]
    frame: usize,
    /// Skeleton profile of the clip (detected when omitted).
    #[arg(long)]
    profile: Option<String>,
    /// Built-in pose when no clip is given.
    #[arg(long, value_enum, default_value_t = NamedPose::Rest)]
    pose: NamedPose,
    /// Output .glb with the posed body and the draped garment.
    #[arg(long)]
    out: PathBuf,
    /// Also render a PNG (three views).
    #[arg(long)]
    png: Option<PathBuf>,
    /// The membrane's stiffness in compression as a share of its stiffness in tension,
    /// in (0, 1] (1: StVK; default: the simulator's default).
    #[arg(long, value_parser = compression_ratio)]
    compression_ratio: Option<f64>,
    /// Keep the garment from passing through itself (cloth self-contact, off by
    /// default as in SOR §7; slower).
    #[arg(long)]
    self_contact: bool,
    #[command(flatten)]
    body: BodyArgs,
    #[command(flatten)]
    garment_args: GarmentArgs,
}

/// `--compression-ratio`: a number in (0, 1], refused when the command line is read.
fn compression_ratio(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(c) if c > 0.0 && c <= 1.0 => Ok(c),
        Ok(_) => Err("the compression ratio must be in (0, 1] (1: StVK)".into()),
        Err(e) => Err(e.to_string()),
    }
}

pub(crate) fn run(a: DrapeArgs) -> anyhow::Result<()> {
    let file = read_clip_at(a.bvh.as_deref(), a.profile.as_deref(), a.frame)?;
    let body = a.body.build()?;
    let garment = a.garment_args.build(&body, &a.garment)?;
    let target = match &file {
        Some(f) => f.pose_at(a.frame, &body.skeleton)?,
        None => a.pose.pose(),
    };
    // arms out of the torso (cloth has no rest state inside the body)
    let target =
        crate::body::SelfContactGuard::new(&body, crate::bake::GUARD_CLEARANCE).apply(&target);
    // statics do not depend on heading or position: simulate in the canonical frame
    let (canonical, frame) = canonicalize(&target, &body.skeleton);
    let mut params = SimParams::default();
    if let Some(c) = a.compression_ratio {
        params.compression_ratio = c;
    }
    if a.self_contact {
        params = params.with_self_contact();
    }
    let mut sim = Simulator::new(&body, &garment, &params)?;
    eprintln!(
        "draping {} ({} vertices) at rest …",
        garment.name,
        garment.vertex_count()
    );
    let rest = sim.drape_rest().context("draping at the rest pose")?;
    eprintln!(
        "  {} Newton iterations, ‖F‖ = {:.2e} N (tolerance {:.2e} N), {:.1?}",
        rest.report.iterations, rest.report.residual, rest.report.tolerance, rest.report.total_time
    );
    let eq = if canonical == Pose::rest() {
        rest
    } else {
        eprintln!(
            "carrying it to the target pose ({} continuation steps) …",
            sim.steps_between(&rest.pose, &canonical)
        );
        let eq = sim
            .carry(&rest, &canonical)
            .context("carrying the garment to the pose")?;
        eprintln!(
            "  {} Newton iterations, ‖F‖ = {:.2e} N, {:.1?}",
            eq.report.iterations, eq.report.residual, eq.report.total_time
        );
        eq
    };
    let depths: Vec<f64> = eq
        .positions
        .iter()
        .map(|p| sim.collider().signed_distance(*p))
        .collect();
    let deepest = depths.iter().copied().fold(f64::MAX, f64::min);
    eprintln!(
        "  deepest garment vertex: {:.2} mm from the body surface ({} more than 2 mm inside)",
        deepest * 1000.0,
        depths.iter().filter(|d| **d < -0.002).count()
    );
    eprintln!(
        "  edges through the garment's own triangles: {}",
        crate::sim::self_intersections(&eq.positions, &garment.mesh.triangles)
    );
    // back to the world frame
    let to_world = frame.to_world();
    let garment_world: Vec<Vec3> = eq
        .positions
        .iter()
        .map(|p| to_world.apply(p.as_vec3()))
        .collect();
    write_scene(
        &a.out,
        &body,
        &target,
        &garment_world,
        &garment.mesh.triangles,
        &garment.name,
    )?;
    outln!("{}", a.out.display());
    if let Some(png) = &a.png {
        let body_mesh = body.posed_mesh(&target, SimParams::default().body_skinning);
        let cloth = TriMesh::new(garment_world, garment.mesh.triangles.clone());
        // frame the garment with some body around it, and up to the top of the head
        // (a neckline is judged against the face, and a cropped head looks broken)
        let (lo, hi) = cloth
            .bounds()
            .ok_or_else(|| anyhow::anyhow!("empty garment"))?;
        let top = body_mesh.bounds().map_or(hi.y, |(_, b)| b.y);
        let pad = Vec3::splat(0.1);
        let (lo, hi) = (lo - pad, (hi + pad).with_y((hi.y + pad.y).max(top + 0.02)));
        let items = [
            DrawItem {
                mesh: &body_mesh,
                positions: None,
                color: [0.8, 0.62, 0.52],
            },
            DrawItem {
                mesh: &cloth,
                positions: None,
                color: [0.2, 0.4, 0.8],
            },
        ];
        let views: Vec<Image> = [
            Vec3::Z,
            Vec3::new(1.0, 0.3, 0.8),
            Vec3::new(-0.4, 0.4, -1.0),
        ]
        .into_iter()
        .map(|d| render(&items, &Camera::framing(lo, hi, d, 1.0), 600, 600))
        .collect();
        write_png(png, &Image::hstack(&views))?;
        outln!("{}", png.display());
    }
    Ok(())
}

/// Writes the posed body (its rest mesh skinned by the pose's joints) and the garment
/// (unskinned, already in place) as one .glb.
fn write_scene(
    path: &std::path::Path,
    body: &Body,
    pose: &Pose,
    garment: &[Vec3],
    triangles: &[[u32; 3]],
    name: &str,
) -> anyhow::Result<()> {
    let posed = body.posed_positions(pose, SkinningMethod::Lbs);
    let posed_mesh = TriMesh::new(posed, body.mesh.triangles.clone());
    let bn = posed_mesh.vertex_normals();
    let cloth = TriMesh::new(garment.to_vec(), triangles.to_vec());
    let cn = cloth.vertex_normals();
    let meshes = vec![
        GlbMesh {
            name: "body",
            positions: &posed_mesh.positions,
            normals: &bn,
            triangles: &posed_mesh.triangles,
            skin: None,
            material: GlbMaterial {
                name: "skin".into(),
                base_color: [0.8, 0.62, 0.52, 1.0],
                roughness: 0.7,
                double_sided: false,
            },
        },
        GlbMesh {
            name,
            positions: &cloth.positions,
            normals: &cn,
            triangles: &cloth.triangles,
            skin: None,
            material: GlbMaterial {
                name: "cloth".into(),
                base_color: [0.15, 0.35, 0.75, 1.0],
                roughness: 0.9,
                double_sided: true,
            },
        },
    ];
    let _ = glb_skeleton;
    write_glb_file(
        path,
        &GlbScene {
            skeleton: None,
            meshes,
            animation: None,
        },
    )
}
