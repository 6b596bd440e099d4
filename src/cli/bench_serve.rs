//! `clothcast bench serve`: the server on loopback with publishers and viewers in the
//! same run: sustained avatars at the tick rate, pose-in → frame-out latency (p50, p99,
//! measured at the viewers on the publisher's clock, so it includes the wait for the
//! next tick), and bytes per second out.

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;

use super::play::pose_message;
use super::serve::{load_db, runtime};
use crate::bake::DEFAULT_CLIP;
use crate::client::Client;
use crate::codec::Effort;
use crate::engine::EngineConfig;
use crate::mocap::Clip;
use crate::net::{ServerConfig, start};
use crate::protocol::{ClientMessage, Role, ServerMessage, SubscribeMessage};
use crate::skeleton::Skeleton;

/// Arguments of `clothcast bench serve`.
#[derive(Args, Debug)]
pub(crate) struct ServeBench {
    /// Avatar counts to try (each 1 to 2048; the server is let drive that many).
    #[arg(long, value_delimiter = ',', default_values_t = [10usize, 25, 50, 100, 200],
          value_parser = super::common::parse_count::<2048>)]
    avatars: Vec<usize>,
    /// Viewers, each subscribed to every avatar (or to `--watch` of them); 1 to 256, the
    /// server's default `max_viewers`.
    #[arg(long, default_value_t = 2, value_parser = super::common::parse_count::<256>)]
    viewers: usize,
    /// Avatars each viewer subscribes to, as headsets in a room subscribe to the
    /// performers near them: viewer i watches the i-th block of that many (wrapping
    /// round); the server synthesises and encodes only watched avatars. Default: all.
    #[arg(long, value_parser = super::common::parse_count::<2048>)]
    watch: Option<usize>,
    /// The server's tick rate, Hz (publishers send at 30 Hz whatever it is; a faster
    /// tick re-synthesises the latest pose, a slower one drops poses).
    #[arg(long, default_value_t = 30.0)]
    tick_hz: f32,
    /// Seconds measured per avatar count (after three seconds of warm-up, in which an
    /// overloaded server has dropped to one tick slot: see `--fixed-slots`).
    #[arg(long, default_value_t = 5.0, value_parser = super::common::parse_seconds)]
    seconds: f32,
    /// Example database (default: the default database).
    #[arg(long)]
    db: Option<std::path::PathBuf>,
    /// The server's garment encoder effort (`fast`, `small`, `fastest`; default: the
    /// server's default).
    #[arg(long, value_parser = parse_effort)]
    codec_effort: Option<Effort>,
    /// Groups the server sends each tick's frames in (default: the server's default;
    /// 1 sends them all when the tick is done).
    #[arg(long)]
    send_groups: Option<usize>,
    /// Slots per tick (default: the server's default; 1 synthesises every avatar at the
    /// start of each tick).
    #[arg(long)]
    tick_slots: Option<u32>,
    /// Keep the tick slots whatever the load (`engine.adapt_tick_slots = false`; by
    /// default the server drops to one slot while its ticks run late).
    #[arg(long)]
    fixed_slots: bool,
    /// The viewers subscribe with the body pose in their frames (default: without it,
    /// as the web viewer does; the codec frames' bones pose the body).
    #[arg(long)]
    pose: bool,
    /// The viewers subscribe to `frame` messages in the map form (default: the compact
    /// form, as the web viewer and `clothcast watch` do).
    #[arg(long)]
    map_frames: bool,
    /// SOR settings other than the server's defaults (to compare their cost).
    #[command(flatten)]
    synth: super::common::SynthArgs,
}

fn parse_effort(s: &str) -> Result<Effort, String> {
    match s {
        "fast" => Ok(Effort::Fast),
        "small" => Ok(Effort::Small),
        "fastest" => Ok(Effort::Fastest),
        other => Err(format!("unknown effort {other:?} (fast, small or fastest)")),
    }
}

