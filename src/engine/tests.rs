//! Engine tests on a virtual clock (no sleeps), with the frozen small database.

use std::sync::Arc;

use glam::Vec3;

use super::*;
use crate::codec::Decoder;
use crate::mocap::PositionRetargeter;
use crate::protocol::{JointSample, PoseMessage, ServerMessage};
use crate::skeleton::{canonicalize, quat_exp};
use glam::Quat;

fn db() -> Arc<Database> {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/db/v1/small.ccdb");
    Arc::new(Database::read(&path).expect("golden database"))
}

/// A second garment: the small database's shirt under another name, its triangles
/// wound the other way (a different codec setup, so a different asset).
fn second_garment(db: &Database) -> Arc<Database> {
    let mut other = db.clone();
    other.garment.name = "shirt-b".into();
    for t in &mut other.garment.triangles {
        t.swap(1, 2);
    }
    Arc::new(other)
}

/// An engine with the default settings on `db` (its synthesizer is
/// [`default_synth`]).
fn engine_on(db: &Arc<Database>) -> Engine {
    Engine::new(Arc::clone(db), EngineConfig::default()).expect("engine")
}

/// The synthesizer an engine with the default settings uses on `db`.
fn default_synth(db: &Database) -> Synthesizer<'_> {
    Engine::synthesizer(db, &EngineConfig::default())
}

fn arm(angle: f32) -> Pose {
    let mut p = Pose::rest();
    p.set_rotation(
        JointId::LEFT_SHOULDER,
        quat_exp(Vec3::new(0.0, 0.0, -angle)),
    );
    p
}

fn garment_of(frame: &Bytes) -> (u32, Vec<u8>) {
    match ServerMessage::from_msgpack(frame).expect("frame message") {
        ServerMessage::Frame(f) => (f.seq, f.garment.into_vec()),
        other => panic!("expected a frame, got {other:?}"),
    }
}

/// Largest distance, metres, between decoded garment floats and synthesis run
/// directly (undamped) on `pose`.
fn off_undamped(synth: &Synthesizer<'_>, db: &Database, pose: &Pose, decoded: &[f32]) -> f32 {
    let mut direct = vec![Vec3::ZERO; db.vertex_count()];
    synth.synthesize(
        &mut AvatarState::new(),
        &mut crate::sor::Scratch::default(),
        &canonicalize(pose, &db.body.to_body().skeleton).0,
        1.0 / 30.0,
        &mut direct,
    );
    decoded
        .chunks_exact(3)
        .zip(&direct)
        .map(|(a, b)| (Vec3::new(a[0], a[1], a[2]) - *b).length())
        .fold(0.0f32, f32::max)
}

#[test]
fn latest_pose_wins_and_frames_match_direct_synthesis() {
    let db = db();
    let (mut engine, synth) = (engine_on(&db), default_synth(&db));
    let mut decoder = Decoder::new(Arc::clone(engine.setup()));
    let n = db.vertex_count();
    let mut out = vec![0f32; 3 * n];
    // two poses arrive before the tick: only the second counts
    engine.set_pose("a", arm(0.3), 0.0, 0.0).expect("pose");
    engine.set_pose("a", arm(0.9), 0.01, 0.01).expect("pose");
    let mut t = 0.0;
    for i in 0..12 {
        t += 1.0 / 30.0;
        engine.set_pose("a", arm(0.9), t, t).expect("pose");
        let tick = engine.tick(std::slice::from_ref(&synth), t).expect("tick");
        assert_eq!(tick.frames.len(), 1);
        let f = &tick.frames[0];
        let bytes = if i == 0 {
            f.key.as_ref().expect("first frame is a keyframe")
        } else {
            f.delta.as_ref().expect("delta")
        };
        decoder
            .decode(&garment_of(bytes).1, &mut out)
            .expect("decodes");
    }
    // damping has converged: the stream equals undamped synthesis of the last pose
    let worst = off_undamped(&synth, &db, &arm(0.9), &out);
    assert!(
        worst < 0.0011,
        "stream differs from direct synthesis by {worst} m"
    );
}

