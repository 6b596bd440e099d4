//! The server: HTTP + WebSocket (axum) in front of the engine's tick thread.
//!
//! Poses from publishers go into an inbox (latest per avatar wins); the tick thread
//! drains it, runs [`Engine::tick`] at a fixed rate and broadcasts each tick's
//! ready-made messages. Every viewer reads the broadcast through its own bounded window
//! ([`ServerConfig::viewer_queue`] ticks): a viewer that falls behind loses frames, is
//! resynchronised with keyframes, and never slows anyone else (the broadcast never
//! waits for a reader).

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::response::IntoResponse;
use axum::routing::get;
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use tokio::sync::broadcast;

use crate::engine::{
    Applied, Engine, EngineConfig, EngineError, InputState, TickOutput, apply_joints,
    apply_pose_message,
};
use crate::mocap::{PositionRetargeter, parse_body_frame};
use crate::protocol::{ClientMessage, PROTOCOL_VERSION, Role, ServerMessage};
use crate::skeleton::Pose;
use crate::sor::Database;

/// Server settings.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Address to listen on (`127.0.0.1:0` picks a free port).
    pub bind: SocketAddr,
    /// Engine settings (tick rate, timeouts, SOR parameters).
    pub engine: EngineConfig,
    /// Token publishers must present; `None` with `open = true` admits anyone.
    pub publisher_token: Option<String>,
    /// Token viewers must present.
    pub viewer_token: Option<String>,
    /// Admit connections without tokens. Must be set explicitly; the server logs a
    /// warning at start when it is.
    pub open: bool,
    /// Largest WebSocket message accepted, bytes.
    pub max_message_bytes: usize,
    /// Ticks a viewer may fall behind before it loses frames and is resynchronised.
    pub viewer_queue: usize,
    /// Kernel send buffer per connection, bytes: with `viewer_queue` it bounds what a
    /// slow viewer can have queued before it starts losing frames.
    pub send_buffer_bytes: usize,
    /// Seconds a new connection has to send `hello`.
    pub hello_timeout: f32,
    /// Messages per second one connection may send (averaged over one second, burst of
    /// the same size); a connection over it is closed with code 1008.
    pub max_messages_per_second: f32,
    /// Distinct avatars one publisher connection may drive.
    pub max_avatars_per_publisher: usize,
    /// Viewers connected at once; more are closed with code 1013 (try again later).
    pub max_viewers: usize,
    /// UDP address of the VMC (OSC) listener; `None` turns it off. UDP carries no token:
    /// anyone who can reach this address can drive avatars.
    pub vmc_bind: Option<SocketAddr>,
    /// Avatar id for VMC input; by default each UDP source is its own performer
    /// (`vmc-<address:port>`).
    pub vmc_avatar: Option<String>,
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
            open: false,
            max_message_bytes: 64 * 1024,
            viewer_queue: 8,
            send_buffer_bytes: 256 * 1024,
            hello_timeout: 5.0,
            max_messages_per_second: 2000.0,
            max_avatars_per_publisher: 64,
            max_viewers: 256,
            vmc_bind: Some(SocketAddr::from(([127, 0, 0, 1], 39539))),
            vmc_avatar: None,
            databases: Vec::new(),
        }
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NetError {
    /// Binding or serving failed.
    #[error("network: {0}")]
    Io(#[from] std::io::Error),
    /// The engine refused the database.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// Neither tokens nor `open = true`.
    #[error("no publisher/viewer tokens configured; set tokens or `open = true` explicitly")]
    NoAuth,
}

#[derive(Default)]
struct Inbox {
    poses: HashMap<String, (Pose, f64, f64)>,
    keyframes: HashSet<String>,
    /// Garment choices (avatar → garment name, validated), kept until the avatar exists.
    wear: HashMap<String, String>,
}

/// Counters exported at `/metrics`.
#[derive(Default)]
struct Metrics {
    ticks: AtomicU64,
    late_ticks: AtomicU64,
    tick_micros_last: AtomicU64,
    tick_micros_max: AtomicU64,
    avatars: AtomicU64,
    viewers: AtomicU64,
    publishers: AtomicU64,
    poses_in: AtomicU64,
    bytes_out: AtomicU64,
    frames_out: AtomicU64,
    frames_dropped: AtomicU64,
    bad_messages: AtomicU64,
}

struct Shared {
    config: ServerConfig,
    inbox: Mutex<Inbox>,
    frames: broadcast::Sender<Arc<TickOutput>>,
    /// The `asset` messages, one per garment.
    assets: Vec<Bytes>,
    /// Garment names, default first.
    garments: Vec<String>,
    metrics: Metrics,
    start: Instant,
    /// Set on shutdown: every connection closes with 1001 and a reason.
    closing: tokio::sync::watch::Sender<bool>,
    /// Position sources (Kinect) → canonical poses, for the database's skeleton.
    retargeter: PositionRetargeter,
    /// Calibrations asked for avatars another connection publishes; the owning
    /// connection applies them on the avatar's next pose.
    calibrate: Mutex<HashSet<String>>,
}

/// A running server.
pub struct ServerHandle {
    /// The bound address.
    pub addr: SocketAddr,
    /// The VMC listener's address, when it runs.
    pub vmc_addr: Option<SocketAddr>,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    tick: Option<std::thread::JoinHandle<()>>,
    serve: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl ServerHandle {
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
    if !config.open && (config.publisher_token.is_none() || config.viewer_token.is_none()) {
        return Err(NetError::NoAuth);
    }
    if config.open {
        tracing::warn!("authentication is off (open = true): anyone can publish and view");
    }
    let engine = Engine::with_garments(dbs, config.engine.clone())?;
    let db = Arc::clone(engine.database());
    let (tx, _) = broadcast::channel(config.viewer_queue.max(1));
    let shared = Arc::new(Shared {
        assets: engine.assets(),
        garments: engine.garment_names(),
        config: config.clone(),
        inbox: Mutex::new(Inbox::default()),
        frames: tx,
        metrics: Metrics::default(),
        start: Instant::now(),
        closing: tokio::sync::watch::channel(false).0,
        calibrate: Mutex::new(HashSet::new()),
        retargeter: PositionRetargeter::new(&crate::skeleton::Skeleton::from_rest_positions(
            db.body.skeleton,
        )),
    });
    let stop = Arc::new(AtomicBool::new(false));
    let tick = {
        let (shared, stop) = (Arc::clone(&shared), Arc::clone(&stop));
        std::thread::Builder::new()
            .name("clothcast-tick".into())
            .spawn(move || tick_loop(engine, shared, stop))?
    };
    let listener = tokio::net::TcpListener::bind(config.bind).await?;
    let addr = listener.local_addr()?;
    let send_buffer = config.send_buffer_bytes.max(4096);
    let listener =
        axum::serve::ListenerExt::tap_io(listener, move |tcp: &mut tokio::net::TcpStream| {
            if let Err(e) = socket2::SockRef::from(&*tcp).set_send_buffer_size(send_buffer) {
                tracing::debug!(error = %e, "could not set the send buffer size");
            }
        });
    let app = axum::Router::new()
        .route("/ws", get(ws_upgrade))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/metrics", get(metrics))
        .route("/", get(|| async { web("index.html") }))
        .route(
            "/{file}",
            get(|axum::extract::Path(file): axum::extract::Path<String>| async move { web(&file) }),
        )
        .with_state(Arc::clone(&shared));
    let (shutdown_tx, shutdown_rx) = tokio::sync::oneshot::channel::<()>();
    let serve = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = shutdown_rx.await;
            })
            .await
    });
    let vmc_addr = match config.vmc_bind {
        Some(b) => match tokio::net::UdpSocket::bind(b).await {
            Ok(sock) => {
                let a = sock.local_addr()?;
                tokio::spawn(vmc_loop(sock, Arc::clone(&shared)));
                tracing::info!(addr = %a, "VMC (OSC/UDP) listener");
                Some(a)
            }
            Err(e) => {
                tracing::error!(addr = %b, error = %e, "VMC listener not started");
                None
            }
        },
        None => None,
    };
    tracing::info!(%addr, tick_hz = config.engine.tick_hz, "serving");
    Ok(ServerHandle {
        addr,
        vmc_addr,
        shared,
        stop,
        shutdown: Some(shutdown_tx),
        tick: Some(tick),
        serve: Some(serve),
    })
}

