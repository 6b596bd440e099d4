//! Which connections the log tells of: every one, until a flood.
//!
//! Each WebSocket connection is logged when it is welcomed (or not), for each message
//! the server refuses (in log₂ of their number) and when it ends: two lines or more per
//! connection. A host that opens connections as fast as it can (a client in a reconnect
//! loop, or an attack) would fill a disk with them, ~1.5 MB a minute at 40 connections a
//! second. So a connection's lines are written only while its address, and the server as
//! a whole, are within a budget of connections per minute
//! ([`ServerConfig::log_connections_per_address_per_minute`],
//! [`ServerConfig::log_connections_per_minute`]: token buckets as large as a minute's
//! budget, refilled evenly). The decision is taken once, when the connection is upgraded,
//! so a connection logged as welcomed is also logged when it ends. The connections left
//! out are counted and told once a minute in one line (how many, from how many
//! addresses, the address with the most), and at shutdown.
//!
//! [`ServerConfig::log_connections_per_address_per_minute`]: super::ServerConfig::log_connections_per_address_per_minute
//! [`ServerConfig::log_connections_per_minute`]: super::ServerConfig::log_connections_per_minute

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often the connections left out are told.
pub(super) const SUMMARY_EVERY: Duration = Duration::from_secs(60);

/// Addresses whose budget is tracked at once. Beyond it (a flood from more addresses
/// than this) a new address is held to the server's budget alone; addresses whose
/// budget is whole again are forgotten at each summary.
const MAX_ADDRESSES: usize = 16_384;

/// A token bucket of connections, `size` tokens at most, refilled at `size` a minute.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(size: f64, now: Instant) -> Self {
        Self {
            tokens: size,
            at: now,
        }
    }

    /// The tokens at `now` (refilled since the last look; never more than `size`).
    fn refill(&mut self, size: f64, now: Instant) {
        let minutes = now.saturating_duration_since(self.at).as_secs_f64() / 60.0;
        self.tokens = (self.tokens + minutes * size).min(size);
        self.at = now;
    }
}

/// The connections left out of the log since the last summary.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct LeftOut {
    /// Connections not logged.
    pub(super) connections: u64,
    /// Distinct addresses they came from (those counted: see [`MAX_ADDRESSES`]).
    pub(super) addresses: usize,
    /// The address that had the most left out, and how many.
    pub(super) most: Option<(IpAddr, u64)>,
}

struct Inner {
    /// Per address, when it has used some of its budget.
    addresses: HashMap<IpAddr, Bucket>,
    /// The server's.
    total: Bucket,
    /// Connections left out per address since the last summary (at most
    /// [`MAX_ADDRESSES`] addresses; beyond, counted in `others`).
    left_out: HashMap<IpAddr, u64>,
    others: u64,
}

/// The connection log's budgets and what they left out (see the module's doc).
pub(super) struct ConnectionLog {
    /// Connections a minute one address may have logged; 0: no limit.
    per_address: f64,
    /// Connections a minute the server logs in all; 0: no limit.
    total: f64,
    inner: Mutex<Inner>,
}

impl ConnectionLog {
    /// Budgets of `per_address` and `total` connections a minute (0: no limit), whole
    /// at `now`.
    pub(super) fn new(per_address: u32, total: u32, now: Instant) -> Self {
        let total = f64::from(total);
        Self {
            per_address: f64::from(per_address),
            total,
            inner: Mutex::new(Inner {
                addresses: HashMap::new(),
                total: Bucket::full(total, now),
                left_out: HashMap::new(),
                others: 0,
            }),
        }
    }

    /// Whether a connection from `ip` opened at `now` is logged: both its address's
    /// budget and the server's have a connection left (each is then spent), else it is
    /// counted as left out.
    pub(super) fn admit(&self, ip: IpAddr, now: Instant) -> bool {
        let Ok(mut inner) = self.inner.lock() else {
            // a panic while holding the lock (a bug): log rather than go quiet
            return true;
        };
        let inner = &mut *inner;
        let total_ok = if self.total > 0.0 {
            inner.total.refill(self.total, now);
            inner.total.tokens >= 1.0
        } else {
            true
        };
        let mut address = None;
        let address_ok = if self.per_address > 0.0 {
            let room = inner.addresses.len() < MAX_ADDRESSES;
            match inner.addresses.get_mut(&ip) {
                Some(b) => {
                    b.refill(self.per_address, now);
                    let ok = b.tokens >= 1.0;
                    address = Some(b);
                    ok
                }
                None if room => {
                    let b = inner
                        .addresses
                        .entry(ip)
                        .or_insert(Bucket::full(self.per_address, now));
                    address = Some(b);
                    true
                }
                // more addresses than tracked: the server's budget alone
                None => true,
            }
        } else {
            true
        };
        if total_ok && address_ok {
            if self.total > 0.0 {
                inner.total.tokens -= 1.0;
            }
            if let Some(b) = address {
                b.tokens -= 1.0;
            }
            return true;
        }
        let room = inner.left_out.len() < MAX_ADDRESSES;
        match inner.left_out.get_mut(&ip) {
            Some(n) => *n += 1,
            None if room => {
                inner.left_out.insert(ip, 1);
            }
            None => inner.others += 1,
        }
        false
    }

