//! `clothcast bench …`: measured figures (never asserted in tests).

use std::time::Instant;

use clap::{Args, Subcommand};
use glam::Vec3;

use crate::body::Body;
use crate::garment::{Garment, GarmentConfig};
use crate::sim::{SimParams, Simulator};
use crate::skeleton::{JointId, Pose, quat_exp};

/// Arguments of `clothcast bench`.
#[derive(Args, Debug)]
pub(crate) struct BenchArgs {
    #[command(subcommand)]
    what: BenchWhat,
}

#[derive(Subcommand, Debug)]
enum BenchWhat {
    /// Cloth statics: DOF, Newton iterations, factorisation, equilibrium and sensitivity times.
    Sim(SimBench),
    /// Garment stream codec: bits per vertex per frame, error, encode/decode time, next to
    /// raw floats, quantised + zstd and meshoptimizer + zstd (those two need the
    /// `codec-peers` build feature).
    Codec(super::bench_codec::CodecBench),
    /// SOR synthesis throughput (avatar-frames/s) with 1 and 2 threads, next to plain LBS.
    Synth(super::bench_synth::SynthBench),
    /// The server on loopback: sustained avatars at 30 Hz, latency, bandwidth.
    Serve(super::bench_serve::ServeBench),
}

#[derive(Args, Debug)]
struct SimBench {
    /// Garment vertex counts to measure.
    #[arg(long, value_delimiter = ',', default_values_t = [3000usize, 12500])]
    vertices: Vec<usize>,
}

pub(crate) fn run(a: BenchArgs) -> anyhow::Result<()> {
    match a.what {
        BenchWhat::Sim(b) => bench_sim(b),
        BenchWhat::Codec(b) => super::bench_codec::run(b),
        BenchWhat::Synth(b) => super::bench_synth::run(b),
        BenchWhat::Serve(b) => super::bench_serve::run(b),
    }
}

fn bench_sim(b: SimBench) -> anyhow::Result<()> {
    let body = Body::default_body()?;
    let params = SimParams::default();
    outln!(
        "cloth statics, T-shirt on the default body ({} vertices), one thread",
        body.mesh.vertex_count()
    );
    outln!(
        "{:>8} {:>7} | {:>11} {:>9} | {:>10} | {:>12} {:>7} | {:>12}",
        "vertices",
        "DOF",
        "drape iters",
        "drape s",
        "factor ms",
        "neighbour s",
        "iters",
        "66 sens. s"
    );
    for &n in &b.vertices {
        let mut cfg = GarmentConfig::builtin("tshirt")?;
        cfg.target_vertices = n;
        let garment = Garment::generate(&body, &cfg)?;
        let mut sim = Simulator::new(&body, &garment, &params)?;
        let t = Instant::now();
        let rest = sim.drape_rest()?;
        let drape_s = t.elapsed().as_secs_f64();
        // a neighbouring pose: the right arm lowered by 5° and the spine bent 2°
        let mut near = Pose::rest();
        near.set_rotation(
            JointId::RIGHT_SHOULDER,
            quat_exp(Vec3::new(0.0, 0.0, 5f32.to_radians())),
        );
        near.set_rotation(
            JointId::SPINE2,
            quat_exp(Vec3::new(2f32.to_radians(), 0.0, 0.0)),
        );
        let t = Instant::now();
        let eq = sim.carry(&rest, &near)?;
        let near_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let sens = sim.sensitivity(&eq)?;
        let sens_s = t.elapsed().as_secs_f64();
        tracing::debug!(rhs = ?sens.rhs_time, factor = ?sens.factor_time, solve = ?sens.solve_time, "sensitivity phases");
        let factor_ms = 1000.0 * (rest.report.factor_time + eq.report.factor_time).as_secs_f64()
            / (rest.report.factorizations + eq.report.factorizations).max(1) as f64;
        outln!(
            "{:>8} {:>7} | {:>11} {:>9.2} | {:>10.1} | {:>12.2} {:>7} | {:>12.2}",
            garment.vertex_count(),
            3 * garment.vertex_count(),
            rest.report.iterations,
            drape_s,
            factor_ms,
            near_s,
            eq.report.iterations,
            sens_s
        );
    }
    Ok(())
}
