//! Codec tests: round trips within the lattice bound, zero drift, resync, and the
//! hostile-input checklist.

use std::sync::Arc;

use proptest::prelude::*;

use super::format::{FRAME_HEADER_LEN, max_frame_bytes};
use super::*;

mod golden;
mod rest_shape;
mod skeleton;

/// A cylinder (a sleeve) of `rings × around` vertices along y, skinned to two bones
/// blending along its length.
/// Positions, triangles, bone indices and weights of a test garment.
type TestMesh = (Vec<[f32; 3]>, Vec<[u32; 3]>, Vec<[u8; 4]>, Vec<[f32; 4]>);

pub(crate) fn sleeve(rings: usize, around: usize) -> TestMesh {
    let mut pos = Vec::new();
    let (mut joints, mut weights) = (Vec::new(), Vec::new());
    for r in 0..rings {
        let t = r as f32 / (rings - 1) as f32;
        for a in 0..around {
            let phi = a as f32 / around as f32 * std::f32::consts::TAU;
            pos.push([0.08 * phi.cos(), 0.5 * t, 0.08 * phi.sin()]);
            joints.push([0, 1, 0, 0]);
            weights.push([1.0 - t, t, 0.0, 0.0]);
        }
    }
    let mut tris = Vec::new();
    for r in 0..rings - 1 {
        for a in 0..around {
            let i = |r: usize, a: usize| (r * around + a % around) as u32;
            tris.push([i(r, a), i(r + 1, a), i(r + 1, a + 1)]);
            tris.push([i(r, a), i(r + 1, a + 1), i(r, a + 1)]);
        }
    }
    (pos, tris, joints, weights)
}

fn rot_z(angle: f32) -> [f32; 4] {
    [0.0, 0.0, (angle / 2.0).sin(), (angle / 2.0).cos()]
}

/// Frame `f` of a swinging sleeve: bone 1 rotates about the elbow at y = 0.25, plus a
/// ripple the skinning does not explain; returns (positions, bones).
pub(crate) fn swing(
    rest: &[[f32; 3]],
    weights: &[[f32; 4]],
    f: usize,
) -> (Vec<f32>, Vec<BoneTransform>) {
    swing_with(rest, weights, f, 0.004)
}

/// [`swing`] with a ripple of `ripple` metres.
fn swing_with(
    rest: &[[f32; 3]],
    weights: &[[f32; 4]],
    f: usize,
    ripple: f32,
) -> (Vec<f32>, Vec<BoneTransform>) {
    let ang = 0.6 * (f as f32 * 0.15).sin();
    let (s, c) = ang.sin_cos();
    let pivot = 0.25f32;
    let bone1 = BoneTransform {
        rotation: rot_z(ang),
        translation: [pivot * s, pivot - pivot * c, 0.0],
    };
    let mut out = Vec::with_capacity(rest.len() * 3);
    for (p, w) in rest.iter().zip(weights) {
        let moved = [
            c * p[0] - s * p[1] + bone1.translation[0],
            s * p[0] + c * p[1] + bone1.translation[1],
            p[2],
        ];
        let ripple = ripple * (p[1] * 30.0 + f as f32 * 0.4).sin();
        for k in 0..3 {
            out.push(w[0] * p[k] + w[1] * moved[k] + if k == 2 { ripple } else { 0.0 });
        }
    }
    (out, vec![BoneTransform::IDENTITY, bone1])
}

/// The sleeve's skeleton: bone 1 (the forearm) hangs from bone 0 at the elbow.
const SLEEVE_PARENTS: [Option<usize>; 2] = [None, Some(0)];
/// The sleeve's rest joints, metres: the elbow at y = 0.25 ([`swing`]).
const SLEEVE_PIVOTS: [[f32; 3]; 2] = [[0.0; 3], [0.0, 0.25, 0.0]];

fn setup(rings: usize, around: usize) -> (Arc<GarmentSetup>, Vec<[f32; 3]>, Vec<[f32; 4]>) {
    let (pos, tris, joints, weights) = sleeve(rings, around);
    let s = GarmentSetup::new(&tris, &joints, &weights, 2, &CodecConfig::default())
        .and_then(|s| s.with_skeleton(&SLEEVE_PARENTS, &SLEEVE_PIVOTS))
        .expect("setup");
    (Arc::new(s), pos, weights)
}

