//! Fuzzes everything a publisher's bytes reach in the server, end to end: a sequence
//! of messages (WebSocket MessagePack or JSON, of every profile (canonical, Kinect,
//! MediaPipe landmarks), a Kinect bridge's body frame, a VMC
//! datagram, an Xsens MVN datagram) goes through the same functions the connection and VMC loops call, the
//! accepted poses drive an engine with two garments, the small fixture T-shirt and
//! pants (`wear` switches between them or layers them as an outfit), and every garment
//! frame the engine makes, each layer of an outfit, must decode, with its garment's
//! setup, to finite positions. Nothing may panic, and no
//! avatar's frame may fail (the engine would skip it and restart it on a keyframe, but
//! an accepted pose that cannot be streamed is a bug).
//!
//! Input: records `kind (1 byte), length (2 bytes LE), bytes`; kind % 5 picks
//! MessagePack, JSON, Kinect body frame, VMC or MVN. Run (nightly + cargo-fuzz):
//! `scripts/fuzz.sh 300 ingest`.
#![no_main]

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use clothcast::codec::Decoder;
use clothcast::engine::{
    Engine, EngineConfig, InputState, SensorState, apply_joints, apply_pose_message, vmc_pose,
};
use clothcast::mocap::{
    FilterConfig, Floor, MvnDatagram, MvnStream, PositionRetargeter, VmcPerformer,
    parse_body_frame, parse_mvn,
};
use clothcast::protocol::{CalibrateMessage, ClientMessage, ServerMessage, WearMessage};
use clothcast::skeleton::Skeleton;
use clothcast::sor::{Database, Synthesizer};
use libfuzzer_sys::fuzz_target;

static DB: &[u8] = include_bytes!("../../tests/fixtures/db/v1/small.ccdb");
static PANTS: &[u8] = include_bytes!("../../tests/fixtures/db/v1/small-pants.ccdb");

fn db() -> &'static Arc<Database> {
    static D: OnceLock<Arc<Database>> = OnceLock::new();
    D.get_or_init(|| Arc::new(Database::from_bytes(DB).expect("fixture database")))
}

/// The second garment: pants for the same body, so that `wear` switches avatars
/// between two garments or dresses them in both.
fn db_b() -> &'static Arc<Database> {
    static D: OnceLock<Arc<Database>> = OnceLock::new();
    D.get_or_init(|| Arc::new(Database::from_bytes(PANTS).expect("fixture pants")))
}

/// The synthesizers, one per garment (read-only, shared by every run as the server's
/// tick shares them).
fn synths() -> &'static [Synthesizer<'static>] {
    static S: OnceLock<Vec<Synthesizer<'static>>> = OnceLock::new();
    S.get_or_init(|| {
        [db(), db_b()]
            .iter()
            .map(|d| Engine::synthesizer(d, &EngineConfig::default()))
            .collect()
    })
}

