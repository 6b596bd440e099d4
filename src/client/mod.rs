//! Rust client of the protocol (tokio-tungstenite): connect, say hello, publish poses,
//! subscribe, and decode each avatar's garment stream in place; notice a link that went
//! dead (while [`Client::next`] waits, or [`Client::keepalive`] between reads) and
//! reconnect with a [`Backoff`] unless the server's refusal is final
//! ([`ClientError::is_final`]). Used by `clothcast play`, `clothcast watch` and the
//! integration tests.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;

use crate::codec::{BoneTransform, CodecError, Decoder, GarmentSetup};
use crate::protocol::{
    ClientMessage, Escaped, FrameMessage, HelloMessage, PROTOCOL_VERSION, ProtocolError,
    ResyncMessage, Role, ServerMessage,
};

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Why a client operation failed. What the server said (its error replies, close
/// reasons, avatar ids, what did not parse) is shown [`Escaped`]: a server cannot send
/// escape sequences to the terminal of whoever runs `play` or `watch`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// Connection-level failure.
    #[error("websocket: {0}")]
    WebSocket(#[from] tokio_tungstenite::tungstenite::Error),
    /// The server sent something unreadable. (Not the error's source, so that an
    /// error report, which names each source too, shows only the escaped text.)
    #[error("{}", Escaped(.0))]
    Protocol(ProtocolError),
    /// The server refused us.
    #[error("server error {}: {}", Escaped(.code), Escaped(.message))]
    Refused {
        /// Error code.
        code: String,
        /// Explanation.
        message: String,
    },
    /// The connection closed without saying why.
    #[error("connection closed")]
    Closed,
    /// The server closed the connection with this close code and reason.
    #[error("closed by the server ({code}): {}", Escaped(.reason))]
    ClosedBy {
        /// WebSocket close code (RFC 6455; 4001: wrong token).
        code: u16,
        /// The server's reason.
        reason: String,
    },
    /// Nothing came from the server for this long, our pings included: the link is
    /// dead (the server's host or the network went away without closing).
    #[error("no word from the server for {0:.0?}")]
    Silent(Duration),
    /// A write did not complete in this long: the server stopped reading.
    #[error("a write stalled for {0:.0?}")]
    Stalled(Duration),
    /// A frame for an asset we never received, or a bad stream.
    #[error("stream: {}", Escaped(.0))]
    Stream(String),
    /// A frame of `avatar` its decoder refused (corrupt, or of another stream): the
    /// avatar's garment stays at its last decoded frame, and [`Viewer::resync`] asks
    /// the server for a keyframe. Not a reason to drop the link.
    #[error("avatar {}: frame refused: {error}", Escaped(.avatar))]
    Frame {
        /// The avatar.
        avatar: String,
        /// What the decoder said.
        error: CodecError,
    },
}

impl From<ProtocolError> for ClientError {
    fn from(e: ProtocolError) -> Self {
        Self::Protocol(e)
    }
}

/// Close codes after which reconnecting cannot help (the same as the web client's):
/// a wrong token (4001), a bad hello or protocol version (1002).
pub const FINAL_CLOSE_CODES: [u16; 2] = [4001, 1002];

impl ClientError {
    /// Whether trying again cannot help: the server refused our credentials or hello
    /// ([`FINAL_CLOSE_CODES`]), the URL is malformed, the server's TLS certificate is
    /// not trusted (`wss://`), the HTTP upgrade was refused with
    /// a client error (4xx: wrong path, say; not 408 or 429), or the server sent an
    /// `error` reply. Everything else (the server is down, restarting, full, the link
    /// broke or went silent) is worth another try.
    pub fn is_final(&self) -> bool {
        use tokio_tungstenite::tungstenite::Error as Ws;
        match self {
            Self::ClosedBy { code, .. } => FINAL_CLOSE_CODES.contains(code),
            Self::Refused { .. } | Self::Protocol(_) => true,
            // a URL it cannot use, a certificate it cannot trust (rustls reports that
            // as an I/O error of the handshake)
            Self::WebSocket(Ws::Url(_) | Ws::Tls(_)) => true,
            Self::WebSocket(Ws::Io(e)) => e
                .get_ref()
                .is_some_and(|inner| inner.is::<tokio_rustls::rustls::Error>()),
            Self::WebSocket(Ws::Http(r)) => {
                let s = r.status();
                s.is_client_error() && s.as_u16() != 408 && s.as_u16() != 429
            }
            _ => false,
        }
    }
}

/// How long to wait before each reconnection: `first`, then twice the previous wait,
/// at most `max`; [`Backoff::reset`] after a connection is welcomed. The default, 0.5 s
/// doubling to 10 s, is the web client's.
#[derive(Clone, Debug)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    /// Waits of `first` doubling to at most `max`.
    pub fn new(first: Duration, max: Duration) -> Self {
        Self {
            first,
            max,
            next: first.min(max),
        }
    }

    /// The wait before the next try (and doubles the one after).
    pub fn next_delay(&mut self) -> Duration {
        let d = self.next;
        self.next = self.next.saturating_mul(2).min(self.max);
        d
    }

    /// Starts again from the first wait.
    pub fn reset(&mut self) {
        self.next = self.first.min(self.max);
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new(Duration::from_millis(500), Duration::from_secs(10))
    }
}