fn max_error(a: &[f32], b: &[f32]) -> f32 {
    a.chunks_exact(3)
        .zip(b.chunks_exact(3))
        .map(|(x, y)| {
            ((x[0] - y[0]).powi(2) + (x[1] - y[1]).powi(2) + (x[2] - y[2]).powi(2)).sqrt()
        })
        .fold(0.0, f32::max)
}

#[test]
fn setup_round_trips_and_refuses_bad_bytes() {
    let (s, _, _) = setup(10, 12);
    let bytes = s.to_bytes();
    let back = GarmentSetup::from_bytes(&bytes).expect("parses");
    assert_eq!(*s, back);
    assert_eq!(s.id(), back.id());
    for cut in [0, 1, 10, 23, bytes.len() / 2, bytes.len() - 1] {
        assert!(
            GarmentSetup::from_bytes(&bytes[..cut]).is_err(),
            "prefix {cut} accepted"
        );
    }
    let mut extra = bytes.clone();
    extra.push(0);
    assert_eq!(
        GarmentSetup::from_bytes(&extra),
        Err(CodecError::TrailingBytes { extra: 1 })
    );
    let mut bad = bytes.clone();
    bad[4] = 9;
    assert!(matches!(
        GarmentSetup::from_bytes(&bad),
        Err(CodecError::UnsupportedVersion { found: 9, .. })
    ));
    // the rest flag, the setup's last word here (no rest shape): only 0 or 1
    let flag = bytes.len() - 4;
    assert_eq!(bytes[flag..], [0, 0, 0, 0]);
    let mut two = bytes.clone();
    two[flag] = 2;
    assert_eq!(
        GarmentSetup::from_bytes(&two),
        Err(CodecError::Corrupt {
            what: "setup rest flag"
        })
    );
    // a flag of 1 without the shape after it
    two[flag] = 1;
    assert_eq!(
        GarmentSetup::from_bytes(&two),
        Err(CodecError::Truncated { what: "setup" })
    );
    // the skeleton, 16 bytes per bone before the flag: a parent that is not an earlier
    // bone, a pivot off the lattice
    let skeleton = flag - 16 * s.bones as usize;
    let mut own = bytes.clone();
    own[skeleton + 16..skeleton + 20].copy_from_slice(&1u32.to_le_bytes());
    assert_eq!(
        GarmentSetup::from_bytes(&own),
        Err(CodecError::Invalid {
            what: "bone parent (must be an earlier bone)"
        })
    );
    let mut far = bytes.clone();
    far[skeleton + 24..skeleton + 28].copy_from_slice(&i32::MIN.to_le_bytes());
    assert_eq!(
        GarmentSetup::from_bytes(&far),
        Err(CodecError::Invalid {
            what: "bone pivot (outside the lattice)"
        })
    );
    // a predictor pointing forward in the traversal
    let mut fwd = bytes.clone();
    let last = skeleton - 12;
    let first_vertex = s.order[0];
    fwd[last..last + 4].copy_from_slice(&first_vertex.to_le_bytes());
    let v_last = s.vertex_count() - 1;
    if s.order[0] as usize != v_last {
        // vertex v_last's first reference now names the first traversed vertex: allowed;
        // make it name itself instead: refused
        fwd[last..last + 4].copy_from_slice(&(v_last as u32).to_le_bytes());
        assert!(matches!(
            GarmentSetup::from_bytes(&fwd),
            Err(CodecError::Invalid { .. })
        ));
    }
    // absurd counts are refused from the header alone
    let mut huge = bytes[..24].to_vec();
    huge[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        GarmentSetup::from_bytes(&huge),
        Err(CodecError::TooLarge { .. })
    ));
}

