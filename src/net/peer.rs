//! Who a connection is from, and how many places each address holds.
//!
//! Behind a reverse proxy (nginx, Caddy, a cloud load balancer: what terminates TLS, which
//! browsers require for WebXR) every connection's TCP peer is the proxy. When that peer is
//! one of [`ServerConfig::trusted_proxies`], the client is the address the proxies name
//! in `X-Forwarded-For`: read right to left, the first that is not itself a trusted proxy
//! (the entries to its left were written by the client, and anyone can write them). From
//! any other peer the header is ignored, so a client cannot choose its own address.
//!
//! [`ServerConfig::trusted_proxies`]: super::ServerConfig::trusted_proxies

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use axum::http::HeaderMap;
use ipnet::IpNet;

/// A connection's origin: the TCP peer, and the client a trusted proxy connected for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Peer {
    /// The TCP peer (the proxy, when there is one).
    pub(super) addr: SocketAddr,
    /// The client a trusted proxy named in `X-Forwarded-For`.
    pub(super) client: Option<IpAddr>,
}

impl Peer {
    /// The origin of a request from `addr` with `headers`, given the trusted proxies.
    pub(super) fn new(addr: SocketAddr, headers: &HeaderMap, trusted: &[IpNet]) -> Self {
        let is_trusted = |ip: IpAddr| is_trusted(ip, trusted);
        let client = if is_trusted(addr.ip()) {
            forwarded_client(headers, is_trusted)
        } else {
            None
        };
        Self { addr, client }
    }

    /// The client's address: the one a trusted proxy named, else the TCP peer's.
    pub(super) fn ip(&self) -> IpAddr {
        self.client.unwrap_or(self.addr.ip()).to_canonical()
    }

    /// What the per-address limits count this connection as: its address ([`Self::ip`]),
    /// an IPv6 one by its /64 network ([`counted`]).
    pub(super) fn host(&self) -> IpAddr {
        counted(self.ip())
    }
}

/// The key under which the per-address limits count `ip`: an IPv4 address (an IPv6
/// socket's `::ffff:a.b.c.d` included) as itself; an IPv6 address by its /64 network
/// (the low 64 bits zeroed), since a host, or a home's router, is given a whole /64 and
/// may take any address in it: counted one by one, a single host could take every
/// place of `max_connections` on its own.
pub(super) fn counted(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6(std::net::Ipv6Addr::from_bits(
            v6.to_bits() & !u128::from(u64::MAX),
        )),
        v4 => v4,
    }
}

/// `key` as the logs name a per-address key: an IPv4 address as is, an IPv6 /64
/// network with its prefix length (`2001:db8:7:7::/64`).
pub(super) fn counted_name(key: IpAddr) -> String {
    match key {
        IpAddr::V6(_) => format!("{key}/64"),
        v4 => v4.to_string(),
    }
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.client {
            Some(c) => write!(f, "{c} via {}", self.addr),
            None => write!(f, "{}", self.addr),
        }
    }
}

/// Whether `ip` is in one of the `trusted` networks (an IPv4 peer seen through an IPv6
/// socket as `::ffff:a.b.c.d` included).
pub(super) fn is_trusted(ip: IpAddr, trusted: &[IpNet]) -> bool {
    super::settings::networks::holds(trusted, ip)
}

/// The client named in `X-Forwarded-For` (every such header, in order, comma
/// separated): right to left, the first entry that is not a trusted proxy; the leftmost
/// when all are. `None` without the header, or where the entry found is not an address
/// (a proxy that writes something else is misconfigured: the TCP peer is counted).
fn forwarded_client(headers: &HeaderMap, is_trusted: impl Fn(IpAddr) -> bool) -> Option<IpAddr> {
    let mut entries = Vec::new();
    for value in headers.get_all("x-forwarded-for") {
        let Ok(text) = value.to_str() else {
            return None;
        };
        entries.extend(text.split(',').map(str::trim).filter(|e| !e.is_empty()));
    }
    let mut last = None;
    for entry in entries.iter().rev() {
        // bare addresses, as nginx and Caddy write them; with a port, as some others do
        let ip = entry
            .parse::<IpAddr>()
            .or_else(|_| entry.parse::<SocketAddr>().map(|s| s.ip()))
            .ok()?;
        last = Some(ip);
        if !is_trusted(ip) {
            break;
        }
    }
    last
}

/// Open WebSocket connections per address (addresses with none absent).
#[derive(Debug, Default)]
pub(super) struct Places(Mutex<HashMap<IpAddr, usize>>);

impl Places {
    /// A place for one more connection from `ip`, held until the returned value is
    /// dropped; `None` when `ip` already holds `most`.
    pub(super) fn take(self: &Arc<Self>, ip: IpAddr, most: usize) -> Option<Place> {
        // (the counts stay right even if a holder panicked: nothing panics mid-update)
        let mut open = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = open.entry(ip).or_insert(0);
        if *n >= most {
            return None;
        }
        *n += 1;
        Some(Place(Arc::clone(self), ip))
    }
}

/// One connection's place among its address's.
pub(super) struct Place(Arc<Places>, IpAddr);

impl Drop for Place {
    fn drop(&mut self) {
        let mut open = self
            .0
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = open.get_mut(&self.1) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("address")
    }

