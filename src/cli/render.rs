//! `clothcast render`: a PNG of the body and garments at a pose (three views).

use std::path::PathBuf;

use clap::Args;
use glam::Vec3;

use super::common::{BodyArgs, GarmentArgs, read_clip_at, write_png};
use crate::body::SkinningMethod;
use crate::mesh::{Camera, DrawItem, Image, TriMesh, render};
use crate::skeleton::Pose;

/// Arguments of `clothcast render`.
#[derive(Args, Debug)]
pub(crate) struct RenderArgs {
    /// Output PNG.
    #[arg(long)]
    out: PathBuf,
    /// Pose from this BVH clip (rest pose when omitted).
    #[arg(long)]
    bvh: Option<PathBuf>,
    /// Frame of the clip.
    #[arg(long, default_value_t = 0)]
    frame: usize,
    /// Skeleton profile of the clip (detected when omitted).
    #[arg(long)]
    profile: Option<String>,
    /// Garments to show (comma separated: tshirt, pants; empty for none), skinned from
    /// their rest shape (linear blend skinning, no cloth simulation).
    #[arg(long, default_value = "tshirt,pants")]
    garments: String,
    /// Image height in pixels (three square views side by side).
    #[arg(long, default_value_t = 600)]
    size: u32,
    #[command(flatten)]
    body: BodyArgs,
    #[command(flatten)]
    garment: GarmentArgs,
}

pub(crate) fn run(a: RenderArgs) -> anyhow::Result<()> {
    if !(64..=4096).contains(&a.size) {
        anyhow::bail!("--size must be 64–4096 pixels");
    }
    let file = read_clip_at(a.bvh.as_deref(), a.profile.as_deref(), a.frame)?;
    let body = a.body.build()?;
    let pose = match &file {
        Some(f) => f.pose_at(a.frame, &body.skeleton)?,
        None => Pose::rest(),
    };
    let mut meshes: Vec<(TriMesh, [f32; 3])> = vec![(
        body.posed_mesh(&pose, SkinningMethod::Lbs),
        [0.8, 0.62, 0.52],
    )];
    for name in a
        .garments
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let g = a.garment.build(&body, name)?;
        let t = body.skeleton.skinning_transforms(&pose);
        let mut posed = vec![Vec3::ZERO; g.vertex_count()];
        crate::body::skin_into(
            SkinningMethod::Lbs,
            &g.mesh.positions,
            &g.skin,
            &t,
            &mut posed,
        );
        let color = if name == "pants" {
            [0.2, 0.2, 0.25]
        } else {
            [0.2, 0.4, 0.8]
        };
        meshes.push((TriMesh::new(posed, g.mesh.triangles.clone()), color));
    }
    let (lo, hi) = meshes[0]
        .0
        .bounds()
        .ok_or_else(|| anyhow::anyhow!("empty body"))?;
    let items: Vec<DrawItem<'_>> = meshes
        .iter()
        .map(|(m, c)| DrawItem {
            mesh: m,
            positions: None,
            color: *c,
        })
        .collect();
    let views: Vec<Image> = [
        Vec3::Z,
        Vec3::new(1.0, 0.3, 0.8),
        Vec3::new(-0.4, 0.4, -1.0),
    ]
    .into_iter()
    .map(|d| render(&items, &Camera::framing(lo, hi, d, 1.0), a.size, a.size))
    .collect();
    write_png(&a.out, &Image::hstack(&views))?;
    outln!("{}", a.out.display());
    Ok(())
}