#[test]
fn keyframes_on_request_and_idle_then_removal() {
    let db = db();
    let cfg = EngineConfig {
        idle_timeout: 1.0,
        remove_after: 3.0,
        ..EngineConfig::default()
    };
    let mut engine = Engine::new(Arc::clone(&db), cfg.clone()).expect("engine");
    let synth = Engine::synthesizer(&db, &cfg);
    engine.set_pose("a", arm(0.5), 0.0, 0.0).expect("pose");
    engine.set_pose("b", arm(0.2), 0.0, 0.0).expect("pose");
    let first = engine
        .tick(std::slice::from_ref(&synth), 0.1)
        .expect("tick");
    assert!(
        first
            .frames
            .iter()
            .all(|f| f.key.is_some() && f.delta.is_none())
    );
    let second = engine
        .tick(std::slice::from_ref(&synth), 0.2)
        .expect("tick");
    assert!(
        second
            .frames
            .iter()
            .all(|f| f.key.is_none() && f.delta.is_some())
    );
    engine.request_keyframe("b");
    let third = engine
        .tick(std::slice::from_ref(&synth), 0.3)
        .expect("tick");
    let b = third.frames.iter().find(|f| f.avatar == "b").expect("b");
    let (seq_key, _) = garment_of(b.key.as_ref().expect("requested keyframe"));
    let (seq_delta, _) = garment_of(b.delta.as_ref().expect("delta too"));
    assert_eq!(
        seq_key, seq_delta,
        "keyframe and delta describe the same frame"
    );
    // "a" keeps publishing, "b" goes silent: idle after 1 s, removed after 3 s
    engine.set_pose("a", arm(0.5), 1.5, 1.5).expect("pose");
    let idle = engine
        .tick(std::slice::from_ref(&synth), 1.6)
        .expect("tick");
    assert_eq!(
        idle.frames
            .iter()
            .map(|f| f.avatar.as_str())
            .collect::<Vec<_>>(),
        ["a"]
    );
    assert_eq!(engine.avatar_count(), 2);
    let gone = engine
        .tick(std::slice::from_ref(&synth), 3.5)
        .expect("tick");
    assert_eq!(gone.gone, ["b"]);
    assert_eq!(engine.avatar_count(), 1);
}

/// Viewers that ask for a keyframe at every tick (resubscribing, always behind) get one
/// at most every `keyframe_interval`, each within the interval of asking; with an
/// interval of 0 every request is served at the next tick.
#[test]
fn keyframes_asked_for_at_every_tick_are_made_at_most_once_per_interval() {
    let db = db();
    let keyed_times = |interval: f64| {
        let cfg = EngineConfig {
            keyframe_interval: interval,
            ..EngineConfig::default()
        };
        let mut engine = Engine::new(Arc::clone(&db), cfg.clone()).expect("engine");
        let synth = Engine::synthesizer(&db, &cfg);
        engine.set_pose("a", arm(0.5), 0.0, 0.0).expect("pose");
        let first = engine
            .tick(std::slice::from_ref(&synth), 0.0)
            .expect("tick");
        assert!(
            first.frames[0].key.is_some(),
            "a stream starts with a keyframe"
        );
        let mut keyed = vec![0.0];
        for i in 1..=60 {
            let t = f64::from(i) / 30.0;
            engine
                .set_pose("a", arm(0.5 + 0.005 * i as f32), t, t)
                .expect("pose");
            engine.request_keyframe("a");
            let out = engine.tick(std::slice::from_ref(&synth), t).expect("tick");
            let f = &out.frames[0];
            assert!(f.delta.is_some(), "in-step viewers get the delta at {t}");
            if f.key.is_some() {
                keyed.push(t);
            }
            same_frame_in_every_form(f);
        }
        keyed
    };
    let throttled = keyed_times(0.1);
    let gaps: Vec<f64> = throttled.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps.iter()
            .all(|&g| g > 0.1 - 1e-9 && g < 0.1 + 1.0 / 30.0 + 1e-9),
        "keyframes at {throttled:?}"
    );
    assert!(
        (14..=21).contains(&throttled.len()),
        "keyframes at {throttled:?}"
    );
    assert_eq!(keyed_times(0.0).len(), 61, "no interval: one per request");
}

