//! The server: HTTP + WebSocket (axum) in front of the engine's tick thread.
//!
//! Poses from publishers go into an inbox (latest per avatar wins); the tick thread
//! drains it, runs [`Engine::tick_in_groups`] at a fixed rate and broadcasts each
//! group of a tick's ready-made messages as soon as it is encoded (the poses that have
//! waited longest first). Every viewer reads the broadcast through its own bounded window
//! ([`ServerConfig::viewer_queue`] ticks): a viewer that falls behind loses frames, is
//! resynchronised with keyframes, and never slows anyone else (the broadcast never
//! waits for a reader).

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::response::IntoResponse;
use axum::routing::get;
use bytes::Bytes;
use tokio::sync::broadcast;

use crate::engine::{Engine, EngineConfig, EngineError, TickOutput};
use crate::mocap::PositionRetargeter;
use crate::skeleton::Pose;
use crate::sor::Database;

mod bodies;
mod conn;
mod connlog;
mod driven;
mod files;
mod http;
mod out;
mod owners;
mod peer;
mod settings;
mod status;
mod tls;
mod tokens;
mod udp;
pub use settings::check_server;
pub use status::ServerProbe;
pub use tokens::{
    MAX_TOKEN_BYTES, PUBLISHER_CREDENTIAL, PUBLISHER_TOKEN_ENV, TokenEnv, TokenError, TokenSource,
    VIEWER_CREDENTIAL, VIEWER_TOKEN_ENV, resolve_tokens,
};
mod slots;
mod tick;
mod watch;
use conn::ws_upgrade;
use ipnet::IpNet;
use status::{healthz, metrics};
use udp::{UdpInput, listen_udp, mvn_loop, vmc_loop};
use watch::Watchers;

/// Server settings. [`start`] checks every number in them (here, in the engine's,
/// the SOR runtime's and the filter's settings) and refuses one it cannot honour
/// (NaN, infinite, negative where it must not be, beyond its ceiling) as
/// [`NetError::BadSetting`], naming it as the config file does.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Address to listen on (`127.0.0.1:0` picks a free port).
    pub bind: SocketAddr,
    /// Engine settings (tick rate, timeouts, SOR parameters).
    pub engine: EngineConfig,
    /// Token publishers must present; `None` with `open = true` admits anyone. Also
    /// from `publisher_token_file`, `$CLOTHCAST_PUBLISHER_TOKEN` or the systemd
    /// credential `publisher-token`, one of them ([`resolve_tokens`]).
    pub publisher_token: Option<String>,
    /// Token viewers must present (or `viewer_token_file`, `$CLOTHCAST_VIEWER_TOKEN`,
    /// the credential `viewer-token`).
    pub viewer_token: Option<String>,
    /// A file holding the publisher token (surrounding whitespace trimmed), read at
    /// start by [`resolve_tokens`]: keeps the secret out of a config that may be
    /// shared or checked in. [`start`] refuses one not read yet.
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
    /// longest-waiting poses first (see [`Engine::tick_in_groups`]): 1 sends every
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
pub use crate::engine::MAX_TICK_SLOTS;
pub use files::{OpenFiles, RESERVED_FILES, files_needed, raise_open_files, raise_open_files_for};

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NetError {
    /// The HTTP/WebSocket address could not be had (in use, not this machine's, a
    /// privileged port).
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// `bind` from the config.
        addr: SocketAddr,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// Serving failed (a thread or socket the operating system would not give).
    #[error("network: {0}")]
    Io(#[from] std::io::Error),
    /// The engine refused the database.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// Neither tokens nor `open = true`.
    #[error(
        "no publisher/viewer tokens configured; give each in the config, a token file, $CLOTHCAST_PUBLISHER_TOKEN / $CLOTHCAST_VIEWER_TOKEN or a systemd credential, or set `open = true` explicitly"
    )]
    NoAuth,
    /// A token that is empty (it would admit an empty one), or a token file that
    /// [`resolve_tokens`] has not read.
    #[error(transparent)]
    Token(#[from] TokenError),
    /// The TLS certificate or key cannot be used.
    #[error("TLS: {path}: {reason}")]
    Tls {
        /// The file at fault.
        path: String,
        /// Why.
        reason: String,
    },
    /// One of `tls_cert` and `tls_key` without the other.
    #[error("TLS needs both `tls_cert` and `tls_key`; only one is set")]
    TlsHalf,
    /// `vmc_avatar` is not a valid avatar id.
    #[error("setting `vmc_avatar` = {0:?} is refused: {rule}", rule = crate::protocol::AVATAR_ID_RULE)]
    BadVmcAvatar(String),
    /// A setting outside what the server can honour.
    #[error("setting `{name}` = {value} is out of range ({range})")]
    BadSetting {
        /// The setting's name in the config file (`engine.tick_hz` for `tick_hz` of the
        /// `[engine]` table).
        name: String,
        /// Its value, as read.
        value: String,
        /// What it may be.
        range: &'static str,
    },
}

