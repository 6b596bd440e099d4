//! The engine's tick thread: drains the publishers' inbox into the engine at a fixed
//! rate (once per tick slot), runs the tick, broadcasts each group of frames as it is
//! made, and keeps the tick metrics.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::slots::SlotGovernor;
use super::watch::Watched;
use super::{MAX_TICK_SLOTS, Shared};
use crate::engine::{Engine, Schedule, TickOutput};
use crate::protocol::Escaped;

/// The tick thread's body; returns when `stop` is set (or the inbox lock is poisoned).
pub(super) fn tick_loop(mut engine: Engine, shared: Arc<Shared>, stop: Arc<AtomicBool>) {
    let dbs = engine.databases();
    let synths: Vec<_> = dbs
        .iter()
        .map(|db| Engine::synthesizer(db, engine.config()))
        .collect();
    // with tick slots, the loop runs once per slot (see Schedule::Slot); the slots
    // drop to one while the ticks run late (see `slots`)
    let configured = engine.config().tick_slots.clamp(1, MAX_TICK_SLOTS);
    let mut governor = SlotGovernor::new(configured, engine.config().adapt_tick_slots);
    let tick_period = 1.0 / f64::from(engine.config().tick_hz);
    let mut next = Instant::now();
    let m = &shared.metrics;
    // tick periods completed since `window_start` (a slot is its share of one)
    let mut window_periods = 0.0f64;
    // the time the loop slept since `window_start`: what it had to spare
    let mut window_slept = Duration::ZERO;
    // poses received per avatar since `window_start`, published as rates once a second
    let mut window: HashMap<String, u32> = HashMap::new();
    let mut window_start = Instant::now();
    // the ticks' working time since `window_start`, µs (published as a share once a
    // second)
    let mut busy_micros = 0u64;
    let mut last_refusal_log: Option<Instant> = None;
    while !stop.load(Ordering::SeqCst) {
        // the slots of the period this call falls in (a change the governor asked
        // for starts with a period)
        let slots = engine.tick_slots();
        m.tick_slots.store(u64::from(slots), Ordering::Relaxed);
        next += Duration::from_secs_f64(tick_period / f64::from(slots));
        let now_i = Instant::now();
        window_periods += 1.0 / f64::from(slots);
        if next > now_i {
            std::thread::sleep(next - now_i);
            window_slept += next - now_i;
        } else {
            m.late_ticks.fetch_add(1, Ordering::Relaxed);
            next = now_i;
        }
        // send_groups counts per tick period: a slot's share of the avatars goes out
        // in its share of the groups (tiny groups would leave a worker idle at each
        // one's end)
        let groups = shared.config.send_groups.max(1).div_ceil(slots as usize);
        let now = shared.start.elapsed().as_secs_f64();
        let (poses, keys, arrivals, idle_keys) = match shared.inbox.lock() {
            Ok(mut inbox) => (
                std::mem::take(&mut inbox.poses),
                std::mem::take(&mut inbox.keyframes),
                std::mem::take(&mut inbox.arrivals),
                std::mem::take(&mut inbox.idle_keyframes),
            ),
            Err(_) => break,
        };
        let mut added = Vec::new();
        for (avatar, (pose, ts, received)) in poses {
            let new = !engine.has_avatar(&avatar);
            match engine.set_pose(&avatar, pose, ts, received) {
                Ok(()) if new => added.push(avatar),
                Ok(()) => {}
                Err(e) => {
                    m.poses_refused.fetch_add(1, Ordering::Relaxed);
                    // at most one line a second, however many are refused
                    if last_refusal_log.is_none_or(|t: Instant| t.elapsed().as_secs_f64() >= 1.0) {
                        tracing::warn!(%avatar, error = %Escaped(&e), "pose refused (clothcast_poses_refused_total counts them all)");
                        last_refusal_log = Some(Instant::now());
                    }
                }
            }
        }
        if !added.is_empty()
            && let Ok(mut a) = shared.avatars.lock()
        {
            a.extend(added);
        }
        for (avatar, n) in arrivals {
            if engine.has_avatar(&avatar) {
                *window.entry(avatar).or_insert(0) += n;
            }
        }
        let span = window_start.elapsed().as_secs_f64();
        if span >= 1.0 {
            // every existing avatar gets a rate (0 when it sent nothing: idle), in id
            // order as the engine keeps them
            let rates = engine
                .avatar_ids()
                .map(|id| {
                    let n = window.get(id).copied().unwrap_or(0);
                    (id.to_string(), f64::from(n) / span)
                })
                .collect();
            if let Ok(mut r) = shared.input_rates.lock() {
                *r = rates;
            }
            m.tick_busy_ppm.store(
                (busy_micros as f64 / span).round() as u64,
                Ordering::Relaxed,
            );
            // the periods made against those the tick rate asks for, and the share
            // of the second the loop did not sleep (the ticks' work, the bookkeeping
            // between them, waiting for a core)
            let pace = window_periods / (span * f64::from(engine.config().tick_hz));
            let occupied = 1.0 - window_slept.as_secs_f64() / span;
            if let Some(n) = governor.window(pace, occupied) {
                engine.set_tick_slots(n);
                if n < configured {
                    tracing::warn!(
                        "ticks running late: one slot per tick period until they keep time (engine.adapt_tick_slots)"
                    );
                } else {
                    tracing::info!(
                        slots = n,
                        "ticks keep time again: {n} slots per tick period"
                    );
                }
            }
            (window_periods, window_slept) = (0.0, Duration::ZERO);
            busy_micros = 0;
            window.clear();
            window_start = Instant::now();
        }
        // garment choices apply once their avatar exists (after its first pose)
        if let Ok(mut inbox) = shared.inbox.lock() {
            inbox.wear.retain(|avatar, outfit| {
                if !engine.has_avatar(avatar) {
                    return true;
                }
                if let Err(e) = engine.wear(avatar, outfit) {
                    tracing::warn!(%avatar, error = %Escaped(&e), "wear refused");
                }
                false
            });
        }
        for avatar in keys {
            engine.request_keyframe(&avatar);
        }
        if idle_keys {
            engine.request_idle_keyframes();
        }
        // only avatars some viewer is subscribed to are synthesised and encoded; the
        // others keep their latest pose and restart with a keyframe when watched
        // (which a viewer that subscribes to them expects anyway)
        let watched = match shared.watchers.lock() {
            Ok(w) => w.among(engine.avatar_ids()),
            Err(_) => Watched::All,
        };
        if watched == Watched::Nobody {
            m.unwatched_ticks.fetch_add(1, Ordering::Relaxed);
        }
        let t0 = Instant::now();
        // a panic (a bug) loses this tick, not the server: the next tick goes on, and
        // `/healthz` reports the tick stalled if no tick completes any more
        let ticked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let watched = |avatar: &str| watched.contains(avatar);
            // counted before they go out, so that whoever has received a frame finds
            // it in the metrics (a test read the keyframe count between a keyframe's
            // arrival and the end of its tick, and found it not yet counted)
            let mut emit = |group: TickOutput| {
                let keys = group.frames.iter().filter(|f| f.key.is_some()).count();
                m.avatar_frames
                    .fetch_add(group.frames.len() as u64, Ordering::Relaxed);
                m.keyframes.fetch_add(keys as u64, Ordering::Relaxed);
                let _ = shared.frames.send(Arc::new(group));
            };
            // slotted whenever slots are configured, one or more now: the engine
            // counts its periods by them
            let schedule = if configured > 1 {
                Schedule::Slot
            } else {
                Schedule::Tick
            };
            engine.tick_in_groups(&synths, now, &watched, schedule, groups, &mut emit)
        }));
        let Ok(ticked) = ticked else {
            m.tick_panics.fetch_add(1, Ordering::Relaxed);
            tracing::error!("tick panicked; going on with the next");
            continue;
        };
        match ticked {
            Ok(out) => {
                m.last_tick_micros.store(
                    (shared.start.elapsed().as_micros() as u64).max(1),
                    Ordering::Relaxed,
                );
                let us = t0.elapsed().as_micros() as u64;
                busy_micros += us;
                m.ticks.fetch_add(1, Ordering::Relaxed);
                m.tick_micros_last.store(us, Ordering::Relaxed);
                m.tick_micros_max.fetch_max(us, Ordering::Relaxed);
                m.avatars
                    .store(engine.avatar_count() as u64, Ordering::Relaxed);
                m.avatars_unwatched
                    .store(out.unwatched as u64, Ordering::Relaxed);
                m.avatars_held.store(out.held as u64, Ordering::Relaxed);
                m.frame_errors
                    .fetch_add(out.failed.len() as u64, Ordering::Relaxed);
                for (avatar, e) in &out.failed {
                    tracing::warn!(%avatar, error = %e, "no frame this tick");
                }
                if !out.gone.is_empty()
                    && let Ok(mut a) = shared.avatars.lock()
                {
                    for id in &out.gone {
                        a.remove(id);
                    }
                }
                if !out.gone.is_empty() {
                    let _ = shared.frames.send(Arc::new(out));
                }
            }
            Err(e) => tracing::error!(error = %e, "tick failed"),
        }
    }
}
