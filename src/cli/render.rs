//! `clothcast render`: a PNG of the body and garments at a pose (three views, or the
//! front one), or one per frame of a range of a clip (a flipbook).

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use glam::Vec3;

use super::common::{
    BodyArgs, FrameRange, GarmentArgs, SynthArgs, parse_frames, read_clip, read_clip_at, write_png,
};
use crate::body::{SelfContactGuard, SkinningMethod};
use crate::mesh::{Camera, DrawItem, Image, TriMesh, render};
use crate::skeleton::{Pose, canonicalize};
use crate::sor::{
    AvatarState, Database, LayerParams, LayerScratch, LayerState, Layering, Scratch, SynthParams,
    Synthesizer,
};

/// Arguments of `clothcast render`.
#[derive(Args, Debug)]
pub(crate) struct RenderArgs {
    /// Output PNG; with `--frames`, a folder for `frame-NNNNN.png`, one per frame.
    #[arg(long)]
    out: PathBuf,
    /// Pose from this BVH clip (rest pose when omitted).
    #[arg(long)]
    bvh: Option<PathBuf>,
    /// Frame of the clip.
    #[arg(long, default_value_t = 0)]
    frame: usize,
    /// A picture per frame of this range of the clip: `A..B` or `A..B:STEP` (B
    /// exclusive), written into the folder `--out`.
    #[arg(long, value_parser = parse_frames, requires = "bvh", conflicts_with = "frame")]
    frames: Option<FrameRange>,
    /// Which views: `all` (front, front-left from above, behind-right) or `front`
    /// (the body seen from a level camera in front of it, as a webcam in front of a
    /// performer sees them).
    #[arg(long, value_enum, default_value_t = Views::All)]
    views: Views,
    /// The front view's camera pitched this many degrees down (0–60), as a webcam
    /// above a screen looks down at the performer.
    #[arg(long, default_value_t = 0.0, value_parser = parse_tilt)]
    tilt: f32,
    /// Skeleton profile of the clip (detected when omitted).
    #[arg(long)]
    profile: Option<String>,
    /// Drive the body as a Kinect sensor (`v2` or `azure`) would see a performer who
    /// moves as the clip: each frame's joint positions sent as a bridge's body frame
    /// (sensor 1 m high, 2 m in front) and read back as the server reads a Kinect body
    /// (bone directions, the upper arms' and thighs' twist from the elbows' and knees'
    /// bend, the floor, One Euro filtering), frame by frame from the clip's start.
    /// What a try-on kiosk shows of that performer.
    #[arg(long, value_enum, requires = "bvh")]
    kinect: Option<super::play::KinectArg>,
    /// Garments to show (comma separated: tshirt, pants; empty for none), skinned from
    /// their rest shape (linear blend skinning, no cloth simulation).
    #[arg(long, default_value = "tshirt,pants")]
    garments: String,
    /// Show instead the garment that SOR synthesises from this database at the pose,
    /// on the database's own body: what the server streams for it (`--db default`: the
    /// default database, baked if missing). Repeated, an outfit, inner to outer (`--db
    /// pants.ccdb --db tshirt.ccdb`; the other way round, the shirt tucked into the
    /// pants): each garment synthesised, then layered over the ones under it as the
    /// server layers them. With `--frames` the frames are
    /// synthesised in order, damped as a live avatar's are.
    #[arg(long, conflicts_with_all = [
        "garments", "height", "weight", "shoulder_width", "hip_width", "body_vertices",
        "garment_vertices", "sleeves", "legs",
    ])]
    db: Vec<PathBuf>,
    /// With one `--db`: example N of the database (numbered from 0, as `inspect`
    /// names them) at its own pose, in two rows of views: above, its garment as the
    /// bake simulated it (blue); below, the garment SOR synthesises at that pose from
    /// the other examples (green), the prediction `inspect`'s "left out" line measures
    /// (its error is printed too). Where `inspect` names an example the others predict
    /// badly, this shows where and why.
    #[arg(long, requires = "db", conflicts_with_all = ["bvh", "frame", "frames", "kinect"])]
    example: Option<usize>,
    /// Image height in pixels (square views side by side).
    #[arg(long, default_value_t = 600)]
    size: u32,
    #[command(flatten)]
    body: BodyArgs,
    #[command(flatten)]
    garment: GarmentArgs,
    /// SOR's settings for `--db` (the server's defaults unless given).
    #[command(flatten)]
    synth: SynthArgs,
}

