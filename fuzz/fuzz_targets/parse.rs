//! Fuzzes the parsers a publisher's bytes meet first, without the engine behind them
//! (`ingest` runs the engine too, ~30 inputs a second; this runs thousands): the first
//! byte picks MessagePack or JSON client messages, a Kinect bridge's body frame, a VMC
//! datagram or an Xsens MVN datagram; the rest (up to the server's 64 KiB message size: `scripts/fuzz.sh`
//! passes `-max_len=65536` for this target) is parsed, and what is accepted goes through
//! the input paths (`apply_pose_message`, `apply_joints`, VMC calibration, MVN sample
//! order) to a pose that must be valid.
//!
//! Each input runs on a thread with a 2 MiB stack, a tokio worker's, so that input which
//! would exhaust a server task's stack fails here (libFuzzer's own thread has 8 MiB): a
//! 64 KB VMC datagram of nested bundles once aborted the whole server that way.
#![no_main]

use std::sync::OnceLock;

use clothcast::engine::{InputState, SensorState, apply_joints, apply_pose_message, vmc_pose};
use clothcast::mocap::{
    FilterConfig, Floor, MvnDatagram, MvnStream, PositionRetargeter, VmcPerformer,
    parse_body_frame, parse_mvn,
};
use clothcast::protocol::ClientMessage;
use clothcast::skeleton::Skeleton;
use clothcast::sor::Database;
use libfuzzer_sys::fuzz_target;

static DB: &[u8] = include_bytes!("../../tests/fixtures/db/v1/small.ccdb");

fn retargeter() -> &'static PositionRetargeter {
    static R: OnceLock<PositionRetargeter> = OnceLock::new();
    R.get_or_init(|| {
        let db = Database::from_bytes(DB).expect("fixture database");
        PositionRetargeter::new(&Skeleton::from_rest_positions(db.body.skeleton))
    })
}

fn parse(kind: u8, bytes: &[u8]) {
    let filter = FilterConfig::default();
    let mut state = InputState::default();
    let mut sensor = SensorState::default();
    let mut poses = Vec::new();
    match kind % 5 {
        0 | 1 => {
            let msg = if kind % 5 == 0 {
                ClientMessage::from_msgpack(bytes)
            } else {
                let Ok(text) = std::str::from_utf8(bytes) else {
                    return;
                };
                ClientMessage::from_json(text)
            };
            // a `wear` message's outfit check (garment or garments, count, repeats)
            if let Ok(m @ ClientMessage::Wear(_)) = &msg {
                let _ = m.outfit();
            }
            if let Ok(ClientMessage::Pose(p)) = msg {
                // twice: the second message meets the first one's state and filter
                for _ in 0..2 {
                    if let Ok(a) = apply_pose_message(&p, &mut sensor, &mut state, retargeter(), Some(&filter)) {
                        poses.push(a.pose);
                    }
                }
                state.calibrate();
                poses.push(state.calibrated(&state.pose));
            }
        }
        2 => {
            let Ok(v) = serde_json::from_slice::<serde_json::Value>(bytes) else {
                return;
            };
            let Ok(bodies) = parse_body_frame(&v, None) else {
                return;
            };
            for (i, b) in bodies.iter().enumerate() {
                if let Ok(pose) = apply_joints(
                    &b.joints,
                    b.floor,
                    &mut sensor,
                    &mut state,
                    retargeter(),
                    Some(&filter),
                    i as f64 / 30.0,
                ) {
                    poses.push(pose);
                }
            }
        }
        4 => {
            let Ok(MvnDatagram::Sample(s)) = parse_mvn(bytes) else {
                return;
            };
            let mut sensor = SensorState::mvn();
            let mut order = MvnStream::default();
            // twice: the second is a repeat, refused; the first meets the filter
            for _ in 0..2 {
                if order.accept(s.sample).is_ok()
                    && let Ok(pose) = apply_joints(
                        &s.joints(),
                        Some(Floor::LEVEL),
                        &mut sensor,
                        &mut state,
                        retargeter(),
                        Some(&filter),
                        f64::from(s.time_ms) / 1000.0,
                    )
                {
                    poses.push(pose);
                }
            }
        }
        _ => {
            let mut p = VmcPerformer::default();
            if let Ok(n) = p.feed(bytes)
                && n > 0
            {
                state.pose = p.pose;
                state.calibrate();
                poses.push(p.pose);
                poses.push(vmc_pose(&p, &state, retargeter()));
            }
        }
    }
    for pose in poses {
        let mut checked = pose;
        assert!(
            checked.validate().is_ok(),
            "an accepted pose is valid: {pose:?}"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&kind, bytes)) = data.split_first() else {
        return;
    };
    let bytes = bytes.to_vec();
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || parse(kind, &bytes))
        .expect("thread")
        .join()
        .expect("no panic");
});
