//! `clothcast watch --record DIR`: the decoded stream of every watched avatar saved as
//! files that animation tools open, for performance capture. Per avatar and take:
//!
//! - `ID.garment.pc2`: the garment's vertices (an outfit's garments one after another,
//!   inner to outer, as one mesh), world frame (metres, +Y up), one sample
//!   per server tick (frames this viewer missed repeat the last sample, so sample `k`
//!   is tick `k` of the take); its header's count is kept current, so a cut-short
//!   recording still reads.
//! - `ID.garment.obj`: the garment mesh at the take's first frame, vertices in the
//!   cache's order (what Blender's Mesh Cache modifier, Maya, Houdini or Cinema 4D
//!   drive with the cache).
//! - `ID.body.glb`: the body skinned to the canonical skeleton, written at rest when
//!   the take starts (so a take cut short keeps it) and again with its streamed motion
//!   when it ends, a key per received frame at `k / tick rate` seconds, so that with
//!   the scene's frame rate at the tick rate, frame `k` of the body is sample `k` of
//!   the garment.
//! - `ID.body.bvh`, written as the take goes (a cut-short one still reads): the body's
//!   motion on the canonical skeleton (metres, +Y up), a frame per sample (a missed
//!   frame or an unusable pose holds the frame before), for retargeting in animation
//!   tools and for replaying with `clothcast play`.
//! - `ID.timing.csv`, written as the take goes: per sample its frame number, the
//!   server's time of its tick, the publisher's timestamp of its pose and when this
//!   viewer decoded it (Unix time), to line the take up with video, audio or other
//!   capture.
//! - `ID.usda` (with `--usd`), written when the take ends: both in one USD text layer
//!   (the garment's points at time code `k` are sample `k`; the body a UsdSkel skinned
//!   mesh with a key per received frame at its sample's time code).
//!
//! In Blender (checked with 4.2 by `tests/usd/check_blender.py`): the add-on
//! `clients/blender/clothcast_import.py` imports a take in one step; by hand, set the
//! frame rate to the server's tick rate, then either import the `.usda`, or import the
//! OBJ (the default Y-up, −Z forward) and the glTF and give the garment a Mesh Cache
//! modifier (format PC2, default axes) reading the `.pc2`.
//!
//! A take ends when the recording stops, the avatar leaves, changes garments, or its
//! stream restarts (a restarted server); the next take of the same avatar is
//! `ID-2.…`, and nothing already on disk is overwritten.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use glam::{Quat, Vec3};

use crate::body::{ExportAnimation, glb_skeleton, skin_material};
use crate::client::Viewer;
use crate::mesh::{
    GlbMesh, GlbScene, Pc2Reader, Pc2Writer, TriMesh, UsdJointKey, UsdSkeleton, UsdSkinnedMesh,
    UsdTake, write_obj, write_usda,
};
use crate::mocap::BvhWriter;
use crate::protocol::{AssetMessage, BodyAsset};
use crate::skeleton::{JOINT_COUNT, JointId, Pose, Skeleton};

/// Longest run of missed frames filled by repeating the last sample; a longer silence
/// (the viewer was away) ends the take.
const MAX_GAP_SECONDS: f32 = 10.0;

/// The timing track's columns: the sample (tick of the take), the stream's frame
/// number, the server's time of the tick (seconds since it started), the publisher's
/// timestamp of the pose used (its clock, seconds), and when this viewer decoded the
/// frame (Unix time, seconds); the three times are empty for a frame it missed.
const TIMING_HEADER: &str = "sample,frame,server_seconds,pose_seconds,received_unix_seconds";

