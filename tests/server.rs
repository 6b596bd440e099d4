//! The server over real sockets on 127.0.0.1: publishers in, garment frames out.

use std::sync::Arc;
use std::time::Duration;

use clothcast::client::{Client, Viewer};
use clothcast::net::{ServerConfig, start, start_with_garments};
use clothcast::protocol::{
    CalibrateMessage, ClientMessage, HelloMessage, JointSample, PoseMessage, Role, ServerMessage,
    SubscribeMessage,
};
use clothcast::skeleton::{JointId, Pose, canonicalize, quat_exp};
use clothcast::sor::{AvatarState, Database, Scratch, Synthesizer};
use glam::Vec3;
use tokio_tungstenite::tungstenite::Message;

pub(super) fn db() -> Arc<Database> {
    let p =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/db/v1/small.ccdb");
    Arc::new(Database::read(&p).expect("golden database"))
}

pub(super) fn arm_pose(avatar: &str, angle: f32, t: f64) -> ClientMessage {
    let q = quat_exp(Vec3::new(0.0, 0.0, -angle)).to_array();
    ClientMessage::Pose(PoseMessage {
        avatar: avatar.into(),
        profile: "canonical".into(),
        timestamp: t,
        root: Some([0.0, 0.0, 0.0]),
        floor: None,
        joints: vec![JointSample {
            name: "left_shoulder".into(),
            rotation: Some(q),
            position: None,
            confidence: Some(1.0),
        }],
    })
}

pub(super) fn config() -> ServerConfig {
    ServerConfig {
        bind: "127.0.0.1:0".parse().expect("addr"),
        publisher_token: Some("pub".into()),
        viewer_token: Some("view".into()),
        vmc_bind: None,
        mvn_bind: None,
        ..ServerConfig::default()
    }
}

/// A publisher connection with the test token.
pub(super) async fn connect_publisher(url: &str) -> Client {
    Client::connect(url, Role::Publisher, Some("pub".into()))
        .await
        .expect("publisher connects")
}

/// The next message of `client`, which must be an error with `code`; its message.
pub(super) async fn expect_error(client: &mut Client, code: &str) -> String {
    match tokio::time::timeout(Duration::from_secs(10), client.next()).await {
        Ok(Ok(ServerMessage::Error { code: got, message })) if got == code => message,
        other => panic!("expected a {code} error, got {other:?}"),
    }
}

/// A viewer connection with the test token, subscribed to every avatar.
pub(super) async fn connect_viewer(url: &str) -> Client {
    connect_viewer_to(url, None).await
}

/// A viewer connection with the test token, subscribed to `avatars` (`None`: all).
pub(super) async fn connect_viewer_to(url: &str, avatars: Option<&[&str]>) -> Client {
    let mut viewer = Client::connect(url, Role::Viewer, Some("view".into()))
        .await
        .expect("viewer connects");
    viewer
        .send(&ClientMessage::Subscribe(SubscribeMessage {
            avatars: avatars.map(|a| a.iter().map(|s| s.to_string()).collect()),
            pose: true,
            // as the web client and `watch` subscribe
            compact: true,
            ..Default::default()
        }))
        .await
        .expect("subscribe");
    viewer
}

/// Reads messages until `f` says stop (or 10 s pass).
pub(super) async fn until(
    c: &mut Client,
    viewer: &mut Viewer,
    mut f: impl FnMut(&Viewer, Option<&str>) -> bool,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let m = tokio::time::timeout_at(deadline, c.next())
            .await
            .expect("timed out waiting for frames")
            .expect("message");
        let id = viewer.apply(m).expect("applies");
        if f(viewer, id.as_deref()) {
            return;
        }
    }
}

/// Reads messages until `avatar` has `n` more decoded frames than now.
pub(super) async fn more_frames(c: &mut Client, viewer: &mut Viewer, avatar: &str, n: u64) {
    let before = viewer.avatars.get(avatar).map_or(0, |a| a.frames);
    until(c, viewer, |v, _| {
        v.avatars
            .get(avatar)
            .is_some_and(|a| a.frames >= before + n)
    })
    .await;
}

/// Asks for a calibration of `avatar` from a new publisher connection.
async fn calibrate(url: &str, avatar: &str) {
    let mut operator = connect_publisher(url).await;
    operator
        .send(&ClientMessage::Calibrate(CalibrateMessage {
            avatar: avatar.into(),
        }))
        .await
        .expect("calibrate");
}

/// Largest distance, metres, between a streamed garment and synthesis run directly
/// (undamped) on `pose`.
fn off_direct(db: &Database, pose: &Pose, streamed: &[f32]) -> f32 {
    let synth = Synthesizer::new(db, Default::default());
    let canonical = canonicalize(pose, synth.skeleton()).0;
    let mut direct = vec![Vec3::ZERO; db.vertex_count()];
    synth.synthesize(
        &mut AvatarState::new(),
        &mut Scratch::default(),
        &canonical,
        1.0 / 30.0,
        &mut direct,
    );
    streamed
        .chunks_exact(3)
        .zip(&direct)
        .map(|(a, b)| (Vec3::new(a[0], a[1], a[2]) - *b).length())
        .fold(0.0f32, f32::max)
}

/// Mean height, metres, of the left sleeve (vertices beyond x = 0.3 m with the arm out
/// in `out`) in `out` and in `later`.
fn sleeve_heights(out: &[f32], later: &[f32]) -> (f32, f32) {
    let sleeve: Vec<usize> = (0..out.len() / 3).filter(|&v| out[3 * v] > 0.3).collect();
    assert!(!sleeve.is_empty(), "no sleeve vertices beyond x = 0.3 m");
    let mean_y =
        |p: &[f32]| sleeve.iter().map(|&v| p[3 * v + 1]).sum::<f32>() / sleeve.len() as f32;
    (mean_y(out), mean_y(later))
}

/// A running server with a publisher and a viewer subscribed to every avatar.
struct Rig {
    server: clothcast::net::ServerHandle,
    url: String,
    publisher: Client,
    viewer: Client,
}

