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

use axum::routing::get;
use bytes::Bytes;
use tokio::sync::broadcast;

use crate::engine::{Engine, EngineError, TickOutput};
use crate::mocap::PositionRetargeter;
use crate::skeleton::Pose;
use crate::sor::Database;

mod bodies;
mod config;
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
mod web;
use conn::ws_upgrade;
use status::{healthz, metrics};
use udp::{UdpInput, listen_udp, mvn_loop, vmc_loop};
use watch::Watchers;
use web::web;
pub(crate) use web::web_file;

pub use crate::engine::MAX_TICK_SLOTS;
pub use config::{
    MAX_MESSAGE_BYTES, MAX_SEND_GROUPS, MAX_VIEWER_QUEUE, MIN_MESSAGE_BYTES, ServerConfig,
};
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
