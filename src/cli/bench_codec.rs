//! `clothcast bench codec`: bits per vertex per frame, error and speed of the garment
//! stream codec next to raw floats, quantised + zstd, and meshoptimizer + zstd, all on
//! the same quantised frames of recorded SOR garment sequences, and of the same coder
//! over the breadth-first traversal (`clothcast v4 bfs`, the baseline of the server's
//! coarse-to-fine one). Also writes the golden streams (`--golden DIR`).

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use glam::Vec3;

use super::binding::Binding;
use super::common::write_file;
use crate::bake::DEFAULT_CLIP;
use crate::bake::GUARD_CLEARANCE;
use crate::body::Body;
use crate::body::SelfContactGuard;
use crate::codec::{BoneTransform, Decoder, Effort, Encoder, GarmentSetup, format::word_hash};
use crate::garment::{Garment, GarmentConfig};
use crate::mesh::TriMesh;
use crate::mocap::Clip;
use crate::skeleton::{Pose, Skeleton, canonicalize};
use crate::sor::{AvatarState, Scratch, SynthParams, Synthesizer};

/// Arguments of `clothcast bench codec`.
#[derive(Args, Debug)]
pub(crate) struct CodecBench {
    /// Example database driving the garment (default: the default database).
    #[arg(long)]
    db: Option<PathBuf>,
    /// Seconds of each motion.
    #[arg(long, default_value_t = 6.0, value_parser = super::common::parse_seconds)]
    seconds: f32,
    /// Vertex count of the large garment (its motion is the SOR garment's, carried by
    /// barycentric binding to the default-resolution garment).
    #[arg(long, default_value_t = 12500)]
    large: usize,
    /// Seconds between keyframes.
    #[arg(long, default_value_t = 2.0, value_parser = super::common::parse_seconds)]
    keyframe_interval: f32,
    /// Write the golden streams (tests/fixtures/codec/v5) into this folder and stop: the
    /// server's coarse-to-fine traversal there, the breadth-first one in
    /// `breadth-first/` below it.
    #[arg(long)]
    golden: Option<PathBuf>,
    /// Also time the JavaScript decoder (`clients/web/codec.js`, what browsers and
    /// headsets run) on the same frames; needs `node` on the PATH.
    #[arg(long)]
    js: bool,
    /// Also time the C# decoder (`clients/csharp`, what Unity and .NET clients run) on
    /// the same frames: the path of its built `Bench.exe` (`clients/csharp/test.sh`
    /// builds it into `clients/csharp/build/`), run with `mono`.
    #[arg(long, value_name = "BENCH_EXE")]
    csharp: Option<PathBuf>,
    /// clothcast's encoder and decoder each code every sequence this many times (fresh
    /// state each pass, the output checked identical), and the fastest pass is shown:
    /// the figure least disturbed by other work on a shared machine.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    passes: u32,
    /// Run only the sequences whose label (e.g. `walk 12500v 30fps`) contains this text.
    #[arg(long)]
    only: Option<String>,
}

/// A recorded garment sequence.
struct Sequence {
    positions: Vec<Vec<f32>>,
    bones: Vec<Vec<BoneTransform>>,
}

fn bones_of(skeleton: &Skeleton, canonical: &Pose) -> Vec<BoneTransform> {
    skeleton
        .skinning_transforms(canonical)
        .iter()
        .map(|t| BoneTransform {
            rotation: t.rot.to_array(),
            translation: t.trans.to_array(),
        })
        .collect()
}