async fn rig(config: ServerConfig) -> Rig {
    let server = start(db(), config).await.expect("server starts");
    let url = format!("ws://{}/ws", server.addr);
    let publisher = connect_publisher(&url).await;
    let viewer = connect_viewer(&url).await;
    Rig {
        server,
        url,
        publisher,
        viewer,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publisher_drives_an_avatar_and_viewers_decode_its_garment() {
    let db = db();
    let Rig {
        server,
        url,
        mut publisher,
        mut viewer,
    } = rig(config()).await;
    for i in 0..3 {
        publisher
            .send(&arm_pose("alice", 0.8, f64::from(i) * 0.03))
            .await
            .expect("pose");
        publisher
            .send(&arm_pose("bob", 0.2, f64::from(i) * 0.03))
            .await
            .expect("pose");
    }
    let mut view = Viewer::default();
    until(&mut viewer, &mut view, |v, _| {
        v.avatars.get("alice").is_some_and(|a| a.frames >= 15)
    })
    .await;
    // the decoded garment equals synthesis run directly on the same pose (damping has
    // converged), within the codec's 1 mm
    let mut pose = Pose::rest();
    pose.set_rotation(JointId::LEFT_SHOULDER, quat_exp(Vec3::new(0.0, 0.0, -0.8)));
    let worst = off_direct(&db, &pose, &view.avatars["alice"].positions);
    assert!(
        worst < 0.0011,
        "streamed garment differs from direct synthesis by {worst} m"
    );

    // a late joiner gets a keyframe first and then decodes deltas
    let mut late = connect_viewer_to(&url, Some(&["bob"])).await;
    let mut late_view = Viewer::default();
    until(&mut late, &mut late_view, |v, _| {
        v.avatars.get("bob").is_some_and(|a| a.frames >= 3)
    })
    .await;
    assert!(
        !late_view.avatars.contains_key("alice"),
        "subscription to bob only"
    );

    // hostile messages get error replies or close codes; the others keep streaming
    let mut bad = connect_publisher(&url).await;
    bad.send_raw(Message::Binary(vec![0xc1, 0xff, 0x00].into()))
        .await
        .expect("send");
    assert!(
        matches!(bad.next().await, Ok(ServerMessage::Error { ref code, .. }) if code == "bad_message")
    );
    bad.send_raw(Message::Text("{\"type\":\"pose\",\"avatar\":\"x\"}".into()))
        .await
        .expect("send");
    assert!(
        matches!(bad.next().await, Ok(ServerMessage::Error { ref code, .. }) if code == "bad_message")
    );
    let mut nan = arm_pose("carol", 0.1, 0.0);
    let mut joint_name = String::new();
    if let ClientMessage::Pose(p) = &mut nan {
        p.joints[0].rotation = Some([f32::NAN, 0.0, 0.0, 1.0]);
        joint_name = p.joints[0].name.clone();
    }
    bad.send(&nan).await.expect("send");
    // the NaN joint is held (and named), the rest of the pose applies
    assert!(
        matches!(bad.next().await, Ok(ServerMessage::Error { ref code, ref message }) if code == "joints_held" && message.contains(&joint_name))
    );
    let mut late = arm_pose("carol", 0.1, 0.0);
    if let ClientMessage::Pose(p) = &mut late {
        p.timestamp = f64::NAN;
    }
    bad.send(&late).await.expect("send");
    assert!(
        matches!(bad.next().await, Ok(ServerMessage::Error { ref code, .. }) if code == "bad_pose")
    );
    let mut unknown = arm_pose("carol", 0.1, 0.0);
    if let ClientMessage::Pose(p) = &mut unknown {
        p.profile = "kinect_v9".into();
    }
    bad.send(&unknown).await.expect("send");
    assert!(
        matches!(bad.next().await, Ok(ServerMessage::Error { ref message, .. }) if message.contains("unknown profile"))
    );
    bad.send_raw(Message::Binary(vec![0u8; 200_000].into()))
        .await
        .expect("send");
    assert!(
        bad.next().await.is_err() || bad.next().await.is_err(),
        "an oversized message closes the connection"
    );
    // wrong token, wrong version
    assert!(
        Client::connect(&url, Role::Publisher, Some("nope".into()))
            .await
            .is_err()
    );
    more_frames(&mut viewer, &mut view, "alice", 5).await;

    // a stalled viewer does not delay the others, and is resynced when it reads again
    let mut stalled = connect_viewer(&url).await;
    let t0 = tokio::time::Instant::now();
    more_frames(&mut viewer, &mut view, "alice", 20).await;
    assert!(
        t0.elapsed() < Duration::from_secs(3),
        "the active viewer was slowed down"
    );
    let mut stalled_view = Viewer::default();
    until(&mut stalled, &mut stalled_view, |v, _| {
        v.avatars.get("alice").is_some_and(|a| a.frames >= 5)
    })
    .await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_server_refuses_a_new_avatar_by_name() {
    let mut config = config();
    config.engine.max_avatars = 2;
    let Rig {
        server,
        url,
        mut publisher,
        mut viewer,
    } = rig(config).await;
    for a in ["a", "b"] {
        publisher.send(&arm_pose(a, 0.3, 0.0)).await.expect("pose");
    }
    let mut view = Viewer::default();
    until(&mut viewer, &mut view, |v, _| {
        ["a", "b"]
            .iter()
            .all(|a| v.avatars.get(*a).is_some_and(|x| x.frames >= 1))
    })
    .await;
    // another publisher's new avatar is refused by name, at the door
    let mut other = connect_publisher(&url).await;
    other.send(&arm_pose("c", 0.3, 0.0)).await.expect("pose");
    let message = expect_error(&mut other, "server_full").await;
    assert!(message.contains("at most 2 avatars"), "{message}");
    // while a pose for an avatar the server has is taken from any publisher (once the
    // one that drove it has left)
    publisher.close().await;
    other.send(&arm_pose("a", 0.6, 1.0)).await.expect("pose");
    let frames_a = view.avatars["a"].frames;
    until(&mut viewer, &mut view, |v, _| {
        v.avatars["a"].frames >= frames_a + 3 && v.avatars["b"].frames >= 3
    })
    .await;
    assert!(!view.avatars.contains_key("c"));
    // refused before the engine saw it: the engine refused nothing
    assert_eq!(
        metric(server.addr, "clothcast_poses_refused_total").await,
        0.0
    );
    server.shutdown().await;
}

/// Two publishers sending poses for one avatar id (two kiosks configured alike): the
/// first keeps it while it sends, the second is refused by name, told when it may take
/// over, and the avatar follows the first performer only. The second takes it over
/// once the first has been silent for the idle timeout, or at once when the first
/// disconnects (a performer's reconnection).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_avatar_is_driven_by_one_publisher_at_a_time() {
    let mut config = config();
    config.engine.idle_timeout = 0.5;
    let Rig {
        server,
        url,
        mut publisher,
        mut viewer,
    } = rig(config).await;
    let mut view = Viewer::default();
    publisher
        .send(&arm_pose("dancer", 0.0, 0.0))
        .await
        .expect("pose");
    until(&mut viewer, &mut view, |v, _| {
        v.avatars.get("dancer").is_some_and(|a| a.frames >= 1)
    })
    .await;
    let first = view.avatars["dancer"].positions.clone();
    // the intruder lowers the arm; refused, and the sleeve stays where the first put it
    let mut intruder = connect_publisher(&url).await;
    intruder
        .send(&arm_pose("dancer", 1.2, 0.1))
        .await
        .expect("pose");
    let message = expect_error(&mut intruder, "avatar_taken").await;
    assert!(
        message.contains("\"dancer\" is driven by another publisher connection")
            && message.contains("taken over after"),
        "{message}"
    );
    // the first keeps sending (within the idle timeout): the intruder stays refused
    for i in 1..=4 {
        publisher
            .send(&arm_pose("dancer", 0.0, f64::from(i) * 0.1))
            .await
            .expect("pose");
        intruder
            .send(&arm_pose("dancer", 1.2, f64::from(i) * 0.1))
            .await
            .expect("pose");
        expect_error(&mut intruder, "avatar_taken").await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    super::server::more_frames(&mut viewer, &mut view, "dancer", 3).await;
    let (y0, y1) = sleeve_heights(&first, &view.avatars["dancer"].positions);
    assert!(
        (y1 - y0).abs() < 0.01,
        "the intruder moved the sleeve: {y0} → {y1}"
    );
    // the first falls silent past the idle timeout: the intruder takes over
    tokio::time::sleep(Duration::from_millis(700)).await;
    intruder
        .send(&arm_pose("dancer", 1.2, 2.0))
        .await
        .expect("pose");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        super::server::more_frames(&mut viewer, &mut view, "dancer", 1).await;
        let (y0, y1) = sleeve_heights(&first, &view.avatars["dancer"].positions);
        // the intruder's arm is lowered: the sleeve follows it
        if y1 < y0 - 0.05 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the sleeve never followed the intruder: {y0} → {y1}"
        );
        intruder
            .send(&arm_pose("dancer", 1.2, 2.1))
            .await
            .expect("pose");
    }
    // now the first is the one refused; when the intruder leaves, it is the first's
    // again at once
    publisher
        .send(&arm_pose("dancer", 0.0, 3.0))
        .await
        .expect("pose");
    expect_error(&mut publisher, "avatar_taken").await;
    intruder.close().await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    publisher
        .send(&arm_pose("dancer", 0.0, 3.1))
        .await
        .expect("pose");
    publisher.send(&ClientMessage::Ping).await.expect("ping");
    match tokio::time::timeout(Duration::from_secs(10), publisher.next()).await {
        Ok(Ok(ServerMessage::Pong)) => {}
        other => panic!("the pose after the intruder left was refused: {other:?}"),
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_calibrations_are_bounded_and_refused_by_name() {
    let server = start(db(), config()).await.expect("server starts");
    let url = format!("ws://{}/ws", server.addr);
    let mut operator = connect_publisher(&url).await;
    // calibrations for avatars no connection publishes wait in a bounded table; the
    // request past its end is refused by name, not dropped
    for i in 0..1025 {
        operator
            .send(&ClientMessage::Calibrate(CalibrateMessage {
                avatar: format!("nobody-{i}"),
            }))
            .await
            .expect("calibrate");
    }
    let message = expect_error(&mut operator, "too_many_pending").await;
    assert!(message.contains("1024 calibrations"), "{message}");
    // asking again for one already waiting is not another entry
    operator
        .send(&ClientMessage::Calibrate(CalibrateMessage {
            avatar: "nobody-3".into(),
        }))
        .await
        .expect("calibrate");
    operator
        .send(&arm_pose("still-works", 0.2, 0.0))
        .await
        .expect("pose");
    assert!(
        tokio::time::timeout(Duration::from_millis(300), operator.next())
            .await
            .is_err(),
        "no error for a calibration already waiting, nor for a pose"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_the_server_cannot_honour_are_refused_by_name() {
    for (config, name) in [
        (
            ServerConfig {
                send_groups: 1_000_000,
                ..config()
            },
            "send_groups",
        ),
        (
            ServerConfig {
                viewer_queue: 1 << 40,
                ..config()
            },
            "viewer_queue",
        ),
    ] {
        match start(db(), config).await {
            Err(e @ clothcast::net::NetError::BadSetting { .. }) => {
                assert!(e.to_string().contains(name), "{e}");
            }
            Err(e) => panic!("{name}: wrong error {e}"),
            Ok(_) => panic!("{name}: an absurd value was accepted"),
        }
    }
    // a config file may say nan or inf (TOML reads both): refused by name before
    // anything starts, not a panic in a timer (hello_timeout = nan did that)
    for (text, name) in [
        ("hello_timeout = nan", "hello_timeout"),
        ("peer_timeout = inf", "peer_timeout"),
        ("[engine]\ntick_hz = -5.0", "engine.tick_hz"),
        ("[engine.synth]\nk = nan", "engine.synth.k"),
    ] {
        let file: ServerConfig = toml::from_str(text).expect(text);
        let config = ServerConfig {
            hello_timeout: file.hello_timeout,
            peer_timeout: file.peer_timeout,
            engine: file.engine,
            ..config()
        };
        match start(db(), config).await {
            Err(e @ clothcast::net::NetError::BadSetting { .. }) => {
                assert!(e.to_string().contains(&format!("`{name}`")), "{e}");
            }
            Err(e) => panic!("{text}: wrong error {e}"),
            Ok(_) => panic!("{text}: accepted"),
        }
    }
    // the largest allowed values start
    let server = start(
        db(),
        ServerConfig {
            send_groups: clothcast::net::MAX_SEND_GROUPS,
            viewer_queue: clothcast::net::MAX_VIEWER_QUEUE,
            ..config()
        },
    )
    .await
    .expect("the largest settings start");
    // a port already taken is refused with its address, and the server holding it
    // is not disturbed
    let taken = server.addr;
    match start(
        db(),
        ServerConfig {
            bind: taken,
            ..config()
        },
    )
    .await
    {
        Err(e @ clothcast::net::NetError::Bind { .. }) => {
            assert!(e.to_string().contains(&taken.to_string()), "{e}");
        }
        Err(e) => panic!("port in use: wrong error {e}"),
        Ok(_) => panic!("a second server got a port already in use"),
    }
    let health = http_get(taken, "/healthz").await;
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_close_or_refuse_the_offender_only() {
    let config = ServerConfig {
        max_messages_per_second: 50.0,
        max_avatars_per_publisher: 2,
        max_viewers: 1,
        ..config()
    };
    let Rig {
        server,
        url,
        mut publisher,
        mut viewer,
    } = rig(config).await;
    // a second viewer is over the limit
    let second = Client::connect(&url, Role::Viewer, Some("view".into())).await;
    assert!(second.is_err(), "the viewer limit was not applied");
    // a third avatar from one publisher is refused, the first two stream on
    for a in ["a", "b", "c"] {
        publisher.send(&arm_pose(a, 0.3, 0.0)).await.expect("pose");
    }
    assert!(
        matches!(publisher.next().await, Ok(ServerMessage::Error { ref code, .. }) if code == "too_many_avatars")
    );
    let mut view = Viewer::default();
    until(&mut viewer, &mut view, |v, _| {
        ["a", "b"]
            .iter()
            .all(|a| v.avatars.get(*a).is_some_and(|x| x.frames >= 2))
    })
    .await;
    assert!(!view.avatars.contains_key("c"));
    // a flooding publisher is closed; the viewer keeps getting frames of the others
    let mut flood = connect_publisher(&url).await;
    let mut closed = false;
    for i in 0..400 {
        if flood
            .send(&arm_pose("flood", 0.1, f64::from(i)))
            .await
            .is_err()
        {
            closed = true;
            break;
        }
    }
    if !closed {
        closed = loop {
            match tokio::time::timeout(Duration::from_secs(5), flood.next()).await {
                Ok(Ok(ServerMessage::Error { code, .. })) if code == "closed" => continue,
                Ok(Ok(_)) => continue,
                Ok(Err(_)) => break true,
                Err(_) => break false,
            }
        };
    }
    assert!(closed, "the flooding connection was not closed");
    for _ in 0..3 {
        publisher
            .send(&arm_pose("a", 0.4, 1.0))
            .await
            .expect("the other publisher is unaffected");
    }
    more_frames(&mut viewer, &mut view, "a", 5).await;
    // shutdown closes every connection with a reason
    server.shutdown().await;
    let mut reason = None;
    loop {
        match tokio::time::timeout(Duration::from_secs(2), viewer.next()).await {
            Ok(Ok(ServerMessage::Error { code, message })) if code == "closed" => {
                reason = Some(message)
            }
            Ok(Ok(_)) => continue,
            _ => break,
        }
    }
    assert_eq!(reason.as_deref(), Some("server shutting down"));
}

/// The UDP listeners are on by default and `"off"` turns one off (TOML has no null:
/// leaving the line out keeps the default, which the shipped config used to say would
/// turn VMC off); an address that is not one is named.
#[test]
fn udp_listeners_are_turned_off_by_off() {
    let read = |text: &str| toml::from_str::<ServerConfig>(text);
    let default = read("").expect("empty");
    assert_eq!(
        default.vmc_bind,
        Some("127.0.0.1:39539".parse().expect("addr"))
    );
    assert_eq!(
        default.mvn_bind,
        Some("127.0.0.1:9763".parse().expect("addr"))
    );
    let off = read("vmc_bind = \"off\"\nmvn_bind = \"off\"").expect("off");
    assert_eq!((off.vmc_bind, off.mvn_bind), (None, None));
    let moved = read("mvn_bind = \"0.0.0.0:4000\"").expect("an address");
    assert_eq!(moved.mvn_bind, Some("0.0.0.0:4000".parse().expect("addr")));
    let e = read("mvn_bind = \"localhost\"")
        .expect_err("no port")
        .to_string();
    assert!(
        e.contains("\"localhost\" is neither an address") && e.contains("mvn_bind"),
        "{e}"
    );
    // what is written reads back
    let text = toml::to_string(&off).expect("writes");
    let again = read(&text).expect("reads back");
    assert_eq!((again.vmc_bind, again.mvn_bind), (None, None));
    let shipped = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/server.toml"),
    )
    .expect("configs/server.toml");
    let shipped = read(&shipped).expect("the shipped config");
    assert_eq!(shipped.mvn_bind, default.mvn_bind);
    assert_eq!(shipped.vmc_bind, default.vmc_bind);
}

/// A server with an MVN listener on a free local port: it, the listener's address
/// and the skeleton of its avatars.
async fn mvn_server() -> (
    clothcast::net::ServerHandle,
    std::net::SocketAddr,
    clothcast::skeleton::Skeleton,
) {
    let config = ServerConfig {
        mvn_bind: Some("127.0.0.1:0".parse().expect("addr")),
        ..config()
    };
    let db = db();
    let skeleton = clothcast::skeleton::Skeleton::from_rest_positions(db.body.skeleton);
    let server = start(db, config).await.expect("server starts");
    let mvn = server.mvn_addr.expect("MVN listener");
    (server, mvn, skeleton)
}

/// An Xsens suit streamed as MVN's Network Streamer streams it (type-02 datagrams over
/// UDP): its arm moves the avatar's sleeve, a second suit of the same host is another
/// avatar, and datagrams that are not poses (another message type), overtaken on the
/// way or garbage change nothing and stop no one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xsens_mvn_over_udp_moves_an_avatar() {
    use clothcast::mocap::mvn_datagram;
    let (server, mvn, skeleton) = mvn_server().await;
    let url = format!("ws://{}/ws", server.addr);
    let (suit, other) = ("mvn-127.0.0.1-0", "mvn-127.0.0.1-5");
    let mut viewer = connect_viewer_to(&url, Some(&[suit, other])).await;
    let sender = tokio::net::UdpSocket::bind("127.0.0.1:0")
        .await
        .expect("udp");
    let arm = |down: f32| {
        let mut p = Pose::rest();
        p.set_rotation(JointId::LEFT_SHOULDER, quat_exp(Vec3::new(0.0, 0.0, -down)));
        p
    };
    let mut counter = 0u32;
    let mut send = |pose: Pose, character: u8| {
        counter += 1;
        let d = mvn_datagram(&pose, &skeleton, character, counter, counter * 16).expect("sendable");
        let (sender, mvn) = (&sender, mvn);
        async move {
            sender.send_to(&d, mvn).await.expect("send");
            tokio::time::sleep(Duration::from_millis(17)).await;
        }
    };
    let mut view = Viewer::default();
    for _ in 0..5 {
        send(arm(0.0), 0).await;
    }
    until(&mut viewer, &mut view, |v, _| {
        v.avatars.get(suit).is_some_and(|a| a.frames >= 3)
    })
    .await;
    let out = view.avatars[suit].positions.clone();
    for _ in 0..10 {
        send(arm(1.2), 0).await;
    }
    more_frames(&mut viewer, &mut view, suit, 10).await;
    let (before_y, after_y) = sleeve_heights(&out, &view.avatars[suit].positions);
    assert!(
        after_y < before_y - 0.1,
        "sleeve did not follow the suit's arm: {before_y} → {after_y}"
    );
    // the same host's second suit is its own avatar
    for _ in 0..3 {
        send(arm(0.0), 5).await;
    }
    until(&mut viewer, &mut view, |v, _| {
        v.avatars.get(other).is_some_and(|a| a.frames >= 2)
    })
    .await;
    let counted = r#"clothcast_poses_in_total{source="mvn"}"#;
    assert_eq!(metric(server.addr, counted).await, 18.0);
    // an older sample (overtaken on the way), another message type and garbage: the
    // arm stays down, only the garbage counts as bad
    let stale = mvn_datagram(&arm(0.0), &skeleton, 0, counter - 3, 0).expect("sendable");
    sender.send_to(&stale, mvn).await.expect("send");
    let mut angles = mvn_datagram(&arm(0.0), &skeleton, 0, counter + 1, 0).expect("sendable");
    angles[4..6].copy_from_slice(b"20");
    sender.send_to(&angles, mvn).await.expect("send");
    sender
        .send_to(b"MXTP02 but short", mvn)
        .await
        .expect("send");
    more_frames(&mut viewer, &mut view, suit, 3).await;
    let (_, still_y) = sleeve_heights(&out, &view.avatars[suit].positions);
    assert!(
        (still_y - after_y).abs() < 0.01,
        "the arm moved: {after_y} → {still_y}"
    );
    assert_eq!(metric(server.addr, "clothcast_mvn_stale_total").await, 1.0);
    assert_eq!(
        metric(server.addr, "clothcast_bad_messages_total").await,
        1.0
    );
    assert_eq!(metric(server.addr, counted).await, 18.0);
    assert_eq!(
        metric(server.addr, "clothcast_frame_errors_total").await,
        0.0
    );
    server.shutdown().await;
}

/// The local rotation of `joint` in a frame message's body pose (pelvis translation,
/// then 22 local rotations x, y, z, w; f32 little-endian).
fn pose_rotation(frame: &clothcast::protocol::FrameMessage, joint: JointId) -> glam::Quat {
    let at = 12 + 16 * joint.index();
    let f = |k: usize| {
        let b = &frame.pose[at + 4 * k..at + 4 * k + 4];
        f32::from_le_bytes([b[0], b[1], b[2], b[3]])
    };
    glam::Quat::from_xyzw(f(0), f(1), f(2), f(3))
}

/// An Xsens suit calibrated in the T-pose: from then on its segment orientations, in
/// axes of the suit's own (here a different turn for every segment), turn the avatar's
/// hand and head as the performer turns them; before the calibration they are not read
/// (their axes are unknown) and the hand stays as the forearm carries it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_xsens_suit_calibrated_in_the_t_pose_turns_the_hand_and_head() {
    use clothcast::mocap::mvn_datagram;
    let (server, mvn, skeleton) = mvn_server().await;
    let url = format!("ws://{}/ws", server.addr);
    let suit = "mvn-127.0.0.1-0";
    let mut viewer = connect_viewer_to(&url, Some(&[suit])).await;
    let sender = tokio::net::UdpSocket::bind("127.0.0.1:0")
        .await
        .expect("udp");
    let hand = quat_exp(Vec3::new(0.8, 0.0, 0.0));
    let head = quat_exp(Vec3::new(0.0, 0.5, 0.0));
    let turned = {
        let mut p = Pose::rest();
        p.set_rotation(JointId::LEFT_WRIST, hand);
        p.set_rotation(JointId::HEAD, head);
        p
    };
    let mut counter = 0u32;
    let mut send = |pose: Pose| {
        counter += 1;
        let mut d = mvn_datagram(&pose, &skeleton, 0, counter, counter * 16).expect("sendable");
        // each segment's orientation in axes of the suit's own
        for i in 0..23 {
            let at = 24 + 32 * i + 16;
            let num = |k: usize| {
                f32::from_be_bytes([
                    d[at + 4 * k],
                    d[at + 4 * k + 1],
                    d[at + 4 * k + 2],
                    d[at + 4 * k + 3],
                ])
            };
            let (w, x, y, z) = (num(0), num(1), num(2), num(3));
            let own = quat_exp(Vec3::new(0.3 * i as f32, 1.1 - 0.2 * i as f32, 0.7));
            let q = glam::Quat::from_xyzw(x, y, z, w) * own;
            for (k, v) in [q.w, q.x, q.y, q.z].into_iter().enumerate() {
                d[at + 4 * k..at + 4 * k + 4].copy_from_slice(&v.to_be_bytes());
            }
        }
        let (sender, mvn) = (&sender, mvn);
        async move {
            sender.send_to(&d, mvn).await.expect("send");
            tokio::time::sleep(Duration::from_millis(17)).await;
        }
    };
    let angle = |a: glam::Quat, b: glam::Quat| 2.0 * (a.dot(b).abs().min(1.0)).acos().to_degrees();
    let mut view = Viewer::default();
    // not calibrated: the orientations are not read
    for _ in 0..8 {
        send(turned).await;
    }
    until(&mut viewer, &mut view, |v, _| {
        v.avatars.get(suit).is_some_and(|a| a.frames >= 3)
    })
    .await;
    more_frames(&mut viewer, &mut view, suit, 2).await;
    let last = view.avatars[suit].last.as_ref().expect("a frame");
    let held = angle(
        pose_rotation(last, JointId::LEFT_WRIST),
        glam::Quat::IDENTITY,
    );
    assert!(held < 1.0, "the hand turned {held}° before a calibration");
    // the performer stands in the T-pose and is calibrated
    calibrate(&url, suit).await;
    for _ in 0..8 {
        send(Pose::rest()).await;
    }
    more_frames(&mut viewer, &mut view, suit, 3).await;
    // then turns the left hand about the forearm and the head (held long enough for
    // the filter to settle, and past the frames queued meanwhile)
    for _ in 0..30 {
        send(turned).await;
    }
    more_frames(&mut viewer, &mut view, suit, 20).await;
    let last = view.avatars[suit].last.as_ref().expect("a frame");
    let (h, n) = (
        angle(pose_rotation(last, JointId::LEFT_WRIST), hand),
        angle(pose_rotation(last, JointId::HEAD), head),
    );
    assert!(h < 1.0 && n < 1.0, "hand {h}°, head {n}° from the suit's");
    assert_eq!(
        metric(server.addr, "clothcast_bad_messages_total").await,
        0.0
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vmc_over_udp_moves_an_avatar() {
    use rosc::{OscBundle, OscMessage, OscPacket, OscTime, OscType};
    let config = ServerConfig {
        vmc_bind: Some("127.0.0.1:0".parse().expect("addr")),
        vmc_avatar: Some("vtuber".into()),
        ..config()
    };
    let server = start(db(), config).await.expect("server starts");
    let vmc = server.vmc_addr.expect("VMC listener");
    let url = format!("ws://{}/ws", server.addr);
    let mut viewer = connect_viewer_to(&url, Some(&["vtuber"])).await;
    let sender = tokio::net::UdpSocket::bind("127.0.0.1:0")
        .await
        .expect("udp");
    let bone = |name: &str, q: [f32; 4]| {
        OscPacket::Message(OscMessage {
            addr: "/VMC/Ext/Bone/Pos".into(),
            args: vec![
                OscType::String(name.into()),
                0.0.into(),
                0.0.into(),
                0.0.into(),
                q[0].into(),
                q[1].into(),
                q[2].into(),
                q[3].into(),
            ],
        })
    };
    let packet = |down: f32| {
        let (s, c) = ((down / 2.0).sin(), (down / 2.0).cos());
        rosc::encoder::encode(&OscPacket::Bundle(OscBundle {
            timetag: OscTime {
                seconds: 0,
                fractional: 1,
            },
            content: vec![
                OscPacket::Message(OscMessage {
                    addr: "/VMC/Ext/Root/Pos".into(),
                    args: vec![
                        OscType::String("root".into()),
                        0.0.into(),
                        0.0.into(),
                        0.0.into(),
                        0.0.into(),
                        0.0.into(),
                        0.0.into(),
                        1.0.into(),
                    ],
                }),
                OscPacket::Bundle(OscBundle {
                    timetag: OscTime {
                        seconds: 0,
                        fractional: 1,
                    },
                    content: vec![
                        bone("Hips", [0.0, 0.0, 0.0, 1.0]),
                        bone("LeftUpperArm", [0.0, 0.0, s, c]),
                    ],
                }),
            ],
        }))
        .expect("encodes")
    };
    // arm straight out, then lowered 70° (Unity's +Z rotation lowers the left arm)
    let mut view = Viewer::default();
    let sample = |angle: f32| {
        let bytes = packet(angle);
        let sender = &sender;
        async move {
            for _ in 0..5 {
                sender.send_to(&bytes, vmc).await.expect("send");
                tokio::time::sleep(Duration::from_millis(40)).await;
            }
        }
    };
    sample(0.0).await;
    until(&mut viewer, &mut view, |v, _| {
        v.avatars.get("vtuber").is_some_and(|a| a.frames >= 3)
    })
    .await;
    let out: Vec<f32> = view.avatars["vtuber"].positions.clone();
    sample(70f32.to_radians()).await;
    more_frames(&mut viewer, &mut view, "vtuber", 10).await;
    let down = &view.avatars["vtuber"].positions;
    let (before_y, after_y) = sleeve_heights(&out, down);
    assert!(
        after_y < before_y - 0.1,
        "sleeve did not follow the VMC arm: {before_y} → {after_y}"
    );
    // calibrating on the lowered arm makes it the rest pose: the sleeve goes back up
    calibrate(&url, "vtuber").await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    sample(70f32.to_radians()).await;
    more_frames(&mut viewer, &mut view, "vtuber", 10).await;
    let (_, calibrated_y) = sleeve_heights(&out, &view.avatars["vtuber"].positions);
    assert!(
        (calibrated_y - before_y).abs() < 0.03,
        "calibrated VMC arm should be at rest: {before_y} vs {calibrated_y} (lowered {after_y})"
    );
    // a sender that spreads each frame over two datagrams (its /VMC/Ext/T, then its
    // bones) is counted once per frame
    let counted = r#"clothcast_poses_in_total{source="vmc"}"#;
    let before = metric(server.addr, counted).await;
    for i in 0..5u8 {
        let time = rosc::encoder::encode(&OscPacket::Message(OscMessage {
            addr: "/VMC/Ext/T".into(),
            args: vec![OscType::Float(10.0 + f32::from(i) / 30.0)],
        }))
        .expect("encodes");
        sender.send_to(&time, vmc).await.expect("send");
        sender.send_to(&packet(1.2), vmc).await.expect("send");
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(metric(server.addr, counted).await - before, 5.0);
    // a frame overtaken on the way (its T behind the last one applied) is dropped whole
    let stale = rosc::encoder::encode(&OscPacket::Bundle(OscBundle {
        timetag: OscTime {
            seconds: 0,
            fractional: 1,
        },
        content: vec![
            OscPacket::Message(OscMessage {
                addr: "/VMC/Ext/T".into(),
                args: vec![OscType::Float(10.05)],
            }),
            bone("LeftUpperArm", [0.0, 0.0, 0.0, 1.0]),
        ],
    }))
    .expect("encodes");
    sender.send_to(&stale, vmc).await.expect("send");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(metric(server.addr, "clothcast_vmc_stale_total").await, 1.0);
    assert_eq!(metric(server.addr, counted).await - before, 5.0);
    assert_eq!(
        metric(server.addr, "clothcast_bad_messages_total").await,
        0.0
    );
    // garbage datagrams are ignored; the avatar keeps streaming
    sender.send_to(b"garbage", vmc).await.expect("send");
    // a bone whose finite components overflow when squared (found by the `ingest` fuzz
    // target: it became a zero rotation, the garment NaN, and every avatar's tick failed)
    let hostile = rosc::encoder::encode(&bone("LeftUpperArm", [1.6e10, 0.0, 2.7e23, 2.7e23]))
        .expect("encodes");
    sender.send_to(&hostile, vmc).await.expect("send");
    more_frames(&mut viewer, &mut view, "vtuber", 3).await;
    assert_eq!(
        metric(server.addr, "clothcast_frame_errors_total").await,
        0.0
    );
    let health = http_get(server.addr, "/healthz").await;
    assert!(
        health.starts_with("HTTP/1.1 200") && health.ends_with("ok\n"),
        "{health}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn play_vmc_sends_a_clip_as_vmc_performers_that_move_avatars() {
    let config = ServerConfig {
        vmc_bind: Some("127.0.0.1:0".parse().expect("addr")),
        ..config()
    };
    let server = start(db(), config).await.expect("server starts");
    let vmc = server.vmc_addr.expect("VMC listener");
    let url = format!("ws://{}/ws", server.addr);
    let mut viewer = connect_viewer(&url).await;
    let vmc = vmc.to_string();
    let play = super::clients::play(&["--vmc", &vmc, "--avatars", "2", "--seconds", "4"]);
    // two performers (one per UDP port), each an avatar named by its address
    let mut view = Viewer::default();
    until(&mut viewer, &mut view, |v, _| {
        v.avatars.len() == 2 && v.avatars.values().all(|a| a.frames >= 5)
    })
    .await;
    assert!(
        view.avatars
            .keys()
            .all(|id| id.starts_with("vmc-127.0.0.1:"))
    );
    // the walk moves the garment: sleeves swing with the arms
    let ids: Vec<String> = view.avatars.keys().cloned().collect();
    garment_moves(&mut viewer, &mut view, &ids[0], 20).await;
    exits_cleanly(play, "clothcast play --vmc").await;
    let vmc = r#"clothcast_poses_in_total{source="vmc"}"#;
    assert!(metric(server.addr, vmc).await >= 20.0);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn play_and_watch_are_clients_of_the_server() {
    let server = start(db(), config()).await.expect("server starts");
    let url = format!("ws://{}/ws", server.addr);
    let bin = env!("CARGO_BIN_EXE_clothcast");
    let play = super::clients::play_to(
        &url,
        &["--avatars", "2", "--prefix", "walker", "--seconds", "5"],
    );
    let watch = std::process::Command::new(bin)
        .args(["watch", "--url", &url, "--token", "view", "--seconds", "4"])
        .args(["--avatar", "walker-1", "--avatar", "nobody"])
        .output();
    let watch = tokio::task::spawn_blocking(move || watch)
        .await
        .expect("joins")
        .expect("clothcast watch runs");
    exits_cleanly(play, "clothcast play").await;
    let out = String::from_utf8_lossy(&watch.stdout);
    assert!(watch.status.success(), "watch failed: {out}");
    // one line per second for the avatar subscribed to, none for the other
    let lines: Vec<&str> = out.lines().filter(|l| l.contains("walker-1:")).collect();
    assert!(lines.len() >= 2, "watch printed:\n{out}");
    assert!(
        !out.contains("walker-0"),
        "subscribed to walker-1 only:\n{out}"
    );
    // a named avatar that sends nothing has its line too (a typo shows)
    assert!(
        out.lines()
            .any(|l| l.trim_start().starts_with("nobody: no frames")),
        "watch printed:\n{out}"
    );
    let last = lines[lines.len() - 1];
    for part in [
        "tshirt",
        "fps",
        "kbit/s",
        "latency",
        "ms (max",
        "missed",
        "900 vertices",
    ] {
        assert!(last.contains(part), "{part:?} missing from {last:?}");
    }
    let fps: f32 = last
        .split_whitespace()
        .nth(2)
        .and_then(|f| f.parse().ok())
        .unwrap_or_else(|| panic!("no fps in {last:?}"));
    assert!(fps > 20.0, "{fps} fps in {last:?}");
    server.shutdown().await;
}

/// The farthest any vertex moved between two decoded garments (xyz triples), metres.
pub(super) fn max_moved(before: &[f32], after: &[f32]) -> f32 {
    before
        .chunks_exact(3)
        .zip(after.chunks_exact(3))
        .map(|(a, b)| (0..3).map(|k| (a[k] - b[k]).powi(2)).sum::<f32>().sqrt())
        .fold(0.0f32, f32::max)
}

/// A Kinect bridge's body frame (v2 or Azure shape) for a canonical pose, the performer
/// 2 m in front of a level sensor 1 m up that reports no floor.
pub(super) fn body_frame(
    azure: bool,
    id: &str,
    pose: &Pose,
    skeleton: &clothcast::skeleton::Skeleton,
) -> String {
    use clothcast::mocap::{KinectKind, SensorView, body_json};
    let kind = if azure {
        KinectKind::Azure
    } else {
        KinectKind::V2
    };
    let view = SensorView {
        distance: 2.0,
        height: 1.0,
        tilt: 0.0,
    };
    let body = body_json(kind, id, &skeleton.world_frames(pose), &view);
    serde_json::json!({ "bodies": [body] }).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kinect_sensors_named_in_hello_keep_overlapping_body_ids_apart() {
    let db = db();
    let skeleton = clothcast::skeleton::Skeleton::from_rest_positions(db.body.skeleton);
    let server = start(Arc::clone(&db), config())
        .await
        .expect("server starts");
    let url = format!("ws://{}/ws", server.addr);
    let mut viewer = connect_viewer(&url).await;
    // two kiosks whose body tracker both call their performer body 1
    let sensor = |name: &str| {
        Client::connect_with(&url, Role::Publisher, Some("pub".into()), Some(name.into()))
    };
    let mut left = sensor("kiosk-left").await.expect("left sensor");
    let mut right = sensor("kiosk_right").await.expect("right sensor");
    let frame = body_frame(true, "1", &Pose::rest(), &skeleton);
    for _ in 0..3 {
        for c in [&mut left, &mut right] {
            c.send_raw(Message::Text(frame.clone().into()))
                .await
                .expect("send");
        }
    }
    let mut view = Viewer::default();
    until(&mut viewer, &mut view, |v, _| {
        ["kinect-kiosk-left-1", "kinect-kiosk_right-1"]
            .iter()
            .all(|id| v.avatars.get(*id).is_some_and(|a| a.frames >= 3))
    })
    .await;
    assert!(
        !view.avatars.contains_key("kinect-1"),
        "named sensors' bodies are not mixed up"
    );
    // a sensor name that could not be part of an avatar id is refused by name
    for bad in ["", "two words", "x/../y", &"n".repeat(33)] {
        match sensor(bad).await {
            Err(e) => assert!(e.to_string().contains("sensor name"), "{bad:?}: {e}"),
            Ok(_) => panic!("sensor name {bad:?} accepted"),
        }
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kinect_v2_and_azure_body_frames_move_avatars() {
    let db = db();
    let skeleton = clothcast::skeleton::Skeleton::from_rest_positions(db.body.skeleton);
    let Rig {
        server,
        mut publisher,
        mut viewer,
        ..
    } = rig(config()).await;
    let mut view = Viewer::default();
    let mut down = Pose::rest();
    down.set_rotation(JointId::LEFT_SHOULDER, quat_exp(Vec3::new(0.0, 0.0, -1.2)));
    for (azure, id) in [(false, "7"), (true, "azure1")] {
        let avatar = format!("kinect-{id}");
        for _ in 0..3 {
            publisher
                .send_raw(Message::Text(
                    body_frame(azure, id, &Pose::rest(), &skeleton).into(),
                ))
                .await
                .expect("send");
        }
        until(&mut viewer, &mut view, |v, _| {
            v.avatars.get(&avatar).is_some_and(|a| a.frames >= 5)
        })
        .await;
        let out = view.avatars[&avatar].positions.clone();
        for _ in 0..3 {
            publisher
                .send_raw(Message::Text(
                    body_frame(azure, id, &down, &skeleton).into(),
                ))
                .await
                .expect("send");
        }
        more_frames(&mut viewer, &mut view, &avatar, 10).await;
        let lowered = &view.avatars[&avatar].positions;
        let (before_y, after_y) = sleeve_heights(&out, lowered);
        assert!(
            after_y < before_y - 0.1,
            "{avatar}: sleeve {before_y} → {after_y}"
        );
    }
    // a malformed body frame gets an error reply; the avatars keep streaming
    publisher
        .send_raw(Message::Text("{\"bodies\": 3}".into()))
        .await
        .expect("send");
    assert!(
        matches!(publisher.next().await, Ok(ServerMessage::Error { ref code, .. }) if code == "bad_body_frame")
    );
    // so is one whose floor plane is unusable, and the error says which part
    let mut tilted: serde_json::Value =
        serde_json::from_str(&body_frame(false, "7", &Pose::rest(), &skeleton)).expect("json");
    tilted["floorClipPlane"] = serde_json::json!([0.0, 0.1, 0.995, 1.0]);
    publisher
        .send_raw(Message::Text(tilted.to_string().into()))
        .await
        .expect("send");
    match publisher.next().await {
        Ok(ServerMessage::Error { code, message }) => {
            assert_eq!(code, "bad_body_frame");
            assert!(
                message.contains("floorClipPlane") && message.contains("75°"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    // a body with one joint cannot be posed: said by name, not dropped in silence
    publisher
        .send_raw(Message::Text(
            r#"{"bodies": [{"trackingId": 9, "joints": [{"jointType": "SpineBase", "cameraX": 0.1, "cameraY": -0.2, "cameraZ": 2.0, "trackingState": 2}]}]}"#.into(),
        ))
        .await
        .expect("send");
    let message = expect_error(&mut publisher, "bad_pose").await;
    assert!(
        message.contains("body 9") && message.contains("fewer than 3 tracked joints"),
        "{message}"
    );
    more_frames(&mut viewer, &mut view, "kinect-7", 3).await;
    let kinect = r#"clothcast_poses_in_total{source="kinect"}"#;
    assert!(metric(server.addr, kinect).await >= 6.0);
    server.shutdown().await;
}

/// A webcam bridge's `mediapipe` pose messages as the JSON text a browser sends:
/// frames of the fixture's MediaPipe stream (standing, then crouching) take the
/// avatar down into the crouch and its garment with it; an unknown landmark is refused by name and a NaN one
/// held and named, and the avatar keeps streaming.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mediapipe_landmarks_from_a_webcam_bridge_move_an_avatar() {
    #[derive(serde::Deserialize)]
    struct Webcam {
        poses: Vec<Option<Vec<[f32; 4]>>>,
    }
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/mocap/mediapipe_131_01.json");
    let cam: Webcam =
        serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("json");
    let message = |k: usize, t: f64| {
        let joints: Vec<serde_json::Value> = cam.poses[k]
            .as_ref()
            .expect("a pose")
            .iter()
            .zip(clothcast::mocap::MEDIAPIPE_NAMES)
            .map(|(m, name)| {
                serde_json::json!({"name": name, "position": [m[0], m[1], m[2]], "confidence": m[3]})
            })
            .collect();
        serde_json::json!({"type": "pose", "avatar": "mirror", "profile": "mediapipe",
            "timestamp": t, "joints": joints})
    };
    let Rig {
        server,
        mut publisher,
        mut viewer,
        ..
    } = rig(config()).await;
    let mut view = Viewer::default();
    let pelvis_y = |v: &Viewer| {
        let frame = v.avatars["mirror"].last.as_ref().expect("a frame");
        frame.body_pose(22).expect("a body pose").translation[1]
    };
    let mut t = 0.0;
    // frame 0 of the clip: standing; then frame 384 (fixture pose 96): crouching
    let (mut heights, mut garments) = (Vec::new(), Vec::new());
    for k in [0, 96] {
        for _ in 0..3 {
            t += 1.0 / 30.0;
            publisher
                .send_raw(Message::Text(message(k, t).to_string().into()))
                .await
                .expect("send");
        }
        more_frames(&mut viewer, &mut view, "mirror", 8).await;
        heights.push(pelvis_y(&view));
        garments.push(view.avatars["mirror"].positions.clone());
    }
    assert!(
        heights[1] < heights[0] - 0.15,
        "the pelvis {} → {} m in a crouch",
        heights[0],
        heights[1]
    );
    let moved = max_moved(&garments[0], &garments[1]);
    assert!(moved > 0.05, "the garment moved {moved} m");
    let mut bad = message(0, t + 0.1);
    bad["joints"][5]["name"] = "third_eye".into();
    publisher
        .send_raw(Message::Text(bad.to_string().into()))
        .await
        .expect("send");
    let why = expect_error(&mut publisher, "bad_pose").await;
    assert!(why.contains("third_eye"), "{why}");
    // JSON has no NaN: a bridge's NaN arrives as null, or as a number out of range
    let mut lost = message(0, t + 0.2);
    lost["joints"][13]["position"] = serde_json::json!([1e30, 0.0, 0.0]);
    publisher
        .send_raw(Message::Text(lost.to_string().into()))
        .await
        .expect("send");
    let why = expect_error(&mut publisher, "joints_held").await;
    assert!(why.contains("left_elbow"), "{why}");
    more_frames(&mut viewer, &mut view, "mirror", 3).await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calibrate_from_another_connection_maps_the_held_pose_to_rest() {
    let db = db();
    let Rig {
        server,
        url,
        mut publisher,
        mut viewer,
    } = rig(config()).await;
    // the suit reads 0.8 rad at the left shoulder while the performer holds a T-pose
    publisher
        .send(&arm_pose("suit", 0.8, 0.0))
        .await
        .expect("pose");
    calibrate(&url, "suit").await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    for i in 1..4 {
        publisher
            .send(&arm_pose("suit", 0.8, f64::from(i) * 0.03))
            .await
            .expect("pose");
    }
    let mut view = Viewer::default();
    until(&mut viewer, &mut view, |v, _| {
        v.avatars.get("suit").is_some_and(|a| a.frames >= 15)
    })
    .await;
    let worst = off_direct(&db, &Pose::rest(), &view.avatars["suit"].positions);
    assert!(
        worst < 0.0011,
        "calibrated stream differs from the rest garment by {worst} m"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wear_message_switches_an_avatar_to_another_garment() {
    let db = db();
    // a second garment: the same shirt under another name, triangles wound the other
    // way (its own codec setup, so its own asset)
    let mut other = (*db).clone();
    other.garment.name = "shirt-b".into();
    for t in &mut other.garment.triangles {
        t.swap(1, 2);
    }
    let server = start_with_garments(vec![Arc::clone(&db), Arc::new(other)], config())
        .await
        .expect("server starts");
    let url = format!("ws://{}/ws", server.addr);
    let mut publisher = connect_publisher(&url).await;
    let mut viewer = connect_viewer(&url).await;
    let (mut hashes, mut names) = (Vec::new(), Vec::new());
    let mut view = Viewer::default();
    for _ in 0..2 {
        match viewer.next().await.expect("asset") {
            ServerMessage::Asset(a) => {
                names.push(a.garment.clone());
                hashes.push(a.hash.clone());
                view.apply(ServerMessage::Asset(a)).expect("asset applies");
            }
            other => panic!("expected two assets first, got {other:?}"),
        }
    }
    assert_ne!(hashes[0], hashes[1]);
    assert_eq!(names, [db.garment.name.as_str(), "shirt-b"]);
    publisher
        .send(&arm_pose("kiosk", 0.4, 0.0))
        .await
        .expect("pose");
    // an unknown garment is refused by name
    publisher
        .send(&ClientMessage::wear("kiosk", &["ballgown"]))
        .await
        .expect("wear");
    let message = expect_error(&mut publisher, "unknown_garment").await;
    assert!(message.contains("shirt-b"), "{message}");
    publisher
        .send(&ClientMessage::wear("kiosk", &["shirt-b"]))
        .await
        .expect("wear");
    for i in 1..6 {
        publisher
            .send(&arm_pose("kiosk", 0.4, f64::from(i) * 0.03))
            .await
            .expect("pose");
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    until(&mut viewer, &mut view, |v, _| {
        v.avatars
            .get("kiosk")
            .is_some_and(|a| a.asset == hashes[1] && a.frames >= 5)
    })
    .await;
    let mut pose = Pose::rest();
    pose.set_rotation(JointId::LEFT_SHOULDER, quat_exp(Vec3::new(0.0, 0.0, -0.4)));
    let worst = off_direct(&db, &pose, &view.avatars["kiosk"].positions);
    assert!(worst < 0.0011, "the switched stream is off by {worst} m");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garment_choices_waiting_for_avatars_are_bounded_and_refused_by_name() {
    let db = db();
    let shirt = db.garment.name.clone();
    let server = start(Arc::clone(&db), config())
        .await
        .expect("server starts");
    let url = format!("ws://{}/ws", server.addr);
    let wear = |avatar: &str, garment: &str| ClientMessage::wear(avatar, &[garment]);
    let next_error = |m: Result<ServerMessage, _>| match m {
        Ok(ServerMessage::Error { code, message }) => (code, message),
        other => panic!("expected an error reply, got {other:?}"),
    };
    // 4096 choices for avatars that never publish a pose, over three connections
    // (each within the message-rate limit)
    let mut waiting = 0;
    let mut publishers = Vec::new();
    for count in [1400, 1400, 1296] {
        let mut p = connect_publisher(&url).await;
        for _ in 0..count {
            p.send(&wear(&format!("waiting-{waiting}"), &shirt))
                .await
                .expect("wear");
            waiting += 1;
        }
        // a reply to a later message means every earlier one was handled
        p.send(&wear("sync", "ballgown")).await.expect("wear");
        assert_eq!(next_error(p.next().await).0, "unknown_garment");
        publishers.push(p);
    }
    let p = &mut publishers[2];
    // the table is full: a new avatar's choice is refused by name, an avatar already
    // waiting may still change its choice (no reply), and the connection stays open
    p.send(&wear("one-too-many", &shirt)).await.expect("wear");
    let (code, message) = next_error(p.next().await);
    assert_eq!(code, "too_many_pending");
    assert!(message.contains("4096"), "{message}");
    p.send(&wear("waiting-7", &shirt)).await.expect("wear");
    p.send(&wear("sync", "ballgown")).await.expect("wear");
    assert_eq!(next_error(p.next().await).0, "unknown_garment");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_viewer_loses_frames_is_resynced_and_slows_nobody() {
    use futures_util::{SinkExt, StreamExt};
    let config = ServerConfig {
        viewer_queue: 2,
        send_buffer_bytes: 16 * 1024,
        ..config()
    };
    let Rig {
        server,
        url,
        mut publisher,
        viewer: mut active,
    } = rig(config).await;
    // a viewer with a tiny receive window, so the server's writes to it block
    let sock = tokio::net::TcpSocket::new_v4().expect("socket");
    sock.set_recv_buffer_size(2048).expect("rcvbuf");
    let stream = sock.connect(server.addr).await.expect("connect");
    let (mut stalled, _) = tokio_tungstenite::client_async(url.as_str(), stream)
        .await
        .expect("handshake");
    let hello = ClientMessage::Hello(HelloMessage {
        version: clothcast::protocol::PROTOCOL_VERSION,
        role: Role::Viewer,
        token: Some("view".into()),
        sensor: None,
    });
    stalled
        .send(Message::Binary(hello.to_msgpack().expect("encodes").into()))
        .await
        .expect("hello");
    stalled
        .send(Message::Binary(
            ClientMessage::Subscribe(SubscribeMessage {
                avatars: None,
                pose: true,
                compact: false,
                shard: None,
                have: None,
            })
            .to_msgpack()
            .expect("encodes")
            .into(),
        ))
        .await
        .expect("subscribe");
    // 24 avatars; the slow viewer first takes the asset and some frames, then reads
    // nothing for 3 s
    let names: Vec<String> = (0..24).map(|i| format!("crowd-{i}")).collect();
    let mut view = Viewer::default();
    let mut stalled_view = Viewer::default();
    let mut last_seq: std::collections::HashMap<String, u32> = Default::default();
    let mut gaps = 0u64;
    let mut tick = 0.0;
    let mut note = |m: &ServerMessage, last_seq: &mut std::collections::HashMap<String, u32>| {
        if let ServerMessage::Frame(f) = m
            && let Some(prev) = last_seq.insert(f.avatar.clone(), f.seq)
        {
            gaps += u64::from(f.seq.saturating_sub(prev + 1));
        }
    };
    while stalled_view.avatars.len() < names.len() {
        for (i, n) in names.iter().enumerate() {
            publisher
                .send(&arm_pose(n, 0.3 + 0.02 * i as f32, tick))
                .await
                .expect("pose");
        }
        tick += 0.05;
        let until_t = tokio::time::Instant::now() + Duration::from_millis(30);
        while let Ok(Some(Ok(Message::Binary(b)))) =
            tokio::time::timeout_at(until_t, stalled.next()).await
        {
            let m = ServerMessage::from_msgpack(&b).expect("message");
            note(&m, &mut last_seq);
            stalled_view.apply(m).expect("decodes");
        }
        while let Ok(Ok(m)) = tokio::time::timeout(Duration::from_millis(1), active.next()).await {
            view.apply(m).expect("active viewer decodes");
        }
    }
    let t0 = tokio::time::Instant::now();
    let before: u64 = view.avatars.values().map(|a| a.frames).sum();
    while t0.elapsed() < Duration::from_secs(3) {
        for (i, n) in names.iter().enumerate() {
            publisher
                .send(&arm_pose(
                    n,
                    0.3 + 0.02 * i as f32 + 0.1 * (tick as f32).sin(),
                    tick,
                ))
                .await
                .expect("pose");
        }
        tick += 0.05;
        // the active viewer keeps up meanwhile
        while let Ok(Ok(m)) = tokio::time::timeout(Duration::from_millis(5), active.next()).await {
            view.apply(m).expect("active viewer decodes");
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    let active_frames: u64 = view.avatars.values().map(|a| a.frames).sum::<u64>() - before;
    // the active viewer kept receiving at the tick rate all along (24 avatars × 30 Hz)
    let rate = active_frames as f64 / t0.elapsed().as_secs_f64();
    assert!(
        rate > 24.0 * 30.0 * 0.7,
        "the active viewer was slowed: {rate:.0} frames/s"
    );
    // the stalled viewer now reads: it lost frames, and decodes again after keyframes
    let decoded_before: std::collections::HashMap<String, u64> = stalled_view
        .avatars
        .iter()
        .map(|(k, v)| (k.clone(), v.frames))
        .collect();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut last_send = tokio::time::Instant::now();
    loop {
        if last_send.elapsed() > Duration::from_millis(30) {
            last_send = tokio::time::Instant::now();
            for (i, n) in names.iter().enumerate() {
                publisher
                    .send(&arm_pose(n, 0.3 + 0.02 * i as f32, tick))
                    .await
                    .expect("pose");
            }
        }
        let m = match tokio::time::timeout_at(deadline, stalled.next()).await {
            Ok(Some(Ok(Message::Binary(b)))) => ServerMessage::from_msgpack(&b).expect("message"),
            Ok(Some(Ok(_))) => continue,
            other => panic!("stalled viewer: {other:?}"),
        };
        note(&m, &mut last_seq);
        stalled_view.apply(m).expect("stalled viewer decodes");
        if stalled_view
            .avatars
            .iter()
            .all(|(k, a)| a.frames >= decoded_before[k] + 10)
        {
            break;
        }
    }
    let metrics = http_get(server.addr, "/metrics").await;
    assert!(
        gaps > 0,
        "the stalled viewer never lost a frame: the test did not stall it"
    );
    let dropped: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("clothcast_frames_dropped_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    // counted in frames: at least every frame the stalled viewer missed
    assert!(
        dropped >= gaps,
        "/metrics counts {dropped} dropped frames, the stalled viewer missed {gaps}"
    );
    server.shutdown().await;
}

/// A counter or gauge from the server's /metrics text.
pub(super) async fn metric(addr: std::net::SocketAddr, name: &str) -> f64 {
    let text = http_get(addr, "/metrics").await;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} missing from /metrics:\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_watched_avatars_are_synthesised_and_a_viewer_still_starts_on_a_keyframe() {
    let db = db();
    let server = start(Arc::clone(&db), config())
        .await
        .expect("server starts");
    let url = format!("ws://{}/ws", server.addr);
    let mut publisher = connect_publisher(&url).await;
    for i in 0..10 {
        for avatar in ["unseen", "other"] {
            publisher
                .send(&arm_pose(avatar, 0.4, f64::from(i) / 30.0))
                .await
                .expect("pose");
        }
        tokio::time::sleep(Duration::from_millis(33)).await;
    }
    // nobody watches: both avatars keep their poses, nothing is synthesised or sent
    assert_eq!(metric(server.addr, "clothcast_avatars").await, 2.0);
    assert_eq!(
        metric(server.addr, "clothcast_avatars_unwatched").await,
        2.0
    );
    assert_eq!(metric(server.addr, "clothcast_frames_out_total").await, 0.0);
    assert!(metric(server.addr, "clothcast_unwatched_ticks_total").await > 5.0);
    // a viewer subscribes to one of them: that one streams (the Viewer counts a frame
    // only once decoded, which needs a keyframe first), the other still costs nothing
    let mut viewer = connect_viewer_to(&url, Some(&["unseen"])).await;
    let mut view = Viewer::default();
    let feed = tokio::spawn(async move {
        for i in 10..300 {
            for avatar in ["unseen", "other"] {
                if publisher
                    .send(&arm_pose(avatar, 0.4, f64::from(i) / 30.0))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(33)).await;
        }
    });
    more_frames(&mut viewer, &mut view, "unseen", 3).await;
    assert!(
        !view.avatars.contains_key("other"),
        "subscribed to one avatar"
    );
    assert_eq!(
        metric(server.addr, "clothcast_avatars_unwatched").await,
        1.0
    );
    // inputs are counted per source, and each avatar's input rate is exported
    let websocket = r#"clothcast_poses_in_total{source="websocket"}"#;
    assert!(metric(server.addr, websocket).await >= 20.0);
    let vmc = r#"clothcast_poses_in_total{source="vmc"}"#;
    assert_eq!(metric(server.addr, vmc).await, 0.0);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let hz = metric(server.addr, r#"clothcast_avatar_input_hz{avatar="other"}"#).await;
    assert!(
        (5.0..=60.0).contains(&hz),
        "input rate of a 30 Hz publisher: {hz}"
    );
    // ticks that synthesise and encode an avatar spend some of their time working
    let busy = metric(server.addr, "clothcast_tick_busy_ratio").await;
    assert!(busy > 0.0 && busy < 1.0, "tick busy ratio {busy}");
    // two avatars keep pace: the configured slots (one only far past capacity)
    let slots = metric(server.addr, "clothcast_tick_slots").await;
    assert_eq!(
        slots,
        f64::from(clothcast::engine::EngineConfig::default().tick_slots)
    );
    // the viewer leaves: nothing is watched again
    drop(viewer);
    let mut gauge = 0.0;
    for _ in 0..100 {
        gauge = metric(server.addr, "clothcast_avatars_unwatched").await;
        if gauge == 2.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(gauge, 2.0, "a closed viewer's subscription still counts");
    feed.abort();
    server.shutdown().await;
}

/// A plain HTTP/1.1 GET on loopback (no client library needed for one request).
pub(super) async fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .expect("request");
    let mut body = String::new();
    s.read_to_string(&mut body).await.expect("response");
    body
}

/// The README's first command, on the small golden database: `clothcast demo` starts a
/// server on the address it prints, walks its avatars there and stops after
/// `--seconds`, cleanly, although nobody read its stdout after the first lines (it
/// panicked in `println!` at "shutting down" when its stdout was closed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_serves_its_walking_avatars_where_it_says() {
    use std::io::BufRead;
    let small =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/db/v1/small.ccdb");
    let mut demo = std::process::Command::new(env!("CARGO_BIN_EXE_clothcast"))
        .arg("demo")
        .arg("--db")
        .arg(&small)
        .args(["--avatars", "3", "--bind", "127.0.0.1:0", "--seconds", "8"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("clothcast demo runs");
    let stdout = demo.stdout.take().expect("piped stdout");
    // the lines it prints before streaming, up to the metrics address
    let lines = tokio::task::spawn_blocking(move || {
        let mut lines = Vec::new();
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let last = line.starts_with("metrics:");
            lines.push(line);
            if last {
                break;
            }
        }
        lines
    })
    .await
    .expect("joins");
    let url = lines
        .iter()
        .find_map(|l| l.split_whitespace().find(|w| w.starts_with("ws://")))
        .unwrap_or_else(|| panic!("no ws:// address in {lines:?}"))
        .to_string();
    assert!(
        lines[0].contains("3 avatars"),
        "first line should say how many avatars: {lines:?}"
    );
    let page = lines
        .iter()
        .find_map(|l| {
            l.split_whitespace()
                .find(|w| w.starts_with("http://") && w.ends_with('/'))
        })
        .unwrap_or_else(|| panic!("no viewer address in {lines:?}"));
    let addr: std::net::SocketAddr = page
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .expect("viewer address");
    assert!(http_get(addr, "/").await.starts_with("HTTP/1.1 200"));
    // every avatar streams, and walks: its garment moves
    let mut viewer = connect_viewer_to(&url, None).await;
    let mut view = Viewer::default();
    until(&mut viewer, &mut view, |v, _| {
        (0..3).all(|k| {
            v.avatars
                .get(&format!("walker-{k}"))
                .is_some_and(|a| a.frames >= 3)
        })
    })
    .await;
    assert_eq!(view.avatars.len(), 3, "{:?}", view.avatars.keys());
    garment_moves(&mut viewer, &mut view, "walker-0", 30).await;
    exits_cleanly(demo, "clothcast demo").await;
}

/// `clothcast serve` on the small fixture database, open, on a free port, with `env`
/// added to its environment: the child, its viewer URL (from its first line of
/// stdout), the rest of its stdout, and the config file to remove.
#[cfg(unix)]
async fn spawn_serve(
    env: &[(&str, &std::ffi::OsStr)],
) -> (
    std::process::Child,
    String,
    std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
    std::path::PathBuf,
) {
    use std::io::BufRead;
    use std::sync::atomic::{AtomicU32, Ordering};
    static RUN: AtomicU32 = AtomicU32::new(0);
    let small =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/db/v1/small.ccdb");
    let config = std::env::temp_dir().join(format!(
        "clothcast-serve-{}-{}.toml",
        std::process::id(),
        RUN.fetch_add(1, Ordering::Relaxed)
    ));
    // no UDP listener on a default port: another test's server may hold it
    std::fs::write(
        &config,
        "open = true\nvmc_bind = \"127.0.0.1:0\"\nmvn_bind = \"off\"\n",
    )
    .expect("config");
    let mut serve = std::process::Command::new(env!("CARGO_BIN_EXE_clothcast"))
        .arg("serve")
        .arg("--db")
        .arg(&small)
        .arg("--config")
        .arg(&config)
        .args(["--bind", "127.0.0.1:0"])
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("clothcast serve runs");
    let stdout = serve.stdout.take().expect("piped stdout");
    let (first, lines) = tokio::task::spawn_blocking(move || {
        let mut lines = std::io::BufReader::new(stdout).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        (first, lines)
    })
    .await
    .expect("joins");
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("ws://"))
        .unwrap_or_else(|| panic!("no ws:// address in {first:?}"))
        .to_string();
    (serve, url, lines, config)
}

/// The thread id of the tick thread (`clothcast-tick`) of process `pid`.
#[cfg(target_os = "linux")]
fn tick_thread(pid: u32) -> i32 {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the server's threads");
    tasks
        .filter_map(Result::ok)
        .find(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .is_ok_and(|c| c.trim() == "clothcast-tick")
        })
        .and_then(|t| t.file_name().to_str()?.parse().ok())
        .expect("a thread named clothcast-tick")
}

/// One thread of another process stopped (ptrace: seized and interrupted, which stops
/// that thread only, unlike SIGSTOP) until dropped; made and dropped on one thread,
/// the tracer.
#[cfg(target_os = "linux")]
struct Frozen(i32);

#[cfg(target_os = "linux")]
impl Frozen {
    fn new(tid: i32) -> Self {
        // SAFETY: plain system calls on a thread of our own child; no memory is shared
        unsafe {
            let null = std::ptr::null_mut::<libc::c_void>();
            assert_eq!(
                libc::ptrace(libc::PTRACE_SEIZE, tid, null, null),
                0,
                "PTRACE_SEIZE"
            );
            assert_eq!(
                libc::ptrace(libc::PTRACE_INTERRUPT, tid, null, null),
                0,
                "PTRACE_INTERRUPT"
            );
            let mut status = 0;
            assert_eq!(
                libc::waitpid(tid, &mut status, libc::__WALL),
                tid,
                "waitpid"
            );
        }
        Self(tid)
    }
}

#[cfg(target_os = "linux")]
impl Drop for Frozen {
    fn drop(&mut self) {
        // SAFETY: as in `new`; the thread is in its ptrace stop
        unsafe {
            let null = std::ptr::null_mut::<libc::c_void>();
            libc::ptrace(libc::PTRACE_DETACH, self.0, null, null);
        }
    }
}

/// Kills process `.0` if the test panics, so that a failed test leaves no server
/// running (a passing one waits for its exit).
#[cfg(unix)]
pub(super) struct Reaper(pub(super) u32);

#[cfg(unix)]
impl Drop for Reaper {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &self.0.to_string()])
                .status();
        }
    }
}

/// Sends SIGTERM to `child`.
#[cfg(unix)]
pub(super) fn sigterm(child: &std::process::Child) {
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
}

/// `serve` stopped the way systemd, Docker and Kubernetes stop a service (SIGTERM)
/// shuts down gracefully: every viewer is closed with 1001 and a reason, and it exits 0
/// (it was killed outright, and viewers saw the link drop without a word).
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_shuts_down_gracefully_on_sigterm() {
    let (mut serve, url, lines, config) = spawn_serve(&[]).await;
    let _reaper = Reaper(serve.id());
    let mut viewer = connect_viewer_to(&url, None).await;
    let mut publisher = connect_publisher(&url).await;
    publisher
        .send(&arm_pose("a", 0.3, 0.0))
        .await
        .expect("pose");
    let mut view = Viewer::default();
    until(&mut viewer, &mut view, |v, _| {
        v.avatars.get("a").is_some_and(|a| a.frames >= 1)
    })
    .await;
    sigterm(&serve);
    let closed = loop {
        match tokio::time::timeout(Duration::from_secs(10), viewer.next()).await {
            Ok(Ok(_)) => continue,
            Ok(Err(e)) => break e,
            Err(_) => panic!("the viewer was not closed after SIGTERM"),
        }
    };
    match &closed {
        clothcast::client::ClientError::ClosedBy { code, reason } => {
            assert_eq!(*code, 1001, "{closed}");
            assert!(reason.contains("shutting down"), "{closed}");
        }
        other => panic!("expected a close with a reason, got {other}"),
    }
    let (status, rest) = tokio::task::spawn_blocking(move || {
        let rest: Vec<String> = lines.map_while(Result::ok).collect();
        (serve.wait(), rest)
    })
    .await
    .expect("joins");
    let status = status.expect("serve exits");
    assert!(status.success(), "serve after SIGTERM: {status}");
    assert!(rest.iter().any(|l| l == "shutting down"), "{rest:?}");
    let _ = std::fs::remove_file(&config);
}

/// Under systemd (`Type=notify`, `WatchdogSec=`), `serve` says when it is ready, pings
/// the watchdog with its load as status line while its ticks complete, and says when
/// it stops: the notify protocol over a datagram socket, as systemd listens for it.
/// A stalled tick loop (its thread frozen, the rest running) stops the pings.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_speaks_systemds_notify_protocol_and_pings_its_watchdog() {
    use std::os::unix::net::UnixDatagram;
    let path = std::env::temp_dir().join(format!("clothcast-notify-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let socket = UnixDatagram::bind(&path).expect("notify socket");
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let socket = std::sync::Arc::new(socket);
    // everything the service manager was told, in order, until `until` holds
    // (panics after 20 s)
    let heard = |socket: std::sync::Arc<UnixDatagram>, until: fn(&[String]) -> bool| async move {
        tokio::task::spawn_blocking(move || {
            let (mut said, deadline) = (
                Vec::new(),
                std::time::Instant::now() + Duration::from_secs(20),
            );
            let mut buf = [0u8; 4096];
            while !until(&said) {
                assert!(
                    std::time::Instant::now() < deadline,
                    "systemd was told only {said:?}"
                );
                if let Ok(n) = socket.recv(&mut buf) {
                    said.push(String::from_utf8_lossy(&buf[..n]).into_owned());
                }
            }
            said
        })
        .await
        .expect("joins")
    };
    // a 0.4 s watchdog: the server looks every 0.1 s
    let (mut serve, url, lines, config) = spawn_serve(&[
        ("NOTIFY_SOCKET", path.as_os_str()),
        ("WATCHDOG_USEC", std::ffi::OsStr::new("400000")),
    ])
    .await;
    let _reaper = Reaper(serve.id());
    let said = heard(socket.clone(), |s| {
        s.iter().filter(|m| m.contains("WATCHDOG=1")).count() >= 3
    })
    .await;
    let ready = said
        .iter()
        .position(|m| m.lines().any(|l| l == "READY=1"))
        .unwrap_or_else(|| panic!("never READY: {said:?}"));
    assert!(
        said[ready].contains("STATUS=serving on ws://127.0.0.1:"),
        "{said:?}"
    );
    let first_ping = said.iter().position(|m| m.contains("WATCHDOG=1"));
    assert!(first_ping > Some(ready), "a ping before READY: {said:?}");
    assert!(
        said[ready + 1..].iter().all(|m| m.contains("WATCHDOG=1\n")
            && m.contains("STATUS=0 avatars, 0 viewers, 0 publishers, ticks busy ")),
        "{said:?}"
    );
    // the status line follows the load
    let mut publisher = connect_publisher(&url).await;
    publisher
        .send(&arm_pose("a", 0.3, 0.0))
        .await
        .expect("pose");
    heard(socket.clone(), |s| {
        s.iter().any(|m| {
            m.contains("WATCHDOG=1")
                && m.contains("STATUS=1 avatar, 0 viewers, 1 publisher, ticks busy ")
        })
    })
    .await;
    // a reload (SIGHUP, what the unit's ExecReload= sends): RELOADING=1 with the
    // monotonic time, as Type=notify-reload asks, then READY=1 again
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &serve.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(hup.success());
    let said = heard(socket.clone(), |s| {
        s.iter().any(|m| m.contains("RELOADING=1"))
            && s.iter().any(|m| m.lines().any(|l| l == "READY=1"))
    })
    .await;
    let reloading = said
        .iter()
        .position(|m| m.contains("RELOADING=1"))
        .expect("RELOADING");
    assert!(
        said[reloading].lines().any(|l| l
            .strip_prefix("MONOTONIC_USEC=")
            .is_some_and(|t| t.parse::<u64>().is_ok())),
        "{said:?}"
    );
    let ready_again = said
        .iter()
        .position(|m| m.lines().any(|l| l == "READY=1"))
        .expect("READY");
    assert!(ready_again > reloading, "{said:?}");
    assert!(
        serve.try_wait().expect("waits").is_none(),
        "a reload ended serve"
    );
    // only the tick thread stops (the runtime, its pings and `/healthz` go on): past
    // the 2 s `/healthz` allows, the pings stop and the status line says why; thawed,
    // they resume
    // `clothcast health` (a container's HEALTHCHECK) agrees with /healthz: healthy now,
    // unhealthy while the tick thread is frozen
    let health_url = url.replace("ws://", "http://").replace("/ws", "/healthz");
    let health = {
        let health_url = health_url.clone();
        move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_clothcast"))
                .args(["health", "--url", &health_url])
                .output()
                .expect("clothcast health runs")
        }
    };
    let o = health();
    assert!(
        o.status.success() && String::from_utf8_lossy(&o.stdout).contains("answered 200 OK"),
        "{o:?}"
    );
    let tick = tick_thread(serve.id());
    let during = tokio::task::spawn_blocking({
        let socket = socket.clone();
        move || {
            let _frozen = Frozen::new(tick);
            let (mut said, deadline) = (
                Vec::new(),
                std::time::Instant::now() + Duration::from_secs(20),
            );
            let mut buf = [0u8; 4096];
            // every message from the first unhealthy one on, for a second
            let mut until = None;
            while until.is_none_or(|u| std::time::Instant::now() < u) {
                assert!(
                    std::time::Instant::now() < deadline,
                    "never unhealthy: {said:?}"
                );
                if let Ok(n) = socket.recv(&mut buf) {
                    let m = String::from_utf8_lossy(&buf[..n]).into_owned();
                    if until.is_none()
                        && m.contains("STATUS=unhealthy: tick stalled: the last tick completed")
                    {
                        until = Some(std::time::Instant::now() + Duration::from_secs(1));
                        let o = health();
                        let err = String::from_utf8_lossy(&o.stderr);
                        assert!(
                            !o.status.success()
                                && err.contains("unhealthy")
                                && err.contains("503")
                                && err.contains("tick stalled"),
                            "{o:?}"
                        );
                    }
                    if until.is_some() {
                        said.push(m);
                    }
                }
            }
            said
        }
    })
    .await
    .expect("joins");
    assert!(
        during.len() >= 5
            && during
                .iter()
                .all(|m| !m.contains("WATCHDOG") && m.contains("STATUS=unhealthy: tick stalled")),
        "{during:?}"
    );
    heard(socket.clone(), |s| {
        s.iter().any(|m| m.contains("WATCHDOG=1"))
    })
    .await;
    sigterm(&serve);
    heard(socket, |s| {
        s.iter().any(|m| m.lines().any(|l| l == "STOPPING=1"))
    })
    .await;
    let status = tokio::task::spawn_blocking(move || {
        lines.map_while(Result::ok).for_each(drop);
        serve.wait()
    })
    .await
    .expect("joins")
    .expect("serve exits");
    assert!(status.success(), "serve after SIGTERM: {status}");
    let _ = (std::fs::remove_file(&config), std::fs::remove_file(&path));
}

/// The test CA, certificate and key (tests/fixtures/tls).
pub(super) fn tls_fixtures() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tls")
}

/// [`config`] serving TLS with the fixture certificate.
fn tls_config() -> ServerConfig {
    ServerConfig {
        tls_cert: Some(tls_fixtures().join("cert.pem")),
        tls_key: Some(tls_fixtures().join("key.pem")),
        ..config()
    }
}

/// With `tls_cert` and `tls_key` the port speaks https and wss only: `play` publishes
/// and `watch` decodes over wss, trusting the test CA through `SSL_CERT_FILE`; a client
/// that does not trust the certificate fails at once (no retries), a plain ws:// client
/// gets nothing, and neither disturbs the stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_speaks_wss_with_a_certificate() {
    let server = start(db(), tls_config())
        .await
        .expect("server starts with TLS");
    let url = format!("wss://localhost:{}/ws", server.addr.port());
    let play = play_over_wss(&url, 6);
    // plain ws:// to the TLS port: refused, the server goes on
    let plain = format!("ws://127.0.0.1:{}/ws", server.addr.port());
    assert!(
        Client::connect(&plain, Role::Viewer, Some("view".into()))
            .await
            .is_err()
    );
    let watch = watch_over_wss(&url);
    let untrusted = std::process::Command::new(env!("CARGO_BIN_EXE_clothcast"))
        .env_remove("SSL_CERT_FILE")
        .env_remove("SSL_CERT_DIR")
        .args(["watch", "--url", &url])
        .args(["--token", "view", "--seconds", "20"])
        .output()
        .expect("watch runs");
    let err = String::from_utf8_lossy(&untrusted.stderr);
    assert!(!untrusted.status.success(), "{err}");
    assert!(err.to_lowercase().contains("certificate"), "{err}");
    watched_frames(watch, "over wss").await;
    exits_cleanly(play, "clothcast play over wss").await;
    server.shutdown().await;
}

/// `clothcast health` probes a TLS server over https: trusted through `--ca` or
/// `SSL_CERT_FILE` it answers healthy (exit 0); with neither, the unknown issuer fails
/// the probe (exit 1, saying so) unless `--insecure`; plain http to the TLS port fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_probes_a_tls_server_over_https() {
    let server = start(db(), tls_config())
        .await
        .expect("server starts with TLS");
    let port = server.addr.port();
    let health = |url: String, more: &[&str], trust_env: bool| {
        let mut c = if trust_env {
            trusting_the_test_ca()
        } else {
            let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_clothcast"));
            c.env_remove("SSL_CERT_FILE").env_remove("SSL_CERT_DIR");
            c
        };
        let o = c
            .args(["health", "--url", &url])
            .args(more)
            .output()
            .expect("health runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        (o.status.code(), text)
    };
    let https = format!("https://127.0.0.1:{port}/healthz");
    let ca = tls_fixtures().join("ca.pem");
    let ca = ca.to_str().expect("a UTF-8 path");
    for (url, more, env, code, says) in [
        (https.clone(), vec!["--ca", ca], false, 0, "healthy"),
        (
            format!("https://localhost:{port}/healthz"),
            vec![],
            true,
            0,
            "healthy",
        ),
        (https.clone(), vec![], false, 1, "UnknownIssuer"),
        (https.clone(), vec!["--insecure"], false, 0, "healthy"),
        (
            format!("http://127.0.0.1:{port}/healthz"),
            vec![],
            false,
            1,
            "error",
        ),
    ] {
        let (got, text) = health(url.clone(), &more, env);
        assert_eq!(got, Some(code), "{url} {more:?}: {text}");
        assert!(text.contains(says), "{url} {more:?}: {text}");
    }
    server.shutdown().await;
}

/// `clothcast` trusting the test CA (through `SSL_CERT_FILE`) and nothing else.
fn trusting_the_test_ca() -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_clothcast"));
    c.env("SSL_CERT_FILE", tls_fixtures().join("ca.pem"))
        .env_remove("SSL_CERT_DIR");
    c
}

/// `clothcast play` of the test clip on two avatars to the wss:// `url` for `seconds`.
pub(super) fn play_over_wss(url: &str, seconds: u32) -> std::process::Child {
    let clip = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/mocap/cmu_131_03.bvh");
    trusting_the_test_ca()
        .arg("play")
        .arg(&clip)
        .args(["--url", url, "--token", "pub", "--avatars", "2"])
        .args(["--seconds", &seconds.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("play runs")
}

/// `clothcast watch` on the wss:// `url` for 4 s, running.
pub(super) fn watch_over_wss(url: &str) -> tokio::task::JoinHandle<std::process::Output> {
    let url = url.to_string();
    tokio::task::spawn_blocking(move || {
        trusting_the_test_ca()
            .args(["watch", "--url", &url, "--token", "view", "--seconds", "4"])
            .output()
            .expect("watch runs")
    })
}

/// Waits for `watch` ([`watch_over_wss`]) and checks that it succeeded and saw both
/// performers' frames (`how`: the way they came, for the message).
pub(super) async fn watched_frames(
    watch: tokio::task::JoinHandle<std::process::Output>,
    how: &str,
) {
    let watched = watch.await.expect("joins");
    let out = String::from_utf8_lossy(&watched.stdout);
    assert!(
        watched.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&watched.stderr)
    );
    let streaming = out
        .lines()
        .filter(|l| l.contains("performer-") && l.contains("fps") && !l.contains("  0.0 fps"))
        .count();
    assert!(streaming >= 2, "watch {how} saw no frames:\n{out}");
}

/// A connection still in its TLS handshake when the server shuts down is closed then,
/// not when its handshake deadline (`hello_timeout`) runs out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_closes_a_connection_mid_handshake() {
    use tokio::io::AsyncReadExt;
    let server = start(
        db(),
        ServerConfig {
            hello_timeout: 60.0,
            ..tls_config()
        },
    )
    .await
    .expect("server starts with TLS");
    // a client that connects and never says a word of TLS
    let mut tcp = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connects");
    tokio::time::sleep(Duration::from_millis(100)).await;
    server.shutdown().await;
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut buf)).await;
    assert!(
        matches!(read, Ok(Ok(0) | Err(_))),
        "the half-open handshake outlived the server: {read:?}"
    );
}

/// Reads `n` more frames of avatar `id` and checks that its garment moved (more than
/// 3 cm at some vertex): the motion driving it arrives.
async fn garment_moves(viewer: &mut Client, view: &mut Viewer, id: &str, n: u64) {
    let first = view.avatars[id].positions.clone();
    more_frames(viewer, view, id, n).await;
    let moved = max_moved(&first, &view.avatars[id].positions);
    assert!(moved > 0.03, "{id}'s garment did not move ({moved} m)");
}

/// Waits for a spawned `clothcast` (`what`) to exit, and checks it succeeded.
pub(super) async fn exits_cleanly(child: std::process::Child, what: &str) {
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .expect("joins")
        .expect("the process exits");
    assert!(
        out.status.success(),
        "{what} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