/// One avatar's recording in progress.
struct Take {
    /// Path of the take's files without their extensions.
    stem: PathBuf,
    /// The assets of the outfit recorded, inner to outer, joined by `+`.
    asset: String,
    cache: Pc2Writer<File>,
    /// Frame number of the take's first sample, and of the last sample written.
    first_seq: u32,
    last_seq: u32,
    /// The last sample (world frame), repeated over missed frames.
    last: Vec<f32>,
    /// The garment's triangles (an outfit's joined), for the USD layer.
    triangles: Vec<[u32; 3]>,
    /// The body and its keys (sample index, pose), when the asset's body is usable.
    body: Option<Arc<BodyAsset>>,
    keys: Vec<(u32, Pose)>,
    /// The body's motion as BVH, written as it comes (sample `k` is frame `k`).
    motion: Option<BvhWriter<File>>,
    /// The timing track: a CSV line a sample, written as it comes.
    timing: File,
    /// Whether a bad pose was reported (once a take).
    said_bad_pose: bool,
}

/// The files of every avatar being recorded.
pub(crate) struct Recorder {
    dir: PathBuf,
    /// Whether takes are also written as USD layers.
    usd: bool,
    tick_hz: f32,
    bodies: HashMap<String, Option<Arc<BodyAsset>>>,
    takes: HashMap<String, Take>,
    stems: HashSet<PathBuf>,
}

/// `id` as a file name: letters, digits, `-` and `_` kept, anything else (path
/// separators, dots, control characters) as `_`, at most 64 characters.
fn file_stem(id: &str) -> String {
    let s: String = id
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() { "avatar".into() } else { s }
}

impl Recorder {
    /// A recorder writing into `dir` (created if missing); `usd`: each take also as
    /// a USD text layer.
    pub(crate) fn new(dir: &Path, usd: bool) -> anyhow::Result<Self> {
        super::common::create_folder(dir)?;
        Ok(Self {
            dir: dir.to_path_buf(),
            usd,
            tick_hz: 0.0,
            bodies: HashMap::new(),
            takes: HashMap::new(),
            stems: HashSet::new(),
        })
    }

    /// The server's tick rate (from its `welcome`), which spaces the samples.
    pub(crate) fn set_tick_hz(&mut self, hz: f32) -> anyhow::Result<()> {
        anyhow::ensure!(
            hz.is_finite() && (1.0..=1000.0).contains(&hz),
            "the server's tick rate {hz} Hz cannot space a recording"
        );
        self.tick_hz = hz;
        Ok(())
    }

    /// An asset arrived: its body, if usable, is what its avatars' glTF files show.
    pub(crate) fn asset(&mut self, a: &AssetMessage) {
        let body = match a.body() {
            Ok(b) if b.parents.len() == JOINT_COUNT && canonical_parents(&b.parents) => {
                Some(Arc::new(b))
            }
            Ok(_) => {
                eprintln!(
                    "asset {}: not the canonical skeleton; recording garments only",
                    a.hash
                );
                None
            }
            Err(e) => {
                eprintln!("asset {}: {e}; recording garments only", a.hash);
                None
            }
        };
        self.bodies.insert(a.hash.clone(), body);
    }