/// The motions: frames of the built-in CMU 131_01 clip (120 fps).
fn motions(seconds: f32) -> [(&'static str, usize, usize, usize); 3] {
    let n = (seconds * 120.0) as usize;
    // (name, first frame, frame count at 120 fps, speed-up; 0: hold the first frame and
    // breathe — a kiosk user standing still)
    [("idle", 0, n, 0), ("walk", 240, n, 1), ("fast", 0, n, 4)]
}

pub(crate) fn run(b: CodecBench) -> anyhow::Result<()> {
    let db = super::serve::load_db(b.db.as_ref())?;
    let body = db.body.to_body();
    let clip = Clip::from_bvh_text(DEFAULT_CLIP, None, &body.skeleton)?;
    let synth = Synthesizer::new(&db, SynthParams::default());
    let coarse = TriMesh::new(db.garment.rest.clone(), db.garment.triangles.clone());
    let sk = synth.skeleton();
    let small_setup = setup_of(
        &db.garment.triangles,
        &db.garment.skin,
        Some(&db.garment.rest),
        sk,
    )?;
    let small_bfs = setup_of(&db.garment.triangles, &db.garment.skin, None, sk)?;
    if let Some(dir) = &b.golden {
        write_golden(dir, &synth, &clip, &small_setup)?;
        return write_golden(&dir.join("breadth-first"), &synth, &clip, &small_bfs);
    }
    let default_body = Body::default_body()?;
    let mut cfg = GarmentConfig::builtin("tshirt")?;
    cfg.target_vertices = b.large;
    let large = Garment::generate(&default_body, &cfg)?;
    let binding = Binding::new(&coarse, &large.mesh.positions)?;
    let large_setup = setup_of(
        &large.mesh.triangles,
        &large.skin,
        Some(&large.mesh.positions),
        sk,
    )?;
    let large_bfs = setup_of(&large.mesh.triangles, &large.skin, None, sk)?;
    outln!(
        "garment stream codec, one thread; max error 1 mm; the lossless peers code exactly the frames clothcast reconstructs;"
    );
    outln!(
        "bits per vertex per frame count every byte of the message, keyframes every {:.0} s included;",
        b.keyframe_interval
    );
    outln!(
        "clothcast's times are the fastest of {} passes over each sequence\n",
        b.passes
    );
    outln!(
        "{:<26} {:<20} {:>7} {:>7} {:>7} {:>8} {:>8} {:>9} {:>9}",
        "sequence",
        "method",
        "mean",
        "p95",
        "max",
        "max mm",
        "rms mm",
        "enc µs",
        "dec µs"
    );
    let mut matched = 0;
    for (setup, bfs, bind) in [
        (&small_setup, &small_bfs, None),
        (&large_setup, &large_bfs, Some(&binding)),
    ] {
        for fps in [30u32, 60] {
            for (name, first, count, speed) in motions(b.seconds) {
                let label = format!("{name} {}v {fps}fps", setup.vertex_count());
                if b.only.as_ref().is_some_and(|o| !label.contains(o.as_str())) {
                    continue;
                }
                matched += 1;
                let seq = record(&synth, &clip, first, count, speed, fps, bind)?;
                let key_every = ((b.keyframe_interval * fps as f32) as usize).max(1);
                for r in run_methods(setup, bfs, &seq, key_every, &peers_of(&b), b.passes)? {
                    outln!(
                        "{:<26} {:<20} {:>7.2} {:>7.2} {:>7.1} {:>8.3} {:>8.3} {:>9} {:>9.0}",
                        label,
                        r.method,
                        r.mean,
                        r.p95,
                        r.max,
                        r.max_err_mm,
                        r.rms_err_mm,
                        if r.enc_us.is_nan() {
                            "-".to_string()
                        } else {
                            format!("{:.0}", r.enc_us)
                        },
                        r.dec_us
                    );
                }
            }
        }
    }
    if matched == 0 {
        anyhow::bail!(
            "--only {:?} matches no sequence (labels are like \"walk {}v 30fps\": idle, walk or fast; {} or {} vertices; 30 or 60 fps)",
            b.only.as_deref().unwrap_or_default(),
            large_setup.vertex_count(),
            small_setup.vertex_count(),
            large_setup.vertex_count()
        );
    }
    Ok(())
}

fn setup_of(
    triangles: &[[u32; 3]],
    skin: &crate::body::SkinWeights,
    rest: Option<&[glam::Vec3]>,
    skeleton: &Skeleton,
) -> anyhow::Result<Arc<GarmentSetup>> {
    Ok(Arc::new(crate::engine::codec_setup(
        triangles, skin, rest, skeleton,
    )?))
}

fn record(
    synth: &Synthesizer<'_>,
    clip: &Clip,
    first: usize,
    count: usize,
    speed: usize,
    fps: u32,
    bind: Option<&Binding>,
) -> anyhow::Result<Sequence> {
    let per_frame = ((1.0 / (fps as f32 * clip.frame_time)).round() as usize).max(1);
    let step = per_frame * speed;
    let dt = 1.0 / fps as f32;
    let n = synth.database().vertex_count();
    let (mut state, mut scratch, mut out) =
        (AvatarState::new(), Scratch::default(), vec![Vec3::ZERO; n]);
    let mut seq = Sequence {
        positions: Vec::new(),
        bones: Vec::new(),
    };
    let frames = (count / per_frame).max(2);
    // the arms kept out of the torso, as the server keeps them
    let guard = SelfContactGuard::new(&synth.database().body.to_body(), GUARD_CLEARANCE);
    for k in 0..frames {
        let f = (first + k * step) % clip.poses.len();
        let mut pose = clip.poses[f];
        if speed == 0 {
            breathe(&mut pose, k as f32 * dt);
        }
        let pose = guard.apply(&pose);
        let canonical = canonicalize(&pose, synth.skeleton()).0;
        synth.synthesize(&mut state, &mut scratch, &canonical, dt, &mut out);
        let mut p = Vec::with_capacity(3 * n);
        match bind {
            Some(b) => b.apply(&out, &mut p),
            None => out.iter().for_each(|v| p.extend_from_slice(&v.to_array())),
        }
        seq.positions.push(p);
        seq.bones.push(bones_of(synth.skeleton(), &canonical));
    }
    Ok(seq)
}

/// Idle sway on top of a held pose: breathing in the spine (±1° at 0.25 Hz), the arms
/// settling (±1.5° at 0.3 Hz) and the head turning slowly (±3° at 0.1 Hz).
fn breathe(pose: &mut Pose, t: f32) {
    use crate::skeleton::{JointId, quat_exp};
    let wave = |deg: f32, hz: f32, phase: f32| {
        deg.to_radians() * (std::f32::consts::TAU * hz * t + phase).sin()
    };
    let mut turn = |j: JointId, axis: Vec3| {
        pose.set_rotation(j, (pose.rotation(j) * quat_exp(axis)).normalize())
    };
    for j in [JointId::SPINE1, JointId::SPINE2, JointId::SPINE3] {
        turn(j, Vec3::X * wave(1.0, 0.25, 0.0));
    }
    turn(JointId::LEFT_SHOULDER, Vec3::Z * wave(1.5, 0.3, 1.0));
    turn(JointId::RIGHT_SHOULDER, Vec3::Z * -wave(1.5, 0.3, 1.0));
    turn(JointId::NECK, Vec3::Y * wave(3.0, 0.1, 0.0));
}

struct MethodResult {
    method: &'static str,
    mean: f64,
    p95: f64,
    max: f64,
    max_err_mm: f64,
    rms_err_mm: f64,
    enc_us: f64,
    dec_us: f64,
}

fn summarise(
    method: &'static str,
    sizes: &[usize],
    n: usize,
    original: &[Vec<f32>],
    decoded: &[Vec<f32>],
    enc: f64,
    dec: f64,
) -> MethodResult {
    let mut bpvf: Vec<f64> = sizes.iter().map(|&s| s as f64 * 8.0 / n as f64).collect();
    bpvf.sort_by(f64::total_cmp);
    let (mut max_e, mut sum_sq, mut count) = (0f64, 0f64, 0usize);
    for (o, d) in original.iter().zip(decoded) {
        for (a, b) in o.chunks_exact(3).zip(d.chunks_exact(3)) {
            let e = (0..3).map(|k| f64::from(a[k] - b[k]).powi(2)).sum::<f64>();
            max_e = max_e.max(e.sqrt());
            sum_sq += e;
            count += 1;
        }
    }
    let frames = sizes.len().max(1) as f64;
    MethodResult {
        method,
        mean: bpvf.iter().sum::<f64>() / frames,
        p95: bpvf[((bpvf.len() as f64 * 0.95) as usize).min(bpvf.len() - 1)],
        max: bpvf.last().copied().unwrap_or(0.0),
        max_err_mm: max_e * 1000.0,
        rms_err_mm: (sum_sq / count.max(1) as f64).sqrt() * 1000.0,
        enc_us: enc / frames * 1e6,
        dec_us: dec / frames * 1e6,
    }
}

fn run_methods(
    setup: &Arc<GarmentSetup>,
    breadth_first: &Arc<GarmentSetup>,
    seq: &Sequence,
    key_every: usize,
    decoders: &[Peer],
    passes: u32,
) -> anyhow::Result<Vec<MethodResult>> {
    let n = setup.vertex_count();
    let mut results = Vec::new();
    // raw f32
    {
        let t = Instant::now();
        let bytes: Vec<Vec<u8>> = seq
            .positions
            .iter()
            .map(|p| bytemuck::cast_slice::<f32, u8>(p).to_vec())
            .collect();
        let enc = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let dec: Vec<Vec<f32>> = bytes
            .iter()
            .map(|b| bytemuck::pod_collect_to_vec::<u8, f32>(b))
            .collect();
        let dt = t.elapsed().as_secs_f64();
        results.push(summarise(
            "raw f32",
            &bytes.iter().map(Vec::len).collect::<Vec<_>>(),
            n,
            &seq.positions,
            &dec,
            enc,
            dt,
        ));
    }
    // ours; its reconstruction is the quantised sequence every other method then codes
    let coded = code_ours(setup, seq, key_every, passes, Effort::Fast)?;
    let ours = coded.summary("clothcast v5", seq, n);
    let small = code_ours(setup, seq, key_every, passes, Effort::Small)?.summary(
        "clothcast v5 small",
        seq,
        n,
    );
    let fastest = code_ours(setup, seq, key_every, passes, Effort::Fastest)?.summary(
        "clothcast v5 fastest",
        seq,
        n,
    );
    // the same coder over the breadth-first traversal (the baseline of the coarse-to-fine
    // one the server uses)
    let bfs = code_ours(breadth_first, seq, key_every, passes, Effort::Fast)?.summary(
        "clothcast v5 bfs",
        seq,
        n,
    );
    let (frames, decoded) = (coded.frames, coded.decoded);
    let inv = 1.0 / f64::from(setup.step);
    let lattice: Vec<Vec<i32>> = decoded
        .iter()
        .map(|p| {
            p.iter()
                .map(|x| (f64::from(*x) * inv).round() as i32)
                .collect()
        })
        .collect();
    #[cfg(feature = "codec-peers")]
    peers::run(&lattice, setup.step, n, seq, key_every, &mut results)?;
    #[cfg(not(feature = "codec-peers"))]
    let _ = &lattice;
    for peer in decoders {
        let us = peer_decode(
            peer,
            setup,
            &frames,
            decoded.last().map_or(&[][..], Vec::as_slice),
        )?;
        results.push(MethodResult {
            method: peer.method(),
            enc_us: f64::NAN,
            dec_us: us,
            ..ours
        });
    }
    results.push(ours);
    results.push(small);
    results.push(fastest);
    results.push(bfs);
    Ok(results)
}

/// A sequence coded by clothcast: the frames, their decoding, and the fastest pass's
/// encode and decode seconds (whole sequence).
struct Coded {
    frames: Vec<Vec<u8>>,
    decoded: Vec<Vec<f32>>,
    enc: f64,
    dec: f64,
}

impl Coded {
    /// The table row of this coding of `seq` (`n` vertices).
    fn summary(&self, method: &'static str, seq: &Sequence, n: usize) -> MethodResult {
        let sizes: Vec<usize> = self.frames.iter().map(Vec::len).collect();
        summarise(
            method,
            &sizes,
            n,
            &seq.positions,
            &self.decoded,
            self.enc,
            self.dec,
        )
    }
}

/// Codes `seq` with clothcast's encoder at `effort` `passes` times (fresh state each
/// pass; every pass must code the same bytes) and decodes it `passes` times.
fn code_ours(
    setup: &Arc<GarmentSetup>,
    seq: &Sequence,
    key_every: usize,
    passes: u32,
    effort: Effort,
) -> anyhow::Result<Coded> {
    let n = setup.vertex_count();
    let (mut frames, mut enc) = (Vec::new(), f64::INFINITY);
    for pass in 0..passes.max(1) {
        let mut encoder = Encoder::new(Arc::clone(setup), 1);
        encoder.set_effort(effort);
        let mut coded = Vec::with_capacity(seq.positions.len());
        let mut buf = Vec::new();
        let t = Instant::now();
        for (i, (p, b)) in seq.positions.iter().zip(&seq.bones).enumerate() {
            encoder.encode(p, b, i % key_every == 0, &mut buf)?;
            coded.push(buf.clone());
        }
        enc = enc.min(t.elapsed().as_secs_f64());
        if pass == 0 {
            frames = coded;
        } else if coded != frames {
            anyhow::bail!("encoder pass {pass} coded different bytes from the first");
        }
    }
    let mut decoded = vec![vec![0f32; 3 * n]; frames.len()];
    let mut dec = f64::INFINITY;
    for _ in 0..passes.max(1) {
        let mut decoder = Decoder::new(Arc::clone(setup));
        let t = Instant::now();
        for (f, out) in frames.iter().zip(decoded.iter_mut()) {
            decoder.decode(f, out)?;
        }
        dec = dec.min(t.elapsed().as_secs_f64());
    }
    Ok(Coded {
        frames,
        decoded,
        enc,
        dec,
    })
}

/// A decoder of another language timed on the bench's frames.
enum Peer {
    /// The JavaScript decoder in Node.
    Js,
    /// The C# decoder's `Bench.exe`, run with `mono`.
    CSharp(PathBuf),
}

impl Peer {
    fn method(&self) -> &'static str {
        match self {
            Peer::Js => "clothcast v5 (JS)",
            Peer::CSharp(_) => "clothcast v5 (C#)",
        }
    }
}