#[derive(Default)]
struct Inbox {
    /// Latest pose per avatar since the last tick: (pose, sender timestamp, received).
    poses: HashMap<String, (Pose, f64, f64)>,
    /// Poses received per avatar since the last tick (the input rate).
    arrivals: HashMap<String, u32>,
    /// Avatars some viewer needs a keyframe of (it joined, or fell out of step).
    keyframes: HashSet<String>,
    /// A viewer subscribed to every avatar: the idle ones, which send no frame that
    /// would show it lacks them, make a keyframe each (see
    /// [`crate::engine::Engine::request_idle_keyframes`]).
    idle_keyframes: bool,
    /// Garment choices (avatar → outfit, garment names inner to outer, validated),
    /// kept until the avatar exists.
    wear: HashMap<String, Vec<String>>,
}

impl Inbox {
    /// A pose for `avatar` (latest wins), counted for its input rate when it completes
    /// one of the source's frames.
    fn pose(&mut self, avatar: String, pose: Pose, timestamp: f64, received: f64, frame: bool) {
        if frame {
            *self.arrivals.entry(avatar.clone()).or_insert(0) += 1;
        }
        self.poses.insert(avatar, (pose, timestamp, received));
    }
}

/// Where poses come from, for the per-source input counters.
#[derive(Clone, Copy, Debug)]
enum Source {
    /// `pose` messages on WebSocket (any profile).
    WebSocket,
    /// Kinect bridges' body frames on WebSocket (one pose per tracked body).
    Kinect,
    /// VMC over UDP.
    Vmc,
    /// Xsens MVN network streaming over UDP.
    Mvn,
}

/// How long a calibration asked for an avatar published by another connection waits
/// for that avatar's next pose before it is forgotten.
const CALIBRATION_WAIT: Duration = Duration::from_secs(10);

/// Counters exported at `/metrics`.
#[derive(Default)]
struct Metrics {
    ticks: AtomicU64,
    late_ticks: AtomicU64,
    unwatched_ticks: AtomicU64,
    tick_micros_last: AtomicU64,
    tick_micros_max: AtomicU64,
    /// The share of the last whole second the ticks spent working, parts per million
    /// (near 1 000 000 the server is at capacity and ticks start running late).
    tick_busy_ppm: AtomicU64,
    /// Slots the current tick period is divided into (`engine.tick_slots`, or 1 while
    /// the ticks fall far behind: see `engine.adapt_tick_slots`); a change takes effect,
    /// and shows here, with the next period.
    tick_slots: AtomicU64,
    avatars: AtomicU64,
    avatars_unwatched: AtomicU64,
    avatars_held: AtomicU64,
    avatar_frames: AtomicU64,
    /// Keyframes made (streams starting, viewers joining or resyncing; at most one per
    /// avatar per `keyframe_interval` for the latter).
    keyframes: AtomicU64,
    /// When the last tick completed, µs since the server started (0: none yet).
    last_tick_micros: AtomicU64,
    /// Ticks that panicked (a bug): the tick loop carries on with the next.
    tick_panics: AtomicU64,
    /// Poses the engine refused (the server full; an invalid pose that passed an input
    /// path's checks would be a bug).
    poses_refused: AtomicU64,
    /// Garment frames that could not be made (one avatar's, the others unaffected).
    frame_errors: AtomicU64,
    viewers: AtomicU64,
    publishers: AtomicU64,
    /// WebSocket connections open (any role, before `hello` too).
    connections: AtomicU64,
    /// Connections refused at the door for [`ServerConfig::max_connections`].
    connections_refused: AtomicU64,
    /// Connections left out of the log (see [`connlog`]).
    connections_not_logged: AtomicU64,
    /// Connections whose peer has taken none of a write's bytes for over a second
    /// (a viewer that stopped reading, a headset that vanished): closed after
    /// [`ServerConfig::peer_timeout`].
    connections_stalled: AtomicU64,
    /// Connections closed for [`ServerConfig::peer_timeout`] (silent, or not reading).
    peers_timed_out: AtomicU64,
    /// Poses received, by [`Source`].
    poses_in: [AtomicU64; 4],
    bytes_out: AtomicU64,
    frames_out: AtomicU64,
    frames_dropped: AtomicU64,
    /// Streams a viewer asked to resync (`resync`: a frame its decoder refused) that
    /// it was in step with: each gets a keyframe.
    resyncs: AtomicU64,
    /// `asset` messages sent again for a viewer's `resync` (an asset it lacked).
    assets_resent: AtomicU64,
    bad_messages: AtomicU64,
    /// VMC datagrams of an earlier frame than one already applied (overtaken on the
    /// way), dropped unread.
    vmc_stale: AtomicU64,
    /// MVN datagrams of an earlier sample than one already applied (overtaken on the
    /// way, or repeated), dropped unread.
    mvn_stale: AtomicU64,
    /// UDP datagrams from senders not on the listener's allow list, by input
    /// ([`udp::UdpInput`]), dropped unread.
    udp_refused: [AtomicU64; 2],
}

