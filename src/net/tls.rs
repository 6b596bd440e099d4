//! TLS for the server's port (rustls on ring): browsers give WebXR ("Enter VR") only to
//! https pages, and an https page may open only `wss://` WebSockets, so a headset on the
//! network needs the server behind TLS: this, or a reverse proxy (configs/nginx.conf).

use std::path::Path;
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;

use super::NetError;

/// The acceptor for a PEM certificate chain (leaf first) and its PEM private key
/// (PKCS#8, PKCS#1 or SEC1). HTTP/1.1 is offered by ALPN, the only HTTP the server
/// speaks. Unreadable files, files without a certificate or key, and a key that does
/// not match the certificate are refused by name.
pub(super) fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, NetError> {
    let bad = |path: &Path, reason: String| NetError::Tls {
        path: path.display().to_string(),
        reason,
    };
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|e| bad(cert, e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(cert, e.to_string()))?;
    if chain.is_empty() {
        return Err(bad(cert, "no PEM certificate in it".into()));
    }
    let private = PrivateKeyDer::from_pem_file(key).map_err(|e| bad(key, e.to_string()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(cert, e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(|e| {
            bad(
                key,
                format!("{e} (does the key belong to the certificate?)"),
            )
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
