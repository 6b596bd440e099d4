//! Which avatars a tick frames and when: groups in arrival order, tick slots.

use super::*;

#[test]
fn groups_send_the_longest_waiting_poses_first_and_change_no_byte() {
    let db = db();
    let synth = default_synth(&db);
    let synths = std::slice::from_ref(&synth);
    // two engines fed the same poses: one ticked whole, one in groups of avatars
    let (mut whole, mut grouped) = (engine_on(&db), engine_on(&db));
    let ids = ["a", "b", "c", "d", "e"];
    let mut t = 0.0;
    for tick in 0..4 {
        // poses arrive in an order that is not the ids' (and changes each tick)
        for (i, id) in ids.iter().enumerate() {
            let k = (i * 3 + tick) % ids.len();
            let at = t + 0.001 * k as f64;
            for e in [&mut whole, &mut grouped] {
                e.set_pose(id, arm(0.1 * (i + tick) as f32), at, at)
                    .expect("pose");
            }
        }
        t += 1.0 / 30.0;
        let all = whole.tick(synths, t).expect("tick");
        let mut emitted: Vec<TickOutput> = Vec::new();
        let rest = grouped
            .tick_in_groups(synths, t, &|_| true, Schedule::Tick, 2, &mut |g| {
                emitted.push(g)
            })
            .expect("tick");
        assert!(rest.frames.is_empty(), "every frame went to emit");
        assert!(rest.failed.is_empty(), "{:?}", rest.failed);
        // five avatars in at most two groups, each of this tick, none empty
        assert_eq!(emitted.len(), 2);
        assert_eq!(
            emitted.iter().map(|g| g.frames.len()).collect::<Vec<_>>(),
            [3, 2]
        );
        assert!(emitted.iter().all(|g| g.tick == rest.tick && g.time == t));
        // oldest pose first, in both ways of ticking
        let mut by_arrival: Vec<(usize, &str)> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| ((i * 3 + tick) % ids.len(), *id))
            .collect();
        by_arrival.sort();
        let expected: Vec<&str> = by_arrival.iter().map(|(_, id)| *id).collect();
        let order = |frames: &[AvatarFrame]| -> Vec<String> {
            frames.iter().map(|f| f.avatar.clone()).collect()
        };
        assert_eq!(order(&all.frames), expected, "tick {tick}");
        let grouped_frames: Vec<AvatarFrame> = emitted.into_iter().flat_map(|g| g.frames).collect();
        assert_eq!(order(&grouped_frames), expected, "tick {tick}");
        // the same bytes for every avatar either way
        for (a, b) in all.frames.iter().zip(&grouped_frames) {
            assert_eq!(a.frame, b.frame);
            assert_eq!(a.delta, b.delta, "{} tick {tick}", a.avatar);
            assert_eq!(a.key, b.key, "{} tick {tick}", a.avatar);
        }
    }
}

#[test]
fn slotted_ticks_frame_each_avatar_once_a_period_right_after_its_pose() {
    let db = db();
    let synth = default_synth(&db);
    let synths = std::slice::from_ref(&synth);
    let mut e = engine_on(&db);
    let slots = e.config().tick_slots;
    assert!(slots > 1, "the default divides the tick");
    let period = 1.0 / f64::from(e.config().tick_hz);
    let slot = period / f64::from(slots);
    // "a".."d" send at 30 Hz at their own phases; "fast" at 60 Hz; "quiet" sent once
    let phases = [("a", 0.1), ("b", 0.3), ("c", 0.55), ("d", 0.95)];
    let mut frames: Vec<(f64, String)> = Vec::new();
    let mut sent: Vec<(f64, &str)> = Vec::new();
    e.set_pose("quiet", arm(0.2), 0.0, 0.0).expect("pose");
    let periods = 12;
    let mut poses_sent = 0.0f64;
    for k in 1..=(periods * slots) {
        let now = f64::from(k) * slot;
        // poses that arrived since the last slot, in time order
        let mut arrivals: Vec<(f64, &str)> = Vec::new();
        for &(id, phase) in &phases {
            for n in 0..=periods {
                let at = (f64::from(n) + phase) * period;
                if at > now - slot && at <= now {
                    arrivals.push((at, id));
                }
            }
        }
        for n in 0..=(2 * periods) {
            let at = (f64::from(n) + 0.4) * period / 2.0;
            if at > now - slot && at <= now {
                arrivals.push((at, "fast"));
            }
        }
        arrivals.sort_by(|x, y| x.0.total_cmp(&y.0));
        for &(at, id) in &arrivals {
            e.set_pose(id, arm(0.1 + at as f32), at, at).expect("pose");
            sent.push((at, id));
            poses_sent = poses_sent.max(at);
        }
        e.tick_in_groups(synths, now, &|_| true, Schedule::Slot, 1, &mut |g| {
            frames.extend(g.frames.into_iter().map(|f| (now, f.avatar)));
        })
        .expect("tick");
    }
    let ids = ["a", "b", "c", "d", "fast", "quiet"];
    for id in ids {
        let times: Vec<f64> = frames.iter().filter(|f| f.1 == id).map(|f| f.0).collect();
        // one frame per period (the first period may add one: new avatars start at once)
        assert!(
            (periods as usize..=periods as usize + 1).contains(&times.len()),
            "{id}: {} frames in {periods} periods",
            times.len()
        );
        // never two frames in one period
        let mut per_period: Vec<u64> = times
            .iter()
            .map(|t| ((t / period) - 1e-9).floor() as u64)
            .collect();
        per_period.dedup();
        assert_eq!(per_period.len(), times.len(), "{id}: {times:?}");
    }
    // after the first periods, a 30 Hz publisher's pose is framed in the first slot
    // after it arrives: it waits less than a slot
    for &(id, _) in &phases {
        for &(at, _) in sent.iter().filter(|s| s.1 == id && s.0 > 2.0 * period) {
            let framed = frames.iter().find(|f| f.1 == id && f.0 >= at).map(|f| f.0);
            if let Some(t) = framed {
                assert!(
                    t - at <= slot + 1e-9,
                    "{id}: pose at {at:.4} framed at {t:.4}"
                );
            }
        }
    }
}

