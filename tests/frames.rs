//! What a `frame` message carries: with and without the body pose.

use clothcast::client::{Client, Viewer};
use clothcast::codec::BoneTransform;
use clothcast::net::{ServerHandle, start};
use clothcast::sor::Database;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use clothcast::protocol::{
    ClientMessage, JointSample, PoseMessage, Role, ServerMessage, SubscribeMessage,
};
use clothcast::skeleton::{JOINT_COUNT, Pose, Skeleton};
use glam::{Quat, Vec3};

use super::server::{config, connect_publisher, db, until};

/// A pose turned 0.7 rad about the vertical, stepped off its rest position, the left
/// arm raised and the right elbow bent: every bone moves, and the canonical frame
/// differs from the world's.
fn turned_pose(t: f64) -> ClientMessage {
    turned_pose_of("alice", t)
}

/// [`turned_pose`] for `avatar`.
fn turned_pose_of(avatar: &str, t: f64) -> ClientMessage {
    let joint = |name: &str, q: Quat| JointSample {
        name: name.into(),
        rotation: Some(q.to_array()),
        position: None,
        confidence: Some(1.0),
    };
    ClientMessage::Pose(PoseMessage {
        avatar: avatar.into(),
        profile: "canonical".into(),
        timestamp: t,
        root: Some([0.3, 0.02, -0.5]),
        floor: None,
        joints: vec![
            joint(
                "pelvis",
                Quat::from_rotation_y(0.7) * Quat::from_rotation_x(0.1),
            ),
            joint("left_shoulder", Quat::from_rotation_z(-0.8)),
            joint("right_elbow", Quat::from_rotation_y(1.1)),
            joint("spine2", Quat::from_rotation_x(0.2)),
        ],
    })
}

/// A server on `db` with the test config, its WebSocket URL and a publisher connected.
async fn serving(db: Arc<Database>) -> (ServerHandle, String, Client) {
    let server = start(db, config()).await.expect("server starts");
    let url = format!("ws://{}/ws", server.addr);
    let publisher = connect_publisher(&url).await;
    (server, url, publisher)
}

async fn viewer(url: &str, pose: bool) -> Client {
    subscribed(url, pose, false).await
}

async fn subscribed(url: &str, pose: bool, compact: bool) -> Client {
    let m = ClientMessage::Subscribe(SubscribeMessage {
        pose,
        compact,
        ..Default::default()
    });
    subscribing(url, &m).await
}

/// A viewer connection that has sent `m` (a `subscribe`).
async fn subscribing(url: &str, m: &ClientMessage) -> Client {
    let mut c = Client::connect(url, Role::Viewer, Some("view".into()))
        .await
        .expect("viewer connects");
    c.send(m).await.expect("subscribe");
    c
}