/// VMC over UDP: one performer per source address (or one configured avatar); poses go
/// into the same inbox as WebSocket publishers'. A `calibrate` message for a VMC avatar
/// (from any publisher connection) captures its next pose as rest pose and facing.
async fn vmc_loop(sock: tokio::net::UdpSocket, s: Arc<Shared>) {
    let m = &s.metrics;
    let mut performers: HashMap<SocketAddr, (crate::mocap::VmcPerformer, InputState)> =
        HashMap::new();
    let mut buf = vec![0u8; 65536];
    let mut closing = s.closing.subscribe();
    loop {
        tokio::select! {
            _ = closing.changed() => break,
            r = sock.recv_from(&mut buf) => {
                let Ok((n, from)) = r else { continue };
                if !performers.contains_key(&from) && performers.len() >= s.config.engine.max_avatars {
                    m.bad_messages.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                let (p, state) = performers.entry(from).or_default();
                match p.feed(&buf[..n]) {
                    Ok(0) => {}
                    Ok(_) => {
                        m.poses_in.fetch_add(1, Ordering::Relaxed);
                        let avatar = s.config.vmc_avatar.clone().unwrap_or_else(|| format!("vmc-{from}"));
                        state.pose = p.pose;
                        if s.calibrate.lock().is_ok_and(|mut c| c.remove(&avatar)) {
                            state.calibrate();
                            tracing::info!(%avatar, "VMC performer calibrated");
                        }
                        let pose = state.calibrated(&p.pose);
                        let now = s.start.elapsed().as_secs_f64();
                        if let Ok(mut inbox) = s.inbox.lock() {
                            inbox.poses.insert(avatar, (pose, p.time.unwrap_or(now), now));
                        }
                    }
                    Err(e) => {
                        m.bad_messages.fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(%from, error = %e, "VMC packet refused");
                    }
                }
            }
        }
    }
}

fn tick_loop(mut engine: Engine, shared: Arc<Shared>, stop: Arc<AtomicBool>) {
    let dbs = engine.databases();
    let synths: Vec<_> = dbs
        .iter()
        .map(|db| Engine::synthesizer(db, engine.config()))
        .collect();
    let period =
        Duration::from_secs_f64(1.0 / f64::from(engine.config().tick_hz.clamp(1.0, 240.0)));
    let mut next = Instant::now();
    let m = &shared.metrics;
    while !stop.load(Ordering::SeqCst) {
        next += period;
        let now_i = Instant::now();
        if next > now_i {
            std::thread::sleep(next - now_i);
        } else {
            m.late_ticks.fetch_add(1, Ordering::Relaxed);
            next = now_i;
        }
        let now = shared.start.elapsed().as_secs_f64();
        let (poses, keys, mut wear) = match shared.inbox.lock() {
            Ok(mut inbox) => (
                std::mem::take(&mut inbox.poses),
                std::mem::take(&mut inbox.keyframes),
                std::mem::take(&mut inbox.wear),
            ),
            Err(_) => break,
        };
        for (avatar, (pose, ts, received)) in poses {
            if let Err(e) = engine.set_pose(&avatar, pose, ts, received) {
                tracing::warn!(%avatar, error = %e, "pose refused");
            }
        }
        // garment choices for avatars that do not exist yet wait for their first pose
        wear.retain(|avatar, garment| {
            if engine.has_avatar(avatar) {
                if let Err(e) = engine.wear(avatar, garment) {
                    tracing::warn!(%avatar, error = %e, "wear refused");
                }
                false
            } else {
                true
            }
        });
        if !wear.is_empty()
            && let Ok(mut inbox) = shared.inbox.lock()
        {
            for (avatar, garment) in wear {
                inbox.wear.entry(avatar).or_insert(garment);
            }
        }
        for avatar in keys {
            engine.request_keyframe(&avatar);
        }
        let t0 = Instant::now();
        match engine.tick(&synths, now) {
            Ok(out) => {
                let us = t0.elapsed().as_micros() as u64;
                m.ticks.fetch_add(1, Ordering::Relaxed);
                m.tick_micros_last.store(us, Ordering::Relaxed);
                m.tick_micros_max.fetch_max(us, Ordering::Relaxed);
                m.avatars
                    .store(engine.avatar_count() as u64, Ordering::Relaxed);
                let _ = shared.frames.send(Arc::new(out));
            }
            Err(e) => tracing::error!(error = %e, "tick failed"),
        }
    }
}

/// The browser viewer (clients/web), built into the binary so `serve` and `demo` need
/// no files at run time.
const WEB_FILES: [(&str, &str, &str); 5] = [
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
        "codec.js",
        "text/javascript",
        include_str!("../../clients/web/codec.js"),
    ),
    (
        "msgpack.js",
        "text/javascript",
        include_str!("../../clients/web/msgpack.js"),
    ),
];

