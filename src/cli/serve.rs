//! `clothcast serve`, `demo`, `calibrate` and `wear`: the server, the demo, and the
//! one-shot publisher commands.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;

use super::common::say;
use super::play::{PER_CONNECTION, pose_message, staggered};
use crate::bake::default_database;
use crate::client::Client;
use crate::net::{ServerConfig, start, start_with_garments};
use crate::protocol::{CalibrateMessage, ClientMessage, Role};
use crate::sor::Database;

/// Arguments of `clothcast serve`.
#[derive(Args, Debug)]
pub(crate) struct ServeArgs {
    /// Server config (TOML; see configs/server.toml). Flags override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Example database, one per garment; repeat for several (the first is worn by
    /// default). Overrides the config's `databases`; with neither, the default database
    /// (baked if missing).
    #[arg(long)]
    db: Vec<PathBuf>,
    /// Address to listen on.
    #[arg(long)]
    bind: Option<std::net::SocketAddr>,
    /// Admit connections without tokens (logged at start).
    #[arg(long)]
    open: bool,
    /// PEM certificate chain: with --tls-key, serve https and wss only (overrides the
    /// config's `tls_cert`).
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// What avatars wear until a `wear` message dresses them otherwise: garment names
    /// inner to outer, comma-separated (`pants,tshirt`: the shirt over the pants);
    /// overrides the config's `[engine] outfit`. Default: the first database's garment.
    #[arg(long, value_delimiter = ',', num_args = 1..=crate::protocol::MAX_OUTFIT)]
    outfit: Vec<String>,
    /// Check the config and databases as a start would (settings, tokens, garments
    /// worn together), print what would be served, and exit without serving (like
    /// `nginx -t`); a default database not baked yet is reported, not baked.
    #[arg(long)]
    check: bool,
}

pub(crate) fn load_db(path: Option<&PathBuf>) -> anyhow::Result<Arc<Database>> {
    Ok(Arc::new(match path {
        Some(p) => super::common::read_database(p)?,
        None => {
            let bar = super::bake::progress_bar("baking the default database");
            // under systemd each finished example also extends the start timeout
            let progress = |done, total| {
                bar(done, total);
                super::systemd::baking(done, total);
            };
            let (db, path) = default_database(&progress).context("baking the default database")?;
            tracing::info!(path = %path.display(), "default database");
            db
        }
    }))
}

/// The server config at `path` (defaults without one). Relative file paths in it
/// (`databases`, `tls_cert`, `tls_key`, the token files) name files next to the config, as nginx and
/// systemd units expect, so `serve --config /etc/clothcast/server.toml` finds
/// `databases = ["tshirt.ccdb"]` in /etc/clothcast whatever the working directory;
/// paths given as flags stay relative to the working directory.
pub(crate) fn load_config(path: Option<&PathBuf>) -> anyhow::Result<ServerConfig> {
    let Some(p) = path else {
        return Ok(ServerConfig::default());
    };
    let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
    let mut config: ServerConfig =
        toml::from_str(&text).with_context(|| format!("parsing {}", p.display()))?;
    let dir = p.parent().unwrap_or(std::path::Path::new(""));
    let beside = |f: &mut PathBuf| {
        if f.is_relative() {
            *f = dir.join(&*f);
        }
    };
    config.databases.iter_mut().for_each(beside);
    config.tls_cert.iter_mut().for_each(beside);
    config.tls_key.iter_mut().for_each(beside);
    config.publisher_token_file.iter_mut().for_each(beside);
    config.viewer_token_file.iter_mut().for_each(beside);
    Ok(config)
}

pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

