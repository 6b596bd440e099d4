//! `clothcast serve`, `clothcast play`, `clothcast watch`: the server, a BVH replay
//! publisher, and a terminal viewer.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;

use super::common::load_clip;
use crate::bake::default_database;
use crate::client::{Client, Viewer};
use crate::net::{ServerConfig, start, start_with_garments};
use crate::protocol::{ClientMessage, JointSample, PoseMessage, Role};
use crate::skeleton::{JointId, Skeleton};
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
}

pub(crate) fn load_db(path: Option<&PathBuf>) -> anyhow::Result<Arc<Database>> {
    Ok(Arc::new(match path {
        Some(p) => Database::read(p).with_context(|| format!("reading {}", p.display()))?,
        None => {
            let (db, path) =
                default_database(&super::bake::progress_bar("baking the default database"))
                    .context("baking the default database")?;
            tracing::info!(path = %path.display(), "default database");
            db
        }
    }))
}

pub(crate) fn load_config(path: Option<&PathBuf>) -> anyhow::Result<ServerConfig> {
    match path {
        Some(p) => {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            toml::from_str(&text).with_context(|| format!("parsing {}", p.display()))
        }
        None => Ok(ServerConfig::default()),
    }
}

pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

pub(crate) fn run_serve(a: ServeArgs) -> anyhow::Result<()> {
    let mut config = load_config(a.config.as_ref())?;
    if let Some(b) = a.bind {
        config.bind = b;
    }
    config.open |= a.open;
    let paths = if a.db.is_empty() {
        config.databases.clone()
    } else {
        a.db.clone()
    };
    let dbs = if paths.is_empty() {
        vec![load_db(None)?]
    } else {
        paths
            .iter()
            .map(|p| load_db(Some(p)))
            .collect::<anyhow::Result<Vec<_>>>()?
    };
    let names: Vec<&str> = dbs.iter().map(|d| d.garment.name.as_str()).collect();
    tracing::info!(garments = %names.join(", "), "garments");
    runtime()?.block_on(async move {
        let server = start_with_garments(dbs, config).await?;
        println!(
            "clothcast serving on ws://{}/ws (metrics: http://{}/metrics)",
            server.addr, server.addr
        );
        tokio::signal::ctrl_c().await?;
        println!("shutting down");
        server.shutdown().await;
        anyhow::Ok(())
    })
}

/// Arguments of `clothcast play`.
#[derive(Args, Debug)]
pub(crate) struct PlayArgs {
    /// Motion clip (BVH).
    bvh: PathBuf,
    /// Server URL.
    #[arg(long, default_value = "ws://127.0.0.1:8470/ws")]
    url: String,
    /// Number of avatars (each starts at a different point of the clip).
    #[arg(long, default_value_t = 1)]
    avatars: usize,
    /// Skeleton profile of the clip (detected when omitted).
    #[arg(long)]
    profile: Option<String>,
    /// Publisher token.
    #[arg(long, env = "CLOTHCAST_PUBLISHER_TOKEN")]
    token: Option<String>,
    /// Poses per second sent per avatar.
    #[arg(long, default_value_t = 30.0)]
    rate: f32,
    /// Stop after this many seconds (default: loop forever).
    #[arg(long)]
    seconds: Option<f32>,
    /// Avatar id prefix.
    #[arg(long, default_value = "performer")]
    prefix: String,
    /// Send VMC (OSC over UDP) to this address instead of WebSocket messages to
    /// `--url`: to a clothcast server's VMC listener (127.0.0.1:39539 by default) or any
    /// VMC receiver (VSeeFace, Warudo, Unity EVMC4U, …). Each avatar is one performer,
    /// sending from its own UDP port.
    #[arg(long)]
    vmc: Option<std::net::SocketAddr>,
}

