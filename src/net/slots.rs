//! How many slots the tick thread divides a tick period into, second by second: the
//! configured count while the ticks keep time, one while they run late.
//!
//! Slots ([`crate::engine::Schedule::Slot`]) cut the wait between a pose's arrival and
//! its frame, but each slot is a round of the tick thread's bookkeeping, a broadcast
//! and a meeting of the rayon workers. Far past capacity a pose waits for a
//! stretched period whatever the slots, and one slot per period makes more frames per
//! second (`bench serve`, 200 avatars on two cores: 62 % of the tick rate against
//! 50 % with four; README, `bench serve`). So the server drops to one slot while its
//! ticks fall far behind and returns to the configured count once one slot leaves
//! clear room.

/// Tick periods completed per second, as a share of the tick rate, below which
/// the ticks are overloaded enough for one slot to pay: at ~80 % (100 avatars on this
/// 2-core machine's slow hours) one slot makes only ~3 % more frames and triples the
/// wait for a frame; at ~50 % (150) it makes ~20 % more.
const PACE_OVERLOADED: f64 = 0.7;
/// Share of a second the tick loop did not sleep, with one slot, at or below which
/// the configured slots fit again: several slots cost more per frame (the tick
/// thread's rounds, the broadcasts), but at this load they keep pace above
/// [`PACE_OVERLOADED`], so the two settings do not take turns.
const BUSY_CALM: f64 = 0.7;
/// Whole seconds in a row at or below [`BUSY_CALM`] before the configured slots
/// return (a load that dips for a moment does not switch back and forth).
const CALM_SECONDS: u32 = 3;

/// Chooses the slots per tick period from each second's load.
#[derive(Clone, Debug)]
pub(super) struct SlotGovernor {
    configured: u32,
    adapt: bool,
    current: u32,
    calm: u32,
}

impl SlotGovernor {
    /// Starts at `configured` slots; `adapt` false keeps them whatever the load.
    pub(super) fn new(configured: u32, adapt: bool) -> Self {
        Self {
            configured,
            adapt,
            current: configured,
            calm: 0,
        }
    }

    /// The slots it chose last.
    #[cfg(test)]
    fn current(&self) -> u32 {
        self.current
    }

    /// Takes one window's load (`pace`: the tick periods completed, as a share of
    /// those the tick rate asks for; `busy`: the share of the window the tick loop
    /// did not sleep; both ≥ 0, NaN read as 1 and 0) and returns the new slot count
    /// when it changes.
    pub(super) fn window(&mut self, pace: f64, busy: f64) -> Option<u32> {
        if !self.adapt || self.configured <= 1 {
            return None;
        }
        let pace = if pace.is_nan() { 1.0 } else { pace };
        let busy = busy.max(0.0);
        if self.current > 1 {
            if pace < PACE_OVERLOADED {
                self.current = 1;
                self.calm = 0;
                return Some(1);
            }
            return None;
        }
        if busy <= BUSY_CALM {
            self.calm += 1;
        } else {
            self.calm = 0;
        }
        if self.calm >= CALM_SECONDS {
            self.calm = 0;
            self.current = self.configured;
            return Some(self.configured);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overload_drops_to_one_slot_and_calm_seconds_bring_the_slots_back() {
        let mut g = SlotGovernor::new(4, true);
        // keeping pace, even busy or a little behind: stays
        assert_eq!(g.window(1.0, 0.95), None);
        assert_eq!(g.window(0.8, 1.0), None);
        assert_eq!(g.current(), 4);
        // far behind: one slot
        assert_eq!(g.window(0.5, 1.0), Some(1));
        assert_eq!(g.current(), 1);
        // still busy, or calm for less than CALM_SECONDS in a row: stays
        assert_eq!(g.window(0.8, 1.0), None);
        assert_eq!(g.window(1.0, 0.6), None);
        assert_eq!(g.window(1.0, 0.6), None);
        assert_eq!(g.window(1.0, 0.8), None, "not calm: the count restarts");
        for _ in 1..CALM_SECONDS {
            assert_eq!(g.window(1.0, 0.3), None);
        }
        assert_eq!(g.window(1.0, 0.3), Some(4));
        assert_eq!(g.current(), 4);
    }

    #[test]
    fn fixed_or_single_slots_never_change() {
        for mut g in [SlotGovernor::new(4, false), SlotGovernor::new(1, true)] {
            for (pace, busy) in [(0.1, 1.0), (1.0, 0.0), (f64::NAN, f64::NAN), (0.1, 1.0)] {
                assert_eq!(g.window(pace, busy), None);
            }
        }
    }

    #[test]
    fn nan_load_reads_as_keeping_pace_and_idle() {
        let mut g = SlotGovernor::new(4, true);
        assert_eq!(g.window(f64::NAN, f64::NAN), None);
        assert_eq!(g.window(0.2, 1.0), Some(1));
        for _ in 1..CALM_SECONDS {
            assert_eq!(g.window(f64::NAN, f64::NAN), None);
        }
        assert_eq!(g.window(f64::NAN, f64::NAN), Some(4));
    }
}
