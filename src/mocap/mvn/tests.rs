use super::*;
use crate::skeleton::Proportions;

/// A type-02 datagram laid out byte by byte as the MVN streaming specification lays
/// it out (not by `mvn_datagram`): `items` of (segment id, MVN position), identity
/// orientations; `modern` fills the MVN 2019 header fields (segment counts, payload
/// size), otherwise they are zero as older MVN versions send them.
fn by_hand(sample: u32, character: u8, items: &[(u32, [f32; 3])], modern: bool) -> Vec<u8> {
    let mut d = b"MXTP02".to_vec();
    d.extend(sample.to_be_bytes());
    d.push(0x80); // datagram counter: the first, and last, of its sample
    d.push(items.len() as u8);
    d.extend(1234u32.to_be_bytes()); // time code, ms
    d.push(character);
    let (segments, payload) = if modern {
        (items.len() as u8, (items.len() * 32) as u16)
    } else {
        (0, 0)
    };
    d.extend([segments, 0, 0, 0, 0]); // body segments, props, fingers, reserved
    d.extend(payload.to_be_bytes());
    assert_eq!(d.len(), 24);
    for &(id, [x, y, z]) in items {
        d.extend(id.to_be_bytes());
        for v in [x, y, z, 1.0, 0.0, 0.0, 0.0] {
            d.extend(v.to_be_bytes());
        }
    }
    d
}

fn sample(d: &[u8]) -> MvnSample {
    match parse_mvn(d) {
        Ok(MvnDatagram::Sample(s)) => s,
        other => panic!("not a sample: {other:?}"),
    }
}

/// Every body segment at a distinct spot: id i at (i, 2i, 3i) cm in MVN's frame.
fn all_segments() -> Vec<(u32, [f32; 3])> {
    (1..=23u32)
        .map(|i| (i, [i as f32 * 0.01, i as f32 * 0.02, i as f32 * 0.03]))
        .collect()
}

#[test]
fn a_datagram_reads_as_the_specification_lays_it_out() {
    for modern in [true, false] {
        let d = by_hand(42, 3, &[(1, [1.0, 2.0, 3.0]), (7, [0.1, 0.2, 1.6])], modern);
        let s = sample(&d);
        assert_eq!((s.sample, s.time_ms, s.character), (42, 1234, 3));
        // MVN x (forward) → clothcast z, y (left) → x, z (up) → y
        assert_eq!(s.segments[0], Some(Vec3::new(2.0, 3.0, 1.0)));
        assert_eq!(s.segments[6], Some(Vec3::new(0.2, 1.6, 0.1)));
        assert_eq!(s.segments.iter().flatten().count(), 2);
    }
    // the datagram MVN sends for one suit: 23 segments, 760 bytes
    let d = by_hand(7, 0, &all_segments(), true);
    assert_eq!(d.len(), 760);
    let s = sample(&d);
    for (i, p) in s.segments.iter().enumerate() {
        let k = (i + 1) as f32;
        let want = Vec3::new(0.02 * k, 0.03 * k, 0.01 * k);
        assert!(
            p.is_some_and(|p| (p - want).length() < 1e-6),
            "segment {}",
            i + 1
        );
    }
}

#[test]
fn props_and_fingers_after_the_body_and_other_messages_are_skipped() {
    // 23 body segments, then two props (ids 24, 25) the header counts apart
    let mut items = all_segments();
    items.extend([(24, [9.0, 9.0, 9.0]), (25, [8.0, 8.0, 8.0])]);
    let mut d = by_hand(1, 0, &items, true);
    d[17] = 23;
    d[18] = 2;
    let s = sample(&d);
    assert_eq!(s.segments.iter().flatten().count(), 23);
    // joint angles (type 20), and the second datagram of a split sample
    let mut other = by_hand(1, 0, &items, true);
    other[4..6].copy_from_slice(b"20");
    assert_eq!(parse_mvn(&other), Ok(MvnDatagram::Other(20)));
    let mut second = d.clone();
    second[10] = 0x81;
    assert_eq!(parse_mvn(&second), Ok(MvnDatagram::Other(2)));
}

