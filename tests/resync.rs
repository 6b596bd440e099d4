//! A viewer whose decoder refused a frame asks for a keyframe (`resync`) and streams
//! on, in step with the server again; a bad `resync` is refused by name, the link kept.

use std::collections::HashMap;
use std::time::Duration;

use clothcast::client::{Client, ClientError, RESYNC_AGAIN, Viewer};
use clothcast::codec::{FrameHeader, FrameKind};
use clothcast::net::start;
use clothcast::protocol::{
    ClientMessage, FrameMessage, ResyncMessage, Role, ServerMessage, SubscribeMessage,
};

use super::server::{
    arm_pose, config, connect_publisher, connect_viewer, db, expect_error, http_get, until,
};

/// The next `frame` message of `avatar` on `c`, not applied (the messages before it
/// are).
pub(super) async fn next_frame(c: &mut Client, viewer: &mut Viewer, avatar: &str) -> FrameMessage {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let m = tokio::time::timeout_at(deadline, c.next())
            .await
            .expect("timed out waiting for a frame")
            .expect("message");
        match m {
            ServerMessage::Frame(f) if f.avatar == avatar => return f,
            m => {
                viewer.apply(m).expect("applies");
            }
        }
    }
}

pub(super) fn kind(f: &FrameMessage) -> FrameKind {
    FrameHeader::parse(&f.garment).expect("a codec frame").kind
}

/// Reads frames of `avatar` for `span`: they all stay undecodable (refused for want of
/// their reference), and none is a keyframe; how many came.
async fn stays_out_of_step(
    c: &mut Client,
    viewer: &mut Viewer,
    avatar: &str,
    span: Duration,
) -> usize {
    let decoded = viewer.avatars[avatar].frames;
    let end = tokio::time::Instant::now() + span;
    let mut n = 0;
    while tokio::time::Instant::now() < end {
        let f = next_frame(c, viewer, avatar).await;
        assert_eq!(kind(&f), FrameKind::Delta, "no keyframe comes unasked");
        assert!(matches!(viewer.apply(ServerMessage::Frame(f)), Ok(None)));
        n += 1;
    }
    assert_eq!(
        viewer.avatars[avatar].frames, decoded,
        "nothing decoded out of step"
    );
    assert!(viewer.out_of_step_since(avatar).is_some());
    n
}

/// Alice's garment by frame number, as a viewer that decodes every frame (in a task of
/// its own) saw it.
pub(super) struct Reference {
    seen: tokio::sync::mpsc::UnboundedReceiver<(u32, Vec<f32>)>,
    by_seq: HashMap<u32, Vec<f32>>,
    pub(super) task: tokio::task::JoinHandle<()>,
}

impl Reference {
    pub(super) async fn start(url: &str) -> Self {
        let mut c = connect_viewer(url).await;
        let (tx, seen) = tokio::sync::mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            let mut v = Viewer::default();
            while let Ok(m) = c.next().await {
                if let Some(id) = v.apply(m).expect("the reference decodes every frame")
                    && id == "alice"
                {
                    let a = &v.avatars[&id];
                    let seq = a.last.as_ref().map_or(0, |f| f.seq);
                    if tx.send((seq, a.positions.clone())).is_err() {
                        return;
                    }
                }
            }
        });
        Self {
            seen,
            by_seq: HashMap::new(),
            task,
        }
    }

    /// Alice's garment at frame `seq` (waiting up to 5 s for the reference to read it).
    pub(super) async fn garment(&mut self, seq: u32) -> &[f32] {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !self.by_seq.contains_key(&seq) {
            match tokio::time::timeout_at(deadline, self.seen.recv()).await {
                Ok(Some((s, p))) => {
                    self.by_seq.insert(s, p);
                }
                _ => panic!("the reference viewer never decoded frame {seq}"),
            }
        }
        &self.by_seq[&seq]
    }
}