struct Shared {
    config: ServerConfig,
    inbox: Mutex<Inbox>,
    frames: broadcast::Sender<Arc<TickOutput>>,
    /// The `asset` messages, one per garment.
    assets: Vec<Bytes>,
    /// Their hashes, in the same order.
    asset_hashes: Vec<String>,
    /// The garments (names, default first) and which can be worn together.
    wardrobe: crate::engine::Wardrobe,
    metrics: Metrics,
    start: Instant,
    /// Set on shutdown: every connection closes with 1001 and a reason.
    closing: tokio::sync::watch::Sender<bool>,
    /// Position sources (Kinect) → canonical poses, for the database's skeleton.
    retargeter: PositionRetargeter,
    /// Calibrations asked for avatars another connection publishes; the owning
    /// connection applies them on the avatar's next pose.
    /// (Each with when it was asked for: requests for avatars that never publish again
    /// expire after [`CALIBRATION_WAIT`].)
    calibrate: Mutex<HashMap<String, Instant>>,
    /// What viewers are subscribed to: each tick works only for watched avatars.
    watchers: Mutex<Watchers>,
    /// Each avatar's input rate (poses per second over the last second), by avatar id;
    /// updated by the tick thread once a second.
    input_rates: Mutex<Vec<(String, f64)>>,
    /// The engine's avatars (streaming or idle), kept by the tick thread as they come
    /// and go, so that a connection can refuse a new avatar by name when the server
    /// already drives `engine.max_avatars`.
    avatars: Mutex<HashSet<String>>,
    /// Open WebSocket connections per client address.
    per_address: Arc<peer::Places>,
    /// Which source drives each avatar (see [`owners`]).
    owners: Mutex<owners::Owners>,
    /// Numbers publisher connections as drivers.
    next_connection: AtomicU64,
    /// Which connections the log tells of.
    connection_log: connlog::ConnectionLog,
    /// The tokens a `hello` must present (the config's, until
    /// [`ServerHandle::replace_tokens`]).
    tokens: std::sync::RwLock<Tokens>,
}

/// The tokens each role must present (`None`: no token opens it; with `open` unset the
/// server starts only with both).
#[derive(Clone, Debug, Default)]
struct Tokens {
    publisher: Option<String>,
    viewer: Option<String>,
}

impl Shared {
    /// Whether a pose for `avatar` can be taken: it exists, or the server has room for
    /// another. Asked at every pose: several connections may take the last place
    /// between two ticks; the engine keeps one at the tick (refusing the others with a
    /// log line), and the others are refused here from their next pose on.
    fn room_for(&self, avatar: &str) -> bool {
        self.avatars.lock().map_or(true, |a| {
            a.contains(avatar) || a.len() < self.config.engine.max_avatars
        })
    }

    /// Records that `driver` sends a pose of `avatar` now (server seconds), unless
    /// another source drives it (see [`owners`]).
    fn claim(&self, avatar: &str, driver: owners::Driver, now: f64) -> Result<(), owners::Taken> {
        match self.owners.lock() {
            Ok(mut o) => o.claim(avatar, driver, now),
            Err(_) => Ok(()),
        }
    }

