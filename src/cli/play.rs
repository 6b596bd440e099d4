//! `clothcast play`: replays a BVH clip as live performers, over publisher connections
//! that come back when the server restarts or the network drops, as VMC senders, or as
//! Xsens MVN's network streamer.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;

use super::common::load_clip;
use super::serve::runtime;
use crate::client::{Backoff, Client, ClientError};
use crate::mocap::KinectKind;
use crate::protocol::{ClientMessage, JointSample, PoseMessage, Role, ServerMessage};
use crate::skeleton::{JointId, Pose, Skeleton};
use tokio_tungstenite::tungstenite::Message;

/// Arguments of `clothcast play`.
#[derive(Args, Debug)]
pub(crate) struct PlayArgs {
    /// Motion clip (BVH).
    bvh: PathBuf,
    /// Server URL.
    #[arg(long, default_value = "ws://127.0.0.1:8470/ws")]
    url: String,
    /// Number of avatars (each starts at a different point of the clip), 1 to 4096
    /// (a server drives 256 by default).
    #[arg(long, default_value_t = 1, value_parser = super::common::parse_count::<4096>)]
    avatars: usize,
    /// Skeleton profile of the clip (detected when omitted).
    #[arg(long)]
    profile: Option<String>,
    /// Publisher token.
    #[arg(long, env = "CLOTHCAST_PUBLISHER_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Poses per second sent per avatar.
    #[arg(long, default_value_t = 30.0)]
    rate: f32,
    /// Stop after this many seconds (default: loop forever).
    #[arg(long, value_parser = super::common::parse_seconds)]
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
    /// Send the avatars as the body frames a Kinect bridge sends (`v2` or `azure`),
    /// one JSON text frame per tick with a body per avatar (ids 0, 1, …), on a
    /// publisher connection whose `hello` names the sensor `--prefix`: the server's
    /// Kinect path (position retargeting, filtering) drives avatars
    /// `kinect-<prefix>-<id>`. Tries a kiosk's server without a sensor.
    #[arg(long, conflicts_with_all = ["vmc", "mvn"])]
    kinect: Option<KinectArg>,
    /// Send the avatars as Xsens MVN's Network Streamer sends suits ("Position +
    /// Orientation (Quaternion)" datagrams over UDP) to this address: to a clothcast
    /// server's MVN listener (127.0.0.1:9763 by default), which drives avatars
    /// `mvn-<this host's address>-<k>`. Avatar k is MVN character k (at most 256),
    /// all from one UDP socket, as one MVN instance streams a multi-person capture.
    #[arg(long, conflicts_with = "vmc")]
    mvn: Option<std::net::SocketAddr>,
    /// With `--kinect`: the sensor's height above the floor, metres (it stands 2 m in
    /// front of the performers' grid centre, facing them).
    #[arg(long, default_value_t = 1.0, requires = "kinect", value_parser = parse_height)]
    sensor_height: f32,
    /// With `--kinect`: the sensor's downward tilt, degrees (−45 to 45).
    #[arg(long, default_value_t = 0.0, requires = "kinect", value_parser = parse_tilt, allow_negative_numbers = true)]
    sensor_tilt: f32,
    /// With `--kinect`: leave out the floor plane (`floorClipPlane`) that a Kinect v2
    /// reports with every body frame, as bridges that do not pass it on (and Azure
    /// Kinect body tracking, which finds no floor) send.
    #[arg(long, requires = "kinect")]
    no_floor: bool,
    /// Avatars per publisher connection: more are spread over more connections, as a
    /// room's performers would be. The server limits each connection's avatars (64 by
    /// default) and messages per second (2000): 32 avatars at 30 poses a second stay
    /// well inside both. (`--vmc` sends from a socket per avatar, `--kinect` on one
    /// sensor's connection.)
    #[arg(long, default_value_t = PER_CONNECTION, value_parser = super::common::parse_positive)]
    per_connection: usize,
    /// Exit when the server cannot be reached or the connection drops, instead of
    /// reconnecting (after 0.5 s, doubling to 10 s; the clip plays on meanwhile, so
    /// the avatars come back where a live performer would be). A wrong token or a bad
    /// hello always exits.
    #[arg(long)]
    no_reconnect: bool,
}

/// Which Kinect bridge `play --kinect` imitates.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub(crate) enum KinectArg {
    /// Kinect for Windows v2 (metres, `trackingId`, `jointType`, `cameraX..Z`).
    V2,
    /// Azure Kinect body tracking (millimetres, Y down, `body_id`, `name`, `position`).
    Azure,
}

