//! The `clothcast` command line (clap): one subcommand per job. Errors are reported
//! with `anyhow` here and only here.

/// `println!` for the batch commands' reports: a reader that went away (`inspect DB |
/// head`) ends the command quietly with status 0, as `head` expects, where `println!`
/// panicked; any other error writing stdout (a full disk) ends it with the error.
/// Servers use [`common::say`], which goes on.
macro_rules! outln {
    ($($t:tt)*) => {
        $crate::cli::common::out_line(format_args!($($t)*))
    };
}

mod assets;
mod bake;
mod bench;
mod bench_codec;
mod bench_serve;
mod bench_synth;
mod binding;
mod common;
mod drape;
mod eval;
mod health;
mod play;
mod record;
mod render;
mod retarget;
mod serve;
mod systemd;
mod watch;

use clap::{Parser, Subcommand};

/// clothcast: realtime garment synthesis for motion-capture avatars (SOR).
#[derive(Parser, Debug)]
#[command(name = "clothcast", version, about, long_about = None)]
pub(crate) struct Cli {
    /// Subcommand.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Subcommands.
#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Write the default body and garments as glTF (.glb) and OBJ files.
    Assets(assets::AssetsArgs),
    /// Retarget a BVH clip onto the canonical skeleton and write the animated body (.glb).
    Retarget(retarget::RetargetArgs),
    /// Render the body and garments at a pose to a PNG (software rasteriser; garments skinned, or with --db as SOR synthesises them).
    ///
    /// The garments are their rest shapes carried by linear blend skinning: `drape`
    /// shows the cloth simulated to rest on the body, the server's stream SOR's synthesis.
    Render(render::RenderArgs),
    /// Simulate a garment to static equilibrium on the body at a pose (.glb, PNG).
    Drape(drape::DrapeArgs),
    /// Print measured performance figures.
    Bench(bench::BenchArgs),
    /// Build an example database (SOR) for a garment.
    Bake(bake::BakeArgs),
    /// Merge databases of one garment (e.g. the shards of a bake).
    Merge(bake::MergeArgs),
    /// Summarise a database file.
    Inspect(bake::InspectArgs),
    /// Start the server on localhost with built-in motion on several avatars.
    Demo(serve::DemoArgs),
    /// Run the streaming server (WebSocket publishers and viewers).
    Serve(serve::ServeArgs),
    /// Replay a BVH clip to a server as one or more performers.
    Play(play::PlayArgs),
    /// Capture a performer's rest pose and facing (they hold a T-pose facing forward).
    Calibrate(serve::CalibrateArgs),
    /// Dress an avatar in another of the server's garments (try-on).
    Wear(serve::WearArgs),
    /// Watch a server's garment streams in the terminal (decodes them); --record saves them.
    Watch(watch::WatchArgs),
    /// Compare SOR, LBS and nearest-example skinning with the simulated ground truth on a clip.
    Eval(eval::EvalArgs),
    /// Ask a running server's /healthz; exit 0 when it answers 200, 1 otherwise (a container's HEALTHCHECK).
    Health(health::HealthArgs),
}

/// Runs the command line.
pub fn run() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if common::data_to_stdout(std::env::args_os()) {
        common::report_to_stderr();
    }
    match cli.command {
        Command::Assets(a) => assets::run(a),
        Command::Retarget(a) => retarget::run(a),
        Command::Render(a) => render::run(a),
        Command::Drape(a) => drape::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Bake(a) => bake::run(a),
        Command::Merge(a) => bake::run_merge(a),
        Command::Inspect(a) => bake::run_inspect(a),
        Command::Eval(a) => eval::run(a),
        Command::Serve(a) => serve::run_serve(a),
        Command::Demo(a) => serve::run_demo(a),
        Command::Play(a) => play::run_play(a),
        Command::Watch(a) => watch::run_watch(a),
        Command::Calibrate(a) => serve::run_calibrate(a),
        Command::Wear(a) => serve::run_wear(a),
        Command::Health(a) => health::run(a),
    }
}

/// An error and its causes on one line, `outer: cause: …`, for the terminal. Many
/// errors (ours wrapping a library's, and libraries' own) print their cause in their
/// message *and* report it as their source; a cause whose text already ends the line
/// is not repeated.
pub fn error_report(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.is_empty() {
            line = text;
        } else if !text.is_empty() && !line.ends_with(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::error_report;

    #[derive(Debug, thiserror::Error)]
    enum Wrapped {
        #[error("network: {0}")]
        Io(#[from] std::io::Error),
    }

    #[test]
    fn an_error_report_names_each_cause_once() {
        let io = || std::io::Error::new(std::io::ErrorKind::AddrInUse, "address in use");
        // the cause in the message and as the source: once
        let e = anyhow::Error::from(Wrapped::Io(io())).context("starting the server");
        assert_eq!(
            error_report(&e),
            "starting the server: network: address in use"
        );
        // the cause only as the source (anyhow's context): still printed
        let e = anyhow::Error::from(io()).context("cannot listen on 127.0.0.1:8470");
        assert_eq!(
            error_report(&e),
            "cannot listen on 127.0.0.1:8470: address in use"
        );
    }
}
