//! The `clothcast` binary, driven as a user would.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_clothcast"))
}

/// A test's scratch folder under the system's temporary folder: removed when the test
/// passes, kept (for a look at what the command wrote) when it fails.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<OsStr> for Scratch {
    fn as_ref(&self) -> &OsStr {
        self.0.as_os_str()
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

fn tmp(name: &str) -> Scratch {
    let d = std::env::temp_dir().join(format!("clothcast-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("tmp dir");
    Scratch(d)
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/mocap")
        .join(name)
}

#[test]
fn assets_writes_readable_skinned_gltf_and_obj() {
    let out = tmp("assets");
    let st = bin()
        .args(["assets", "--out"])
        .arg(&out)
        .args([
            "--height",
            "1.9",
            "--body-vertices",
            "2000",
            "--garment-vertices",
            "1000",
        ])
        .status()
        .expect("run");
    assert!(st.success());
    for name in ["body", "tshirt", "pants", "avatar"] {
        let path = out.join(format!("{name}.glb"));
        let (doc, buffers, _) = gltf_import(&path);
        assert_eq!(doc.skins().count(), 1, "{name} has a skin");
        assert_eq!(doc.skins().next().expect("skin").joints().count(), 22);
        assert!(buffers > 0);
    }
    let mesh = clothcast::mesh::read_gltf_mesh(&out.join("body.glb")).expect("read back");
    let (lo, hi) = mesh.bounds().expect("bounds");
    assert!(
        ((hi.y - lo.y) - 1.9).abs() < 0.01,
        "height flag honoured: {}",
        hi.y - lo.y
    );
    let shirt = clothcast::mesh::read_obj(
        std::io::BufReader::new(std::fs::File::open(out.join("tshirt.obj")).expect("obj")),
        "tshirt.obj",
    )
    .expect("obj");
    assert!(shirt.vertex_count() > 900);
    let avatar = clothcast::mesh::read_obj(
        std::io::BufReader::new(std::fs::File::open(out.join("body.obj")).expect("body obj")),
        "body.obj",
    )
    .expect("body obj");
    assert_eq!(avatar.vertex_count(), mesh.vertex_count());
}

/// A body and a garment of one's own: the body and T-shirt `assets` writes for a
/// shorter person (a skinned glTF, and the shirt saved in centimetres as a modelling
/// tool might, named by a garment TOML with its scale and regions) bake into a database
/// of that garment on that body. A mesh named directly, or in the wrong units, is
/// refused with what to do, as is a procedural garment on an imported body.
#[test]
fn a_garment_mesh_of_ones_own_bakes_into_a_database() {
    let dir = tmp("own-garment");
    let st = bin()
        .args(["assets", "--out"])
        .arg(&dir)
        .args(["--height", "1.6", "--body-vertices", "2000"])
        .args(["--garment-vertices", "900"])
        .output()
        .expect("run");
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let obj = std::fs::read_to_string(dir.join("tshirt.obj")).expect("obj");
    let cm: String = obj
        .lines()
        .map(|l| match l.strip_prefix("v ") {
            Some(xyz) => {
                let v: Vec<f32> = xyz
                    .split_whitespace()
                    .map(|c| c.parse::<f32>().expect("number") * 100.0)
                    .collect();
                format!("v {} {} {}\n", v[0], v[1], v[2])
            }
            None => format!("{l}\n"),
        })
        .collect();
    std::fs::create_dir_all(dir.join("meshes")).expect("dir");
    std::fs::write(dir.join("meshes/shirt_cm.obj"), cm).expect("write");
    let toml = |scale: &str| {
        format!(
            "name = \"my_shirt\"\nmesh = \"meshes/shirt_cm.obj\"\n{scale}regions_like = \"tshirt\"\npattern_arm_angle = 55\n"
        )
    };
    std::fs::write(dir.join("my_shirt.toml"), toml("scale = 0.01\n")).expect("toml");
    std::fs::write(dir.join("metres.toml"), toml("")).expect("toml");
    let db = dir.join("my_shirt.ccdb");
    let avatar = dir.join("body.glb");
    // `extra`: more arguments (a shard), `out`: where the database goes
    let bake_into = |garment: PathBuf, extra: &[&str], out: &PathBuf| {
        bin()
            .args(["bake", "--garment"])
            .arg(garment)
            .args(["--examples", "2", "--limit-samples", "20"])
            .args(extra)
            .arg("--body")
            .arg(&avatar)
            .arg("--out")
            .arg(out)
            .output()
            .expect("run")
    };
    let bake = |garment: PathBuf| bake_into(garment, &[], &db);
    let o = bake(dir.join("my_shirt.toml"));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // the bake ends with its leave-one-out check, as `inspect` does
    let left_out = "left out     each example synthesised from the others at its own pose: ";
    let baked = String::from_utf8_lossy(&o.stdout);
    assert!(baked.contains(left_out), "{baked}");
    let o = bin().arg("inspect").arg(&db).output().expect("run");
    let report = String::from_utf8_lossy(&o.stdout);
    assert!(
        report.contains("garment      my_shirt — 900 vertices"),
        "{report}"
    );
    assert!(report.contains("examples     2"), "{report}");
    let worst = report
        .lines()
        .find_map(|l| l.strip_prefix("  worst      example "))
        .unwrap_or_else(|| panic!("no worst example: {report}"));
    assert!(
        report.contains(left_out) && worst.contains(" cm (mean "),
        "{report}"
    );
    assert!(
        report.contains("body         2000 vertices") && report.contains("height 1.600 m"),
        "{report}"
    );
    // and names the examples the runtime's cross-check keeps nearest their poses
    // (with two examples there is no median to compare one with: none)
    assert!(!report.contains("cross-check"), "{report}");
    // the left-out lines, and `--examples`' list, say where each example's pose came
    // from: the rest pose, and the built-in clip's frame or a joint-limit sample
    let from = |l: &str| {
        l.contains("pose from built-in CMU 131_01, frame ")
            || l.contains("pose from joint-limit sample ")
            || l.contains("pose from rest pose")
    };
    assert!(from(worst), "{report}");
    let o = bin()
        .args(["inspect", "--examples"])
        .arg(&db)
        .output()
        .expect("run");
    let listed = String::from_utf8_lossy(&o.stdout);
    let rows: Vec<&str> = listed
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("# "))
        .collect();
    assert!(o.status.success() && rows.len() == 3, "{listed}");
    assert!(rows[0].trim_end().ends_with("pose from"), "{listed}");
    assert!(
        rows[1].trim_start().starts_with("0 ") && rows[1].ends_with("  rest pose"),
        "{listed}"
    );
    let other = rows[2].trim_start();
    assert!(
        other.starts_with("1 ")
            && other.contains(" cm ")
            && (other.contains("  built-in CMU 131_01, frame ")
                || other.contains("  joint-limit sample ")),
        "{listed}"
    );
    // the same bake in two shards: one example each, nothing to leave out until merged
    let shards: Vec<PathBuf> = (0..2).map(|i| dir.join(format!("shard{i}.ccdb"))).collect();
    for (i, shard) in shards.iter().enumerate() {
        let o = bake_into(
            dir.join("my_shirt.toml"),
            &["--shard", &format!("{i}/2")],
            shard,
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(!String::from_utf8_lossy(&o.stdout).contains(left_out));
    }
    let merge = |inputs: &[&PathBuf], out: &str| {
        bin()
            .arg("merge")
            .args(inputs)
            .arg("--out")
            .arg(dir.join(out))
            .output()
            .expect("run")
    };
    let o = merge(&[&shards[0], &shards[1]], "merged.ccdb");
    let merged = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && merged.contains("2 examples") && merged.contains(left_out),
        "{merged}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!String::from_utf8_lossy(&o.stderr).contains("left out: their poses"));
    // a shard given twice adds nothing, and says so
    let o = merge(&[&shards[0], &shards[1], &shards[1]], "merged-twice.ccdb");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success()
            && String::from_utf8_lossy(&o.stdout).contains("2 examples")
            && err.contains("note: 1 of the 3 examples given were left out: their poses are already in the merge"),
        "{err}"
    );
    for (garment, says) in [
        (dir.join("meshes/shirt_cm.obj"), "regions_like = \"tshirt\""),
        (dir.join("metres.toml"), "the body's rest pose and units"),
        (
            "tshirt".into(),
            "procedural garments need the procedural body",
        ),
    ] {
        let o = bake(garment.clone());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && err.contains(says),
            "{garment:?}: {err}"
        );
    }
}

fn gltf_import(path: &std::path::Path) -> (gltf::Document, usize, ()) {
    let bytes = std::fs::read(path).expect("read");
    let g = gltf::Gltf::from_slice(&bytes).expect("valid glTF");
    let n = g.blob.as_ref().map(|b| b.len()).unwrap_or(0);
    (g.document, n, ())
}

#[test]
fn retarget_writes_an_animation_with_one_key_per_output_frame() {
    let dir = tmp("retarget");
    let out = dir.join("walk.glb");
    let st = bin()
        .arg("retarget")
        .arg(fixture("cmu_131_01.bvh"))
        .arg("--out")
        .arg(&out)
        .args(["--fps", "30", "--body-vertices", "1500"])
        .output()
        .expect("run");
    assert!(st.status.success());
    let bytes = std::fs::read(&out).expect("read");
    let g = gltf::Gltf::from_slice(&bytes).expect("glTF");
    let anim = g.document.animations().next().expect("animation");
    assert_eq!(
        anim.channels().count(),
        23,
        "22 rotations + root translation"
    );
    let input = anim.samplers().next().expect("sampler").input();
    assert_eq!(input.count(), 249, "994 frames at 120 fps → 249 at 30 fps");
    // it says how the clip's elbows and knees bend: with the CMU profile as shipped,
    // about the canonical hinges
    let said = String::from_utf8_lossy(&st.stderr);
    for limb in ["left arm", "right arm", "left leg", "right leg"] {
        let line = said.lines().find(|l| l.trim_start().starts_with(limb));
        assert!(line.is_some_and(|l| l.ends_with("fine")), "{limb}: {said}");
    }
    assert!(!said.contains("[correction]"), "{said}");
    // the profile without its correction: the arms are turned, and the lines to put in
    // the profile are printed
    let shipped = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/configs/skeletons/cmu.toml"
    ))
    .expect("profile");
    let bare = shipped.split("\n[correction]").next().expect("text");
    let profile = dir.join("cmu-bare.toml");
    std::fs::write(&profile, bare).expect("write");
    let o = bin()
        .arg("retarget")
        .arg(fixture("cmu_131_01.bvh"))
        .arg("--out")
        .arg(&out)
        .arg("--profile")
        .arg(&profile)
        .args(["--fps", "10", "--body-vertices", "1500"])
        .output()
        .expect("run");
    assert!(o.status.success());
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("turned: a correction below"), "{said}");
    for joint in [
        "left_shoulder",
        "left_elbow",
        "left_wrist",
        "right_shoulder",
    ] {
        let line = said.lines().find(|l| l.trim_start().starts_with(joint));
        assert!(line.is_some_and(|l| l.contains("= [-3")), "{joint}: {said}");
    }
    assert!(!said.contains("left_hip"), "{said}");
}

