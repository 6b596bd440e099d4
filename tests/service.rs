//! The shipped systemd unit (`deploy/clothcast.service`), checked by systemd's own
//! `systemd-analyze verify` (needs systemd's tools, which .ci/run installs when they are
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
    let out = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&here)
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
    let _ = std::fs::remove_dir_all(&dir);
}