fn parse_tilt(s: &str) -> Result<f32, String> {
    match s.trim().parse::<f32>() {
        Ok(t) if (0.0..=60.0).contains(&t) => Ok(t),
        _ => Err(format!("{s:?} is not a tilt of 0–60 degrees")),
    }
}

/// Which views `render` draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Views {
    /// Front, front-left from above, behind-right.
    All,
    /// The front only.
    Front,
}

pub(crate) fn run(a: RenderArgs) -> anyhow::Result<()> {
    if !(64..=4096).contains(&a.size) {
        anyhow::bail!("--size must be 64–4096 pixels");
    }
    // the clip's problems are found before the body is built (seconds)
    let (file, frames) = match (&a.frames, &a.bvh) {
        (Some(range), Some(path)) => {
            let file = read_clip(path, a.profile.as_deref())?;
            let frames = range.frames(file.frame_count())?;
            (Some(file), Some(frames))
        }
        (Some(_), None) => anyhow::bail!("--frames needs --bvh"),
        (None, path) => (
            read_clip_at(path.as_deref(), a.profile.as_deref(), a.frame)?,
            None,
        ),
    };
    let front = Vec3::new(0.0, a.tilt.to_radians().tan(), 1.0);
    let views: &[Vec3] = match a.views {
        Views::All => &[front, Vec3::new(1.0, 0.3, 0.8), Vec3::new(-0.4, 0.4, -1.0)],
        Views::Front => &[front],
    };
    let dbs =
        a.db.iter()
            .map(|p| super::serve::load_db((p.as_os_str() != "default").then_some(p)))
            .collect::<anyhow::Result<Vec<_>>>()?;
    let body = match dbs.first() {
        Some(db) => db.body.to_body(),
        None => a.body.build()?,
    };
    let mut params = SynthParams::default();
    a.synth.apply(&mut params);
    if let Some(example) = a.example {
        let [db] = dbs.as_slice() else {
            anyhow::bail!("--example shows one database's example: give one --db");
        };
        let image = example_picture(db, &params, &body, example, views, a.size)?;
        write_png(&a.out, &image)?;
        outln!("{}", a.out.display());
        return Ok(());
    }
    let mut dress = match dbs.first() {
        Some(_) => Dress::Synthesised(Box::new(Outfit::new(&dbs, &body, &params)?)),
        None => Dress::Skinned(
            a.garments
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|name| Ok((name == "pants", a.garment.build(&body, name)?)))
                .collect::<anyhow::Result<Vec<_>>>()?,
        ),
    };
    let face = face(&body);
    let (Some(frames), Some(file)) = (frames, &file) else {
        let pose = match (&file, a.kinect) {
            (Some(f), Some(kind)) => {
                let clip = f.onto(&body.skeleton)?;
                let upto = clip
                    .poses
                    .get(..=a.frame)
                    .ok_or_else(|| anyhow::anyhow!("the clip has {} frames", clip.poses.len()))?;
                let seen = through_kinect(upto, clip.frame_time, kind, &body.skeleton)?;
                *seen
                    .last()
                    .ok_or_else(|| anyhow::anyhow!("the clip has no frames"))?
            }
            (Some(f), None) => f.pose_at(a.frame, &body.skeleton)?,
            (None, _) => Pose::rest(),
        };
        let pose = dress.pose(&pose);
        let garments = dress.at(&body, &pose, 0.0);
        write_png(
            &a.out,
            &picture(&body, &face, &garments, &pose, views, a.size)?,
        )?;
        outln!("{}", a.out.display());
        return Ok(());
    };
    let mut clip = file.onto(&body.skeleton)?;
    if let Some(kind) = a.kinect {
        let last = frames
            .iter()
            .copied()
            .max()
            .unwrap_or(0)
            .min(clip.poses.len().saturating_sub(1));
        clip.poses = through_kinect(&clip.poses[..=last], clip.frame_time, kind, &body.skeleton)?;
    }
    super::common::create_folder(&a.out)?;
    let mut last = None;
    for f in frames {
        let pose = clip
            .poses
            .get(f)
            .ok_or_else(|| anyhow::anyhow!("the clip has {} poses", clip.poses.len()))?;
        // seconds since the previous picture's frame, for SOR's damping
        let dt = last.map_or(0.0, |l: usize| f.abs_diff(l) as f32 * clip.frame_time);
        last = Some(f);
        let pose = &dress.pose(pose);
        let garments = dress.at(&body, pose, dt);
        let out = a.out.join(format!("frame-{f:05}.png"));
        write_png(
            &out,
            &picture(&body, &face, &garments, pose, views, a.size)?,
        )?;
    }
    outln!("{}", a.out.display());
    Ok(())
}