/// Reads the tokens again as a start reads them (the config file at `path`, the token
/// files it names, the environment, systemd credentials) and hands them to `server`
/// for the connections to come; logged either way. Other settings are not applied
/// (they need a restart). On SIGHUP, or `systemctl reload`.
fn reload_tokens(server: &crate::net::ServerHandle, path: Option<&PathBuf>, status: &str) {
    super::systemd::reloading();
    let reloaded = (|| -> anyhow::Result<Vec<String>> {
        let mut config = load_config(path)?;
        let sources =
            crate::net::resolve_tokens(&mut config, &crate::net::TokenEnv::from_process())?;
        server.replace_tokens(config.publisher_token, config.viewer_token)?;
        Ok(token_sources(sources))
    })();
    match reloaded {
        Ok(sources) if sources.is_empty() => tracing::info!(
            "tokens reloaded: none (open); connections already welcomed stay, other settings take effect at a restart"
        ),
        Ok(sources) => tracing::info!(
            "tokens reloaded: {}; connections already welcomed stay, other settings take effect at a restart",
            sources.join(", ")
        ),
        // a TOML error's snippet spans lines: escaped, one log line
        Err(e) => tracing::error!(
            "reload refused, the tokens in use are kept: {}",
            crate::protocol::Escaped(super::error_report(&e))
        ),
    }
    super::systemd::reloaded(status);
}

/// "publisher token from …" for each role with a token, from [`crate::net::resolve_tokens`].
fn token_sources(sources: [Option<crate::net::TokenSource>; 2]) -> Vec<String> {
    ["publisher", "viewer"]
        .into_iter()
        .zip(sources)
        .filter_map(|(role, s)| Some(format!("{role} token from {}", s?)))
        .collect()
}

pub(crate) fn run_serve(a: ServeArgs) -> anyhow::Result<()> {
    let config_path = a.config.clone();
    let mut config = load_config(a.config.as_ref())?;
    if let Some(b) = a.bind {
        config.bind = b;
    }
    config.open |= a.open;
    let sources = token_sources(crate::net::resolve_tokens(
        &mut config,
        &crate::net::TokenEnv::from_process(),
    )?);
    if let (Some(cert), Some(key)) = (a.tls_cert, a.tls_key) {
        (config.tls_cert, config.tls_key) = (Some(cert), Some(key));
    }
    if !a.outfit.is_empty() {
        config.engine.outfit = a.outfit;
    }
    let paths = if a.db.is_empty() {
        config.databases.clone()
    } else {
        a.db.clone()
    };
    // a socket passed by systemd's socket activation takes the place of `bind`
    let activated = super::systemd::activation_listener()?;
    if let Some(l) = &activated {
        config.bind = l.local_addr()?;
        tracing::info!(addr = %config.bind, "listening on the socket systemd passed; `bind` is not used");
    }
    if a.check {
        return check_serve(&config, &paths, &sources);
    }
    for s in &sources {
        tracing::info!("{s}");
    }
    super::systemd::starting("loading garments (baking the default database if it is missing)");
    let dbs = databases(&paths, true)?;
    let names: Vec<&str> = dbs.iter().map(|d| d.garment.name.as_str()).collect();
    tracing::info!(garments = %names.join(", "), "garments");
    let tls = config.tls_cert.is_some();
    crate::net::raise_open_files_for(&config);
    runtime()?.block_on(async move {
        let server = match activated {
            Some(l) => crate::net::start_on_listener(dbs, config, l).await?,
            None => start_with_garments(dbs, config).await?,
        };
        // handled from before anyone is told the server is up (their default actions
        // would end the process without a word): SIGINT and SIGTERM shut it down
        // gracefully, SIGHUP reloads the tokens
        #[cfg(unix)]
        let (mut interrupt, mut terminate, mut hangup) = {
            use tokio::signal::unix::{SignalKind, signal};
            (
                signal(SignalKind::interrupt())?,
                signal(SignalKind::terminate())?,
                signal(SignalKind::hangup())?,
            )
        };
        let (ws, http) = if tls { ("wss", "https") } else { ("ws", "http") };
        say(format_args!(
            "clothcast serving on {ws}://{}/ws (viewer: {http}://{}/, metrics: {http}://{}/metrics)",
            server.addr, server.addr, server.addr
        ));
        let status = format!("serving on {ws}://{}/ws", server.addr);
        super::systemd::ready(server.probe(), &status);
        #[cfg(unix)]
        loop {
            tokio::select! {
                _ = interrupt.recv() => break,
                _ = terminate.recv() => break,
                _ = hangup.recv() => reload_tokens(&server, config_path.as_ref(), &status),
            }
        }
        #[cfg(not(unix))]
        stop_signal().await?;
        super::systemd::stopping();
        say(format_args!("shutting down"));
        server.shutdown().await;
        anyhow::Ok(())
    })
}

