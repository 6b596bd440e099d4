//! The frozen golden streams: decoded bit-exactly (positions and bones), and older
//! format versions refused by version.

use super::*;

/// The frozen v5 streams (SOR output of the default T-shirt on CMU 131_01, written by
/// `clothcast bench codec --golden`): decoded bit-exactly, as the JavaScript decoder
/// must. `v5/` holds a setup with the coarse-to-fine traversal of
/// [`GarmentSetup::with_rest`] (what the server sends), `v5/breadth-first/` one with the
/// traversal of [`GarmentSetup::new`]: the same format, and a decoder follows either.
/// Both carry the canonical skeleton, as the server's setups do.
#[test]
fn golden_v5_streams_decode_bit_exactly() {
    let v5 = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/codec/v5");
    check_golden(&v5);
    check_golden(&v5.join("breadth-first"));
}

/// A setup and a stream frozen at format version 4 (before version 5's probabilities
/// adapted faster while new) are refused by version, not decoded into garbage.
#[test]
fn version_4_setups_and_frames_are_refused_by_version() {
    let v4 = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/codec/v4");
    let read = |name: &str| std::fs::read(v4.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let refused = |e: CodecError| {
        assert!(
            matches!(
                e,
                CodecError::UnsupportedVersion {
                    found: 4,
                    supported: format::FORMAT_VERSION
                }
            ),
            "{e}"
        );
    };
    refused(GarmentSetup::from_bytes(&read("setup.bin")).expect_err("a v4 setup"));
    let stream = read("stream.bin");
    let len = u32::from_le_bytes(stream[..4].try_into().expect("4 bytes")) as usize;
    let first = &stream[4..4 + len];
    refused(FrameHeader::parse(first).expect_err("a v4 frame"));
    let (s, _, _) = setup(4, 4);
    let n = s.vertex_count();
    refused(
        Decoder::new(s)
            .decode(first, &mut vec![0f32; 3 * n])
            .expect_err("a v4 frame"),
    );
}

fn check_golden(dir: &std::path::Path) {
    let read = |name: &str| std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let setup =
        Arc::new(GarmentSetup::from_bytes(&read("setup.bin")).expect("golden setup parses"));
    let stream = read("stream.bin");
    let expected: Vec<serde_json::Value> =
        serde_json::from_slice(&read("frames.json")).expect("frames.json");
    let n = setup.vertex_count();
    let mut dec = Decoder::new(Arc::clone(&setup));
    let mut out = vec![0f32; 3 * n];
    let mut bones = vec![BoneTransform::IDENTITY; setup.bones as usize];
    let mut at = 0;
    let mut keys = 0;
    for (i, want) in expected.iter().enumerate() {
        let len = u32::from_le_bytes(stream[at..at + 4].try_into().expect("4 bytes")) as usize;
        let frame = &stream[at + 4..at + 4 + len];
        at += 4 + len;
        let h = dec
            .decode(frame, &mut out)
            .unwrap_or_else(|e| panic!("record {i}: {e}"));
        keys += usize::from(h.kind == FrameKind::Key);
        assert_eq!(
            want["kind"],
            if h.kind == FrameKind::Key {
                "key"
            } else {
                "delta"
            },
            "record {i}"
        );
        assert_eq!(want["frame"], h.frame, "record {i}");
        assert_eq!(
            want["hash"],
            format::word_hash(out.iter().map(|x| x.to_bits())),
            "record {i}: decoded floats differ"
        );
        dec.bones(&mut bones).expect("the setup's bone count");
        assert_eq!(
            want["bones"],
            format::word_hash(
                bones
                    .iter()
                    .flat_map(|b| b.rotation.into_iter().chain(b.translation))
                    .map(f32::to_bits)
            ),
            "record {i}: decoded bones differ"
        );
    }
    assert_eq!(at, stream.len(), "unread records");
    assert!(keys >= 2, "the golden stream holds a resync keyframe");
    let last: Vec<f32> = read("last.f32")
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert!(
        last.iter()
            .zip(&out)
            .all(|(a, b)| a.to_bits() == b.to_bits())
    );
}
