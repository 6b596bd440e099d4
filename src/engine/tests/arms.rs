//! Keeping the arms out of the torso: the pose streamed for the body and the garment.

use super::*;

/// The left shoulder's local rotation in a frame message's body pose.
fn streamed_left_shoulder(frame: &Bytes) -> Quat {
    let ServerMessage::Frame(f) = ServerMessage::from_msgpack(frame).expect("frame message") else {
        panic!("expected a frame");
    };
    let at = 4 * (3 + 4 * JointId::LEFT_SHOULDER.index());
    let x: Vec<f32> = f.pose[at..at + 16]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    Quat::from_xyzw(x[0], x[1], x[2], x[3])
}

/// A performer's arm hanging straight down goes through the body's chest (the body is
/// broader than many performers): the engine lifts it just clear, as the bake lifted
/// every example pose, and streams that pose for the body and the garment synthesised
/// at it; with `keep_arms_out = false` it streams the arm as sent.
#[test]
fn arms_inside_the_torso_are_lifted_clear_for_body_and_garment() {
    let db = db();
    let guard =
        crate::body::SelfContactGuard::new(&db.body.to_body(), crate::bake::GUARD_CLEARANCE);
    let down = arm(std::f32::consts::FRAC_PI_2);
    let lifted = guard.apply(&down);
    let angle = |p: &Pose| p.rotations[JointId::LEFT_SHOULDER.index()];
    assert!(
        angle(&down).angle_between(angle(&lifted)) > 0.1,
        "the hanging arm does not reach into the torso: the test needs another pose"
    );
    let n = db.vertex_count();
    for keep in [true, false] {
        let config = EngineConfig {
            keep_arms_out: keep,
            ..EngineConfig::default()
        };
        let synth = Engine::synthesizer(&db, &config);
        let mut engine = Engine::new(Arc::clone(&db), config).expect("engine");
        let mut decoder = Decoder::new(Arc::clone(engine.setup()));
        let mut out = vec![0f32; 3 * n];
        let mut shoulder = Quat::IDENTITY;
        for i in 0..12 {
            let t = f64::from(i + 1) / 30.0;
            engine.set_pose("a", down, t, t).expect("pose");
            let tick = engine.tick(std::slice::from_ref(&synth), t).expect("tick");
            let f = &tick.frames[0];
            let bytes = f.delta.as_ref().or(f.key.as_ref()).expect("a frame");
            decoder
                .decode(&garment_of(bytes).1, &mut out)
                .expect("decodes");
            shoulder = streamed_left_shoulder(bytes);
        }
        let (streamed, other) = if keep {
            (&lifted, &down)
        } else {
            (&down, &lifted)
        };
        assert!(
            shoulder.angle_between(angle(streamed)) < 1e-3,
            "keep_arms_out = {keep}: the body pose streamed is not the expected one"
        );
        let worst = off_undamped(&synth, &db, streamed, &out);
        assert!(
            worst < 0.0011,
            "keep_arms_out = {keep}: garment {worst} m off"
        );
        let off_other = off_undamped(&synth, &db, other, &out);
        assert!(
            off_other > 0.01,
            "keep_arms_out = {keep}: the garment is as near the other pose's ({off_other} m)"
        );
    }
}

/// A change of outfit guards the pose as received for the new garment's body: a shirt
/// baked on a narrower body needs a smaller lift, which the old body's lift (already
/// clear of it) would have hidden until the performer's next pose.
#[test]
fn wearing_a_garment_of_another_body_guards_the_received_pose_afresh() {
    let wide = db();
    let mut narrow = (*second_garment(&wide)).clone();
    let centre = narrow.body.skeleton[JointId::SPINE2.index()].x;
    for p in &mut narrow.body.positions {
        p.x = centre + 0.6 * (p.x - centre);
    }
    let narrow = Arc::new(narrow);
    let lift = |db: &Database, pose: &Pose| {
        crate::body::SelfContactGuard::new(&db.body.to_body(), crate::bake::GUARD_CLEARANCE)
            .apply(pose)
            .rotations[JointId::LEFT_SHOULDER.index()]
    };
    let down = arm(std::f32::consts::FRAC_PI_2);
    let (on_wide, on_narrow) = (lift(&wide, &down), lift(&narrow, &down));
    assert!(
        on_wide.angle_between(on_narrow) > 0.05,
        "the narrow body needs as much lift: the test needs another body"
    );
    let config = EngineConfig::default();
    let mut engine =
        Engine::with_garments(vec![Arc::clone(&wide), Arc::clone(&narrow)], config.clone())
            .expect("engine");
    let synths = [
        Engine::synthesizer(&wide, &config),
        Engine::synthesizer(&narrow, &config),
    ];
    let mut t = 1.0 / 30.0;
    let streamed = |engine: &mut Engine, t: f64| {
        let tick = engine.tick(&synths, t).expect("tick");
        let f = &tick.frames[0];
        streamed_left_shoulder(f.delta.as_ref().or(f.key.as_ref()).expect("a frame"))
    };
    engine.set_pose("a", down, t, t).expect("pose");
    assert!(streamed(&mut engine, t).angle_between(on_wide) < 1e-3);
    // no new pose between the change of garment and the next tick
    for (garment, expected) in [("shirt-b", on_narrow), (&*wide.garment.name, on_wide)] {
        engine.wear("a", &[garment]).expect("wear");
        t += 1.0 / 30.0;
        let shoulder = streamed(&mut engine, t);
        assert!(
            shoulder.angle_between(expected) < 1e-3,
            "wearing {garment}: the shoulder is {} rad off ({} from down, {} from wide, {} from narrow)",
            shoulder.angle_between(expected),
            shoulder.angle_between(down.rotations[JointId::LEFT_SHOULDER.index()]),
            shoulder.angle_between(on_wide),
            shoulder.angle_between(on_narrow)
        );
    }
}