/// The databases `serve` wears: those at `paths`, or with none the default database,
/// baked when missing if `bake`, else refused as not baked yet.
fn databases(paths: &[PathBuf], bake: bool) -> anyhow::Result<Vec<Arc<Database>>> {
    if !paths.is_empty() {
        return paths.iter().map(|p| load_db(Some(p))).collect();
    }
    if bake {
        return Ok(vec![load_db(None)?]);
    }
    let path = crate::bake::default_database_path();
    anyhow::ensure!(
        path.exists(),
        "the default database is not baked yet ({}): `serve` bakes it at start (6–8 min on 2 cores), or name databases with --db or `databases`",
        path.display()
    );
    Ok(vec![load_db(Some(&path))?])
}

/// `serve --check`: what `serve` would refuse, without serving (or baking).
fn check_serve(config: &ServerConfig, paths: &[PathBuf], tokens: &[String]) -> anyhow::Result<()> {
    let garments = crate::net::check_server(databases(paths, false)?, config)?;
    let udp = |bind: Option<std::net::SocketAddr>, allow: &[ipnet::IpNet]| match bind {
        None => "off".to_string(),
        Some(a) if allow.is_empty() => format!("UDP {a} from any sender"),
        Some(a) => {
            let from: Vec<String> = allow.iter().map(ToString::to_string).collect();
            format!("UDP {a} from {}", from.join(", "))
        }
    };
    let vmc = udp(config.vmc_bind, &config.vmc_allow);
    let mvn = udp(config.mvn_bind, &config.mvn_allow);
    let auth = if config.open {
        "off (open = true)".to_string()
    } else {
        tokens.join(", ")
    };
    let tls = if config.tls_cert.is_some() {
        " with TLS (https, wss)"
    } else {
        ""
    };
    let worn = if config.engine.outfit.is_empty() {
        "the first is the default".to_string()
    } else {
        format!("avatars wear {}", config.engine.outfit.join(" under "))
    };
    // as a start would raise it (a warning on stderr when it cannot)
    let files = match crate::net::raise_open_files_for(config) {
        crate::net::OpenFiles::Enough { limit: Some(n) } => format!(
            "open files {n} ({} needed)",
            crate::net::files_needed(config)
        ),
        crate::net::OpenFiles::Enough { limit: None } => "open files unlimited".to_string(),
        crate::net::OpenFiles::Raised { from, to } => {
            format!("open files raised from {from} to the {to} needed")
        }
        crate::net::OpenFiles::Short { limit, needed } => format!(
            "open files {limit}, short of the {needed} that max_connections = {} needs",
            config.max_connections
        ),
    };
    say(format_args!(
        "config ok: would listen on {}{tls} (VMC {vmc}; Xsens MVN {mvn}), tick {} Hz, garments {} ({worn}), authentication {auth}, {files}",
        config.bind,
        config.engine.tick_hz,
        garments.join(", ")
    ));
    Ok(())
}

/// Resolves on Ctrl-C (SIGINT) or SIGTERM, which is how systemd, Docker and
/// Kubernetes stop a service: either way the server shuts down gracefully (closes
/// every connection with 1001 and a reason) instead of being killed mid-frame.
pub(crate) async fn stop_signal() -> std::io::Result<()> {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r,
            _ = term.recv() => Ok(()),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await
    }
}

