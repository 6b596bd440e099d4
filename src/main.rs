//! The `clothcast` command-line tool; see `clothcast --help`.

#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        reason = "input from outside gets a named error, not a panic"
    )
)]

use std::io::IsTerminal;
use std::process::ExitCode;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    // named, so that `top -H`, `perf` and `bench serve` can tell the engine's work
    // threads from the network's (tokio's are `tokio-rt-worker`)
    if let Err(e) = rayon::ThreadPoolBuilder::new()
        .thread_name(|i| format!("clothcast-work-{i}"))
        .build_global()
    {
        tracing::warn!(error = %e, "worker threads left unnamed");
    }
    match clothcast::cli::run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // a closed pipe (`clothcast … | head`) is not an error
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            eprintln!("error: {}", clothcast::cli::error_report(&e));
            ExitCode::FAILURE
        }
    }
}