/// A tick that panics after removing avatars (here: in the `watched` callback) does
/// not lose the removals: the next tick reports them, once; and an avatar back
/// before its removal was reported is not reported gone.
#[test]
fn removals_survive_a_panicking_tick() {
    let db = db();
    let cfg = EngineConfig {
        remove_after: 1.0,
        ..EngineConfig::default()
    };
    let mut engine = Engine::new(Arc::clone(&db), cfg.clone()).expect("engine");
    let synths = [Engine::synthesizer(&db, &cfg)];
    for id in ["a", "b", "c"] {
        engine.set_pose(id, arm(0.5), 0.0, 0.0).expect("pose");
    }
    engine.set_pose("a", arm(0.5), 1.5, 1.5).expect("pose");
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        engine.tick_watched(&synths, 2.0, &|_| panic!("a bug after the removals"))
    }));
    assert!(panicked.is_err());
    assert_eq!(engine.avatar_count(), 1, "b and c were removed");
    // "c" comes back before any output reported it gone
    engine.set_pose("c", arm(0.5), 2.0, 2.0).expect("pose");
    let out = engine.tick(&synths, 2.1).expect("tick");
    assert_eq!(out.gone, ["b"]);
    let mut streaming: Vec<_> = out.frames.iter().map(|f| f.avatar.as_str()).collect();
    streaming.sort_unstable();
    assert_eq!(streaming, ["a", "c"]);
    assert!(engine.tick(&synths, 2.2).expect("tick").gone.is_empty());
}

#[test]
fn bad_poses_are_refused_by_name() {
    let msg = |profile: &str, name: &str, q: [f32; 4]| PoseMessage {
        avatar: "x".into(),
        profile: profile.into(),
        timestamp: 0.0,
        root: None,
        floor: None,
        joints: vec![JointSample {
            name: name.into(),
            rotation: Some(q),
            position: None,
            confidence: None,
        }],
    };
    let rest = Pose::rest();
    assert!(
        pose_from_message(&msg("canonical", "left_elbow", [0.0, 0.0, 0.0, 1.0]), &rest).is_ok()
    );
    assert!(matches!(
        pose_from_message(&msg("kinect_v9", "left_elbow", [0.0, 0.0, 0.0, 1.0]), &rest),
        Err(EngineError::UnknownProfile(_))
    ));
    assert!(matches!(
        pose_from_message(&msg("canonical", "tail", [0.0, 0.0, 0.0, 1.0]), &rest),
        Err(EngineError::UnknownJoint(_))
    ));
    // an unusable rotation holds that joint (and says so); the others still apply
    let mut before = rest;
    before.set_rotation(JointId::LEFT_ELBOW, quat_exp(Vec3::new(0.0, 0.0, 0.4)));
    for bad in [
        [f32::NAN, 0.0, 0.0, 1.0],
        [0.0, 0.0, 0.0, 3.0],
        [f32::INFINITY, 0.0, 0.0, 0.0],
    ] {
        let mut m = msg("canonical", "left_elbow", bad);
        m.joints.push(JointSample {
            name: "right_elbow".into(),
            rotation: Some(quat_exp(Vec3::new(0.0, 0.0, -0.5)).to_array()),
            position: None,
            confidence: None,
        });
        m.root = Some([f32::NAN, 1.0, 0.0]);
        let (pose, held) = pose_from_message(&m, &before).expect("partly usable message");
        assert_eq!(held, ["root", "left_elbow"]);
        assert_eq!(
            pose.rotations[JointId::LEFT_ELBOW.index()],
            before.rotations[JointId::LEFT_ELBOW.index()]
        );
        assert_eq!(pose.translation, before.translation);
        assert!(
            pose.rotations[JointId::RIGHT_ELBOW.index()]
                .angle_between(quat_exp(Vec3::new(0.0, 0.0, -0.5)))
                < 1e-5
        );
    }
    let mut late = msg("canonical", "left_elbow", [0.0, 0.0, 0.0, 1.0]);
    late.timestamp = f64::NAN;
    assert!(matches!(
        pose_from_message(&late, &rest),
        Err(EngineError::BadValue(_))
    ));
    for bad in [
        "x".repeat(65),
        "a\nb".into(),
        "\u{1b}[2J".into(),
        String::new(),
    ] {
        let mut m = msg("canonical", "left_elbow", [0.0, 0.0, 0.0, 1.0]);
        m.avatar = bad;
        assert!(matches!(
            pose_from_message(&m, &rest),
            Err(EngineError::BadAvatarId)
        ));
    }
    // the engine checks too, whatever the input path
    let db = db();
    let mut engine = engine_on(&db);
    assert!(matches!(
        engine.set_pose("\u{1b}[2J", Pose::rest(), 0.0, 0.0),
        Err(EngineError::BadAvatarId)
    ));
    assert_eq!(engine.avatar_count(), 0);
}

