//! A performer who goes quiet (idle: no pose for `idle_timeout`) streams no frames, yet
//! a viewer that subscribes, or resyncs, while they are quiet still gets a keyframe of
//! their garment where the other viewers see it (it used to see nothing of them until
//! they moved again, or were removed 30 s later).

use std::time::Duration;

use clothcast::client::{Client, Viewer};
use clothcast::codec::FrameKind;
use clothcast::net::start;
use clothcast::protocol::{ClientMessage, ResyncMessage, ServerMessage};

use super::resync::{Reference, kind, next_frame};
use super::server::{arm_pose, config, connect_publisher, connect_viewer, connect_viewer_to, db};

/// Reads `c` until alice's next keyframe, which must decode to the in-step `reference`
/// viewer's garment of the same frame number; bob's frames decode meanwhile, and so do
/// alice's deltas sent before it if `in_step` (a viewer that held alice already: the
/// frame that answered another viewer's request reached it as a delta). Alice's frame
/// number.
async fn keyframe_of_alice(
    c: &mut Client,
    v: &mut Viewer,
    reference: &mut Reference,
    in_step: bool,
    case: &str,
) -> u32 {
    for _ in 0..5 {
        let f = next_frame(c, v, "alice").await;
        let (seq, k) = (f.seq, kind(&f));
        assert!(
            k == FrameKind::Key || in_step,
            "{case}: alice comes as a keyframe"
        );
        let id = v.apply(ServerMessage::Frame(f)).expect("applies");
        assert_eq!(id.as_deref(), Some("alice"), "{case}: alice decodes");
        if k == FrameKind::Key {
            let want = reference.garment(seq).await;
            assert!(
                v.avatars["alice"].positions == want,
                "{case}: alice's frame {seq} decodes as the in-step viewer's"
            );
            return seq;
        }
    }
    panic!("{case}: no keyframe of alice within 5 of her frames");
}

/// Reads `c` for `span`: bob streams, alice sends nothing.
async fn alice_stays_quiet(c: &mut Client, v: &mut Viewer, span: Duration) {
    let bob = v.avatars.get("bob").map_or(0, |a| a.frames);
    let end = tokio::time::Instant::now() + span;
    while let Ok(m) = tokio::time::timeout_at(end, c.next()).await {
        let m = m.expect("message");
        if let ServerMessage::Frame(f) = &m {
            assert_eq!(f.avatar, "bob", "an idle avatar sends nothing unasked");
        }
        v.apply(m).expect("applies");
    }
    assert!(v.avatars["bob"].frames >= bob + 5, "bob streamed on");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn viewers_that_join_or_resync_while_a_performer_is_quiet_still_see_them() {
    let mut cfg = config();
    cfg.engine.idle_timeout = 0.5;
    let server = start(db(), cfg).await.expect("server starts");
    let url = format!("ws://{}/ws", server.addr);
    // alice moves for 0.6 s then goes quiet; bob moves throughout
    let mut publisher = connect_publisher(&url).await;
    let (quiet_tx, quiet_rx) = tokio::sync::oneshot::channel();
    let publishing = tokio::spawn(async move {
        let mut quiet_tx = Some(quiet_tx);
        for i in 0..1500 {
            let t = f64::from(i) * 0.02;
            let angle = 0.3 + 0.5 * (t as f32 * 3.0).sin().abs();
            let who: &[&str] = if t < 0.6 { &["alice", "bob"] } else { &["bob"] };
            if t >= 0.6
                && let Some(tx) = quiet_tx.take()
            {
                let _ = tx.send(());
            }
            for who in who {
                if publisher.send(&arm_pose(who, angle, t)).await.is_err() {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let mut reference = Reference::start(&url).await;
    quiet_rx.await.expect("alice goes quiet");
    // idle after 0.5 s of quiet
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let keyframes = server.keyframes();

    // a viewer of every avatar joins: alice comes once, as a keyframe, then nothing
    let mut all = connect_viewer(&url).await;
    let mut v = Viewer::default();
    keyframe_of_alice(&mut all, &mut v, &mut reference, false, "joined").await;
    assert!(server.keyframes() > keyframes);
    alice_stays_quiet(&mut all, &mut v, Duration::from_millis(600)).await;

    // a viewer of alice alone joins: the same
    let mut one = connect_viewer_to(&url, Some(&["alice"])).await;
    let mut w = Viewer::default();
    keyframe_of_alice(&mut one, &mut w, &mut reference, false, "joined for alice").await;

    // the first viewer loses step with alice (say its decoder refused a frame) and
    // asks: a keyframe comes although alice still sends nothing
    let resync = ClientMessage::Resync(ResyncMessage {
        avatars: vec!["alice".into()],
        assets: vec![],
    });
    all.send(&resync).await.expect("resync");
    keyframe_of_alice(&mut all, &mut v, &mut reference, true, "resync").await;
    assert_eq!(server.resyncs(), 1);
    alice_stays_quiet(&mut all, &mut v, Duration::from_millis(400)).await;

    publishing.abort();
    reference.task.abort();
    server.shutdown().await;
}
