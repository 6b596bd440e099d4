//! What connections may hold on the server, over time: avatar places are given back
//! when an avatar is removed, so a long-lived source whose performers come and go (a
//! kiosk, a VMC listener) keeps working after its first visitors have left; a publisher
//! that lost the last place to another is told by name; a viewer's subscription is
//! bounded.

use std::time::Duration;

use clothcast::client::{Client, Viewer};
use clothcast::engine::EngineConfig;
use clothcast::net::{ServerConfig, start};
use clothcast::skeleton::{Pose, Skeleton};
use tokio_tungstenite::tungstenite::Message;

use super::server::{
    arm_pose, body_frame, config, connect_publisher, connect_viewer, db, expect_error, metric,
    more_frames, until,
};

/// A server on the small test database; its handle and WebSocket URL.
async fn serve(config: ServerConfig) -> (clothcast::net::ServerHandle, String) {
    let server = start(db(), config).await.expect("server starts");
    let url = format!("ws://{}/ws", server.addr);
    (server, url)
}

/// A VMC datagram: one `/VMC/Ext/Bone/Pos` message, the hips at the origin at rest.
fn vmc_hips() -> Vec<u8> {
    use rosc::{OscMessage, OscPacket, OscType};
    let mut args = vec![OscType::String("Hips".into())];
    args.extend([0.0f32, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0].map(OscType::Float));
    rosc::encoder::encode(&OscPacket::Message(OscMessage {
        addr: "/VMC/Ext/Bone/Pos".into(),
        args,
    }))
    .expect("encodes")
}

/// Avatars go idle after 0.2 s of silence and are removed after 0.6 s.
fn quick_removal(config: ServerConfig) -> ServerConfig {
    ServerConfig {
        engine: EngineConfig {
            idle_timeout: 0.2,
            remove_after: 0.6,
            ..config.engine
        },
        ..config
    }
}

