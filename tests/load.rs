//! The server past capacity: ticks that fall far behind drop to one slot per tick
//! period (`engine.adapt_tick_slots`), and return to the configured slots once the
//! load is gone.

use std::time::Duration;

use clothcast::engine::EngineConfig;
use clothcast::net::{ServerConfig, start};

use super::server::{arm_pose, config, connect_publisher, connect_viewer, db, metric};

/// Polls `clothcast_tick_slots` until it reads `want` (true) or `within` passes
/// (false).
async fn slots_reach(addr: std::net::SocketAddr, want: f64, within: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < deadline {
        if metric(addr, "clothcast_tick_slots").await == want {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ticks_far_behind_take_one_slot_until_the_load_is_gone() {
    // 128 watched avatars framed 240 times a second in 16 slots: far more work than
    // two cores do in time, in debug or release builds
    let slots = 16;
    let server = start(
        db(),
        ServerConfig {
            engine: EngineConfig {
                tick_hz: 240.0,
                tick_slots: slots,
                idle_timeout: 0.3,
                ..EngineConfig::default()
            },
            ..config()
        },
    )
    .await
    .expect("server starts");
    let url = format!("ws://{}/ws", server.addr);
    assert_eq!(
        metric(server.addr, "clothcast_tick_slots").await,
        f64::from(slots)
    );
    let mut viewer = connect_viewer(&url).await;
    let reader = tokio::spawn(async move { while viewer.next().await.is_ok() {} });
    // two publishers of 64 avatars each (the most one may drive) at 30 Hz
    let mut feeds = Vec::new();
    for p in 0..2u32 {
        let mut publisher = connect_publisher(&url).await;
        feeds.push(tokio::spawn(async move {
            for i in 0..600u32 {
                for k in 0..64 {
                    let angle = 0.3 + 0.5 * ((i + k) as f32 * 0.1).sin().abs();
                    let avatar = format!("crowd-{p}-{k}");
                    let pose = arm_pose(&avatar, angle, f64::from(i) / 30.0);
                    if publisher.send(&pose).await.is_err() {
                        return;
                    }
                }
                tokio::time::sleep(Duration::from_millis(33)).await;
            }
        }));
    }
    assert!(
        slots_reach(server.addr, 1.0, Duration::from_secs(10)).await,
        "one slot per tick while far behind; /metrics: tick busy {}, late ticks {}, ticks {}",
        metric(server.addr, "clothcast_tick_busy_ratio").await,
        metric(server.addr, "clothcast_late_ticks_total").await,
        metric(server.addr, "clothcast_ticks_total").await
    );
    // the service status says so (systemd's STATUS=)
    let status = server.probe().summary();
    assert!(
        status.ends_with(", far behind: one slot per tick"),
        "{status}"
    );
    // the frames still flow
    let frames = metric(server.addr, "clothcast_avatar_frames_total").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(metric(server.addr, "clothcast_avatar_frames_total").await > frames);
    // the performers stop (their avatars go idle): after three calm seconds the
    // configured slots come back
    for feed in feeds {
        feed.abort();
    }
    assert!(
        slots_reach(server.addr, f64::from(slots), Duration::from_secs(10)).await,
        "the configured slots once the load is gone"
    );
    let status = server.probe().summary();
    assert!(status.ends_with(" late ticks"), "{status}");
    reader.abort();
    server.shutdown().await;
}