#[test]
fn damping_blends_example_weights_smoothly_across_a_pose_jump() {
    let db = db();
    let (mut engine, synth) = (engine_on(&db), default_synth(&db));
    let mut decoder = Decoder::new(Arc::clone(engine.setup()));
    let n = db.vertex_count();
    let mut out = vec![0f32; 3 * n];
    let mut t = 0.0;
    let mut run =
        |engine: &mut Engine, pose: Pose, ticks: usize, out: &mut Vec<f32>| -> Vec<Vec<f32>> {
            let mut frames = Vec::new();
            for _ in 0..ticks {
                t += 1.0 / 30.0;
                engine.set_pose("a", pose, t, t).expect("pose");
                let tick = engine.tick(std::slice::from_ref(&synth), t).expect("tick");
                let f = &tick.frames[0];
                let bytes = f.delta.as_ref().or(f.key.as_ref()).expect("frame");
                decoder.decode(&garment_of(bytes).1, out).expect("decodes");
                frames.push(out.clone());
            }
            frames
        };
    run(&mut engine, arm(0.2), 15, &mut out);
    let after = run(&mut engine, arm(1.0), 15, &mut out);
    // damping acts on the example weights (SOR §5, t_mix): right after the jump the
    // garment still blends the old pose's examples, then converges to undamped synthesis
    let mut direct = vec![Vec3::ZERO; n];
    synth.synthesize(
        &mut AvatarState::new(),
        &mut crate::sor::Scratch::default(),
        &canonicalize(&arm(1.0), &db.body.to_body().skeleton).0,
        1.0 / 30.0,
        &mut direct,
    );
    let off = |a: &[f32]| {
        a.chunks_exact(3)
            .zip(&direct)
            .map(|(p, d)| (Vec3::new(p[0], p[1], p[2]) - *d).length())
            .fold(0.0f32, f32::max)
    };
    let (first, settled) = (off(&after[0]), off(&after[14]));
    assert!(
        first > 0.002,
        "no damping: the first frame after the jump is already undamped ({first} m)"
    );
    assert!(
        settled < 0.0011,
        "not converged after 15 ticks ({settled} m)"
    );
    let steps: Vec<f32> = after.iter().map(|f| off(f)).collect();
    assert!(
        steps.windows(2).all(|w| w[1] <= w[0] + 0.0011),
        "the approach is not monotone: {steps:?}"
    );
}

