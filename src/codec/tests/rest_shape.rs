//! Keyframes predicted from the setup's rest shape (format version 5) and the
//! coarse-to-fine traversal built from it: smaller streams, bit-exact decoding, and bad
//! rest positions refused.

use super::*;

/// Bytes of `frames` frames of the rippling swing (a keyframe first) coded with `s`,
/// every one decoded bit-exactly.
fn swing_bytes(
    s: &Arc<GarmentSetup>,
    pos: &[[f32; 3]],
    weights: &[[f32; 4]],
    frames: usize,
) -> usize {
    let n = s.vertex_count();
    let mut enc = Encoder::new(Arc::clone(s), 1);
    let mut dec = Decoder::new(Arc::clone(s));
    let (mut out, mut rec, mut buf) = (vec![0f32; 3 * n], vec![0f32; 3 * n], Vec::new());
    let mut total = 0;
    for f in 0..frames {
        let (p, b) = swing_with(pos, weights, f, 0.02);
        enc.encode(&p, &b, false, &mut buf).expect("encodes");
        dec.decode(&buf, &mut out).expect("decodes");
        enc.reconstruction(&mut rec).expect("len");
        assert_eq!(out, rec, "frame {f}");
        total += buf.len();
    }
    total
}

/// A keyframe is predicted from the setup's rest shape posed by the frame's bones
/// (format version 5): a posed, rippling sleeve's keyframe codes in well under the
/// bytes of the same setup without the shape (predicted from zeros, the intra
/// prediction), and decodes bit-exactly; so does a resync keyframe mid-stream, which
/// a fresh decoder takes up and follows with the next delta.
#[test]
fn keyframes_are_predicted_from_the_rest_shape() {
    let (pos, tris, joints, weights) = sleeve(48, 40);
    let config = CodecConfig::default();
    let shaped = GarmentSetup::with_rest(&tris, &joints, &weights, 2, &config, &pos)
        .and_then(|s| s.with_skeleton(&SLEEVE_PARENTS, &SLEEVE_PIVOTS))
        .expect("setup");
    let bare = Arc::new(shaped.clone().without_rest());
    let shaped = Arc::new(shaped);
    assert!(bare.rest().is_none() && bare.id() != shaped.id());
    let n = shaped.vertex_count();
    let (p, b) = swing_with(&pos, &weights, 10, 0.02);
    let key_bytes = |s: &Arc<GarmentSetup>| {
        let mut enc = Encoder::new(Arc::clone(s), 1);
        let mut buf = Vec::new();
        enc.encode(&p, &b, true, &mut buf).expect("encodes");
        let mut out = vec![0f32; 3 * n];
        Decoder::new(Arc::clone(s))
            .decode(&buf, &mut out)
            .expect("decodes");
        let mut rec = vec![0f32; 3 * n];
        enc.reconstruction(&mut rec).expect("len");
        assert_eq!(out, rec);
        buf.len()
    };
    let (from_rest, from_zeros) = (key_bytes(&shaped), key_bytes(&bare));
    eprintln!("keyframe {from_zeros} bytes from zeros, {from_rest} from the rest shape");
    assert!(
        (from_rest as f64) < 0.8 * from_zeros as f64,
        "{from_rest} against {from_zeros}"
    );
    // a resync keyframe mid-stream, then a delta after it
    let mut enc = Encoder::new(Arc::clone(&shaped), 2);
    let mut dec = Decoder::new(Arc::clone(&shaped));
    let (mut out, mut rec, mut buf) = (vec![0f32; 3 * n], vec![0f32; 3 * n], Vec::new());
    for f in 0..12 {
        let (p, b) = swing_with(&pos, &weights, f, 0.02);
        enc.encode(&p, &b, false, &mut buf).expect("encodes");
        dec.decode(&buf, &mut out).expect("decodes");
    }
    let h = enc.keyframe(&mut buf).expect("a keyframe");
    assert_eq!(h.kind, FrameKind::Key);
    let mut late = Decoder::new(Arc::clone(&shaped));
    let mut late_out = vec![0f32; 3 * n];
    late.decode(&buf, &mut late_out)
        .expect("the resync keyframe decodes");
    assert_eq!(late_out, out, "the keyframe holds the last frame exactly");
    let (p, b) = swing_with(&pos, &weights, 12, 0.02);
    enc.encode(&p, &b, false, &mut buf).expect("encodes");
    dec.decode(&buf, &mut out).expect("decodes");
    late.decode(&buf, &mut late_out)
        .expect("the late decoder follows");
    enc.reconstruction(&mut rec).expect("len");
    assert_eq!(out, rec);
    assert_eq!(late_out, rec);
}