#[test]
fn bad_inputs_fail_with_a_readable_error() {
    let dir = tmp("bad");
    let bad = dir.join("bad.bvh");
    std::fs::write(&bad, "HIERARCHY\nROOT Hips\n{\n OFFSET 0 0 0\n CHANNELS 3 Xposition Yposition Qrotation\n}\nMOTION\nFrames: 1\nFrame Time: 0.1\n0 0 0\n").expect("write");
    let o = bin()
        .arg("retarget")
        .arg(&bad)
        .arg("--out")
        .arg(dir.join("x.glb"))
        .output()
        .expect("run");
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("line 5") && err.contains("Qrotation"), "{err}");
    let o = bin()
        .arg("retarget")
        .arg(dir.join("missing.bvh"))
        .arg("--out")
        .arg(dir.join("x.glb"))
        .output()
        .expect("run");
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("missing.bvh"));
    // `bake --default` bakes the one default database: it takes no other option, and a
    // bake without it needs --out
    let o = bin()
        .args(["bake", "--default", "--examples", "3"])
        .output()
        .expect("run");
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("'--default' cannot be used with"),
        "{o:?}"
    );
    let o = bin()
        .args(["bake", "--examples", "3"])
        .output()
        .expect("run");
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--out <OUT>"),
        "{o:?}"
    );
    // a bake of no examples, or of more than a database may hold, is refused by the
    // argument parser, before any draping
    for (examples, says) in [
        ("0", "'0' for '--examples <EXAMPLES>': must be at least 1"),
        ("100001", "100001 is more than a database holds (100000)"),
    ] {
        let o = bin()
            .args(["bake", "--examples", examples, "--out"])
            .arg(dir.join("none.ccdb"))
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && err.contains(says) && !err.contains("draping"),
            "{examples}: {err}"
        );
    }
    // an output folder that is a file is named before any work (eval said so only
    // after simulating its ground truth)
    let db = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/db/v1/small.ccdb");
    let clip = fixture("cmu_131_03.bvh");
    for command in ["eval", "render"] {
        let o = bin()
            .args([command, "--frames", "0..4", "--bvh"])
            .arg(&clip)
            .arg("--db")
            .arg(&db)
            .arg("--out")
            .arg(&bad)
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success()
                && err.contains(&format!("{} exists and is not a folder", bad.display()))
                && !err.contains("ground truth"),
            "{command}: {err}"
        );
    }
    // a database that is missing or is not one is named once, with what is wrong
    let missing = dir.join("missing.ccdb");
    for (file, says) in [
        (&missing, "No such file"),
        (&bad, "not a clothcast database (bad magic)"),
    ] {
        let o = bin()
            .args(["eval", "--frames", "0..4", "--bvh"])
            .arg(&clip)
            .arg("--db")
            .arg(file)
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&o.stderr);
        let named = format!("reading {}: ", file.display());
        assert!(
            !o.status.success() && err.contains(&named) && err.contains(says),
            "{err}"
        );
        assert_eq!(err.matches(&file.display().to_string()).count(), 1, "{err}");
    }
    // benches of no avatars (their rows were NaN) or of more than one machine holds
    // (publishers ran out of file descriptors) are refused before they start
    for (args, says) in [
        (
            &["bench", "synth", "--avatars", "0"][..],
            "'0' for '--avatars <AVATARS>': must be at least 1",
        ),
        (
            &["bench", "serve", "--avatars", "10,0"],
            "'0' for '--avatars <AVATARS>': must be at least 1",
        ),
        (
            &["bench", "serve", "--avatars", "100000000"],
            "100000000 is more than 2048",
        ),
        (
            &["bench", "serve", "--viewers", "0"],
            "'0' for '--viewers <VIEWERS>': must be at least 1",
        ),
        (
            &["play", "x.bvh", "--avatars", "100000000"],
            "100000000 is more than 4096",
        ),
        // a garment of 3 vertices came out as a few triangles; of 10⁹, as 418 167
        // vertices the simulator spent gigabytes on
        (
            &["drape", "--garment-vertices", "3", "--out", "x.glb"],
            "'3' for '--garment-vertices <GARMENT_VERTICES>': 3 vertices is outside 500–100000",
        ),
        (
            &["assets", "--garment-vertices", "1000000000", "--out", "x"],
            "1000000000 vertices is outside 500–100000",
        ),
    ] {
        let o = bin().args(args).output().expect("run");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(says), "{args:?}: {err}");
    }
    let o = bin()
        .args(["assets", "--out"])
        .arg(&dir)
        .args(["--height", "2.4"])
        .output()
        .expect("run");
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("height = 2.4 is outside the supported range")
    );
    let o = bin()
        .arg("retarget")
        .arg(fixture("cmu_131_01.bvh"))
        .arg("--out")
        .arg(dir.join("x.glb"))
        .args(["--profile", "nosuch"])
        .output()
        .expect("run");
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no profile named \"nosuch\""));
    // a clip's problems are found before the body and garment are built (seconds): with
    // a body that would be refused too, the clip's error is the one reported
    let missing = dir.join("missing.bvh").into_os_string();
    let walk = fixture("cmu_131_01.bvh").into_os_string();
    let x = dir.join("x").into_os_string();
    let os = |s: &str| std::ffi::OsString::from(s);
    for (args, says) in [
        (
            vec![
                os("drape"),
                os("--bvh"),
                missing.clone(),
                os("--out"),
                x.clone(),
            ],
            "missing.bvh",
        ),
        (
            vec![
                os("drape"),
                os("--bvh"),
                walk,
                os("--frame"),
                os("5000"),
                os("--out"),
                x.clone(),
            ],
            "has 994 frames, asked for frame 5000",
        ),
        (
            vec![
                os("drape"),
                os("--compression-ratio"),
                os("0"),
                os("--out"),
                x.clone(),
            ],
            "the compression ratio must be in (0, 1]",
        ),
        (
            vec![
                os("render"),
                os("--bvh"),
                bad.into(),
                os("--out"),
                x.clone(),
            ],
            "Qrotation",
        ),
        (
            vec![
                os("bake"),
                os("--examples"),
                os("2"),
                os("--clip"),
                missing,
                os("--out"),
                x,
            ],
            "missing.bvh",
        ),
    ] {
        let o = bin()
            .args(&args)
            .args(["--height", "2.4"])
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(says), "{args:?}: {err}");
    }
}