#[test]
fn calibration_maps_the_performers_rest_pose_and_facing_to_the_t_pose() {
    let retargeter = PositionRetargeter::new(&db().body.to_body().skeleton);
    let mut state = InputState::default();
    let facing = Quat::from_rotation_y(0.5);
    let msg = |shoulder: f32, elbow: f32, root: Vec3| PoseMessage {
        avatar: "suit".into(),
        profile: "canonical".into(),
        timestamp: 0.0,
        root: Some(root.to_array()),
        floor: None,
        joints: vec![
            JointSample {
                name: "pelvis".into(),
                rotation: Some(facing.to_array()),
                position: None,
                confidence: None,
            },
            JointSample {
                name: "left_shoulder".into(),
                rotation: Some(Quat::from_rotation_z(shoulder).to_array()),
                position: None,
                confidence: None,
            },
            JointSample {
                name: "left_elbow".into(),
                rotation: Some(Quat::from_rotation_y(elbow).to_array()),
                position: None,
                confidence: None,
            },
        ],
    };
    // a canonical-profile pose message applied to the suit's input state
    let apply = |state: &mut InputState, m: &PoseMessage| {
        apply_pose_message(m, &mut SensorState::default(), state, &retargeter, None)
            .expect("pose")
            .pose
    };
    let start = Vec3::new(0.2, 0.0, 0.1);
    // an uncalibrated suit reports a 0.3 rad shoulder offset and a 0.5 rad facing
    let raw = apply(&mut state, &msg(0.3, 0.0, start));
    assert!(
        raw.rotation(JointId::LEFT_SHOULDER)
            .angle_between(Quat::IDENTITY)
            > 0.29
    );
    state.calibrate();
    let rest = apply(&mut state, &msg(0.3, 0.0, start));
    for j in JointId::all() {
        assert!(
            rest.rotation(j).angle_between(Quat::IDENTITY) < 1e-5,
            "{} not at rest",
            j.name()
        );
    }
    assert!(rest.translation.length() < 1e-6);
    // bending the elbow and stepping 1 m forward (in the performer's facing)
    let moved = apply(&mut state, &msg(0.3, 0.7, start + facing * Vec3::Z));
    assert!(
        (moved
            .rotation(JointId::LEFT_ELBOW)
            .angle_between(Quat::IDENTITY)
            - 0.7)
            .abs()
            < 1e-4
    );
    assert!(
        moved
            .rotation(JointId::LEFT_SHOULDER)
            .angle_between(Quat::IDENTITY)
            < 1e-5
    );
    assert!(
        (moved.translation - Vec3::Z).length() < 1e-5,
        "{:?}",
        moved.translation
    );
}

#[test]
fn an_engine_with_a_setting_it_cannot_honour_is_refused() {
    let cfg = EngineConfig {
        remove_after: f64::NAN,
        ..EngineConfig::default()
    };
    assert!(matches!(
        Engine::new(db(), cfg),
        Err(EngineError::BadSetting {
            name: "remove_after",
            ..
        })
    ));
}