/// Splits the input into (kind, message) records; a short last record is dropped.
fn records(mut data: &[u8]) -> Vec<(u8, &[u8])> {
    let mut out = Vec::new();
    while data.len() >= 3 && out.len() < 16 {
        let (kind, len) = (data[0], usize::from(u16::from_le_bytes([data[1], data[2]])));
        let body = &data[3..];
        let n = len.min(body.len());
        out.push((kind % 5, &body[..n]));
        data = &body[n..];
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let db = db();
    let config = EngineConfig::default();
    let mut engine =
        Engine::with_garments(vec![Arc::clone(db), Arc::clone(db_b())], config.clone())
            .expect("engine");
    let synths = synths();
    // codec setup by setup id (the first 8 hex digits of a frame's asset hash)
    let setups: Vec<_> = engine
        .garment_names()
        .iter()
        .filter_map(|n| engine.setup_of(n).cloned())
        .collect();
    let retargeter =
        PositionRetargeter::new(&Skeleton::from_rest_positions(db.body.skeleton));
    let filter = FilterConfig::default();
    let mut inputs: HashMap<String, InputState> = HashMap::new();
    // one connection: one sensor
    let mut sensor = SensorState::default();
    let mut vmc = (VmcPerformer::default(), InputState::default());
    // per MVN character, as the MVN loop keeps them
    let mut mvn: HashMap<u8, (MvnStream, SensorState, InputState)> = HashMap::new();
    let mut decoders: HashMap<(String, String), Decoder> = HashMap::new();
    let mut out = Vec::new();
    for (i, (kind, bytes)) in records(data).into_iter().enumerate() {
        let now = i as f64 / 30.0;
        let mut poses = Vec::new();
        match kind {
            0 | 1 => {
                let msg = if kind == 0 {
                    ClientMessage::from_msgpack(bytes)
                } else {
                    let Ok(text) = std::str::from_utf8(bytes) else { continue };
                    ClientMessage::from_json(text)
                };
                match msg {
                    Ok(ClientMessage::Pose(p)) => {
                        let state = inputs.entry(p.avatar.clone()).or_default();
                        let (mut tried, mut seen) = (state.clone(), sensor);
                        if let Ok(a) = apply_pose_message(
                            &p,
                            &mut seen,
                            &mut tried,
                            &retargeter,
                            Some(&filter),
                        ) {
                            *state = tried;
                            sensor = seen;
                            poses.push((p.avatar.clone(), a.pose, p.timestamp));
                        }
                    }
                    Ok(ClientMessage::Calibrate(CalibrateMessage { avatar })) => {
                        if let Some(s) = inputs.get_mut(&avatar) {
                            s.calibrate();
                        }
                        if avatar == "vmc" {
                            vmc.1.calibrate();
                        }
                    }
                    Ok(m @ ClientMessage::Wear(_)) => {
                        // one garment, or an outfit (layered) of the engine's two
                        if let (ClientMessage::Wear(WearMessage { avatar, .. }), Some(Ok(outfit))) = (&m, m.outfit()) {
                            let _ = engine.wear(avatar, &outfit);
                        }
                    }
                    _ => {}
                }
            }
            2 => {
                let Ok(v) = serde_json::from_slice::<serde_json::Value>(bytes) else { continue };
                let Ok(bodies) = parse_body_frame(&v, None) else { continue };
                for b in bodies {
                    let avatar = format!("kinect-{}", b.id);
                    let mut state = inputs.get(&avatar).cloned().unwrap_or_default();
                    if let Ok(pose) = apply_joints(&b.joints, b.floor, &mut sensor, &mut state, &retargeter, Some(&filter), now) {
                        inputs.insert(avatar.clone(), state);
                        poses.push((avatar, pose, now));
                    }
                }
            }
            4 => {
                let Ok(MvnDatagram::Sample(s)) = parse_mvn(bytes) else { continue };
                let c = mvn.entry(s.character).or_insert_with(|| {
                    (MvnStream::default(), SensorState::mvn(), InputState::default())
                });
                let mut tried = *c;
                if tried.0.accept(s.sample).is_ok()
                    && let Ok(pose) = apply_joints(&s.joints(), Some(Floor::LEVEL), &mut tried.1, &mut tried.2, &retargeter, Some(&filter), now)
                {
                    *c = tried;
                    poses.push((format!("mvn-{}", s.character), pose, now));
                }
            }
            _ => {
                let (p, state) = &mut vmc;
                if let Ok(n) = p.feed(bytes)
                    && n > 0
                {
                    state.pose = p.pose;
                    poses.push(("vmc".into(), vmc_pose(p, state, &retargeter), p.time.unwrap_or(now)));
                }
            }
        }
        for (avatar, pose, ts) in poses {
            let mut checked = pose;
            assert!(checked.validate().is_ok(), "an accepted pose is valid: {pose:?}");
            let _ = engine.set_pose(&avatar, pose, ts, now);
        }
        let tick = engine.tick(synths, now).expect("a tick never fails on accepted poses");
        assert!(tick.failed.is_empty(), "frames failed: {:?}", tick.failed);
        for f in &tick.frames {
            let msg = f.key.as_ref().or(f.delta.as_ref()).expect("a frame has a message");
            let Ok(ServerMessage::Frame(m)) = ServerMessage::from_msgpack(msg) else {
                panic!("the engine's frame message parses")
            };
            assert!(m.world.iter().all(|x| x.is_finite()), "world transform finite");
            let layers = std::iter::once((&m.asset, &m.garment))
                .chain(m.layers.iter().map(|l| (&l.asset, &l.garment)));
            for (asset, garment) in layers {
                let setup = setups
                    .iter()
                    .find(|s| asset.starts_with(&format!("{:08x}", s.id())))
                    .expect("the frame's asset is one of the engine's garments");
                let dec = decoders
                    .entry((f.avatar.clone(), asset.clone()))
                    .or_insert_with(|| Decoder::new(Arc::clone(setup)));
                if f.key.is_some() {
                    *dec = Decoder::new(Arc::clone(setup));
                }
                out.resize(3 * setup.vertex_count(), 0.0);
                dec.decode(garment, &mut out).expect("the engine's frame decodes");
                assert!(out.iter().all(|x| x.is_finite() && x.abs() < 10.0), "garment near the body");
            }
        }
    }
});