/// A report whose reader went away (`inspect DB | head -1`) ends quietly with status 0,
/// as `head` expects (it panicked in `println!`); one that cannot be written (a full
/// disk) ends with the error.
#[test]
fn a_report_to_a_closed_or_full_stdout_ends_cleanly() {
    let db = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/db/v1/small.ccdb");
    let mut child = bin()
        .arg("inspect")
        .arg(&db)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run");
    // the reader goes away before the report is written
    drop(child.stdout.take());
    let o = child.wait_with_output().expect("waits");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{}: {err}", o.status);
    assert!(!err.contains("panicked"), "{err}");
    // the whole report names the material (the frozen database predates the
    // compression ratio: it was StVK)
    let o = bin().arg("inspect").arg(&db).output().expect("run");
    let report = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success());
    assert!(
        report.contains(
            "material     stretch 30 N/m, Poisson 0.3, compression ratio 1 (StVK: baked before"
        ),
        "{report}"
    );
    assert!(
        report.contains("density 0.1 kg/m², no self-contact"),
        "{report}"
    );
    // the examples the runtime's cross-check keeps nearest their poses, most first
    let kept = report
        .lines()
        .find_map(|l| l.strip_prefix("cross-check  kept nearest their poses"))
        .unwrap_or_else(|| panic!("no cross-check line: {report}"));
    let scales: Vec<f32> = kept
        .split(" ×")
        .skip(1)
        .filter_map(|s| s.split(',').next()?.trim().parse().ok())
        .collect();
    assert!(
        !scales.is_empty() && scales.windows(2).all(|w| w[0] >= w[1]) && scales[0] > 1.0,
        "{report}"
    );
    if std::path::Path::new("/dev/full").exists() {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let o = bin()
            .arg("inspect")
            .arg(&db)
            .stdout(full)
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("writing to stdout"), "{err}");
    }
}