impl From<KinectArg> for KinectKind {
    fn from(k: KinectArg) -> Self {
        match k {
            KinectArg::V2 => KinectKind::V2,
            KinectArg::Azure => KinectKind::Azure,
        }
    }
}

/// Avatars `play` (by default) and `demo` drive on one publisher connection: well
/// within the server's default limits of 64 avatars and 2000 messages a second per
/// connection at 30 poses a second.
pub(crate) const PER_CONNECTION: usize = 32;

/// Most bodies `play --kinect` sends in a frame (what the server reads in one).
const KINECT_BODIES: usize = 16;

/// Metres between neighbouring avatars of [`staggered`] across the walk (X), and
/// along it (Z: the built-in clip walks ~2.6 m along Z, and turns).
const LANE: f32 = 1.5;
const ROW: f32 = 3.5;

/// The pose of avatar `k` of `n` at `t` seconds into a looping clip: the avatars
/// spread evenly over its time, and each walks it in its own place of a grid centred
/// on the origin ([`LANE`] × [`ROW`] metres), so that they do not walk through each
/// other. The clip must have frames.
pub(crate) fn staggered(clip: &crate::mocap::Clip, t: f64, k: usize, n: usize) -> Pose {
    let n = n.max(1);
    let frame = (t / f64::from(clip.frame_time)) as usize;
    let mut pose = clip.poses[(frame + k * clip.poses.len() / n) % clip.poses.len()];
    let (x, z) = place(k, n);
    pose.translation.x += x;
    pose.translation.z += z;
    pose
}

/// Where avatar `k` of `n` (n ≥ 1) walks: (x, z) metres, on a grid of ⌈√n⌉ columns
/// centred on the origin.
fn place(k: usize, n: usize) -> (f32, f32) {
    let cols = (n as f64).sqrt().ceil() as usize;
    let rows = n.div_ceil(cols);
    let centred = |i: usize, count: usize| i as f32 - (count - 1) as f32 / 2.0;
    (
        centred(k % cols, cols) * LANE,
        centred(k / cols, rows) * ROW,
    )
}

fn parse_height(s: &str) -> Result<f32, String> {
    match s.parse::<f32>() {
        Ok(h) if (0.0..=5.0).contains(&h) => Ok(h),
        _ => Err(format!("{s:?} is not a height of 0 to 5 m")),
    }
}

fn parse_tilt(s: &str) -> Result<f32, String> {
    match s.parse::<f32>() {
        Ok(t) if (-45.0..=45.0).contains(&t) => Ok(t),
        _ => Err(format!("{s:?} is not a tilt of -45 to 45 degrees")),
    }
}

