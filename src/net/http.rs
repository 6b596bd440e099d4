//! The server's TCP side: accepting connections and serving each with hyper (HTTP/1.1,
//! WebSocket upgrades) under a deadline on request headers. `axum::serve` sets no
//! deadline, so a client that opened connections and never finished a request
//! (slowloris) held them, and the server's file descriptors, for ever; now each gets
//! `header_timeout` to send its request headers, on every request of a connection.

use std::time::Duration;

use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};

/// Serves `app` on `listener` until `shutdown` resolves (or its sender is dropped):
/// then accepts no more, asks every HTTP connection to finish its request in flight
/// and close (upgraded WebSocket connections are the server's own tasks by then), and
/// returns. `tune` runs on each accepted socket; each request carries its peer's
/// address as [`ConnectInfo`].
pub(super) async fn serve(
    listener: TcpListener,
    app: axum::Router,
    header_timeout: Duration,
    tune: impl Fn(&TcpStream) + Send + 'static,
    shutdown: tokio::sync::oneshot::Receiver<()>,
) {
    let (closing, _) = tokio::sync::watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // out of file descriptors, or a connection reset before it was
                    // accepted: wait a moment (so as not to spin) and go on
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        tune(&tcp);
        let app = app.clone();
        let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
            req.extensions_mut().insert(ConnectInfo(peer));
            tower::ServiceExt::oneshot(app.clone(), req)
        });
        let mut closing = closing.subscribe();
        tokio::spawn(async move {
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new())
                .header_read_timeout(header_timeout);
            let conn = http
                .serve_connection(TokioIo::new(tcp), service)
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
        });
    }
    closing.send_replace(true);
}