    /// Hands a received pose to the next tick; `frame`: it completes one of the
    /// source's frames (a VMC sender may spread a frame over several datagrams, each of
    /// which updates the pose), which is what the input counters and rates count.
    fn pose_in(
        &self,
        source: Source,
        avatar: String,
        pose: Pose,
        (timestamp, received): (f64, f64),
        frame: bool,
    ) {
        if frame {
            self.metrics.poses_in[source as usize].fetch_add(1, Ordering::Relaxed);
        }
        if let Ok(mut inbox) = self.inbox.lock() {
            inbox.pose(avatar, pose, timestamp, received, frame);
        }
    }
}

/// A running server.
pub struct ServerHandle {
    /// The bound address.
    pub addr: SocketAddr,
    /// The VMC listener's address, when it runs.
    pub vmc_addr: Option<SocketAddr>,
    /// The Xsens MVN listener's address, when it runs.
    pub mvn_addr: Option<SocketAddr>,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    tick: Option<std::thread::JoinHandle<()>>,
    serve: Option<tokio::task::JoinHandle<()>>,
}

impl ServerHandle {
    /// Garment frames (one avatar, one tick) synthesised and encoded so far.
    pub fn avatar_frames(&self) -> u64 {
        self.shared.metrics.avatar_frames.load(Ordering::Relaxed)
    }

    /// Of those, the frames that carried a keyframe (a stream's start, or a viewer
    /// joining, subscribing or resyncing after falling behind): `clothcast_keyframes_total`.
    pub fn keyframes(&self) -> u64 {
        self.shared.metrics.keyframes.load(Ordering::Relaxed)
    }

    /// Streams viewers asked to resync (`resync`, a frame their decoder refused):
    /// `clothcast_resyncs_total`.
    pub fn resyncs(&self) -> u64 {
        self.shared.metrics.resyncs.load(Ordering::Relaxed)
    }

    /// `asset` messages sent again for viewers' `resync` (an asset a viewer lacked):
    /// `clothcast_assets_resent_total`.
    pub fn assets_resent(&self) -> u64 {
        self.shared.metrics.assets_resent.load(Ordering::Relaxed)
    }

    /// The slots tick periods are divided into now (`clothcast_tick_slots`):
    /// `engine.tick_slots`, or 1 while the ticks run late (`engine.adapt_tick_slots`).
    pub fn tick_slots(&self) -> u64 {
        self.shared.metrics.tick_slots.load(Ordering::Relaxed)
    }

    /// A handle onto this server's health and load that can move into another task.
    pub fn probe(&self) -> ServerProbe {
        ServerProbe(Arc::clone(&self.shared))
    }

    /// Replaces the tokens new connections must present (a token rotated without a
    /// restart: `serve` calls this on SIGHUP). Connections already welcomed stay. The
    /// tokens are checked as at start (not empty, no surrounding whitespace or line
    /// break; both given unless the server is `open`); on a refusal the tokens in use
    /// are kept.
    pub fn replace_tokens(
        &self,
        publisher: Option<String>,
        viewer: Option<String>,
    ) -> Result<(), NetError> {
        let mut c = ServerConfig {
            publisher_token: publisher,
            viewer_token: viewer,
            open: self.shared.config.open,
            ..ServerConfig::default()
        };
        tokens::check_resolved(&c)?;
        if !c.open && (c.publisher_token.is_none() || c.viewer_token.is_none()) {
            return Err(NetError::NoAuth);
        }
        let new = Tokens {
            publisher: c.publisher_token.take(),
            viewer: c.viewer_token.take(),
        };
        match self.shared.tokens.write() {
            Ok(mut t) => *t = new,
            Err(poisoned) => *poisoned.into_inner() = new,
        }
        Ok(())
    }