#[test]
fn a_new_slot_count_starts_with_a_period_and_every_period_frames_each_avatar_once() {
    let db = db();
    let synth = default_synth(&db);
    let synths = std::slice::from_ref(&synth);
    let mut e = engine_on(&db);
    assert_eq!(e.tick_slots(), e.config().tick_slots);
    let period = 1.0 / f64::from(e.config().tick_hz);
    let ids = ["a", "b", "c"];
    // (slots of the period, avatars framed in it), one entry per period
    let mut periods: Vec<(u32, Vec<String>)> = Vec::new();
    let (mut now, mut slot_in_period) = (0.0f64, 0u32);
    for call in 0..40u32 {
        let slots = e.tick_slots();
        if slot_in_period == 0 {
            periods.push((slots, Vec::new()));
        }
        now += period / f64::from(slots);
        // every avatar sends at the tick rate, "a" and "b" at each period's start,
        // "c" only every other period (its frame then falls in the last slot)
        if slot_in_period == 0 {
            for id in ids {
                if id != "c" || periods.len() % 2 == 1 {
                    e.set_pose(id, arm(0.1 * f64::from(call) as f32), now, now)
                        .expect("pose");
                }
            }
        }
        let mut framed = Vec::new();
        e.tick_in_groups(synths, now, &|_| true, Schedule::Slot, 1, &mut |g| {
            framed.extend(g.frames.into_iter().map(|f| f.avatar));
        })
        .expect("tick");
        if let Some(p) = periods.last_mut() {
            p.1.extend(framed);
        }
        slot_in_period = (slot_in_period + 1) % slots;
        // asked for in the middle of a period: the period keeps its count
        if call == 9 {
            assert_eq!(slot_in_period, 2, "the test asks mid-period");
            e.set_tick_slots(1);
            assert_eq!(e.tick_slots(), 4, "the period under way keeps its slots");
        }
        // asked for between periods (one-slot periods always are): at once
        if call == 20 {
            e.set_tick_slots(4);
            assert_eq!(e.tick_slots(), 4);
        }
        if call == 28 {
            assert_eq!(slot_in_period, 0, "the test asks between periods");
            e.set_tick_slots(99);
            assert_eq!(e.tick_slots(), crate::engine::MAX_TICK_SLOTS, "clamped");
        }
    }
    let counts: Vec<u32> = periods.iter().map(|p| p.0).collect();
    assert_eq!(&counts[..4], [4, 4, 4, 1], "{counts:?}");
    assert!(
        counts.contains(&crate::engine::MAX_TICK_SLOTS),
        "{counts:?}"
    );
    // the last period may be cut short by the end of the loop
    for (k, (slots, framed)) in periods[..periods.len() - 1].iter().enumerate() {
        let mut framed = framed.clone();
        framed.sort();
        assert_eq!(framed, ids, "period {k} of {slots} slots: {framed:?}");
    }
}