#[test]
fn avatars_wear_one_of_several_garments_and_switch() {
    let db = db();
    let other = second_garment(&db);
    let cfg = EngineConfig::default();
    assert!(matches!(
        Engine::with_garments(vec![Arc::clone(&db), Arc::clone(&db)], cfg.clone()),
        Err(EngineError::DuplicateGarment(_))
    ));
    let mut engine = Engine::with_garments(vec![Arc::clone(&db), Arc::clone(&other)], cfg.clone())
        .expect("engine");
    assert_eq!(engine.assets().len(), 2);
    let dbs = engine.databases();
    let synths: Vec<Synthesizer<'_>> = dbs.iter().map(|d| Engine::synthesizer(d, &cfg)).collect();
    let asset_of = |f: &Bytes| match ServerMessage::from_msgpack(f).expect("frame") {
        ServerMessage::Frame(f) => f.asset,
        other => panic!("expected a frame, got {other:?}"),
    };
    let hashes: Vec<String> = engine
        .assets()
        .iter()
        .map(|a| match ServerMessage::from_msgpack(a).expect("asset") {
            ServerMessage::Asset(a) => a.hash,
            other => panic!("expected an asset, got {other:?}"),
        })
        .collect();
    assert_ne!(hashes[0], hashes[1]);
    engine.set_pose("a", arm(0.5), 0.0, 0.0).expect("pose");
    engine.set_pose("b", arm(0.5), 0.0, 0.0).expect("pose");
    assert!(matches!(
        engine.wear("b", &["ballgown"]),
        Err(EngineError::UnknownGarment(..))
    ));
    engine.wear("b", &["shirt-b"]).expect("wear");
    let t1 = engine.tick(&synths, 0.1).expect("tick");
    let t2 = engine.tick(&synths, 0.2).expect("tick");
    for (avatar, hash) in [("a", &hashes[0]), ("b", &hashes[1])] {
        let f = t2
            .frames
            .iter()
            .find(|f| f.avatar == avatar)
            .expect("frame");
        assert_eq!(&asset_of(f.delta.as_ref().expect("delta")), hash);
    }
    // both garments were synthesised for the same pose: same positions, decoded with
    // each garment's own setup
    let decode = |setup: &Arc<crate::codec::GarmentSetup>, f: &AvatarFrame| {
        let mut d = Decoder::new(Arc::clone(setup));
        let mut out = vec![0.0f32; 3 * setup.vertex_count()];
        let (_, bytes) = garment_of(f.key.as_ref().expect("first frame is a keyframe"));
        d.decode(&bytes, &mut out).expect("decodes");
        out
    };
    let fa = t1.frames.iter().find(|f| f.avatar == "a").expect("a");
    let fb = t1.frames.iter().find(|f| f.avatar == "b").expect("b");
    let (ga, gb) = (
        decode(engine.setup(), fa),
        decode(engine.setup_of("shirt-b").expect("setup"), fb),
    );
    let worst = ga
        .iter()
        .zip(&gb)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f32, f32::max);
    assert!(worst < 2e-3, "same pose, same shirt: {worst} m apart");
    // switching back restarts the stream with a keyframe of the first garment
    engine.wear("b", &[&db.garment.name]).expect("wear");
    engine.set_pose("b", arm(0.5), 0.25, 0.25).expect("pose");
    let t3 = engine.tick(&synths, 0.3).expect("tick");
    let fb = t3.frames.iter().find(|f| f.avatar == "b").expect("b");
    assert!(fb.delta.is_none(), "a new garment starts with a keyframe");
    assert_eq!(&asset_of(fb.key.as_ref().expect("key")), &hashes[0]);
}

#[test]
fn unwatched_avatars_cost_nothing_and_restart_with_a_keyframe() {
    let db = db();
    let (mut engine, synth) = (engine_on(&db), default_synth(&db));
    let synths = std::slice::from_ref(&synth);
    let only_a = |id: &str| id == "a";
    engine.set_pose("a", arm(0.2), 0.0, 0.0).expect("pose");
    engine.set_pose("b", arm(0.2), 0.0, 0.0).expect("pose");
    let mut t = 0.0;
    let tick = |engine: &mut Engine, watched: &dyn Fn(&str) -> bool, t: f64| {
        engine.tick_watched(synths, t, watched).expect("tick")
    };
    // both streaming
    t += 1.0 / 30.0;
    let out = tick(&mut engine, &|_| true, t);
    assert_eq!((out.frames.len(), out.unwatched), (2, 0));
    // nobody watches "b": no frame for it, while "a" streams deltas
    for i in 0..5 {
        t += 1.0 / 30.0;
        let angle = 0.2 + 0.1 * i as f32;
        engine.set_pose("a", arm(angle), t, t).expect("pose");
        engine.set_pose("b", arm(angle), t, t).expect("pose");
        let out = tick(&mut engine, &only_a, t);
        assert_eq!(out.unwatched, 1);
        assert_eq!(out.frames.len(), 1);
        assert_eq!(out.frames[0].avatar, "a");
        assert!(out.frames[0].delta.is_some() && out.frames[0].key.is_none());
    }
    // watched again: "b" restarts with a keyframe alone (no delta against the frame
    // from before the pause), synthesised undamped from its latest pose
    t += 1.0 / 30.0;
    let out = tick(&mut engine, &|_| true, t);
    assert_eq!(out.unwatched, 0);
    let b = out
        .frames
        .iter()
        .find(|f| f.avatar == "b")
        .expect("b streams again");
    assert!(
        b.delta.is_none(),
        "a restarted stream starts with a keyframe alone"
    );
    let (_, key) = garment_of(b.key.as_ref().expect("keyframe"));
    let mut decoder = Decoder::new(Arc::clone(engine.setup()));
    let mut got = vec![0f32; 3 * db.vertex_count()];
    decoder
        .decode(&key, &mut got)
        .expect("the keyframe decodes alone");
    let worst = off_undamped(&synth, &db, &arm(0.6), &got);
    assert!(
        worst < 0.0011,
        "restarted frame differs from undamped synthesis of the latest pose by {worst} m"
    );
    // and then deltas again
    t += 1.0 / 30.0;
    let out = tick(&mut engine, &|_| true, t);
    let b = out.frames.iter().find(|f| f.avatar == "b").expect("b");
    assert!(b.delta.is_some() && b.key.is_none());
}