    /// Stops accepting, closes connections, stops the tick thread, and waits.
    pub async fn shutdown(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // close every connection with a reason, and give them a moment to flush
        self.shared.closing.send_replace(true);
        let m = &self.shared.metrics;
        for _ in 0..50 {
            if m.viewers.load(Ordering::Relaxed) + m.publishers.load(Ordering::Relaxed) == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.serve.take() {
            let _ = t.await;
        }
        self.shared
            .connection_log
            .summarise(Instant::now(), "since the last summary (shutting down)");
        if let Some(t) = self.tick.take() {
            let _ = tokio::task::spawn_blocking(move || t.join()).await;
        }
    }
}

/// Starts the server on `config.bind` streaming the garment of `db`.
pub async fn start(db: Arc<Database>, config: ServerConfig) -> Result<ServerHandle, NetError> {
    start_with_garments(vec![db], config).await
}

/// [`start`] with several garments (one database each, names distinct); avatars wear
/// the first until a `wear` message dresses them in another.
pub async fn start_with_garments(
    dbs: Vec<Arc<Database>>,
    config: ServerConfig,
) -> Result<ServerHandle, NetError> {
    start_listening(dbs, config, None).await
}

/// [`start_with_garments`] on a socket already listening (a service manager's, passed
/// by socket activation) instead of binding `config.bind`, which is then not used.
/// The socket must be a listening TCP socket; it is made non-blocking here.
pub async fn start_on_listener(
    dbs: Vec<Arc<Database>>,
    config: ServerConfig,
    listener: std::net::TcpListener,
) -> Result<ServerHandle, NetError> {
    start_listening(dbs, config, Some(listener)).await
}

async fn start_listening(
    dbs: Vec<Arc<Database>>,
    config: ServerConfig,
    given: Option<std::net::TcpListener>,
) -> Result<ServerHandle, NetError> {
    settings::check(&config)?;
    let tls = match (&config.tls_cert, &config.tls_key) {
        (Some(cert), Some(key)) => Some(tls::acceptor(cert, key)?),
        _ => None,
    };
    if config.open {
        tracing::warn!("authentication is off (open = true): anyone can publish and view");
    }
    // the port first: a server that cannot have it starts nothing
    let listener = match given {
        Some(l) => {
            l.set_nonblocking(true)?;
            tokio::net::TcpListener::from_std(l)?
        }
        None => tokio::net::TcpListener::bind(config.bind)
            .await
            .map_err(|source| NetError::Bind {
                addr: config.bind,
                source,
            })?,
    };
    let addr = listener.local_addr()?;
    let engine = Engine::with_garments(dbs, config.engine.clone())?;
    let db = Arc::clone(engine.database());
    // a tick (or tick slot) broadcasts at most one message per group and one for
    // removed avatars
    let (tx, _) = broadcast::channel(
        config
            .viewer_queue
            .max(1)
            .saturating_mul(config.engine.tick_slots.max(1) as usize)
            .saturating_mul(config.send_groups.max(1) + 1),
    );
    let shared = Arc::new(Shared {
        assets: engine.assets(),
        asset_hashes: engine.asset_hashes(),
        wardrobe: engine.wardrobe().clone(),
        config: config.clone(),
        inbox: Mutex::new(Inbox::default()),
        frames: tx,
        metrics: Metrics::default(),
        start: Instant::now(),
        closing: tokio::sync::watch::channel(false).0,
        calibrate: Mutex::new(HashMap::new()),
        watchers: Mutex::new(Watchers::default()),
        input_rates: Mutex::new(Vec::new()),
        avatars: Mutex::new(HashSet::new()),
        per_address: Arc::default(),
        owners: Mutex::new(owners::Owners::new(
            config.engine.idle_timeout,
            config.engine.remove_after,
        )),
        next_connection: AtomicU64::new(0),
        tokens: std::sync::RwLock::new(Tokens {
            publisher: config.publisher_token.clone(),
            viewer: config.viewer_token.clone(),
        }),
        connection_log: connlog::ConnectionLog::new(
            config.log_connections_per_address_per_minute,
            config.log_connections_per_minute,
            Instant::now(),
        ),
        retargeter: PositionRetargeter::new(&crate::skeleton::Skeleton::from_rest_positions(
            db.body.skeleton,
        )),
    });
    // the slots the tick loop starts with, exported from the first request on
    shared
        .metrics
        .tick_slots
        .store(u64::from(engine.tick_slots()), Ordering::Relaxed);
    let stop = Arc::new(AtomicBool::new(false));
    let tick = {
        let (shared, stop) = (Arc::clone(&shared), Arc::clone(&stop));
        std::thread::Builder::new()
            .name("clothcast-tick".into())
            .spawn(move || tick::tick_loop(engine, shared, stop))?
    };
    let send_buffer = config.send_buffer_bytes.max(4096);
    let tune = move |tcp: &tokio::net::TcpStream| {
        if let Err(e) = socket2::SockRef::from(tcp).set_send_buffer_size(send_buffer) {
            tracing::debug!(error = %e, "could not set the send buffer size");
        }
        // frames and poses are small and late is useless: no Nagle delay (with it,
        // a small write waits for the peer's delayed ACK, up to 40 ms on Linux)
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "could not turn off Nagle's algorithm");
        }
    };
    let app = axum::Router::new()
        .route("/ws", get(ws_upgrade))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/", get(|| async { web("index.html") }))
        .route(
            "/{file}",
            get(|axum::extract::Path(file): axum::extract::Path<String>| async move { web(&file) }),
        )
        .with_state(Arc::clone(&shared));
    let (shutdown_tx, shutdown_rx) = tokio::sync::oneshot::channel::<()>();
    let header_timeout = Duration::from_secs_f32(config.hello_timeout);

    let refused = {
        let shared = Arc::clone(&shared);
        move || {
            let m = &shared.metrics.connections_refused;
            m.fetch_add(1, Ordering::Relaxed);
        }
    };
    let serve = tokio::spawn(http::serve(
        listener,
        app,
        http::Door {
            header_timeout,
            max_pending: config.max_connections,
            tls,
            per_address: config.max_connections_per_address,
            exempt: config.trusted_proxies.clone(),
        },
        refused,
        tune,
        shutdown_rx,
    ));
    let vmc_addr = listen_udp(&config, UdpInput::Vmc, |sock| {
        tokio::spawn(vmc_loop(sock, Arc::clone(&shared)));
    })
    .await?;
    let mvn_addr = listen_udp(&config, UdpInput::Mvn, |sock| {
        tokio::spawn(mvn_loop(sock, Arc::clone(&shared)));
    })
    .await?;
    tokio::spawn(connlog_summaries(Arc::clone(&shared)));
    tracing::info!(%addr, tick_hz = config.engine.tick_hz, "serving");
    Ok(ServerHandle {
        addr,
        vmc_addr,
        mvn_addr,
        shared,
        stop,
        shutdown: Some(shutdown_tx),
        tick: Some(tick),
        serve: Some(serve),
    })
}

