//! `clothcast watch`: a viewer in the terminal that decodes every frame and reports
//! per-avatar rate, bandwidth and latency each second, and comes back after the server
//! restarts or the network drops.

use std::collections::HashMap;
use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;

use super::record::Recorder;
use super::serve::runtime;
use crate::client::{Backoff, Client, ClientError, Viewer};
use crate::protocol::{ClientMessage, Role, ServerMessage, SubscribeMessage};

/// Arguments of `clothcast watch`.
#[derive(Args, Debug)]
pub(crate) struct WatchArgs {
    /// Server URL.
    #[arg(long, default_value = "ws://127.0.0.1:8470/ws")]
    url: String,
    /// Viewer token.
    #[arg(long, env = "CLOTHCAST_VIEWER_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Avatars to watch (default: all).
    #[arg(long = "avatar")]
    avatars: Vec<String>,
    /// Stop after this many seconds.
    #[arg(long, value_parser = super::common::parse_seconds)]
    seconds: Option<f32>,
    /// Exit when the server cannot be reached or the connection drops, instead of
    /// reconnecting (after 0.5 s, doubling to 10 s). A wrong token or a bad hello
    /// always exits.
    #[arg(long)]
    no_reconnect: bool,
    /// Also save every watched avatar's stream into this directory (created if
    /// missing): per avatar, the garment as a PC2 point cache (world frame, a sample
    /// per tick) with an OBJ of its mesh, the motion as BVH (canonical skeleton,
    /// metres), and the animated body as glTF. Stop with Ctrl-C, SIGTERM or --seconds
    /// so that the glTF files are written (the PC2 and the BVH read however the
    /// recording ends). clients/blender/clothcast_import.py imports a take into Blender.
    #[arg(long, value_name = "DIR")]
    record: Option<std::path::PathBuf>,
    /// With --record: when a take ends, also write it as one USD text layer
    /// (`ID.usda`: the garment's points per frame and the body as a UsdSkel skinned
    /// mesh with its animation), for Omniverse, Unreal's USD stage or Houdini.
    /// About 2.5 times the PC2's size, as text.
    #[arg(long, requires = "record")]
    usd: bool,
}

/// What `clothcast watch` keeps per avatar between its reports.
struct WatchStats {
    /// Frames decoded when the interval began.
    frames: u64,
    /// Bytes of this avatar's `frame` messages this interval, as they came over the
    /// WebSocket (envelope and codec frames).
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
    fn frame(&mut self, seq: u32, delay: f64, size: usize) {
        self.bytes += size as u64;
        self.delay_sum += delay;
        self.delays += 1;
        self.delay_max = self.delay_max.max(delay);
        // a stream that restarts (another garment, a restarted server) counts from 0
        // again: no gap
        if let Some(last) = self.last_seq {
            let gap = seq.wrapping_sub(last);
            if (1..1 << 20).contains(&gap) {
                self.missed += u64::from(gap - 1);
            }
        }
        self.last_seq = Some(seq);
    }

    /// Starts the next report interval at this frame total.
    fn next_interval(&mut self, frames: u64) {
        (self.frames, self.bytes) = (frames, 0);
        (self.delay_sum, self.delays, self.delay_max) = (0.0, 0, f64::NEG_INFINITY);
    }
}

/// The reports of one `watch` run, across its connections.
struct Report {
    start: Instant,
    last: Instant,
    /// The smallest arrival-minus-tick-time seen on the current connection: latency is
    /// reported above it, since the two clocks are not shared (a restarted server
    /// starts its clock again, so this starts again with each connection).
    fastest: f64,
    stats: HashMap<String, WatchStats>,
    /// The avatars `--avatar` named (empty: all): each gets a line, a named one that
    /// sends nothing too, so that a typo or a performer who has not started shows.
    named: Vec<String>,
    /// When "no avatar is streaming" was last said (it is said every 10 s while true,
    /// so that a watch of an empty server says it is connected and waiting).
    said_empty: Option<Instant>,
}

impl Report {
    /// A decoded frame of `id` (the viewer's last frame of it), its message `size`
    /// bytes on the wire.
    fn frame(&mut self, viewer: &Viewer, id: String, size: usize) {
        if let Some(f) = viewer.avatars.get(&id).and_then(|v| v.last.as_ref()) {
            let d = self.start.elapsed().as_secs_f64() - f.timestamp;
            self.fastest = self.fastest.min(d);
            self.stats.entry(id).or_default().frame(f.seq, d, size);
        }
    }

    /// Prints a line per avatar once a second (an error: stdout cannot be written).
    fn maybe_print(&mut self, viewer: &Viewer) -> std::io::Result<()> {
        if self.last.elapsed() < Duration::from_secs(1) {
            return Ok(());
        }
        self.print(viewer, &mut std::io::stdout().lock())
    }

