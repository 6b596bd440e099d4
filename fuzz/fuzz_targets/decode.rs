//! Fuzzes what a viewer's bytes meet: the garment stream decoder (arbitrary bytes as a
//! setup, and as frames fed to a decoder holding the golden stream's first keyframe),
//! and the server messages around the frames (maps and compact frames,
//! `ServerMessage::from_msgpack`), a frame's garment then decoded too. Run (nightly +
//! cargo-fuzz): `scripts/fuzz.sh 300 decode`.
#![no_main]

use std::sync::{Arc, OnceLock};

use clothcast::codec::{Decoder, GarmentSetup};
use clothcast::protocol::ServerMessage;
use libfuzzer_sys::fuzz_target;

static SETUP: &[u8] = include_bytes!("../../tests/fixtures/codec/v5/setup.bin");
static STREAM: &[u8] = include_bytes!("../../tests/fixtures/codec/v5/stream.bin");

fn golden() -> &'static (Arc<GarmentSetup>, Vec<u8>) {
    static G: OnceLock<(Arc<GarmentSetup>, Vec<u8>)> = OnceLock::new();
    G.get_or_init(|| {
        let setup = Arc::new(GarmentSetup::from_bytes(SETUP).expect("golden setup"));
        let len = u32::from_le_bytes([STREAM[0], STREAM[1], STREAM[2], STREAM[3]]) as usize;
        (setup, STREAM[4..4 + len].to_vec())
    })
}

fuzz_target!(|data: &[u8]| {
    let _ = GarmentSetup::from_bytes(data);
    let (setup, key) = golden();
    let mut dec = Decoder::new(Arc::clone(setup));
    let mut out = vec![0f32; 3 * setup.vertex_count()];
    let _ = dec.decode(data, &mut out);
    dec.decode(key, &mut out).expect("the golden keyframe decodes after any garbage");
    if dec.decode(data, &mut out).is_ok() {
        assert!(out.iter().all(|x| x.is_finite()));
    }
    if let Ok(ServerMessage::Frame(f)) = ServerMessage::from_msgpack(data) {
        dec.decode(key, &mut out).expect("the golden keyframe decodes");
        for garment in std::iter::once(&f.garment).chain(f.layers.iter().map(|l| &l.garment)) {
            if dec.decode(garment, &mut out).is_ok() {
                assert!(out.iter().all(|x| x.is_finite()));
            }
        }
    }
});