/// How often [`Client::next`] checks, while it waits, whether the link needs a ping
/// or is dead.
const KEEPALIVE_CHECK: Duration = Duration::from_millis(500);

/// A connected client.
pub struct Client {
    ws: Socket,
    /// Tick rate the server announced, Hz.
    pub tick_hz: f32,
    /// The hashes of the assets the server announced it serves (its `welcome`; empty
    /// from older servers and for publishers).
    pub assets: Vec<String>,
    /// When anything (a message, a ping or pong) last came from the server.
    heard: Instant,
    /// When we last pinged.
    pinged: Instant,
    /// When the first of the pings not answered yet went out.
    unanswered: Option<Instant>,
    /// After this long without word from the server, [`Client::keepalive`] pings it
    /// (and again after each further `ping_after`).
    pub ping_after: Duration,
    /// A link whose first unanswered ping went out `dead_after − ping_after` ago is
    /// dead ([`ClientError::Silent`]): with `keepalive` called every second or so, that
    /// is about `dead_after` without word from the server.
    pub dead_after: Duration,
    /// A write that takes longer than this fails ([`ClientError::Stalled`]).
    pub write_timeout: Duration,
    /// Bytes of the last message [`Client::next`] returned, as it came over the
    /// WebSocket (its payload: MessagePack or JSON).
    last_size: usize,
}

impl Client {
    /// Connects to `url` (e.g. `ws://127.0.0.1:8470/ws`, or `wss://…` for a server
    /// behind TLS, its certificate checked against the system's roots, or against the
    /// PEM file named by the `SSL_CERT_FILE` environment variable instead), says hello
    /// and waits for the welcome.
    pub async fn connect(
        url: &str,
        role: Role,
        token: Option<String>,
    ) -> Result<Self, ClientError> {
        Self::connect_with(url, role, token, None).await
    }

    /// [`Client::connect`] naming the publisher's sensor (see the `hello` message's
    /// `sensor`: Kinect body frames then become avatars `kinect-<sensor>-<body id>`).
    pub async fn connect_with(
        url: &str,
        role: Role,
        token: Option<String>,
        sensor: Option<String>,
    ) -> Result<Self, ClientError> {
        // poses and frames are small and late is useless: no Nagle delay
        let (ws, _) = tokio_tungstenite::connect_async_with_config(url, None, true).await?;
        let now = Instant::now();
        let mut c = Self {
            ws,
            tick_hz: 0.0,
            heard: now,
            pinged: now,
            unanswered: None,
            last_size: 0,
            assets: Vec::new(),
            ping_after: Duration::from_secs(5),
            dead_after: Duration::from_secs(20),
            write_timeout: Duration::from_secs(20),
        };
        c.send(&ClientMessage::Hello(HelloMessage {
            version: PROTOCOL_VERSION,
            role,
            token,
            sensor,
        }))
        .await?;
        match c.next().await? {
            ServerMessage::Welcome {
                tick_hz, assets, ..
            } => {
                c.tick_hz = tick_hz;
                c.assets = assets;
                Ok(c)
            }
            ServerMessage::Error { code, message } => {
                // the server says why in an `error`, then closes with a code that tells
                // whether trying again can help: prefer that
                match tokio::time::timeout(Duration::from_secs(1), c.next()).await {
                    Ok(Err(e @ ClientError::ClosedBy { .. })) => Err(e),
                    _ => Err(ClientError::Refused { code, message }),
                }
            }
            other => Err(ClientError::Stream(format!(
                "expected welcome, got {other:?}"
            ))),
        }
    }