    /// Writes the lines of the interval that ends now to `out`.
    fn print(&mut self, viewer: &Viewer, out: &mut impl Write) -> std::io::Result<()> {
        let dt = self.last.elapsed().as_secs_f64();
        self.last = Instant::now();
        // avatars that left start from zero if they come back
        self.stats.retain(|id, _| viewer.avatars.contains_key(id));
        if viewer.avatars.is_empty() && self.named.is_empty() {
            if self
                .said_empty
                .is_none_or(|t| t.elapsed() >= Duration::from_secs(10))
            {
                self.said_empty = Some(Instant::now());
                writeln!(out, "no avatar is streaming (yet)")?;
            }
            return out.flush();
        }
        self.said_empty = None;
        let mut ids: Vec<_> = viewer.avatars.keys().cloned().collect();
        ids.extend(
            self.named
                .iter()
                .filter(|n| !viewer.avatars.contains_key(*n))
                .cloned(),
        );
        ids.sort();
        ids.dedup();
        for id in ids {
            let Some(v) = viewer.avatars.get(&id) else {
                let id = id.escape_debug().to_string();
                writeln!(
                    out,
                    "{id:>16}: no frames (not streaming, or no such avatar)"
                )?;
                continue;
            };
            let st = self.stats.entry(id.clone()).or_default();
            // an outfit's garments inner to outer, `pants+tshirt`
            let garment = v
                .assets()
                .map(|a| viewer.garments.get(a).map_or("", String::as_str))
                .collect::<Vec<_>>()
                .join("+");
            let latency = if st.delays > 0 {
                format!(
                    "latency {:5.1} ms (max {:5.1})",
                    (st.delay_sum / st.delays as f64 - self.fastest) * 1000.0,
                    (st.delay_max - self.fastest) * 1000.0
                )
            } else {
                format!("latency {:>22}", "-")
            };
            // escaped: names come from the server (and, through it, from publishers);
            // a control character must not reach the terminal
            let (id, garment) = (
                id.escape_debug().to_string(),
                garment.escape_debug().to_string(),
            );
            writeln!(
                out,
                "{id:>16}: {garment:>8} {:5.1} fps  {:7.1} kbit/s  {latency}  missed {}  {} vertices  frame {}",
                v.frames.saturating_sub(st.frames) as f64 / dt,
                st.bytes as f64 * 8.0 / 1000.0 / dt,
                st.missed,
                v.garments().map(|g| g.len() / 3).sum::<usize>(),
                v.last.as_ref().map_or(0, |f| f.seq)
            )?;
            st.next_interval(v.frames);
        }
        out.flush()
    }
}

pub(crate) fn run_watch(a: WatchArgs) -> anyhow::Result<()> {
    let mut recorder = a
        .record
        .as_deref()
        .map(|dir| Recorder::new(dir, a.usd))
        .transpose()?;
    let watched = runtime()?.block_on(watch(&a, recorder.as_mut()));
    // whatever ended the watch, the recordings end cleanly
    let recorded = recorder.as_mut().map_or(Ok(()), Recorder::finish);
    watched.and(recorded)
}