/// CPU seconds this process's engine threads (the tick thread and the rayon workers
/// it runs synthesis and encoding on) have used, from Linux's per-thread scheduler
/// statistics; `None` where those are not readable.
fn engine_cpu_seconds() -> Option<f64> {
    let mut ns = 0u64;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let dir = task.ok()?.path();
        let Ok(comm) = std::fs::read_to_string(dir.join("comm")) else {
            continue; // the thread ended meanwhile
        };
        if !(comm.starts_with("clothcast-tick") || comm.starts_with("clothcast-work")) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(dir.join("schedstat")) else {
            continue;
        };
        ns += stat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(ns as f64 * 1e-9)
}

/// Prints the server's CPU per pose message read (MessagePack and JSON, 22 joints),
/// next to serde's internally tagged enum reading the same bytes (what the server did
/// before reading poses directly; see `protocol`): the fastest of 5 rounds of 5 000.
fn parse_figures(pose: &crate::skeleton::Pose) -> anyhow::Result<()> {
    let message = pose_message("bench-0", pose, 1.0);
    let packed = message.to_msgpack()?;
    let json = serde_json::to_string(&message)?;
    let fastest = |f: &dyn Fn() -> bool| -> anyhow::Result<f64> {
        let mut best = f64::INFINITY;
        for _ in 0..5 {
            let t = Instant::now();
            for _ in 0..5000 {
                anyhow::ensure!(f(), "a bench pose did not read");
            }
            best = best.min(t.elapsed().as_secs_f64() / 5000.0 * 1e6);
        }
        Ok(best)
    };
    let ours = fastest(&|| ClientMessage::from_msgpack(std::hint::black_box(&packed)).is_ok())?;
    let serde =
        fastest(&|| rmp_serde::from_slice::<ClientMessage>(std::hint::black_box(&packed)).is_ok())?;
    let ours_json = fastest(&|| ClientMessage::from_json(std::hint::black_box(&json)).is_ok())?;
    let serde_json =
        fastest(&|| serde_json::from_str::<ClientMessage>(std::hint::black_box(&json)).is_ok())?;
    outln!(
        "reading one pose message (22 joints): MessagePack ({} bytes) {ours:.1} µs, JSON ({} bytes) {ours_json:.1} µs; serde's tagged enum on the same bytes {serde:.1} and {serde_json:.1} µs",
        packed.len(),
        json.len()
    );
    Ok(())
}

