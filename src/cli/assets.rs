//! `clothcast assets`: the default body and garments as files (glTF and OBJ), also the
//! avatar to model one's own garments on.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use super::common::{BodyArgs, GarmentArgs, write_file, write_glb_file};
use crate::body::glb_skeleton;
use crate::mesh::{GlbScene, write_obj};

/// Arguments of `clothcast assets`.
#[derive(Args, Debug)]
pub(crate) struct AssetsArgs {
    /// Output folder (created if missing).
    #[arg(long)]
    out: PathBuf,
    #[command(flatten)]
    body: BodyArgs,
    #[command(flatten)]
    garment: GarmentArgs,
}

pub(crate) fn run(a: AssetsArgs) -> anyhow::Result<()> {
    eprintln!("{} …", a.body.describe());
    let body = a.body.build()?;
    let skel = glb_skeleton(&body.skeleton);
    let body_data = body.export_mesh();
    let body_path = a.out.join("body.glb");
    write_glb_file(
        &body_path,
        &GlbScene {
            skeleton: Some(glb_skeleton(&body.skeleton)),
            meshes: vec![body.glb_mesh(&body_data)],
            animation: None,
        },
    )?;
    // the body as an avatar for garment tools that import OBJ (a garment modelled on it
    // is imported with a garment TOML naming its mesh: see the README)
    let body_obj = a.out.join("body.obj");
    write_file(&body_obj, |w| {
        write_obj(
            w,
            &body.mesh,
            "clothcast body, rest pose (T-pose), metres, +Y up, facing +Z",
        )
    })?;
    outln!(
        "{}  body, {} vertices, 22-joint skin (also {})",
        body_path.display(),
        body.mesh.vertex_count(),
        body_obj.display()
    );
    if body.field().is_none() {
        // procedural garments are cut around the generated body's implicit surface
        eprintln!(
            "no garments: the built-in ones are cut around the generated body; model yours on {} and import it (see the README, \"Your own garment (and body)\")",
            body_obj.display()
        );
        return Ok(());
    }
    let mut garments = Vec::new();
    for (name, color) in [
        ("tshirt", [0.15, 0.35, 0.75, 1.0]),
        ("pants", [0.18, 0.18, 0.22, 1.0]),
    ] {
        eprintln!("generating {name} …");
        let g = a.garment.build(&body, name)?;
        let normals = g.mesh.vertex_normals();
        let glb = a.out.join(format!("{name}.glb"));
        write_glb_file(
            &glb,
            &GlbScene {
                skeleton: Some(glb_skeleton(&body.skeleton)),
                meshes: vec![g.glb_mesh(&normals, color)],
                animation: None,
            },
        )?;
        let obj = a.out.join(format!("{name}.obj"));
        write_file(&obj, |w| {
            write_obj(w, &g.mesh, &format!("clothcast {name}, rest pose, metres"))
        })?;
        outln!(
            "{}  {name}, {} vertices, {} regions (also {})",
            glb.display(),
            g.vertex_count(),
            g.regions.len(),
            obj.display()
        );
        garments.push((g, normals, color));
    }
    let mut meshes = vec![body.glb_mesh(&body_data)];
    for (g, n, c) in &garments {
        meshes.push(g.glb_mesh(n, *c));
    }
    let avatar = a.out.join("avatar.glb");
    write_glb_file(
        &avatar,
        &GlbScene {
            skeleton: Some(skel),
            meshes,
            animation: None,
        },
    )
    .context("writing avatar.glb")?;
    outln!("{}  body and garments together", avatar.display());
    Ok(())
}