/// The coarse-to-fine traversal predicts a vertex between decoded neighbours on either
/// side of it: on a sleeve whose ripple the skinning does not explain it codes fewer
/// bytes than the breadth-first traversal, keyframe and deltas alike, and every vertex
/// but the first has references.
#[test]
fn the_coarse_to_fine_traversal_codes_rippling_cloth_smaller() {
    let (pos, tris, joints, weights) = sleeve(48, 40);
    let config = CodecConfig::default();
    let plain = Arc::new(GarmentSetup::new(&tris, &joints, &weights, 2, &config).expect("setup"));
    let shaped = Arc::new(
        GarmentSetup::with_rest(&tris, &joints, &weights, 2, &config, &pos).expect("setup"),
    );
    assert_ne!(plain.order, shaped.order);
    let unreferenced = shaped.order[1..]
        .iter()
        .filter(|&&v| shaped.predictor[v as usize][0] == format::NO_REF)
        .count();
    assert_eq!(unreferenced, 0);
    let (key_plain, key_shaped) = (
        swing_bytes(&plain, &pos, &weights, 1),
        swing_bytes(&shaped, &pos, &weights, 1),
    );
    let (all_plain, all_shaped) = (
        swing_bytes(&plain, &pos, &weights, 30),
        swing_bytes(&shaped, &pos, &weights, 30),
    );
    eprintln!(
        "keyframe {key_plain} → {key_shaped} bytes, 29 deltas {} → {} bytes",
        all_plain - key_plain,
        all_shaped - key_shaped
    );
    assert!(key_shaped < key_plain);
    assert!(all_shaped - key_shaped < all_plain - key_plain);
}

/// Rest positions that do not fit the garment are refused by name; a vertex of very
/// high degree (a fan of 600 triangles) keeps its candidates bounded, and 50 vertices
/// in no triangle are traversed too; the setup parses and codes.
#[test]
fn a_coarse_to_fine_setup_refuses_bad_rest_positions_and_handles_a_fan() {
    let (pos, tris, joints, weights) = sleeve(6, 8);
    let config = CodecConfig::default();
    assert!(matches!(
        GarmentSetup::with_rest(&tris, &joints, &weights, 2, &config, &pos[1..]),
        Err(CodecError::Mismatch {
            what: "rest positions per vertex",
            ..
        })
    ));
    let mut nan = pos.clone();
    nan[3][1] = f32::NAN;
    assert!(matches!(
        GarmentSetup::with_rest(&tris, &joints, &weights, 2, &config, &nan),
        Err(CodecError::Invalid {
            what: "rest position (not finite)"
        })
    ));
    let mut far = pos.clone();
    far[2][0] = 2100.0; // 2.1 km: beyond the 2^21 steps of a 1 mm lattice
    assert!(matches!(
        GarmentSetup::with_rest(&tris, &joints, &weights, 2, &config, &far),
        Err(CodecError::Invalid {
            what: "rest position (outside the lattice)"
        })
    ));
    // the rest shape round-trips; one off the lattice in the bytes is refused
    let shaped =
        GarmentSetup::with_rest(&tris, &joints, &weights, 2, &config, &pos).expect("setup");
    let rest = shaped.rest().expect("a rest shape");
    assert_eq!(rest[3], pos[3].map(|x| (x / config.step).round() as i32));
    let bytes = shaped.to_bytes();
    assert_eq!(GarmentSetup::from_bytes(&bytes).as_ref(), Ok(&shaped));
    let mut off = bytes.clone();
    let at = off.len() - 12 * pos.len();
    off[at..at + 4].copy_from_slice(&i32::MIN.to_le_bytes());
    assert_eq!(
        GarmentSetup::from_bytes(&off),
        Err(CodecError::Invalid {
            what: "rest position (outside the lattice)"
        })
    );
    let rim = 600;
    let mut fan = vec![[0.0f32; 3]];
    fan.extend((0..rim).map(|i| {
        let a = i as f32 / rim as f32 * std::f32::consts::TAU;
        [0.3 * a.cos(), 0.3 * a.sin(), 0.0]
    }));
    // and more loose vertices (in no triangle) than the coarsest level holds
    fan.extend((0..50).map(|i| [0.01 * i as f32, 0.5, 0.1]));
    let fan_tris: Vec<[u32; 3]> = (0..rim as u32)
        .map(|i| [0, 1 + i, 1 + (i + 1) % rim as u32])
        .collect();
    let n = fan.len();
    let s = Arc::new(
        GarmentSetup::with_rest(
            &fan_tris,
            &vec![[0, 1, 0, 0]; n],
            &vec![[1.0, 0.0, 0.0, 0.0]; n],
            2,
            &config,
            &fan,
        )
        .expect("setup"),
    );
    assert_eq!(GarmentSetup::from_bytes(&s.to_bytes()).expect("parses"), *s);
    let mut enc = Encoder::new(Arc::clone(&s), 1);
    let mut dec = Decoder::new(Arc::clone(&s));
    let p: Vec<f32> = fan.iter().flatten().copied().collect();
    let (mut out, mut buf) = (vec![0f32; 3 * n], Vec::new());
    enc.encode(&p, &[BoneTransform::IDENTITY; 2], false, &mut buf)
        .expect("encodes");
    dec.decode(&buf, &mut out).expect("decodes");
    assert!(max_error(&out, &p) <= enc.tolerance() * 1.0001);
}
