//! The skeleton block of a setup (format version 3) and the bones predicted along it:
//! refusals, fewer bytes, the same decoded bones, and bones decoded off their range.

use super::*;

/// [`GarmentSetup::with_skeleton`] refuses what it cannot carry, by name.
#[test]
fn a_skeleton_is_refused_where_it_does_not_fit_the_bones() {
    let (_, tris, joints, weights) = sleeve(4, 6);
    let plain =
        GarmentSetup::new(&tris, &joints, &weights, 2, &CodecConfig::default()).expect("setup");
    let refused = |parents: &[Option<usize>], pivots: &[[f32; 3]]| {
        plain
            .clone()
            .with_skeleton(parents, pivots)
            .expect_err("refused")
    };
    assert!(matches!(
        refused(&[None], &SLEEVE_PIVOTS),
        CodecError::Mismatch {
            what: "bone parents",
            ..
        }
    ));
    assert!(matches!(
        refused(&SLEEVE_PARENTS, &[[0.0; 3]; 3]),
        CodecError::Mismatch {
            what: "bone pivots",
            ..
        }
    ));
    for parents in [[None, Some(1)], [Some(1), None], [None, Some(7)]] {
        assert_eq!(
            refused(&parents, &SLEEVE_PIVOTS),
            CodecError::Invalid {
                what: "bone parent (must be an earlier bone)"
            }
        );
    }
    for bad in [f32::NAN, f32::INFINITY, 1e6] {
        assert_eq!(
            refused(&SLEEVE_PARENTS, &[[0.0; 3], [0.0, bad, 0.0]]),
            CodecError::Invalid {
                what: "bone pivot (not finite or outside the lattice)"
            }
        );
    }
    // the skeleton is part of the setup's identity
    let with = plain
        .clone()
        .with_skeleton(&SLEEVE_PARENTS, &SLEEVE_PIVOTS)
        .expect("setup");
    assert_ne!(with.id(), plain.id());
    assert_eq!(
        GarmentSetup::from_bytes(&with.to_bytes()).expect("parses"),
        with
    );
}

/// Bones predicted from their parents (format version 3) cost fewer bits than bones
/// coded against their own reference alone, decode to the same quantised bones, and
/// those lie within the quantisation of the encoder's input.
#[test]
fn bones_are_predicted_from_the_skeleton() {
    let (hier, rest, w) = setup(6, 8);
    let (_, tris, joints, weights) = sleeve(6, 8);
    let flat = Arc::new(
        GarmentSetup::new(&tris, &joints, &weights, 2, &CodecConfig::default()).expect("setup"),
    );
    let n = hier.vertex_count();
    let mut bytes = [0usize; 2];
    let mut decoded = [Vec::new(), Vec::new()];
    for (k, s) in [&hier, &flat].into_iter().enumerate() {
        let mut enc = Encoder::new(Arc::clone(s), 1);
        let mut dec = Decoder::new(Arc::clone(s));
        let (mut out, mut buf) = (vec![0f32; 3 * n], Vec::new());
        let mut got = [BoneTransform::IDENTITY; 2];
        for f in 0..40 {
            let (p, b) = swing(&rest, &w, f);
            enc.encode(&p, &b, false, &mut buf).expect("encodes");
            bytes[k] += buf.len();
            dec.decode(&buf, &mut out).expect("decodes");
            dec.bones(&mut got).expect("two bones");
            for (g, want) in got.iter().zip(&b) {
                for c in 0..4 {
                    assert!((g.rotation[c] - want.rotation[c]).abs() < 2e-4, "frame {f}");
                }
                for c in 0..3 {
                    assert!((g.translation[c] - want.translation[c]).abs() <= 0.0005 + 1e-6);
                }
            }
            decoded[k].push(got);
        }
    }
    assert_eq!(
        decoded[0], decoded[1],
        "the prediction changes the bits, not the bones"
    );
    // the forearm's translation is its elbow's: predicted exactly, ~1 bit a value
    // where the reference alone leaves it ~6
    assert!(
        bytes[0] < bytes[1],
        "{} bytes with the skeleton, {} without",
        bytes[0],
        bytes[1]
    );
    assert!(matches!(
        Decoder::new(hier).bones(&mut [BoneTransform::IDENTITY; 3]),
        Err(CodecError::Mismatch { what: "bones", .. })
    ));
}

