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

/// `value` within `lo..=hi` (`lo` itself excluded when `open_low`), finite.
fn within(
    name: &'static str,
    value: f64,
    (lo, open_low, hi): (f64, bool, f64),
    range: &'static str,
) -> Result<(), NetError> {
    let low_ok = if open_low { value > lo } else { value >= lo };
    if value.is_finite() && low_ok && value <= hi {
        Ok(())
    } else {
        Err(NetError::BadSetting {
            name,
            value: value.to_string(),
            range,
        })
    }
}

/// A duration in seconds: above 0, at most a day.
fn seconds(name: &'static str, value: f64) -> Result<(), NetError> {
    within(
        name,
        value,
        (0.0, true, MAX_SETTING_SECONDS),
        "seconds above 0, at most 86400",
    )
}

/// A count with a ceiling.
fn count(
    name: &'static str,
    value: usize,
    most: usize,
    range: &'static str,
) -> Result<(), NetError> {
    if value <= most {
        Ok(())
    } else {
        Err(NetError::BadSetting {
            name,
            value: value.to_string(),
            range,
        })
    }
}

/// Every numeric setting of `config` (server, engine, SOR runtime, filter) within what
/// the server can honour; the first that is not, by its name in the config file.
pub(super) fn check(config: &ServerConfig) -> Result<(), NetError> {
    // the broadcast holds viewer_queue × tick_slots × (send_groups + 1) messages,
    // allocated up front
    count(
        "viewer_queue",
        config.viewer_queue,
        MAX_VIEWER_QUEUE,
        "0 to 1024 ticks",
    )?;
    count(
        "send_groups",
        config.send_groups,
        MAX_SEND_GROUPS,
        "0 to 64 groups",
    )?;
    let e = &config.engine;
    count(
        "engine.tick_slots",
        e.tick_slots as usize,
        MAX_TICK_SLOTS as usize,
        "0 to 16 slots",
    )?;
    seconds("hello_timeout", f64::from(config.hello_timeout))?;
    seconds("peer_timeout", f64::from(config.peer_timeout))?;
    within(
        "max_messages_per_second",
        f64::from(config.max_messages_per_second),
        (0.0, true, 1e9),
        "above 0",
    )?;
    within(
        "engine.tick_hz",
        f64::from(e.tick_hz),
        (1.0, false, MAX_TICK_HZ),
        "1 to 240 Hz",
    )?;
    seconds("engine.idle_timeout", e.idle_timeout)?;
    seconds("engine.remove_after", e.remove_after)?;
    within(
        "engine.keyframe_interval",
        e.keyframe_interval,
        (0.0, false, MAX_SETTING_SECONDS),
        "seconds, 0 to 86400",
    )?;
    let s = &e.synth;
    // (D + ε)^−k of distances up to ~1e3 must stay a finite f64
    within(
        "engine.synth.k",
        s.k,
        (0.0, true, 32.0),
        "above 0, at most 32",
    )?;
    count("engine.synth.top_k", s.top_k, 64, "1 to 64")?;
    if s.top_k == 0 {
        return Err(NetError::BadSetting {
            name: "engine.synth.top_k",
            value: "0".into(),
            range: "1 to 64",
        });
    }
    within(
        "engine.synth.t_mix",
        f64::from(s.t_mix),
        (0.0, false, 60.0),
        "seconds, 0 to 60",
    )?;
    within(
        "engine.synth.penetration_margin",
        f64::from(s.penetration_margin),
        (0.0, false, 0.1),
        "metres, 0 to 0.1",
    )?;
    within(
        "engine.synth.epsilon",
        s.epsilon,
        (0.0, true, 1.0),
        "above 0, at most 1 (m²)",
    )?;
    within(
        "engine.synth.min_share",
        f64::from(s.min_share),
        (0.0, false, 0.5),
        "0 to 0.5",
    )?;
    if let Some(f) = &e.filter {
        let hz = (0.0, true, 1000.0);
        let hz_range = "Hz above 0, at most 1000";
        within(
            "engine.filter.min_cutoff",
            f64::from(f.min_cutoff),
            hz,
            hz_range,
        )?;
        within(
            "engine.filter.d_cutoff",
            f64::from(f.d_cutoff),
            hz,
            hz_range,
        )?;
        within(
            "engine.filter.translation_min_cutoff",
            f64::from(f.translation_min_cutoff),
            hz,
            hz_range,
        )?;
        let beta = (0.0, false, 1000.0);
        within("engine.filter.beta", f64::from(f.beta), beta, "0 to 1000")?;
        within(
            "engine.filter.translation_beta",
            f64::from(f.translation_beta),
            beta,
            "0 to 1000",
        )?;
        count(
            "engine.filter.joint_scale (its length)",
            f.joint_scale.len(),
            JOINT_COUNT,
            "at most one factor per joint (22)",
        )?;
        for &v in &f.joint_scale {
            within(
                "engine.filter.joint_scale",
                f64::from(v),
                (0.0, true, 1000.0),
                "each above 0, at most 1000",
            )?;
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
