//! The Prometheus alerting rules shipped in `deploy/prometheus/` and the Grafana
//! dashboard in `deploy/grafana/`: every metric they name is one a running server
//! exports on /metrics (a renamed metric would leave an alert that never fires, a
//! panel that stays empty), `promtool check rules` accepts the rules and every panel's
//! query, and the rules' unit tests (`clothcast-alerts.test.yml`: each alert fires for
//! a server in trouble, when it should, and not for a healthy one) pass under
//! `promtool test rules`.

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

/// The dashboard's panel queries, with Grafana's variables replaced by what a query
/// would get (every server, a one-minute rate window, an hour's range).
fn dashboard_queries(dashboard: &serde_json::Value) -> Vec<String> {
    let panels = dashboard["panels"].as_array().expect("panels");
    panels
        .iter()
        .flat_map(|p| p["targets"].as_array().expect("a panel's targets"))
        .map(|t| {
            t["expr"]
                .as_str()
                .expect("a query")
                .replace("$__rate_interval", "1m")
                .replace("$__range", "1h")
                .replace("$instance", ".*")
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_alerts_and_dashboard_name_metrics_the_server_exports_and_pass_their_tests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("deploy/prometheus");
    let rules = std::fs::read_to_string(dir.join("clothcast-alerts.yml")).expect("the rules");
    let named = metric_names(&rules);
    assert!(named.len() >= 8, "the rules name {named:?}");
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("deploy/grafana/clothcast.json"))
            .expect("the dashboard"),
    )
    .expect("the dashboard is JSON");
    let queries = dashboard_queries(&dashboard);
    assert!(queries.len() >= 9, "{queries:?}");
    let shown = metric_names(&queries.join("\n"));

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
    let missing: Vec<_> = shown.difference(&exported).collect();
    assert!(
        missing.is_empty(),
        "the dashboard shows metrics the server does not export: {missing:?}"
    );
    // each panel's query is PromQL that Prometheus parses: checked as a recording rule
    let scratch = std::env::temp_dir().join(format!("clothcast-dashboard-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("a scratch folder");
    let mut as_rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (k, q) in queries.iter().enumerate() {
        let quoted = serde_json::to_string(q).expect("a string");
        as_rules += &format!("      - record: dashboard:query_{k}\n        expr: {quoted}\n");
    }
    std::fs::write(scratch.join("dashboard.yml"), as_rules).expect("written");
    let checked = promtool(&scratch, &["check", "rules", "dashboard.yml"]);
    let _ = std::fs::remove_dir_all(&scratch);
    assert!(
        checked.contains(&format!("SUCCESS: {} rules found", queries.len())),
        "{checked}"
    );

    let checked = promtool(&dir, &["check", "rules", "clothcast-alerts.yml"]);
    assert!(checked.contains("SUCCESS: 8 rules found"), "{checked}");
    let tested = promtool(&dir, &["test", "rules", "clothcast-alerts.test.yml"]);
    assert!(tested.contains("SUCCESS"), "{tested}");
}