/// A viewer that subscribes with `pose: false` gets frames without the body pose,
/// smaller by its 364 bytes, and the bones of the garment's codec frame, moved by the
/// frame's `world`, pose the body as the pose does (to within the codec's
/// quantisation); a viewer that says nothing gets the pose as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_can_take_the_body_pose_from_the_codec_frame() {
    let db = db();
    let (server, url, mut publisher) = serving(db.clone()).await;
    let (mut with, mut without) = (viewer(&url, true).await, viewer(&url, false).await);
    for i in 0..3 {
        publisher
            .send(&turned_pose(f64::from(i) * 0.03))
            .await
            .expect("pose");
    }
    let (mut with_view, mut without_view) = (Viewer::default(), Viewer::default());
    for (c, v) in [
        (&mut with, &mut with_view),
        (&mut without, &mut without_view),
    ] {
        until(c, v, |v, _| {
            v.avatars.get("alice").is_some_and(|a| a.frames >= 10)
        })
        .await;
    }
    let (a, b) = (&with_view.avatars["alice"], &without_view.avatars["alice"]);
    let (fa, fb) = (
        a.last.as_ref().expect("a frame"),
        b.last.as_ref().expect("a frame"),
    );
    assert_eq!(
        fa.pose.len(),
        4 * (3 + 4 * JOINT_COUNT),
        "the pose is there"
    );
    assert!(fb.pose.is_empty(), "no pose in a frame without it");
    let refused = fb.body_pose(JOINT_COUNT).expect_err("no pose to read");
    assert!(refused.to_string().contains("no body pose"), "{refused}");
    // one message each, the same but for the pose
    let size = |f: &clothcast::protocol::FrameMessage| {
        clothcast::protocol::ServerMessage::Frame(f.clone())
            .to_msgpack()
            .expect("encodes")
            .len()
    };
    let mut fa_bare = fa.clone();
    fa_bare.pose = Default::default();
    assert_eq!(size(&fa_bare), size(fa) - 364 - "pose".len() - 1 - 3);
    // the pose held still for 10 frames: both viewers saw the same garment and world
    assert_eq!(fa.world, fb.world);
    assert_eq!(a.positions, b.positions);

    // the body posed by the pose, and by the codec frame's bones and `world`
    let skeleton = Skeleton::from_rest_positions(db.body.skeleton);
    let body = fa.body_pose(JOINT_COUNT).expect("a good body pose");
    let pose = Pose::from_arrays(body.translation, &body.rotations);
    let by_pose = skeleton.skinning_transforms(&pose);
    let mut bones = [BoneTransform::IDENTITY; JOINT_COUNT];
    b.bones(&mut bones).expect("22 bones");
    let w = fb.world;
    let (wr, wt) = (
        Quat::from_xyzw(w[0], w[1], w[2], w[3]),
        Vec3::new(w[4], w[5], w[6]),
    );
    // every bone's transform moves the body's rest vertices alike: compared at each
    // rest joint and half a metre out from it along every axis
    let mut worst = 0.0f32;
    for (j, (t, b)) in by_pose.iter().zip(&bones).enumerate() {
        let q = Quat::from_array(b.rotation).normalize();
        for d in [Vec3::ZERO, Vec3::X, Vec3::Y, Vec3::Z] {
            let p = skeleton.rest_positions()[j] + 0.5 * d;
            let from_pose = t.rot * p + t.trans;
            let from_bones = wr * (q * p + Vec3::from(b.translation)) + wt;
            worst = worst.max(from_pose.distance(from_bones));
        }
    }
    assert!(
        worst < 1.5e-3,
        "the bones pose the body {worst} m away from the pose"
    );
    // and the arm moved: the bones are not at rest
    let rest = Skeleton::from_rest_positions(db.body.skeleton).skinning_transforms(&Pose::rest());
    assert!(
        bones
            .iter()
            .zip(&rest)
            .any(|(b, r)| Quat::from_array(b.rotation).angle_between(r.rot) > 0.5),
        "the bones follow the pose"
    );
    server.shutdown().await;
}

/// A viewer that subscribes with `compact: true` gets the same frames as one in the map
/// form, field for field (and so decodes the same garment), each message at least 55
/// bytes smaller on the wire; with the body pose or without.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_frames_carry_the_same_frames_in_fewer_bytes() {
    let (server, url, mut publisher) = serving(db()).await;
    for pose in [false, true] {
        let (mut map, mut compact) = (
            subscribed(&url, pose, false).await,
            subscribed(&url, pose, true).await,
        );
        let mut seen = [HashMap::new(), HashMap::new()];
        let mut views = [Viewer::default(), Viewer::default()];
        for (i, c) in [&mut map, &mut compact].into_iter().enumerate() {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            let mut t = 0.0;
            while seen[i].len() < 12 {
                publisher.send(&turned_pose(t)).await.expect("pose");
                t += 0.03;
                let m = tokio::time::timeout_at(deadline, c.next())
                    .await
                    .expect("frames in time")
                    .expect("a message");
                if let ServerMessage::Frame(f) = &m {
                    seen[i].insert(f.seq, (f.clone(), c.last_message_bytes()));
                }
                views[i].apply(m).expect("applies");
            }
        }
        let [by_map, by_compact] = &seen;
        let common: Vec<_> = by_map
            .keys()
            .filter(|s| by_compact.contains_key(s))
            .collect();
        assert!(!common.is_empty(), "the two viewers saw no frame in common");
        for seq in common {
            let ((fm, size_map), (fc, size_compact)) = (&by_map[seq], &by_compact[seq]);
            assert_eq!(fm, fc, "frame {seq}, pose {pose}");
            assert_eq!(fm.pose.is_empty(), !pose);
            assert!(
                size_compact + 55 <= *size_map,
                "frame {seq}: compact {size_compact} bytes, map {size_map}"
            );
        }
        // both decoded the frames they got; the compact viewer's garment is a real one
        let positions = &views[1].avatars["alice"].positions;
        assert!(positions.iter().all(|x| x.is_finite()) && positions.iter().any(|&x| x != 0.0));
    }
    server.shutdown().await;
}