/// A kiosk set to dress one customer within 3 m: of the bodies its sensor reports, the
/// nearest within reach drives an avatar and the others (a friend beside them, people
/// walking past behind) drive none; when the customer leaves, the friend is next, and a
/// body beyond 3 m never is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kiosk_dresses_the_nearest_body_within_reach_only() {
    use clothcast::mocap::{KinectKind, SensorView, body_json};
    let db = db();
    let skeleton = Skeleton::from_rest_positions(db.body.skeleton);
    let (server, url) = serve(quick_removal(ServerConfig {
        kinect_bodies: 1,
        kinect_max_distance: 3.0,
        ..config()
    }))
    .await;
    let mut viewer = connect_viewer(&url).await;
    let mut kiosk = connect_publisher(&url).await;
    let mut view = Viewer::default();
    // a body frame with each (id, distance from the sensor) standing at rest
    let frame = |bodies: &[(&str, f32)]| {
        let joints = skeleton.world_frames(&Pose::rest());
        let list: Vec<serde_json::Value> = bodies
            .iter()
            .map(|&(id, distance)| {
                let view = SensorView {
                    distance,
                    height: 1.0,
                    tilt: 0.0,
                };
                body_json(KinectKind::V2, id, &joints, &view)
            })
            .collect();
        Message::Text(serde_json::json!({ "bodies": list }).to_string().into())
    };
    // the crowd, then the customer leaves: each time the nearest within reach is dressed
    // and nobody else is (the customer's avatar lingers until it is removed)
    let stages: [(&[(&str, f32)], &str); 2] = [
        (
            &[("passer", 4.5), ("customer", 1.9), ("friend", 2.3)],
            "kinect-customer",
        ),
        (&[("passer", 4.5), ("friend", 2.3)], "kinect-friend"),
    ];
    let mut dressed = Vec::new();
    for (bodies, nearest) in stages {
        for _ in 0..5 {
            kiosk.send_raw(frame(bodies)).await.expect("send");
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
        until(&mut viewer, &mut view, |v, _| {
            v.avatars.get(nearest).is_some_and(|a| a.frames >= 3)
        })
        .await;
        dressed.push(nearest.to_string());
        assert!(
            view.avatars.keys().all(|k| dressed.contains(k)),
            "{:?}",
            view.avatars.keys()
        );
    }
    // nothing was refused: left-out bodies are not errors
    let errors = metric(server.addr, "clothcast_bad_messages_total").await;
    assert_eq!(errors, 0.0);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kinect_kiosk_takes_new_visitors_after_earlier_ones_have_left() {
    let db = db();
    let skeleton = Skeleton::from_rest_positions(db.body.skeleton);
    let server = start(
        db,
        quick_removal(ServerConfig {
            max_avatars_per_publisher: 2,
            ..config()
        }),
    )
    .await
    .expect("server starts");
    let url = format!("ws://{}/ws", server.addr);
    let mut viewer = connect_viewer(&url).await;
    let mut kiosk = connect_publisher(&url).await;
    let mut view = Viewer::default();
    // each visitor is a new body id, as Kinect trackers number them
    let visit = async |kiosk: &mut Client, viewer: &mut Client, view: &mut Viewer, id: &str| {
        let avatar = format!("kinect-{id}");
        let frame = body_frame(false, id, &Pose::rest(), &skeleton);
        for _ in 0..3 {
            kiosk
                .send_raw(Message::Text(frame.clone().into()))
                .await
                .expect("send");
        }
        until(viewer, view, |v, _| {
            v.avatars.get(&avatar).is_some_and(|a| a.frames >= 2)
        })
        .await;
    };
    visit(&mut kiosk, &mut viewer, &mut view, "1").await;
    visit(&mut kiosk, &mut viewer, &mut view, "2").await;
    // two visitors in front of the sensor: a third is refused, by name
    let third = body_frame(false, "3", &Pose::rest(), &skeleton);
    kiosk
        .send_raw(Message::Text(third.clone().into()))
        .await
        .expect("send");
    let why = expect_error(&mut kiosk, "too_many_avatars").await;
    assert!(why.contains("body 3"), "{why}");
    // the first two leave (their bodies drop out of the frames); once their avatars are
    // removed, new visitors are driven, more of them over time than the limit
    until(&mut viewer, &mut view, |v, _| {
        !v.avatars.contains_key("kinect-1") && !v.avatars.contains_key("kinect-2")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    visit(&mut kiosk, &mut viewer, &mut view, "3").await;
    visit(&mut kiosk, &mut viewer, &mut view, "4").await;
    // a body whose avatar id (kinect-<sensor>-<id>) would pass 64 characters is refused
    // by name rather than taken and then dropped at every tick
    let mut long = Client::connect_with(
        &url,
        clothcast::protocol::Role::Publisher,
        Some("pub".into()),
        Some("s".repeat(32)),
    )
    .await
    .expect("sensor connects");
    let id = "b".repeat(32);
    long.send_raw(Message::Text(
        body_frame(false, &id, &Pose::rest(), &skeleton).into(),
    ))
    .await
    .expect("send");
    let why = expect_error(&mut long, "bad_avatar_id").await;
    assert!(why.contains("1–64 characters"), "{why}");
    // so is one whose body id carries a terminal escape sequence (an operator's
    // `clothcast watch` would run it)
    let mut kiosk = connect_publisher(&url).await;
    let escape = "\u{1b}]0;pwned\u{7}";
    kiosk
        .send_raw(Message::Text(
            body_frame(false, escape, &Pose::rest(), &skeleton).into(),
        ))
        .await
        .expect("send");
    let why = expect_error(&mut kiosk, "bad_avatar_id").await;
    assert!(why.contains("control or invisible"), "{why}");
    assert!(
        !why.contains('\u{1b}'),
        "the refusal quotes the id escaped: {why:?}"
    );
    server.shutdown().await;
}

/// Avatar ids with control or invisible characters are refused wherever an id comes
/// in (a pose, a wear or calibrate message, a configured VMC avatar), and no such
/// avatar reaches the engine, the logs or the metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn avatar_ids_with_control_or_invisible_characters_are_refused() {
    use clothcast::protocol::{CalibrateMessage, ClientMessage};
    let refused = start(
        db(),
        ServerConfig {
            vmc_avatar: Some("vtuber\nINFO fake log line".into()),
            ..config()
        },
    )
    .await;
    match refused {
        Err(e @ clothcast::net::NetError::BadVmcAvatar(_)) => {
            assert!(e.to_string().contains("vmc_avatar"), "{e}");
        }
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("a vmc_avatar with a newline was accepted"),
    }
    let (server, url) = serve(config()).await;
    let mut publisher = connect_publisher(&url).await;
    for id in [
        "alice\u{1b}[2J",
        "bob\nmallory",
        "\u{202e}eve",
        "zero\u{200b}width",
    ] {
        publisher.send(&arm_pose(id, 0.3, 1.0)).await.expect("pose");
        let why = expect_error(&mut publisher, "bad_pose").await;
        assert!(why.contains("control or invisible"), "{id:?}: {why}");
        let wear = ClientMessage::wear(id, &["tshirt"]);
        publisher.send(&wear).await.expect("wear");
        expect_error(&mut publisher, "bad_message").await;
        let calibrate = ClientMessage::Calibrate(CalibrateMessage { avatar: id.into() });
        publisher.send(&calibrate).await.expect("calibrate");
        expect_error(&mut publisher, "bad_message").await;
    }
    // a good id on the same connection still works
    publisher
        .send(&arm_pose("alice", 0.3, 2.0))
        .await
        .expect("pose");
    let mut viewer = connect_viewer(&url).await;
    let mut view = Viewer::default();
    more_frames(&mut viewer, &mut view, "alice", 2).await;
    assert_eq!(
        view.avatars.len(),
        1,
        "{:?}",
        view.avatars.keys().collect::<Vec<_>>()
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vmc_listener_takes_a_sender_on_a_new_port_after_the_old_one_went_silent() {
    let (server, url) = serve(quick_removal(ServerConfig {
        vmc_bind: Some("127.0.0.1:0".parse().expect("addr")),
        engine: EngineConfig {
            max_avatars: 1,
            ..EngineConfig::default()
        },
        ..config()
    }))
    .await;
    let vmc = server.vmc_addr.expect("VMC listener");
    let mut viewer = connect_viewer(&url).await;
    let mut view = Viewer::default();
    let hips = vmc_hips();
    // a VMC app sends from an ephemeral port; restarted, it sends from another
    for _ in 0..3 {
        let sender = tokio::net::UdpSocket::bind("127.0.0.1:0")
            .await
            .expect("udp");
        let avatar = format!("vmc-{}", sender.local_addr().expect("addr"));
        // it sends a pose every 20 ms (datagrams from a sender the server cannot take
        // are dropped, as the VMC spec has it)
        let sending = tokio::spawn({
            let hips = hips.clone();
            async move {
                for _ in 0..250 {
                    let _ = sender.send_to(&hips, vmc).await;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        });
        until(&mut viewer, &mut view, |v, _| {
            v.avatars.get(&avatar).is_some_and(|a| a.frames >= 2)
        })
        .await;
        sending.abort();
        // it stops; its avatar is removed
        until(&mut viewer, &mut view, |v, _| {
            !v.avatars.contains_key(&avatar)
        })
        .await;
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishers_racing_for_the_last_place_are_told_who_lost() {
    // slow ticks (a slot every 125 ms): both first poses arrive before the tick that
    // admits avatars, so both pass the door and the engine keeps only one
    let (server, url) = serve(ServerConfig {
        engine: EngineConfig {
            max_avatars: 1,
            tick_hz: 2.0,
            ..EngineConfig::default()
        },
        ..config()
    })
    .await;
    let mut a = connect_publisher(&url).await;
    let mut b = connect_publisher(&url).await;
    a.send(&arm_pose("a", 0.3, 0.0)).await.expect("pose");
    b.send(&arm_pose("b", 0.3, 0.0)).await.expect("pose");
    // each keeps publishing; the one whose avatar the engine refused hears of it
    let mut told = Vec::new();
    for step in 1..=12 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        for (name, c) in [("a", &mut a), ("b", &mut b)] {
            c.send(&arm_pose(name, 0.3, f64::from(step)))
                .await
                .expect("pose");
            if let Ok(Ok(m)) = tokio::time::timeout(Duration::from_millis(5), c.next()).await {
                match m {
                    clothcast::protocol::ServerMessage::Error { code, .. }
                        if code == "server_full" =>
                    {
                        told.push(name)
                    }
                    other => panic!("{name}: unexpected {other:?}"),
                }
            }
        }
    }
    told.dedup();
    assert_eq!(told.len(), 1, "exactly one publisher is told: {told:?}");
    // and the other's avatar streams
    let winner = if told[0] == "a" { "b" } else { "a" };
    let mut viewer = connect_viewer(&url).await;
    let mut view = Viewer::default();
    let mut winning = if winner == "a" { a } else { b };
    winning
        .send(&arm_pose(winner, 0.3, 20.0))
        .await
        .expect("pose");
    until(&mut viewer, &mut view, |v, _| {
        v.avatars.get(winner).is_some_and(|x| x.frames >= 1)
    })
    .await;
    assert!(!view.avatars.contains_key(told[0]));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_naming_more_avatars_than_the_server_drives_is_refused_by_name() {
    let (server, url) = serve(ServerConfig {
        engine: EngineConfig {
            max_avatars: 4,
            ..EngineConfig::default()
        },
        ..config()
    })
    .await;
    let mut publisher = connect_publisher(&url).await;
    let mut viewer = super::server::connect_viewer_to(&url, Some(&["a"])).await;
    let mut view = Viewer::default();
    let mut t = 0.0;
    let mut publish = async |publisher: &mut Client| {
        t += 1.0;
        publisher.send(&arm_pose("a", 0.3, t)).await.expect("pose");
    };
    publish(&mut publisher).await;
    until(&mut viewer, &mut view, |v, _| {
        v.avatars.get("a").is_some_and(|x| x.frames >= 1)
    })
    .await;
    let names: Vec<String> = (0..5).map(|i| format!("x{i}")).collect();
    viewer
        .send(&clothcast::protocol::ClientMessage::subscribe(Some(names)))
        .await
        .expect("subscribe");
    // the refusal comes among the frames; the subscription before it still applies
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut refused = None;
    let mut frames_after = 0;
    while refused.is_none() || frames_after < 3 {
        publish(&mut publisher).await;
        let m = tokio::time::timeout_at(deadline, viewer.next())
            .await
            .expect("timed out")
            .expect("message");
        match m {
            clothcast::protocol::ServerMessage::Error { code, message } => {
                assert_eq!(code, "bad_subscription");
                refused = Some(message);
            }
            other => {
                if view.apply(other).expect("applies").as_deref() == Some("a") && refused.is_some()
                {
                    frames_after += 1;
                }
            }
        }
    }
    let why = refused.unwrap_or_default();
    assert!(
        why.contains("at most 4 avatars") && why.contains("this one 5"),
        "{why}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_limit_are_answered_503_before_the_upgrade() {
    // two connections that have not said hello yet hold both places
    let (server, url, first, _second) = two_places_then_503(
        ServerConfig {
            max_connections: 2,
            ..config()
        },
        "connection limit of 2",
    )
    .await;
    assert_eq!(metric(server.addr, "clothcast_connections").await, 2.0);
    assert_eq!(
        metric(server.addr, "clothcast_connections_refused_total").await,
        1.0
    );
    // one leaves: its place is free again, for a client that goes on to say hello
    drop(first);
    until_connections_at_most(server.addr, 1.0).await;
    let mut publisher = connect_publisher(&url).await;
    publisher
        .send(&arm_pose("a", 0.3, 0.0))
        .await
        .expect("pose");
    server.shutdown().await;
}

/// A raw WebSocket connection that says hello as `role` and then is never read (so it
/// never answers a ping), its receive window `rcvbuf` bytes.
async fn unread(
    addr: std::net::SocketAddr,
    role: clothcast::protocol::Role,
    subscribe: bool,
    rcvbuf: u32,
) -> tokio_tungstenite::WebSocketStream<tokio::net::TcpStream> {
    use clothcast::protocol::{ClientMessage, HelloMessage};
    use futures_util::SinkExt;
    let sock = tokio::net::TcpSocket::new_v4().expect("socket");
    sock.set_recv_buffer_size(rcvbuf).expect("rcvbuf");
    let stream = sock.connect(addr).await.expect("connect");
    let url = format!("ws://{addr}/ws");
    let (mut ws, _) = tokio_tungstenite::client_async(url.as_str(), stream)
        .await
        .expect("handshake");
    let token = match role {
        clothcast::protocol::Role::Viewer => "view",
        _ => "pub",
    };
    let mut say = vec![ClientMessage::Hello(HelloMessage {
        version: clothcast::protocol::PROTOCOL_VERSION,
        role,
        token: Some(token.into()),
        sensor: None,
    })];
    if subscribe {
        say.push(ClientMessage::subscribe(None));
    }
    for m in say {
        ws.send(Message::Binary(m.to_msgpack().expect("encodes").into()))
            .await
            .expect("send");
    }
    ws
}

/// Waits (at most 10 s) until the metric `name` reads `want`.
async fn metric_reaches(addr: std::net::SocketAddr, name: &str, want: f64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let got = metric(addr, name).await;
        if got == want {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name} stays at {got}, not {want}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_that_vanish_or_stop_reading_are_closed_after_peer_timeout_and_no_one_else() {
    use clothcast::protocol::Role;
    let (server, url) = serve(ServerConfig {
        peer_timeout: 0.6,
        send_buffer_bytes: 16 * 1024,
        ..config()
    })
    .await;
    // a live publisher and viewer, which answer pings whenever they read
    let mut publisher = connect_publisher(&url).await;
    let mut viewer = connect_viewer(&url).await;
    // a publisher whose network went away: it says hello, then nothing, not even pongs
    let _vanished = unread(server.addr, Role::Publisher, false, 64 * 1024).await;
    metric_reaches(server.addr, "clothcast_publishers", 2.0).await;
    // a viewer that stops reading, with a tiny window so that the server's writes stall
    let _stuck = unread(server.addr, Role::Viewer, true, 2048).await;
    metric_reaches(server.addr, "clothcast_viewers", 2.0).await;
    // 8 avatars stream for 2.5 s (four peer timeouts); the live viewer reads throughout
    let mut view = Viewer::default();
    let started = tokio::time::Instant::now();
    let mut t = 0.0;
    // the stuck viewer shows in the metrics while its writes wait
    let mut stalled_seen = 0.0f64;
    while started.elapsed() < Duration::from_millis(2500) {
        t += 1.0 / 30.0;
        stalled_seen = stalled_seen.max(metric(server.addr, "clothcast_connections_stalled").await);
        for i in 0..8 {
            publisher
                .send(&arm_pose(
                    &format!("crowd-{i}"),
                    0.3 + 0.1 * (t as f32).sin(),
                    t,
                ))
                .await
                .expect("pose");
        }
        let until_t = tokio::time::Instant::now() + Duration::from_millis(33);
        while let Ok(Ok(m)) = tokio::time::timeout_at(until_t, viewer.next()).await {
            view.apply(m).expect("decodes");
        }
        // the publisher reads too (its pongs)
        let _ = tokio::time::timeout(Duration::from_millis(1), publisher.next()).await;
    }
    // the two silent ones are gone, the live ones are not
    metric_reaches(server.addr, "clothcast_publishers", 1.0).await;
    metric_reaches(server.addr, "clothcast_viewers", 1.0).await;
    assert_eq!(
        stalled_seen, 1.0,
        "the stuck viewer, and only it, counted as stalled"
    );
    assert_eq!(
        metric(server.addr, "clothcast_connections_stalled").await,
        0.0
    );
    assert_eq!(
        metric(server.addr, "clothcast_peers_timed_out_total").await,
        2.0
    );
    assert!(
        (0..8).all(|i| view
            .avatars
            .get(&format!("crowd-{i}"))
            .is_some_and(|a| a.frames >= 30)),
        "the live viewer got every avatar's frames"
    );
    publisher
        .send(&arm_pose("crowd-0", 0.9, t + 1.0))
        .await
        .expect("pose");
    more_frames(&mut viewer, &mut view, "crowd-0", 3).await;
    server.shutdown().await;
}

/// A viewer that subscribes again to what it already watches costs no keyframe (its
/// streams stay in step), however often it does; one that comes back to an avatar it
/// had dropped gets a keyframe of it, and the frames it did not want are not counted as
/// dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resubscribing_costs_no_keyframes_for_avatars_still_watched() {
    use clothcast::protocol::ClientMessage;
    let (server, url) = serve(config()).await;
    let mut publisher = connect_publisher(&url).await;
    // another viewer watches everything throughout, reading all it is sent
    let mut other = connect_viewer(&url).await;
    let other = tokio::spawn(async move { while other.next().await.is_ok() {} });
    let mut viewer = super::server::connect_viewer_to(&url, Some(&["a"])).await;
    metric_reaches(server.addr, "clothcast_viewers", 2.0).await;
    let mut view = Viewer::default();
    let t = std::cell::Cell::new(0.0f64);
    // publishes a pose of "a" before each message read, until it has `n` more frames
    let frames = async |publisher: &mut Client, viewer: &mut Client, view: &mut Viewer, n| {
        let before = view.avatars.get("a").map_or(0, |x| x.frames);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while view.avatars.get("a").map_or(0, |x| x.frames) < before + n {
            t.set(t.get() + 1.0 / 30.0);
            publisher
                .send(&arm_pose("a", 0.3 + 0.2 * (t.get() as f32).sin(), t.get()))
                .await
                .expect("pose");
            let m = tokio::time::timeout_at(deadline, viewer.next())
                .await
                .expect("timed out")
                .expect("message");
            view.apply(m).expect("decodes");
        }
    };
    frames(&mut publisher, &mut viewer, &mut view, 5).await;
    let keys = metric(server.addr, "clothcast_keyframes_total").await;
    assert_eq!(keys, 1.0, "the stream started with one keyframe");
    let subscribe = |avatars: &[&str]| {
        ClientMessage::subscribe(Some(avatars.iter().map(|a| a.to_string()).collect()))
    };
    for _ in 0..30 {
        viewer.send(&subscribe(&["a"])).await.expect("subscribe");
    }
    frames(&mut publisher, &mut viewer, &mut view, 10).await;
    assert_eq!(
        metric(server.addr, "clothcast_keyframes_total").await,
        keys,
        "resubscribing to the same avatar made keyframes"
    );
    // away and back while the other viewer keeps "a" streaming: a keyframe, and the
    // frames it did not want meanwhile are not counted as dropped
    viewer.send(&subscribe(&["b"])).await.expect("subscribe");
    for _ in 0..10 {
        t.set(t.get() + 1.0 / 30.0);
        publisher
            .send(&arm_pose("a", 0.3, t.get()))
            .await
            .expect("pose");
        tokio::time::sleep(Duration::from_millis(33)).await;
    }
    viewer.send(&subscribe(&["a"])).await.expect("subscribe");
    let seq_before = view.avatars["a"].last.as_ref().map_or(0, |f| f.seq);
    frames(&mut publisher, &mut viewer, &mut view, 5).await;
    let seq_after = view.avatars["a"].last.as_ref().map_or(0, |f| f.seq);
    assert!(seq_after > seq_before + 10, "the stream went on meanwhile");
    assert_eq!(
        metric(server.addr, "clothcast_keyframes_total").await,
        keys + 1.0
    );
    assert_eq!(
        metric(server.addr, "clothcast_frames_dropped_total").await,
        0.0
    );
    other.abort();
    server.shutdown().await;
}

/// A client that opens connections and never finishes a request (slowloris) does not
/// hold them: each connection has `hello_timeout` to send its request headers, and is
/// closed after it; a client that finishes in time is served as ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_never_finish_their_request_headers_are_closed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (server, url) = serve(ServerConfig {
        hello_timeout: 0.5,
        ..config()
    })
    .await;
    let mut slow = Vec::new();
    for _ in 0..8 {
        let mut tcp = tokio::net::TcpStream::connect(server.addr)
            .await
            .expect("connects");
        tcp.write_all(b"GET /ws HTTP/1.1\r\nHost: clothcast\r\n")
            .await
            .expect("writes");
        slow.push(tcp);
    }
    let started = tokio::time::Instant::now();
    for mut tcp in slow {
        let mut buf = [0u8; 256];
        // closed (possibly after a 408 reply) rather than left waiting for the rest
        let deadline = started + Duration::from_secs(5);
        loop {
            match tokio::time::timeout_at(deadline, tcp.read(&mut buf)).await {
                Ok(Ok(0) | Err(_)) => break,
                Ok(Ok(_)) => {}
                Err(_) => panic!("a half-sent request was kept open for 5 s"),
            }
        }
    }
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "closed too early"
    );
    // a client that sends its request in time is served
    let health = super::server::http_get(server.addr, "/healthz").await;
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    let _viewer = connect_viewer(&url).await;
    server.shutdown().await;
}

/// Connections still served as plain HTTP are bounded by `max_connections` too: a
/// flood of half-sent requests within `hello_timeout` is closed as it is accepted,
/// counted as refused, and the server serves again once they are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_unfinished_requests_is_bounded_by_max_connections() {
    let (server, url) = serve(ServerConfig {
        hello_timeout: 3.0,
        max_connections: 3,
        ..config()
    })
    .await;
    // three are held (until hello_timeout), three were closed at once
    let (_flood, closed) = flood_of_unfinished_requests(server.addr, 6).await;
    assert_eq!(closed, 3, "connections over the limit closed at once");
    // once the held ones have timed out, the server serves again
    tokio::time::sleep(Duration::from_millis(3300)).await;
    assert_eq!(
        metric(server.addr, "clothcast_connections_refused_total").await,
        3.0,
        "refusals counted"
    );
    let _viewer = connect_viewer(&url).await;
    server.shutdown().await;
}

/// One address cannot take every place: past `max_connections_per_address` its
/// connections are answered 503 before the upgrade, while another address (127.0.0.2,
/// also loopback) still gets in; a place it frees is its own again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_is_held_to_its_share_of_the_connections() {
    let (server, url, first, _second) = two_places_then_503(
        ServerConfig {
            max_connections_per_address: 2,
            ..config()
        },
        "connection limit of 2 per address",
    )
    .await;
    assert_eq!(
        metric(server.addr, "clothcast_connections_refused_total").await,
        1.0
    );
    // another address has its own places
    let tcp = from_127_0_0_2(server.addr).await;
    let (_other, _) = tokio_tungstenite::client_async(url.as_str(), tcp)
        .await
        .expect("a connection from 127.0.0.2 is taken");
    assert_eq!(metric(server.addr, "clothcast_connections").await, 3.0);
    // one leaves: its address may connect again
    drop(first);
    until_connections_at_most(server.addr, 2.0).await;
    let mut publisher = connect_publisher(&url).await;
    publisher
        .send(&arm_pose("a", 0.3, 0.0))
        .await
        .expect("pose");
    server.shutdown().await;
}

/// Behind a trusted reverse proxy every connection comes from the proxy's address: the
/// per-address limit counts the clients it names in `X-Forwarded-For` instead, and a
/// client that is not a trusted proxy cannot choose its address with the header.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_trusted_proxy_the_forwarded_client_is_counted() {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let (server, url) = serve(ServerConfig {
        max_connections_per_address: 1,
        trusted_proxies: vec!["127.0.0.1/32".parse().expect("network")],
        ..config()
    })
    .await;
    let forwarded = |client: &str| {
        let mut req = url.as_str().into_client_request().expect("request");
        req.headers_mut()
            .insert("x-forwarded-for", client.parse().expect("header value"));
        req
    };
    let via_proxy = |client: &str| tokio_tungstenite::connect_async(forwarded(client));
    let (_a, _) = via_proxy("203.0.113.7").await.expect("first client");
    let (_b, _) = via_proxy("203.0.113.8")
        .await
        .expect("another client through the same proxy");
    assert_503(
        via_proxy("6.6.6.6, 203.0.113.7").await,
        "per address",
        "the first client's second connection",
    );
    // from an untrusted address the header is ignored: 127.0.0.2 is counted as itself
    let tcp = from_127_0_0_2(server.addr).await;
    let (_c, _) = tokio_tungstenite::client_async(forwarded("203.0.113.9"), tcp)
        .await
        .expect("127.0.0.2 has its own place");
    let tcp = from_127_0_0_2(server.addr).await;
    assert_503(
        tokio_tungstenite::client_async(forwarded("203.0.113.10"), tcp).await,
        "per address",
        "127.0.0.2 chose another address with the header",
    );
    // an IPv6 client is counted by its /64 network: another address of the same
    // host's /64 does not get a place of its own, another network does
    let (_v6, _) = via_proxy("2001:db8:7:7::1").await.expect("an IPv6 client");
    assert_503(
        via_proxy("2001:db8:7:7:ffff::2").await,
        "per address",
        "another address of the same /64",
    );
    let (_v6_other, _) = via_proxy("2001:db8:7:8::1")
        .await
        .expect("another /64 has its own place");
    server.shutdown().await;
}