#[test]
fn a_pose_held_still_is_not_synthesised_again_once_damping_settles() {
    let db = db();
    let (mut engine, synth) = (engine_on(&db), default_synth(&db));
    let synths = std::slice::from_ref(&synth);
    let mut decoder = Decoder::new(Arc::clone(engine.setup()));
    let mut out = vec![0f32; 3 * db.vertex_count()];
    let mut decode = |f: &AvatarFrame| {
        let bytes = f.delta.as_ref().or(f.key.as_ref()).expect("a frame");
        decoder
            .decode(&garment_of(bytes).1, &mut out)
            .expect("decodes");
        out.clone()
    };
    // a moving arm, then held at 0.9 rad (the publisher keeps sending the same pose)
    let mut t = 0.0;
    let mut first_held = None;
    for i in 0..60 {
        t += 1.0 / 30.0;
        let angle = if i < 5 { 0.2 * i as f32 } else { 0.9 };
        engine.set_pose("a", arm(angle), t, t).expect("pose");
        let tick = engine.tick(synths, t).expect("tick");
        assert_eq!(tick.frames.len(), 1, "every tick still streams a frame");
        decode(&tick.frames[0]);
        if tick.held == 1 && first_held.is_none() {
            first_held = Some(i);
        }
        if let Some(h) = first_held {
            assert_eq!(tick.held, 1, "held from tick {h} on, not at {i}");
        }
    }
    let h = first_held.expect("the still pose is held once damping settles");
    assert!(h > 5, "held at tick {h}, before the damping could settle");
    let held = decode(&engine.tick(synths, t + 1.0 / 30.0).expect("tick").frames[0]);
    let worst = off_undamped(&synth, &db, &arm(0.9), &held);
    assert!(worst < 0.0011, "held garment is {worst} m off the pose's");
    // the pose moves: synthesised again, and the garment follows
    engine
        .set_pose("a", arm(0.3), t + 0.1, t + 0.1)
        .expect("pose");
    let tick = engine.tick(synths, t + 0.1).expect("tick");
    assert_eq!(tick.held, 0);
    let moved = decode(&tick.frames[0]);
    let shift = moved
        .iter()
        .zip(&held)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(
        shift > 0.01,
        "garment did not follow the new pose ({shift} m)"
    );
}

