//! The server's settings checked before anything starts: its own, and the engine's
//! ([`crate::engine::EngineConfig::check`]), each named as in the config file.

use super::{
    MAX_MESSAGE_BYTES, MAX_SEND_GROUPS, MAX_TICK_SLOTS, MAX_VIEWER_QUEUE, MIN_MESSAGE_BYTES,
    NetError, ServerConfig,
};
use std::sync::Arc;

use crate::engine::{Engine, EngineError, MAX_SETTING_SECONDS, Range, first_bad, range};
use crate::sor::Database;

/// A connection deadline: timers need a period above zero, and the server pings every
/// third of `peer_timeout`.
const TIMEOUT: Range = range(0.1, false, MAX_SETTING_SECONDS, "seconds, 0.1 to 86400");

/// Everything [`super::start_with_garments`] checks before it takes the port, without
/// taking it (`clothcast serve --check`): authentication is configured or explicitly
/// off, every setting is in range, and the databases can be worn together (one body,
/// distinct garments). Returns the garments' names, the default first.
pub fn check_server(
    dbs: Vec<Arc<Database>>,
    config: &ServerConfig,
) -> Result<Vec<String>, NetError> {
    check(config)?;
    if let (Some(cert), Some(key)) = (&config.tls_cert, &config.tls_key) {
        super::tls::acceptor(cert, key)?;
    }
    Ok(Engine::with_garments(dbs, config.engine.clone())?.garment_names())
}