/// An `--out` that names a device or a pipe is written into, not replaced: the files
/// are written under a temporary name and renamed, which (as root) turned `/dev/full`
/// into a regular file and would have done the same to `/dev/stdout`. Written into
/// stdout, the file comes out alone, its command's report on stderr.
#[test]
fn an_out_that_is_a_device_or_pipe_is_written_into_not_replaced() {
    use std::os::unix::fs::FileTypeExt;
    let db = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/db/v1/small.ccdb");
    let clip = fixture("cmu_131_01.bvh");
    // a glTF (written through a buffered writer) and a database (written whole)
    let glb = |out: &str| {
        bin()
            .arg("retarget")
            .arg(&clip)
            .args(["--fps", "5", "--body-vertices", "1500", "--out", out])
            .output()
            .expect("run")
    };
    let merged = |out: &str| {
        bin()
            .arg("merge")
            .arg(&db)
            .args(["--out", out])
            .output()
            .expect("run")
    };
    // stdout carries the file alone, whole: the reports go to stderr
    let o = glb("/dev/stdout");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        o.stdout.starts_with(b"glTF"),
        "{:?}",
        &o.stdout[..16.min(o.stdout.len())]
    );
    let declared = u32::from_le_bytes([o.stdout[8], o.stdout[9], o.stdout[10], o.stdout[11]]);
    assert_eq!(declared as usize, o.stdout.len(), "the GLB's length");
    assert!(err.contains("frames at 5.0 fps"), "{err}");
    let o = merged("/dev/stdout");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    // the same bytes as the merge into a file
    let dir = tmp("out-stream");
    let into_file = dir.join("merged.ccdb");
    let m = merged(&into_file.to_string_lossy());
    assert!(m.status.success(), "{}", String::from_utf8_lossy(&m.stderr));
    let file = std::fs::read(&into_file).expect("merged");
    assert!(
        o.stdout == file,
        "{} bytes against {}",
        o.stdout.len(),
        file.len()
    );
    assert!(err.contains("4 examples"), "{err}");
    // a write that fails leaves no temporary file behind (the rename onto a folder
    // fails after the whole file was written)
    let taken = dir.join("taken.glb");
    std::fs::create_dir_all(&taken).expect("folder");
    let failed = glb(&taken.to_string_lossy());
    let err = String::from_utf8_lossy(&failed.stderr);
    assert!(
        !failed.status.success() && err.contains("Is a directory"),
        "{err}"
    );
    let mut left: Vec<_> = std::fs::read_dir(&dir)
        .expect("dir")
        .filter_map(|e| e.ok().map(|e| e.file_name()))
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["merged.ccdb", "taken.glb"].map(std::ffi::OsString::from)
    );
    let o = bin()
        .args(["render", "--size", "64", "--out=/dev/stdout"])
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stdout.starts_with(b"\x89PNG"));
    assert_eq!(
        o.stdout[o.stdout.len() - 8..][..4],
        *b"IEND",
        "the PNG ends the output"
    );
    if std::path::Path::new("/dev/full").exists() {
        for o in [glb("/dev/full"), merged("/dev/full")] {
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(
                !o.status.success() && err.contains("No space left on device"),
                "{err}"
            );
        }
        let kind = std::fs::metadata("/dev/full")
            .expect("/dev/full")
            .file_type();
        assert!(kind.is_char_device(), "/dev/full is now {kind:?}");
    }
}