#[test]
fn one_avatars_failure_costs_only_its_own_frame() {
    let db = db();
    let (mut engine, synth) = (engine_on(&db), default_synth(&db));
    let synths = std::slice::from_ref(&synth);
    // the gate: a pose with a zero (not unit) rotation is refused, nothing changes
    let mut zero = arm(0.3);
    zero.rotations[JointId::LEFT_ELBOW.index()] = Quat::from_xyzw(0.0, 0.0, 0.0, 0.0);
    assert!(matches!(
        engine.set_pose("a", zero, 0.0, 0.0),
        Err(EngineError::BadValue(_))
    ));
    assert!(!engine.has_avatar("a"));
    engine.set_pose("a", arm(0.2), 0.0, 0.0).expect("pose");
    engine.set_pose("b", arm(0.2), 0.0, 0.0).expect("pose");
    let mut t = 1.0 / 30.0;
    let out = engine.tick(synths, t).expect("tick");
    assert_eq!((out.frames.len(), out.failed.len()), (2, 0));
    // a NaN that got past every gate (a bug): "a" gets no frame, "b" still does
    engine.avatars.get_mut("a").expect("a").pose.rotations[JointId::LEFT_ELBOW.index()] =
        zero.rotations[JointId::LEFT_ELBOW.index()];
    t += 1.0 / 30.0;
    engine.set_pose("b", arm(0.25), t, t).expect("pose");
    let out = engine
        .tick(synths, t)
        .expect("one avatar's failure is not the tick's");
    assert_eq!(out.frames.len(), 1);
    assert_eq!(out.frames[0].avatar, "b");
    assert!(out.frames[0].delta.is_some());
    assert_eq!(out.failed.len(), 1);
    assert_eq!(out.failed[0].0, "a");
    assert!(
        out.failed[0].1.contains("not finite"),
        "{}",
        out.failed[0].1
    );
    // a good pose again: "a" restarts on a keyframe alone, which decodes by itself
    t += 1.0 / 30.0;
    engine.set_pose("a", arm(0.4), t, t).expect("pose");
    let out = engine.tick(synths, t).expect("tick");
    let (_, key) = garment_of(restarted_on_keyframe(&out, "a"));
    let mut got = vec![0f32; 3 * db.vertex_count()];
    Decoder::new(Arc::clone(engine.setup()))
        .decode(&key, &mut got)
        .expect("the keyframe decodes alone");
    let worst = off_undamped(&synth, &db, &arm(0.4), &got);
    assert!(worst < 0.0011, "restarted frame off by {worst} m");
    // a panic in one avatar's synthesis (a bug; here its output buffer made the wrong
    // size) likewise costs that avatar its frame, not the tick
    let n = db.vertex_count();
    engine.avatars.get_mut("b").expect("b").layers[0]
        .out
        .truncate(n - 1);
    t += 1.0 / 30.0;
    engine.set_pose("b", arm(0.5), t, t).expect("pose");
    let out = engine.tick(synths, t).expect("tick");
    assert_eq!(out.frames.len(), 1);
    assert_eq!(out.frames[0].avatar, "a");
    assert_eq!(out.failed.len(), 1);
    assert!(
        out.failed[0].1.contains("synthesis panicked"),
        "{}",
        out.failed[0].1
    );
    engine.avatars.get_mut("b").expect("b").layers[0]
        .out
        .resize(n, Vec3::ZERO);
    t += 1.0 / 30.0;
    let out = engine.tick(synths, t).expect("tick");
    restarted_on_keyframe(&out, "b");
}

/// The keyframe `avatar` restarts on in `out`, a tick without failures, where it
/// streams a keyframe alone.
fn restarted_on_keyframe<'a>(out: &'a TickOutput, avatar: &str) -> &'a Bytes {
    assert!(out.failed.is_empty(), "{:?}", out.failed);
    let f = out
        .frames
        .iter()
        .find(|f| f.avatar == avatar)
        .expect("streams again");
    assert!(f.delta.is_none(), "{avatar} restarts on a keyframe alone");
    f.key.as_ref().expect("keyframe")
}

mod arms;
mod idle;
mod outfit;
mod schedule;

/// Every form of an avatar's frame (map or compact, with or without the body pose) is
/// there exactly when the map with the pose is, and reads as the same frame, but for
/// the pose where it is left out.
fn same_frame_in_every_form(f: &AvatarFrame) {
    let read = |b: &Bytes| match ServerMessage::from_msgpack(b) {
        Ok(ServerMessage::Frame(m)) => m,
        other => panic!("not a frame: {other:?}"),
    };
    for key in [false, true] {
        let pick =
            |(d, k): (&Option<Bytes>, &Option<Bytes>)| if key { k.clone() } else { d.clone() };
        let full = pick(f.messages(true, false)).map(|b| read(&b));
        for (pose, compact) in [(false, false), (true, true), (false, true)] {
            let other = pick(f.messages(pose, compact)).map(|b| read(&b));
            assert_eq!(other.is_some(), full.is_some(), "form {pose} {compact}");
            if let (Some(mut want), Some(got)) = (full.clone(), other) {
                if !pose {
                    want.pose = Default::default();
                }
                assert_eq!(got, want, "form pose {pose} compact {compact}");
            }
        }
    }
}