/// Sends the viewer's `resync`, which names `avatar` alone and is not made again at
/// once, and reads until its frames decode again: the first decoded is a keyframe,
/// whose garment equals the in-step `reference` viewer's at the same frame number.
/// That frame's number.
async fn resyncs(c: &mut Client, viewer: &mut Viewer, reference: &mut Reference) -> u32 {
    let m = viewer
        .resync()
        .expect("an out-of-step avatar asks for a keyframe");
    let alice = ClientMessage::Resync(ResyncMessage {
        avatars: vec!["alice".into()],
        assets: vec![],
    });
    assert_eq!(m, alice);
    assert_eq!(
        viewer.resync(),
        None,
        "not asked again within {RESYNC_AGAIN:?}"
    );
    c.send(&m).await.expect("resync");
    for _ in 0..10 {
        let f = next_frame(c, viewer, "alice").await;
        let (seq, k) = (f.seq, kind(&f));
        if viewer
            .apply(ServerMessage::Frame(f))
            .expect("applies")
            .is_some()
        {
            assert_eq!(k, FrameKind::Key, "in step again from a keyframe");
            assert!(viewer.out_of_step_since("alice").is_none());
            let want = reference.garment(seq).await;
            assert!(
                viewer.avatars["alice"].positions == want,
                "frame {seq} decodes as the in-step viewer's"
            );
            return seq;
        }
    }
    panic!("no keyframe within 10 frames of asking");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_that_refused_a_frame_asks_for_a_keyframe_and_streams_on() {
    let server = start(db(), config()).await.expect("server starts");
    let url = format!("ws://{}/ws", server.addr);
    // alice moves all the time; bob is another avatar, never resynced
    let mut publisher = connect_publisher(&url).await;
    let publishing = tokio::spawn(async move {
        for i in 0..1500 {
            let t = f64::from(i) * 0.02;
            let angle = 0.3 + 0.5 * (t as f32 * 3.0).sin().abs();
            for who in ["alice", "bob"] {
                if publisher.send(&arm_pose(who, angle, t)).await.is_err() {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let mut reference = Reference::start(&url).await;
    let mut c = connect_viewer(&url).await;
    let mut v = Viewer::default();
    until(&mut c, &mut v, |v, _| {
        ["alice", "bob"]
            .iter()
            .all(|a| v.avatars.get(*a).is_some_and(|a| a.frames >= 5))
    })
    .await;
    let keyframes = server.keyframes();
    let bob = v.avatars["bob"].frames;

    // 1. a frame lost on the way: every delta after it lacks its reference, for as
    // long as the viewer does not ask
    let lost = next_frame(&mut c, &mut v, "alice").await;
    assert_eq!(kind(&lost), FrameKind::Delta);
    let n = stays_out_of_step(&mut c, &mut v, "alice", Duration::from_millis(700)).await;
    assert!(n >= 10, "{n} frames in 0.7 s");
    let again = resyncs(&mut c, &mut v, &mut reference).await;
    assert_eq!(server.resyncs(), 1);
    assert!(
        server.keyframes() > keyframes,
        "a keyframe was made for the resync"
    );
    // and the deltas after it decode
    let before = v.avatars["alice"].frames;
    until(&mut c, &mut v, |v, _| {
        v.avatars["alice"].frames >= before + 5
    })
    .await;
    assert!(
        v.avatars["alice"]
            .last
            .as_ref()
            .is_some_and(|f| f.seq > again)
    );

    // 2. a corrupt frame (its checksum wrong): refused by name, then the same way back
    let mut bad = next_frame(&mut c, &mut v, "alice").await;
    let mut garment = bad.garment.to_vec();
    garment[32] ^= 0x55;
    bad.garment = garment.into();
    match v.apply(ServerMessage::Frame(bad)) {
        Err(ClientError::Frame { avatar, error }) => {
            assert_eq!(avatar, "alice");
            assert!(error.to_string().contains("checksum"), "{error}");
        }
        other => panic!(
            "a corrupt frame is refused, got {:?}",
            other.map_err(|e| e.to_string())
        ),
    }
    // its first request lost on the way (or a server that ignores it): asked again
    // after RESYNC_AGAIN
    assert!(v.resync().is_some());
    stays_out_of_step(&mut c, &mut v, "alice", RESYNC_AGAIN).await;
    resyncs(&mut c, &mut v, &mut reference).await;
    assert_eq!(server.resyncs(), 2);
    let metrics = http_get(server.addr, "/metrics").await;
    assert!(metrics.contains("clothcast_resyncs_total 2\n"), "{metrics}");
    // bob was never out of step: he streamed on throughout
    assert!(v.avatars["bob"].frames > bob + 20);
    assert!(v.out_of_step_since("bob").is_none());

    publishing.abort();
    reference.task.abort();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_resync_is_refused_by_name_and_the_link_kept() {
    let server = start(db(), config()).await.expect("server starts");
    let url = format!("ws://{}/ws", server.addr);
    let mut publisher = connect_publisher(&url).await;
    publisher
        .send(&arm_pose("alice", 0.4, 0.0))
        .await
        .expect("pose");
    let mut c = connect_viewer(&url).await;
    let mut v = Viewer::default();
    until(&mut c, &mut v, |v, _| v.avatars.contains_key("alice")).await;
    let resync = |avatars: Vec<String>| {
        ClientMessage::Resync(ResyncMessage {
            avatars,
            assets: vec![],
        })
    };
    let max = config().engine.max_avatars;
    let cases = [
        (resync(vec![]), "none"),
        (
            resync((0..=max).map(|i| format!("a{i}")).collect()),
            "at most",
        ),
        (resync(vec!["evil\u{202e}".into()]), "avatar id"),
        (resync(vec![String::new()]), "avatar id"),
        (
            ClientMessage::Resync(ResyncMessage {
                avatars: vec![],
                assets: vec!["0123abcd".into()],
            }),
            "\"0123abcd\": this server has no such asset",
        ),
        (
            ClientMessage::Resync(ResyncMessage {
                avatars: vec!["alice".into()],
                assets: (0..65).map(|i| format!("{i:x}")).collect(),
            }),
            "at most 64 assets",
        ),
    ];
    for (m, says) in cases {
        c.send(&m).await.expect("sends");
        let what = loop {
            match tokio::time::timeout(Duration::from_secs(10), c.next()).await {
                Ok(Ok(ServerMessage::Error { code, message })) => {
                    assert_eq!(code, "bad_resync", "{message}");
                    break message;
                }
                Ok(Ok(other)) => {
                    v.apply(other).expect("applies");
                }
                other => panic!("expected a bad_resync error, got {other:?}"),
            }
        };
        assert!(what.contains(says), "{what:?} should say {says:?}");
    }
    // JSON too, with a wrong type
    c.send_raw(tokio_tungstenite::tungstenite::Message::Text(
        r#"{"type":"resync","avatars":"alice"}"#.into(),
    ))
    .await
    .expect("sends");
    let what = loop {
        match tokio::time::timeout(Duration::from_secs(10), c.next()).await {
            Ok(Ok(ServerMessage::Error { code, message })) => break format!("{code}: {message}"),
            Ok(Ok(_)) => {}
            other => panic!("expected an error, got {other:?}"),
        }
    };
    assert!(
        what.contains("`resync` message") && what.contains("avatars"),
        "{what}"
    );
    // a resync of avatars it is in step with, or does not know: nothing to do
    c.send(&resync(vec!["nobody".into()])).await.expect("sends");
    // from a publisher: not its message
    publisher
        .send(&resync(vec!["alice".into()]))
        .await
        .expect("sends");
    let what = expect_error(&mut publisher, "unexpected").await;
    assert!(what.contains("resync"), "{what}");
    // both links kept: the viewer streams on, the publisher still drives
    publisher
        .send(&arm_pose("alice", 0.9, 0.1))
        .await
        .expect("pose");
    let before = v.avatars["alice"].frames;
    until(&mut c, &mut v, |v, _| {
        v.avatars["alice"].frames >= before + 3
    })
    .await;
    assert_eq!(server.resyncs(), 0);
    server.shutdown().await;
}

/// A viewer that lacks an asset (its subscription's `have` named it wrongly, as a
/// client whose cache lost it would) says so once, asks for it in its `resync` with the
/// avatar's keyframe, gets the `asset` again (once a second at most, however often it
/// asks) and then streams in step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_lacking_an_asset_asks_for_it_again_and_streams_on() {
    let server = start(db(), config()).await.expect("server starts");
    let url = format!("ws://{}/ws", server.addr);
    let mut publisher = connect_publisher(&url).await;
    let publishing = tokio::spawn(async move {
        for i in 0..1500 {
            let t = f64::from(i) * 0.02;
            let angle = 0.3 + 0.5 * (t as f32 * 3.0).sin().abs();
            if publisher.send(&arm_pose("alice", angle, t)).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let mut reference = Reference::start(&url).await;
    let mut c = Client::connect(&url, Role::Viewer, Some("view".into()))
        .await
        .expect("viewer connects");
    let hash = c.assets[0].clone();
    c.send(&ClientMessage::Subscribe(SubscribeMessage {
        have: Some(vec![hash.clone()]),
        ..SubscribeMessage::default()
    }))
    .await
    .expect("subscribes");
    let mut v = Viewer::default();
    // frames of an asset it lacks: said once, then skipped
    let f = next_frame(&mut c, &mut v, "alice").await;
    match v.apply(ServerMessage::Frame(f)) {
        Err(ClientError::Stream(what)) => assert!(what.contains(&hash), "{what}"),
        other => panic!(
            "a frame of an asset it lacks is said, got {:?}",
            other.map_err(|e| e.to_string())
        ),
    }
    let f = next_frame(&mut c, &mut v, "alice").await;
    assert!(
        matches!(v.apply(ServerMessage::Frame(f)), Ok(None)),
        "and said once"
    );
    assert_eq!(v.missing_assets().collect::<Vec<_>>(), [hash.as_str()]);
    assert!(v.out_of_step_since("alice").is_some());
    let asked = v.resync().expect("asks");
    assert_eq!(
        asked,
        ClientMessage::Resync(ResyncMessage {
            avatars: vec!["alice".into()],
            assets: vec![hash.clone()],
        })
    );
    // asked three times at once: the asset comes once
    for _ in 0..3 {
        c.send(&asked).await.expect("resync");
    }
    let mut assets = 0;
    let seq = loop {
        let m = tokio::time::timeout(Duration::from_secs(10), c.next())
            .await
            .expect("timed out")
            .expect("message");
        assets += usize::from(matches!(m, ServerMessage::Asset(_)));
        let keyframe = matches!(&m, ServerMessage::Frame(f) if kind(f) == FrameKind::Key);
        let seq = match &m {
            ServerMessage::Frame(f) => f.seq,
            _ => 0,
        };
        if v.apply(m).expect("applies").is_some() {
            assert!(keyframe, "in step again from a keyframe");
            break seq;
        }
    };
    assert_eq!(assets, 1, "the asset came once");
    assert!(v.missing_assets().next().is_none());
    assert!(v.out_of_step_since("alice").is_none());
    let want = reference.garment(seq).await;
    assert!(
        v.avatars["alice"].positions == want,
        "frame {seq} decodes as the in-step viewer's"
    );
    assert_eq!(server.assets_resent(), 1);
    let metrics = http_get(server.addr, "/metrics").await;
    assert!(
        metrics.contains("clothcast_assets_resent_total 1\n"),
        "{metrics}"
    );
    // a second later it may ask again, and gets it again
    tokio::time::sleep(Duration::from_millis(1100)).await;
    c.send(&ClientMessage::Resync(ResyncMessage {
        avatars: vec![],
        assets: vec![hash.clone()],
    }))
    .await
    .expect("resync");
    let again = loop {
        match tokio::time::timeout(Duration::from_secs(10), c.next()).await {
            Ok(Ok(ServerMessage::Asset(a))) => break a,
            Ok(Ok(m)) => {
                v.apply(m).expect("applies");
            }
            other => panic!("expected the asset again, got {other:?}"),
        }
    };
    assert_eq!(again.hash, hash);
    assert_eq!(server.assets_resent(), 2);
    publishing.abort();
    reference.task.abort();
    server.shutdown().await;
}
