//! `clothcast health`: asks a running server's `/healthz` (200 while its tick loop runs,
//! 503 with the reason when it has stalled) and exits 0 or 1 by the answer: a
//! container's `HEALTHCHECK` (the image has no curl) or a script's readiness check.

use std::time::Duration;

use anyhow::Context;
use clap::Args;

/// Largest answer read, bytes (`/healthz` says `ok` or one line of why not).
const MAX_ANSWER: usize = 4096;

/// Arguments of `clothcast health`.
#[derive(Args, Debug)]
pub(crate) struct HealthArgs {
    /// The server's health endpoint, plain http (with TLS, probe it with curl).
    #[arg(long, default_value = "http://127.0.0.1:8470/healthz")]
    url: String,
    /// Seconds to wait for the whole answer (0.1 to 600).
    #[arg(long, default_value_t = 3.0)]
    timeout: f64,
}

pub(crate) fn run(a: HealthArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        (0.1..=600.0).contains(&a.timeout),
        "--timeout {} is outside 0.1 to 600 seconds",
        a.timeout
    );
    let uri: hyper::Uri = a
        .url
        .parse()
        .with_context(|| format!("{:?} is not a URL", a.url))?;
    anyhow::ensure!(
        uri.scheme_str() == Some("http"),
        "{}: only http:// is probed (with TLS, use curl -k https://…/healthz)",
        a.url
    );
    let host = uri
        .host()
        .with_context(|| format!("{}: no host", a.url))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = uri.port_u16().unwrap_or(80);
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
    let authority = uri.authority().map(|x| x.to_string()).unwrap_or_default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let answer = rt.block_on(async {
        tokio::time::timeout(Duration::from_secs_f64(a.timeout), async {
            let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
                .await
                .with_context(|| format!("connecting to {host}:{port}"))?;
            let (mut sender, conn) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp)).await?;
            tokio::spawn(conn);
            let request = hyper::Request::get(path)
                .header(hyper::header::HOST, authority)
                .body(axum::body::Body::empty())?;
            let response = sender.send_request(request).await?;
            let status = response.status();
            let body =
                axum::body::to_bytes(axum::body::Body::new(response.into_body()), MAX_ANSWER)
                    .await
                    .map_err(|e| anyhow::anyhow!("reading the answer: {e}"))?;
            anyhow::Ok((status, String::from_utf8_lossy(&body).trim().to_string()))
        })
        .await
        .map_err(|_| anyhow::anyhow!("no answer within {} s", a.timeout))?
    });
    let (status, body) = answer.with_context(|| format!("asking {}", a.url))?;
    anyhow::ensure!(
        status == hyper::StatusCode::OK,
        "unhealthy: {} answered {status}: {body}",
        a.url
    );
    outln!("healthy: {} answered {status}: {body}", a.url);
    Ok(())
}