/// Viewers subscribed to shards `[0, 2]` and `[1, 2]` receive disjoint sets of avatars,
/// each the avatars `shard_of` puts in its shard, together every avatar; a shard that
/// is none (`[2, 2]`, `[0, 0]`, `[0, 65]`) is refused by name and the subscription
/// before it stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_viewers_split_the_avatars_between_them() {
    let (server, url, mut publisher) = serving(db()).await;
    let names: Vec<String> = (0..8).map(|i| format!("dancer-{i}")).collect();
    let shard = |s: [u32; 2]| {
        ClientMessage::Subscribe(SubscribeMessage {
            pose: false,
            compact: true,
            shard: Some(s),
            ..Default::default()
        })
    };
    let mut viewers = [
        subscribing(&url, &shard([0, 2])).await,
        subscribing(&url, &shard([1, 2])).await,
    ];
    for bad in [[2, 2], [0, 0], [0, 65]] {
        viewers[0].send(&shard(bad)).await.expect("subscribe");
    }
    let mut seen = [HashMap::<String, u32>::new(), HashMap::new()];
    let mut refusals = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let mut t = 0.0;
    while seen
        .iter()
        .map(|s| s.values().filter(|&&n| n >= 3).count())
        .sum::<usize>()
        < names.len()
    {
        for n in &names {
            publisher.send(&turned_pose_of(n, t)).await.expect("pose");
        }
        t += 0.03;
        for (i, c) in viewers.iter_mut().enumerate() {
            // what has come in by now, without waiting for more
            while let Ok(m) = tokio::time::timeout(Duration::from_millis(5), c.next()).await {
                match m.expect("a message") {
                    ServerMessage::Frame(f) => *seen[i].entry(f.avatar).or_insert(0) += 1,
                    ServerMessage::Error { code, message } => {
                        assert_eq!(code, "bad_subscription");
                        assert!(message.contains("a shard is [index, count]"), "{message}");
                        refusals += 1;
                    }
                    _ => {}
                }
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "frames of every avatar in time: {seen:?}"
        );
    }
    assert_eq!(refusals, 3, "each bad shard refused");
    for (i, s) in seen.iter().enumerate() {
        for a in s.keys() {
            assert_eq!(
                clothcast::protocol::shard_of(a, 2),
                i as u32,
                "{a} reached shard {i}"
            );
        }
    }
    // every avatar reached exactly one viewer, and each viewer got some (8 ids hash to
    // both shards)
    assert!(seen.iter().all(|s| !s.is_empty()), "{seen:?}");
    for n in &names {
        assert_eq!(seen.iter().filter(|s| s.contains_key(n)).count(), 1, "{n}");
    }
    server.shutdown().await;
}

/// A viewer that says which assets it holds (`have`, as a reconnecting client does) is
/// not sent them again, but still gets the others and every frame; a `have` longer than
/// the server takes is refused by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn assets_a_viewer_holds_are_not_sent_again() {
    let (server, url, mut publisher) = serving(db()).await;
    let subscribe = |have: Option<Vec<String>>| {
        ClientMessage::Subscribe(SubscribeMessage {
            pose: false,
            compact: true,
            have,
            ..Default::default()
        })
    };
    // what a viewer receives until its third frame: the asset hashes, then the frames
    let mut t = 0.0;
    let mut receive = async |have: Option<Vec<String>>| {
        let mut c = subscribing(&url, &subscribe(have)).await;
        let (mut assets, mut frames) = (Vec::new(), 0);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while frames < 3 {
            publisher.send(&turned_pose(t)).await.expect("pose");
            t += 0.03;
            match tokio::time::timeout_at(deadline, c.next())
                .await
                .expect("in time")
                .expect("a message")
            {
                ServerMessage::Asset(a) => assets.push(a.hash),
                ServerMessage::Frame(_) => frames += 1,
                _ => {}
            }
        }
        assets
    };
    let all = receive(None).await;
    assert!(!all.is_empty());
    // the welcome announced exactly those
    let announced = Client::connect(&url, Role::Viewer, Some("view".into()))
        .await
        .expect("viewer connects")
        .assets;
    assert_eq!(announced, all);
    assert!(
        receive(Some(all.clone())).await.is_empty(),
        "assets sent again"
    );
    assert_eq!(receive(Some(vec!["not-a-hash".into()])).await, all);

    let mut c = subscribing(&url, &subscribe(Some(vec!["x".into(); 65]))).await;
    let refused = tokio::time::timeout(Duration::from_secs(5), c.next())
        .await
        .expect("in time")
        .expect("a message");
    match refused {
        ServerMessage::Error { code, message } => {
            assert_eq!(code, "bad_subscription");
            assert!(message.contains("at most 64 asset hashes"), "{message}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    server.shutdown().await;
}
