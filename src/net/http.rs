//! The server's TCP side: accepting connections and serving each with hyper (HTTP/1.1,
//! WebSocket upgrades) under a deadline on request headers. `axum::serve` sets no
//! deadline, so a client that opened connections and never finished a request
//! (slowloris) held them, and the server's file descriptors, for ever; now each gets
//! `header_timeout` to send its request headers, on every request of a connection. And
//! at most `max_pending` connections may be open before their upgrade or between
//! requests: more are closed as soon as they are accepted, so a flood of connections
//! within that time cannot take every file descriptor either; and one address (not a
//! trusted proxy) may hold at most `per_address` of them, so that one host's flood
//! cannot shut everyone else out.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

use super::peer::{Place, Places, is_trusted};

/// Least time between two warnings that accepting a connection failed (each tells how
/// many failed since the last): out of file descriptors, the accept loop fails every
/// 50 ms for as long as it lasts, and a line each time would flood the log.
const ACCEPT_WARN_EVERY: Duration = Duration::from_secs(10);

/// How connections are taken at the door.
pub(super) struct Door {
    /// Time a connection has for each request's headers (and for its TLS handshake).
    pub(super) header_timeout: Duration,
    /// Connections that may be HTTP at once (not yet upgraded, or idle between
    /// requests); more are closed as soon as they are accepted.
    pub(super) max_pending: usize,
    /// TLS on every connection, or none.
    pub(super) tls: Option<TlsAcceptor>,
    /// Connections one address may have as HTTP at once (so that one host cannot hold
    /// every one of `max_pending` with unfinished requests); more from it are closed
    /// as soon as they are accepted.
    pub(super) per_address: usize,
    /// Addresses exempt from `per_address`: the trusted proxies, whose connections
    /// carry many clients.
    pub(super) exempt: Vec<ipnet::IpNet>,
}

/// Serves `app` on `listener` until `shutdown` resolves (or its sender is dropped):
/// then accepts no more, asks every HTTP connection to finish its request in flight
/// and close (upgraded WebSocket connections are the server's own tasks by then), and
/// returns. `tune` runs on each accepted socket; each request carries its peer's
/// address as [`ConnectInfo`]. A connection accepted while `door.max_pending` others
/// are still HTTP is closed at once and counted in `refused`.
pub(super) async fn serve(
    listener: TcpListener,
    app: axum::Router,
    door: Door,
    refused: impl Fn() + Send + 'static,
    tune: impl Fn(&TcpStream) + Send + 'static,
    shutdown: tokio::sync::oneshot::Receiver<()>,
) {
    let Door {
        header_timeout,
        max_pending,
        tls,
        per_address,
        exempt,
    } = door;
    let places = Arc::new(Places::default());
    let (closing, _) = tokio::sync::watch::channel(false);
    let pending = Arc::new(AtomicUsize::new(0));
    // accept errors since the last warning, and when it was written
    let mut accept_failures = 0u64;
    let mut accept_warned: Option<Instant> = None;
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // out of file descriptors, or a connection reset before it was
                    // accepted: wait a moment (so as not to spin) and go on; told at
                    // most once every ACCEPT_WARN_EVERY, with how many failed since
                    accept_failures += 1;
                    if accept_warned.is_none_or(|t: Instant| t.elapsed() >= ACCEPT_WARN_EVERY) {
                        tracing::warn!(error = %e, failures = accept_failures, "accepting a connection failed");
                        accept_warned = Some(Instant::now());
                        accept_failures = 0;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        if pending.fetch_add(1, Ordering::Relaxed) >= max_pending {
            pending.fetch_sub(1, Ordering::Relaxed);
            refused();
            drop(tcp);
            continue;
        }
        let ip = peer.ip().to_canonical();
        let place = if is_trusted(ip, &exempt) {
            None
        } else {
            match places.take(super::peer::counted(ip), per_address) {
                Some(p) => Some(p),
                None => {
                    pending.fetch_sub(1, Ordering::Relaxed);
                    refused();
                    drop(tcp);
                    continue;
                }
            }
        };
        let guard = HttpPlace(Arc::new(std::sync::Mutex::new(Some((
            Pending(Arc::clone(&pending)),
            place,
        )))));
        tune(&tcp);
        let app = app.clone();
        let request_guard = guard.clone();
        let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
            req.extensions_mut().insert(ConnectInfo(peer));
            req.extensions_mut().insert(request_guard.clone());
            tower::ServiceExt::oneshot(app.clone(), req)
        });
        let mut closing = closing.subscribe();
        let tls = tls.clone();
        tokio::spawn(async move {
            match tls {
                None => serve_io(tcp, service, header_timeout, closing, peer).await,
                // the handshake has the same deadline as a request's headers, and a
                // server shutting down abandons it
                Some(tls) => {
                    let shook = tokio::select! {
                        r = tokio::time::timeout(header_timeout, tls.accept(tcp)) => Some(r),
                        _ = closing.wait_for(|&c| c) => None,
                    };
                    match shook {
                        Some(Ok(Ok(stream))) => {
                            serve_io(stream, service, header_timeout, closing, peer).await
                        }
                        Some(Ok(Err(e))) => {
                            tracing::debug!(%peer, error = %e, "TLS handshake failed")
                        }
                        Some(Err(_)) => tracing::debug!(%peer, "TLS handshake timed out"),
                        None => {}
                    }
                }
            }
            // (an upgraded connection gave its place back at the upgrade)
            guard.give_back();
        });
    }
    closing.send_replace(true);
}

/// Serves one connection's HTTP/1.1 requests (and its WebSocket upgrade) on `io`, each
/// request's headers within `header_timeout`, until it ends or `closing` turns true
/// (then the request in flight is finished and the connection closed).
async fn serve_io<S, I>(
    io: I,
    service: S,
    header_timeout: Duration,
    mut closing: tokio::sync::watch::Receiver<bool>,
    peer: std::net::SocketAddr,
) where
    S: hyper::service::HttpService<Incoming, ResBody = axum::body::Body>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    S::Future: Send,
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    let conn = http
        .serve_connection(TokioIo::new(io), service)
        .with_upgrades();
    tokio::pin!(conn);
    let done = tokio::select! {
        done = conn.as_mut() => done,
        _ = async { drop(closing.wait_for(|&c| c).await) } => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = done {
        tracing::debug!(%peer, error = %e, "HTTP connection ended");
    }
}

/// A connection's place among those served as plain HTTP (`max_pending`, and its
/// address's share), carried by each of its requests: given back when the connection
/// ends, or by the WebSocket handler as it upgrades (before the `101` goes out, so a
/// client that connects again at once is not counted twice).
#[derive(Clone)]
pub(super) struct HttpPlace(Arc<std::sync::Mutex<Option<Held>>>);

/// What an [`HttpPlace`] holds: its share of `max_pending`, and of its address's
/// places (none for a trusted proxy).
type Held = (Pending, Option<Place>);

impl HttpPlace {
    /// Gives the place back (once; later calls do nothing).
    pub(super) fn give_back(&self) {
        let mut held = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        drop(held.take());
    }
}

/// Counts one connection still served as HTTP for as long as it lives.
struct Pending(Arc<AtomicUsize>);

impl Drop for Pending {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
