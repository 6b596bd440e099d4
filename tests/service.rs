//! The shipped systemd units (`deploy/clothcast.service` and `.socket`), checked by
//! systemd's own `systemd-analyze verify`, and socket activation by systemd's own
//! `systemd-socket-activate` (needs systemd's tools, which .ci/run installs when they are
//! missing). How `serve` speaks the notify protocol the unit relies on is tested in
//! `server.rs` (`serve_speaks_systemds_notify_protocol_and_pings_its_watchdog`).

use std::path::Path;

/// The unit as shipped, with its `ExecStart` pointed at the binary under test (verify
/// checks that the command exists): systemd finds nothing to say about it, and it
/// keeps what `serve` relies on.
#[test]
fn the_shipped_systemd_unit_verifies_clean() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let unit = std::fs::read_to_string(root.join("deploy/clothcast.service"))
        .expect("deploy/clothcast.service");
    for line in [
        "Type=notify",
        "ExecStart=/usr/local/bin/clothcast serve --config /etc/clothcast/server.toml",
        "ExecReload=/bin/sh -c 'kill -HUP \"$MAINPID\"'",
        "WatchdogSec=10s",
        "Restart=on-failure",
        "KillSignal=SIGTERM",
        "Environment=CLOTHCAST_CACHE=%C/clothcast",
    ] {
        assert!(
            unit.lines().any(|l| l == line),
            "deploy/clothcast.service lost `{line}`"
        );
    }
    let dir = std::env::temp_dir().join(format!("clothcast-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch folder");
    let here = dir.join("clothcast.service");
    std::fs::write(
        &here,
        unit.replace("/usr/local/bin/clothcast", env!("CARGO_BIN_EXE_clothcast")),
    )
    .expect("unit written");
    // the socket unit (socket activation, optional) with the service it starts
    let socket_unit = std::fs::read_to_string(root.join("deploy/clothcast.socket"))
        .expect("deploy/clothcast.socket");
    assert!(socket_unit.lines().any(|l| l == "Accept=no"));
    let socket = dir.join("clothcast.socket");
    std::fs::write(&socket, &socket_unit).expect("socket unit written");
    let out = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&here)
        .arg(&socket)
        .output()
        .expect("systemd-analyze is not installed (.ci/run installs it: apt-get install systemd)");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "systemd-analyze verify: {said}"
    );
    // and verify does complain about a broken unit (so its silence above means something)
    std::fs::write(&here, unit.replace("Type=notify", "Type=notifyy")).expect("unit written");
    let out = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&here)
        .output()
        .expect("systemd-analyze runs");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("notifyy"),
        "systemd-analyze verify missed a bad Type="
    );
    std::fs::write(&socket, socket_unit.replace("Accept=no", "Accept=nope"))
        .expect("socket unit written");
    let out = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&socket)
        .output()
        .expect("systemd-analyze runs");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("nope"),
        "systemd-analyze verify missed a bad Accept="
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `serve` started by socket activation, as `deploy/clothcast.socket` does it, through
/// systemd's own `systemd-socket-activate` (which, like a `.socket` unit, holds the port
/// and starts the server at the first connection): the server listens on the socket it
/// was passed, not on its config's `bind`, and the connection that woke it (queued by
/// the kernel while the server loaded its database) is welcomed and gets frames. Sockets
/// it cannot serve on are refused by name before anything starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_takes_its_port_from_socket_activation() {
    use super::server::{arm_pose, connect_publisher, connect_viewer, until};
    use clothcast::client::Viewer;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = std::env::temp_dir().join(format!("clothcast-activate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch folder");
    let config = dir.join("server.toml");
    // `bind` names a port that is not used: the passed socket is
    std::fs::write(
        &config,
        "publisher_token = \"pub\"\nviewer_token = \"view\"\nbind = \"127.0.0.1:1\"\nvmc_bind = \"off\"\nmvn_bind = \"off\"\n",
    )
    .expect("config");
    let free_port = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port()
    };
    let activate = |listen: &[String], extra: &[&str]| {
        let mut c = std::process::Command::new("systemd-socket-activate");
        for l in listen {
            c.arg("-l").arg(l);
        }
        c.args(extra)
            .args(["-E", "RUST_LOG=info"])
            .arg(env!("CARGO_BIN_EXE_clothcast"))
            .arg("serve")
            .arg("--config")
            .arg(&config)
            .arg("--db")
            .arg(root.join("tests/fixtures/db/v1/small.ccdb"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        c.spawn().expect(
            "systemd-socket-activate is not installed (.ci/run installs it: apt-get install systemd)",
        )
    };
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut server = activate(std::slice::from_ref(&addr), &[]);
    // nothing runs until a connection comes: this one wakes the server
    let url = format!("ws://{addr}/ws");
    let mut viewer = {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            // systemd-socket-activate may not have bound the port yet
            match tokio::time::timeout(
                std::time::Duration::from_secs(10),
                clothcast::client::Client::connect(
                    &url,
                    clothcast::protocol::Role::Viewer,
                    Some("view".into()),
                ),
            )
            .await
            {
                Ok(Ok(c)) => break c,
                _ if std::time::Instant::now() < deadline => {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await
                }
                Ok(Err(e)) => panic!("the activated server never welcomed a viewer: {e}"),
                Err(_) => panic!("the activated server never welcomed a viewer (timed out)"),
            }
        }
    };
    viewer
        .send(&clothcast::protocol::ClientMessage::subscribe(None))
        .await
        .expect("subscribe");
    let mut publisher = connect_publisher(&url).await;
    let mut view = Viewer::default();
    for i in 0..3 {
        publisher
            .send(&arm_pose("woken", 0.3, f64::from(i) / 30.0))
            .await
            .expect("pose");
    }
    until(&mut viewer, &mut view, |v, _| {
        v.avatars.get("woken").is_some_and(|a| a.frames >= 3)
    })
    .await;
    // a second viewer on the same port, while it serves
    drop(connect_viewer(&url).await);
    let _ = server.kill();
    let out = server.wait_with_output().expect("the server's output");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains(&format!("serving on ws://{addr}/ws")),
        "{said}"
    );
    assert!(
        said.contains("listening on the socket systemd passed; `bind` is not used"),
        "{said}"
    );

    // two sockets, a datagram socket, a connection instead of a listener: refused
    let two = [
        format!("127.0.0.1:{}", free_port()),
        format!("127.0.0.1:{}", free_port()),
    ];
    let one = [format!("127.0.0.1:{}", free_port())];
    for (listen, extra, named) in [
        (&two[..], &[][..], "passed 2 sockets"),
        (&one[..], &["--datagram"][..], "not a TCP socket"),
        (
            &one[..],
            &["--accept"][..],
            "not listening (Accept=yes is not supported",
        ),
    ] {
        let child = activate(listen, extra);
        // the first connection starts the server (a datagram for --datagram)
        let poke = listen[0].clone();
        let datagram = extra.contains(&"--datagram");
        let out = tokio::task::spawn_blocking(move || {
            // until the refusal ends the server (and with it systemd-socket-activate),
            // poke the port now and then: a datagram sent before the port is bound is
            // lost without an error
            let mut child = child;
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while child.try_wait().ok().flatten().is_none() && std::time::Instant::now() < deadline
            {
                if datagram {
                    let _ = std::net::UdpSocket::bind("127.0.0.1:0")
                        .and_then(|s| s.send_to(b"x", &poke));
                } else {
                    let _ = std::net::TcpStream::connect(&poke);
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            let _ = child.kill();
            child.wait_with_output().expect("the child's output")
        })
        .await
        .expect("joins");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{extra:?}: served");
        assert!(said.contains(named), "{extra:?}: {said}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