    fn peer(from: &str, forwarded: &[&str], trusted: &[&str]) -> Peer {
        let mut h = HeaderMap::new();
        for f in forwarded {
            h.append("x-forwarded-for", f.parse().expect("header value"));
        }
        let trusted: Vec<IpNet> = trusted
            .iter()
            .map(|t| super::super::settings::networks::parse(t).expect("network"))
            .collect();
        Peer::new(from.parse().expect("peer"), &h, &trusted)
    }

    #[test]
    fn the_client_is_the_rightmost_address_no_trusted_proxy_wrote() {
        let proxy = "10.0.0.2:40000";
        // nginx's $proxy_add_x_forwarded_for: what the client sent, then its address
        let p = peer(proxy, &["6.6.6.6, 203.0.113.7"], &["10.0.0.2"]);
        assert_eq!(p.ip(), ip("203.0.113.7"));
        assert_eq!(p.to_string(), "203.0.113.7 via 10.0.0.2:40000");
        // two proxies in a row, the entries over two headers
        let p = peer(
            proxy,
            &["203.0.113.7", "10.0.0.1"],
            &["10.0.0.1", "10.0.0.2"],
        );
        assert_eq!(p.ip(), ip("203.0.113.7"));
        // with a port, and IPv6
        let p = peer(proxy, &["[2001:db8::1]:5555"], &["10.0.0.2"]);
        assert_eq!(p.ip(), ip("2001:db8::1"));
        // an IPv4 peer seen through an IPv6 socket is still the trusted proxy
        let p = peer("[::ffff:10.0.0.2]:40000", &["203.0.113.7"], &["10.0.0.2"]);
        assert_eq!(p.ip(), ip("203.0.113.7"));
        // proxies named by their network (an ingress whose pods come and go)
        let p = peer(proxy, &["203.0.113.7", "10.0.0.9"], &["10.0.0.0/24"]);
        assert_eq!(p.ip(), ip("203.0.113.7"));
        let p = peer("10.0.1.2:40000", &["203.0.113.7"], &["10.0.0.0/24"]);
        assert_eq!(p.ip(), ip("10.0.1.2"));
    }

    #[test]
    fn the_header_counts_only_from_a_trusted_proxy_and_only_when_it_is_an_address() {
        // anyone else cannot choose their address
        let p = peer("198.51.100.9:1234", &["203.0.113.7"], &["10.0.0.2"]);
        assert_eq!((p.ip(), p.client), (ip("198.51.100.9"), None));
        assert_eq!(p.to_string(), "198.51.100.9:1234");
        // a trusted proxy without the header, or with garbage where the client is
        assert_eq!(peer("10.0.0.2:1", &[], &["10.0.0.2"]).ip(), ip("10.0.0.2"));
        assert_eq!(
            peer("10.0.0.2:1", &["unknown"], &["10.0.0.2"]).ip(),
            ip("10.0.0.2")
        );
        // garbage to the left of the client (written by the client) is not read
        let p = peer("10.0.0.2:1", &["<script>, 203.0.113.7"], &["10.0.0.2"]);
        assert_eq!(p.ip(), ip("203.0.113.7"));
    }

    /// An IPv6 client is counted by its /64 network (a host may take any address in
    /// it); an IPv4 one, also through an IPv6 socket, by its address.
    #[test]
    fn ipv6_clients_are_counted_by_their_64_network() {
        let same = [
            "2001:db8:7:7::1",
            "2001:db8:7:7:ffff:ffff:ffff:ffff",
            "2001:db8:7:7:1234::9",
        ];
        for a in same {
            assert_eq!(counted(ip(a)), ip("2001:db8:7:7::"), "{a}");
        }
        assert_ne!(
            counted(ip("2001:db8:7:8::1")),
            counted(ip("2001:db8:7:7::1"))
        );
        assert_eq!(counted(ip("203.0.113.7")), ip("203.0.113.7"));
        assert_eq!(counted(ip("::ffff:203.0.113.7")), ip("203.0.113.7"));
        assert_eq!(
            counted_name(counted(ip("2001:db8:7:7::1"))),
            "2001:db8:7:7::/64"
        );
        assert_eq!(counted_name(ip("203.0.113.7")), "203.0.113.7");
        // through a trusted proxy, the client's network
        let p = peer("10.0.0.2:1", &["2001:db8:7:7::42"], &["10.0.0.2"]);
        assert_eq!(p.host(), ip("2001:db8:7:7::"));
        assert_eq!(p.ip(), ip("2001:db8:7:7::42"));
        // places: two addresses of one /64 share them
        let places = Arc::new(Places::default());
        let _a = places
            .take(counted(ip("2001:db8:7:7::1")), 2)
            .expect("first");
        let _b = places
            .take(counted(ip("2001:db8:7:7::2")), 2)
            .expect("second");
        assert!(places.take(counted(ip("2001:db8:7:7::3")), 2).is_none());
        assert!(places.take(counted(ip("2001:db8:7:8::1")), 2).is_some());
    }

    #[test]
    fn places_are_held_per_address_and_given_back() {
        let places = Arc::new(Places::default());
        let a = places.take(ip("203.0.113.7"), 2).expect("first");
        let _b = places.take(ip("203.0.113.7"), 2).expect("second");
        assert!(places.take(ip("203.0.113.7"), 2).is_none());
        let _other = places.take(ip("203.0.113.8"), 2).expect("another address");
        drop(a);
        assert!(places.take(ip("203.0.113.7"), 2).is_some());
    }
}