fn web(file: &str) -> axum::response::Response {
    match WEB_FILES.iter().find(|(name, _, _)| *name == file) {
        Some((_, mime, body)) => {
            ([(axum::http::header::CONTENT_TYPE, *mime)], *body).into_response()
        }
        None => (axum::http::StatusCode::NOT_FOUND, "not found\n").into_response(),
    }
}

async fn metrics(State(s): State<Arc<Shared>>) -> impl IntoResponse {
    let m = &s.metrics;
    let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let text = format!(
        "# TYPE clothcast_ticks_total counter\nclothcast_ticks_total {}\n\
         # TYPE clothcast_late_ticks_total counter\nclothcast_late_ticks_total {}\n\
         # TYPE clothcast_tick_seconds gauge\nclothcast_tick_seconds {}\n\
         # TYPE clothcast_tick_seconds_max gauge\nclothcast_tick_seconds_max {}\n\
         # TYPE clothcast_avatars gauge\nclothcast_avatars {}\n\
         # TYPE clothcast_viewers gauge\nclothcast_viewers {}\n\
         # TYPE clothcast_publishers gauge\nclothcast_publishers {}\n\
         # TYPE clothcast_poses_in_total counter\nclothcast_poses_in_total {}\n\
         # TYPE clothcast_bytes_out_total counter\nclothcast_bytes_out_total {}\n\
         # TYPE clothcast_frames_out_total counter\nclothcast_frames_out_total {}\n\
         # TYPE clothcast_frames_dropped_total counter\nclothcast_frames_dropped_total {}\n\
         # TYPE clothcast_bad_messages_total counter\nclothcast_bad_messages_total {}\n",
        g(&m.ticks),
        g(&m.late_ticks),
        g(&m.tick_micros_last) as f64 * 1e-6,
        g(&m.tick_micros_max) as f64 * 1e-6,
        g(&m.avatars),
        g(&m.viewers),
        g(&m.publishers),
        g(&m.poses_in),
        g(&m.bytes_out),
        g(&m.frames_out),
        g(&m.frames_dropped),
        g(&m.bad_messages),
    );
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        text,
    )
}