/// Watches until `--seconds`, a signal, or a final error.
async fn watch(a: &WatchArgs, mut recorder: Option<&mut Recorder>) -> anyhow::Result<()> {
    let stop = super::serve::stop_signal();
    tokio::pin!(stop);
    let start = Instant::now();
    let deadline = a
        .seconds
        .map(|s| tokio::time::Instant::now() + Duration::from_secs_f32(s.clamp(0.0, 1e7)));
    // the body pose only to record the body's animation: the garment's codec frames
    // carry the bones anyway; frames in the compact form (~65 bytes less each)
    // (the assets of earlier connections are kept: a reconnect names them in `have`,
    // and the server does not send them again)
    let pose = recorder.is_some();
    let subscribe = |have: Vec<String>| {
        ClientMessage::Subscribe(SubscribeMessage {
            avatars: (!a.avatars.is_empty()).then(|| a.avatars.clone()),
            pose,
            compact: true,
            have: (!have.is_empty()).then_some(have),
            ..Default::default()
        })
    };
    let mut viewer = Viewer::default();
    let mut report = Report {
        start,
        last: start,
        fastest: f64::INFINITY,
        stats: HashMap::new(),
        named: a.avatars.clone(),
        said_empty: None,
    };
    let mut backoff = Backoff::default();
    let mut connections = 0u64;
    loop {
        // None: --seconds ran out while connecting
        let mut last = String::new();
        let connecting = async {
            if a.no_reconnect {
                return Some(Client::connect(&a.url, Role::Viewer, a.token.clone()).await);
            }
            let retry = |e: &ClientError, wait: Duration| {
                eprintln!("{}: {e}; trying again in {wait:.1?}", a.url);
                last = e.to_string();
            };
            let client = Client::connect_retrying(
                &a.url,
                Role::Viewer,
                a.token.clone(),
                None,
                &mut backoff,
                retry,
            );
            match deadline {
                Some(d) => tokio::time::timeout_at(d, client).await.ok(),
                None => Some(client.await),
            }
        };
        let client = tokio::select! {
            c = connecting => c,
            _ = &mut stop => return anyhow::Ok(()),
        };
        let client = match client {
            Some(c) => c,
            None if connections > 0 => break,
            None => anyhow::bail!("could not connect to {} in --seconds (last: {last})", a.url),
        };
        let mut client = client.with_context(|| format!("connecting to {}", a.url))?;
        connections += 1;
        if connections > 1 {
            eprintln!("{}: connected again", a.url);
        }
        client.send(&subscribe(viewer.held_assets())).await?;
        if let Some(r) = recorder.as_deref_mut() {
            r.set_tick_hz(client.tick_hz)?;
        }
        // a new connection starts every stream again from a keyframe
        viewer.restart();
        report.fastest = f64::INFINITY;
        let lost = loop {
            if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
                client.close().await;
                return anyhow::Ok(());
            }
            let m = tokio::select! {
                m = tokio::time::timeout(Duration::from_secs(1), client.next()) => m,
                _ = &mut stop => {
                    client.close().await;
                    return anyhow::Ok(());
                }
            };
            if let (Some(r), Ok(Ok(m))) = (recorder.as_deref_mut(), &m) {
                match m {
                    ServerMessage::Asset(asset) => r.asset(asset),
                    ServerMessage::Gone { avatar } => r.end(avatar)?,
                    _ => {}
                }
            }
            let applied = match m {
                Ok(Ok(m)) => viewer.apply(m),
                // a message that does not parse: said and skipped, the link kept
                Ok(Err(e @ (ClientError::Protocol(_) | ClientError::Stream(_)))) => {
                    eprintln!("{}: {e}; skipped", a.url);
                    Ok(None)
                }
                Ok(Err(e)) => break e,
                Err(_) => Ok(None),
            };
            match applied {
                Ok(Some(id)) => {
                    if let Some(r) = recorder.as_deref_mut() {
                        r.frame(&viewer, &id)?;
                    }
                    report.frame(&viewer, id, client.last_message_bytes())
                }
                Ok(None) => {}
                // "closed" precedes the close frame, which says it again with its code
                Err(ClientError::Refused { code, .. }) if code == "closed" => {}
                // its garment holds its last frame until the keyframe asked for below
                Err(e @ ClientError::Frame { .. }) => {
                    eprintln!("{}: {e}; asking for a keyframe", a.url)
                }
                // its subscription refused: nothing will come
                Err(e) if matches!(&e, ClientError::Refused { code, .. } if code == "bad_subscription") =>
                {
                    return Err(e.into());
                }
                // an asset or frame that cannot be used, another error the server
                // reports (a refusal that ends the link comes with its close code):
                // said and skipped, the other avatars stream on
                Err(e @ (ClientError::Stream(_) | ClientError::Refused { .. })) => {
                    eprintln!("{}: {e}; skipped", a.url)
                }
                Err(e) => return Err(e.into()),
            }
            // a stream whose frame was refused (corrupt, or its reference missing)
            // starts again from a keyframe
            if let Some(m) = viewer.resync()
                && let Err(e) = client.send(&m).await
            {
                break e;
            }
            if let Err(e) = client.keepalive().await {
                break e;
            }
            match report.maybe_print(&viewer) {
                Ok(()) => {}
                // nobody reads the table any more (`watch | head`): done
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                    client.close().await;
                    return anyhow::Ok(());
                }
                Err(e) => {
                    client.close().await;
                    return Err(anyhow::Error::new(e).context("writing to stdout"));
                }
            }
        };
        if a.no_reconnect || lost.is_final() {
            return Err(anyhow::Error::new(lost).context(format!("watching {}", a.url)));
        }
        eprintln!("{}: connection lost: {lost}", a.url);
    }
    anyhow::Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(named: &[&str]) -> Report {
        Report {
            start: Instant::now(),
            last: Instant::now(),
            fastest: f64::INFINITY,
            stats: HashMap::new(),
            named: named.iter().map(|n| (*n).to_owned()).collect(),
            said_empty: None,
        }
    }

    fn printed(r: &mut Report) -> String {
        let mut out = Vec::new();
        r.print(&Viewer::default(), &mut out).expect("written");
        String::from_utf8(out).expect("text")
    }

    #[test]
    fn a_watch_with_nothing_streaming_says_so_every_ten_seconds() {
        let mut all = report(&[]);
        assert_eq!(printed(&mut all), "no avatar is streaming (yet)\n");
        // said once, not every second
        assert_eq!(printed(&mut all), "");
        all.said_empty = Instant::now().checked_sub(Duration::from_secs(11));
        assert_eq!(printed(&mut all), "no avatar is streaming (yet)\n");
    }

    #[test]
    fn a_named_avatar_without_frames_has_its_line_each_interval() {
        let mut named = report(&["walker-1", "nobody\u{1b}[2J"]);
        for _ in 0..2 {
            let out = printed(&mut named);
            let lines: Vec<&str> = out.lines().map(str::trim_start).collect();
            // in order, the control character escaped
            assert_eq!(
                lines,
                [
                    "nobody\\u{1b}[2J: no frames (not streaming, or no such avatar)",
                    "walker-1: no frames (not streaming, or no such avatar)",
                ],
                "{out}"
            );
        }
    }
}
