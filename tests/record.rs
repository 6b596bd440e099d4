//! `clothcast watch --record`: what it writes is the stream, in files that animation
//! tools read.

use std::collections::HashMap;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use clothcast::client::Viewer;
use clothcast::mesh::{read_obj, read_pc2};
use clothcast::mocap::Bvh;
use clothcast::net::start;
use clothcast::skeleton::{JOINT_COUNT, JointId, Pose};
use glam::{DQuat, Quat, Vec3};

use super::clients::{finish, frames_of, play_to};
#[cfg(unix)]
use super::server::Reaper;
use super::server::{config, connect_viewer, db, max_moved};

/// A decoded frame's garment in the world frame, as the recording stores it.
fn world_positions(view: &Viewer, id: &str) -> Option<(u32, Vec<f32>)> {
    let a = view.avatars.get(id)?;
    let f = a.last.as_ref()?;
    let [qx, qy, qz, qw, tx, ty, tz] = f.world;
    let (rot, at) = (
        Quat::from_xyzw(qx, qy, qz, qw).normalize(),
        Vec3::new(tx, ty, tz),
    );
    let world = a
        .positions
        .chunks_exact(3)
        .flat_map(|p| (rot * Vec3::new(p[0], p[1], p[2]) + at).to_array())
        .collect();
    Some((f.seq, world))
}

