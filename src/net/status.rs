//! `/metrics` (Prometheus text: the server's counters, per-source input, per-avatar
//! input rates) and `/healthz` (whether ticks complete).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::extract::State;
use axum::response::IntoResponse;

use super::udp::UdpInput;
use super::{Shared, Source};

/// A Prometheus label value: backslash, double quote and newline escaped (avatar ids
/// come from publishers).
fn label_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Whether the tick loop is alive at server time `now` (seconds) given when its last
/// tick completed (`None`: none yet) and the tick rate: the last tick may be at most
/// [`STALL_TICKS`] periods (and at least [`STALL_MIN_SECONDS`]) old; before the first
/// tick the server has that long to start. The error says for how long it stalled.
fn tick_health(now: f64, last_tick: Option<f64>, tick_hz: f32) -> Result<(), String> {
    let allowed = (STALL_TICKS / f64::from(tick_hz)).max(STALL_MIN_SECONDS);
    let since = now - last_tick.unwrap_or(0.0);
    if since <= allowed {
        Ok(())
    } else {
        Err(match last_tick {
            Some(_) => format!("tick stalled: the last tick completed {since:.1} s ago"),
            None => format!("tick stalled: no tick completed in {since:.1} s"),
        })
    }
}

/// Tick periods without a completed tick after which `/healthz` fails.
const STALL_TICKS: f64 = 30.0;
/// The least time without a completed tick after which `/healthz` fails, seconds.
const STALL_MIN_SECONDS: f64 = 2.0;

/// Whether the server's tick loop is alive now ([`tick_health`] of its last tick).
fn health(s: &Shared) -> Result<(), String> {
    let last = s.metrics.last_tick_micros.load(Ordering::Relaxed);
    let last = (last > 0).then_some(last as f64 * 1e-6);
    let now = s.start.elapsed().as_secs_f64();
    tick_health(now, last, s.config.engine.tick_hz)
}

/// A handle onto a running server's health and load, for a supervisor (systemd's
/// watchdog and status line). It holds the server's shared state, not the server, so
/// [`ServerHandle::shutdown`](super::ServerHandle::shutdown) still stops everything;
/// after that its health reports the tick stalled.
#[derive(Clone)]
pub struct ServerProbe(pub(super) Arc<Shared>);

impl ServerProbe {
    /// What `/healthz` says: `Ok` while ticks complete, else why not (the tick loop
    /// stalled, died or panics every tick).
    pub fn health(&self) -> Result<(), String> {
        health(&self.0)
    }

    /// One line on the load: avatars, viewers, publishers, the share of the last
    /// second the ticks spent working, and the ticks that ran late so far, e.g.
    /// `4 avatars, 2 viewers, 1 publisher, ticks busy 12 %, 0 late ticks`; while the
    /// ticks fall far behind and run in one slot instead of the configured ones
    /// (`engine.adapt_tick_slots`), it ends `, far behind: one slot per tick`.
    pub fn summary(&self) -> String {
        let m = &self.0.metrics;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let n = |k: u64, what: &str| format!("{k} {what}{}", if k == 1 { "" } else { "s" });
        let behind = g(&m.tick_slots) == 1 && self.0.config.engine.tick_slots > 1;
        format!(
            "{}, {}, {}, ticks busy {:.0} %, {}{}",
            n(g(&m.avatars), "avatar"),
            n(g(&m.viewers), "viewer"),
            n(g(&m.publishers), "publisher"),
            g(&m.tick_busy_ppm) as f64 * 1e-4,
            n(g(&m.late_ticks), "late tick"),
            if behind {
                ", far behind: one slot per tick"
            } else {
                ""
            },
        )
    }
}

/// `/healthz`: 200 `ok` while ticks complete, 503 with the reason when the tick loop
/// has stalled, died or panics every tick (so that a supervisor restarts the server).
pub(super) async fn healthz(State(s): State<Arc<Shared>>) -> impl IntoResponse {
    match health(&s) {
        Ok(()) => (axum::http::StatusCode::OK, "ok\n".to_string()),
        Err(e) => (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            format!("{e}\n"),
        ),
    }
}