    /// Records the frame just decoded for `id`.
    pub(crate) fn frame(&mut self, viewer: &Viewer, id: &str) -> anyhow::Result<()> {
        let (Some(view), hz) = (viewer.avatars.get(id), self.tick_hz) else {
            return Ok(());
        };
        let Some(f) = view.last.as_ref() else {
            return Ok(());
        };
        // an outfit is recorded as one mesh: its garments' vertices one after another
        let assets: Vec<&str> = view.assets().collect();
        let Some(setups) = assets
            .iter()
            .map(|a| viewer.setup(a))
            .collect::<Option<Vec<_>>>()
        else {
            return Ok(());
        };
        let outfit = assets.join("+");
        let [qx, qy, qz, qw, tx, ty, tz] = f.world;
        let (rot, at) = (
            Quat::from_xyzw(qx, qy, qz, qw).normalize(),
            Vec3::new(tx, ty, tz),
        );
        let world: Vec<f32> = view
            .garments()
            .flat_map(|g| g.chunks_exact(3))
            .flat_map(|p| (rot * Vec3::new(p[0], p[1], p[2]) + at).to_array())
            .collect();
        let max_gap = (MAX_GAP_SECONDS * hz) as u32;
        let ends = self.takes.get(id).is_some_and(|t| {
            t.asset != outfit
                || f.seq <= t.last_seq
                || f.seq - t.last_seq > max_gap
                || world.len() != t.last.len()
        });
        if ends {
            self.end(id)?;
        }
        if !self.takes.contains_key(id) {
            let mut triangles = Vec::new();
            let mut offset = 0;
            for s in &setups {
                triangles.extend(s.triangles.iter().map(|t| t.map(|i| i + offset)));
                offset += s.vertex_count() as u32;
            }
            let take = self.start(id, &outfit, assets[0], f.seq, &world, &triangles)?;
            self.takes.insert(id.to_string(), take);
        }
        let Some(take) = self.takes.get_mut(id) else {
            return Ok(());
        };
        // missed frames hold the last sample, so sample k stays tick k
        if f.seq > take.first_seq {
            for seq in take.last_seq.saturating_add(1)..f.seq {
                take.cache.push(&take.last)?;
                if let Some(m) = &mut take.motion {
                    m.repeat()?;
                }
                let line = format!("{},{seq},,,\n", seq - take.first_seq);
                take.timing.write_all(line.as_bytes())?;
            }
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        // a line a write, so that a killed recording ends on a whole line
        let line = format!(
            "{},{},{:.6},{:.6},{now:.6}\n",
            f.seq - take.first_seq,
            f.seq,
            f.timestamp,
            f.pose_timestamp
        );
        take.timing.write_all(line.as_bytes())?;
        take.cache.push(&world)?;
        take.last_seq = f.seq;
        take.last = world;
        if let Some(body) = &take.body {
            let pose = f
                .body_pose(body.parents.len())
                .map(|p| Pose::from_arrays(p.translation, &p.rotations));
            if let Some(m) = &mut take.motion {
                match &pose {
                    Ok(p) => m.push(p.translation, &p.rotations)?,
                    Err(_) => m.repeat()?,
                }
            }
            match pose {
                Ok(p) => take.keys.push((f.seq - take.first_seq, p)),
                Err(e) if !take.said_bad_pose => {
                    take.said_bad_pose = true;
                    eprintln!(
                        "{id}: frame {}: {e}; such frames are left out of the body",
                        f.seq
                    );
                }
                Err(_) => {}
            }
        }
        Ok(())
    }

    /// A take of `id` wearing `outfit` (its assets joined by `+`; the body is the
    /// first garment's, `first`).
    #[allow(clippy::too_many_arguments, reason = "one call site; the take's parts")]
    fn start(
        &mut self,
        id: &str,
        outfit: &str,
        first: &str,
        seq: u32,
        world: &[f32],
        triangles: &[[u32; 3]],
    ) -> anyhow::Result<Take> {
        // a stem of its own: not one this run used, not files already there
        let base = file_stem(id);
        let stem = (1..)
            .map(|n| match n {
                1 => self.dir.join(&base),
                n => self.dir.join(format!("{base}-{n}")),
            })
            .find(|s| {
                !self.stems.contains(s)
                    && [
                        "garment.pc2",
                        "garment.obj",
                        "body.glb",
                        "body.bvh",
                        "timing.csv",
                        "usda",
                    ]
                    .iter()
                    .all(|e| !s.with_extension(e).exists())
            })
            .unwrap_or_else(|| self.dir.join(&base));
        self.stems.insert(stem.clone());
        let garment = TriMesh {
            positions: world
                .chunks_exact(3)
                .map(|p| Vec3::new(p[0], p[1], p[2]))
                .collect(),
            triangles: triangles.to_vec(),
        };
        let obj = stem.with_extension("garment.obj");
        super::common::write_file(&obj, |w| {
            write_obj(w, &garment, &format!("clothcast garment of {id:?}"))
        })?;
        let pc2 = stem.with_extension("garment.pc2");
        let file = create_new(&pc2)?;
        let body = self.bodies.get(first).cloned().flatten();
        if let Some(b) = &body {
            // the body at rest now, so that a take cut short still has its mesh
            write_body_glb(&stem.with_extension("body.glb"), b, &[], self.tick_hz)?;
        }
        let motion = match &body {
            Some(b) => {
                let path = stem.with_extension("body.bvh");
                let file = create_new(&path)?;
                let names: Vec<&str> = JointId::all().map(JointId::name).collect();
                let writer =
                    BvhWriter::new(file, &names, &b.parents, &b.skeleton, 1.0 / self.tick_hz)
                        .with_context(|| format!("writing {}", path.display()))?;
                Some(writer)
            }
            None => None,
        };
        let path = stem.with_extension("timing.csv");
        let mut timing = create_new(&path)?;
        writeln!(timing, "{TIMING_HEADER}")?;
        eprintln!("recording {id} into {}.*", stem.display());
        Ok(Take {
            stem,
            asset: outfit.to_string(),
            cache: Pc2Writer::new(file, garment.positions.len(), 0.0, 1.0)?,
            first_seq: seq,
            last_seq: seq,
            last: world.to_vec(),
            triangles: triangles.to_vec(),
            body,
            keys: Vec::new(),
            motion,
            timing,
            said_bad_pose: false,
        })
    }

    /// Ends `id`'s take (it left, or the recording stops): the files written as it
    /// went are closed, the animated glTF and the USD layer written.
    pub(crate) fn end(&mut self, id: &str) -> anyhow::Result<()> {
        let Some(mut take) = self.takes.remove(id) else {
            return Ok(());
        };
        let samples = take.cache.samples();
        take.cache.finish()?;
        take.timing.flush()?;
        let mut files = vec!["garment.pc2", "garment.obj", "timing.csv"];
        if let Some(m) = take.motion {
            m.finish()?;
            files.push("body.bvh");
        }
        if let Some(body) = take.body.as_deref() {
            // the body at rest is there since the take began; with keys, animated
            if !take.keys.is_empty() {
                write_body_glb(
                    &take.stem.with_extension("body.glb"),
                    body,
                    &take.keys,
                    self.tick_hz,
                )?;
            }
            files.push("body.glb");
        }
        if self.usd {
            write_take_usda(
                &take.stem,
                &take.asset,
                &take.triangles,
                take.body.as_deref(),
                &take.keys,
                self.tick_hz,
            )?;
            files.push("usda");
        }
        let files = files.join(", ");
        eprintln!(
            "{id}: {samples} frames recorded in {}.{{{files}}}",
            take.stem.display()
        );
        Ok(())
    }

    /// Ends every take.
    pub(crate) fn finish(&mut self) -> anyhow::Result<()> {
        let ids: Vec<String> = self.takes.keys().cloned().collect();
        let mut first_error = None;
        for id in ids {
            if let Err(e) = self.end(&id) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// A new file at `path` for reading and writing (one already there is an error: a take
/// never overwrites).
fn create_new(path: &Path) -> anyhow::Result<File> {
    File::options()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))
}

/// Whether `parents` is the canonical skeleton's hierarchy.
fn canonical_parents(parents: &[i32]) -> bool {
    JointId::all().all(|j| {
        parents.get(j.index()).copied() == Some(j.parent().map_or(-1, |p| p.index() as i32))
    })
}

/// The take's `.body.glb`: the body skinned and animated by its keys (at rest, without
/// an animation, when there are none).
fn write_body_glb(
    path: &Path,
    body: &BodyAsset,
    keys: &[(u32, Pose)],
    tick_hz: f32,
) -> anyhow::Result<()> {
    let rest: [Vec3; JOINT_COUNT] = std::array::from_fn(|j| Vec3::from(body.skeleton[j]));
    let skeleton = Skeleton::from_rest_positions(rest);
    let mesh = TriMesh {
        positions: body.positions.iter().map(|&p| Vec3::from(p)).collect(),
        triangles: body.triangles.clone(),
    };
    let normals = mesh.vertex_normals();
    let joints: Vec<[u16; 4]> = body.joints.iter().map(|j| j.map(u16::from)).collect();
    let times = keys.iter().map(|(k, _)| *k as f32 / tick_hz).collect();
    let poses: Vec<Pose> = keys.iter().map(|(_, p)| *p).collect();
    let animation = (!keys.is_empty()).then(|| ExportAnimation::keyed(times, &poses, &skeleton));
    let scene = GlbScene {
        skeleton: Some(glb_skeleton(&skeleton)),
        meshes: vec![GlbMesh {
            name: "body",
            positions: &mesh.positions,
            normals: &normals,
            triangles: &mesh.triangles,
            skin: Some((&joints, &body.weights)),
            material: skin_material(),
        }],
        animation: animation.as_ref().map(|a| a.glb("recorded")),
    };
    super::common::write_glb_file(path, &scene)
}

/// The take's `.usda`: the garment's samples read back from its PC2 a sample at a time
/// (what was recorded, the same floats) and the body with its keys.
fn write_take_usda(
    stem: &Path,
    outfit: &str,
    triangles: &[[u32; 3]],
    body: Option<&BodyAsset>,
    keys: &[(u32, Pose)],
    tick_hz: f32,
) -> anyhow::Result<()> {
    let pc2 = stem.with_extension("garment.pc2");
    let file = File::open(&pc2).with_context(|| format!("reading {}", pc2.display()))?;
    let mut cache = Pc2Reader::new(std::io::BufReader::new(file))
        .with_context(|| format!("reading {}", pc2.display()))?;
    let names: Vec<&str> = JointId::all().map(JointId::name).collect();
    let keys: Vec<UsdJointKey> = keys
        .iter()
        .map(|(k, p)| UsdJointKey {
            time: *k,
            translation: p.translation.to_array(),
            rotations: p.rotations.iter().map(|q| q.to_array()).collect(),
        })
        .collect();
    let body = body.filter(|_| !keys.is_empty()).map(|b| {
        (
            UsdSkinnedMesh {
                positions: &b.positions,
                triangles: &b.triangles,
                joints: &b.joints,
                weights: &b.weights,
            },
            UsdSkeleton {
                names: &names,
                parents: &b.parents,
                rest: &b.skeleton,
            },
            &keys[..],
        )
    });
    let doc = format!(
        "clothcast recording of {} wearing {}",
        stem.file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
        outfit
    );
    let path = stem.with_extension("usda");
    super::common::write_file(&path, |w| {
        write_usda(
            w,
            &UsdTake {
                fps: tick_hz,
                doc: &doc,
                garment_triangles: triangles,
                body,
            },
            &mut cache,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn avatar_ids_become_harmless_file_names() {
        assert_eq!(file_stem("walker-0"), "walker-0");
        assert_eq!(file_stem("../../etc/passwd"), "______etc_passwd");
        assert_eq!(file_stem("a\u{1b}[2Jb"), "a__2Jb");
        assert_eq!(file_stem(""), "avatar");
        assert_eq!(file_stem(&"x".repeat(500)).len(), 64);
    }

    #[test]
    fn the_canonical_hierarchy_is_recognised() {
        let parents: Vec<i32> = JointId::all()
            .map(|j| j.parent().map_or(-1, |p| p.index() as i32))
            .collect();
        assert!(canonical_parents(&parents));
        let mut other = parents.clone();
        other[3] = -1;
        assert!(!canonical_parents(&other));
        assert!(!canonical_parents(&parents[..21]));
    }
}