/// Runs the Python check `script` (in `tests/usd/`) on the take `id` in `dir` with
/// `python`, which must import `module` (else `install` says how to get it).
fn run_check(python: &str, module: &str, install: &str, script: &str, dir: &Path, args: &[&str]) {
    let has = Command::new(python)
        .args(["-c", &format!("import {module}")])
        .status()
        .is_ok_and(|s| s.success());
    assert!(has, "{python} cannot import {module}: {install}");
    let out = Command::new(python)
        .arg(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/usd")
                .join(script),
        )
        .arg(dir)
        .args(args)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{script} fails:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `tests/usd/check_recording.py` on the take `id` in `dir`: Pixar's USD library
/// (usd-core, which .ci/run installs) opens the layer, its validators report nothing,
/// the garment's points at every time code are the PC2's samples, and the body it skins
/// with UsdSkel lies under the garment.
fn check_usd(dir: &Path, id: &str) {
    run_check(
        "python3",
        "pxr",
        "Python's usd-core is not installed (.ci/run installs it: python3 -m pip install usd-core)",
        "check_recording.py",
        dir,
        &[id],
    );
}

/// `tests/usd/check_blender.py` on the take `id` in `dir`: Blender (the `bpy` module,
/// which .ci/run installs; `CLOTHCAST_BLENDER_PYTHON` names another Python that has it)
/// imports the `.usda`, the OBJ with its PC2 as a Mesh Cache and the body's glTF, the
/// BVH, and the take through the add-on, as the README says; in each the garment
/// Blender shows at a frame is that frame's sample and the body Blender poses lies
/// under it.
fn check_blender(dir: &Path, args: &[&str]) {
    let python = std::env::var("CLOTHCAST_BLENDER_PYTHON").unwrap_or_else(|_| "python3".into());
    run_check(
        &python,
        "bpy",
        "Blender's Python module is not installed (.ci/run installs it: python3 -m pip install bpy==4.2.0, for Python 3.11; or set CLOTHCAST_BLENDER_PYTHON to a Python that has it)",
        "check_blender.py",
        dir,
        args,
    );
}

/// The take's `.body.bvh`: a frame per PC2 sample at the tick rate, the canonical
/// joints, and at frame `k` the pose the server streamed with frame `seq0 + k` (each
/// joint's world rotation within 0.01°, the pelvis moved as the pose moved it).
fn check_bvh(path: &Path, samples: usize, seq0: u32, poses: &HashMap<u32, Pose>) {
    let text = std::fs::read_to_string(path).expect("the BVH is there");
    let bvh = Bvh::parse(&text).expect("the BVH reads");
    assert_eq!(bvh.frame_count(), samples, "a BVH frame per PC2 sample");
    assert!((bvh.frame_time - 1.0 / 30.0).abs() < 1e-6);
    let index: Vec<usize> = JointId::all()
        .map(|j| bvh.joint_index(j.name()).expect("a canonical joint"))
        .collect();
    assert_eq!(bvh.joints.len(), JOINT_COUNT);
    let world_rotations = |p: &Pose| {
        let mut w = [DQuat::IDENTITY; JOINT_COUNT];
        for j in JointId::all() {
            let local = p.rotations[j.index()].as_dquat();
            w[j.index()] = match j.parent() {
                Some(parent) => w[parent.index()] * local,
                None => local,
            };
        }
        w
    };
    let (mut matched, mut origin) = (0, None);
    for k in 0..samples {
        let Some(pose) = poses.get(&(seq0 + k as u32)) else {
            continue;
        };
        let got = bvh.world(Some(k));
        for (j, want) in world_rotations(pose).iter().enumerate() {
            // in f64, as 2 asin |sin(θ/2)|: f32's acos cannot tell angles under ~0.02°
            let d = got[index[j]].0.as_dquat().conjugate() * *want;
            let angle = 2.0 * d.xyz().length().min(1.0).asin().to_degrees();
            assert!(angle < 0.01, "frame {k}, joint {j}: {angle}° off");
        }
        let pelvis = got[index[0]].1;
        let (p0, t0) = *origin.get_or_insert((pelvis, pose.translation));
        let moved = (pelvis - p0) - (pose.translation - t0);
        assert!(
            moved.length() < 1e-5,
            "frame {k}: the pelvis is {moved} off"
        );
        matched += 1;
    }
    assert!(matched * 10 >= samples * 9, "{matched} of {samples} frames");
}

/// The take's `.timing.csv`: a line per PC2 sample, frame `seq0 + k` on line `k`, the
/// server's and the publisher's times of every frame the test's viewer saw as it saw
/// them, and a Unix receive time of this minute on every received line.
fn check_timing(path: &Path, samples: usize, seq0: u32, stamps: &HashMap<u32, (f64, f64)>) {
    let text = std::fs::read_to_string(path).expect("the timing track is there");
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("sample,frame,server_seconds,pose_seconds,received_unix_seconds")
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64();
    let (mut rows, mut matched) = (0, 0);
    for (k, line) in lines.enumerate() {
        let cells: Vec<&str> = line.split(',').collect();
        assert_eq!(cells.len(), 5, "{line}");
        assert_eq!(cells[0], k.to_string(), "{line}");
        let seq = seq0 + k as u32;
        assert_eq!(cells[1], seq.to_string(), "{line}");
        if cells[2].is_empty() {
            assert!(cells[3].is_empty() && cells[4].is_empty(), "{line}");
        } else {
            let at = |i: usize| cells[i].parse::<f64>().expect("a number");
            assert!((now - at(4)).abs() < 60.0, "{line}");
            if let Some(&(server, pose)) = stamps.get(&seq) {
                assert!(
                    (at(2) - server).abs() < 1e-5 && (at(3) - pose).abs() < 1e-5,
                    "{line}: the frame said {server}, {pose}"
                );
                matched += 1;
            }
        }
        rows += 1;
    }
    assert_eq!(rows, samples, "a line per sample");
    assert!(matched * 10 >= samples * 9, "{matched} of {samples} lines");
}

/// `clothcast watch --record DIR` of the server at `url` with the test token, and
/// `args`; stdout dropped, stderr piped.
fn record(url: &str, dir: &Path, args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_clothcast"))
        .args(["watch", "--url", url, "--token", "view", "--record"])
        .arg(dir)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("clothcast watch runs")
}

/// Waits (at most 10 s, else fails saying `what`) until the PC2 cache at `path` of
/// `vertices` points holds `samples` samples.
async fn wait_for_samples(path: &Path, vertices: usize, samples: u64, what: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while std::fs::metadata(path).map_or(0, |m| m.len()) < 32 + 12 * samples * vertices as u64 {
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn close(a: &[f32], b: &[f32], tolerance: f32) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= tolerance)
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_records_each_avatar_as_a_point_cache_a_mesh_and_an_animated_body() {
    let server = start(db(), config()).await.expect("server starts");
    let url = format!("ws://{}/ws", server.addr);
    let play = play_to(
        &url,
        &["--avatars", "2", "--prefix", "rec", "--seconds", "60"],
    );
    let _reaper = Reaper(play.id());
    frames_of(&url, "rec-1", 3).await;
    let dir = std::env::temp_dir().join(format!("clothcast-record-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // a viewer of our own keeps every frame it decodes, by frame number
    let mut viewer = connect_viewer(&url).await;
    let mut view = Viewer::default();
    let watch = record(&url, &dir, &["--usd", "--seconds", "3"]);
    let mut seen: HashMap<u32, Vec<f32>> = HashMap::new();
    let mut poses: HashMap<u32, Pose> = HashMap::new();
    let mut stamps: HashMap<u32, (f64, f64)> = HashMap::new();
    let stop = tokio::time::Instant::now() + Duration::from_secs(5);
    while let Ok(m) = tokio::time::timeout_at(stop, viewer.next()).await {
        let m = m.expect("a message");
        if view.apply(m).expect("decodes").as_deref() == Some("rec-0")
            && let Some((seq, world)) = world_positions(&view, "rec-0")
        {
            seen.insert(seq, world);
            if let Some(f) = view.avatars["rec-0"].last.as_ref() {
                stamps.insert(seq, (f.timestamp, f.pose_timestamp));
                if let Ok(p) = f.body_pose(22) {
                    poses.insert(seq, Pose::from_arrays(p.translation, &p.rotations));
                }
            }
        }
    }
    let (status, _, err) = finish(watch).await;
    assert!(status.success(), "watch --record failed: {status}\n{err}");
    assert!(
        err.contains("rec-0: ") && err.contains("frames recorded in"),
        "{err}"
    );

    let stem = |id: &str, ext: &str| dir.join(format!("{id}.{ext}"));
    let cache = read_pc2(BufReader::new(
        File::open(stem("rec-0", "garment.pc2")).expect("the cache is there"),
    ))
    .expect("the cache reads");
    let vertices = view.avatars["rec-0"].positions.len() / 3;
    assert_eq!(cache.points, vertices);
    assert_eq!((cache.start, cache.sampling), (0.0, 1.0));
    // 3 s at 30 Hz
    assert!(
        (60..=100).contains(&cache.samples.len()),
        "{} samples",
        cache.samples.len()
    );
    // sample 0 is a frame the server sent, and sample k the frame k ticks later
    let seq0 = seen
        .iter()
        .find(|(_, p)| close(p, &cache.samples[0], 1e-6))
        .map(|(&s, _)| s)
        .expect("the first sample is a decoded frame");
    let mut matched = 0;
    for (k, sample) in cache.samples.iter().enumerate() {
        if let Some(p) = seen.get(&(seq0 + k as u32)) {
            assert!(
                close(p, sample, 1e-6),
                "sample {k} is not frame {}",
                seq0 + k as u32
            );
            matched += 1;
        }
    }
    assert!(
        matched * 10 >= cache.samples.len() * 9,
        "{matched} of {} samples",
        cache.samples.len()
    );
    let (first, last) = (&cache.samples[0], &cache.samples[cache.samples.len() - 1]);
    assert!(
        max_moved(first, last) > 0.02,
        "the recorded garment does not move"
    );
    check_bvh(
        &stem("rec-0", "body.bvh"),
        cache.samples.len(),
        seq0,
        &poses,
    );
    check_timing(
        &stem("rec-0", "timing.csv"),
        cache.samples.len(),
        seq0,
        &stamps,
    );

    // the mesh the cache drives: the same vertices, in the same order
    let obj = File::open(stem("rec-0", "garment.obj")).expect("the mesh is there");
    let mesh = read_obj(BufReader::new(obj), "garment.obj").expect("the mesh reads");
    let flat: Vec<f32> = mesh.positions.iter().flat_map(|p| p.to_array()).collect();
    assert!(close(&flat, first, 1e-5), "the OBJ is not the first sample");
    assert!(!mesh.triangles.is_empty());

    // the body: one key per frame, at k / 30 s, every joint animated
    let bytes = std::fs::read(stem("rec-0", "body.glb")).expect("the body's glTF is there");
    let glb = gltf::Gltf::from_slice(&bytes).expect("the body's glTF reads");
    let doc = &glb.document;
    let anim = doc.animations().next().expect("an animation");
    let channel = anim.channels().next().expect("a channel");
    let times: Vec<f32> = channel
        .reader(|_| glb.blob.as_deref())
        .read_inputs()
        .expect("key times")
        .collect();
    assert!(
        times.len() * 10 >= cache.samples.len() * 9,
        "{} keys",
        times.len()
    );
    assert!(
        times
            .iter()
            .all(|t| ((t * 30.0).round() - t * 30.0).abs() < 1e-3)
    );
    let span = (cache.samples.len() - 1) as f32 / 30.0;
    assert!(
        (times[times.len() - 1] - span).abs() < 1e-3,
        "{times:?} against {span} s"
    );
    assert!(anim.channels().count() >= 22);
    assert_eq!(doc.meshes().count(), 1);
    // the other avatar has its own files
    for ext in ["garment.pc2", "garment.obj", "body.glb", "usda"] {
        assert!(Path::new(&stem("rec-1", ext)).exists(), "no rec-1.{ext}");
    }
    // Ctrl-C ends a recording cleanly too, and a second recording into the same
    // directory takes new names instead of overwriting the first
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let before = size(&stem("rec-0", "garment.pc2"));
    let watch = record(&url, &dir, &[]);
    wait_for_samples(
        &stem("rec-0-2", "garment.pc2"),
        vertices,
        10,
        "no second take",
    )
    .await;
    let interrupted = Command::new("kill")
        .args(["-INT", &watch.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(interrupted.success());
    let (status, _, err) = finish(watch).await;
    assert!(
        status.success(),
        "watch --record after Ctrl-C: {status}\n{err}"
    );
    assert!(stem("rec-0-2", "body.glb").exists(), "{err}");
    assert_eq!(size(&stem("rec-0", "garment.pc2")), before);
    // a recording killed outright keeps what it wrote: the cache, the BVH, the timing
    // track, and the body at rest (which the Blender add-on poses with the BVH)
    let killed = dir.join("killed");
    let mut watch = record(&url, &killed, &["--usd", "--avatar", "rec-0"]);
    wait_for_samples(
        &killed.join("rec-0.garment.pc2"),
        vertices,
        30,
        "no killed take",
    )
    .await;
    watch.kill().expect("SIGKILL");
    let _ = watch.wait();
    for ext in [
        "garment.pc2",
        "garment.obj",
        "body.bvh",
        "body.glb",
        "timing.csv",
    ] {
        assert!(
            killed.join(format!("rec-0.{ext}")).exists(),
            "no rec-0.{ext}"
        );
    }
    assert!(!killed.join("rec-0.usda").exists());
    // the recorded motion plays back into the server as a performer of its own
    let replay = Command::new(env!("CARGO_BIN_EXE_clothcast"))
        .arg("play")
        .arg(stem("rec-0", "body.bvh"))
        .args(["--url", &url, "--token", "pub", "--prefix", "replay"])
        .args(["--seconds", "20"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("clothcast play runs");
    let _replay_reaper = Reaper(replay.id());
    frames_of(&url, "replay-0", 10).await;
    let mut replay = replay;
    let _ = replay.kill();
    let _ = finish(replay).await;
    let mut play = play;
    let _ = play.kill();
    let _ = finish(play).await;
    server.shutdown().await;
    // the first take in the tools, once nothing else needs the time (the player has
    // to outlast both recordings, and these take seconds on a loaded machine)
    check_usd(&dir, "rec-0");
    check_blender(&dir, &["rec-0"]);
    check_blender(&dir.join("killed"), &["rec-0", "30", "--cut-short"]);
    let _ = std::fs::remove_dir_all(&dir);
}