/// A TCP connection to `addr` from 127.0.0.2 (loopback too, but another address).
async fn from_127_0_0_2(addr: std::net::SocketAddr) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind("127.0.0.2:0".parse().expect("addr"))
        .expect("127.0.0.2 is loopback");
    socket.connect(addr).await.expect("connects")
}

/// `r` is an HTTP 503 before the upgrade whose body says `says`.
pub(super) fn assert_503<T: std::fmt::Debug>(
    r: Result<T, tokio_tungstenite::tungstenite::Error>,
    says: &str,
    what: &str,
) {
    match r {
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => {
            assert_eq!(r.status(), 503, "{what}");
            let body = String::from_utf8_lossy(r.body().as_deref().unwrap_or_default());
            assert!(body.contains(says), "{what}: {body}");
        }
        other => panic!("{what}: {other:?}"),
    }
}

/// Waits (up to 10 s) until the server has at most `n` open connections.
async fn until_connections_at_most(addr: std::net::SocketAddr, n: f64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while metric(addr, "clothcast_connections").await > n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the place was not freed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A server whose `config` has two places for 127.0.0.1's connections: two connect
/// (without saying hello) and a third is answered 503 saying `says`.
async fn two_places_then_503(
    config: ServerConfig,
    says: &str,
) -> (clothcast::net::ServerHandle, String, Ws, Ws) {
    let (server, url) = serve(config).await;
    let (first, _) = tokio_tungstenite::connect_async(&url)
        .await
        .expect("first connects");
    let (second, _) = tokio_tungstenite::connect_async(&url)
        .await
        .expect("second connects");
    assert_503(
        tokio_tungstenite::connect_async(&url).await,
        says,
        "a third connection",
    );
    (server, url, first, second)
}

/// Opens `n` connections to `addr` that start a request and never finish it; returns
/// them and how many the server closed at once.
async fn flood_of_unfinished_requests(
    addr: std::net::SocketAddr,
    n: usize,
) -> (Vec<tokio::net::TcpStream>, usize) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut flood = Vec::new();
    for _ in 0..n {
        let mut tcp = tokio::net::TcpStream::connect(addr)
            .await
            .expect("connects");
        // (a write to a connection the server already closed may fail: that is fine)
        let _ = tcp.write_all(b"GET /ws HTTP/1.1\r\n").await;
        flood.push(tcp);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut closed = 0;
    for tcp in &mut flood {
        let mut buf = [0u8; 64];
        if let Ok(Ok(0) | Err(_)) =
            tokio::time::timeout(Duration::from_millis(300), tcp.read(&mut buf)).await
        {
            closed += 1;
        }
    }
    (flood, closed)
}

/// One host's flood of unfinished requests holds at most `max_connections_per_address`
/// of the places for plain HTTP connections: the rest are closed at once and another
/// address is served meanwhile. A trusted proxy is exempt (it carries many clients).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_hosts_flood_of_unfinished_requests_leaves_room_for_others() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (server, _url) = serve(ServerConfig {
        hello_timeout: 30.0,
        max_connections_per_address: 2,
        ..config()
    })
    .await;
    let (_flood, closed) = flood_of_unfinished_requests(server.addr, 5).await;
    assert_eq!(closed, 3, "one address holds two places");
    let mut other = from_127_0_0_2(server.addr).await;
    other
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .expect("request");
    let mut reply = String::new();
    tokio::time::timeout(Duration::from_secs(5), other.read_to_string(&mut reply))
        .await
        .expect("answered in time")
        .expect("reads");
    assert!(
        reply.starts_with("HTTP/1.1 200") && reply.ends_with("ok\n"),
        "{reply}"
    );
    server.shutdown().await;
    let (server, _url) = serve(ServerConfig {
        hello_timeout: 30.0,
        max_connections_per_address: 2,
        trusted_proxies: vec!["127.0.0.1/32".parse().expect("network")],
        ..config()
    })
    .await;
    let (_flood, closed) = flood_of_unfinished_requests(server.addr, 5).await;
    assert_eq!(
        closed, 0,
        "a trusted proxy's connections are not held to one address's share"
    );
    server.shutdown().await;
}