/// Arguments of `clothcast demo`.
#[derive(Args, Debug)]
pub(crate) struct DemoArgs {
    /// Number of avatars walking (the built-in CMU 131_01 clip, staggered), 1–256 (the
    /// server's default `max_avatars`), published 32 to a connection as `play` does.
    #[arg(long, default_value_t = 4, value_parser = parse_demo_avatars)]
    avatars: usize,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8470")]
    bind: std::net::SocketAddr,
    /// Stop after this many seconds (default: until Ctrl-C).
    #[arg(long, value_parser = super::common::parse_seconds)]
    seconds: Option<f32>,
    /// Example database to wear (default: the default database, baked and cached when
    /// missing); its body's skeleton is what the built-in clip is retargeted to.
    #[arg(long)]
    db: Option<PathBuf>,
}

/// `demo --avatars`: 1 to the server's default `max_avatars`.
fn parse_demo_avatars(s: &str) -> Result<usize, String> {
    let most = crate::engine::EngineConfig::default().max_avatars;
    match super::common::parse_positive(s)? {
        n if n <= most => Ok(n),
        n => Err(format!("{n} is more than the server's {most} avatars")),
    }
}

pub(crate) fn run_demo(a: DemoArgs) -> anyhow::Result<()> {
    let db = load_db(a.db.as_ref())?;
    let clip = crate::mocap::Clip::from_bvh_text(
        crate::bake::DEFAULT_CLIP,
        None,
        &crate::skeleton::Skeleton::from_rest_positions(db.body.skeleton),
    )?;
    anyhow::ensure!(!clip.poses.is_empty(), "the built-in clip has no frames");
    let config = ServerConfig {
        bind: a.bind,
        open: true,
        ..ServerConfig::default()
    };
    crate::net::raise_open_files_for(&config);
    runtime()?.block_on(async move {
        let server = start(db, config).await?;
        let url = format!("ws://{}/ws", server.addr);
        say(format_args!(
            "clothcast demo: {} avatars walking on {url}",
            a.avatars
        ));
        say(format_args!(
            "see them:        http://{}/ (in a browser)",
            server.addr
        ));
        say(format_args!("watch them:      clothcast watch --url {url}"));
        say(format_args!(
            "metrics:         http://{}/metrics",
            server.addr
        ));
        // a connection per PER_CONNECTION avatars keeps within the per-publisher limits
        let mut clients = Vec::new();
        for _ in 0..a.avatars.div_ceil(PER_CONNECTION) {
            clients.push(Client::connect(&url, Role::Publisher, None).await?);
        }
        let start_t = Instant::now();
        let mut next = tokio::time::Instant::now();
        let period = Duration::from_secs_f32(1.0 / 30.0);
        let stop = async {
            match a.seconds {
                Some(s) => tokio::time::sleep(Duration::from_secs_f32(s.max(0.0))).await,
                None => {
                    let _ = stop_signal().await;
                }
            }
        };
        tokio::pin!(stop);
        loop {
            tokio::select! {
                _ = &mut stop => break,
                _ = tokio::time::sleep_until(next) => {
                    let t = start_t.elapsed().as_secs_f64();
                    for k in 0..a.avatars {
                        let pose = staggered(&clip, t, k, a.avatars);
                        let client = &mut clients[k / PER_CONNECTION];
                        client.send(&pose_message(&format!("walker-{k}"), &pose, t)).await?;
                    }
                    next += period;
                }
            }
        }
        say(format_args!("shutting down"));
        server.shutdown().await;
        anyhow::Ok(())
    })
}