/// Authentication configured (or explicitly off), and every setting of `config`
/// (server, engine, SOR runtime, filter) within what the server can honour; the first
/// that is not, by its name in the config file. What is
/// checked here is used as it is elsewhere, unclamped.
pub(super) fn check(config: &ServerConfig) -> Result<(), NetError> {
    super::tokens::check_resolved(config)?;
    if !config.open && (config.publisher_token.is_none() || config.viewer_token.is_none()) {
        return Err(NetError::NoAuth);
    }
    if config.tls_cert.is_some() != config.tls_key.is_some() {
        return Err(NetError::TlsHalf);
    }
    if let Some(id) = &config.vmc_avatar
        && !crate::protocol::valid_avatar_id(id)
    {
        return Err(NetError::BadVmcAvatar(id.clone()));
    }
    let n = |v: usize| v as f64;
    // the broadcast holds viewer_queue × tick_slots × (send_groups + 1) messages,
    // allocated up front
    let settings: [(&'static str, f64, Range); 12] = [
        // none would leave a server that takes no viewer, or no connection at all
        (
            "max_viewers",
            n(config.max_viewers),
            range(1.0, false, f64::INFINITY, "at least 1"),
        ),
        (
            "max_connections",
            n(config.max_connections),
            range(1.0, false, f64::INFINITY, "at least 1"),
        ),
        (
            "max_message_bytes",
            n(config.max_message_bytes),
            range(
                n(MIN_MESSAGE_BYTES),
                false,
                n(MAX_MESSAGE_BYTES),
                "4096 to 67108864 bytes",
            ),
        ),
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
        (
            "engine.tick_slots",
            f64::from(config.engine.tick_slots),
            range(0.0, false, f64::from(MAX_TICK_SLOTS), "0 to 16 slots"),
        ),
        (
            "max_connections_per_address",
            n(config.max_connections_per_address),
            range(1.0, false, f64::INFINITY, "at least 1"),
        ),
        (
            "kinect_max_distance",
            f64::from(config.kinect_max_distance),
            range(0.0, false, 100.0, "0 to 100 m"),
        ),
        (
            "kinect_stage",
            f64::from(config.kinect_stage),
            range(0.0, false, 20.0, "0 to 20 m"),
        ),
        ("hello_timeout", f64::from(config.hello_timeout), TIMEOUT),
        ("peer_timeout", f64::from(config.peer_timeout), TIMEOUT),
        // the token bucket holds a second's worth: below 1 no message would pass
        (
            "max_messages_per_second",
            f64::from(config.max_messages_per_second),
            range(1.0, false, 1e9, "at least 1"),
        ),
    ];
    if let Some((name, value, range)) = first_bad(settings) {
        return Err(NetError::BadSetting {
            name: name.to_string(),
            value,
            range,
        });
    }
    match config.engine.check() {
        Err(EngineError::BadSetting { name, value, range }) => Err(NetError::BadSetting {
            name: format!("engine.{name}"),
            value,
            range,
        }),
        other => Ok(other?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(config: &ServerConfig) -> String {
        match check(config) {
            Err(NetError::BadSetting { name, .. }) => name,
            other => panic!("not refused by name: {other:?}"),
        }
    }

    #[test]
    fn the_defaults_pass_and_each_bad_value_is_named_as_in_the_config_file() {
        // the defaults have no tokens: refused until tokens are set or `open` is
        assert!(matches!(
            check(&ServerConfig::default()),
            Err(NetError::NoAuth)
        ));
        let base = || ServerConfig {
            open: true,
            ..ServerConfig::default()
        };
        check(&base()).expect("defaults, open");
        let tokens = ServerConfig {
            publisher_token: Some("p".into()),
            viewer_token: Some("v".into()),
            ..ServerConfig::default()
        };
        check(&tokens).expect("defaults with tokens");
        // an empty token would admit an empty one, even with `open` set; a token file
        // must have been read (resolve_tokens), not silently ignored
        for bad in [
            ServerConfig {
                viewer_token: Some(String::new()),
                ..tokens.clone()
            },
            ServerConfig {
                publisher_token: Some(" p".into()),
                ..base()
            },
            ServerConfig {
                viewer_token_file: Some("viewer.token".into()),
                ..tokens.clone()
            },
        ] {
            assert!(matches!(check(&bad), Err(NetError::Token(_))), "{bad:?}");
        }
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
        c.tls_cert = Some("cert.pem".into());
        assert!(matches!(check(&c), Err(NetError::TlsHalf)));
        for bytes in [0, 4095, (64 << 20) + 1] {
            let mut c = base();
            c.max_message_bytes = bytes;
            assert_eq!(refused(&c), "max_message_bytes");
        }
        let mut c = base();
        c.max_message_bytes = 4096;
        check(&c).expect("the smallest message limit");
        let mut c = base();
        c.max_viewers = 0;
        assert_eq!(refused(&c), "max_viewers");
        let mut c = base();
        c.max_connections = 0;
        assert_eq!(refused(&c), "max_connections");
        let mut c = base();
        c.max_connections_per_address = 0;
        assert_eq!(refused(&c), "max_connections_per_address");
        for d in [f32::NAN, -1.0, 101.0] {
            let mut c = base();
            c.kinect_max_distance = d;
            assert_eq!(refused(&c), "kinect_max_distance");
        }
        for d in [f32::NAN, -1.0, 21.0] {
            let mut c = base();
            c.kinect_stage = d;
            assert_eq!(refused(&c), "kinect_stage");
        }
        let mut c = base();
        c.engine.tick_slots = 17;
        assert_eq!(refused(&c), "engine.tick_slots");
        // the engine's own check, under its table's name
        let mut c = base();
        c.engine.tick_hz = -5.0;
        assert_eq!(refused(&c), "engine.tick_hz");
        let mut c = base();
        if let Some(f) = c.engine.filter.as_mut() {
            f.beta = f32::INFINITY;
        }
        assert_eq!(refused(&c), "engine.filter.beta");
        let e = check(&c).expect_err("inf beta");
        assert_eq!(
            e.to_string(),
            "setting `engine.filter.beta` = inf is out of range (0 to 1000)"
        );
    }
}

/// A listener's address in the config file: `"HOST:PORT"`, or `"off"` for none (TOML
/// has no null, and leaving the line out keeps the default, which is on).
pub(super) mod listener {
    use std::net::SocketAddr;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(
        addr: &Option<SocketAddr>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match addr {
            Some(a) => s.collect_str(a),
            None => s.serialize_str("off"),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<SocketAddr>, D::Error> {
        let text = String::deserialize(d)?;
        if text == "off" {
            return Ok(None);
        }
        text.parse().map(Some).map_err(|_| {
            serde::de::Error::custom(format!(
                "{text:?} is neither an address (HOST:PORT, e.g. \"127.0.0.1:39539\") nor \"off\""
            ))
        })
    }
}

/// A list of senders in the config file: each an address (`"192.168.1.20"`, one host)
/// or a network in CIDR form (`"192.168.1.0/24"`, `"fd00::/8"`).
pub(super) mod networks {
    use ipnet::IpNet;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(nets: &[IpNet], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(nets.iter().map(ToString::to_string))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<IpNet>, D::Error> {
        Vec::<String>::deserialize(d)?
            .iter()
            .map(|text| parse(text).map_err(serde::de::Error::custom))
            .collect()
    }

    /// Whether one of `nets` holds `ip` (an IPv4 address seen through an IPv6 socket,
    /// `::ffff:a.b.c.d`, as the IPv4 address it is).
    pub(crate) fn holds(nets: &[IpNet], ip: std::net::IpAddr) -> bool {
        let ip = ip.to_canonical();
        nets.iter().any(|net| net.contains(&ip))
    }

    /// One entry: a network, or an address as the network of that host alone.
    pub(crate) fn parse(text: &str) -> Result<IpNet, String> {
        let text = text.trim();
        text.parse::<IpNet>()
            .or_else(|_| text.parse::<std::net::IpAddr>().map(IpNet::from))
            .map_err(|_| {
                format!(
                    "{text:?} is neither an address (\"192.168.1.20\") nor a network (\"192.168.1.0/24\")"
                )
            })
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn addresses_and_networks_are_read_and_anything_else_is_named() {
            let host = parse("192.168.1.20").expect("address");
            assert_eq!(host.to_string(), "192.168.1.20/32");
            let net = parse(" 192.168.1.0/24 ").expect("network");
            assert!(net.contains(&"192.168.1.77".parse::<std::net::IpAddr>().expect("ip")));
            assert!(!net.contains(&"192.168.2.1".parse::<std::net::IpAddr>().expect("ip")));
            assert_eq!(parse("fd00::/8").expect("v6").prefix_len(), 8);
            assert_eq!(parse("::1").expect("v6 host").prefix_len(), 128);
            for bad in [
                "",
                "192.168.1.300",
                "10.0.0.0/33",
                "host.local",
                "10.0.0.1:39539",
            ] {
                let e = parse(bad).expect_err(bad);
                assert!(e.contains("neither an address"), "{e}");
            }
        }
    }
}