/// `CLOTHCAST_LOG_FORMAT=json` writes the log as one JSON object a line (what log
/// shippers ingest), a peer's text escaped by JSON itself; anything else but `text` is
/// refused before the command runs.
#[test]
fn the_log_can_be_written_as_json_lines() {
    use std::io::BufRead;
    let db = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/db/v1/small.ccdb");
    let dir = tmp("logjson");
    let path = dir.join("server.toml");
    std::fs::write(
        &path,
        "open = true\nvmc_bind = \"off\"\nmvn_bind = \"off\"\n",
    )
    .expect("config");
    let serve = |format: &str, check: bool| {
        let mut c = bin();
        c.arg("serve");
        if check {
            c.arg("--check");
        }
        c.arg("--db")
            .arg(&db)
            .arg("--config")
            .arg(&path)
            .args(["--bind", "127.0.0.1:0"])
            .env("CLOTHCAST_LOG_FORMAT", format)
            .env("RUST_LOG", "info")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        c
    };
    let mut server = serve("json", false).spawn().expect("serve runs");
    let stderr = server.stderr.take().expect("stderr");
    // every line up to the one that says it serves, each a JSON object
    let mut seen = Vec::new();
    for line in std::io::BufReader::new(stderr)
        .lines()
        .map_while(Result::ok)
    {
        let v: serde_json::Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
        let serving = v["message"] == "serving";
        seen.push(v);
        if serving {
            break;
        }
    }
    let _ = server.kill();
    let _ = server.wait();
    let line = |message: &str| {
        seen.iter()
            .find(|v| v["message"] == message)
            .unwrap_or_else(|| panic!("no {message:?} in {seen:?}"))
    };
    let open = line("authentication is off (open = true): anyone can publish and view");
    assert_eq!(open["level"], "WARN", "{open}");
    let serving = line("serving");
    assert_eq!(serving["level"], "INFO", "{serving}");
    assert_eq!(serving["target"], "clothcast::net", "{serving}");
    assert!(
        serving["addr"]
            .as_str()
            .is_some_and(|a| a.starts_with("127.0.0.1:"))
            && serving["tick_hz"] == 30.0
            && serving["timestamp"].is_string(),
        "{serving}"
    );
    // a typo is refused by name, the command not run
    let o = serve("jsn", true)
        .stdout(std::process::Stdio::piped())
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("CLOTHCAST_LOG_FORMAT=\"jsn\" is not a log format (text or json)")
            && o.stdout.is_empty(),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `serve --check` refuses what a start would refuse, by name, and otherwise says what
/// would be served, without serving.
#[test]
fn serve_check_reports_what_a_start_would_refuse_without_serving() {
    let db = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/db/v1/small.ccdb");
    let dir = tmp("check");
    let run = |config: &str| {
        let path = dir.join("server.toml");
        std::fs::write(&path, config).expect("config");
        bin()
            .args(["serve", "--check", "--db"])
            .arg(&db)
            .arg("--config")
            .arg(&path)
            .output()
            .expect("run")
    };
    let o = run("open = true\nbind = \"127.0.0.1:1\"\n");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("config ok") && out.contains("127.0.0.1:1") && out.contains("tshirt"),
        "{out}"
    );
    assert!(
        out.contains("(VMC UDP 127.0.0.1:39539 from any sender; Xsens MVN UDP 127.0.0.1:9763 from any sender)"),
        "{out}"
    );
    // a misspelt setting is named where it stands, the parser's snippet on its own
    // lines as it wrote them
    let o = run("open = true\ntick_hzz = 30\n");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success()
            && err.contains("\n2 | tick_hzz = 30\n")
            && err.contains("unknown field `tick_hzz`"),
        "{err}"
    );
    // proxies by address or by network
    let o = run("open = true\ntrusted_proxies = [\"127.0.0.1\", \"10.42.0.0/16\"]\n");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // UDP inputs on the network, each taking its performers' machines only
    let o = run(
        "open = true\nvmc_bind = \"0.0.0.0:39539\"\nvmc_allow = [\"192.168.1.0/24\", \"10.0.0.7\"]\nmvn_allow = [\"10.0.0.30\"]\n",
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("VMC UDP 0.0.0.0:39539 from 192.168.1.0/24, 10.0.0.7/32; Xsens MVN UDP 127.0.0.1:9763 from 10.0.0.30/32"),
        "{out}"
    );
    let tls = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tls");
    let wrong_cert = format!(
        "open = true\ntls_cert = {:?}\ntls_key = {:?}\n",
        tls.join("key.pem"),
        tls.join("key.pem")
    );
    let missing_key = format!(
        "open = true\ntls_cert = {:?}\ntls_key = {:?}\n",
        tls.join("cert.pem"),
        tls.join("missing.pem")
    );
    let o = run(&format!(
        "open = true\ntls_cert = {:?}\ntls_key = {:?}\n",
        tls.join("cert.pem"),
        tls.join("key.pem")
    ));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("with TLS"));
    // the same from flags; one without the other is refused by clap
    let flags = |args: &[&str]| {
        bin()
            .args(["serve", "--check", "--open", "--db"])
            .arg(&db)
            .args(args)
            .output()
            .expect("run")
    };
    let cert = tls.join("cert.pem").display().to_string();
    let key = tls.join("key.pem").display().to_string();
    let o = flags(&["--tls-cert", &cert, "--tls-key", &key]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("with TLS"),
        "{o:?}"
    );
    // an outfit: the pants under the shirt (both baked for the small fixtures' body)
    let pants =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/db/v1/small-pants.ccdb");
    let o = flags(&[
        "--db",
        &pants.display().to_string(),
        "--outfit",
        "pants,tshirt",
    ]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("avatars wear pants under tshirt"),
        "{o:?}"
    );
    let o = flags(&["--outfit", "pants,tshirt"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("unknown garment \"pants\""),
        "{o:?}"
    );
    let o = flags(&["--tls-cert", &cert]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--tls-key"),
        "{o:?}"
    );
    // tokens from a file beside the config, from the environment; a role's token
    // from two sources, or an empty one, is refused naming them
    std::fs::write(dir.join("pub.token"), "pub-secret\n").expect("token file");
    let env_run = |config: &str, vars: &[(&str, &str)]| {
        let path = dir.join("server.toml");
        std::fs::write(&path, config).expect("config");
        bin()
            .args(["serve", "--check", "--db"])
            .arg(&db)
            .arg("--config")
            .arg(&path)
            .env_remove("CLOTHCAST_PUBLISHER_TOKEN")
            .env_remove("CLOTHCAST_VIEWER_TOKEN")
            .env_remove("CREDENTIALS_DIRECTORY")
            .envs(vars.iter().copied())
            .output()
            .expect("run")
    };
    let o = env_run(
        "publisher_token_file = \"pub.token\"\n",
        &[("CLOTHCAST_VIEWER_TOKEN", "view-secret")],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains(&format!(
            "authentication publisher token from the file {}, viewer token from $CLOTHCAST_VIEWER_TOKEN",
            dir.join("pub.token").display()
        )),
        "{out}"
    );
    // the container's config (Dockerfile) with its tokens from the environment, as
    // `docker run -e` gives them: every interface, UDP inputs off
    let container = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy/container.toml");
    let o = bin()
        .args(["serve", "--check", "--db"])
        .arg(&db)
        .arg("--config")
        .arg(&container)
        .env_remove("CREDENTIALS_DIRECTORY")
        .env("CLOTHCAST_PUBLISHER_TOKEN", "p")
        .env("CLOTHCAST_VIEWER_TOKEN", "v")
        .output()
        .expect("run");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("would listen on 0.0.0.0:8470 (VMC off; Xsens MVN off)")
            && out.contains("publisher token from $CLOTHCAST_PUBLISHER_TOKEN"),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for (config, vars, named) in [
        (
            "publisher_token_file = \"pub.token\"\nviewer_token = \"v\"\n",
            &[("CLOTHCAST_PUBLISHER_TOKEN", "p")][..],
            "the publisher token is given twice, by the file",
        ),
        (
            "publisher_token = \"p\"\n",
            &[("CLOTHCAST_VIEWER_TOKEN", " ")][..],
            "the viewer token from $CLOTHCAST_VIEWER_TOKEN: is empty",
        ),
        (
            "publisher_token = \"p\"\nviewer_token_file = \"nowhere.token\"\n",
            &[][..],
            "nowhere.token: cannot be read",
        ),
    ] {
        let o = env_run(config, vars);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{config:?} passed");
        assert!(err.contains(named), "{config:?}: {err}");
    }
    for (config, named) in [
        ("", "tokens"),
        ("open = true\n[engine]\ntick_hz = nan\n", "engine.tick_hz"),
        (
            "open = true\nmax_connections_per_address = 0\n",
            "max_connections_per_address",
        ),
        ("open = true\nno_such_setting = 1\n", "no_such_setting"),
        (
            "open = true\nvmc_allow = [\"192.168.1.0/33\"]\n",
            "\"192.168.1.0/33\" is neither an address",
        ),
        ("open = true\nmvn_allow = \"10.0.0.1\"\n", "mvn_allow"),
        (
            "open = true\ntrusted_proxies = [\"nginx\"]\n",
            "\"nginx\" is neither an address",
        ),
        (
            "open = true\n[engine]\noutfit = [\"tshirt\", \"tshirt\"]\n",
            "twice",
        ),
        (
            "open = true\n[engine.layers]\nclearance = -1.0\n",
            "engine.layers.clearance",
        ),
        (
            "open = true\n[engine.layers]\ngives_way = \"sideways\"\n",
            "unknown variant `sideways`, expected one of `looser`, `outer`, `inner`",
        ),
        // a certificate file that holds a key, and a missing key
        (&wrong_cert, "no PEM certificate"),
        (&missing_key, "missing.pem"),
    ] {
        let o = run(config);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{config:?} passed");
        assert!(err.contains(named), "{config:?}: {err}");
    }
}