/// Arguments of `clothcast calibrate`.
#[derive(Args, Debug)]
pub(crate) struct CalibrateArgs {
    /// The avatar whose performer now holds the rest pose (T-pose, facing forward).
    avatar: String,
    /// Server URL.
    #[arg(long, default_value = "ws://127.0.0.1:8470/ws")]
    url: String,
    /// Publisher token.
    #[arg(long, env = "CLOTHCAST_PUBLISHER_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

/// Arguments of `clothcast wear`.
#[derive(Args, Debug)]
pub(crate) struct WearArgs {
    /// The avatar to dress.
    avatar: String,
    /// One of the server's garments (its databases' garment names), or several worn at
    /// once, inner to outer (`pants tshirt`: the shirt over the pants; at most 4).
    #[arg(required = true, num_args = 1..=crate::protocol::MAX_OUTFIT)]
    garments: Vec<String>,
    /// Server URL.
    #[arg(long, default_value = "ws://127.0.0.1:8470/ws")]
    url: String,
    /// Publisher token.
    #[arg(long, env = "CLOTHCAST_PUBLISHER_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

pub(crate) fn run_calibrate(a: CalibrateArgs) -> anyhow::Result<()> {
    let what = format!(
        "calibration of {} requested: applied on its next pose",
        a.avatar
    );
    one_shot(
        &a.url,
        a.token,
        ClientMessage::Calibrate(CalibrateMessage { avatar: a.avatar }),
        &what,
    )
}

pub(crate) fn run_wear(a: WearArgs) -> anyhow::Result<()> {
    // the server does not say whether the avatar is live: a choice for one that has
    // not published yet waits for its first pose (a kiosk dresses a customer before
    // they step in), so the confirmation names both cases
    let what = format!(
        "{} wears {} from its next tick (or from its first pose, if it has not published one)",
        a.avatar,
        a.garments.join(" under ")
    );
    let msg = ClientMessage::wear(a.avatar, &a.garments);
    one_shot(&a.url, a.token, msg, &what)
}

/// Sends one publisher message and reports an error reply (silence means accepted).
fn one_shot(url: &str, token: Option<String>, msg: ClientMessage, ok: &str) -> anyhow::Result<()> {
    runtime()?.block_on(async move {
        let mut client = Client::connect(url, Role::Publisher, token)
            .await
            .with_context(|| format!("connecting to {url}"))?;
        client.send(&msg).await?;
        // an error reply would arrive at once; silence means accepted
        let reply = tokio::time::timeout(Duration::from_millis(300), client.next()).await;
        client.close().await;
        match reply {
            Ok(Ok(crate::protocol::ServerMessage::Error { code, message })) => {
                anyhow::bail!("{code}: {message}")
            }
            _ => say(format_args!("{ok}")),
        }
        anyhow::Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shipped config documents the defaults: parsing it gives exactly
    /// `ServerConfig::default()` (compared through serde, field for field).
    #[test]
    fn shipped_config_parses_to_the_defaults() {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("configs/server.toml");
        let shipped = load_config(Some(&path)).expect("configs/server.toml parses");
        let as_value = |c: &ServerConfig| toml::Value::try_from(c).expect("serialisable");
        assert_eq!(as_value(&shipped), as_value(&ServerConfig::default()));
    }

    /// Relative paths in a config file are taken from the config's directory, absolute
    /// ones as written, whatever the working directory.
    #[test]
    fn a_configs_relative_paths_name_files_beside_it() {
        let dir = std::env::temp_dir().join(format!("clothcast-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("server.toml");
        std::fs::write(
            &path,
            "databases = [\"tshirt.ccdb\", \"/srv/pants.ccdb\"]\n\
             tls_cert = \"certs/cert.pem\"\ntls_key = \"/etc/key.pem\"\n\
             viewer_token_file = \"viewer.token\"\n",
        )
        .expect("write config");
        let config = load_config(Some(&path)).expect("config parses");
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(
            config.databases,
            [dir.join("tshirt.ccdb"), PathBuf::from("/srv/pants.ccdb")]
        );
        assert_eq!(config.tls_cert, Some(dir.join("certs/cert.pem")));
        assert_eq!(config.tls_key, Some(PathBuf::from("/etc/key.pem")));
        assert_eq!(config.viewer_token_file, Some(dir.join("viewer.token")));
        // a config named without a directory is the working directory's
        let bare = load_config(Some(&PathBuf::from("configs/server.toml"))).map(|c| c.databases);
        assert!(bare.is_ok_and(|d| d.is_empty()));
    }
}