/// The other decoders `b` asks for.
fn peers_of(b: &CodecBench) -> Vec<Peer> {
    let mut p = Vec::new();
    if b.js {
        p.push(Peer::Js);
    }
    if let Some(exe) = &b.csharp {
        p.push(Peer::CSharp(exe.clone()));
    }
    p
}

/// Decodes `frames` with another language's decoder (for JavaScript, the codec.js built
/// into this binary, so what the server serves) and returns its µs per frame; fails
/// unless its last frame is bit-identical to `last`, Rust's decoding of it.
fn peer_decode(
    peer: &Peer,
    setup: &GarmentSetup,
    frames: &[Vec<u8>],
    last: &[f32],
) -> anyhow::Result<f64> {
    use anyhow::Context;
    // the JavaScript peer runs the codec.js built into this binary
    let codec_js = match peer {
        Peer::Js => Some(crate::net::web_file("codec.js").context("codec.js is not built in")?),
        Peer::CSharp(_) => None,
    };
    let dir = std::env::temp_dir().join(format!("clothcast-bench-peer-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut stream = Vec::new();
    for f in frames {
        stream.extend_from_slice(&(f.len() as u32).to_le_bytes());
        stream.extend_from_slice(f);
    }
    let setup_bytes = setup.to_bytes();
    let mut files: Vec<(&str, &[u8])> = vec![("setup.bin", &setup_bytes), ("stream.bin", &stream)];
    let mut command = match peer {
        Peer::Js => {
            if let Some(js) = &codec_js {
                files.push(("codec.js", js.as_bytes()));
            }
            files.push((
                "decode.mjs",
                include_bytes!("../../clients/web/bench/decode.mjs"),
            ));
            let mut c = std::process::Command::new("node");
            c.arg(dir.join("decode.mjs"));
            c
        }
        Peer::CSharp(exe) => {
            let mut c = std::process::Command::new("mono");
            c.arg(exe);
            c
        }
    };
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes)?;
    }
    let run = command.arg(&dir).output();
    let _ = std::fs::remove_dir_all(&dir);
    let run = run.with_context(|| match peer {
        Peer::Js => "running node (bench codec --js needs Node.js on the PATH)".to_string(),
        Peer::CSharp(exe) => format!(
            "running mono {} (bench codec --csharp needs Mono on the PATH)",
            exe.display()
        ),
    })?;
    anyhow::ensure!(
        run.status.success(),
        "the {} decoder failed: {}",
        peer.method(),
        String::from_utf8_lossy(&run.stderr)
    );
    #[derive(serde::Deserialize)]
    struct Report {
        us_per_frame: f64,
        hash: u32,
    }
    let r: Report = serde_json::from_slice(&run.stdout).with_context(|| {
        format!(
            "{} printed {:?}",
            peer.method(),
            String::from_utf8_lossy(&run.stdout)
        )
    })?;
    let rust = word_hash(last.iter().map(|x| x.to_bits()));
    anyhow::ensure!(
        r.hash == rust,
        "the {} decoder's last frame differs from Rust's (hash {:08x}, Rust {rust:08x})",
        peer.method(),
        r.hash
    );
    Ok(r.us_per_frame)
}
#[cfg(feature = "codec-peers")]
mod peers {
    //! The comparison codecs (built with `--features codec-peers`).
    use super::{MethodResult, Sequence, summarise};
    use std::time::Instant;

