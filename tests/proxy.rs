//! clothcast behind nginx with the shipped `configs/nginx.conf`: nginx terminates TLS
//! and passes the WebSocket upgrade and the client's address on (needs nginx, which
//! `.ci/run` installs).

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use clothcast::net::{ServerConfig, start};
use rustls_pki_types::pem::PemObject;
use tokio_rustls::rustls;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use super::limits::assert_503;
use super::server::{config, db, play_over_wss, tls_fixtures, watch_over_wss, watched_frames};

/// `configs/nginx.conf`'s server block made to run here: listening on `listen`, with the
/// test certificate, proxying to `upstream`. Every line changed must be in the shipped
/// file as written, so the test follows it.
fn site(listen: u16, upstream: SocketAddr) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shipped =
        std::fs::read_to_string(root.join("configs/nginx.conf")).expect("configs/nginx.conf");
    let tls = tls_fixtures();
    let mut site = shipped;
    for (from, to) in [
        (
            "listen 443 ssl;".to_string(),
            format!("listen 127.0.0.1:{listen} ssl;"),
        ),
        (
            "ssl_certificate     /etc/ssl/clothcast/cert.pem;".into(),
            format!("ssl_certificate {};", tls.join("cert.pem").display()),
        ),
        (
            "ssl_certificate_key /etc/ssl/clothcast/key.pem;".into(),
            format!("ssl_certificate_key {};", tls.join("key.pem").display()),
        ),
        (
            "proxy_pass http://127.0.0.1:8470;".into(),
            format!("proxy_pass http://{upstream};"),
        ),
    ] {
        assert!(
            site.contains(&from),
            "configs/nginx.conf no longer has `{from}`"
        );
        site = site.replace(&from, &to);
    }
    site
}

/// nginx serving `site` from the scratch folder `dir`, in the foreground, every path its
/// own (no root, no system folders); killed when dropped.
struct Nginx(Child);

impl Nginx {
    fn start(dir: &Path, site: &str) -> Self {
        std::fs::create_dir_all(dir).expect("scratch folder");
        std::fs::write(dir.join("clothcast.conf"), site).expect("site written");
        let d = dir.display();
        let main = format!(
            "daemon off;\nmaster_process off;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
             events {{}}\nhttp {{\n    access_log off;\n    client_body_temp_path {d}/body;\n    \
             proxy_temp_path {d}/proxy;\n    fastcgi_temp_path {d}/fastcgi;\n    \
             uwsgi_temp_path {d}/uwsgi;\n    scgi_temp_path {d}/scgi;\n    \
             include {d}/clothcast.conf;\n}}\n"
        );
        std::fs::write(dir.join("nginx.conf"), main).expect("config written");
        let binary = ["/usr/sbin/nginx", "nginx"]
            .into_iter()
            .find(|b| Command::new(b).arg("-v").output().is_ok())
            .expect("nginx is not installed (.ci/run installs it: apt-get install nginx-light)");
        let child = Command::new(binary)
            .arg("-p")
            .arg(dir)
            .arg("-e")
            .arg(dir.join("error.log"))
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("nginx runs");
        Self(child)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A free port on 127.0.0.1 (free when asked).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Waits (up to 10 s) until `port` on 127.0.0.1 accepts connections.
async fn until_listening(port: u16, dir: &Path) {
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
    panic!("nginx did not listen on {port}: {log}");
}

/// A TLS client trusting only the test CA.
fn trusting_the_test_ca() -> Arc<rustls::ClientConfig> {
    let ca = tls_fixtures().join("ca.pem");
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_file_iter(&ca).expect("ca.pem") {
        roots.add(cert.expect("a certificate")).expect("a CA");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

/// A wss:// upgrade through nginx on `port` from the loopback address `from`.
async fn wss_from(
    from: IpAddr,
    port: u16,
) -> Result<
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    tokio_tungstenite::tungstenite::Error,
> {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind(SocketAddr::new(from, 0))
        .expect("a loopback address");
    let tcp = socket
        .connect(SocketAddr::from(([127, 0, 0, 1], port)))
        .await
        .expect("connects to nginx");
    let request = format!("wss://localhost:{port}/ws")
        .into_client_request()
        .expect("request");
    let connector = tokio_tungstenite::Connector::Rustls(trusting_the_test_ca());
    tokio_tungstenite::client_async_tls_with_config(request, tcp, None, Some(connector))
        .await
        .map(|(ws, _)| ws)
}

/// Behind nginx with the shipped site config: `play` publishes and `watch` decodes over
/// wss:// through it (the upgrade passes, frames are not held back), and the server,
/// trusting nginx for `X-Forwarded-For`, counts each client by its own address: with
/// two connections allowed per address, a third from 127.0.0.2 is refused while one from
/// 127.0.0.3 is let in (were the header not passed on, every connection would count
/// as nginx's own 127.0.0.1, and 127.0.0.2's second would already be refused).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_nginx_config_proxies_wss_and_forwards_the_client() {
    let server = start(
        db(),
        ServerConfig {
            max_connections_per_address: 2,
            trusted_proxies: vec!["127.0.0.1/32".parse().expect("network")],
            ..config()
        },
    )
    .await
    .expect("server starts");
    let port = free_port();
    let dir: PathBuf = std::env::temp_dir().join(format!("clothcast-nginx-{}", std::process::id()));
    let nginx = Nginx::start(&dir, &site(port, server.addr));
    until_listening(port, &dir).await;

    let url = format!("wss://localhost:{port}/ws");
    let play = play_over_wss(&url, 8);
    watched_frames(watch_over_wss(&url), "through nginx").await;

    let (two, three) = (IpAddr::from([127, 0, 0, 2]), IpAddr::from([127, 0, 0, 3]));
    let _a = wss_from(two, port)
        .await
        .expect("127.0.0.2's first connection");
    let _b = wss_from(two, port)
        .await
        .expect("127.0.0.2's second connection");
    assert_503(
        wss_from(two, port).await,
        "per address",
        "127.0.0.2's third connection",
    );
    let _c = wss_from(three, port)
        .await
        .expect("127.0.0.3 has its own places");

    super::server::exits_cleanly(play, "clothcast play through nginx").await;
    drop(nginx);
    let _ = std::fs::remove_dir_all(&dir);
    server.shutdown().await;
}