/// UDP carries no token, so a VMC or MVN listener on the network takes the senders its
/// allow list names and no others: datagrams from elsewhere are dropped unread (no
/// avatar, no place taken) and counted. Loopback's other addresses stand in for the
/// performers' machines and a stranger's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_listeners_take_only_the_senders_their_allow_lists_name() {
    use clothcast::mocap::mvn_datagram;
    let net = |s: &str| s.parse().expect("network");
    let (server, url) = serve(ServerConfig {
        vmc_bind: Some("127.0.0.1:0".parse().expect("addr")),
        vmc_allow: vec![net("127.0.0.2/32")],
        mvn_bind: Some("127.0.0.1:0".parse().expect("addr")),
        mvn_allow: vec![net("127.0.0.4/31")],
        ..config()
    })
    .await;
    let (vmc, mvn) = (
        server.vmc_addr.expect("VMC listener"),
        server.mvn_addr.expect("MVN listener"),
    );
    let mut viewer = connect_viewer(&url).await;
    let mut view = Viewer::default();
    let hips = vmc_hips();
    let skeleton = Skeleton::from_rest_positions(db().body.skeleton);
    let socket = |ip: &str| {
        let addr = format!("{ip}:0");
        async move { tokio::net::UdpSocket::bind(addr).await.expect("udp") }
    };
    let (performer, stranger) = (socket("127.0.0.2").await, socket("127.0.0.3").await);
    let (suit, intruder) = (socket("127.0.0.5").await, socket("127.0.0.6").await);
    let performer_avatar = format!("vmc-{}", performer.local_addr().expect("addr"));
    let stranger_avatar = format!("vmc-{}", stranger.local_addr().expect("addr"));
    for k in 1..=20u32 {
        for s in [&performer, &stranger] {
            s.send_to(&hips, vmc).await.expect("send");
        }
        let d = mvn_datagram(&Pose::rest(), &skeleton, 0, k, k * 16).expect("sendable");
        for s in [&suit, &intruder] {
            s.send_to(&d, mvn).await.expect("send");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    until(&mut viewer, &mut view, |v, _| {
        [performer_avatar.as_str(), "mvn-127.0.0.5-0"]
            .iter()
            .all(|a| v.avatars.get(*a).is_some_and(|a| a.frames >= 2))
    })
    .await;
    more_frames(&mut viewer, &mut view, &performer_avatar, 5).await;
    assert!(
        !view.avatars.contains_key(&stranger_avatar),
        "{:?}",
        view.avatars.keys()
    );
    assert!(
        !view.avatars.contains_key("mvn-127.0.0.6-0"),
        "{:?}",
        view.avatars.keys()
    );
    assert_eq!(metric(server.addr, "clothcast_avatars").await, 2.0);
    let refused = |input: &str| format!("clothcast_udp_refused_total{{input=\"{input}\"}}");
    assert_eq!(metric(server.addr, &refused("vmc")).await, 20.0);
    assert_eq!(metric(server.addr, &refused("mvn")).await, 20.0);
    // refused datagrams are not bad ones: nothing of them was read
    assert_eq!(
        metric(server.addr, "clothcast_bad_messages_total").await,
        0.0
    );
    server.shutdown().await;
}