/// `render --frames` draws a flipbook of a clip: one picture per frame of the range,
/// with `--views front` a single square view; a range past the clip's end is refused
/// naming the clip's length, before any picture is drawn.
#[test]
fn render_draws_a_picture_per_frame_of_a_range() {
    let dir = tmp("flipbook");
    let out = dir.join("flipbook");
    let o = bin()
        .arg("render")
        .arg("--bvh")
        .arg(fixture("cmu_131_01.bvh"))
        .args(["--frames", "0..12:4", "--views", "front", "--size", "64"])
        .args(["--body-vertices", "2000", "--garments", ""])
        .arg("--out")
        .arg(&out)
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .expect("the folder")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["frame-00000.png", "frame-00004.png", "frame-00008.png"]
    );
    let png = std::fs::read(out.join("frame-00004.png")).expect("a picture");
    // a PNG whose IHDR says 64 × 64
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(&png[16..24], &[0, 0, 0, 64, 0, 0, 0, 64]);
    // the same frames as a Kinect sees the performer (a flipbook, and one frame), and
    // a Kinect without a clip is refused
    let seen = dir.join("seen");
    for (kind, frames, out) in [
        ("v2", ["--frames", "0..12:4"], seen.clone()),
        ("azure", ["--frame", "8"], dir.join("seen.png")),
    ] {
        let o = bin()
            .arg("render")
            .arg("--bvh")
            .arg(fixture("cmu_131_01.bvh"))
            .args(frames)
            .args(["--kinect", kind, "--views", "front", "--size", "64"])
            .args(["--body-vertices", "2000", "--garments", ""])
            .arg("--out")
            .arg(&out)
            .output()
            .expect("run");
        assert!(
            o.status.success(),
            "{kind}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let a = png_pixels(&out.join("frame-00008.png"));
    let b = png_pixels(&seen.join("frame-00008.png"));
    assert_eq!((a.0, a.1), (b.0, b.1));
    assert_ne!(a.3, b.3, "the Kinect's view drew the clip's pose exactly");
    assert_eq!(png_pixels(&dir.join("seen.png")).0, 64);
    let o = bin()
        .args(["render", "--kinect", "v2", "--out"])
        .arg(dir.join("nothing.png"))
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("--bvh"), "{err}");
    let o = bin()
        .arg("render")
        .arg("--bvh")
        .arg(fixture("cmu_131_01.bvh"))
        .args(["--frames", "1000..1200"])
        .arg("--out")
        .arg(dir.join("none"))
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "an empty range was drawn");
    assert!(err.contains("994 frames"), "{err}");
    for tilt in ["90", "-5", "NaN"] {
        let o = bin()
            .args([
                "render",
                "--views",
                "front",
                &format!("--tilt={tilt}"),
                "--out",
            ])
            .arg(dir.join("tilted.png"))
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && err.contains("0–60 degrees"),
            "{tilt}: {err}"
        );
    }
}

/// The clients take their tokens from the environment as the server does (out of the
/// process list), and their `--help` names the variable without showing its value.
#[test]
fn token_variables_are_named_in_help_but_their_values_never_shown() {
    for (command, var) in [
        ("play", "CLOTHCAST_PUBLISHER_TOKEN"),
        ("calibrate", "CLOTHCAST_PUBLISHER_TOKEN"),
        ("wear", "CLOTHCAST_PUBLISHER_TOKEN"),
        ("watch", "CLOTHCAST_VIEWER_TOKEN"),
    ] {
        let o = bin()
            .args([command, "--help"])
            .env(var, "sekrit-4j8w")
            .output()
            .expect("run");
        let help = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{command}");
        assert!(help.contains(&format!("[env: {var}]")), "{command}: {help}");
        assert!(!help.contains("sekrit-4j8w"), "{command}: {help}");
    }
}

/// `play --seconds` that never reaches its server fails and says why, as `watch` does:
/// a load test or a script must not count it as played.
#[test]
fn play_that_never_connects_fails_naming_the_server() {
    // a port that was free a moment ago: nothing listens there
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let url = format!("ws://127.0.0.1:{port}/ws");
    let o = bin()
        .arg("play")
        .arg(fixture("cmu_131_01.bvh"))
        .args(["--url", &url, "--seconds", "1"])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success()
            && err.contains(&format!("could not connect to {url} in --seconds"))
            && err.contains("refused"),
        "{err}"
    );
}

/// Pixels of an RGB(A) PNG: (width, height, channels, bytes).
fn png_pixels(path: &std::path::Path) -> (usize, usize, usize, Vec<u8>) {
    let file = std::fs::File::open(path).expect("the picture");
    let mut reader = png::Decoder::new(std::io::BufReader::new(file))
        .read_info()
        .expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("size")];
    let info = reader.next_frame(&mut buf).expect("its pixels");
    let channels = info.color_type.samples();
    buf.truncate(info.buffer_size());
    (info.width as usize, info.height as usize, channels, buf)
}

/// `render --db` draws the garment SOR synthesises from a database on the database's
/// own body: where the performer has walked to (far from the clip's origin, turned),
/// the shirt is drawn on the torso, and it differs from frame to frame. Body flags are
/// refused beside `--db` (the database fixes the body). Two databases are an outfit:
/// pants under the shirt; one garment twice is refused.
#[test]
fn render_with_a_database_draws_the_synthesised_garment_on_the_performer() {
    let dir = tmp("render-db");
    let db = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/db/v1/small.ccdb");
    let mut blue_sets = Vec::new();
    for frame in ["0", "700"] {
        let out = dir.join(format!("f{frame}.png"));
        let o = bin()
            .arg("render")
            .arg("--db")
            .arg(&db)
            .arg("--bvh")
            .arg(fixture("cmu_131_01.bvh"))
            .args(["--frame", frame, "--views", "front", "--size", "160"])
            .arg("--out")
            .arg(&out)
            .output()
            .expect("run");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let (w, h, c, px) = png_pixels(&out);
        assert_eq!((w, h), (160, 160));
        // the shirt is blue; the body skin-coloured (red well above blue)
        let (mut blue, mut skin) = (Vec::new(), Vec::new());
        for i in 0..w * h {
            let (r, b) = (i32::from(px[i * c]), i32::from(px[i * c + 2]));
            if b > r + 40 {
                blue.push(i);
            } else if r > b + 25 {
                skin.push(i);
            }
        }
        assert!(
            blue.len() > 400,
            "frame {frame}: {} shirt pixels",
            blue.len()
        );
        assert!(
            skin.len() > 400,
            "frame {frame}: {} body pixels",
            skin.len()
        );
        let mean_x =
            |set: &[usize]| set.iter().map(|i| (i % w) as f64).sum::<f64>() / set.len() as f64;
        let mean_y =
            |set: &[usize]| set.iter().map(|i| (i / w) as f64).sum::<f64>() / set.len() as f64;
        // on the torso: level with the body, in its upper half
        assert!(
            (mean_x(&blue) - mean_x(&skin)).abs() < 12.0,
            "frame {frame}: shirt at x {:.0}, body at {:.0}",
            mean_x(&blue),
            mean_x(&skin)
        );
        assert!(
            mean_y(&blue) < mean_y(&skin),
            "frame {frame}: shirt below the body's middle"
        );
        blue_sets.push(blue);
    }
    assert_ne!(blue_sets[0], blue_sets[1], "the shirt did not move");
    let o = bin()
        .arg("render")
        .arg("--db")
        .arg(&db)
        .args(["--height", "1.9", "--out"])
        .arg(dir.join("x.png"))
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("--height"), "{err}");
    // an outfit, inner to outer: the pants (dark) below the shirt (blue), both drawn
    let pants = db.with_file_name("small-pants.ccdb");
    let out = dir.join("outfit.png");
    let o = bin()
        .arg("render")
        .arg("--db")
        .arg(&pants)
        .arg("--db")
        .arg(&db)
        .args(["--views", "front", "--size", "160", "--out"])
        .arg(&out)
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (w, h, c, px) = png_pixels(&out);
    let (mut blue, mut dark) = (Vec::new(), Vec::new());
    for i in 0..w * h {
        let (r, g, b) = (
            i32::from(px[i * c]),
            i32::from(px[i * c + 1]),
            i32::from(px[i * c + 2]),
        );
        if b > r + 40 {
            blue.push((i / w) as f64);
        } else if r.max(g).max(b) < 140 && (r - b).abs() < 25 {
            dark.push((i / w) as f64);
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    assert!(
        blue.len() > 300 && dark.len() > 300,
        "{} shirt and {} pants pixels",
        blue.len(),
        dark.len()
    );
    assert!(
        mean(&blue) < mean(&dark),
        "the shirt is not above the pants"
    );
    let o = bin()
        .arg("render")
        .arg("--db")
        .arg(&db)
        .arg("--db")
        .arg(&db)
        .arg("--out")
        .arg(dir.join("twice.png"))
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("twice"), "{err}");
}

