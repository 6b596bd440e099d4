use super::*;

const SMALL: &str = "HIERARCHY\r\nROOT Hips\r\n{\r\n  OFFSET 0 0 0\r\n  CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation\r\n  JOINT Spine\r\n  {\r\n    OFFSET 0 10 0\r\n    CHANNELS 3 Xrotation Yrotation Zrotation\r\n    End Site\r\n    {\r\n      OFFSET 0 5 0\r\n    }\r\n  }\r\n  JOINT Leg\r\n  {\r\n    OFFSET 3 0 0\r\n    CHANNELS 3 Zrotation Yrotation Xrotation\r\n    End Site\r\n    {\r\n      OFFSET 0 -8 0\r\n    }\r\n  }\r\n}\r\nMOTION\r\nFrames: 2\r\nFrame Time: 0.0333333\r\n0 90 0 0 0 0 0 0 0 0 0 0\r\n1 90 0 90 0 0 0 0 0 0 0 0\r\n";

#[test]
fn parses_hierarchy_channels_and_frames() {
    let b = Bvh::parse(SMALL).expect("parse");
    assert_eq!(b.joints.len(), 3);
    assert_eq!(b.channel_count(), 12);
    assert_eq!(b.frame_count(), 2);
    assert_eq!(b.joints[1].parent, Some(0));
    assert_eq!(b.joints[2].first_channel, 9);
    assert_eq!(b.joints[2].end_site, Some(Vec3::new(0.0, -8.0, 0.0)));
    let w0 = b.world(Some(0));
    assert!((w0[1].1 - Vec3::new(0.0, 100.0, 0.0)).length() < 1e-4);
    // frame 1: root turned 90° about Z, so the spine points along −X
    let w1 = b.world(Some(1));
    assert!(
        (w1[1].1 - Vec3::new(-9.0, 90.0, 0.0)).length() < 1e-3,
        "{:?}",
        w1[1].1
    );
}

#[test]
fn channel_order_is_respected() {
    // Z then X: R = Rz(90)·Rx(90)
    let text = SMALL.replace(
        "0 90 0 0 0 0 0 0 0 0 0 0\r\n1",
        "0 0 0 90 90 0 0 0 0 0 0 0\r\n1",
    );
    let b = Bvh::parse(&text).expect("parse");
    let (q, _) = b.local(0, Some(0));
    let expect = Quat::from_rotation_z(std::f32::consts::FRAC_PI_2)
        * Quat::from_rotation_x(std::f32::consts::FRAC_PI_2);
    assert!(q.abs_diff_eq(expect, 1e-5) || q.abs_diff_eq(-expect, 1e-5));
}

fn line_of(text: &str) -> usize {
    match Bvh::parse(text) {
        Err(e) => e.line,
        Ok(_) => panic!("expected an error for {text:?}"),
    }
}

#[test]
fn hostile_files_give_errors_with_line_numbers() {
    let lf = SMALL.replace("\r\n", "\n");
    // truncated anywhere: an error, never a panic
    for cut in (0..lf.len()).step_by(7) {
        assert!(
            Bvh::parse(&lf[..cut]).is_err(),
            "prefix of {cut} bytes parsed"
        );
    }
    // wrong channel count: 6 declared, 5 names, then the parser meets JOINT
    let wrong = lf.replace(
        "CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation",
        "CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation",
    );
    assert_eq!(line_of(&wrong), 6);
    // unknown channel
    let unknown = lf.replace(
        "CHANNELS 3 Xrotation Yrotation Zrotation",
        "CHANNELS 3 Xrotation Wrotation Zrotation",
    );
    let e = Bvh::parse(&unknown).expect_err("unknown channel");
    assert_eq!(e.line, 9);
    assert!(e.message.contains("Wrotation"));
    // NaN in a frame and in an offset
    let nan = lf.replace("1 90 0 90", "1 nan 0 90");
    assert_eq!(line_of(&nan), 29);
    let nan_off = lf.replace("OFFSET 3 0 0", "OFFSET 3 NaN 0");
    assert_eq!(line_of(&nan_off), 17);
    // ten million frames declared, two given: refused without allocating them
    let many = lf.replace("Frames: 2", "Frames: 10000000");
    assert!(
        Bvh::parse(&many)
            .expect_err("too many")
            .message
            .contains("10000000")
    );
    let lots = lf.replace("Frames: 2", "Frames: 1000000");
    let e = Bvh::parse(&lots).expect_err("missing frames");
    assert!(
        e.message.contains("1000000 frames declared, 2 found"),
        "{}",
        e.message
    );
    // a frame with too few values
    let short = lf.replace("1 90 0 90 0 0 0 0 0 0 0 0", "1 90 0 90 0 0 0 0 0 0 0");
    assert_eq!(line_of(&short), 29);
    // nonsense instead of a hierarchy, and zero frame time
    assert_eq!(line_of("HELLO\n"), 1);
    assert!(Bvh::parse(&lf.replace("Frame Time: 0.0333333", "Frame Time: 0")).is_err());
    assert!(Bvh::parse("").is_err());
}

#[test]
fn cmu_clips_parse() {
    for (name, frames) in [("cmu_131_01.bvh", 994), ("cmu_131_03.bvh", 1102)] {
        let path = format!("{}/tests/fixtures/mocap/{name}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).expect("fixture");
        let b = Bvh::parse(&text).expect("parse");
        assert_eq!(b.frame_count(), frames);
        assert_eq!(b.joints.len(), 31);
        assert!((b.frame_time - 1.0 / 120.0).abs() < 1e-5);
    }
}
