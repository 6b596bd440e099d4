//! `clothcast health`: asks a running server's `/healthz` (200 while its tick loop runs,
//! 503 with the reason when it has stalled) and exits 0 or 1 by the answer: a
//! container's `HEALTHCHECK` (the image has no curl) or a script's readiness check.
//! Speaks http, and https (rustls on ring, as `serve`) to a server with `tls_cert`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio_rustls::{TlsConnector, rustls};

/// Largest answer read, bytes (`/healthz` says `ok` or one line of why not).
const MAX_ANSWER: usize = 4096;

/// Arguments of `clothcast health`.
#[derive(Args, Debug)]
pub(crate) struct HealthArgs {
    /// The server's health endpoint: http://, or https:// for a server with `tls_cert`
    /// (its certificate checked against the system's roots, `$SSL_CERT_FILE` and `--ca`).
    #[arg(long, default_value = "http://127.0.0.1:8470/healthz")]
    url: String,
    /// A PEM file of certificate authorities to trust besides the system's (a private
    /// CA that signed the server's certificate).
    #[arg(long)]
    ca: Option<PathBuf>,
    /// With https, do not check the server's certificate or name: for probing one's
    /// own server on 127.0.0.1 whose certificate names its public host (a container's
    /// HEALTHCHECK). The answer is still read over TLS.
    #[arg(long)]
    insecure: bool,
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
    let tls = match uri.scheme_str() {
        Some("http") => None,
        Some("https") => Some(connector(a.ca.as_deref(), a.insecure)?),
        _ => anyhow::bail!("{}: only http:// and https:// are probed", a.url),
    };
    let host = uri
        .host()
        .with_context(|| format!("{}: no host", a.url))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = uri
        .port_u16()
        .unwrap_or(if tls.is_some() { 443 } else { 80 });
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
            let request = hyper::Request::get(path)
                .header(hyper::header::HOST, authority)
                .body(axum::body::Body::empty())?;
            let response = match &tls {
                None => send(tcp, request).await?,
                Some(connector) => {
                    let name = ServerName::try_from(host.clone())
                        .with_context(|| format!("{host:?} is not a server name"))?;
                    let stream = connector
                        .connect(name, tcp)
                        .await
                        .context("TLS handshake")?;
                    send(stream, request).await?
                }
            };
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

/// Sends `request` over `io` (HTTP/1.1) and returns the response head and its body.
async fn send<T>(
    io: T,
    request: hyper::Request<axum::body::Body>,
) -> anyhow::Result<hyper::Response<hyper::body::Incoming>>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(io)).await?;
    tokio::spawn(conn);
    Ok(sender.send_request(request).await?)
}

/// A TLS client for the probe: the system's roots (and `$SSL_CERT_FILE`) plus those in
/// `ca`, or with `insecure` no check of the certificate at all.
fn connector(ca: Option<&std::path::Path>, insecure: bool) -> anyhow::Result<TlsConnector> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()?;
    let mut config = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Unchecked(provider)))
            .with_no_client_auth()
    } else {
        let mut roots = rustls::RootCertStore::empty();
        // unreadable system certificates are skipped, as other TLS clients skip them
        let native = rustls_native_certs::load_native_certs();
        roots.add_parsable_certificates(native.certs);
        if let Some(path) = ca {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|i| i.collect::<Result<Vec<_>, _>>())
                .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
            anyhow::ensure!(
                !certs.is_empty(),
                "{}: no PEM certificate in it",
                path.display()
            );
            for c in certs {
                roots
                    .add(c)
                    .with_context(|| format!("{}: not a usable CA certificate", path.display()))?;
            }
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsConnector::from(Arc::new(config)))
}

/// Accepts any server certificate (`--insecure`), still checking that the handshake's
/// signatures are made by the key the certificate carries.
#[derive(Debug)]
struct Unchecked(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