/// `render --db DB --example N` draws an example as baked (blue, above) and as the
/// other examples predict it at its pose (green, below), and prints that prediction's
/// error: for the example `inspect` names worst, the largest error it names. An
/// example the database lacks, or two databases, are refused by name.
#[test]
fn render_shows_an_example_above_the_others_prediction_of_it() {
    let dir = tmp("render-example");
    let db = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/db/v1/small.ccdb");
    let o = bin().arg("inspect").arg(&db).output().expect("run");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report = String::from_utf8_lossy(&o.stdout).into_owned();
    // "  worst      example K X cm (mean Y), …"
    let worst = report
        .lines()
        .find_map(|l| l.trim().strip_prefix("worst"))
        .expect("inspect's worst examples")
        .trim()
        .to_owned();
    let mut words = worst.split_whitespace();
    assert_eq!(words.next(), Some("example"), "{worst}");
    let example = words.next().expect("its number").to_owned();
    let max = words.next().expect("its largest error").to_owned();
    // and says how to look at it
    let look = report
        .lines()
        .find_map(|l| l.strip_prefix("  look       clothcast render --db "))
        .expect("inspect's command to look at the worst example");
    assert!(
        look.contains("small.ccdb")
            && look.ends_with(&format!(" --example {example} --out example-{example}.png")),
        "{look}"
    );
    let out = dir.join("example.png");
    let o = bin()
        .arg("render")
        .arg("--db")
        .arg(&db)
        .args(["--example", &example, "--views", "front", "--size", "120"])
        .arg("--out")
        .arg(&out)
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let said = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        said.contains(&format!("example {example} of "))
            && said.contains(&format!(" {max} cm at most")),
        "{said} (inspect: {worst})"
    );
    let (w, h, c, px) = png_pixels(&out);
    assert_eq!((w, h), (120, 240), "two rows of one view");
    // the baked shirt is blue and in the upper row, the predicted one green and in the
    // lower, each on the body's torso (its upper half)
    let (mut blue, mut green) = (Vec::new(), Vec::new());
    for i in 0..w * h {
        let (r, g, b) = (
            i32::from(px[i * c]),
            i32::from(px[i * c + 1]),
            i32::from(px[i * c + 2]),
        );
        if b > r + 40 && b > g + 10 {
            blue.push(i / w);
        } else if g > r + 30 && g > b + 20 {
            green.push(i / w);
        }
    }
    assert!(
        blue.len() > 300 && green.len() > 300,
        "{} baked and {} predicted shirt pixels",
        blue.len(),
        green.len()
    );
    assert!(
        blue.iter().all(|&y| y < 120),
        "a blue pixel below the top row"
    );
    assert!(
        green.iter().all(|&y| y >= 120),
        "a green pixel above the bottom row"
    );
    let mean = |v: &[usize]| v.iter().sum::<usize>() as f64 / v.len() as f64;
    assert!(mean(&blue) < 60.0, "the baked shirt is not on the torso");
    assert!(
        mean(&green) < 180.0,
        "the predicted shirt is not on the torso"
    );
    for (args, says) in [
        (vec!["--example", "999"], "there is no example 999"),
        (vec!["--example", "0", "--bvh", "x.bvh"], "--bvh"),
    ] {
        let o = bin()
            .arg("render")
            .arg("--db")
            .arg(&db)
            .args(&args)
            .arg("--out")
            .arg(dir.join("x.png"))
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(says), "{args:?}: {err}");
    }
    let o = bin()
        .arg("render")
        .arg("--db")
        .arg(&db)
        .arg("--db")
        .arg(db.with_file_name("small-pants.ccdb"))
        .args(["--example", "0", "--out"])
        .arg(dir.join("x.png"))
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("give one --db"),
        "{err}"
    );
}