/// Codes 60 frames of the swinging sleeve; `bones = false` sends identity bones (no
/// motion compensation possible). Returns mean bits per vertex per delta frame.
fn swing_stream(bones: bool, ripple: f32) -> f64 {
    let (s, rest, w) = setup(40, 48);
    let mut enc = Encoder::new(Arc::clone(&s), 7);
    let mut dec = Decoder::new(Arc::clone(&s));
    let n = s.vertex_count();
    let (mut out, mut rec, mut buf) = (vec![0f32; 3 * n], vec![0f32; 3 * n], Vec::new());
    let bound = enc.tolerance() * 1.0001;
    let mut delta_bytes = 0usize;
    for f in 0..60 {
        let (pos, mut b) = swing_with(&rest, &w, f, ripple);
        if !bones {
            b = vec![BoneTransform::IDENTITY; 2];
        }
        let h = enc.encode(&pos, &b, false, &mut buf).expect("encodes");
        assert!(buf.len() <= max_frame_bytes(n, 2));
        assert_eq!(
            h.kind,
            if f == 0 {
                FrameKind::Key
            } else {
                FrameKind::Delta
            }
        );
        if f > 0 {
            delta_bytes += buf.len();
        }
        dec.decode(&buf, &mut out).expect("decodes");
        enc.reconstruction(&mut rec).expect("len");
        assert_eq!(out, rec, "frame {f}: decoder differs from encoder");
        assert!(
            max_error(&out, &pos) <= bound,
            "frame {f}: error {}",
            max_error(&out, &pos)
        );
    }
    // a still frame costs almost nothing (every patch skipped)
    let (pos, b) = swing_with(&rest, &w, 59, ripple);
    let b = if bones {
        b
    } else {
        vec![BoneTransform::IDENTITY; 2]
    };
    enc.encode(&pos, &b, false, &mut buf).expect("encodes");
    assert!(
        buf.len() < FRAME_HEADER_LEN + 40,
        "still frame of {} bytes",
        buf.len()
    );
    dec.decode(&buf, &mut out).expect("decodes");
    delta_bytes as f64 * 8.0 / (59.0 * n as f64)
}

#[test]
fn stream_round_trips_within_the_lattice_bound_and_motion_compensation_pays() {
    // a 4 mm travelling ripple the skinning cannot explain: spatial prediction carries it
    let (with, without) = (swing_stream(true, 0.004), swing_stream(false, 0.004));
    eprintln!(
        "rippling sleeve: {with:.2} bits per vertex per delta frame with bone motion, {without:.2} without"
    );
    assert!(with <= without * 1.02, "{with:.2} vs {without:.2} bpvf");
    // mostly skinned motion (0.5 mm ripple): the bones predict it
    let (with, without) = (swing_stream(true, 0.0005), swing_stream(false, 0.0005));
    eprintln!(
        "swinging sleeve: {with:.2} bits per vertex per delta frame with bone motion, {without:.2} without"
    );
    assert!(
        with < 0.93 * without,
        "motion compensation saved too little: {with:.2} vs {without:.2} bpvf"
    );
}

