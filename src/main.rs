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

/// How the log is written (stderr), from `$CLOTHCAST_LOG_FORMAT`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LogFormat {
    /// One line per event, for a person (`text`, the default).
    Text,
    /// One JSON object per line (`json`): timestamp, level, target and the event's
    /// fields, its message among them, as Loki, Elasticsearch or a cloud's log service
    /// ingest it.
    Json,
}

/// The log format `$CLOTHCAST_LOG_FORMAT` asks for; unset or empty is `text`.
fn log_format(value: Option<std::ffi::OsString>) -> Result<LogFormat, String> {
    match value.as_ref().map(|v| v.to_str()) {
        None => Ok(LogFormat::Text),
        Some(Some("" | "text")) => Ok(LogFormat::Text),
        Some(Some("json")) => Ok(LogFormat::Json),
        Some(v) => Err(format!(
            "CLOTHCAST_LOG_FORMAT={:?} is not a log format (text or json)",
            v.unwrap_or("(not UTF-8)")
        )),
    }
}

fn main() -> ExitCode {
    let format = match log_format(std::env::var_os("CLOTHCAST_LOG_FORMAT")) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let log = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => log.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => log.json().flatten_event(true).with_ansi(false).init(),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_format_is_text_unless_json_is_asked_for_and_anything_else_is_refused() {
        assert_eq!(log_format(None), Ok(LogFormat::Text));
        assert_eq!(log_format(Some("".into())), Ok(LogFormat::Text));
        assert_eq!(log_format(Some("text".into())), Ok(LogFormat::Text));
        assert_eq!(log_format(Some("json".into())), Ok(LogFormat::Json));
        let e = log_format(Some("JSON ".into())).expect_err("refused");
        assert_eq!(
            e,
            "CLOTHCAST_LOG_FORMAT=\"JSON \" is not a log format (text or json)"
        );
    }
}
