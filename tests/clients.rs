//! The clients against a server that goes away: `clothcast play` and `clothcast watch`
//! come back by themselves after a restart, give up at once on a refusal that trying
//! again cannot change, and a client notices a server that went silent without closing.
//! The server, for its part, logs each connection and why it ended, and answers a
//! client that speaks only JSON in JSON.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clothcast::client::{Client, ClientError, Viewer};
use clothcast::net::{ServerConfig, start};
use clothcast::protocol::{ClientMessage, FrameMessage, HelloMessage, Role, ServerMessage};
use clothcast::skeleton::{JOINT_COUNT, JointId, Pose, Skeleton};
use glam::Vec3;

use super::server::{config, connect_viewer, db, until};

pub(super) fn clip() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mocap/cmu_131_01.bvh")
}

/// `clothcast play` of the built-in CMU 131_01 clip with `args`, its output piped (read
/// it with [`finish`]).
pub(super) fn play(args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_clothcast"))
        .arg("play")
        .arg(clip())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("clothcast play runs")
}

/// [`play`] publishing to the server at `url` with the test publisher token.
pub(super) fn play_to(url: &str, args: &[&str]) -> std::process::Child {
    play(&[&["--url", url, "--token", "pub"][..], args].concat())
}

/// Waits for a child and returns its status, stdout and stderr.
pub(super) async fn finish(
    child: std::process::Child,
) -> (std::process::ExitStatus, String, String) {
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .expect("joins")
        .expect("the child runs");
    (
        out.status,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Reads a viewer until `avatar` has decoded `n` frames.
pub(super) async fn frames_of(url: &str, avatar: &str, n: u64) {
    let mut c = connect_viewer(url).await;
    let mut view = Viewer::default();
    until(&mut c, &mut view, |v, _| {
        v.avatars.get(avatar).is_some_and(|a| a.frames >= n)
    })
    .await;
}

/// `play` without `--seconds` (a replay that loops until stopped) stopped by SIGTERM or
/// Ctrl-C ends as `--seconds` does: a goodbye to the server and its summary, exit 0
/// (it was killed by the signal, and the server logged a lost peer).
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn play_stopped_by_a_signal_says_goodbye_and_sums_up() {
    let server = start(db(), config()).await.expect("server starts");
    let url = format!("ws://{}/ws", server.addr);
    let play = play_to(&url, &["--prefix", "walker"]);
    frames_of(&url, "walker-0", 5).await;
    super::server::sigterm(&play);
    let (status, out, err) = finish(play).await;
    assert!(
        status.success(),
        "play after SIGTERM: {status}\n{out}\n{err}"
    );
    assert!(
        out.starts_with("sent ") && out.contains("poses for 1 avatars"),
        "{out}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn play_spreads_its_avatars_over_connections_within_the_servers_limits() {
    // a server that lets a publisher drive 2 avatars; play drives 5, 2 a connection
    let server = start(
        db(),
        ServerConfig {
            max_avatars_per_publisher: 2,
            ..config()
        },
    )
    .await
    .expect("server starts");
    let url = format!("ws://{}/ws", server.addr);
    let play = play_to(
        &url,
        &["--avatars", "5", "--per-connection", "2", "--seconds", "3"],
    );
    metric_at_least(
        server.addr,
        "clothcast_avatars",
        5.0,
        "not all 5 avatars arrived",
    )
    .await;
    let (status, out, err) = finish(play).await;
    assert!(status.success(), "play failed: {status}\n{out}\n{err}");
    assert!(
        out.contains("for 5 avatars") && out.contains("over 3 connections"),
        "{out}"
    );
    assert!(!err.contains("too_many_avatars"), "{err}");
    assert_eq!(
        super::server::metric(server.addr, "clothcast_avatars").await,
        5.0
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn play_and_watch_come_back_after_the_server_restarts() {
    let server = start(db(), config()).await.expect("server starts");
    let addr = server.addr;
    let url = format!("ws://{addr}/ws");
    let bin = env!("CARGO_BIN_EXE_clothcast");
    let play = play_to(&url, &["--prefix", "walker", "--seconds", "14"]);
    let watch = Command::new(bin)
        .args(["watch", "--url", &url, "--token", "view", "--seconds", "14"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("clothcast watch runs");
    frames_of(&url, "walker-0", 10).await;
    // the server goes away (closing every connection with 1001) and comes back on
    // the same port a moment later, with no avatar and no memory of its clients
    server.shutdown().await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let server = start(
        db(),
        ServerConfig {
            bind: addr,
            ..config()
        },
    )
    .await
    .expect("the server starts again on its port");
    // play is back: its walker streams again from the new server
    frames_of(&url, "walker-0", 10).await;
    let (status, out, err) = finish(play).await;
    assert!(status.success(), "play failed: {status}\n{out}\n{err}");
    assert!(out.contains("over 2 connections"), "play printed:\n{out}");
    for said in [
        "closed by the server (1001)",
        "trying again in",
        "connected again",
    ] {
        assert!(
            err.contains(said),
            "{said:?} missing from play's stderr:\n{err}"
        );
    }
    // watch is back too: it lost the link, made it again, and its last report shows
    // the walker streaming at the tick rate
    let (status, out, err) = finish(watch).await;
    assert!(status.success(), "watch failed: {status}\n{out}\n{err}");
    for said in ["connection lost", "connected again"] {
        assert!(
            err.contains(said),
            "{said:?} missing from watch's stderr:\n{err}"
        );
    }
    let last = out
        .lines()
        .rfind(|l| l.contains("walker-0:"))
        .unwrap_or_else(|| panic!("watch printed no line for walker-0:\n{out}"));
    let fps: f32 = last
        .split_whitespace()
        .nth(2)
        .and_then(|f| f.parse().ok())
        .unwrap_or_else(|| panic!("no fps in {last:?}"));
    assert!(fps > 20.0, "{fps} fps after the restart: {last:?}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn play_and_watch_give_up_at_once_on_a_wrong_token() {
    let server = start(db(), config()).await.expect("server starts");
    let url = format!("ws://{}/ws", server.addr);
    let bin = env!("CARGO_BIN_EXE_clothcast");
    let started = Instant::now();
    let play = play(&["--url", &url, "--token", "wrong", "--seconds", "30"]);
    let watch = Command::new(bin)
        .args([
            "watch",
            "--url",
            &url,
            "--token",
            "wrong",
            "--seconds",
            "30",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("clothcast watch runs");
    for (name, child) in [("play", play), ("watch", watch)] {
        let (status, _, err) = finish(child).await;
        assert!(!status.success(), "{name} with a wrong token succeeded");
        assert!(
            err.contains("4001") && err.contains("wrong or missing token"),
            "{name}'s stderr:\n{err}"
        );
        assert!(!err.contains("trying again"), "{name} retried:\n{err}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "they waited for --seconds instead of giving up"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_notices_a_server_that_went_silent_and_not_one_that_answers_pings() {
    // a "server" that welcomes, then neither reads nor writes: a host that vanished
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds");
    let silent = listener.local_addr().expect("addr");
    let fake = tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.expect("accepts");
            tokio::spawn(async move {
                use futures_util::{SinkExt, StreamExt};
                let mut ws = tokio_tungstenite::accept_async(tcp)
                    .await
                    .expect("handshake");
                let _hello = ws.next().await;
                let welcome = r#"{"type": "welcome", "version": 1, "tick_hz": 30.0}"#;
                ws.send(tokio_tungstenite::tungstenite::Message::text(welcome))
                    .await
                    .expect("welcome");
                // hold the socket open, silent
                tokio::time::sleep(Duration::from_secs(30)).await;
                drop(ws);
            });
        }
    });
    let live = start(db(), config()).await.expect("server starts");
    let quick = |mut c: Client| {
        c.ping_after = Duration::from_millis(100);
        c.dead_after = Duration::from_millis(600);
        c
    };
    let mut to_silent = quick(
        Client::connect(&format!("ws://{silent}/ws"), Role::Viewer, None)
            .await
            .expect("the silent server welcomes"),
    );
    let mut to_live = quick(
        Client::connect(
            &format!("ws://{}/ws", live.addr),
            Role::Viewer,
            Some("view".into()),
        )
        .await
        .expect("the live server welcomes"),
    );
    // the way `watch` reads: a message or a short wait, then keepalive
    let started = Instant::now();
    let gone = loop {
        let _ = tokio::time::timeout(Duration::from_millis(50), to_silent.next()).await;
        if let Err(e) = to_silent.keepalive().await {
            break e;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the silent server was not noticed"
        );
    };
    assert!(matches!(gone, ClientError::Silent(_)), "{gone}");
    assert!(!gone.is_final(), "a silent server is worth another try");
    // a library user who only reads, never calling keepalive, is told too
    let mut reader = quick(
        Client::connect(&format!("ws://{silent}/ws"), Role::Viewer, None)
            .await
            .expect("the silent server welcomes"),
    );
    let started = Instant::now();
    let gone = tokio::time::timeout(Duration::from_secs(5), reader.next())
        .await
        .expect("next() gave up on the silent server by itself");
    assert!(matches!(gone, Err(ClientError::Silent(_))), "{gone:?}");
    assert!(started.elapsed() >= Duration::from_millis(500), "too soon");
    // the live server answers the pings (it sends nothing else to an unsubscribed
    // viewer), so the same settings keep its connection for longer than they gave
    // the silent one
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(2000) {
        let _ = tokio::time::timeout(Duration::from_millis(50), to_live.next()).await;
        to_live
            .keepalive()
            .await
            .expect("a server that answers pings is alive");
    }
    // and so does next() alone
    assert!(
        tokio::time::timeout(Duration::from_millis(2000), to_live.next())
            .await
            .is_err(),
        "next() ended on a live server that had nothing to say"
    );
    fake.abort();
    live.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_logs_who_connected_and_why_each_connection_ended() {
    // the tokens as a deployment keeps them out of the config: the viewer's in a file
    // the config names (relative: beside the config), the publisher's a systemd
    // credential (LoadCredential= puts it in $CREDENTIALS_DIRECTORY)
    let dir = scratch("log-test");
    let credentials = dir.join("credentials");
    std::fs::create_dir_all(&credentials).expect("temp dir");
    std::fs::write(dir.join("viewer.token"), "view-9q2x\n").expect("writes the viewer token");
    std::fs::write(credentials.join("publisher-token"), "pub-7f3k").expect("writes the credential");
    let (mut server, url, dir) = serve_with_config(
        "log-test",
        "viewer_token_file = \"viewer.token\"\n",
        None,
        Some(&credentials),
    )
    .await;
    // refused at hello, then a viewer that is welcomed and says goodbye
    let refused = Client::connect(&url, Role::Viewer, Some("wrong".into())).await;
    assert!(refused.is_err_and(|e| e.is_final()));
    let viewer = Client::connect(&url, Role::Viewer, Some("view-9q2x".into()))
        .await
        .expect("the viewer is welcomed");
    viewer.close().await;
    // and a publisher that sends 20 poses the server refuses (an unknown profile),
    // then vanishes without a goodbye
    let mut publisher = Client::connect(&url, Role::Publisher, Some("pub-7f3k".into()))
        .await
        .expect("the publisher is welcomed");
    for i in 0..20 {
        let mut pose = super::server::arm_pose("alice", 0.3, f64::from(i));
        if let ClientMessage::Pose(p) = &mut pose {
            p.profile = "kinect-v9".into();
        }
        publisher.send(&pose).await.expect("sends");
        match tokio::time::timeout(Duration::from_secs(10), publisher.next()).await {
            Ok(Ok(ServerMessage::Error { .. })) => {}
            other => panic!("expected an error reply, got {other:?}"),
        }
    }
    drop(publisher);
    // a message whose unknown type would start a forged line and clear the operator's
    // terminal if it were logged as it came
    let mut forger = Client::connect(&url, Role::Publisher, Some("pub-7f3k".into()))
        .await
        .expect("the publisher is welcomed");
    let forged =
        r#"{"type": "x\n2026-01-01T00:00:00Z  INFO clothcast::net::conn: forged\u001b[2J"}"#;
    forger
        .send_raw(tokio_tungstenite::tungstenite::Message::text(forged))
        .await
        .expect("sends");
    match tokio::time::timeout(Duration::from_secs(10), forger.next()).await {
        Ok(Ok(ServerMessage::Error { message, .. })) => {
            assert!(message.contains("x\n2026"), "{message:?}")
        }
        other => panic!("expected an error reply, got {other:?}"),
    }
    forger.close().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.kill().expect("stops the server");
    let (_, _, log) = finish(server).await;
    let _ = std::fs::remove_dir_all(&dir);
    let line = |what: &str, with: &[&str]| {
        log.lines()
            .find(|l| l.contains(what) && with.iter().all(|w| l.contains(w)))
            .unwrap_or_else(|| panic!("no {what:?} line with {with:?} in the log:\n{log}"))
            .to_string()
    };
    // where each token came from, never the token
    line(
        "publisher token from the systemd credential",
        &["publisher-token"],
    );
    line("viewer token from the file", &["viewer.token"]);
    assert!(
        !log.contains("view-9q2x") && !log.contains("pub-7f3k"),
        "{log}"
    );
    line(
        "not welcomed",
        &[
            "peer=127.0.0.1:",
            "closed by us (4001): wrong or missing token",
        ],
    );
    line("connected", &["peer=127.0.0.1:", "role=Viewer"]);
    line(
        "disconnected",
        &["peer=127.0.0.1:", "role=Viewer", "closed by the peer"],
    );
    line(
        "disconnected",
        &[
            "role=Publisher",
            "the peer left without a close (20 of its messages refused)",
        ],
    );
    // the forged message: one line, its newline and escape spelled out
    line(
        "refused",
        &[
            "code=bad_message",
            "`x\\n2026-01-01T00:00:00Z",
            "forged\\u{1b}[2J`",
        ],
    );
    assert!(
        !log.lines().any(|l| l.starts_with("2026-01-01")) && !log.contains('\u{1b}'),
        "{log}"
    );
    // the refusals, as the publisher was told them: the 1st to 4th, 8th and 16th
    let refusals: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" refused ") && l.contains("bad_pose"))
        .collect();
    assert_eq!(refusals.len(), 6, "{log}");
    for (l, n) in refusals.iter().zip([1, 2, 3, 4, 8, 16]) {
        assert!(
            l.contains("code=bad_pose why=unknown profile \"kinect-v9\"")
                && l.ends_with(&format!("refused={n}")),
            "{l}"
        );
    }
}

/// A scratch folder for the test `name` (made; the same for every call).
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("clothcast-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// `clothcast serve` of the small fixture database with `config` (TOML, written to
/// [`scratch`]`(name)`), logging at `info` to its stderr, without token variables in
/// its environment, with `$CREDENTIALS_DIRECTORY` (systemd's credentials) when given,
/// started by a shell after `ulimit` with `ulimit` as its arguments when given
/// (`-n 64`): the server (the shell's process: it execs), its WebSocket URL and the
/// folder.
#[cfg(unix)]
async fn serve_with_config(
    name: &str,
    config: &str,
    ulimit: Option<&str>,
    credentials: Option<&std::path::Path>,
) -> (std::process::Child, String, std::path::PathBuf) {
    use std::io::BufRead;
    let dir = scratch(name);
    let path = dir.join("server.toml");
    std::fs::write(&path, config).expect("writes the config");
    let db =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/db/v1/small.ccdb");
    let limit = ulimit.map_or(String::new(), |u| format!("ulimit {u} && "));
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!(
            "{limit}exec \"$0\" serve --config \"$1\" --db \"$2\" --bind 127.0.0.1:0"
        ))
        .arg(env!("CARGO_BIN_EXE_clothcast"))
        .arg(&path)
        .arg(&db)
        .env("RUST_LOG", "info")
        .env_remove("CLOTHCAST_PUBLISHER_TOKEN")
        .env_remove("CLOTHCAST_VIEWER_TOKEN")
        .env_remove("CREDENTIALS_DIRECTORY");
    if let Some(c) = credentials {
        command.env("CREDENTIALS_DIRECTORY", c);
    }
    let mut server = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("clothcast serve runs");
    let stdout = server.stdout.take().expect("stdout");
    let url = tokio::task::spawn_blocking(move || {
        std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .find_map(|l| {
                l.split_whitespace()
                    .find(|w| w.starts_with("ws://"))
                    .map(str::to_string)
            })
    })
    .await
    .expect("joins")
    .expect("the server prints its URL");
    (server, url, dir)
}

/// Waits (10 s at most, else fails saying `what`) until the server at `addr` exports
/// `name` at `least` or more.
async fn metric_at_least(addr: std::net::SocketAddr, name: &str, least: f64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while super::server::metric(addr, name).await < least {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The address of a `ws://ADDR/ws` URL.
fn address_of(url: &str) -> std::net::SocketAddr {
    url.trim_start_matches("ws://")
        .trim_end_matches("/ws")
        .parse()
        .expect("the URL's address")
}

/// A server out of file descriptors (connections held open until none is left) says
/// so once, not at every retry of its accept loop, and serves again as soon as some
/// are given back: the viewer that comes next is welcomed.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_out_of_file_descriptors_says_so_once_and_recovers() {
    let (server, url, dir) = serve_with_config(
        "nofiles",
        "publisher_token = \"p-1\"\nviewer_token = \"v-1\"\n\
         vmc_bind = \"off\"\nmvn_bind = \"off\"\n",
        Some("-n 64"),
        None,
    )
    .await;
    let addr = address_of(&url);
    // plain TCP connections that send nothing: each holds one of the server's
    // descriptors for hello_timeout (5 s); the backlog takes the rest
    let mut held = Vec::new();
    for _ in 0..120 {
        held.push(
            tokio::net::TcpStream::connect(addr)
                .await
                .expect("connects"),
        );
    }
    // a second of the accept loop failing every 50 ms
    tokio::time::sleep(Duration::from_millis(1000)).await;
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(10);
    let viewer = loop {
        match Client::connect(&url, Role::Viewer, Some("v-1".into())).await {
            Ok(v) => break v,
            Err(e) => {
                assert!(Instant::now() < deadline, "no viewer welcomed again: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    viewer.close().await;
    super::server::sigterm(&server);
    let (status, _, log) = finish(server).await;
    let _ = std::fs::remove_dir_all(&dir);
    assert!(status.success(), "serve after SIGTERM: {status}\n{log}");
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("accepting a connection failed"))
        .collect();
    assert_eq!(warnings.len(), 1, "{log}");
    assert!(
        warnings[0].contains("Too many open files") && warnings[0].contains("failures=1"),
        "{}",
        warnings[0]
    );
    // and it said at start that its limit is short of what its own limits need
    assert!(
        log.lines().any(|l| l.contains("WARN")
            && l.contains("open-file limit below what max_connections = 1024 needs")
            && l.contains("limit=64 needed=2112")),
        "{log}"
    );
}

/// Started from a shell whose soft limit of open files is below what the connection
/// limits need (commonly 1 024 against 2 112), `serve` raises it within the hard limit,
/// and says so.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_raises_its_open_file_limit_to_what_its_connection_limits_need() {
    let hard = std::fs::read_to_string("/proc/self/limits")
        .expect("limits")
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(4).map(str::to_string))
        .expect("the hard limit");
    let (server, _url, dir) = serve_with_config(
        "rlimit",
        "open = true\nvmc_bind = \"off\"\nmvn_bind = \"off\"\nmax_connections = 300\n",
        Some("-Sn 100"),
        None,
    )
    .await;
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", server.id())).expect("limits");
    super::server::sigterm(&server);
    let (status, _, log) = finish(server).await;
    let _ = std::fs::remove_dir_all(&dir);
    assert!(status.success(), "{log}");
    let soft = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .expect("the soft limit");
    if hard == "unlimited" || hard.parse::<u64>().is_ok_and(|h| h >= 664) {
        assert_eq!(soft, "664", "{limits}");
        assert!(
            log.lines().any(|l| l.contains("INFO")
                && l.contains("open-file limit raised to what max_connections = 300 needs")
                && l.contains("from=100 to=664")),
            "{log}"
        );
    } else {
        assert!(log.contains("open-file limit below what"), "{log}");
    }
}

/// A token rotated without a restart: after the token file changes, SIGHUP (what
/// `systemctl reload` sends) makes `serve` take the new token for new connections,
/// while a publisher welcomed with the old one streams on; a reload that would leave an
/// unusable token is refused by name and the tokens in use are kept.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_tokens_for_new_connections_and_keeps_the_welcomed() {
    let token_file = scratch("reload-tokens").join("publisher.token");
    std::fs::write(&token_file, "old-p\n").expect("token");
    let (server, url, dir) = serve_with_config(
        "reload-tokens",
        &format!(
            "publisher_token_file = \"{}\"\nviewer_token = \"v-1\"\n\
             vmc_bind = \"off\"\nmvn_bind = \"off\"\n",
            token_file.display()
        ),
        None,
        None,
    )
    .await;
    let mut welcomed = Client::connect(&url, Role::Publisher, Some("old-p".into()))
        .await
        .expect("the old token, before the reload");
    std::fs::write(&token_file, "new-p\n").expect("token");
    let hangup = |child: &std::process::Child| {
        let sent = Command::new("kill")
            .args(["-HUP", &child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success());
    };
    hangup(&server);
    let deadline = Instant::now() + Duration::from_secs(10);
    let _new = loop {
        match Client::connect(&url, Role::Publisher, Some("new-p".into())).await {
            Ok(c) => break c,
            Err(e) => {
                assert!(e.is_final(), "{e}");
                assert!(
                    Instant::now() < deadline,
                    "the new token is never taken: {e}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    let old = Client::connect(&url, Role::Publisher, Some("old-p".into())).await;
    assert!(
        old.is_err_and(|e| e.is_final()),
        "the old token after the reload"
    );
    // the publisher welcomed before streams on: its pose moves its avatar
    welcomed
        .send(&super::server::arm_pose("kept", 0.3, 0.0))
        .await
        .expect("sends after the reload");
    metric_at_least(
        address_of(&url),
        "clothcast_avatars",
        1.0,
        "the welcomed publisher's pose went nowhere",
    )
    .await;
    // an empty token file: refused, the new token still opens
    std::fs::write(&token_file, "\n").expect("token");
    hangup(&server);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _still = Client::connect(&url, Role::Publisher, Some("new-p".into()))
        .await
        .expect("the tokens in use are kept after a refused reload");
    super::server::sigterm(&server);
    let (status, _, log) = finish(server).await;
    let _ = std::fs::remove_dir_all(&dir);
    assert!(status.success(), "{log}");
    assert!(
        log.lines().any(|l| l.contains("INFO")
            && l.contains("tokens reloaded: publisher token from the file")
            && l.contains("publisher.token, viewer token from the config")),
        "{log}"
    );
    assert!(
        log.lines().any(|l| l.contains("ERROR")
            && l.contains("reload refused, the tokens in use are kept")
            && l.contains("publisher")),
        "{log}"
    );
    assert!(!log.contains("new-p") && !log.contains("old-p"), "{log}");
}

/// A host that opens connections in a loop does not fill the disk: past
/// `log_connections_per_address_per_minute` its connections are left out of the log,
/// counted in /metrics, and told in one warning (here at shutdown, as SIGTERM stops
/// the server; once a minute while it runs).
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_connections_is_logged_within_its_budget_and_summed_up() {
    let (server, url, dir) = serve_with_config(
        "logflood",
        "publisher_token = \"p-1\"\nviewer_token = \"v-1\"\n\
         vmc_bind = \"off\"\nmvn_bind = \"off\"\n\
         log_connections_per_address_per_minute = 3\n",
        None,
        None,
    )
    .await;
    let addr = address_of(&url);
    // ten refused at hello, then a viewer that is welcomed (over the budget: not logged,
    // but served as any other)
    for _ in 0..10 {
        let refused = Client::connect(&url, Role::Viewer, Some("wrong".into())).await;
        assert!(refused.is_err_and(|e| e.is_final()));
    }
    let viewer = Client::connect(&url, Role::Viewer, Some("v-1".into()))
        .await
        .expect("a viewer over the log's budget is still welcomed");
    viewer.close().await;
    metric_at_least(
        addr,
        "clothcast_connections_not_logged_total",
        8.0,
        "the left-out connections are not counted",
    )
    .await;
    super::server::sigterm(&server);
    let (status, _, log) = finish(server).await;
    let _ = std::fs::remove_dir_all(&dir);
    assert!(status.success(), "serve after SIGTERM: {status}\n{log}");
    let not_welcomed = log.lines().filter(|l| l.contains("not welcomed")).count();
    assert_eq!(not_welcomed, 3, "{log}");
    assert!(
        !log.lines()
            .any(|l| l.contains(" connected ") || l.contains("disconnected")),
        "{log}"
    );
    let summary = log
        .lines()
        .find(|l| l.contains("connections not logged"))
        .unwrap_or_else(|| panic!("no summary in the log:\n{log}"));
    assert!(
        summary.contains("WARN")
            && summary.contains("since the last summary (shutting down)")
            && summary.contains("connections=8 addresses=1 most=127.0.0.1 most_connections=8"),
        "{summary}"
    );
}

/// `clothcast play --kinect` stands in for a Kinect bridge: the clip's bodies, sent as
/// v2 or Azure body frames on a connection naming its sensor, move avatars through the
/// server's Kinect path (position retargeting, One Euro filtering). The v2 sensor is
/// 1.3 m up and tilted 20° down, and reports its floor as a Kinect v2 does: the avatars
/// walk upright on the floor. The Azure one reports no floor (a level sensor at the
/// default 1 m).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn play_kinect_drives_avatars_through_the_kinect_path() {
    let server = start(db(), config()).await.expect("server starts");
    let url = format!("ws://{}/ws", server.addr);
    let skeleton = Skeleton::from_rest_positions(db().body.skeleton);
    for (kind, sensor, view) in [
        (
            "v2",
            "kiosk-a",
            &["--sensor-height", "1.3", "--sensor-tilt", "20"][..],
        ),
        ("azure", "kiosk-b", &["--no-floor"][..]),
    ] {
        let args = [
            "--kinect",
            kind,
            "--prefix",
            sensor,
            "--avatars",
            "2",
            "--seconds",
            "3",
        ];
        let play = play_to(&url, &[&args[..], view].concat());
        let mut viewer = connect_viewer(&url).await;
        let mut view = Viewer::default();
        let ids = [format!("kinect-{sensor}-0"), format!("kinect-{sensor}-1")];
        until(&mut viewer, &mut view, |v, _| {
            ids.iter()
                .all(|id| v.avatars.get(id).is_some_and(|a| a.frames >= 10))
        })
        .await;
        // the walk moves the garment (sleeves swing with the arms)
        let first = view.avatars[&ids[0]].positions.clone();
        let mut stance = Vec::new();
        for _ in 0..20 {
            super::server::more_frames(&mut viewer, &mut view, &ids[0], 1).await;
            let frame = view.avatars[&ids[0]].last.as_ref().expect("a frame");
            stance.push(upright_on_floor(&skeleton, frame));
        }
        let moved = super::server::max_moved(&first, &view.avatars[&ids[0]].positions);
        assert!(moved > 0.02, "{kind}: the garment did not move ({moved} m)");
        // the lower ankle's height over the rest height, and the trunk's lean
        let feet = stance.iter().map(|s| s.0).fold(f32::INFINITY, f32::min);
        let lean = stance.iter().map(|s| s.1).sum::<f32>() / stance.len() as f32;
        // (the clip's own walk leans 8–12°; uncorrected, the tilt made that 28° and
        // lifted the feet 6 cm)
        if kind == "v2" {
            assert!(
                feet.abs() < 0.03,
                "{kind}: the feet reach {feet} m off the floor"
            );
            assert!(lean < 15.0, "{kind}: the trunk leans {lean}° on average");
        }
        let (status, out, err) = finish(play).await;
        assert!(
            status.success(),
            "play --kinect {kind} failed: {out}\n{err}"
        );
        assert!(out.contains("for 2 avatars"), "{out}");
    }
    let kinect = r#"clothcast_poses_in_total{source="kinect"}"#;
    assert!(super::server::metric(server.addr, kinect).await >= 40.0);
    server.shutdown().await;
}

/// For a frame's body pose: the height of the lower ankle above its rest height
/// (metres), and the angle of the trunk (pelvis to neck) from its rest direction
/// (degrees).
fn upright_on_floor(skeleton: &Skeleton, frame: &FrameMessage) -> (f32, f32) {
    let body = frame.body_pose(JOINT_COUNT).expect("a good body pose");
    let pose = Pose::from_arrays(body.translation, &body.rotations);
    let (p, rest) = (skeleton.joint_positions(&pose), skeleton.rest_positions());
    let ankle = |p: &[Vec3; JOINT_COUNT]| {
        p[JointId::LEFT_ANKLE.index()]
            .y
            .min(p[JointId::RIGHT_ANKLE.index()].y)
    };
    let trunk = |p: &[Vec3; JOINT_COUNT]| p[JointId::NECK.index()] - p[JointId::PELVIS.index()];
    (
        ankle(&p) - ankle(rest),
        trunk(&p).angle_between(trunk(rest)).to_degrees(),
    )
}

/// The next message of a raw connection that is not a ping or pong, within 5 s.
async fn next_raw<S>(ws: &mut S) -> tokio_tungstenite::tungstenite::Message
where
    S: futures_util::Stream<
            Item = Result<
                tokio_tungstenite::tungstenite::Message,
                tokio_tungstenite::tungstenite::Error,
            >,
        > + Unpin,
{
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    loop {
        let m = tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .expect("a reply in time")
            .expect("open")
            .expect("readable");
        if !matches!(m, Message::Ping(_) | Message::Pong(_)) {
            return m;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_says_hello_in_json_is_answered_in_json_and_pings_are_answered() {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::Message;
    let server = start(db(), config()).await.expect("server");
    let url = format!("ws://{}/ws", server.addr);
    let json = |m: Message| -> serde_json::Value {
        match m {
            Message::Text(t) => serde_json::from_str(t.as_str()).expect("JSON"),
            other => panic!("not a text message: {other:?}"),
        }
    };
    // a Kinect bridge or a script with no MessagePack library
    let (mut ws, _) = tokio_tungstenite::connect_async(&url)
        .await
        .expect("connects");
    let hello = r#"{"type": "hello", "version": 1, "role": "publisher", "token": "pub"}"#;
    ws.send(Message::Text(hello.into())).await.expect("hello");
    let welcome = json(next_raw(&mut ws).await);
    assert_eq!(welcome["type"], "welcome", "{welcome}");
    assert_eq!(welcome["version"], 1, "{welcome}");
    // the application-level ping that browsers use to tell a quiet server from a dead link
    ws.send(Message::Text(r#"{"type": "ping"}"#.into()))
        .await
        .expect("ping");
    let pong = json(next_raw(&mut ws).await);
    assert_eq!(pong, serde_json::json!({"type": "pong"}));
    let pose = r#"{"type": "pose", "avatar": "alice", "profile": "canonical", "timestamp": 1.0,
        "joints": [{"name": "left_shoulder", "rotation": [0.0, 0.0, -0.38, "x"]}]}"#;
    ws.send(Message::Text(pose.into())).await.expect("pose");
    let error = json(next_raw(&mut ws).await);
    assert_eq!(error["type"], "error", "{error}");
    assert_eq!(error["code"], "bad_message", "{error}");
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{error}"
    );
    // refused at the door: the reason in JSON too, then the close code
    let (mut ws, _) = tokio_tungstenite::connect_async(&url)
        .await
        .expect("connects");
    let wrong = r#"{"type": "hello", "version": 1, "role": "publisher", "token": "nope"}"#;
    ws.send(Message::Text(wrong.into())).await.expect("hello");
    let error = json(next_raw(&mut ws).await);
    assert_eq!(error["code"], "closed", "{error}");
    match next_raw(&mut ws).await {
        Message::Close(Some(f)) => assert_eq!(u16::from(f.code), 4001),
        other => panic!("no close: {other:?}"),
    }
    // a MessagePack hello is answered in MessagePack, as before
    let (mut ws, _) = tokio_tungstenite::connect_async(&url)
        .await
        .expect("connects");
    let hello = clothcast::protocol::ClientMessage::Hello(HelloMessage {
        version: clothcast::protocol::PROTOCOL_VERSION,
        role: Role::Viewer,
        token: Some("view".into()),
        sensor: None,
    });
    let bytes = hello.to_msgpack().expect("encodes");
    ws.send(Message::Binary(bytes.into())).await.expect("hello");
    match next_raw(&mut ws).await {
        Message::Binary(b) => assert!(matches!(
            clothcast::protocol::ServerMessage::from_msgpack(&b),
            Ok(clothcast::protocol::ServerMessage::Welcome { .. })
        )),
        other => panic!("not MessagePack: {other:?}"),
    }
    let ping = clothcast::protocol::ClientMessage::Ping
        .to_msgpack()
        .expect("encodes");
    ws.send(Message::Binary(ping.into())).await.expect("ping");
    match next_raw(&mut ws).await {
        Message::Binary(b) => assert_eq!(
            clothcast::protocol::ServerMessage::from_msgpack(&b).expect("reads"),
            clothcast::protocol::ServerMessage::Pong
        ),
        other => panic!("not MessagePack: {other:?}"),
    }
    server.shutdown().await;
}