pub(crate) fn run(b: ServeBench) -> anyhow::Result<()> {
    anyhow::ensure!(
        b.tick_hz.is_finite() && (1.0..=240.0).contains(&b.tick_hz),
        "--tick-hz must be between 1 and 240"
    );
    let db = load_db(b.db.as_ref())?;
    let clip = Clip::from_bvh_text(
        DEFAULT_CLIP,
        None,
        &Skeleton::from_rest_positions(db.body.skeleton),
    )?;
    let clip = Arc::new(clip);
    parse_figures(&clip.poses[0])?;
    let watching = match b.watch {
        Some(k) => format!("each subscribed to {k} avatars (viewer i the i-th block)"),
        None => "subscribed to all avatars".to_string(),
    };
    outln!(
        "clothcast server on loopback, {} garment vertices, {} viewers {watching}{}, {} Hz tick in {} slots{}, encoder effort {}, frames sent in {} groups per tick, this machine",
        db.vertex_count(),
        b.viewers,
        match (b.pose, b.map_frames) {
            (true, false) => " with the body pose, compact frames",
            (false, false) => " without the body pose, compact frames",
            (true, true) => " with the body pose, map frames",
            (false, true) => " without the body pose, map frames",
        },
        b.tick_hz,
        b.tick_slots.unwrap_or(EngineConfig::default().tick_slots),
        if b.fixed_slots {
            " (fixed)"
        } else {
            " (one while late; `slots`: those at the end)"
        },
        format!(
            "{:?}",
            b.codec_effort
                .unwrap_or(EngineConfig::default().codec_effort)
        )
        .to_lowercase(),
        b.send_groups.unwrap_or(ServerConfig::default().send_groups)
    );
    outln!(
        "{:>8} | {:>12} {:>9} | {:>9} {:>9} | {:>11} | {:>14} {:>12} {:>10} {:>6}",
        "avatars",
        "frames/s/vw",
        "sustained",
        "p50 ms",
        "p99 ms",
        "Mbit/s out",
        "engine ms/frame",
        "engine cores",
        "keyframes",
        "slots"
    );
    runtime()?.block_on(async move {
        for &n in &b.avatars {
            let mut synth = EngineConfig::default().synth;
            b.synth.apply(&mut synth);
            let config = ServerConfig {
                bind: "127.0.0.1:0".parse()?,
                open: true,
                viewer_queue: 16,
                send_groups: b.send_groups.unwrap_or(ServerConfig::default().send_groups),
                engine: EngineConfig {
                    tick_hz: b.tick_hz,
                    tick_slots: b.tick_slots.unwrap_or(EngineConfig::default().tick_slots),
                    adapt_tick_slots: !b.fixed_slots,
                    codec_effort: b
                        .codec_effort
                        .unwrap_or(EngineConfig::default().codec_effort),
                    synth,
                    max_avatars: n.max(EngineConfig::default().max_avatars),
                    ..EngineConfig::default()
                },
                ..ServerConfig::default()
            };
            // avatars per publisher connection: within the server's limits on avatars
            // and (with half to spare) messages per second per connection, as a room
            // of performers would be (the defaults give 33)
            let per_publisher = config
                .max_avatars_per_publisher
                .min((f64::from(config.max_messages_per_second) / 30.0 / 2.0) as usize)
                .max(1);
            let server = start(Arc::clone(&db), config).await?;
            let url = format!("ws://{}/ws", server.addr);
            let t0 = Instant::now();
            // publishers: every avatar at 30 Hz, timestamps on our clock. Each avatar
            // sends at its own phase of the 30 Hz period (the golden-ratio sequence,
            // so every publisher's avatars spread over the whole period), as performers
            // in a room do: none is in step with the server's tick or with another
            let period = 1.0 / 30.0;
            let mut publishers = Vec::new();
            for first in (0..n).step_by(per_publisher) {
                let (url, clip) = (url.clone(), Arc::clone(&clip));
                let mut avatars: Vec<(f64, usize)> = (first..(first + per_publisher).min(n))
                    .map(|k| ((k as f64 * 0.618_033_988_749_895).fract() * period, k))
                    .collect();
                avatars.sort_by(|a, b| a.0.total_cmp(&b.0));
                publishers.push(tokio::spawn(async move {
                    let mut c = Client::connect(&url, Role::Publisher, None).await?;
                    let start = tokio::time::Instant::now();
                    for cycle in 0u32.. {
                        for &(phase, k) in &avatars {
                            let at = f64::from(cycle) * period + phase;
                            tokio::time::sleep_until(start + Duration::from_secs_f64(at)).await;
                            let t = t0.elapsed().as_secs_f64();
                            let frame = (t / f64::from(clip.frame_time)) as usize;
                            let f = (frame + k * 97) % clip.poses.len();
                            c.send(&pose_message(&format!("bench-{k}"), &clip.poses[f], t))
                                .await?;
                        }
                    }
                    anyhow::Ok(())
                }));
            }
            let warm = Duration::from_secs(3);
            let measure = Duration::from_secs_f32(b.seconds);
            let mut viewers = Vec::new();
            let (pose, compact) = (b.pose, !b.map_frames);
            for v in 0..b.viewers {
                let url = url.clone();
                let avatars = b.watch.map(|k| {
                    (0..k.min(n))
                        .map(|j| format!("bench-{}", (v * k + j) % n))
                        .collect()
                });
                viewers.push(tokio::spawn(async move {
                    let mut c = Client::connect(&url, Role::Viewer, None).await?;
                    c.send(&ClientMessage::Subscribe(SubscribeMessage {
                        avatars,
                        pose,
                        compact,
                        ..Default::default()
                    }))
                    .await?;
                    let (mut frames, mut bytes, mut lat) = (0u64, 0u64, Vec::new());
                    let start = Instant::now();
                    while start.elapsed() < warm + measure {
                        let m = match tokio::time::timeout(Duration::from_millis(500), c.next())
                            .await
                        {
                            Ok(m) => m?,
                            Err(_) => continue,
                        };
                        if let ServerMessage::Frame(f) = m
                            && start.elapsed() >= warm
                        {
                            frames += 1;
                            // the whole message as it came (it used to be
                            // estimated as the payloads plus 64 bytes)
                            bytes += c.last_message_bytes() as u64;
                            lat.push(t0.elapsed().as_secs_f64() - f.pose_timestamp);
                        }
                    }
                    anyhow::Ok((frames, bytes, lat))
                }));
            }
            // the engine's CPU per garment frame over the measured window (the viewers
            // measure the same window: warm-up first)
            tokio::time::sleep(warm).await;
            let (cpu0, made0, keys0) = (
                engine_cpu_seconds(),
                server.avatar_frames(),
                server.keyframes(),
            );
            tokio::time::sleep(measure).await;
            let (cpu1, made1, keys1, slots) = (
                engine_cpu_seconds(),
                server.avatar_frames(),
                server.keyframes(),
                server.tick_slots(),
            );
            let cpu = cpu0.zip(cpu1).map(|(a, b)| b - a);
            let made = made1.saturating_sub(made0);
            let keys = keys1.saturating_sub(keys0);
            let (mut frames, mut bytes, mut lat) = (0u64, 0u64, Vec::new());
            for v in viewers {
                let (f, by, l) = v.await??;
                frames += f;
                bytes += by;
                lat.extend(l);
            }
            // a publisher that stopped early (closed by a limit, say) would leave its
            // avatars frozen and the latency meaningless
            for p in publishers {
                if p.is_finished() {
                    match p.await {
                        Ok(Err(e)) => anyhow::bail!("a publisher stopped during the run: {e:#}"),
                        Ok(Ok(())) => anyhow::bail!("a publisher stopped during the run"),
                        Err(e) => anyhow::bail!("a publisher task failed: {e}"),
                    }
                }
                p.abort();
            }
            server.shutdown().await;
            lat.sort_by(f64::total_cmp);
            let pct = |p: f64| {
                lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
                    .copied()
                    .unwrap_or(f64::NAN)
                    * 1000.0
            };
            let secs = f64::from(b.seconds);
            let per_viewer = frames as f64 / b.viewers.max(1) as f64 / secs;
            let watched = b.watch.map_or(n, |k| k.min(n));
            let (per_frame, cores) = match cpu {
                Some(c) if made > 0 => (
                    format!("{:.3}", c * 1000.0 / made as f64),
                    format!("{:.2}", c / secs),
                ),
                _ => ("-".into(), "-".into()),
            };
            // the share of the frames made that carried a keyframe, each encoded on top of
            // its delta: resyncs of viewers that fell behind cost the engine this much
            let key_share = if made > 0 {
                format!("{:.1}%", keys as f64 / made as f64 * 100.0)
            } else {
                "-".into()
            };
            outln!(
                "{:>8} | {:>12.0} {:>8.0}% | {:>9.1} {:>9.1} | {:>11.2} | {:>14} {:>12} {:>10} {:>6}",
                n,
                per_viewer,
                per_viewer / (f64::from(b.tick_hz) * watched as f64) * 100.0,
                pct(0.5),
                pct(0.99),
                bytes as f64 * 8.0 / secs / 1e6,
                per_frame,
                cores,
                key_share,
                slots
            );
        }
        anyhow::Ok(())
    })
}