/// A well-formed keyframe whose bones decode off their range (a rotation component
/// beyond 1 through its skeleton prediction, a w beyond 1 or below 0 through its
/// difference from the w x, y, z imply, a translation off the lattice) is refused by
/// name, and the decoder keeps its stream.
#[test]
fn bones_decoded_off_their_range_are_refused() {
    use super::range::{RangeEncoder, zero_context};
    let (s, rest, w) = setup(4, 6);
    let n = s.vertex_count();
    let mut enc = Encoder::new(Arc::clone(&s), 3);
    let mut dec = Decoder::new(Arc::clone(&s));
    let (mut out, mut key) = (vec![0f32; 3 * n], Vec::new());
    let (p, b) = swing(&rest, &w, 0);
    enc.encode(&p, &b, false, &mut key).expect("encodes");
    dec.decode(&key, &mut out).expect("decodes");
    let good = out.clone();
    let one = 1i32 << format::ROT_BITS;
    let mut crafted = Vec::new();
    // the root's rotation is predicted as the identity in a keyframe, its translation
    // as the origin; the child's rotation as its parent's. Per bone: x, y, z, w's
    // difference from the w they imply, translation
    for (what, bones) in [
        ("root x beyond 1", [[one + 1, 0, 0, 0, 0, 0, 0], [0; 7]]),
        (
            "child x beyond 1",
            [[one, 0, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0]],
        ),
        ("root w beyond 1", [[0, 0, 0, 1, 0, 0, 0], [0; 7]]),
        ("root w negative", [[0, 0, 0, -one - 1, 0, 0, 0], [0; 7]]),
        (
            "root translation off the lattice",
            [[0, 0, 0, 0, format::LATTICE_LIMIT, 0, 0], [0; 7]],
        ),
    ] {
        let mut payload = Vec::new();
        let mut m = super::coder::Models::new();
        let mut rc = RangeEncoder::new(&mut payload);
        // the decoder's contexts: the previous value of the same stream
        let mut prev = [0i32; 3];
        for residuals in &bones {
            for (k, &e) in residuals.iter().enumerate() {
                let (model, slot) = match k {
                    0..3 => (&mut m.rotation, 0),
                    3 => (&mut m.w, 2),
                    _ => (&mut m.translation, 1),
                };
                rc.int(model, zero_context(prev[slot]), e);
                prev[slot] = e;
            }
        }
        rc.finish();
        let h = FrameHeader {
            kind: FrameKind::Key,
            setup_id: s.id(),
            stream_id: 3,
            frame: 9,
            reference: 9,
            vertices: n as u32,
            bones: 2,
            checksum: 0,
            payload_len: payload.len() as u32,
        };
        let mut frame = vec![0u8; FRAME_HEADER_LEN];
        let mut head = [0u8; FRAME_HEADER_LEN];
        h.write(&mut head);
        frame.copy_from_slice(&head);
        frame.extend_from_slice(&payload);
        assert_eq!(
            dec.decode(&frame, &mut out),
            Err(CodecError::Corrupt {
                what: "bone value out of range"
            }),
            "{what}"
        );
        assert_eq!(out, good, "{what}: the output was touched");
        assert_eq!(dec.last_frame(), Some(0), "{what}: the stream was lost");
        crafted.push((what.replace(' ', "-"), frame));
    }
    // the same frames frozen for the JavaScript decoder's test (keyframes: a fresh
    // decoder of the setup must refuse each); rewritten with CLOTHCAST_WRITE_GOLDEN=1
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/codec/v5/hostile-bones");
    let files = std::iter::once(("setup".to_string(), s.to_bytes())).chain(crafted);
    for (name, bytes) in files {
        let path = dir.join(format!("{name}.bin"));
        if std::env::var_os("CLOTHCAST_WRITE_GOLDEN").is_some() {
            std::fs::create_dir_all(&dir).expect("fixture folder");
            std::fs::write(&path, &bytes).expect("fixture written");
        }
        let frozen = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(
            frozen,
            bytes,
            "{} is not what this test crafts",
            path.display()
        );
    }
}