/// A pose message of the canonical profile for `pose`.
pub(crate) fn pose_message(avatar: &str, pose: &Pose, t: f64) -> ClientMessage {
    ClientMessage::Pose(PoseMessage {
        avatar: avatar.to_string(),
        profile: "canonical".into(),
        timestamp: t,
        root: Some(pose.translation.to_array()),
        floor: None,
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
    let sensor = crate::mocap::SensorView {
        distance: 2.0,
        height: a.sensor_height,
        tilt: a.sensor_tilt.to_radians(),
    };
    let kinect = a.kinect.map(KinectKind::from);
    if a.mvn.is_some() {
        anyhow::ensure!(
            a.avatars <= 256,
            "--mvn sends at most 256 characters (--avatars {})",
            a.avatars
        );
    }
    if kinect.is_some() {
        anyhow::ensure!(
            a.avatars <= KINECT_BODIES,
            "--kinect sends at most {KINECT_BODIES} bodies a frame (--avatars {})",
            a.avatars
        );
        anyhow::ensure!(
            crate::protocol::valid_sensor_name(&a.prefix),
            "with --kinect, --prefix names the sensor ({})",
            crate::protocol::SENSOR_NAME_RULE
        );
    }
    runtime()?.block_on(async move {
        // where the poses go: pose messages on one WebSocket connection, VMC
        // datagrams from one UDP socket per performer, or MVN datagrams from one socket
        let unspecified = |to: std::net::SocketAddr| -> std::net::SocketAddr {
            if to.is_ipv4() {
                ([0, 0, 0, 0], 0).into()
            } else {
                (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
            }
        };
        let mut out = match (a.vmc, a.mvn) {
            (None, Some(to)) => {
                let socket = tokio::net::UdpSocket::bind(unspecified(to))
                    .await
                    .context("opening a UDP socket for MVN")?;
                PlayTo::Mvn(to, socket, 0)
            }
            (None, None) => {
                // a Kinect bridge is one connection; performers a connection per chunk
                let links = if kinect.is_some() {
                    1
                } else {
                    a.avatars.div_ceil(a.per_connection)
                };
                let link = || {
                    let sensor = kinect.map(|_| a.prefix.clone());
                    Link::new(a.url.clone(), a.token.clone(), sensor, !a.no_reconnect)
                };
                PlayTo::WebSocket((0..links).map(|_| link()).collect())
            }
            (Some(to), _) => {
                let local = unspecified(to);
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
        // a body frame carries every avatar's pose
        let poses_per_message = if kinect.is_some() {
            a.avatars as u64
        } else {
            1
        };
        // Ctrl-C or SIGTERM ends the replay as --seconds does: a goodbye to the
        // server (which logs a clean close, not a lost peer) and the summary
        let stop = super::serve::stop_signal();
        tokio::pin!(stop);
        loop {
            let t = start.elapsed().as_secs_f64();
            if a.seconds.is_some_and(|s| t >= f64::from(s)) {
                break;
            }
            match &mut out {
                PlayTo::WebSocket(links) => {
                    for (i, link) in links.iter_mut().enumerate() {
                        let mut batch = Vec::with_capacity(a.per_connection);
                        match kinect {
                            // one body frame with every avatar's body, as a bridge sends it
                            Some(kind) => {
                                let bodies: Vec<_> = (0..a.avatars)
                                    .map(|k| {
                                        let pose = staggered(&clip, t, k, a.avatars);
                                        (k.to_string(), skeleton.world_frames(&pose))
                                    })
                                    .collect();
                                let frame = crate::mocap::body_frame_json(
                                    kind,
                                    &bodies,
                                    &sensor,
                                    !a.no_floor,
                                );
                                batch.push(Message::text(frame.to_string()));
                            }
                            None => {
                                let first = i * a.per_connection;
                                for k in first..(first + a.per_connection).min(a.avatars) {
                                    let pose = staggered(&clip, t, k, a.avatars);
                                    let m = pose_message(&format!("{}-{k}", a.prefix), &pose, t);
                                    batch.push(Message::Binary(m.to_msgpack()?.into()));
                                }
                            }
                        }
                        sent += poses_per_message * link.send_all(batch).await?;
                    }
                }
                PlayTo::Vmc(to, sockets) => {
                    for (k, socket) in sockets.iter().enumerate() {
                        let pose = staggered(&clip, t, k, a.avatars);
                        let packet = crate::mocap::vmc_packet(&pose, &skeleton, t)?;
                        socket
                            .send_to(&packet, *to)
                            .await
                            .with_context(|| format!("sending VMC to {to}"))?;
                        sent += 1;
                    }
                }
                PlayTo::Mvn(to, socket, sample) => {
                    // one sample of every character per tick, as MVN streams them
                    *sample = sample.wrapping_add(1);
                    let ms = (t * 1000.0) as u32;
                    for k in 0..a.avatars {
                        let pose = staggered(&clip, t, k, a.avatars);
                        let d = crate::mocap::mvn_datagram(&pose, &skeleton, k as u8, *sample, ms)?;
                        socket
                            .send_to(&d, *to)
                            .await
                            .with_context(|| format!("sending MVN to {to}"))?;
                        sent += 1;
                    }
                }
            }
            // ticks missed (a slow connection attempt, a busy machine) are not made up
            // for with a burst of stale poses, which could also trip the server's
            // message rate limit: the next tick is now, the ones after a period apart
            next = (next + period).max(tokio::time::Instant::now());
            let waited = async {
                match &mut out {
                    PlayTo::WebSocket(links) => {
                        let heard = links.iter_mut().map(|link| link.listen_until(next));
                        for r in futures_util::future::join_all(heard).await {
                            r?;
                        }
                    }
                    PlayTo::Vmc(..) | PlayTo::Mvn(..) => tokio::time::sleep_until(next).await,
                }
                anyhow::Ok(())
            };
            tokio::select! {
                r = waited => r?,
                r = &mut stop => {
                    r.context("listening for Ctrl-C and SIGTERM")?;
                    break;
                }
            }
        }
        // a goodbye, so that the server logs a clean close
        if let PlayTo::WebSocket(links) = &mut out {
            for client in links.iter_mut().filter_map(|link| link.client.take()) {
                client.close().await;
            }
        }
        let over = match &out {
            PlayTo::WebSocket(links) => {
                let connections: u64 = links.iter().map(|l| l.connections).sum();
                let unsent: u64 = links.iter().map(|l| l.unsent).sum();
                // a run that never reached the server is a failure (as for `watch`),
                // so that a script or a load test does not count it as played
                if connections == 0 {
                    let last = links.iter().find_map(|l| l.last_error.as_deref());
                    anyhow::bail!(
                        "could not connect to {} in --seconds: no pose sent (last: {})",
                        a.url,
                        last.unwrap_or("no attempt finished")
                    );
                }
                let links = links.len() as u64;
                match (connections, unsent) {
                    (1, 0) => String::new(),
                    (c, 0) if c == links => format!(" over {c} connections"),
                    (c, u) => format!(
                        " over {c} connections ({} poses not sent while disconnected)",
                        u * poses_per_message
                    ),
                }
            }
            PlayTo::Vmc(..) | PlayTo::Mvn(..) => String::new(),
        };
        super::common::say(format_args!(
            "sent {sent} poses for {} avatars in {:.1} s{over}",
            a.avatars,
            start.elapsed().as_secs_f32()
        ));
        anyhow::Ok(())
    })
}

/// Where `clothcast play` sends its poses.
enum PlayTo {
    /// Pose messages on publisher connections, each driving its share of the avatars.
    WebSocket(Vec<Link>),
    /// VMC datagrams to this address, one socket (one performer) per avatar.
    Vmc(std::net::SocketAddr, Vec<tokio::net::UdpSocket>),
    /// MVN datagrams to this address from one socket, every avatar a character, and
    /// the last sample counter sent.
    Mvn(std::net::SocketAddr, tokio::net::UdpSocket, u32),
}

/// How long one connection attempt may take (a host that vanished answers nothing,
/// and TCP alone would wait minutes).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A publisher connection that is made again after it drops: while it is down the
/// poses of those ticks are not sent (a live performer's poses would be stale by the
/// time it is back, and the server wants only the latest anyway) and it is tried
/// again after each of a [`Backoff`]'s waits. The server's `error` replies are shown,
/// at most one line a second.
struct Link {
    url: String,
    token: Option<String>,
    /// The sensor name the `hello` gives (Kinect body frames).
    sensor: Option<String>,
    reconnect: bool,
    client: Option<Client>,
    backoff: Backoff,
    /// No connection attempt before this.
    retry_at: tokio::time::Instant,
    /// Connections made, and poses not sent while there was none.
    connections: u64,
    unsent: u64,
    /// When an `error` reply was last shown, and how many were not shown since.
    shown: Option<Instant>,
    hidden: u64,
    /// Why the connection last failed or dropped.
    last_error: Option<String>,
}

impl Link {
    fn new(url: String, token: Option<String>, sensor: Option<String>, reconnect: bool) -> Self {
        Self {
            url,
            token,
            sensor,
            reconnect,
            client: None,
            backoff: Backoff::default(),
            retry_at: tokio::time::Instant::now(),
            connections: 0,
            unsent: 0,
            shown: None,
            hidden: 0,
            last_error: None,
        }
    }

    /// Sends these messages, connecting first if the link is down and its wait is
    /// over; returns how many were sent. Fails only when the connection cannot come
    /// back ([`ClientError::is_final`], or reconnecting is off).
    async fn send_all(&mut self, messages: Vec<Message>) -> anyhow::Result<u64> {
        let n = messages.len() as u64;
        if self.client.is_none() && tokio::time::Instant::now() >= self.retry_at {
            let (token, sensor) = (self.token.clone(), self.sensor.clone());
            let connect = Client::connect_with(&self.url, Role::Publisher, token, sensor);
            match tokio::time::timeout(CONNECT_TIMEOUT, connect).await {
                Ok(Ok(c)) => {
                    self.connections += 1;
                    if self.connections > 1 {
                        eprintln!("{}: connected again", self.url);
                    }
                    self.backoff.reset();
                    self.client = Some(c);
                }
                Ok(Err(e)) => self.lost(e)?,
                Err(_) => self.lost(ClientError::Silent(CONNECT_TIMEOUT))?,
            }
        }
        let Some(client) = &mut self.client else {
            self.unsent += n;
            return Ok(0);
        };
        let mut sent = 0;
        for m in messages {
            if let Err(e) = client.send_raw(m).await {
                self.unsent += n - sent;
                self.lost(e)?;
                return Ok(sent);
            }
            sent += 1;
        }
        if let Err(e) = client.keepalive().await {
            self.lost(e)?;
        }
        Ok(sent)
    }

    /// Reads the server's replies until `until`: shows its errors, notices a close.
    async fn listen_until(&mut self, until: tokio::time::Instant) -> anyhow::Result<()> {
        while let Some(client) = &mut self.client {
            tokio::select! {
                _ = tokio::time::sleep_until(until) => return Ok(()),
                m = client.next() => match m {
                    // "closed" precedes the close frame, which says it again with its code
                    Ok(ServerMessage::Error { code, message }) if code != "closed" => {
                        self.show(&code, &message)
                    }
                    Ok(_) => {}
                    Err(e) => self.lost(e)?,
                }
            }
        }
        tokio::time::sleep_until(until).await;
        Ok(())
    }

    /// Shows a server error, at most one a second (a full server answers every pose).
    fn show(&mut self, code: &str, message: &str) {
        if self
            .shown
            .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
        {
            self.hidden += 1;
            return;
        }
        let more = match std::mem::take(&mut self.hidden) {
            0 => String::new(),
            h => format!(" ({h} more since the last shown)"),
        };
        let (code, message) = (
            crate::protocol::Escaped(code),
            crate::protocol::Escaped(message),
        );
        eprintln!("{}: server error {code}: {message}{more}", self.url);
        self.shown = Some(Instant::now());
    }

    /// The connection failed or dropped with `e`: schedule the next try, or fail when
    /// trying again cannot help or is not wanted.
    fn lost(&mut self, e: ClientError) -> anyhow::Result<()> {
        self.client = None;
        self.last_error = Some(e.to_string());
        if !self.reconnect || e.is_final() {
            return Err(anyhow::Error::new(e).context(format!("publishing to {}", self.url)));
        }
        let wait = self.backoff.next_delay();
        self.retry_at = tokio::time::Instant::now() + wait;
        eprintln!("{}: {e}; trying again in {wait:.1?}", self.url);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn avatars_walk_in_places_of_their_own_around_the_origin() {
        for n in 1..=256 {
            let places: Vec<(f32, f32)> = (0..n).map(|k| place(k, n)).collect();
            for (i, a) in places.iter().enumerate() {
                for b in &places[..i] {
                    let apart = (a.0 - b.0).abs() >= LANE - 1e-4 || (a.1 - b.1).abs() >= ROW - 1e-4;
                    assert!(apart, "n = {n}: {a:?} and {b:?} share a place");
                }
            }
            // centred across, and no wider than a square grid needs
            let (lo, hi) = places.iter().fold((f32::MAX, f32::MIN), |(lo, hi), p| {
                (lo.min(p.0), hi.max(p.0))
            });
            assert!((lo + hi).abs() < 1e-4, "n = {n}: {lo}..{hi}");
            assert!(
                hi - lo <= (n as f32).sqrt().ceil() * LANE,
                "n = {n}: {lo}..{hi}"
            );
        }
        assert_eq!(place(0, 1), (0.0, 0.0));
    }

    /// The demo's walkers, through the whole built-in clip: no two pelvises come
    /// within half a metre of each other (they walked through each other before).
    #[test]
    fn the_demos_walkers_keep_apart() {
        let skeleton = Skeleton::from_proportions(&crate::body::BodyShape::default().proportions());
        let clip = crate::mocap::Clip::from_bvh_text(crate::bake::DEFAULT_CLIP, None, &skeleton)
            .expect("built-in clip");
        for n in [2, 4, 9] {
            let mut closest = f32::MAX;
            for f in 0..clip.poses.len() {
                let t = f as f64 * f64::from(clip.frame_time);
                let at: Vec<glam::Vec3> = (0..n)
                    .map(|k| staggered(&clip, t, k, n).translation * glam::Vec3::new(1.0, 0.0, 1.0))
                    .collect();
                for (i, a) in at.iter().enumerate() {
                    for b in &at[..i] {
                        closest = closest.min(a.distance(*b));
                    }
                }
            }
            assert!(closest > 0.5, "{n} walkers come within {closest} m");
        }
    }
}