/// `poses` as the server makes them of a Kinect sensor of `kind` watching a performer
/// who moves so (see `RenderArgs::kinect`), with the server's default filter.
pub(crate) fn through_kinect(
    poses: &[Pose],
    frame_time: f32,
    kind: super::play::KinectArg,
    skeleton: &crate::skeleton::Skeleton,
) -> anyhow::Result<Vec<Pose>> {
    let retargeter = crate::mocap::PositionRetargeter::new(skeleton);
    let filter = crate::engine::EngineConfig::default().filter;
    Ok(crate::engine::through_kinect(
        poses,
        frame_time,
        kind.into(),
        &retargeter,
        filter.as_ref(),
    )?)
}

/// What the body wears in the pictures.
enum Dress<'db> {
    /// Garments (`(is pants, garment)`) skinned from their rest shape.
    Skinned(Vec<(bool, crate::garment::Garment)>),
    /// Databases' garments as SOR synthesises and the server layers them.
    Synthesised(Box<Outfit<'db>>),
}

/// One avatar's outfit (inner to outer), its synthesis and layering state kept from
/// picture to picture.
struct Outfit<'db> {
    layers: Vec<Synthesis<'db>>,
    /// Keeps the arms out of the torso, as the server does by default.
    guard: SelfContactGuard,
    /// `[outer][inner]` for every inner layer under an outer one, with its state.
    layerings: Vec<Vec<(Layering, LayerState)>>,
    scratch: LayerScratch,
}

/// One garment of an [`Outfit`].
struct Synthesis<'db> {
    synth: Synthesizer<'db>,
    triangles: Vec<[u32; 3]>,
    state: AvatarState,
    scratch: Scratch,
    out: Vec<Vec3>,
}

impl<'db> Outfit<'db> {
    /// The garments of `dbs`, inner to outer, worn by `body` (the first database's);
    /// refused by name when two were baked for different bodies or are the same
    /// garment.
    fn new(
        dbs: &'db [Arc<Database>],
        body: &crate::body::Body,
        synth: &SynthParams,
    ) -> anyhow::Result<Self> {
        let params = LayerParams::default();
        let mut layerings = Vec::with_capacity(dbs.len());
        for (i, outer) in dbs.iter().enumerate() {
            let mut under = Vec::with_capacity(i);
            for inner in &dbs[..i] {
                anyhow::ensure!(
                    inner.garment.name != outer.garment.name,
                    "the outfit names {:?} twice",
                    outer.garment.name
                );
                under.push((Layering::new(inner, outer, &params)?, LayerState::default()));
            }
            layerings.push(under);
        }
        Ok(Self {
            layers: dbs
                .iter()
                .map(|db| Synthesis {
                    synth: Synthesizer::new(db, synth.clone()),
                    triangles: db.garment.triangles.clone(),
                    state: AvatarState::new(),
                    scratch: Scratch::default(),
                    out: vec![Vec3::ZERO; db.vertex_count()],
                })
                .collect(),
            guard: SelfContactGuard::new(body, crate::bake::GUARD_CLEARANCE),
            layerings,
            scratch: LayerScratch::default(),
        })
    }
}

/// Colour of layer `i` of `n` (inner to outer): the outermost blue as a lone garment
/// is, those under it darker.
fn layer_colour(i: usize, n: usize) -> [f32; 3] {
    if i + 1 == n {
        [0.2, 0.4, 0.8]
    } else {
        [0.2, 0.2, 0.25]
    }
}

