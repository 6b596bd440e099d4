//! The server's settings checked before anything starts: a config file is outside
//! input too (TOML reads `nan` and `inf`), and a value the server cannot honour is
//! refused by name rather than clamped in one place and used raw in another.

use super::{MAX_SEND_GROUPS, MAX_TICK_SLOTS, MAX_VIEWER_QUEUE, NetError, ServerConfig};
use crate::skeleton::JOINT_COUNT;

/// Longest duration a setting takes, seconds (a day: longer is a typo, and would
/// overflow the timers).
pub const MAX_SETTING_SECONDS: f64 = 86_400.0;

/// Highest tick rate, Hz.
pub const MAX_TICK_HZ: f64 = 240.0;

/// Where a setting's value must lie: `lo` (excluded when `open_low`) to `hi`, and how
/// the error says it.
struct Range {
    lo: f64,
    open_low: bool,
    hi: f64,
    text: &'static str,
}

const fn range(lo: f64, open_low: bool, hi: f64, text: &'static str) -> Range {
    Range {
        lo,
        open_low,
        hi,
        text,
    }
}

/// A duration in seconds: above 0, at most a day.
const SECONDS: Range = range(
    0.0,
    true,
    MAX_SETTING_SECONDS,
    "seconds above 0, at most 86400",
);
/// A One Euro cutoff frequency.
const HZ: Range = range(0.0, true, 1000.0, "Hz above 0, at most 1000");
/// A One Euro speed coefficient.
const BETA: Range = range(0.0, false, 1000.0, "0 to 1000");

