//! The Prometheus alerting rules shipped in `deploy/prometheus/`: every metric they name
//! is one a running server exports on /metrics (a renamed metric would leave an alert
//! that never fires), `promtool check rules` accepts them, and their unit tests
//! (`clothcast-alerts.test.yml`: each alert fires for a server in trouble, when it
//! should, and not for a healthy one) pass under `promtool test rules`.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use clothcast::net::start;

use super::server::{config, db, http_get};

/// The `clothcast_…` names in `text` (words of lower-case letters, digits and `_`).
fn metric_names(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
        .filter(|w| w.starts_with("clothcast_") && w.len() > "clothcast_".len())
        .map(str::to_owned)
        .collect()
}

/// `promtool ARGS` in `dir`; fails the test, saying why, when it is not installed or
/// what it checks fails.
fn promtool(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!("promtool (Prometheus's rule checker) cannot run ({e}): .ci/run installs it (apt-get install prometheus)")
        });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {}:\n{text}", args.join(" "));
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_alerts_name_metrics_the_server_exports_and_pass_their_tests() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus");
    let rules = std::fs::read_to_string(dir.join("clothcast-alerts.yml")).expect("the rules");
    let named = metric_names(&rules);
    assert!(named.len() >= 8, "the rules name {named:?}");

    let server = start(db(), config()).await.expect("server starts");
    let metrics = http_get(server.addr, "/metrics").await;
    server.shutdown().await;
    let exported: BTreeSet<String> = metrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    assert!(exported.contains("clothcast_ticks_total"), "{metrics}");
    let missing: Vec<_> = named.difference(&exported).collect();
    assert!(
        missing.is_empty(),
        "the alerting rules name metrics the server does not export: {missing:?}"
    );

    let checked = promtool(&dir, &["check", "rules", "clothcast-alerts.yml"]);
    assert!(checked.contains("SUCCESS: 7 rules found"), "{checked}");
    let tested = promtool(&dir, &["test", "rules", "clothcast-alerts.test.yml"]);
    assert!(tested.contains("SUCCESS"), "{tested}");
}