impl Dress<'_> {
    /// The pose the body is drawn at: with databases, the arms kept out of the torso
    /// as the server keeps them (`[engine] keep_arms_out`, on by default).
    fn pose(&self, pose: &Pose) -> Pose {
        match self {
            Dress::Skinned(_) => *pose,
            Dress::Synthesised(o) => o.guard.apply(pose),
        }
    }

    /// The garments at `pose` (world frame) with their colours; `dt` is the seconds
    /// since the previous call's pose (SOR's damping; 0 for a first frame).
    fn at(&mut self, body: &crate::body::Body, pose: &Pose, dt: f32) -> Vec<(TriMesh, [f32; 3])> {
        match self {
            Dress::Skinned(garments) => {
                let t = body.skeleton.skinning_transforms(pose);
                garments
                    .iter()
                    .map(|(pants, g)| {
                        let mut posed = vec![Vec3::ZERO; g.vertex_count()];
                        crate::body::skin_into(
                            SkinningMethod::Lbs,
                            &g.mesh.positions,
                            &g.skin,
                            &t,
                            &mut posed,
                        );
                        let color = if *pants {
                            [0.2, 0.2, 0.25]
                        } else {
                            [0.2, 0.4, 0.8]
                        };
                        (TriMesh::new(posed, g.mesh.triangles.clone()), color)
                    })
                    .collect()
            }
            Dress::Synthesised(o) => {
                // as the engine does: each garment synthesised in the canonical frame,
                // the outer ones layered over the inner, then all put back where the
                // performer stands
                let (canonical, root) = canonicalize(pose, &body.skeleton);
                for s in o.layers.iter_mut() {
                    s.synth
                        .synthesize(&mut s.state, &mut s.scratch, &canonical, dt, &mut s.out);
                }
                for outer in 1..o.layers.len() {
                    let (under, over) = o.layers.split_at_mut(outer);
                    for (inner, (layering, state)) in
                        under.iter_mut().zip(o.layerings[outer].iter_mut())
                    {
                        layering.apply(&mut inner.out, &mut over[0].out, state, &mut o.scratch);
                    }
                }
                let w = root.to_world();
                let n = o.layers.len();
                o.layers
                    .iter()
                    .enumerate()
                    .map(|(i, s)| {
                        let posed = s.out.iter().map(|&p| w.apply(p)).collect();
                        (TriMesh::new(posed, s.triangles.clone()), layer_colour(i, n))
                    })
                    .collect()
            }
        }
    }
}

/// Example `example` of `db` (worn by `body`, the database's) at its own pose: its
/// garment as baked, in a row of `views` above the garment SOR synthesises there from
/// the other examples with `params` (see `RenderArgs::example`); prints how far the
/// two lie apart.
fn example_picture(
    db: &Database,
    params: &SynthParams,
    body: &crate::body::Body,
    example: usize,
    views: &[Vec3],
    size: u32,
) -> anyhow::Result<Image> {
    let count = db.examples.len();
    let ex = db.examples.get(example).ok_or_else(|| {
        anyhow::anyhow!(
            "the database has {count} examples (0–{}): there is no example {example}",
            count.saturating_sub(1)
        )
    })?;
    let mut predicted = vec![Vec3::ZERO; db.vertex_count()];
    let left = crate::sor::left_out(db, params, example, &mut predicted).ok_or_else(|| {
        anyhow::anyhow!("a database of {count} example has no others to predict it from")
    })?;
    let worst = left.worst;
    // the region the worst vertex belongs to most
    let regions = db.region_count();
    let region = db
        .garment
        .region_weights
        .get(worst * regions..(worst + 1) * regions)
        .and_then(|row| row.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)))
        .and_then(|(r, _)| db.garment.region_names.get(r))
        .map_or("?", String::as_str);
    outln!(
        "example {example} of {count}: above as baked, below synthesised from the other examples: {:.2} cm mean vertex error, {:.1} cm at most (vertex {worst}, region {region})",
        100.0 * left.mean,
        100.0 * left.max,
    );
    if let Some(origin) = db.bake.origin(example) {
        outln!("its pose: {origin}");
    }
    // the example's pose is canonical (no root translation or heading): the garments
    // are drawn where they are
    let face = face(body);
    let row = |positions: Vec<Vec3>, colour: [f32; 3]| {
        picture(
            body,
            &face,
            &[(
                TriMesh::new(positions, db.garment.triangles.clone()),
                colour,
            )],
            &ex.pose,
            views,
            size,
        )
    };
    Ok(Image::vstack(&[
        row(ex.positions.clone(), [0.2, 0.4, 0.8])?,
        row(predicted, [0.25, 0.6, 0.35])?,
    ]))
}

