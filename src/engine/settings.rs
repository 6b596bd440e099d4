//! Range checks of settings: the engine's own ([`EngineConfig::check`], with the SOR
//! runtime's and the filter's inside it), and the machinery the server's check uses
//! too. A config file is outside input (TOML reads `nan` and `inf`): a value that
//! cannot be honoured is refused by name rather than clamped in one place and used
//! raw in another.

use super::{EngineConfig, EngineError};
use crate::skeleton::JOINT_COUNT;

/// Longest duration a setting takes, seconds (a day: longer is a typo, and would
/// overflow the timers).
pub const MAX_SETTING_SECONDS: f64 = 86_400.0;

/// Highest tick rate, Hz.
pub const MAX_TICK_HZ: f64 = 240.0;

/// Where a setting's value must lie: `lo` (excluded when `open_low`) to `hi`, finite,
/// and how an error says it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Range {
    lo: f64,
    open_low: bool,
    hi: f64,
    pub(crate) text: &'static str,
}

/// A [`Range`].
pub(crate) const fn range(lo: f64, open_low: bool, hi: f64, text: &'static str) -> Range {
    Range {
        lo,
        open_low,
        hi,
        text,
    }
}

impl Range {
    fn holds(&self, value: f64) -> bool {
        let low_ok = if self.open_low {
            value > self.lo
        } else {
            value >= self.lo
        };
        value.is_finite() && low_ok && value <= self.hi
    }
}

/// A duration in seconds: above 0, at most a day.
const SECONDS: Range = range(
    0.0,
    true,
    MAX_SETTING_SECONDS,
    "seconds above 0, at most 86400",
);
const HZ: Range = range(0.0, true, 1000.0, "Hz above 0, at most 1000");
const BETA: Range = range(0.0, false, 1000.0, "0 to 1000");

/// The first setting whose value is outside its range: (name, value as read, range).
pub(crate) fn first_bad(
    settings: impl IntoIterator<Item = (&'static str, f64, Range)>,
) -> Option<(&'static str, String, &'static str)> {
    settings
        .into_iter()
        .find(|(_, value, r)| !r.holds(*value))
        .map(|(name, value, r)| (name, value.to_string(), r.text))
}

impl EngineConfig {
    /// Every number of these settings (and of `synth` and `filter`) within what the
    /// engine can honour; the first that is not as [`EngineError::BadSetting`], named
    /// as in the `[engine]` table of a config file (`tick_hz`, `synth.k`,
    /// `filter.min_cutoff`). [`super::Engine::with_garments`] checks it.
    pub fn check(&self) -> Result<(), EngineError> {
        let (s, f, n) = (&self.synth, f64::from, |v: usize| v as f64);
        // (D + ε)^−k of distances up to ~1e3 must stay a finite f64
        let mut settings: Vec<(&'static str, f64, Range)> = vec![
            (
                "tick_hz",
                f(self.tick_hz),
                range(1.0, false, MAX_TICK_HZ, "1 to 240 Hz"),
            ),
            ("idle_timeout", self.idle_timeout, SECONDS),
            ("remove_after", self.remove_after, SECONDS),
            (
                "keyframe_interval",
                self.keyframe_interval,
                range(0.0, false, MAX_SETTING_SECONDS, "seconds, 0 to 86400"),
            ),
            (
                "synth.k",
                s.k,
                range(0.0, true, 32.0, "above 0, at most 32"),
            ),
            (
                "synth.top_k",
                n(s.top_k),
                range(1.0, false, 64.0, "1 to 64"),
            ),
            (
                "synth.t_mix",
                f(s.t_mix),
                range(0.0, false, 60.0, "seconds, 0 to 60"),
            ),
            (
                "synth.penetration_margin",
                f(s.penetration_margin),
                range(0.0, false, 0.1, "metres, 0 to 0.1"),
            ),
            (
                "synth.epsilon",
                s.epsilon,
                range(0.0, true, 1.0, "above 0, at most 1 (m²)"),
            ),
            (
                "synth.min_share",
                f(s.min_share),
                range(0.0, false, 0.5, "0 to 0.5"),
            ),
            (
                "layers.clearance",
                f(self.layers.clearance),
                range(0.0, false, 0.05, "metres, 0 to 0.05"),
            ),
            (
                "layers.reach",
                f(self.layers.reach),
                range(0.0, false, 0.2, "metres, 0 to 0.2"),
            ),
        ];
        if let Some(c) = &self.filter {
            settings.extend([
                ("filter.min_cutoff", f(c.min_cutoff), HZ),
                ("filter.d_cutoff", f(c.d_cutoff), HZ),
                (
                    "filter.translation_min_cutoff",
                    f(c.translation_min_cutoff),
                    HZ,
                ),
                ("filter.beta", f(c.beta), BETA),
                ("filter.translation_beta", f(c.translation_beta), BETA),
                (
                    "filter.joint_scale (its length)",
                    n(c.joint_scale.len()),
                    range(
                        0.0,
                        false,
                        n(JOINT_COUNT),
                        "at most one factor per joint (22)",
                    ),
                ),
            ]);
            let each = range(0.0, true, 1000.0, "each above 0, at most 1000");
            settings.extend(
                c.joint_scale
                    .iter()
                    .map(|&v| ("filter.joint_scale", f(v), each)),
            );
        }
        match first_bad(settings) {
            None => Ok(()),
            Some((name, value, range)) => Err(EngineError::BadSetting { name, value, range }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(config: &EngineConfig) -> &'static str {
        match config.check() {
            Err(EngineError::BadSetting { name, .. }) => name,
            other => panic!("not refused by name: {other:?}"),
        }
    }

    #[test]
    fn the_defaults_pass_and_each_bad_value_is_named() {
        EngineConfig::default().check().expect("defaults");
        let base = EngineConfig::default;
        let mut c = base();
        c.tick_hz = -5.0;
        assert_eq!(refused(&c), "tick_hz");
        let mut c = base();
        c.idle_timeout = f64::INFINITY;
        assert_eq!(refused(&c), "idle_timeout");
        let mut c = base();
        c.synth.top_k = 0;
        assert_eq!(refused(&c), "synth.top_k");
        let mut c = base();
        c.synth.k = f64::NAN;
        assert_eq!(refused(&c), "synth.k");
        let mut c = base();
        c.synth.epsilon = 0.0;
        assert_eq!(refused(&c), "synth.epsilon");
        let mut c = base();
        c.layers.clearance = f32::NAN;
        assert_eq!(refused(&c), "layers.clearance");
        let mut c = base();
        c.layers.reach = 0.5;
        assert_eq!(refused(&c), "layers.reach");
        let mut c = base();
        if let Some(f) = c.filter.as_mut() {
            f.joint_scale[3] = f32::NAN;
        }
        assert_eq!(refused(&c), "filter.joint_scale");
        let mut c = base();
        if let Some(f) = c.filter.as_mut() {
            f.min_cutoff = 0.0;
        }
        assert_eq!(refused(&c), "filter.min_cutoff");
        // the edges that are allowed
        let mut c = base();
        c.tick_hz = 240.0;
        c.keyframe_interval = 0.0;
        c.synth.t_mix = 0.0;
        c.synth.min_share = 0.0;
        c.filter = None;
        c.check().expect("edges");
    }

    #[test]
    fn a_bad_value_is_shown_with_its_name_and_range() {
        let c = EngineConfig {
            tick_hz: f32::NAN,
            ..EngineConfig::default()
        };
        let e = c.check().expect_err("NaN tick");
        assert_eq!(
            e.to_string(),
            "setting `tick_hz` = NaN is out of range (1 to 240 Hz)"
        );
    }
}
