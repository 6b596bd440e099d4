//! Which input source drives each avatar. Two sources sending poses for one avatar id
//! (two kiosks configured alike, a second VMC app aimed at a fixed `vmc_avatar`) would
//! otherwise make it jump between two performers at every pose, latest arrival
//! winning. The first source keeps the avatar while it sends; another takes it over
//! once the first has been silent for the engine's `idle_timeout` (the avatar has gone
//! idle) or has disconnected, which is also how a performer's reconnection takes its
//! avatar back.

use std::collections::HashMap;
use std::net::SocketAddr;

/// An input source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Driver {
    /// A publisher's WebSocket connection, by its number.
    Connection(u64),
    /// A UDP sender (VMC).
    Udp(SocketAddr),
}

/// The driver of each avatar and the server time (seconds) of its last pose.
pub(super) struct Owners {
    held: HashMap<String, (Driver, f64)>,
    /// Seconds of silence after which another source may take an avatar over.
    handover_after: f64,
    /// Seconds of silence after which an entry is forgotten (its avatar is removed).
    forget_after: f64,
}

/// Another source drives the avatar.
#[derive(Debug, PartialEq)]
pub(super) struct Taken {
    /// That source.
    pub(super) by: Driver,
    /// Seconds until it may be taken over if that source stays silent.
    pub(super) free_in: f64,
}

impl Owners {
    /// An empty table: an avatar changes hands after `handover_after` seconds of its
    /// driver's silence; entries silent for `forget_after` are dropped.
    pub(super) fn new(handover_after: f64, forget_after: f64) -> Self {
        Self {
            held: HashMap::new(),
            handover_after,
            forget_after: forget_after.max(handover_after),
        }
    }

    /// Records a pose of `avatar` from `driver` at server time `now` (seconds), unless
    /// another driver has sent one within `handover_after`.
    pub(super) fn claim(&mut self, avatar: &str, driver: Driver, now: f64) -> Result<(), Taken> {
        if let Some((by, last)) = self.held.get_mut(avatar) {
            if *by != driver && now - *last < self.handover_after {
                return Err(Taken {
                    by: *by,
                    free_in: self.handover_after - (now - *last),
                });
            }
            (*by, *last) = (driver, now);
            return Ok(());
        }
        // bounded by the avatars sent for recently (each passed the server's room
        // check): forget the long-silent before growing
        if self.held.len() >= 1024 {
            let forget_after = self.forget_after;
            self.held.retain(|_, (_, last)| now - *last <= forget_after);
        }
        self.held.insert(avatar.to_string(), (driver, now));
        Ok(())
    }

    /// Gives up every avatar `driver` holds (its connection closed): another source may
    /// take them at once.
    pub(super) fn release(&mut self, driver: Driver) {
        self.held.retain(|_, (by, _)| *by != driver);
    }

    /// Entries held (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.held.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_driver_keeps_an_avatar_until_it_falls_silent_or_leaves() {
        let (a, b) = (Driver::Connection(1), Driver::Connection(2));
        let mut o = Owners::new(2.0, 30.0);
        assert_eq!(o.claim("dancer", a, 0.0), Ok(()));
        assert_eq!(o.claim("dancer", a, 0.5), Ok(()));
        // b is refused while a sends, told when the avatar would be free
        let t = o.claim("dancer", b, 1.0).expect_err("taken");
        assert_eq!(t.by, a);
        assert!((t.free_in - 1.5).abs() < 1e-9, "{t:?}");
        // other avatars are b's to take
        assert_eq!(o.claim("singer", b, 1.0), Ok(()));
        // a silent for the hand-over time: b takes over, and then a is the one refused
        assert_eq!(o.claim("dancer", b, 2.5), Ok(()));
        assert_eq!(o.claim("dancer", a, 2.6).map_err(|t| t.by), Err(b));
        // b leaves: a takes the avatar back at once
        o.release(b);
        assert_eq!(o.claim("dancer", a, 2.7), Ok(()));
        assert_eq!(o.claim("singer", a, 2.7), Ok(()));
        // UDP senders are drivers too
        let vmc = Driver::Udp("192.168.1.7:39540".parse().expect("addr"));
        assert!(o.claim("dancer", vmc, 3.0).is_err());
    }

    #[test]
    fn long_silent_entries_are_forgotten_before_the_table_grows() {
        let mut o = Owners::new(2.0, 30.0);
        for i in 0..1024 {
            o.claim(&format!("a{i}"), Driver::Connection(i), 0.0)
                .expect("free");
        }
        assert_eq!(o.len(), 1024);
        o.claim("late", Driver::Connection(5000), 100.0)
            .expect("free");
        assert_eq!(o.len(), 1);
    }
}