async fn ws_upgrade(ws: WebSocketUpgrade, State(s): State<Arc<Shared>>) -> impl IntoResponse {
    let limit = s.config.max_message_bytes;
    ws.max_message_size(limit)
        .max_frame_size(limit)
        .on_upgrade(move |socket| connection(socket, s))
}

/// Close codes (RFC 6455 application range).
mod close {
    pub(super) const PROTOCOL: u16 = 1002;
    pub(super) const POLICY: u16 = 1008;
    pub(super) const TOO_BIG: u16 = 1009;
    pub(super) const UNAUTHORIZED: u16 = 4001;
    pub(super) const TRY_LATER: u16 = 1013;
}

fn parse(msg: &Message) -> Option<Result<ClientMessage, String>> {
    match msg {
        Message::Binary(b) => Some(ClientMessage::from_msgpack(b).map_err(|e| e.to_string())),
        Message::Text(t) => Some(ClientMessage::from_json(t.as_str()).map_err(|e| e.to_string())),
        _ => None,
    }
}

async fn send(
    socket: &mut futures_util::stream::SplitSink<WebSocket, Message>,
    m: &ServerMessage,
) -> bool {
    socket
        .send(Message::Binary(Bytes::from(m.to_msgpack())))
        .await
        .is_ok()
}