#[test]
fn ten_thousand_deltas_do_not_drift() {
    let (s, rest, w) = setup(6, 10);
    let n = s.vertex_count();
    let mut enc = Encoder::new(Arc::clone(&s), 1);
    let mut dec = Decoder::new(Arc::clone(&s));
    let (mut out, mut rec, mut buf) = (vec![0f32; 3 * n], vec![0f32; 3 * n], Vec::new());
    let mut rng = 12345u64;
    for f in 0..10_001 {
        let (mut pos, bones) = swing(&rest, &w, f);
        for p in &mut pos {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            *p += ((rng >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.003;
        }
        enc.encode(&pos, &bones, false, &mut buf).expect("encodes");
        dec.decode(&buf, &mut out).expect("decodes");
        enc.reconstruction(&mut rec).expect("len");
        assert!(
            out.iter()
                .zip(&rec)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "drift at frame {f}"
        );
    }
    assert_eq!(dec.last_frame(), Some(10_000));
}

/// `Effort::Small` searches the tolerance ball for the cheapest point: on a swinging
/// sleeve with cloth-like wobble it codes fewer bytes than `Effort::Fast`, within the
/// same error bound, and any decoder follows either.
#[test]
fn small_effort_codes_fewer_bytes_within_the_same_bound() {
    let (s, rest, w) = setup(12, 24);
    let n = s.vertex_count();
    let mut total = [0usize; 2];
    for (i, effort) in [Effort::Fast, Effort::Small].into_iter().enumerate() {
        let mut enc = Encoder::new(Arc::clone(&s), 1);
        enc.set_effort(effort);
        let mut dec = Decoder::new(Arc::clone(&s));
        let (mut out, mut buf) = (vec![0f32; 3 * n], Vec::new());
        for f in 0..120 {
            let (mut pos, bones) = swing(&rest, &w, f);
            // a smooth non-rigid wobble on top of the skinning (what the predictors
            // cannot follow)
            for (v, p) in pos.chunks_exact_mut(3).enumerate() {
                let phase = v as f32 * 0.37 + f as f32 * 0.21;
                p[0] += 0.004 * phase.sin();
                p[2] += 0.003 * (phase * 1.3).cos();
            }
            enc.encode(&pos, &bones, f % 60 == 0, &mut buf)
                .expect("encodes");
            total[i] += buf.len();
            dec.decode(&buf, &mut out).expect("decodes");
            assert!(
                max_error(&out, &pos) <= enc.tolerance() * 1.0001,
                "{effort:?} frame {f}"
            );
        }
    }
    assert!(
        total[1] < total[0],
        "small {} bytes, fast {} bytes",
        total[1],
        total[0]
    );
}

#[test]
fn a_viewer_that_missed_frames_resyncs_with_a_keyframe() {
    let (s, rest, w) = setup(8, 12);
    let n = s.vertex_count();
    let mut enc = Encoder::new(Arc::clone(&s), 3);
    let mut dec = Decoder::new(Arc::clone(&s));
    let (mut out, mut rec, mut buf, mut key) =
        (vec![0f32; 3 * n], vec![0f32; 3 * n], Vec::new(), Vec::new());
    let (p, b) = swing(&rest, &w, 0);
    enc.encode(&p, &b, false, &mut buf).expect("encodes");
    dec.decode(&buf, &mut out).expect("decodes");
    for f in 1..4 {
        let (p, b) = swing(&rest, &w, f);
        enc.encode(&p, &b, false, &mut buf).expect("encodes"); // not delivered
    }
    let (p, b) = swing(&rest, &w, 4);
    enc.encode(&p, &b, false, &mut buf).expect("encodes");
    let before = out.clone();
    assert_eq!(
        dec.decode(&buf, &mut out),
        Err(CodecError::MissingReference {
            needed: 3,
            have: Some(0)
        })
    );
    assert_eq!(out, before, "a refused frame must not touch the output");
    let h = enc.keyframe(&mut key).expect("keyframe");
    assert_eq!((h.kind, h.frame), (FrameKind::Key, 4));
    dec.decode(&key, &mut out).expect("keyframe decodes");
    enc.reconstruction(&mut rec).expect("len");
    assert_eq!(out, rec);
    let (p, b) = swing(&rest, &w, 5);
    enc.encode(&p, &b, false, &mut buf).expect("encodes");
    dec.decode(&buf, &mut out)
        .expect("the next delta decodes after the resync");
}

#[test]
fn hostile_frames_are_refused_and_lose_nothing() {
    let (s, rest, w) = setup(8, 12);
    let n = s.vertex_count();
    let mut enc = Encoder::new(Arc::clone(&s), 3);
    let mut dec = Decoder::new(Arc::clone(&s));
    let (mut out, mut key, mut delta) = (vec![0f32; 3 * n], Vec::new(), Vec::new());
    let (p, b) = swing(&rest, &w, 0);
    enc.encode(&p, &b, false, &mut key).expect("encodes");
    let (p, b) = swing(&rest, &w, 1);
    enc.encode(&p, &b, false, &mut delta).expect("encodes");
    // a delta before any keyframe
    assert!(matches!(
        dec.decode(&delta, &mut out),
        Err(CodecError::MissingReference { .. })
    ));
    for frame in [&key, &delta] {
        // every truncated prefix
        let mut probe = Decoder::new(Arc::clone(&s));
        if frame == &delta {
            probe.decode(&key, &mut out).expect("key");
        }
        for cut in 0..frame.len() {
            assert!(
                probe.decode(&frame[..cut], &mut out).is_err(),
                "prefix of {cut} bytes accepted"
            );
        }
        // extra bytes
        let mut long = frame.clone();
        long.push(0);
        assert_eq!(
            probe.decode(&long, &mut out),
            Err(CodecError::TrailingBytes { extra: 1 })
        );
    }
    assert_eq!(dec.decode(&[], &mut out), Err(CodecError::Empty));
    let mut bad = key.clone();
    bad[0] = b'X';
    assert_eq!(dec.decode(&bad, &mut out), Err(CodecError::BadMagic));
    let mut bad = key.clone();
    bad[4] = format::FORMAT_VERSION + 1;
    assert!(matches!(
        dec.decode(&bad, &mut out),
        Err(CodecError::UnsupportedVersion { found, .. }) if found == format::FORMAT_VERSION + 1
    ));
    let mut bad = key.clone();
    bad[8] ^= 1;
    assert!(matches!(
        dec.decode(&bad, &mut out),
        Err(CodecError::WrongSetup { .. })
    ));
    // absurd sizes: refused from the header, nothing allocated for them
    let mut bad = key.clone();
    bad[24..28].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        dec.decode(&bad, &mut out),
        Err(CodecError::TooLarge { .. })
    ));
    let mut bad = key.clone();
    bad[36..40].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        dec.decode(&bad, &mut out),
        Err(CodecError::TooLarge { .. })
    ));
    // flipped payload bits: refused (checksum, range or lattice) or, where the flip
    // only touched the coder's slack, decoded to exactly the right positions
    let mut good = vec![0f32; 3 * n];
    Decoder::new(Arc::clone(&s))
        .decode(&key, &mut good)
        .expect("key");
    let mut refused = 0;
    for i in FRAME_HEADER_LEN..key.len() {
        let mut bad = key.clone();
        bad[i] ^= 0x10;
        let mut probe = Decoder::new(Arc::clone(&s));
        match probe.decode(&bad, &mut out) {
            Err(_) => refused += 1,
            Ok(_) => assert_eq!(out, good, "flip at byte {i} decoded to wrong positions"),
        }
    }
    assert!(
        refused + 4 >= key.len() - FRAME_HEADER_LEN,
        "only {refused} flips refused"
    );
    // wrong output size
    assert!(matches!(
        dec.decode(&key, &mut out[1..]),
        Err(CodecError::Mismatch { .. })
    ));
    // after all that, the real stream still decodes
    dec.decode(&key, &mut out).expect("key");
    dec.decode(&delta, &mut out).expect("delta");
    // a delta of another stream is refused
    let mut other = delta.clone();
    other[12] ^= 1;
    let mut d2 = Decoder::new(Arc::clone(&s));
    d2.decode(&key, &mut out).expect("key");
    assert!(matches!(
        d2.decode(&other, &mut out),
        Err(CodecError::MissingReference { .. })
    ));
}