/// Every numeric setting of `config` (server, engine, SOR runtime, filter) within what
/// the server can honour; the first that is not, by its name in the config file.
pub(super) fn check(config: &ServerConfig) -> Result<(), NetError> {
    let e = &config.engine;
    let s = &e.synth;
    let f = f64::from;
    let n = |v: usize| v as f64;
    // the broadcast holds viewer_queue × tick_slots × (send_groups + 1) messages,
    // allocated up front; (D + ε)^−k of distances up to ~1e3 must stay a finite f64
    let mut settings: Vec<(&'static str, f64, Range)> = vec![
        (
            "viewer_queue",
            n(config.viewer_queue),
            range(0.0, false, n(MAX_VIEWER_QUEUE), "0 to 1024 ticks"),
        ),
        (
            "send_groups",
            n(config.send_groups),
            range(0.0, false, n(MAX_SEND_GROUPS), "0 to 64 groups"),
        ),
        ("hello_timeout", f(config.hello_timeout), SECONDS),
        ("peer_timeout", f(config.peer_timeout), SECONDS),
        (
            "max_messages_per_second",
            f(config.max_messages_per_second),
            range(0.0, true, 1e9, "above 0"),
        ),
        (
            "engine.tick_slots",
            f64::from(e.tick_slots),
            range(0.0, false, f64::from(MAX_TICK_SLOTS), "0 to 16 slots"),
        ),
        (
            "engine.tick_hz",
            f(e.tick_hz),
            range(1.0, false, MAX_TICK_HZ, "1 to 240 Hz"),
        ),
        ("engine.idle_timeout", e.idle_timeout, SECONDS),
        ("engine.remove_after", e.remove_after, SECONDS),
        (
            "engine.keyframe_interval",
            e.keyframe_interval,
            range(0.0, false, MAX_SETTING_SECONDS, "seconds, 0 to 86400"),
        ),
        (
            "engine.synth.k",
            s.k,
            range(0.0, true, 32.0, "above 0, at most 32"),
        ),
        (
            "engine.synth.top_k",
            n(s.top_k),
            range(1.0, false, 64.0, "1 to 64"),
        ),
        (
            "engine.synth.t_mix",
            f(s.t_mix),
            range(0.0, false, 60.0, "seconds, 0 to 60"),
        ),
        (
            "engine.synth.penetration_margin",
            f(s.penetration_margin),
            range(0.0, false, 0.1, "metres, 0 to 0.1"),
        ),
        (
            "engine.synth.epsilon",
            s.epsilon,
            range(0.0, true, 1.0, "above 0, at most 1 (m²)"),
        ),
        (
            "engine.synth.min_share",
            f(s.min_share),
            range(0.0, false, 0.5, "0 to 0.5"),
        ),
    ];
    if let Some(c) = &e.filter {
        settings.extend([
            ("engine.filter.min_cutoff", f(c.min_cutoff), HZ),
            ("engine.filter.d_cutoff", f(c.d_cutoff), HZ),
            (
                "engine.filter.translation_min_cutoff",
                f(c.translation_min_cutoff),
                HZ,
            ),
            ("engine.filter.beta", f(c.beta), BETA),
            (
                "engine.filter.translation_beta",
                f(c.translation_beta),
                BETA,
            ),
            (
                "engine.filter.joint_scale (its length)",
                n(c.joint_scale.len()),
                range(
                    0.0,
                    false,
                    n(JOINT_COUNT),
                    "at most one factor per joint (22)",
                ),
            ),
        ]);
        for &v in &c.joint_scale {
            let each = range(0.0, true, 1000.0, "each above 0, at most 1000");
            settings.push(("engine.filter.joint_scale", f(v), each));
        }
    }
    for (name, value, r) in settings {
        let low_ok = if r.open_low {
            value > r.lo
        } else {
            value >= r.lo
        };
        if !(value.is_finite() && low_ok && value <= r.hi) {
            return Err(NetError::BadSetting {
                name,
                value: value.to_string(),
                range: r.text,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(config: &ServerConfig) -> &'static str {
        match check(config) {
            Err(NetError::BadSetting { name, .. }) => name,
            other => panic!("not refused by name: {other:?}"),
        }
    }

    #[test]
    fn the_defaults_pass_and_each_bad_value_is_named() {
        check(&ServerConfig::default()).expect("defaults");
        let base = ServerConfig::default;
        let mut c = base();
        c.hello_timeout = f32::NAN;
        assert_eq!(refused(&c), "hello_timeout");
        let mut c = base();
        c.peer_timeout = 1e30;
        assert_eq!(refused(&c), "peer_timeout");
        let mut c = base();
        c.max_messages_per_second = 0.0;
        assert_eq!(refused(&c), "max_messages_per_second");
        let mut c = base();
        c.engine.tick_hz = -5.0;
        assert_eq!(refused(&c), "engine.tick_hz");
        let mut c = base();
        c.engine.idle_timeout = f64::INFINITY;
        assert_eq!(refused(&c), "engine.idle_timeout");
        let mut c = base();
        c.engine.synth.top_k = 0;
        assert_eq!(refused(&c), "engine.synth.top_k");
        let mut c = base();
        c.engine.synth.k = f64::NAN;
        assert_eq!(refused(&c), "engine.synth.k");
        let mut c = base();
        c.engine.synth.epsilon = 0.0;
        assert_eq!(refused(&c), "engine.synth.epsilon");
        let mut c = base();
        if let Some(f) = c.engine.filter.as_mut() {
            f.joint_scale[3] = f32::NAN;
        }
        assert_eq!(refused(&c), "engine.filter.joint_scale");
        let mut c = base();
        if let Some(f) = c.engine.filter.as_mut() {
            f.min_cutoff = 0.0;
        }
        assert_eq!(refused(&c), "engine.filter.min_cutoff");
        // the edges that are allowed
        let mut c = base();
        c.engine.tick_hz = 240.0;
        c.engine.keyframe_interval = 0.0;
        c.engine.synth.t_mix = 0.0;
        c.engine.synth.min_share = 0.0;
        c.engine.filter = None;
        check(&c).expect("edges");
    }

    #[test]
    fn a_bad_value_is_shown_with_its_name_and_range() {
        let mut c = ServerConfig::default();
        c.engine.tick_hz = f32::NAN;
        let e = check(&c).expect_err("NaN tick");
        assert_eq!(
            e.to_string(),
            "setting `engine.tick_hz` = NaN is out of range (1 to 240 Hz)"
        );
    }
}
