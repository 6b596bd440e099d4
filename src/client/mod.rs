//! Rust client of the protocol (tokio-tungstenite): connect, say hello, publish poses,
//! subscribe, and decode each avatar's garment stream in place. Used by `clothcast
//! play`, `clothcast watch` and the integration tests.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;

use crate::codec::{CodecError, Decoder, GarmentSetup};
use crate::protocol::{
    ClientMessage, FrameMessage, PROTOCOL_VERSION, ProtocolError, Role, ServerMessage,
};

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Why a client operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// Connection-level failure.
    #[error("websocket: {0}")]
    WebSocket(#[from] tokio_tungstenite::tungstenite::Error),
    /// The server sent something unreadable.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// The server refused us.
    #[error("server error {code}: {message}")]
    Refused {
        /// Error code.
        code: String,
        /// Explanation.
        message: String,
    },
    /// The connection closed.
    #[error("connection closed")]
    Closed,
    /// A frame for an asset we never received, or a bad stream.
    #[error("stream: {0}")]
    Stream(String),
}

/// A connected client.
pub struct Client {
    ws: Socket,
    /// Tick rate the server announced, Hz.
    pub tick_hz: f32,
}

impl Client {
    /// Connects to `url` (e.g. `ws://127.0.0.1:8470/ws`), says hello and waits for the
    /// welcome.
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
        let mut c = Self { ws, tick_hz: 0.0 };
        c.send(&ClientMessage::Hello {
            version: PROTOCOL_VERSION,
            role,
            token,
            sensor,
        })
        .await?;
        match c.next().await? {
            ServerMessage::Welcome { tick_hz, .. } => {
                c.tick_hz = tick_hz;
                Ok(c)
            }
            ServerMessage::Error { code, message } => Err(ClientError::Refused { code, message }),
            other => Err(ClientError::Stream(format!(
                "expected welcome, got {other:?}"
            ))),
        }
    }

    /// Sends a message (MessagePack).
    pub async fn send(&mut self, m: &ClientMessage) -> Result<(), ClientError> {
        self.ws
            .send(Message::Binary(Bytes::from(m.to_msgpack()?)))
            .await?;
        Ok(())
    }

    /// Sends raw bytes (tests of hostile input).
    pub async fn send_raw(&mut self, m: Message) -> Result<(), ClientError> {
        self.ws.send(m).await?;
        Ok(())
    }

    /// The next server message (pings and pongs skipped).
    pub async fn next(&mut self) -> Result<ServerMessage, ClientError> {
        loop {
            match self.ws.next().await {
                None => return Err(ClientError::Closed),
                Some(Err(e)) => return Err(e.into()),
                Some(Ok(Message::Binary(b))) => return Ok(ServerMessage::from_msgpack(&b)?),
                Some(Ok(Message::Text(t))) => {
                    return serde_json::from_str(t.as_str())
                        .map_err(|e| ClientError::Stream(e.to_string()));
                }
                Some(Ok(Message::Close(_))) => return Err(ClientError::Closed),
                Some(Ok(_)) => {}
            }
        }
    }
}

/// Per-avatar decoded garment state of a viewer.
pub struct AvatarView {
    /// Garment positions of the last decoded frame, canonical frame, metres.
    pub positions: Vec<f32>,
    /// The last frame message (pose, world transform, timestamps).
    pub last: Option<FrameMessage>,
    /// Frames decoded.
    pub frames: u64,
    /// Garment bytes received.
    pub bytes: u64,
    /// Hash of the asset (garment) it wears.
    pub asset: String,
    decoder: Decoder,
}

/// A viewer's decoding side: assets by hash, one decoder per avatar.
#[derive(Default)]
pub struct Viewer {
    setups: HashMap<String, Arc<GarmentSetup>>,
    /// Garment name of each asset hash (empty when the server does not say).
    pub garments: HashMap<String, String>,
    /// Avatars by id.
    pub avatars: HashMap<String, AvatarView>,
}

impl Viewer {
    /// Applies a server message; returns the avatar id a frame was decoded for.
    /// A frame whose reference is missing is skipped (the server sends a keyframe).
    pub fn apply(&mut self, m: ServerMessage) -> Result<Option<String>, ClientError> {
        match m {
            ServerMessage::Asset(a) => {
                let setup = GarmentSetup::from_bytes(&a.setup)
                    .map_err(|e| ClientError::Stream(e.to_string()))?;
                self.garments.insert(a.hash.clone(), a.garment);
                self.setups.insert(a.hash, Arc::new(setup));
                Ok(None)
            }
            ServerMessage::Frame(f) => {
                let setup = self.setups.get(&f.asset).ok_or_else(|| {
                    ClientError::Stream(format!("frame for unknown asset {}", f.asset))
                })?;
                let fresh = || AvatarView {
                    positions: vec![0.0; 3 * setup.vertex_count()],
                    last: None,
                    frames: 0,
                    bytes: 0,
                    asset: f.asset.clone(),
                    decoder: Decoder::new(Arc::clone(setup)),
                };
                let view = self.avatars.entry(f.avatar.clone()).or_insert_with(fresh);
                if view.asset != f.asset {
                    // the avatar changed garment: a new stream, starting with a keyframe
                    *view = AvatarView {
                        frames: view.frames,
                        bytes: view.bytes,
                        ..fresh()
                    };
                }
                view.bytes += f.garment.len() as u64;
                match view.decoder.decode(&f.garment, &mut view.positions) {
                    Ok(_) => {
                        view.frames += 1;
                        let id = f.avatar.clone();
                        view.last = Some(f);
                        Ok(Some(id))
                    }
                    Err(CodecError::MissingReference { .. }) => Ok(None),
                    Err(e) => Err(ClientError::Stream(e.to_string())),
                }
            }
            ServerMessage::Gone { avatar } => {
                self.avatars.remove(&avatar);
                Ok(None)
            }
            ServerMessage::Error { code, message } => Err(ClientError::Refused { code, message }),
            ServerMessage::Welcome { .. } => Ok(None),
        }
    }
}
