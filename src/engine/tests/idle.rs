//! Idle avatars: quiet after `idle_timeout`, they stream nothing, but a keyframe asked
//! of one (a viewer that joined or fell out of step while the performer was quiet)
//! comes as one frame of its last garment.

use super::*;

/// Decodes the garment of a frame message (map form).
fn decode(decoder: &mut Decoder, message: &Bytes, out: &mut [f32]) {
    decoder
        .decode(&garment_of(message).1, out)
        .expect("decodes");
}

fn frame_of<'a>(tick: &'a TickOutput, avatar: &str) -> Option<&'a AvatarFrame> {
    tick.frames.iter().find(|f| f.avatar == avatar)
}

#[test]
fn an_idle_avatar_asked_for_a_keyframe_sends_its_last_garment_once() {
    let db = db();
    let cfg = EngineConfig {
        idle_timeout: 0.5,
        remove_after: 30.0,
        ..EngineConfig::default()
    };
    let mut engine = Engine::new(Arc::clone(&db), cfg.clone()).expect("engine");
    let synth = Engine::synthesizer(&db, &cfg);
    let synths = std::slice::from_ref(&synth);
    let n = 3 * db.vertex_count();
    // an in-step viewer of "b": decodes every frame it gets
    let mut in_step = Decoder::new(Arc::clone(engine.setup()));
    let mut seen = vec![0f32; n];
    let mut t = 0.0;
    let mut last_seq = 0;
    for i in 0..10 {
        t += 1.0 / 30.0;
        engine.set_pose("a", arm(0.5), t, t).expect("pose");
        engine
            .set_pose("b", arm(0.2 + 0.05 * i as f32), t, t)
            .expect("pose");
        let out = engine.tick(synths, t).expect("tick");
        let b = frame_of(&out, "b").expect("b streams");
        let bytes = b.delta.as_ref().or(b.key.as_ref()).expect("a frame");
        decode(&mut in_step, bytes, &mut seen);
        last_seq = b.frame;
    }
    let last = arm(0.2 + 0.05 * 9.0);
    // "b" goes quiet, "a" streams on: after 0.5 s "b" is idle and sends nothing
    for _ in 0..30 {
        t += 1.0 / 30.0;
        engine.set_pose("a", arm(0.5), t, t).expect("pose");
        let out = engine.tick(synths, t).expect("tick");
        if let Some(b) = frame_of(&out, "b") {
            let bytes = b.delta.as_ref().or(b.key.as_ref()).expect("a frame");
            decode(&mut in_step, bytes, &mut seen);
            last_seq = b.frame;
        }
    }
    let quiet = engine.tick(synths, t + 1.0 / 30.0).expect("tick");
    assert!(
        frame_of(&quiet, "b").is_none(),
        "an idle avatar streams nothing"
    );
    t += 1.0 / 30.0;
    // a viewer joins and asks for "b": one frame, a keyframe of the garment the
    // in-step viewer holds, and a delta that leaves the in-step viewer where it was
    for round in 0..2 {
        // asked for by name (a listed subscription, a resync), then as every idle
        // avatar (a subscription to all)
        if round == 0 {
            engine.request_keyframe("b");
        } else {
            engine.request_idle_keyframes();
        }
        // (the second request waits out the keyframe interval, as any would)
        t += 0.2;
        engine.set_pose("a", arm(0.5), t, t).expect("pose");
        let out = engine.tick(synths, t).expect("tick");
        let b = frame_of(&out, "b").expect("an idle avatar asked for a keyframe frames once");
        assert_eq!(
            b.frame,
            last_seq + 1,
            "round {round}: the next frame number"
        );
        last_seq = b.frame;
        let mut joined = Decoder::new(Arc::clone(engine.setup()));
        let mut got = vec![0f32; n];
        decode(&mut joined, b.key.as_ref().expect("a keyframe"), &mut got);
        decode(
            &mut in_step,
            b.delta.as_ref().expect("and a delta"),
            &mut seen,
        );
        assert!(
            got == seen,
            "round {round}: the joiner sees the garment the others see"
        );
        // (its damping went on while it was quiet: the garment of its last pose)
        let off = off_undamped(&synth, &db, &last, &got);
        assert!(
            off < 0.0011,
            "round {round}: {off} m from its last pose's garment"
        );
        t += 1.0 / 30.0;
        engine.set_pose("a", arm(0.5), t, t).expect("pose");
        let after = engine.tick(synths, t).expect("tick");
        assert!(
            frame_of(&after, "b").is_none(),
            "round {round}: and then nothing again"
        );
    }
    // asked for while unknown, or for idle avatars when none is: nothing
    engine.request_keyframe("nobody");
    engine.request_idle_keyframes();
    t += 0.2;
    engine.set_pose("a", arm(0.5), t, t).expect("pose");
    engine.set_pose("b", arm(0.3), t, t).expect("pose");
    let back = engine.tick(synths, t).expect("tick");
    let b = frame_of(&back, "b").expect("b streams again");
    assert!(b.delta.is_some(), "b resumes in step: a delta");
    assert_eq!(back.frames.len(), 2);
}