    fn deltas(lattice: &[Vec<i32>], i: usize, key: bool) -> Vec<i32> {
        if key {
            lattice[i].clone()
        } else {
            lattice[i]
                .iter()
                .zip(&lattice[i - 1])
                .map(|(a, b)| a - b)
                .collect()
        }
    }

    fn undelta(acc: &mut [i32], d: &[i32], key: bool, step: f32) -> Vec<f32> {
        for (a, x) in acc.iter_mut().zip(d) {
            *a = if key { *x } else { *a + *x };
        }
        acc.iter().map(|q| *q as f32 * step).collect()
    }

    pub(super) fn run(
        lattice: &[Vec<i32>],
        step: f32,
        n: usize,
        seq: &Sequence,
        key_every: usize,
        out: &mut Vec<MethodResult>,
    ) -> anyhow::Result<()> {
        for (name, meshopt) in [("quantised+zstd", false), ("meshopt v1+zstd", true)] {
            let t = Instant::now();
            let mut frames = Vec::new();
            for i in 0..lattice.len() {
                let d = deltas(lattice, i, i % key_every == 0);
                let bytes = if meshopt {
                    let v: Vec<[i32; 3]> = d.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect();
                    meshopt::encode_vertex_buffer_level(&v, 2, Some(1))?
                } else {
                    bytemuck::cast_slice::<i32, u8>(&d).to_vec()
                };
                frames.push(zstd::bulk::compress(&bytes, 3)?);
            }
            let enc = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let mut acc = vec![0i32; 3 * n];
            let mut decoded = Vec::new();
            for (i, f) in frames.iter().enumerate() {
                let raw = zstd::bulk::decompress(f, 16 * 3 * n + 1024)?;
                let d: Vec<i32> = if meshopt {
                    meshopt::decode_vertex_buffer::<[i32; 3]>(&raw, n)?
                        .into_iter()
                        .flatten()
                        .collect()
                } else {
                    bytemuck::pod_collect_to_vec(&raw)
                };
                decoded.push(undelta(&mut acc, &d, i % key_every == 0, step));
            }
            let dec = t.elapsed().as_secs_f64();
            out.push(summarise(
                name,
                &frames.iter().map(Vec::len).collect::<Vec<_>>(),
                n,
                &seq.positions,
                &decoded,
                enc,
                dec,
            ));
        }
        Ok(())
    }
}

