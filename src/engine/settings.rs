//! The engine's settings ([`EngineConfig`], with their defaults) and their range
//! checks ([`EngineConfig::check`], with the SOR runtime's and the filter's inside it),
//! and the machinery the server's check uses too. A config file is outside input (TOML reads `nan` and `inf`): a value that
//! cannot be honoured is refused by name rather than clamped in one place and used
//! raw in another.

use super::EngineError;
use crate::codec::Effort;
use crate::mocap::FilterConfig;
use crate::skeleton::JOINT_COUNT;
use crate::sor::{LayerParams, SynthParams};

/// Largest [`EngineConfig::tick_slots`] (and [`super::Engine::set_tick_slots`]).
pub const MAX_TICK_SLOTS: u32 = 16;

/// Engine settings.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineConfig {
    /// Tick rate, Hz: every streaming avatar gets one frame per tick.
    pub tick_hz: f32,
    /// Slots each tick is divided into (1–16). With 1, every avatar is synthesised at
    /// the start of each tick. With more, the server ticks this many times per tick
    /// period and each avatar's frame is made in the first slot after its pose arrives
    /// (still one frame per tick period: see [`super::Schedule::Slot`]), so a pose waits at
    /// most one slot instead of one tick, and the work is spread over the period.
    pub tick_slots: u32,
    /// While the ticks fall far behind (the server past capacity: in a second, fewer
    /// than 70 % of the tick periods the tick rate asks for), divide tick periods into
    /// one slot instead of `tick_slots`; return to `tick_slots` after three seconds in
    /// a row in which the tick thread slept at least 30 % of the time. Past capacity a
    /// pose waits for a stretched period whatever the slots, and one slot makes more
    /// frames per second (`bench serve` on two cores: 10–25 % more where four slots
    /// keep under 70 % of the rate; README, `bench serve`). `false` keeps `tick_slots`
    /// whatever the load.
    pub adapt_tick_slots: bool,
    /// Seconds without a pose after which an avatar stops streaming (idle); the server
    /// also lets another source take over an avatar whose driver has been silent this
    /// long.
    pub idle_timeout: f64,
    /// Seconds without a pose after which an avatar is removed.
    pub remove_after: f64,
    /// Most avatars at once.
    pub max_avatars: usize,
    /// SOR runtime parameters.
    pub synth: SynthParams,
    /// One Euro filtering of position sources (Kinect); `None` turns it off.
    pub filter: Option<FilterConfig>,
    /// How hard each avatar's garment encoder works for fewer bits: `fastest` (the
    /// server's default: most avatars per core), `fast` (~2 % fewer bytes out for ~10 %
    /// more engine CPU per frame) or `small` (~4 % fewer again, ~25 % more encode time);
    /// see [`Effort`].
    pub codec_effort: Effort,
    /// Shortest time between two keyframes of one avatar's stream made for viewers that
    /// ask (they joined, subscribed to it, or fell behind), seconds; a request in
    /// between waits for it. Viewers that keep asking (resubscribing at every message,
    /// always behind) then add at most one keyframe per avatar per interval to the
    /// encoder's work, however many they are. A stream's own restarts (its first frame,
    /// a new garment, after a pause) are not held back.
    pub keyframe_interval: f64,
    /// What an avatar wears until a `wear` message dresses it otherwise: garment names,
    /// inner to outer (`["pants", "tshirt"]`: the shirt over the pants); empty: the
    /// first garment alone.
    pub outfit: Vec<String>,
    /// How the garments of an outfit are kept outside one another.
    pub layers: LayerParams,
    /// Keep each avatar's upper arms out of its torso: a pose that puts an arm inside
    /// the body's chest (a slimmer performer's relaxed arms hang against their sides) has
    /// that arm turned out at the shoulder just enough to clear the torso by the
    /// bake's [`crate::bake::GUARD_CLEARANCE`] ([`crate::body::SelfContactGuard`]), as
    /// every example pose of a database was. The streamed body pose and the garment
    /// both use the corrected pose. Without it SOR extrapolates from the examples with
    /// the arms nearest the sides, and the sleeves stand off arms that go through the
    /// shirt.
    pub keep_arms_out: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            tick_hz: 30.0,
            tick_slots: 4,
            adapt_tick_slots: true,
            idle_timeout: 2.0,
            remove_after: 30.0,
            max_avatars: 256,
            synth: SynthParams::default(),
            filter: Some(FilterConfig::default()),
            codec_effort: Effort::Fastest,
            keyframe_interval: 0.1,
            outfit: Vec::new(),
            layers: LayerParams::default(),
            keep_arms_out: true,
        }
    }
}

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
                "synth.own_share",
                f(s.own_share),
                range(0.0, false, 1.0, "0 to 1"),
            ),
            (
                "synth.cross_scale",
                f(s.cross_scale),
                range(0.0, false, 4.0, "0 to 4"),
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
        c.synth.cross_scale = -0.5;
        assert_eq!(refused(&c), "synth.cross_scale");
        let mut c = base();
        c.synth.cross_scale = f32::NAN;
        assert_eq!(refused(&c), "synth.cross_scale");
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
        c.synth.cross_scale = 0.0;
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
