//! The avatars one input source drives (a publisher connection's avatars, the VMC
//! listener's senders), each with what the server remembers of its input.
//!
//! A source may live for days while its performers come and go: a Kinect kiosk's bridge
//! stays connected and every visitor gets a new body id; a VMC app that restarts sends
//! from a new UDP port. The per-source limit counts the avatars a source drives *now*,
//! so an entry that has been silent for longer than the engine's `remove_after` (its
//! avatar is removed, or about to be) is forgotten when its place is needed, instead of
//! holding that place forever.

use std::collections::HashMap;
use std::hash::Hash;

use crate::engine::InputState;

/// State `V` per driven key (avatar id, or UDP sender): what the server remembers of
/// its input, by default an [`InputState`]; with the server time (seconds) of the key's
/// last accepted input. Holds at most the limit passed to [`Driven::admit`].
pub(super) struct Driven<K, V = InputState> {
    entries: HashMap<K, (V, f64)>,
    /// Seconds of silence after which an entry may be forgotten (the engine's
    /// `remove_after`).
    forget_after: f64,
}

impl<K: Eq + Hash, V: Clone + Default> Driven<K, V> {
    /// An empty table whose entries may be forgotten after `forget_after` seconds of
    /// silence.
    pub(super) fn new(forget_after: f64) -> Self {
        Self {
            entries: HashMap::new(),
            forget_after,
        }
    }

    /// Whether `key` may be driven at server time `now` (seconds) under a limit of
    /// `limit` keys: it is already driven, or there is room, if need be after forgetting
    /// the entries silent for longer than `forget_after`. Nothing is inserted (see
    /// [`Driven::store`]).
    pub(super) fn admit(&mut self, key: &K, now: f64, limit: usize) -> bool {
        if self.entries.contains_key(key) {
            return true;
        }
        if self.entries.len() >= limit {
            let forget_after = self.forget_after;
            self.entries
                .retain(|_, (_, last)| now - *last <= forget_after);
        }
        self.entries.len() < limit
    }

    /// Whether `key` is driven (has an entry).
    pub(super) fn contains(&self, key: &K) -> bool {
        self.entries.contains_key(key)
    }

    /// A copy of `key`'s state to work on (the default for a new key); give it back
    /// with [`Driven::store`] once the input is accepted.
    pub(super) fn state(&self, key: &K) -> V {
        self.entries
            .get(key)
            .map(|e| e.0.clone())
            .unwrap_or_default()
    }

    /// `key`'s state, if it is driven.
    pub(super) fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        self.entries.get_mut(key).map(|e| &mut e.0)
    }

    /// Keeps `state` as `key`'s, its last input at server time `now` (seconds).
    pub(super) fn store(&mut self, key: K, state: V, now: f64) {
        self.entries.insert(key, (state, now));
    }

    /// Records an accepted input of `key` at server time `now` (seconds), if it is
    /// driven.
    pub(super) fn touch(&mut self, key: &K, now: f64) {
        if let Some(e) = self.entries.get_mut(key) {
            e.1 = now;
        }
    }

    /// Number of keys driven (including silent ones not yet forgotten).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_table_forgets_only_silent_entries_and_only_when_room_is_needed() {
        let mut d = Driven::<String>::new(30.0);
        let key = |i: u32| format!("kinect-{i}");
        for i in 0..3 {
            assert!(d.admit(&key(i), f64::from(i), 3));
            d.store(key(i), InputState::default(), f64::from(i));
        }
        // full: a fourth body is refused while the three are live
        assert!(!d.admit(&key(3), 10.0, 3));
        // known keys are always admitted
        assert!(d.admit(&key(0), 10.0, 3));
        // at 30.5 s body 0 (last seen at 0 s) has been silent for longer than 30 s
        assert!(
            d.admit(&key(3), 30.5, 3),
            "the entry silent for > 30 s gives way"
        );
        assert_eq!(d.len(), 2);
        assert!(!d.contains(&key(0)) && d.contains(&key(1)) && d.contains(&key(2)));
        d.store(key(3), InputState::default(), 30.5);
        // at 31 s bodies 1 and 2 have been silent for 30 and 29 s: not longer, kept
        assert!(!d.admit(&key(4), 31.0, 3));
        assert_eq!(d.len(), 3);
        // a silent entry is kept (with its state) while there is room
        let mut roomy = Driven::<u32>::new(1.0);
        let mut calibrated = InputState::default();
        calibrated.calibrate();
        roomy.store(7, calibrated, 0.0);
        assert!(roomy.admit(&8, 100.0, 4));
        assert!(roomy.state(&7).rest.is_some(), "kept: there was room");
        assert!(roomy.state(&9).rest.is_none(), "a new key starts afresh");
        if let Some(s) = roomy.get_mut(&7) {
            s.rest = None;
        }
        assert!(roomy.state(&7).rest.is_none());
        assert!(roomy.get_mut(&9).is_none());
        // an entry touched later is no longer silent
        roomy.store(9, InputState::default(), 0.0);
        roomy.touch(&9, 99.5);
        roomy.touch(&10, 99.5);
        assert!(!roomy.contains(&10), "touch does not insert");
        assert!(roomy.admit(&11, 100.0, 2));
        assert!(roomy.contains(&9) && !roomy.contains(&7));
    }
}