/// Writes `setup.bin`, `stream.bin` (frames, each preceded by its length as u32 LE) and
/// `frames.json` (per frame: kind, number, and FNV-1a of the decoded floats' bits) for
/// one second of the default garment walking at 30 fps, with a resync keyframe
/// repeated mid-stream and a still frame.
fn write_golden(
    dir: &std::path::Path,
    synth: &Synthesizer<'_>,
    clip: &Clip,
    setup: &Arc<GarmentSetup>,
) -> anyhow::Result<()> {
    let seq = record(synth, clip, 240, 120, 1, 30, None)?;
    let n = setup.vertex_count();
    let mut enc = Encoder::new(Arc::clone(setup), 42);
    let mut stream = Vec::new();
    let mut json = Vec::new();
    let mut buf = Vec::new();
    let mut rec = vec![0f32; 3 * n];
    // a decoder alongside, for the bones each frame carries (what a viewer could skin
    // the body with): their hash is frozen too
    let mut dec = Decoder::new(Arc::clone(setup));
    let mut decoded = vec![0f32; 3 * n];
    let mut bones = vec![BoneTransform::IDENTITY; setup.bones as usize];
    let mut push = |buf: &[u8], h: crate::codec::FrameHeader, rec: &[f32]| -> anyhow::Result<()> {
        stream.extend_from_slice(&(buf.len() as u32).to_le_bytes());
        stream.extend_from_slice(buf);
        let hash = word_hash(rec.iter().map(|x| x.to_bits()));
        dec.decode(buf, &mut decoded)?;
        dec.bones(&mut bones)?;
        let bones_hash = word_hash(
            bones
                .iter()
                .flat_map(|b| b.rotation.into_iter().chain(b.translation))
                .map(f32::to_bits),
        );
        json.push(serde_json::json!({"kind": if h.kind == crate::codec::FrameKind::Key { "key" } else { "delta" }, "frame": h.frame, "reference": h.reference, "bytes": buf.len(), "hash": hash, "bones": bones_hash}));
        Ok(())
    };
    let mut frames: Vec<usize> = (0..seq.positions.len()).collect();
    frames.push(seq.positions.len() - 1); // a still frame
    for (i, &f) in frames.iter().enumerate() {
        let h = enc.encode(&seq.positions[f], &seq.bones[f], false, &mut buf)?;
        enc.reconstruction(&mut rec)?;
        push(&buf, h, &rec)?;
        if i == 15 {
            let h = enc.keyframe(&mut buf)?;
            push(&buf, h, &rec)?;
        }
    }
    std::fs::create_dir_all(dir)?;
    write_file(&dir.join("setup.bin"), |w| w.write_all(&setup.to_bytes()))?;
    write_file(&dir.join("stream.bin"), |w| w.write_all(&stream))?;
    write_file(&dir.join("frames.json"), |w| {
        w.write_all(
            serde_json::to_string_pretty(&json)
                .unwrap_or_default()
                .as_bytes(),
        )
    })?;
    write_file(&dir.join("last.f32"), |w| {
        w.write_all(bytemuck::cast_slice(&rec))
    })?;
    outln!(
        "wrote golden stream of {} records ({} bytes) for {n} vertices to {}",
        json.len(),
        stream.len(),
        dir.display()
    );
    Ok(())
}