/// The pose of avatar `k` of `n` at `t` seconds into a looping clip, the avatars
/// spread evenly over it. The clip must have frames.
pub(crate) fn staggered(
    clip: &crate::mocap::Clip,
    t: f64,
    k: usize,
    n: usize,
) -> &crate::skeleton::Pose {
    let frame = (t / f64::from(clip.frame_time)) as usize;
    &clip.poses[(frame + k * clip.poses.len() / n.max(1)) % clip.poses.len()]
}

/// A pose message of the canonical profile for `pose`.
pub(crate) fn pose_message(avatar: &str, pose: &crate::skeleton::Pose, t: f64) -> ClientMessage {
    ClientMessage::Pose(PoseMessage {
        avatar: avatar.to_string(),
        profile: "canonical".into(),
        timestamp: t,
        root: Some(pose.translation.to_array()),
        joints: JointId::all()
            .map(|j| JointSample {
                name: j.name().to_string(),
                rotation: Some(pose.rotation(j).to_array()),
                position: None,
                confidence: None,
            })
            .collect(),
    })
}

pub(crate) fn run_play(a: PlayArgs) -> anyhow::Result<()> {
    let skeleton = Skeleton::from_proportions(&crate::body::BodyShape::default().proportions());
    let clip = load_clip(&a.bvh, a.profile.as_deref(), &skeleton)?;
    anyhow::ensure!(!clip.poses.is_empty(), "the clip has no frames");
    anyhow::ensure!(
        a.rate.is_finite() && a.rate > 0.0,
        "--rate must be positive"
    );
    let hips = skeleton.rest_positions()[JointId::PELVIS.index()];
    runtime()?.block_on(async move {
        // where the poses go: pose messages on one WebSocket connection, or VMC
        // datagrams from one UDP socket per performer
        let mut out = match a.vmc {
            None => PlayTo::WebSocket(Box::new(
                Client::connect(&a.url, Role::Publisher, a.token.clone())
                    .await
                    .with_context(|| format!("connecting to {}", a.url))?,
            )),
            Some(to) => {
                let local: std::net::SocketAddr = if to.is_ipv4() {
                    ([0, 0, 0, 0], 0).into()
                } else {
                    (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
                };
                let mut sockets = Vec::with_capacity(a.avatars);
                for _ in 0..a.avatars {
                    sockets.push(
                        tokio::net::UdpSocket::bind(local)
                            .await
                            .context("opening UDP sockets for the VMC performers")?,
                    );
                }
                PlayTo::Vmc(to, sockets)
            }
        };
        let start = Instant::now();
        let period = Duration::from_secs_f32(1.0 / a.rate);
        let mut next = tokio::time::Instant::now();
        let mut sent = 0u64;
        loop {
            let t = start.elapsed().as_secs_f64();
            if a.seconds.is_some_and(|s| t >= f64::from(s)) {
                break;
            }
            for k in 0..a.avatars {
                let pose = staggered(&clip, t, k, a.avatars);
                match &mut out {
                    PlayTo::WebSocket(client) => {
                        client
                            .send(&pose_message(&format!("{}-{k}", a.prefix), pose, t))
                            .await?;
                    }
                    PlayTo::Vmc(to, sockets) => {
                        let packet = crate::mocap::vmc_packet(pose, hips, t)?;
                        sockets[k]
                            .send_to(&packet, *to)
                            .await
                            .with_context(|| format!("sending VMC to {to}"))?;
                    }
                }
                sent += 1;
            }
            next += period;
            tokio::time::sleep_until(next).await;
        }
        println!(
            "sent {sent} poses for {} avatars in {:.1} s",
            a.avatars,
            start.elapsed().as_secs_f32()
        );
        anyhow::Ok(())
    })
}

/// Where `clothcast play` sends its poses.
enum PlayTo {
    /// Pose messages on a publisher connection.
    WebSocket(Box<Client>),
    /// VMC datagrams to this address, one socket (one performer) per avatar.
    Vmc(std::net::SocketAddr, Vec<tokio::net::UdpSocket>),
}

/// What `clothcast watch` keeps per avatar between its reports.
struct WatchStats {
    /// Frames and bytes decoded when the interval began.
    frames: u64,
    bytes: u64,
    /// Frame delays (arrival minus tick time, seconds) this interval: sum, count, max.
    delay_sum: f64,
    delays: u64,
    delay_max: f64,
    /// Last frame number, and frames missed in all (gaps in the numbers).
    last_seq: Option<u32>,
    missed: u64,
}

impl Default for WatchStats {
    fn default() -> Self {
        Self {
            frames: 0,
            bytes: 0,
            delay_sum: 0.0,
            delays: 0,
            delay_max: f64::NEG_INFINITY,
            last_seq: None,
            missed: 0,
        }
    }
}

impl WatchStats {
    /// A decoded frame numbered `seq` that arrived `delay` seconds after its tick (on
    /// unshared clocks).
    fn frame(&mut self, seq: u32, delay: f64) {
        self.delay_sum += delay;
        self.delays += 1;
        self.delay_max = self.delay_max.max(delay);
        // a stream that restarts (another garment) counts from 0 again: no gap
        if let Some(last) = self.last_seq {
            let gap = seq.wrapping_sub(last);
            if (1..1 << 20).contains(&gap) {
                self.missed += u64::from(gap - 1);
            }
        }
        self.last_seq = Some(seq);
    }

    /// Starts the next report interval at these totals.
    fn next_interval(&mut self, frames: u64, bytes: u64) {
        (self.frames, self.bytes) = (frames, bytes);
        (self.delay_sum, self.delays, self.delay_max) = (0.0, 0, f64::NEG_INFINITY);
    }
}

/// Arguments of `clothcast watch`.
#[derive(Args, Debug)]
pub(crate) struct WatchArgs {
    /// Server URL.
    #[arg(long, default_value = "ws://127.0.0.1:8470/ws")]
    url: String,
    /// Viewer token.
    #[arg(long, env = "CLOTHCAST_VIEWER_TOKEN")]
    token: Option<String>,
    /// Avatars to watch (default: all).
    #[arg(long = "avatar")]
    avatars: Vec<String>,
    /// Stop after this many seconds.
    #[arg(long)]
    seconds: Option<f32>,
}

pub(crate) fn run_watch(a: WatchArgs) -> anyhow::Result<()> {
    runtime()?.block_on(async move {
        let mut client = Client::connect(&a.url, Role::Viewer, a.token.clone())
            .await
            .with_context(|| format!("connecting to {}", a.url))?;
        client
            .send(&ClientMessage::Subscribe {
                avatars: (!a.avatars.is_empty()).then(|| a.avatars.clone()),
            })
            .await?;
        let mut viewer = Viewer::default();
        let start = Instant::now();
        let mut last_report = Instant::now();
        // latency: each frame's arrival on our clock minus its tick time on the server's,
        // above the fastest frame seen (the clocks are not shared, so this is the delay
        // a frame spent in the server's queues and the network beyond the best case)
        let mut fastest = f64::INFINITY;
        let mut stats: std::collections::HashMap<String, WatchStats> = Default::default();
        loop {
            if a.seconds
                .is_some_and(|s| start.elapsed().as_secs_f32() >= s)
            {
                break;
            }
            let m = tokio::time::timeout(Duration::from_secs(1), client.next()).await;
            if let Ok(m) = m
                && let Some(id) = viewer.apply(m?)?
                && let Some(f) = viewer.avatars.get(&id).and_then(|v| v.last.as_ref())
            {
                let d = start.elapsed().as_secs_f64() - f.timestamp;
                fastest = fastest.min(d);
                stats.entry(id).or_default().frame(f.seq, d);
            }
            if last_report.elapsed() >= Duration::from_secs(1) {
                let dt = last_report.elapsed().as_secs_f64();
                last_report = Instant::now();
                // avatars that left start from zero if they come back
                stats.retain(|id, _| viewer.avatars.contains_key(id));
                let mut ids: Vec<_> = viewer.avatars.keys().cloned().collect();
                ids.sort();
                for id in ids {
                    let v = &viewer.avatars[&id];
                    let st = stats.entry(id.clone()).or_default();
                    let garment = viewer.garments.get(&v.asset).map_or("", String::as_str);
                    let latency = if st.delays > 0 {
                        format!(
                            "latency {:5.1} ms (max {:5.1})",
                            (st.delay_sum / st.delays as f64 - fastest) * 1000.0,
                            (st.delay_max - fastest) * 1000.0
                        )
                    } else {
                        format!("latency {:>22}", "-")
                    };
                    println!(
                        "{id:>16}: {garment:>8} {:5.1} fps  {:7.1} kbit/s  {latency}  missed {}  {} vertices  frame {}",
                        v.frames.saturating_sub(st.frames) as f64 / dt,
                        v.bytes.saturating_sub(st.bytes) as f64 * 8.0 / 1000.0 / dt,
                        st.missed,
                        v.positions.len() / 3,
                        v.last.as_ref().map_or(0, |f| f.seq)
                    );
                    st.next_interval(v.frames, v.bytes);
                }
            }
        }
        anyhow::Ok(())
    })
}

/// Arguments of `clothcast demo`.
#[derive(Args, Debug)]
pub(crate) struct DemoArgs {
    /// Number of avatars walking (the built-in CMU 131_01 clip, staggered).
    #[arg(long, default_value_t = 4)]
    avatars: usize,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8470")]
    bind: std::net::SocketAddr,
    /// Stop after this many seconds (default: until Ctrl-C).
    #[arg(long)]
    seconds: Option<f32>,
}

pub(crate) fn run_demo(a: DemoArgs) -> anyhow::Result<()> {
    let db = load_db(None)?;
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
    runtime()?.block_on(async move {
        let server = start(db, config).await?;
        let url = format!("ws://{}/ws", server.addr);
        println!("clothcast demo: {} avatars walking on {url}", a.avatars);
        println!("watch them:      clothcast watch --url {url}");
        println!("metrics:         http://{}/metrics", server.addr);
        let mut client = Client::connect(&url, Role::Publisher, None).await?;
        let start_t = Instant::now();
        let mut next = tokio::time::Instant::now();
        let period = Duration::from_secs_f32(1.0 / 30.0);
        let stop = async {
            match a.seconds {
                Some(s) => tokio::time::sleep(Duration::from_secs_f32(s.max(0.0))).await,
                None => {
                    let _ = tokio::signal::ctrl_c().await;
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
                        client.send(&pose_message(&format!("walker-{k}"), staggered(&clip, t, k, a.avatars), t)).await?;
                    }
                    next += period;
                }
            }
        }
        println!("shutting down");
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
    #[arg(long, env = "CLOTHCAST_PUBLISHER_TOKEN")]
    token: Option<String>,
}

/// Arguments of `clothcast wear`.
#[derive(Args, Debug)]
pub(crate) struct WearArgs {
    /// The avatar to dress.
    avatar: String,
    /// One of the server's garments (its databases' garment names).
    garment: String,
    /// Server URL.
    #[arg(long, default_value = "ws://127.0.0.1:8470/ws")]
    url: String,
    /// Publisher token.
    #[arg(long, env = "CLOTHCAST_PUBLISHER_TOKEN")]
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
        ClientMessage::Calibrate { avatar: a.avatar },
        &what,
    )
}

pub(crate) fn run_wear(a: WearArgs) -> anyhow::Result<()> {
    let what = format!("{} wears {} from its next tick", a.avatar, a.garment);
    let msg = ClientMessage::Wear {
        avatar: a.avatar,
        garment: a.garment,
    };
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
        match tokio::time::timeout(Duration::from_millis(300), client.next()).await {
            Ok(Ok(crate::protocol::ServerMessage::Error { code, message })) => {
                anyhow::bail!("{code}: {message}")
            }
            _ => println!("{ok}"),
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
}