#[test]
fn encoder_refuses_bad_input_and_keeps_its_state() {
    let (s, rest, w) = setup(6, 8);
    let n = s.vertex_count();
    let mut enc = Encoder::new(Arc::clone(&s), 0);
    let mut buf = Vec::new();
    let (mut p, b) = swing(&rest, &w, 0);
    enc.encode(&p, &b, false, &mut buf).expect("encodes");
    p[5] = f32::NAN;
    assert!(matches!(
        enc.encode(&p, &b, false, &mut buf),
        Err(CodecError::Invalid { .. })
    ));
    p[5] = 1e9;
    assert!(matches!(
        enc.encode(&p, &b, false, &mut buf),
        Err(CodecError::Invalid { .. })
    ));
    assert!(matches!(
        enc.encode(&p[..3], &b, false, &mut buf),
        Err(CodecError::Mismatch { .. })
    ));
    let (p, mut b) = swing(&rest, &w, 1);
    b[1].rotation = [0.0; 4];
    assert!(matches!(
        enc.encode(&p, &b, false, &mut buf),
        Err(CodecError::Invalid { .. })
    ));
    assert_eq!(enc.last_frame(), Some(0));
    assert_eq!(n * 3, p.len());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn random_meshes_and_motions_round_trip(
        rings in 2usize..12, around in 3usize..14, frames in 1usize..12, seed in any::<u64>(),
        step in prop_oneof![Just(0.001f32), Just(0.0005), Just(0.002)],
        noise in 0.0f32..0.05,
        effort in prop_oneof![Just(Effort::Fast), Just(Effort::Small), Just(Effort::Fastest)],
        shaped in any::<bool>(), skeleton in any::<bool>(),
    ) {
        let (pos, tris, joints, weights) = sleeve(rings, around);
        let mut rng = seed;
        let mut next = move || { rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); (rng >> 40) as f32 / (1u64 << 24) as f32 - 0.5 };
        let config = CodecConfig { step };
        let s = Arc::new(if shaped {
            // the coarse-to-fine traversal, from a rest shape that is not the motion's
            let rest: Vec<[f32; 3]> = pos.iter().map(|p| p.map(|x| x + 0.02 * next())).collect();
            GarmentSetup::with_rest(&tris, &joints, &weights, 2, &config, &rest)
        } else {
            GarmentSetup::new(&tris, &joints, &weights, 2, &config)
        }.and_then(|s| if skeleton {
            // a skeleton the bones below do not quite follow (their translation is
            // jittered, the pivot is off): any transforms must still round-trip
            s.with_skeleton(&SLEEVE_PARENTS, &[[0.0; 3], [next(), 0.25 + next(), next()]])
        } else {
            Ok(s)
        }).expect("setup"));
        // the parser checks the traversal's and the skeleton's invariants
        prop_assert_eq!(&GarmentSetup::from_bytes(&s.to_bytes()).expect("parses"), &*s);
        let n = s.vertex_count();
        let mut enc = Encoder::new(Arc::clone(&s), 9);
        enc.set_effort(effort);
        let mut dec = Decoder::new(Arc::clone(&s));
        let (mut out, mut rec, mut buf) = (vec![0f32; 3 * n], vec![0f32; 3 * n], Vec::new());
        for f in 0..frames {
            let (mut p, mut b) = swing(&pos, &weights, f * 3);
            p.iter_mut().for_each(|x| *x += noise * next());
            b[1].translation[0] += next();
            let key = next() > 0.4;
            enc.encode(&p, &b, key, &mut buf).expect("encodes");
            prop_assert!(buf.len() <= max_frame_bytes(n, 2));
            dec.decode(&buf, &mut out).expect("decodes");
            enc.reconstruction(&mut rec).expect("len");
            prop_assert_eq!(&out, &rec);
            prop_assert!(max_error(&out, &p) <= enc.tolerance() * 1.0001);
        }
    }
}