/// Tells the connections the log left out, once every [`connlog::SUMMARY_EVERY`]
/// (nothing when none were), until the server shuts down.
async fn connlog_summaries(shared: Arc<Shared>) {
    let mut closing = shared.closing.subscribe();
    let mut every = tokio::time::interval(connlog::SUMMARY_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // the first tick is at once
    every.tick().await;
    loop {
        tokio::select! {
            _ = every.tick() => shared.connection_log.summarise(Instant::now(), "in the last minute"),
            _ = closing.wait_for(|c| *c) => break,
        }
    }
}

/// The browser viewer (clients/web), built into the binary so `serve` and `demo` need
/// no files at run time.
const WEB_FILES: [(&str, &str, &str); 10] = [
    (
        "index.html",
        "text/html; charset=utf-8",
        include_str!("../../clients/web/index.html"),
    ),
    (
        "viewer.js",
        "text/javascript",
        include_str!("../../clients/web/viewer.js"),
    ),
    (
        "clothcast.js",
        "text/javascript",
        include_str!("../../clients/web/clothcast.js"),
    ),
    (
        "worker-client.js",
        "text/javascript",
        include_str!("../../clients/web/worker-client.js"),
    ),
    (
        "decode-worker.js",
        "text/javascript",
        include_str!("../../clients/web/decode-worker.js"),
    ),
    (
        "decode-relay.js",
        "text/javascript",
        include_str!("../../clients/web/decode-relay.js"),
    ),
    (
        "codec.js",
        "text/javascript",
        include_str!("../../clients/web/codec.js"),
    ),
    (
        "msgpack.js",
        "text/javascript",
        include_str!("../../clients/web/msgpack.js"),
    ),
    // the page links the icon; browsers also ask for /favicon.ico regardless
    (
        "favicon.svg",
        "image/svg+xml",
        include_str!("../../clients/web/favicon.svg"),
    ),
    (
        "favicon.ico",
        "image/svg+xml",
        include_str!("../../clients/web/favicon.svg"),
    ),
];

/// A file of the web client built into this binary (what `/` serves), by name:
/// its MIME type and contents.
fn web_entry(file: &str) -> Option<(&'static str, &'static str)> {
    WEB_FILES
        .iter()
        .find(|(name, _, _)| *name == file)
        .map(|&(_, mime, body)| (mime, body))
}

/// The contents of a built-in web client file, by name.
pub(crate) fn web_file(file: &str) -> Option<&'static str> {
    web_entry(file).map(|(_, body)| body)
}

fn web(file: &str) -> axum::response::Response {
    match web_entry(file) {
        Some((mime, body)) => ([(axum::http::header::CONTENT_TYPE, mime)], body).into_response(),
        None => (axum::http::StatusCode::NOT_FOUND, "not found\n").into_response(),
    }
}