/// `eval` on a few frames of a held-out clip with the small frozen database: the
/// summary table has a row per method whose second cell is the mean error in cm, SOR
/// below plain LBS, for either ground truth (and without damping); the CSV has a row
/// per frame and the plot is a PNG. `--truth-file` keeps the ground truth and reuses
/// it; `--oracle` adds where SOR's error lies. A database that is not one, or a NaN
/// t_mix, is refused by name.
#[test]
fn eval_compares_sor_lbs_and_nearest_against_the_simulated_ground_truth() {
    let db = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/db/v1/small.ccdb");
    let dir = tmp("eval");
    // the fresh truth with SOR's damping off
    for (truth, t_mix) in [("carried", "0.05"), ("fresh", "0")] {
        let out = dir.join(truth);
        let o = bin()
            .arg("eval")
            .arg("--db")
            .arg(&db)
            .arg("--bvh")
            .arg(fixture("cmu_131_03.bvh"))
            .args(["--frames", "0..30:10", "--truth", truth, "--t-mix", t_mix])
            .arg("--out")
            .arg(&out)
            .output()
            .expect("run");
        let table = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{truth}: {table}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let mean_of = |method: &str| -> f32 {
            let row = table
                .lines()
                .find(|l| l.starts_with(&format!("| {method} |")))
                .unwrap_or_else(|| panic!("{truth}: no {method} row in {table}"));
            row.split('|')
                .nth(2)
                .and_then(|c| c.trim().parse().ok())
                .unwrap_or_else(|| panic!("{truth}: no mean error in {row}"))
        };
        let (sor, lbs, nearest) = (mean_of("SOR"), mean_of("LBS"), mean_of("nearest"));
        assert!(
            sor > 0.0 && sor < lbs && nearest > 0.0,
            "{truth}: SOR {sor} LBS {lbs} nearest {nearest}"
        );
        assert!(table.contains("3 frames;"), "{truth}: {table}");
        // stderr is not a terminal here: the hidden bar's progress comes as lines
        let log = String::from_utf8_lossy(&o.stderr);
        for line in ["ground truth: 1/3 frames", "ground truth: 3/3 frames"] {
            assert!(log.contains(line), "{truth}: no {line:?} in {log}");
        }
        assert!(
            table.contains("| edges through itself / frame |"),
            "{truth}: {table}"
        );
        let csv = std::fs::read_to_string(out.join("eval.csv")).expect("csv");
        assert_eq!(csv.lines().count(), 4, "{csv}");
        let png = std::fs::read(out.join("eval.png")).expect("png");
        assert!(png.starts_with(b"\x89PNG"));
    }
    // a kept ground truth: written once, then read back instead of simulated (the same
    // table), the oracles' table ordered as floors are; a stale one is simulated
    // afresh, a file that is not a ground truth is refused and left alone
    let kept = dir.join("truth.cct");
    let run_kept = |frames: &str| {
        let o = bin()
            .arg("eval")
            .arg("--db")
            .arg(&db)
            .arg("--bvh")
            .arg(fixture("cmu_131_03.bvh"))
            .args(["--frames", frames, "--oracle", "--truth-file"])
            .arg(&kept)
            .arg("--out")
            .arg(dir.join("kept"))
            .output()
            .expect("run");
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (ok, first, err) = run_kept("0..30:10");
    assert!(ok && err.contains("ground truth kept in"), "{first}{err}");
    let (ok, again, err) = run_kept("0..30:10");
    assert!(ok && err.contains("ground truth read from"), "{again}{err}");
    assert_eq!(first, again);
    // the same truth against what a Kinect made of the clip: reused, not simulated
    // again, and SOR's cloth now differs from it by what the sensor lost too
    let o = bin()
        .arg("eval")
        .arg("--db")
        .arg(&db)
        .arg("--bvh")
        .arg(fixture("cmu_131_03.bvh"))
        .args(["--frames", "0..30:10", "--kinect", "azure", "--truth-file"])
        .arg(&kept)
        .arg("--out")
        .arg(dir.join("kinect"))
        .output()
        .expect("run");
    let (seen, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(
        o.status.success() && err.contains("ground truth read from"),
        "{seen}{err}"
    );
    let sor_of = |table: &str| -> f32 {
        table
            .lines()
            .find(|l| l.starts_with("| SOR |"))
            .and_then(|l| l.split('|').nth(2))
            .and_then(|c| c.trim().parse().ok())
            .unwrap_or_else(|| panic!("no SOR row in {table}"))
    };
    assert!(
        sor_of(&seen) > 0.0 && sor_of(&seen) != sor_of(&first),
        "{first}{seen}"
    );
    let cell = |table: &str, row: &str| -> f32 {
        table
            .lines()
            .find(|l| l.starts_with(&format!("| {row} |")))
            .and_then(|l| l.split('|').nth(2))
            .and_then(|c| c.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {row} row in {table}"))
    };
    let (sor, blend, one, vertex) = (
        cell(&first, "SOR's weights"),
        cell(&first, "best blend per region"),
        cell(&first, "best example per region"),
        cell(&first, "best example per vertex"),
    );
    assert!(
        vertex <= one && blend <= one + 0.005 && blend <= sor + 0.005 && vertex > 0.0,
        "{first}"
    );
    // another frame list makes the kept truth stale; it is set aside, not lost
    let before = std::fs::read(&kept).expect("read the kept truth");
    let (ok, other, err) = run_kept("0..20:10");
    assert!(
        ok && err.contains("simulating the ground truth afresh"),
        "{other}{err}"
    );
    assert!(other.contains("2 frames;"), "{other}");
    let old = kept.with_file_name(format!(
        "{}.old",
        kept.file_name().expect("a name").to_string_lossy()
    ));
    assert!(err.contains(&format!("kept as {}", old.display())), "{err}");
    assert_eq!(
        std::fs::read(&old).expect("the stale truth set aside"),
        before
    );
    assert_ne!(std::fs::read(&kept).expect("read"), before);
    std::fs::write(&kept, b"my notes, not a ground truth").expect("write");
    let (ok, _, err) = run_kept("0..30:10");
    assert!(
        !ok && err.contains("not a clothcast ground-truth file"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&kept).expect("read"),
        b"my notes, not a ground truth"
    );
    for (flag, value, says) in [
        ("--k", "NaN", "k must be 0–64"),
        ("--min-share", "0.9", "min_share must be 0–0.5"),
        ("--distance", "closest", "invalid value 'closest'"),
    ] {
        let o = bin()
            .args(["eval", flag, value, "--bvh"])
            .arg(fixture("cmu_131_03.bvh"))
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && err.contains(says),
            "{flag} {value}: {err}"
        );
    }
    let o = bin()
        .args(["eval", "--t-mix", "NaN", "--bvh"])
        .arg(fixture("cmu_131_03.bvh"))
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("t_mix must be 0–10 seconds"),
        "{err}"
    );
    let not_a_db = dir.join("x.ccdb");
    std::fs::write(&not_a_db, b"not a database").expect("write");
    let o = bin()
        .arg("eval")
        .arg("--db")
        .arg(&not_a_db)
        .arg("--bvh")
        .arg(fixture("cmu_131_03.bvh"))
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("x.ccdb"), "{err}");
    // without --db, a clip that is not there and frames past a clip's end are refused
    // before the default database is looked up, let alone baked into an empty cache
    let cache = dir.join("empty-cache");
    std::fs::create_dir_all(&cache).expect("cache dir");
    let missing = dir.join("no-such-clip.bvh");
    for (clip, frames, says) in [
        (missing, "0..10", "no-such-clip.bvh"),
        (
            fixture("cmu_131_03.bvh"),
            "5000..6000",
            "cmu_131_03.bvh: the clip has 1102 frames; range 5000..1102 is empty",
        ),
    ] {
        let o = bin()
            .env("CLOTHCAST_CACHE", &cache)
            .args(["eval", "--frames", frames, "--bvh"])
            .arg(&clip)
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && err.contains(says) && !err.contains("default database"),
            "{}: {err}",
            clip.display()
        );
        let cached: Vec<_> = std::fs::read_dir(&cache).expect("cache").collect();
        assert!(cached.is_empty(), "{} left {cached:?}", clip.display());
    }
}