#[test]
fn truncated_padded_and_malformed_datagrams_are_refused_by_name() {
    for modern in [true, false] {
        let d = by_hand(5, 0, &all_segments(), modern);
        for n in 0..d.len() {
            let e = parse_mvn(&d[..n]).expect_err("a prefix");
            match (n < 24, modern) {
                (true, _) => assert_eq!(e, MvnError::Short(n)),
                (false, true) => {
                    assert!(matches!(e, MvnError::PayloadSize { said: 736, .. }), "{e}")
                }
                (false, false) => assert!(matches!(e, MvnError::Items { items: 23, .. }), "{e}"),
            }
        }
        let mut long = d.clone();
        long.push(0);
        assert!(parse_mvn(&long).is_err());
    }
    let good = by_hand(5, 0, &all_segments(), true);
    let bad = |at: usize, bytes: &[u8]| {
        let mut d = good.clone();
        d[at..at + bytes.len()].copy_from_slice(bytes);
        parse_mvn(&d).expect_err("refused")
    };
    assert!(matches!(bad(0, b"MXTQ"), MvnError::Magic(_)));
    assert!(matches!(bad(4, b"0x"), MvnError::Magic(_)));
    // more items than the payload holds: refused, nothing sized by the claim
    assert!(matches!(
        bad(11, &[255]),
        MvnError::Items {
            items: 255,
            has: 736
        }
    ));
    // segment ids outside the body, or twice
    let item = |k: usize| 24 + 32 * k;
    assert_eq!(
        bad(item(3), &0u32.to_be_bytes()),
        MvnError::Segment { item: 3, id: 0 }
    );
    assert_eq!(
        bad(item(3), &24u32.to_be_bytes()),
        MvnError::Segment { item: 3, id: 24 }
    );
    assert_eq!(
        bad(item(3), &1u32.to_be_bytes()),
        MvnError::Segment { item: 3, id: 1 }
    );
    for v in [f32::NAN, f32::INFINITY, 2e4] {
        let e = bad(item(2) + 8, &v.to_be_bytes());
        assert!(matches!(e, MvnError::Position { id: 3, .. }), "{v}: {e}");
        assert!(e.to_string().contains("segment 3"), "{e}");
    }
    // orientations that are not rotations: NaN, zero, far from unit length
    for q in [
        [f32::NAN, 0.0, 0.0, 0.0],
        [0.0; 4],
        [1.05, 0.0, 0.0, 0.0],
        [0.6, 0.6, 0.6, 0.6],
    ] {
        let bytes: Vec<u8> = q.iter().flat_map(|v| v.to_be_bytes()).collect();
        let e = bad(item(4) + 16, &bytes);
        assert!(
            matches!(e, MvnError::Orientation { id: 5, .. }),
            "{q:?}: {e}"
        );
        assert!(e.to_string().contains("segment 5"), "{e}");
    }
    // a unit quaternion in f32 rounding passes
    let near: Vec<u8> = [0.6f32, 0.8, 1e-4, 0.0]
        .iter()
        .flat_map(|v| v.to_be_bytes())
        .collect();
    let mut d = good.clone();
    d[item(4) + 16..item(4) + 32].copy_from_slice(&near);
    assert!(parse_mvn(&d).is_ok());
}

#[test]
fn samples_overtaken_on_the_way_are_stale_and_restarts_are_taken() {
    let mut s = MvnStream::default();
    assert!(s.accept(10).is_ok());
    assert!(s.accept(12).is_ok());
    assert_eq!(
        s.accept(11),
        Err(MvnError::Stale {
            sample: 11,
            last: 12
        })
    );
    assert!(s.accept(12).is_err(), "a repeat");
    assert!(s.accept(13).is_ok());
    // the counter wraps
    let mut s = MvnStream::default();
    assert!(s.accept(u32::MAX - 1).is_ok());
    assert!(s.accept(2).is_ok());
    assert!(s.accept(u32::MAX).is_err());
    // a streamer restarted long after it started counts from 0 again
    let mut s = MvnStream::default();
    assert!(s.accept(90_000).is_ok());
    assert!(s.accept(0).is_ok());
    assert!(s.accept(1).is_ok());
}

#[test]
fn sent_poses_read_back_as_the_joints_they_place() {
    let skel = Skeleton::from_proportions(&Proportions::default());
    let mut pose = Pose::rest();
    pose.set_rotation(JointId::LEFT_SHOULDER, Quat::from_rotation_z(-1.0));
    pose.set_rotation(JointId::RIGHT_KNEE, Quat::from_rotation_x(0.9));
    pose.set_rotation(JointId::PELVIS, Quat::from_rotation_y(0.5));
    pose.translation = Vec3::new(0.4, -0.05, -1.2);
    let d = mvn_datagram(&pose, &skel, 2, 99, 4000).expect("sendable");
    assert_eq!(d.len(), 760);
    let s = sample(&d);
    assert_eq!((s.character, s.sample, s.time_ms), (2, 99, 4000));
    let p = skel.joint_positions(&pose);
    for (got, (_, joint)) in s.segments.iter().zip(SEGMENTS) {
        let e = got.map(|g| (g - p[joint.index()]).length());
        assert!(e.is_some_and(|e| e < 1e-5), "{}: {e:?}", joint.name());
    }
    // orientations: each segment's world rotation, permuted into MVN's axes
    let w = skel.world_frames(&pose)[JointId::PELVIS.index()].rot;
    let q = |k: usize| be_f32(&d, 24 + 16 + 4 * k);
    assert!((q(0) - w.w).abs() < 1e-6 && (q(1) - w.z).abs() < 1e-6);
    assert!((q(2) - w.x).abs() < 1e-6 && (q(3) - w.y).abs() < 1e-6);
    // and read back into clothcast's axes
    let world = skel.world_frames(&pose);
    for (got, (_, joint)) in s.orientations.iter().zip(SEGMENTS) {
        let want = world[joint.index()].rot;
        let e = got.map(|g| (g.dot(want).abs() - 1.0).abs());
        assert!(e.is_some_and(|e| e < 1e-6), "{}: {e:?}", joint.name());
    }
    let mut broken = pose;
    broken.translation.x = f32::NAN;
    assert!(matches!(
        mvn_datagram(&broken, &skel, 0, 0, 0),
        Err(MvnError::Pose(_))
    ));
}