pub(super) async fn metrics(State(s): State<Arc<Shared>>) -> impl IntoResponse {
    let m = &s.metrics;
    let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let mut text = format!(
        "# TYPE clothcast_ticks_total counter\nclothcast_ticks_total {}\n\
         # TYPE clothcast_late_ticks_total counter\nclothcast_late_ticks_total {}\n\
         # TYPE clothcast_tick_panics_total counter\nclothcast_tick_panics_total {}\n\
         # TYPE clothcast_unwatched_ticks_total counter\nclothcast_unwatched_ticks_total {}\n\
         # TYPE clothcast_tick_seconds gauge\nclothcast_tick_seconds {}\n\
         # TYPE clothcast_tick_seconds_max gauge\nclothcast_tick_seconds_max {}\n\
         # TYPE clothcast_tick_busy_ratio gauge\nclothcast_tick_busy_ratio {}\n\
         # TYPE clothcast_tick_slots gauge\nclothcast_tick_slots {}\n\
         # TYPE clothcast_avatars gauge\nclothcast_avatars {}\n\
         # TYPE clothcast_avatars_unwatched gauge\nclothcast_avatars_unwatched {}\n\
         # TYPE clothcast_avatars_held gauge\nclothcast_avatars_held {}\n\
         # TYPE clothcast_avatar_frames_total counter\nclothcast_avatar_frames_total {}\n\
         # TYPE clothcast_keyframes_total counter\nclothcast_keyframes_total {}\n\
         # TYPE clothcast_frame_errors_total counter\nclothcast_frame_errors_total {}\n\
         # TYPE clothcast_poses_refused_total counter\nclothcast_poses_refused_total {}\n\
         # TYPE clothcast_viewers gauge\nclothcast_viewers {}\n\
         # TYPE clothcast_publishers gauge\nclothcast_publishers {}\n\
         # TYPE clothcast_connections gauge\nclothcast_connections {}\n\
         # TYPE clothcast_connections_refused_total counter\nclothcast_connections_refused_total {}\n\
         # TYPE clothcast_connections_not_logged_total counter\nclothcast_connections_not_logged_total {}\n\
         # TYPE clothcast_connections_stalled gauge\nclothcast_connections_stalled {}\n\
         # TYPE clothcast_peers_timed_out_total counter\nclothcast_peers_timed_out_total {}\n\
         # TYPE clothcast_poses_in_total counter\n\
         clothcast_poses_in_total{{source=\"websocket\"}} {}\n\
         clothcast_poses_in_total{{source=\"kinect\"}} {}\n\
         clothcast_poses_in_total{{source=\"vmc\"}} {}\n\
         clothcast_poses_in_total{{source=\"mvn\"}} {}\n\
         # TYPE clothcast_bytes_out_total counter\nclothcast_bytes_out_total {}\n\
         # TYPE clothcast_frames_out_total counter\nclothcast_frames_out_total {}\n\
         # TYPE clothcast_frames_dropped_total counter\nclothcast_frames_dropped_total {}\n\
         # TYPE clothcast_resyncs_total counter\nclothcast_resyncs_total {}\n\
         # TYPE clothcast_assets_resent_total counter\nclothcast_assets_resent_total {}\n\
         # TYPE clothcast_bad_messages_total counter\nclothcast_bad_messages_total {}\n\
         # TYPE clothcast_vmc_stale_total counter\nclothcast_vmc_stale_total {}\n\
         # TYPE clothcast_mvn_stale_total counter\nclothcast_mvn_stale_total {}\n\
         # TYPE clothcast_udp_refused_total counter\n\
         clothcast_udp_refused_total{{input=\"vmc\"}} {}\n\
         clothcast_udp_refused_total{{input=\"mvn\"}} {}\n",
        g(&m.ticks),
        g(&m.late_ticks),
        g(&m.tick_panics),
        g(&m.unwatched_ticks),
        g(&m.tick_micros_last) as f64 * 1e-6,
        g(&m.tick_micros_max) as f64 * 1e-6,
        g(&m.tick_busy_ppm) as f64 * 1e-6,
        g(&m.tick_slots),
        g(&m.avatars),
        g(&m.avatars_unwatched),
        g(&m.avatars_held),
        g(&m.avatar_frames),
        g(&m.keyframes),
        g(&m.frame_errors),
        g(&m.poses_refused),
        g(&m.viewers),
        g(&m.publishers),
        g(&m.connections),
        g(&m.connections_refused),
        g(&m.connections_not_logged),
        g(&m.connections_stalled),
        g(&m.peers_timed_out),
        g(&m.poses_in[Source::WebSocket as usize]),
        g(&m.poses_in[Source::Kinect as usize]),
        g(&m.poses_in[Source::Vmc as usize]),
        g(&m.poses_in[Source::Mvn as usize]),
        g(&m.bytes_out),
        g(&m.frames_out),
        g(&m.frames_dropped),
        g(&m.resyncs),
        g(&m.assets_resent),
        g(&m.bad_messages),
        g(&m.vmc_stale),
        g(&m.mvn_stale),
        g(&m.udp_refused[UdpInput::Vmc as usize]),
        g(&m.udp_refused[UdpInput::Mvn as usize]),
    );
    if let Ok(rates) = s.input_rates.lock() {
        text.push_str("# TYPE clothcast_avatar_input_hz gauge\n");
        for (avatar, hz) in rates.iter() {
            text.push_str(&format!(
                "clothcast_avatar_input_hz{{avatar=\"{}\"}} {hz:.2}\n",
                label_value(avatar)
            ));
        }
    }
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        text,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_fails_once_ticks_stop_completing() {
        // 30 Hz: 30 periods is 1 s, below the 2 s floor
        assert!(tick_health(10.0, Some(9.0), 30.0).is_ok());
        let e = tick_health(10.0, Some(7.5), 30.0).expect_err("stalled");
        assert!(e.contains("2.5 s ago"), "{e}");
        // 5 Hz: 30 periods is 6 s
        assert!(tick_health(10.0, Some(5.0), 5.0).is_ok());
        assert!(tick_health(10.0, Some(3.0), 5.0).is_err());
        // starting: no tick yet is fine for the first 2 s only
        assert!(tick_health(1.5, None, 30.0).is_ok());
        let e = tick_health(3.0, None, 30.0).expect_err("never ticked");
        assert!(e.contains("no tick completed"), "{e}");
    }

    #[test]
    fn label_values_escape_what_prometheus_asks() {
        assert_eq!(label_value("alice"), "alice");
        assert_eq!(label_value(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(label_value("two\nlines"), "two\\nlines");
        // an id trying to close the label and add a sample stays inside the value
        let hostile = "x\"} 1\nclothcast_fake 2 #";
        let line = format!("m{{avatar=\"{}\"}} 0", label_value(hostile));
        assert_eq!(line.lines().count(), 1, "{line}");
    }
}