/// Eyes and a mouth for the body's head, at rest (metres): small dark ellipsoids set
/// into the head's surface so that a picture shows which way the body faces (the body
/// itself is a mannequin's, without a face). Placed on the head primitives of
/// `body::primitives` (cranium and jaw ellipsoids, scaled with the body's height).
fn face(body: &crate::body::Body) -> TriMesh {
    use crate::mesh::{TriMesh as M, polygonize, sd_ellipsoid};
    let (h, s) = (body.shape.height, body.shape.height / 1.75);
    // the cranium: centre and radii
    let (c, r) = (
        Vec3::new(0.0, h - 0.105 * s, 0.008 * s),
        Vec3::new(0.077, 0.105, 0.098) * s,
    );
    // a point's depth on the cranium's front at (x, y)
    let front = |x: f32, y: f32| {
        c.z + r.z
            * (1.0 - (x / r.x).powi(2) - ((y - c.y) / r.y).powi(2))
                .max(0.0)
                .sqrt()
    };
    let eye_y = h - 0.112 * s;
    let mouth_y = h - 0.165 * s;
    let parts = [
        (
            Vec3::new(0.03 * s, eye_y, 0.0),
            Vec3::new(0.012, 0.007, 0.007) * s,
        ),
        (
            Vec3::new(-0.03 * s, eye_y, 0.0),
            Vec3::new(0.012, 0.007, 0.007) * s,
        ),
        (
            // on the jaw's front (its ellipsoid: centre z 0.032, radii 0.052 y, 0.062 z;
            // the blend with the cranium puts the surface ~0.004 further out)
            Vec3::new(
                0.0,
                mouth_y,
                0.036 * s + 0.062 * s * (1.0 - (0.013f32 / 0.052).powi(2)).sqrt(),
            ),
            Vec3::new(0.02, 0.004, 0.006) * s,
        ),
    ];
    let mut out = M::new(Vec::new(), Vec::new());
    for (i, (mut at, radii)) in parts.into_iter().enumerate() {
        if i < 2 {
            at.z = front(at.x, at.y) - 0.002 * s;
        }
        let m = polygonize(
            &|p: Vec3| sd_ellipsoid(p, at, radii),
            at - radii * 1.5,
            at + radii * 1.5,
            0.0025 * s,
        );
        let base = out.positions.len() as u32;
        out.positions.extend(m.positions);
        out.triangles
            .extend(m.triangles.iter().map(|t| t.map(|v| v + base)));
    }
    out
}

/// The body at `pose` with its `face` ([`face`], at rest) and `garments` (posed, with
/// their colours), seen from each of `views` (directions from the body towards the
/// eye), each a `size`-pixel square framing the body.
fn picture(
    body: &crate::body::Body,
    face: &TriMesh,
    garments: &[(TriMesh, [f32; 3])],
    pose: &Pose,
    views: &[Vec3],
    size: u32,
) -> anyhow::Result<Image> {
    let mut meshes: Vec<(&TriMesh, [f32; 3])> = Vec::with_capacity(2 + garments.len());
    let posed_body = body.posed_mesh(pose, SkinningMethod::Lbs);
    let t = body.skeleton.skinning_transforms(pose);
    let head = t[crate::skeleton::JointId::HEAD.index()];
    let posed_face = TriMesh::new(
        face.positions.iter().map(|&p| head.apply(p)).collect(),
        face.triangles.clone(),
    );
    meshes.push((&posed_body, [0.8, 0.62, 0.52]));
    meshes.push((&posed_face, [0.12, 0.09, 0.08]));
    meshes.extend(garments.iter().map(|(m, c)| (m, *c)));
    let (lo, hi) = posed_body
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
    let views: Vec<Image> = views
        .iter()
        .map(|&d| render(&items, &Camera::framing(lo, hi, d, 1.0), size, size))
        .collect();
    Ok(Image::hstack(&views))
}
