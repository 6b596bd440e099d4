//! The writing half of a viewer's or publisher's connection ([`Out`]): every write
//! bounded by the peer timeout and counted as stalled while it waits, our replies
//! encoded as the peer speaks (JSON or MessagePack), refusals logged, and closing with a
//! code and a reason.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use bytes::Bytes;
use futures_util::SinkExt;

use super::Shared;
use super::peer::Peer;
use crate::protocol::ServerMessage;

/// Close codes (RFC 6455 application range).
pub(super) mod close {
    pub(in crate::net) const PROTOCOL: u16 = 1002;
    pub(in crate::net) const POLICY: u16 = 1008;
    pub(in crate::net) const TOO_BIG: u16 = 1009;
    pub(in crate::net) const UNAUTHORIZED: u16 = 4001;
    pub(in crate::net) const TRY_LATER: u16 = 1013;
}

/// The share of `peer_timeout` (at most a second) that a write may wait for the peer
/// before the connection counts as stalled in the metrics
/// (`clothcast_connections_stalled`); it is closed after the whole `peer_timeout`.
const STALLED_AFTER: Duration = Duration::from_secs(1);

/// The writing half of a connection. Every write gives up after `stall`: a peer that
/// has not taken a byte for that long (gone without a goodbye, or not reading) ends its
/// connection instead of holding its place, and its task, for ever.
pub(super) struct Out {
    pub(super) sink: futures_util::stream::SplitSink<WebSocket, Message>,
    pub(super) stall: Duration,
    pub(super) shared: Arc<Shared>,
    /// The peer timed out: a write gave up after `stall`, or nothing was heard from it
    /// for `peer_timeout`.
    pub(super) timed_out: bool,
    /// A write failed (the socket broke).
    pub(super) failed: bool,
    /// The close code and reason we sent, if we closed.
    pub(super) closed_with: Option<(u16, String)>,
    /// The peer went away without a close handshake.
    pub(super) left: bool,
    /// The peer's first message was JSON text: our replies to it (`welcome`, `error`,
    /// `gone`, `pong`) go as JSON text too, so that a client that speaks only JSON can read
    /// them. `asset` and `frame`, which carry binary payloads, stay MessagePack.
    pub(super) json: bool,
    /// Who it is, for the log.
    pub(super) peer: Peer,
    /// `error` replies sent (a refused message each; the close's own not counted).
    pub(super) refused: u64,
    /// Whether this connection's lines are logged (see [`super::connlog`]).
    pub(super) logged: bool,
}

/// How a write of [`Out`] ended.
#[derive(PartialEq)]
pub(super) enum Wrote {
    Done,
    Failed,
    TimedOut,
}

/// Runs one write of a connection whose writes give up after `stall`. While it has
/// waited longer than [`STALLED_AFTER`] (or a quarter of `stall`, if less) the
/// connection counts as stalled.
async fn timed<E>(
    shared: &Shared,
    stall: Duration,
    write: impl std::future::Future<Output = Result<(), E>>,
) -> Wrote {
    let done = |r: Result<(), E>| {
        if r.is_ok() {
            Wrote::Done
        } else {
            Wrote::Failed
        }
    };
    tokio::pin!(write);
    let first = (stall / 4).min(STALLED_AFTER);
    if let Ok(r) = tokio::time::timeout(first, &mut write).await {
        return done(r);
    }
    let stalled = &shared.metrics.connections_stalled;
    stalled.fetch_add(1, Ordering::Relaxed);
    let r = tokio::time::timeout(stall.saturating_sub(first), write).await;
    stalled.fetch_sub(1, Ordering::Relaxed);
    r.map_or(Wrote::TimedOut, done)
}

impl Out {
    /// Notes a write's end; true when it was done.
    pub(super) fn wrote(&mut self, w: Wrote) -> bool {
        self.timed_out |= w == Wrote::TimedOut;
        self.failed |= w == Wrote::Failed;
        w == Wrote::Done
    }

    /// Sends one WebSocket message; false when the socket failed or stalled.
    pub(super) async fn message(&mut self, msg: Message) -> bool {
        let w = timed(&self.shared, self.stall, self.sink.send(msg)).await;
        self.wrote(w)
    }

    /// Queues one WebSocket message (written by [`Out::flush`] or when the queue is
    /// full); false when the socket failed or stalled.
    pub(super) async fn feed(&mut self, msg: Message) -> bool {
        let w = timed(&self.shared, self.stall, self.sink.feed(msg)).await;
        self.wrote(w)
    }

    /// Writes out what [`Out::feed`] queued; false when the socket failed or stalled.
    pub(super) async fn flush(&mut self) -> bool {
        let w = timed(&self.shared, self.stall, self.sink.flush()).await;
        self.wrote(w)
    }

    /// Sends one of our messages; false when the socket failed or stalled. A message
    /// that cannot be encoded (a bug of ours) is logged and skipped, the connection
    /// goes on.
    pub(super) async fn send(&mut self, m: &ServerMessage) -> bool {
        // each refusal is logged, as the peer is told it (so that whoever runs the
        // server sees why a sensor bridge's poses go nowhere), but a flood of them in
        // log₂ of their number: the 1st to 4th, then the 8th, 16th, …
        if let ServerMessage::Error { code, message } = m
            && code != "closed"
        {
            self.refused += 1;
            let n = self.refused;
            if self.logged && (n <= 4 || n.is_power_of_two()) {
                // the explanation may quote the peer's own bytes: escaped, one line
                let why = crate::protocol::Escaped(message);
                tracing::info!(peer = %self.peer, %code, %why, refused = n, "refused");
            }
        }
        let encoded = if self.json && m.is_control() {
            m.to_json().map(|t| Message::Text(t.into()))
        } else {
            m.to_msgpack().map(|b| Message::Binary(Bytes::from(b)))
        };
        match encoded {
            Ok(msg) => self.message(msg).await,
            Err(e) => {
                tracing::error!(error = %e, "could not encode a reply");
                true
            }
        }
    }

    /// A read failed with `e`. A peer that went away without a close handshake is let
    /// go (its socket is gone: there is no one to tell); one that sent an oversized or
    /// malformed frame is closed with the code that says which.
    pub(super) async fn read_failed(&mut self, e: axum::Error) {
        use tokio_tungstenite::tungstenite::{Error as Ws, error::ProtocolError};
        let reason = e.to_string();
        match e.into_inner().downcast_ref::<Ws>() {
            Some(
                Ws::Protocol(ProtocolError::ResetWithoutClosingHandshake)
                | Ws::Io(_)
                | Ws::ConnectionClosed
                | Ws::AlreadyClosed,
            ) => self.left = true,
            Some(Ws::Capacity(_)) => self.close(close::TOO_BIG, &reason).await,
            _ if reason.contains("too long") || reason.contains("size") => {
                self.close(close::TOO_BIG, &reason).await;
            }
            _ => self.close(close::PROTOCOL, &reason).await,
        }
    }

    /// Says why in an `error` message, then closes with `code` and `reason`.
    pub(super) async fn close(&mut self, code: u16, reason: &str) {
        self.closed_with = Some((code, reason.to_string()));
        if self.send(&ServerMessage::error("closed", reason)).await {
            let _ = self
                .message(Message::Close(Some(CloseFrame {
                    code,
                    reason: reason.into(),
                })))
                .await;
        }
    }
}