    /// The connections left out since the last call, and forgets them; `None` when
    /// there were none. Also forgets the addresses whose budget is whole again at
    /// `now` (a new connection from one starts from a whole budget anyway).
    pub(super) fn take_left_out(&self, now: Instant) -> Option<LeftOut> {
        let mut inner = self.inner.lock().ok()?;
        let per_address = self.per_address;
        inner.addresses.retain(|_, b| {
            b.refill(per_address, now);
            b.tokens < per_address
        });
        let connections = inner.left_out.values().sum::<u64>() + inner.others;
        let most = inner
            .left_out
            .iter()
            .max_by_key(|&(ip, n)| (*n, std::cmp::Reverse(*ip)))
            .map(|(ip, n)| (*ip, *n));
        let addresses = inner.left_out.len();
        inner.left_out.clear();
        inner.left_out.shrink_to(64);
        inner.others = 0;
        (connections > 0).then_some(LeftOut {
            connections,
            addresses,
            most,
        })
    }

    /// Logs the connections left out since the last summary, if any (`over` names the
    /// time it covers).
    pub(super) fn summarise(&self, now: Instant, over: &str) {
        if let Some(LeftOut {
            connections,
            addresses,
            most,
        }) = self.take_left_out(now)
        {
            let (most, most_connections) = match most {
                Some((ip, n)) => (super::peer::counted_name(ip), n),
                None => ("-".to_string(), 0),
            };
            tracing::warn!(
                connections,
                addresses,
                %most,
                most_connections,
                "connections not logged {over}: over log_connections_per_address_per_minute or log_connections_per_minute"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn an_address_gets_its_budget_then_a_share_of_it_each_minute() {
        let t0 = Instant::now();
        let log = ConnectionLog::new(3, 0, t0);
        let admitted: Vec<bool> = (0..5).map(|_| log.admit(ip(1), t0)).collect();
        assert_eq!(admitted, [true, true, true, false, false]);
        // another address is not held back by the first one's flood
        assert!(log.admit(ip(2), t0));
        // a third of a minute refills one connection of three
        let t1 = t0 + Duration::from_secs(20);
        assert!(log.admit(ip(1), t1));
        assert!(!log.admit(ip(1), t1));
        // an address whose connections stop gets its whole budget back, not more
        let t2 = t1 + Duration::from_secs(3600);
        let admitted: Vec<bool> = (0..4).map(|_| log.admit(ip(1), t2)).collect();
        assert_eq!(admitted, [true, true, true, false]);
        assert_eq!(
            log.take_left_out(t2),
            Some(LeftOut {
                connections: 4,
                addresses: 1,
                most: Some((ip(1), 4)),
            })
        );
        // told once: the next summary has nothing to say
        assert_eq!(log.take_left_out(t2), None);
    }

    #[test]
    fn the_servers_budget_holds_a_flood_from_many_addresses() {
        let t0 = Instant::now();
        let log = ConnectionLog::new(60, 10, t0);
        let admitted = (0..100u8).filter(|&i| log.admit(ip(i), t0)).count();
        assert_eq!(admitted, 10);
        let left = log.take_left_out(t0).expect("some left out");
        assert_eq!((left.connections, left.addresses), (90, 90));
        // a tie: the lowest address is named, so that the line is reproducible
        assert_eq!(left.most, Some((ip(10), 1)));
        // and it refills at its own rate
        let t1 = t0 + Duration::from_secs(6);
        assert!(log.admit(ip(200), t1));
        assert!(!log.admit(ip(201), t1));
    }

    #[test]
    fn no_limit_logs_every_connection() {
        let t0 = Instant::now();
        let log = ConnectionLog::new(0, 0, t0);
        assert!((0..10_000).all(|i| log.admit(ip((i % 7) as u8), t0)));
        assert_eq!(log.take_left_out(t0), None);
        assert!(log.inner.lock().expect("lock").addresses.is_empty());
    }

    #[test]
    fn addresses_are_forgotten_once_their_budget_is_whole_and_their_count_is_bounded() {
        let t0 = Instant::now();
        let log = ConnectionLog::new(2, 0, t0);
        for i in 0..MAX_ADDRESSES + 100 {
            let a = u32::try_from(i).expect("small");
            log.admit(IpAddr::from(a.to_be_bytes()), t0);
        }
        assert_eq!(
            log.inner.lock().expect("lock").addresses.len(),
            MAX_ADDRESSES
        );
        // untracked addresses are held to the server's budget alone (here none)
        let late = IpAddr::from([192, 168, 7, 7]);
        assert!((0..5).all(|_| log.admit(late, t0)));
        // a minute later every budget is whole again: all forgotten
        assert_eq!(log.take_left_out(t0 + SUMMARY_EVERY), None);
        assert!(log.inner.lock().expect("lock").addresses.is_empty());
    }

    #[test]
    fn left_out_counts_beyond_the_tracked_addresses_still_add_up() {
        let t0 = Instant::now();
        let log = ConnectionLog::new(0, 1, t0);
        assert!(log.admit(ip(0), t0));
        let n = MAX_ADDRESSES + 10;
        for i in 0..n {
            let a = u32::try_from(i).expect("small");
            assert!(!log.admit(IpAddr::from(a.to_be_bytes()), t0));
        }
        let left = log.take_left_out(t0).expect("left out");
        assert_eq!(left.connections, n as u64);
        assert_eq!(left.addresses, MAX_ADDRESSES);
    }
}