    /// [`Client::connect_with`], tried again after each of `backoff`'s waits while the
    /// failure is one that trying again can help ([`ClientError::is_final`]); `on_retry`
    /// is told each failure and the wait before the next try. Resets `backoff` once
    /// welcomed. Without a final error it tries for ever: bound it with a timeout.
    pub async fn connect_retrying(
        url: &str,
        role: Role,
        token: Option<String>,
        sensor: Option<String>,
        backoff: &mut Backoff,
        mut on_retry: impl FnMut(&ClientError, Duration),
    ) -> Result<Self, ClientError> {
        loop {
            match Self::connect_with(url, role, token.clone(), sensor.clone()).await {
                Ok(c) => {
                    backoff.reset();
                    return Ok(c);
                }
                Err(e) if e.is_final() => return Err(e),
                Err(e) => {
                    let wait = backoff.next_delay();
                    on_retry(&e, wait);
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    /// Says goodbye: sends a close frame (1000) and waits up to a second for the
    /// server's, so that the server sees a clean close rather than a broken link.
    pub async fn close(mut self) {
        if self.ws.close(None).await.is_ok() {
            let _ = tokio::time::timeout(Duration::from_secs(1), async {
                while let Some(Ok(_)) = self.ws.next().await {}
            })
            .await;
        }
    }

    /// Sends a message (MessagePack).
    pub async fn send(&mut self, m: &ClientMessage) -> Result<(), ClientError> {
        self.send_raw(Message::Binary(Bytes::from(m.to_msgpack()?)))
            .await
    }

    /// Sends one WebSocket message as it is (tests of hostile input use it for bytes
    /// no [`ClientMessage`] encodes to); fails with [`ClientError::Stalled`] after
    /// `write_timeout`.
    pub async fn send_raw(&mut self, m: Message) -> Result<(), ClientError> {
        match tokio::time::timeout(self.write_timeout, self.ws.send(m)).await {
            Ok(sent) => Ok(sent?),
            Err(_) => Err(ClientError::Stalled(self.write_timeout)),
        }
    }

    /// The next server message (pings and pongs skipped; they count as word from the
    /// server). While it waits it keeps the link alive as [`Client::keepalive`] does
    /// (checking every half second, or every `ping_after` if shorter), so a reader
    /// of a server that went silent without closing gets [`ClientError::Silent`]
    /// instead of waiting for ever. Cancel-safe: dropping the future before it
    /// completes loses no message.
    pub async fn next(&mut self) -> Result<ServerMessage, ClientError> {
        let check = KEEPALIVE_CHECK
            .min(self.ping_after)
            .max(Duration::from_millis(1));
        loop {
            let Ok(m) = tokio::time::timeout(check, self.ws.next()).await else {
                self.keepalive().await?;
                continue;
            };
            self.heard = Instant::now();
            self.unanswered = None;
            match m {
                None => return Err(ClientError::Closed),
                Some(Err(e)) => return Err(e.into()),
                Some(Ok(Message::Binary(b))) => {
                    self.last_size = b.len();
                    return Ok(ServerMessage::from_msgpack(&b)?);
                }
                Some(Ok(Message::Text(t))) => {
                    self.last_size = t.len();
                    return serde_json::from_str(t.as_str())
                        .map_err(|e| ClientError::Stream(e.to_string()));
                }
                Some(Ok(Message::Close(Some(f)))) => {
                    return Err(ClientError::ClosedBy {
                        code: u16::from(f.code),
                        reason: f.reason.to_string(),
                    });
                }
                Some(Ok(Message::Close(None))) => return Err(ClientError::Closed),
                Some(Ok(_)) => {}
            }
        }
    }

    /// The size in bytes of the message [`Client::next`] returned last, as it was sent
    /// (the WebSocket message's payload): what a frame costs on the wire, its envelope
    /// included, where [`AvatarView::bytes`] counts the codec frames alone.
    pub fn last_message_bytes(&self) -> usize {
        self.last_size
    }

    /// What [`Client::next`] does while it waits; call it every second or so when not
    /// reading with `next` for a while (the replies are read by `next`): pings the
    /// server after `ping_after` without word from
    /// it, and fails with [`ClientError::Silent`] once a ping has gone unanswered for
    /// `dead_after − ping_after`, which is how a client notices a server host or
    /// network that vanished without closing (TCP alone may take many minutes to
    /// tell). A server with nothing to say is not dead: it answers pings.
    pub async fn keepalive(&mut self) -> Result<(), ClientError> {
        let grace = self.dead_after.saturating_sub(self.ping_after);
        if self.unanswered.is_some_and(|t| t.elapsed() >= grace) {
            return Err(ClientError::Silent(self.heard.elapsed()));
        }
        if self.heard.elapsed() >= self.ping_after && self.pinged.elapsed() >= self.ping_after {
            let now = Instant::now();
            self.pinged = now;
            self.unanswered.get_or_insert(now);
            self.send_raw(Message::Ping(Bytes::new())).await?;
        }
        Ok(())
    }
}

/// Per-avatar decoded garment state of a viewer: the first garment it wears in the
/// struct's own fields, the garments of its outfit worn over that in `layers`.
pub struct AvatarView {
    /// Garment positions of the last decoded frame, canonical frame, metres.
    pub positions: Vec<f32>,
    /// The last frame message (pose, world transform, timestamps).
    pub last: Option<FrameMessage>,
    /// Frames decoded.
    pub frames: u64,
    /// Garment bytes received (every layer's).
    pub bytes: u64,
    /// Hash of the asset (garment) it wears.
    pub asset: String,
    /// The garments it wears over the first, inner to outer (empty for one garment).
    pub layers: Vec<LayerView>,
    decoder: Decoder,
}

/// One more garment of an avatar's outfit, decoded.
pub struct LayerView {
    /// Hash of the garment's asset.
    pub asset: String,
    /// Its positions in the last decoded frame, canonical frame, metres.
    pub positions: Vec<f32>,
    decoder: Decoder,
}

impl AvatarView {
    /// The assets it wears, inner to outer.
    pub fn assets(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.asset.as_str()).chain(self.layers.iter().map(|l| l.asset.as_str()))
    }

    /// The decoded positions of each garment it wears, inner to outer.
    pub fn garments(&self) -> impl Iterator<Item = &[f32]> {
        std::iter::once(self.positions.as_slice())
            .chain(self.layers.iter().map(|l| l.positions.as_slice()))
    }

    /// The skeleton's skinning transforms (rest → posed, canonical frame) of the last
    /// decoded frame, as its garment's codec frame carries them (see
    /// [`Decoder::bones`]): with the frame's `world`, what poses the body when the
    /// viewer subscribed without the body pose. `out` holds one per bone of the setup.
    pub fn bones(&self, out: &mut [BoneTransform]) -> Result<(), CodecError> {
        self.decoder.bones(out)
    }
}

/// How long a viewer waits for the keyframe it asked for ([`Viewer::resync`]) before
/// it asks again, while the avatar's frames stay undecodable: a server sends it within
/// a tick or two.
pub const RESYNC_AGAIN: Duration = Duration::from_secs(1);

/// A viewer's decoding side: assets by hash, one decoder per avatar and garment.
///
/// An avatar whose frame its decoder refused (a corrupt frame, or a delta whose
/// reference it lacks) is *out of step*: each delta after it is refused too, for want
/// of its reference, until a keyframe. [`Viewer::resync`] makes the `resync` message
/// that asks the server for one; send it after each [`Viewer::apply`].
#[derive(Default)]
pub struct Viewer {
    setups: HashMap<String, Arc<GarmentSetup>>,
    /// Garment name of each asset hash (empty when the server does not say).
    pub garments: HashMap<String, String>,
    /// Avatars by id.
    pub avatars: HashMap<String, AvatarView>,
    /// Out-of-step avatars: since when, and when a keyframe was last asked for.
    out_of_step: HashMap<String, (Instant, Option<Instant>)>,
    /// Assets frames named that it lacks (never sent, or refused): when they were
    /// last asked for.
    missing: HashMap<String, Option<Instant>>,
}

impl Viewer {
    /// The hashes of the assets it holds (at most [`crate::protocol::MAX_HAVE`]), for a
    /// `subscribe`'s `have` when it connects again: the server then does not send them.
    pub fn held_assets(&self) -> Vec<String> {
        self.setups
            .keys()
            .take(crate::protocol::MAX_HAVE)
            .cloned()
            .collect()
    }

    /// The garment setup of asset `hash` (its topology and skin), once its `asset`
    /// message has arrived.
    pub fn setup(&self, hash: &str) -> Option<&Arc<GarmentSetup>> {
        self.setups.get(hash)
    }

    /// Forgets every avatar's stream (and what was out of step): for a new
    /// connection, on which every stream starts again from a keyframe. The assets
    /// stay.
    pub fn restart(&mut self) {
        self.avatars.clear();
        self.out_of_step.clear();
        // (a new subscription brings every asset not held)
        self.missing.clear();
    }

    /// The assets frames have named that it lacks (their `asset` message never came,
    /// or was refused), which [`Viewer::resync`] asks for.
    pub fn missing_assets(&self) -> impl Iterator<Item = &str> {
        self.missing.keys().map(String::as_str)
    }

    /// Since when the frames of `avatar` cannot be decoded (a frame of its refused),
    /// or `None` while it is in step.
    pub fn out_of_step_since(&self, avatar: &str) -> Option<Instant> {
        self.out_of_step.get(avatar).map(|&(since, _)| since)
    }

    /// The `resync` message to send the server now, if an avatar is out of step, or
    /// an asset missing, that was not asked for in the last [`RESYNC_AGAIN`] (at most
    /// [`crate::protocol::MAX_HAVE`] avatars and as many assets a message, the rest in
    /// the next).
    pub fn resync(&mut self) -> Option<ClientMessage> {
        let now = Instant::now();
        let due = |asked: &mut Option<Instant>, n: usize| {
            let due = n < crate::protocol::MAX_HAVE
                && asked.is_none_or(|t| now.duration_since(t) >= RESYNC_AGAIN);
            if due {
                *asked = Some(now);
            }
            due
        };
        let mut avatars = Vec::new();
        for (id, (_, asked)) in &mut self.out_of_step {
            if due(asked, avatars.len()) {
                avatars.push(id.clone());
            }
        }
        let mut assets = Vec::new();
        for (hash, asked) in &mut self.missing {
            if due(asked, assets.len()) {
                assets.push(hash.clone());
            }
        }
        (!avatars.is_empty() || !assets.is_empty())
            .then_some(ClientMessage::Resync(ResyncMessage { avatars, assets }))
    }

    fn setup_of(&self, hash: &str) -> Result<&Arc<GarmentSetup>, ClientError> {
        self.setups
            .get(hash)
            .ok_or_else(|| ClientError::Stream(format!("frame for unknown asset {hash}")))
    }

    /// Applies a server message; returns the avatar id a frame was decoded for.
    /// A frame whose reference is missing is skipped (`Ok(None)`); one its decoder
    /// refuses otherwise is [`ClientError::Frame`]. Either leaves the avatar out of
    /// step until a keyframe ([`Viewer::resync`]).
    pub fn apply(&mut self, m: ServerMessage) -> Result<Option<String>, ClientError> {
        match m {
            ServerMessage::Asset(a) => {
                let setup = GarmentSetup::from_bytes(&a.setup)
                    .map_err(|e| ClientError::Stream(e.to_string()))?;
                self.garments.insert(a.hash.clone(), a.garment);
                self.missing.remove(&a.hash);
                self.setups.insert(a.hash, Arc::new(setup));
                Ok(None)
            }
            ServerMessage::Frame(f) => {
                // an asset it lacks: the avatar is out of step until the asset comes
                // (asked for by `resync`) and then a keyframe; said once an asset
                let lacking = std::iter::once(&f.asset)
                    .chain(f.layers.iter().map(|l| &l.asset))
                    .find(|h| !self.setups.contains_key(*h));
                if let Some(hash) = lacking {
                    self.out_of_step
                        .entry(f.avatar.clone())
                        .or_insert((Instant::now(), None));
                    if self.missing.contains_key(hash) {
                        return Ok(None);
                    }
                    self.missing.insert(hash.clone(), None);
                    return Err(ClientError::Stream(format!(
                        "frame of {} for unknown asset {hash} (asked for again)",
                        f.avatar
                    )));
                }
                let setup = Arc::clone(self.setup_of(&f.asset)?);
                let mut layers = Vec::with_capacity(f.layers.len());
                for l in &f.layers {
                    layers.push((l.asset.clone(), Arc::clone(self.setup_of(&l.asset)?)));
                }
                let fresh = || AvatarView {
                    positions: vec![0.0; 3 * setup.vertex_count()],
                    last: None,
                    frames: 0,
                    bytes: 0,
                    asset: f.asset.clone(),
                    layers: layers
                        .iter()
                        .map(|(asset, s)| LayerView {
                            asset: asset.clone(),
                            positions: vec![0.0; 3 * s.vertex_count()],
                            decoder: Decoder::new(Arc::clone(s)),
                        })
                        .collect(),
                    decoder: Decoder::new(Arc::clone(&setup)),
                };
                let view = self.avatars.entry(f.avatar.clone()).or_insert_with(fresh);
                if !view.assets().eq(f.assets()) {
                    // the avatar changed garments: new streams, starting with keyframes
                    *view = AvatarView {
                        frames: view.frames,
                        bytes: view.bytes,
                        ..fresh()
                    };
                }
                view.bytes += f.garment.len() as u64
                    + f.layers.iter().map(|l| l.garment.len() as u64).sum::<u64>();
                // every layer's frame has the same number and reference: if one lacks
                // its reference they all do, and the server sends keyframes
                let first = view.decoder.decode(&f.garment, &mut view.positions);
                let rest = first.and_then(|_| {
                    view.layers
                        .iter_mut()
                        .zip(&f.layers)
                        .try_for_each(|(v, l)| {
                            v.decoder.decode(&l.garment, &mut v.positions).map(drop)
                        })
                });
                match rest {
                    Ok(()) => {
                        view.frames += 1;
                        let id = f.avatar.clone();
                        view.last = Some(f);
                        self.out_of_step.remove(&id);
                        Ok(Some(id))
                    }
                    Err(error) => {
                        // a refused layer may follow decoded ones: every layer starts
                        // again from the keyframe asked for
                        self.out_of_step
                            .entry(f.avatar.clone())
                            .or_insert((Instant::now(), None));
                        match error {
                            CodecError::MissingReference { .. } => Ok(None),
                            error => Err(ClientError::Frame {
                                avatar: f.avatar,
                                error,
                            }),
                        }
                    }
                }
            }
            ServerMessage::Gone { avatar } => {
                self.out_of_step.remove(&avatar);
                self.avatars.remove(&avatar);
                Ok(None)
            }
            ServerMessage::Error { code, message } => Err(ClientError::Refused { code, message }),
            ServerMessage::Welcome { .. } | ServerMessage::Pong => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_tungstenite::tungstenite::{Error as Ws, http};

    #[test]
    fn backoff_doubles_to_its_cap_and_starts_again_after_a_reset() {
        let mut b = Backoff::default();
        let waits: Vec<f32> = (0..7).map(|_| b.next_delay().as_secs_f32()).collect();
        assert_eq!(waits, [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]);
        b.reset();
        assert_eq!(b.next_delay(), Duration::from_millis(500));
        // no overflow however long the waits
        let mut huge = Backoff::new(Duration::MAX / 2, Duration::MAX);
        assert_eq!(huge.next_delay(), Duration::MAX / 2);
        assert_eq!(huge.next_delay(), Duration::MAX - Duration::from_nanos(1));
        assert_eq!(huge.next_delay(), Duration::MAX);
    }

    fn http_refusal(status: u16) -> ClientError {
        let response = http::Response::builder()
            .status(status)
            .body(None)
            .expect("a valid response");
        ClientError::WebSocket(Ws::Http(Box::new(response)))
    }

    #[test]
    fn only_refusals_that_a_retry_cannot_change_are_final() {
        let closed = |code| ClientError::ClosedBy {
            code,
            reason: String::new(),
        };
        // a wrong token, a bad hello, a wrong path, a refused reply: final
        for e in [
            closed(4001),
            closed(1002),
            http_refusal(404),
            http_refusal(401),
            // wss:// to a server whose certificate is not trusted
            ClientError::WebSocket(Ws::Io(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                tokio_rustls::rustls::Error::InvalidCertificate(
                    tokio_rustls::rustls::CertificateError::UnknownIssuer,
                ),
            ))),
            ClientError::Refused {
                code: "bad_subscription".into(),
                message: String::new(),
            },
        ] {
            assert!(e.is_final(), "{e} should be final");
        }
        // a server going down, full, busy, or a link that broke or went quiet: retry
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        for e in [
            closed(1001),
            closed(1008),
            closed(1013),
            ClientError::Closed,
            ClientError::Silent(Duration::from_secs(20)),
            ClientError::Stalled(Duration::from_secs(20)),
            ClientError::WebSocket(Ws::Io(refused)),
            ClientError::WebSocket(Ws::ConnectionClosed),
            http_refusal(503),
            http_refusal(502),
            http_refusal(429),
        ] {
            assert!(!e.is_final(), "{e} should be worth a retry");
        }
    }
}