async fn close_with(
    mut sink: futures_util::stream::SplitSink<WebSocket, Message>,
    code: u16,
    reason: &str,
) {
    let _ = send(&mut sink, &ServerMessage::error("closed", reason)).await;
    let _ = sink
        .send(Message::Close(Some(CloseFrame {
            code,
            reason: reason.into(),
        })))
        .await;
}

async fn connection(socket: WebSocket, s: Arc<Shared>) {
    let (mut sink, mut stream) = socket.split();
    let m = &s.metrics;
    // hello first
    let hello = tokio::time::timeout(
        Duration::from_secs_f32(s.config.hello_timeout.max(0.1)),
        stream.next(),
    )
    .await;
    let role = match hello {
        Ok(Some(Ok(msg))) => match parse(&msg) {
            Some(Ok(ClientMessage::Hello {
                version,
                role,
                token,
            })) => {
                if version != PROTOCOL_VERSION {
                    return close_with(sink, close::PROTOCOL, &format!("protocol version {version} not supported (server speaks {PROTOCOL_VERSION})")).await;
                }
                let need = |t: &Option<String>| {
                    s.config.open || (t.is_some() && token.as_ref() == t.as_ref())
                };
                let ok = match role {
                    Role::Publisher => need(&s.config.publisher_token),
                    Role::Viewer => need(&s.config.viewer_token),
                    Role::Both => need(&s.config.publisher_token) && need(&s.config.viewer_token),
                };
                if !ok {
                    return close_with(sink, close::UNAUTHORIZED, "wrong or missing token").await;
                }
                role
            }
            Some(Ok(_)) => {
                return close_with(sink, close::PROTOCOL, "the first message must be hello").await;
            }
            Some(Err(e)) => {
                m.bad_messages.fetch_add(1, Ordering::Relaxed);
                return close_with(sink, close::PROTOCOL, &format!("bad hello: {e}")).await;
            }
            None => {
                return close_with(sink, close::PROTOCOL, "the first message must be hello").await;
            }
        },
        Ok(Some(Err(e))) => {
            let reason = e.to_string();
            let code = if reason.contains("too long") || reason.contains("size") {
                close::TOO_BIG
            } else {
                close::PROTOCOL
            };
            return close_with(sink, code, &reason).await;
        }
        Ok(None) => return,
        Err(_) => return close_with(sink, close::POLICY, "no hello in time").await,
    };
    let publisher = matches!(role, Role::Publisher | Role::Both);
    let viewer = matches!(role, Role::Viewer | Role::Both);
    let counter = if viewer { &m.viewers } else { &m.publishers };
    if viewer && counter.fetch_add(1, Ordering::Relaxed) as usize >= s.config.max_viewers {
        counter.fetch_sub(1, Ordering::Relaxed);
        return close_with(sink, close::TRY_LATER, "viewer limit reached").await;
    } else if !viewer {
        counter.fetch_add(1, Ordering::Relaxed);
    }
    if !send(
        &mut sink,
        &ServerMessage::Welcome {
            version: PROTOCOL_VERSION,
            tick_hz: s.config.engine.tick_hz,
        },
    )
    .await
    {
        counter.fetch_sub(1, Ordering::Relaxed);
        return;
    }
    // token bucket of the message rate limit
    let rate = f64::from(s.config.max_messages_per_second.max(1.0));
    let mut tokens = rate;
    let mut refilled = Instant::now();
    let mut closing = s.closing.subscribe();
    let mut rx: Option<broadcast::Receiver<Arc<TickOutput>>> = None;
    let mut subscription: Option<HashSet<String>> = None;
    let mut synced: HashSet<String> = HashSet::new();
    let mut inputs: HashMap<String, InputState> = HashMap::new();
    loop {
        tokio::select! {
            _ = closing.changed() => {
                close_with(sink, 1001, "server shutting down").await;
                break;
            }
            incoming = stream.next() => {
                let msg = match incoming {
                    Some(Ok(msg)) => msg,
                    Some(Err(e)) => {
                        let reason = e.to_string();
                        let code = if reason.contains("too long") || reason.contains("size") { close::TOO_BIG } else { close::PROTOCOL };
                        close_with(sink, code, &reason).await;
                        break;
                    }
                    None => break,
                };
                if matches!(msg, Message::Close(_)) {
                    break;
                }
                tokens = (tokens + refilled.elapsed().as_secs_f64() * rate).min(rate);
                refilled = Instant::now();
                tokens -= 1.0;
                if tokens < 0.0 {
                    m.bad_messages.fetch_add(1, Ordering::Relaxed);
                    close_with(sink, close::POLICY, "message rate limit exceeded").await;
                    break;
                }
                // Kinect bridges' body frames: {"bodies": [...]} as JSON text, no `type`
                if let Message::Text(t) = &msg
                    && publisher
                    && !t.contains("\"type\"")
                    && t.contains("\"bodies\"")
                {
                    let frame = serde_json::from_str::<serde_json::Value>(t.as_str()).map_err(|e| e.to_string()).and_then(|v| parse_body_frame(&v, None).map_err(|e| e.to_string()));
                    match frame {
                        Ok(bodies) => {
                            let now = s.start.elapsed().as_secs_f64();
                            for b in bodies {
                                let avatar = format!("kinect-{}", b.id);
                                if !inputs.contains_key(&avatar) && inputs.len() >= s.config.max_avatars_per_publisher {
                                    continue;
                                }
                                let mut state = inputs.get(&avatar).cloned().unwrap_or_default();
                                if let Ok(pose) = apply_joints(&b.joints, &mut state, &s.retargeter, s.config.engine.filter.as_ref(), now) {
                                    m.poses_in.fetch_add(1, Ordering::Relaxed);
                                    if let Ok(mut inbox) = s.inbox.lock() {
                                        inbox.poses.insert(avatar.clone(), (pose, now, now));
                                    }
                                    inputs.insert(avatar, state);
                                }
                            }
                        }
                        Err(e) => {
                            m.bad_messages.fetch_add(1, Ordering::Relaxed);
                            if !send(&mut sink, &ServerMessage::error("bad_body_frame", e)).await { break; }
                        }
                    }
                    continue;
                }
                match parse(&msg) {
                    None => {}
                    Some(Err(e)) => {
                        m.bad_messages.fetch_add(1, Ordering::Relaxed);
                        if !send(&mut sink, &ServerMessage::error("bad_message", e)).await { break; }
                    }
                    Some(Ok(ClientMessage::Pose(p))) if publisher => {
                        if !inputs.contains_key(&p.avatar) && inputs.len() >= s.config.max_avatars_per_publisher {
                            m.bad_messages.fetch_add(1, Ordering::Relaxed);
                            if !send(&mut sink, &ServerMessage::error("too_many_avatars", format!("a publisher may drive {} avatars", s.config.max_avatars_per_publisher))).await { break; }
                            continue;
                        }
                        let mut state = inputs.get(&p.avatar).cloned().unwrap_or_default();
                        match apply_pose_message(&p, &mut state, &s.retargeter, s.config.engine.filter.as_ref()) {
                            Ok(Applied { mut pose, held }) => {
                                if !held.is_empty() {
                                    m.bad_messages.fetch_add(1, Ordering::Relaxed);
                                    let what = format!("held at their last values (NaN, infinite, out of range or not a rotation): {}", held.join(", "));
                                    if !send(&mut sink, &ServerMessage::error("joints_held", what)).await { break; }
                                }
                                if s.calibrate.lock().is_ok_and(|mut c| c.remove(&p.avatar)) {
                                    state.calibrate();
                                    pose = state.calibrated(&state.pose);
                                }
                                m.poses_in.fetch_add(1, Ordering::Relaxed);
                                let now = s.start.elapsed().as_secs_f64();
                                if let Ok(mut inbox) = s.inbox.lock() {
                                    inbox.poses.insert(p.avatar.clone(), (pose, p.timestamp, now));
                                }
                                inputs.insert(p.avatar, state);
                            }
                            Err(e) => {
                                m.bad_messages.fetch_add(1, Ordering::Relaxed);
                                if !send(&mut sink, &ServerMessage::error("bad_pose", e.to_string())).await { break; }
                            }
                        }
                    }
                    Some(Ok(ClientMessage::Calibrate { avatar })) if publisher => {
                        match inputs.get_mut(&avatar) {
                            Some(state) => state.calibrate(),
                            None if avatar.chars().count() <= 64 => {
                                // published elsewhere: its connection applies it next pose
                                if let Ok(mut c) = s.calibrate.lock() && c.len() < 1024 { c.insert(avatar); }
                            }
                            None => {
                                m.bad_messages.fetch_add(1, Ordering::Relaxed);
                                if !send(&mut sink, &ServerMessage::error("bad_message", "avatar id too long")).await { break; }
                            }
                        }
                    }
                    Some(Ok(ClientMessage::Wear { avatar, garment })) if publisher => {
                        if !s.garments.contains(&garment) {
                            m.bad_messages.fetch_add(1, Ordering::Relaxed);
                            let what = format!("unknown garment {garment:?} (this server streams: {})", s.garments.join(", "));
                            if !send(&mut sink, &ServerMessage::error("unknown_garment", what)).await { break; }
                        } else if avatar.is_empty() || avatar.chars().count() > 64 {
                            m.bad_messages.fetch_add(1, Ordering::Relaxed);
                            if !send(&mut sink, &ServerMessage::error("bad_message", "avatar id must be 1–64 characters")).await { break; }
                        } else if let Ok(mut inbox) = s.inbox.lock() && (inbox.wear.len() < 4096 || inbox.wear.contains_key(&avatar)) {
                            inbox.wear.insert(avatar, garment);
                        }
                    }
                    Some(Ok(ClientMessage::Subscribe { avatars })) if viewer => {
                        if rx.is_none() {
                            let mut ok = true;
                            for asset in &s.assets {
                                if sink.send(Message::Binary(asset.clone())).await.is_err() { ok = false; break; }
                            }
                            if !ok { break; }
                            rx = Some(s.frames.subscribe());
                        }
                        subscription = avatars.map(|a| a.into_iter().collect());
                        synced.clear();
                    }
                    Some(Ok(other)) => {
                        m.bad_messages.fetch_add(1, Ordering::Relaxed);
                        let what = match other { ClientMessage::Hello { .. } => "hello sent twice", ClientMessage::Pose(_) | ClientMessage::Calibrate { .. } | ClientMessage::Wear { .. } => "pose, calibrate or wear from a viewer-only connection", ClientMessage::Subscribe { .. } => "subscribe from a publisher-only connection" };
                        if !send(&mut sink, &ServerMessage::error("unexpected", what)).await { break; }
                    }
                }
            }
            tick = async { match rx.as_mut() { Some(r) => r.recv().await, None => std::future::pending().await } } => {
                match tick {
                    Ok(out) => {
                        let wanted = |a: &str| subscription.as_ref().is_none_or(|set| set.contains(a));
                        let mut failed = false;
                        for f in out.frames.iter().filter(|f| wanted(&f.avatar)) {
                            // in step: the delta, unless the stream (re)starts with a
                            // keyframe (first frame, or the avatar changed garment)
                            let bytes = if synced.contains(&f.avatar) && f.delta.is_some() {
                                f.delta.clone()
                            } else if let Some(k) = &f.key {
                                synced.insert(f.avatar.clone());
                                Some(k.clone())
                            } else {
                                if let Ok(mut inbox) = s.inbox.lock() { inbox.keyframes.insert(f.avatar.clone()); }
                                None
                            };
                            if let Some(b) = bytes {
                                m.bytes_out.fetch_add(b.len() as u64, Ordering::Relaxed);
                                m.frames_out.fetch_add(1, Ordering::Relaxed);
                                if sink.send(Message::Binary(b)).await.is_err() { failed = true; break; }
                            }
                        }
                        for g in &out.gone {
                            synced.remove(g);
                            if wanted(g) && !send(&mut sink, &ServerMessage::Gone { avatar: g.clone() }).await { failed = true; }
                        }
                        if failed { break; }
                    }
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        // fell behind: the missed deltas are gone; resync every avatar
                        m.frames_dropped.fetch_add(n, Ordering::Relaxed);
                        synced.clear();
                    }
                    Err(broadcast::error::RecvError::Closed) => {
                        close_with(sink, 1001, "server shutting down").await;
                        break;
                    }
                }
            }
        }
    }
    counter.fetch_sub(1, Ordering::Relaxed);
}
