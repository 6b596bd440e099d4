//! The server's settings ([`ServerConfig`], the `configs/server.toml` file) and the
//! bounds of those a start checks against constants.

use std::net::SocketAddr;

use ipnet::IpNet;

use super::settings;
use crate::engine::EngineConfig;

/// Server settings. [`start`](super::start) checks every number in them (here, in the engine's,
/// the SOR runtime's and the filter's settings) and refuses one it cannot honour
/// (NaN, infinite, negative where it must not be, beyond its ceiling) as
/// [`NetError::BadSetting`](super::NetError::BadSetting), naming it as the config file does.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Address to listen on (`127.0.0.1:0` picks a free port).
    pub bind: SocketAddr,
    /// Engine settings (tick rate, timeouts, SOR parameters).
    pub engine: EngineConfig,
    /// Token publishers must present; `None` with `open = true` admits anyone. Also
    /// from `publisher_token_file`, `$CLOTHCAST_PUBLISHER_TOKEN` or the systemd
    /// credential `publisher-token`, one of them ([`resolve_tokens`](super::resolve_tokens)).
    pub publisher_token: Option<String>,
    /// Token viewers must present (or `viewer_token_file`, `$CLOTHCAST_VIEWER_TOKEN`,
    /// the credential `viewer-token`).
    pub viewer_token: Option<String>,
    /// A file holding the publisher token (surrounding whitespace trimmed), read at
    /// start by [`resolve_tokens`](super::resolve_tokens): keeps the secret out of a config that may be
    /// shared or checked in. [`start`](super::start) refuses one not read yet.
    pub publisher_token_file: Option<std::path::PathBuf>,
    /// A file holding the viewer token.
    pub viewer_token_file: Option<std::path::PathBuf>,
    /// Admit connections without tokens. Must be set explicitly; the server logs a
    /// warning at start when it is.
    pub open: bool,
    /// Largest WebSocket message accepted, bytes ([`MIN_MESSAGE_BYTES`] to
    /// [`MAX_MESSAGE_BYTES`]).
    pub max_message_bytes: usize,
    /// Ticks a viewer may fall behind before it loses frames and is resynchronised
    /// (0 counts as 1; at most [`MAX_VIEWER_QUEUE`]).
    pub viewer_queue: usize,
    /// Groups each tick's avatars are synthesised, encoded and sent in, the
    /// longest-waiting poses first (see [`Engine::tick_in_groups`](crate::engine::Engine::tick_in_groups)): 1 sends every
    /// frame when the whole tick is done; more get the first frames out sooner, for a
    /// little CPU per group (the rayon workers meet once more). 0 counts as 1; at most
    /// [`MAX_SEND_GROUPS`].
    pub send_groups: usize,
    /// Kernel send buffer per connection, bytes: with `viewer_queue` it bounds what a
    /// slow viewer can have queued before it starts losing frames.
    pub send_buffer_bytes: usize,
    /// Seconds a connection has to send each request's HTTP headers (the WebSocket
    /// upgrade, a `/metrics` scrape; also how long an idle keep-alive connection is
    /// kept), and then a WebSocket its `hello` (0.1 to 86400).
    pub hello_timeout: f32,
    /// Seconds a connection may go without the peer taking any of our bytes or sending
    /// any (pongs count; the server pings every third of it): such a peer is gone
    /// without a goodbye, or stuck, and its connection is closed (code 1008 where a
    /// close can still be sent), which frees its place (0.1 to 86400).
    pub peer_timeout: f32,
    /// Messages per second one connection may send (averaged over one second, burst of
    /// the same size; at least 1); a connection over it is closed with code 1008.
    pub max_messages_per_second: f32,
    /// Distinct avatars one publisher connection may drive at once (an avatar silent
    /// for longer than the engine's `remove_after` gives its place back).
    pub max_avatars_per_publisher: usize,
    /// Bodies of a Kinect sensor's frames that drive avatars: the nearest this many to
    /// the sensor (a try-on kiosk dresses its customer, not the people walking past
    /// behind them); 0 drives every body. A body already driving keeps its place
    /// against a newcomer less than 0.3 m nearer. Bodies left out are dropped quietly
    /// (their avatars idle and are removed as when they leave the view).
    pub kinect_bodies: usize,
    /// Farthest a Kinect body may stand from its sensor (metres, to its pelvis) and
    /// drive an avatar, 0 to 100; 0: any distance. A body already driving may step
    /// 0.3 m further before it is dropped.
    pub kinect_max_distance: f32,
    /// Where a Kinect sensor's performers are placed across the floor: 0 takes the
    /// world origin at the first pelvis the sensor reports (its first visitor); a
    /// distance (metres, up to 20) puts it at the spot that far in front of the sensor
    /// (across the floor once the sensor reports its floor), so that every visitor of a
    /// try-on kiosk stands where they stand relative to a mark on the floor.
    pub kinect_stage: f32,
    /// Viewers connected at once; more are closed with code 1013 (try again later).
    pub max_viewers: usize,
    /// WebSocket connections open at once, of any role, those still waiting for their
    /// `hello` included (each holds ~130 KB of buffers); more are answered HTTP 503
    /// before the upgrade. Also the most connections that may be open as plain HTTP at
    /// once (before their upgrade, or idle between requests): more are closed as soon
    /// as they are accepted.
    pub max_connections: usize,
    /// WebSocket connections open at once from one IP address (at least 1; an IPv6
    /// client by its /64 network, any address of which its host may take): one host
    /// cannot take every place of `max_connections`. A venue whose headsets share one
    /// public address behind NAT needs this at least its headset count; more are
    /// answered HTTP 503 before the upgrade. Also the most connections one address may
    /// have open as plain HTTP (unfinished requests; trusted proxies exempt): more are
    /// closed as soon as they are accepted.
    pub max_connections_per_address: usize,
    /// Reverse proxies (nginx, Caddy, an ingress: what terminates TLS) whose
    /// `X-Forwarded-For` names the client: its address is then what
    /// `max_connections_per_address` counts and the connection logs show. Addresses or
    /// networks (in the config file `"127.0.0.1"`, `"10.42.0.0/16"`). Empty: the header
    /// is ignored.
    #[serde(with = "settings::networks")]
    pub trusted_proxies: Vec<IpNet>,
    /// Connections a minute from one address (an IPv6 /64, as for
    /// `max_connections_per_address`) whose lines (welcomed or not, refusals,
    /// ended) the log writes; past it a connection is left out of the log, counted, and
    /// told in a summary line once a minute, so that a host opening connections in a
    /// loop cannot fill the disk. A token bucket as large as a minute's budget (a
    /// venue's headsets reconnecting at once are all logged). 0: no limit.
    pub log_connections_per_address_per_minute: u32,
    /// Connections a minute the log writes in all (the same, over every address:
    /// a flood from many addresses). 0: no limit.
    pub log_connections_per_minute: u32,
    /// PEM certificate chain (leaf first) and private key: with both, the port speaks
    /// only https and wss (what browsers require for WebXR on a headset); with
    /// neither, plain http and ws.
    pub tls_cert: Option<std::path::PathBuf>,
    /// See `tls_cert`.
    pub tls_key: Option<std::path::PathBuf>,
    /// UDP address of the VMC (OSC) listener; `None` (`"off"` in the config file)
    /// turns it off. UDP carries no token: anyone who can reach this address can drive
    /// avatars.
    #[serde(with = "settings::listener")]
    pub vmc_bind: Option<SocketAddr>,
    /// Senders the VMC listener takes datagrams from: addresses or networks (in the
    /// config file `"192.168.1.20"`, `"192.168.1.0/24"`, `"fd00::/8"`). Empty: any
    /// sender, which on a listener bound beyond loopback means anyone who can reach it
    /// (the server warns at start). Datagrams from others are dropped unread and
    /// counted (`clothcast_udp_refused_total{input="vmc"}`).
    #[serde(with = "settings::networks")]
    pub vmc_allow: Vec<IpNet>,
    /// Avatar id for VMC input; by default each UDP source is its own performer
    /// (`vmc-<address:port>`).
    pub vmc_avatar: Option<String>,
    /// UDP address of the Xsens MVN listener (MVN Animate/Analyze's Network Streamer,
    /// "Position + Orientation (Quaternion)"); `None` (`"off"` in the config file)
    /// turns it off. Each sending host's
    /// each character (suit) is its own performer, `mvn-<address>-<character id>`.
    /// UDP carries no token: anyone who can reach this address can drive avatars.
    #[serde(with = "settings::listener")]
    pub mvn_bind: Option<SocketAddr>,
    /// Senders the Xsens MVN listener takes datagrams from, as `vmc_allow` (counted as
    /// `clothcast_udp_refused_total{input="mvn"}`).
    #[serde(with = "settings::networks")]
    pub mvn_allow: Vec<IpNet>,
    /// Example databases, one per garment (read by `clothcast serve`; the first is what
    /// avatars wear until a `wear` message chooses another). Empty: the default database.
    pub databases: Vec<std::path::PathBuf>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            bind: SocketAddr::from(([127, 0, 0, 1], 8470)),
            engine: EngineConfig::default(),
            publisher_token: None,
            viewer_token: None,
            publisher_token_file: None,
            viewer_token_file: None,
            open: false,
            max_message_bytes: 64 * 1024,
            viewer_queue: 8,
            send_groups: 4,
            send_buffer_bytes: 256 * 1024,
            hello_timeout: 5.0,
            peer_timeout: 30.0,
            max_messages_per_second: 2000.0,
            max_avatars_per_publisher: 64,
            kinect_bodies: 0,
            kinect_max_distance: 0.0,
            kinect_stage: 0.0,
            max_viewers: 256,
            max_connections: 1024,
            max_connections_per_address: 256,
            trusted_proxies: Vec::new(),
            log_connections_per_address_per_minute: 60,
            log_connections_per_minute: 600,
            tls_cert: None,
            tls_key: None,
            vmc_bind: Some(SocketAddr::from(([127, 0, 0, 1], 39539))),
            vmc_allow: Vec::new(),
            vmc_avatar: None,
            mvn_bind: Some(SocketAddr::from(([127, 0, 0, 1], crate::mocap::MVN_PORT))),
            mvn_allow: Vec::new(),
            databases: Vec::new(),
        }
    }
}

/// Smallest [`ServerConfig::max_message_bytes`]: a 22-joint pose is ~1.6 kB as
/// MessagePack and ~2.6 kB as JSON, so below this a server would refuse the messages it
/// exists for.
pub const MIN_MESSAGE_BYTES: usize = 4096;
/// Largest [`ServerConfig::max_message_bytes`] (64 MiB): what one connection may make
/// the server buffer before it refuses the message.
pub const MAX_MESSAGE_BYTES: usize = 64 << 20;
/// Largest [`ServerConfig::viewer_queue`] (ticks).
pub const MAX_VIEWER_QUEUE: usize = 1024;
/// Largest [`ServerConfig::send_groups`].
pub const MAX_SEND_GROUPS: usize = 64;