/// The trials with a vertex's axes in SIMD lanes (where the CPU has AVX2) code the
/// same bytes as the scalar trials, with every effort, on rippling cloth over both
/// traversals, keyframes and deltas, at a tolerance where pulls and misses happen.
#[test]
fn wide_trials_code_the_scalar_bytes() {
    let (pos, tris, joints, weights) = sleeve(48, 40);
    let config = CodecConfig::default();
    for s in [
        GarmentSetup::new(&tris, &joints, &weights, 2, &config),
        GarmentSetup::with_rest(&tris, &joints, &weights, 2, &config, &pos),
    ] {
        let s = Arc::new(s.expect("setup"));
        for effort in [Effort::Fast, Effort::Fastest, Effort::Small] {
            let mut wide = Encoder::new(Arc::clone(&s), 1);
            let mut scalar = Encoder::new(Arc::clone(&s), 1);
            scalar.set_scalar();
            for e in [&mut wide, &mut scalar] {
                e.set_effort(effort);
            }
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for f in 0..40 {
                let (p, bones) = swing_with(&pos, &weights, f, 0.03);
                wide.encode(&p, &bones, f % 20 == 0, &mut a)
                    .expect("encodes");
                scalar
                    .encode(&p, &bones, f % 20 == 0, &mut b)
                    .expect("encodes");
                assert_eq!(a, b, "{effort:?} frame {f}");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    /// A bounded, stable-Rust cousin of the `fuzz/` target: mutated and random frames
    /// never panic, and the decoder keeps working afterwards.
    #[test]
    fn mutated_frames_never_panic(flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8), cut in any::<usize>(), garbage in proptest::collection::vec(any::<u8>(), 0..200)) {
        let (s, rest, w) = setup(6, 8);
        let n = s.vertex_count();
        let mut enc = Encoder::new(Arc::clone(&s), 3);
        let (mut key, mut delta, mut out) = (Vec::new(), Vec::new(), vec![0f32; 3 * n]);
        let (p, b) = swing(&rest, &w, 0);
        enc.encode(&p, &b, false, &mut key).expect("encodes");
        let (p, b) = swing(&rest, &w, 1);
        enc.encode(&p, &b, false, &mut delta).expect("encodes");
        let mut dec = Decoder::new(Arc::clone(&s));
        dec.decode(&key, &mut out).expect("key");
        let mut bad = delta.clone();
        for (i, x) in &flips {
            let i = i % bad.len();
            bad[i] ^= x;
        }
        bad.truncate(FRAME_HEADER_LEN + cut % (bad.len() + 1));
        if dec.decode(&bad, &mut out).is_ok() {
            prop_assert!(out.iter().all(|x| x.is_finite()));
        }
        let _ = dec.decode(&garbage, &mut out);
        let _ = GarmentSetup::from_bytes(&garbage);
        dec.decode(&key, &mut out).expect("a keyframe still decodes");
        dec.decode(&delta, &mut out).expect("and the real delta after it");
    }
}
