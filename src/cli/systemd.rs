//! `serve` under a service manager that speaks systemd's notify protocol
//! (`sd_notify(3)`): `READY=1` once the ports are bound, a `STATUS=` line with the load,
//! `WATCHDOG=1` pings while the engine's ticks complete, `RELOADING=1` and `READY=1`
//! around a reload of the tokens (SIGHUP: `ExecReload=`), and `STOPPING=1` at shutdown.
//! Without `$NOTIFY_SOCKET` (not started by systemd, or a unit without `Type=notify`)
//! nothing is sent and nothing runs.
//!
//! The watchdog pings only while `/healthz` would answer 200: a tick loop that has
//! stalled, died or panics every tick, or an async runtime too wedged to run this task,
//! stops the pings, and systemd kills and restarts the server after `WatchdogSec`.

use std::time::Duration;

use sd_notify::NotifyState;

use crate::net::ServerProbe;

/// Sends `states` to the service manager, if one listens; a failure is logged (a
/// supervisor that went away must not stop the server).
fn notify(states: &[NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::warn!(error = %e, "could not notify the service manager");
    }
}

/// The listening socket a service manager passed by socket activation
/// (`sd_listen_fds(3)`: `LISTEN_PID` naming this process, `LISTEN_FDS=1`, the socket at
/// fd 3), or `None` when none was passed. Refused by name: more than one socket (a
/// `.socket` unit with several `ListenStream=`; `serve` has one port), or one that is
/// not a listening TCP socket (a datagram or Unix socket, `Accept=yes`).
pub(super) fn activation_listener() -> anyhow::Result<Option<std::net::TcpListener>> {
    let mut fds = sd_notify::listen_fds().map_err(|e| anyhow::anyhow!("socket activation: {e}"))?;
    let n = fds.len();
    let Some(fd) = fds.next() else {
        return Ok(None);
    };
    anyhow::ensure!(
        n == 1,
        "socket activation passed {n} sockets; clothcast serves one port (one ListenStream= in the .socket unit)"
    );
    // SAFETY: LISTEN_PID names this process, so the service manager passed fd 3 to it
    // and nothing else in it owns the descriptor: it is taken once, here, at start
    // (sd_notify::listen_fds checked the variables and set FD_CLOEXEC)
    let socket = socket2::Socket::from(unsafe {
        <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd)
    });
    let tcp = socket.r#type().ok() == Some(socket2::Type::STREAM)
        && socket
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .is_some();
    anyhow::ensure!(
        tcp,
        "socket activation passed fd {fd}, which is not a TCP socket (ListenStream= takes an address or a port)"
    );
    anyhow::ensure!(
        socket.is_listener().unwrap_or(false),
        "socket activation passed fd {fd}, a TCP socket that is not listening (Accept=yes is not supported: clothcast accepts its own connections)"
    );
    Ok(Some(socket.into()))
}

/// Whether a service manager listens for notifications.
fn supervised() -> bool {
    std::env::var_os("NOTIFY_SOCKET").is_some()
}

/// Tells the service manager what `serve` is doing before it is ready (loading or
/// baking databases can take minutes).
pub(super) fn starting(what: &str) {
    if supervised() {
        notify(&[NotifyState::Status(what)]);
    }
}

/// How long each example a bake at start finishes extends the start timeout
/// (`EXTEND_TIMEOUT_USEC`): thirty times what an example of the default database takes
/// on a 2-core machine (~10 s), so a slow machine is waited for while a bake that stops
/// making progress fails the start within minutes, not after a start timeout sized for
/// the slowest whole bake.
const BAKE_PROGRESS_GRACE: Duration = Duration::from_secs(300);

/// What a bake's progress tells the service manager: the extension in microseconds
/// and the status line.
fn bake_message(done: usize, total: usize) -> (u32, String) {
    let usec = u32::try_from(BAKE_PROGRESS_GRACE.as_micros()).unwrap_or(u32::MAX);
    (
        usec,
        format!("baking the default database: {done}/{total} examples"),
    )
}

/// Tells the service manager how far a bake before the server is ready has got, and
/// gives it [`BAKE_PROGRESS_GRACE`] more before it counts the start as failed (beyond
/// the unit's `TimeoutStartSec=`, which still bounds the work before the first example).
pub(crate) fn baking(done: usize, total: usize) {
    if supervised() {
        let (usec, status) = bake_message(done, total);
        notify(&[
            NotifyState::ExtendTimeoutUsec(usec),
            NotifyState::Status(&status),
        ]);
    }
}

/// Tells the service manager that the server is up (its ports are bound), with `what`
/// as its status line, and starts the watchdog pings if the unit asks for them
/// (`WatchdogSec=`). Call from within the server's runtime.
pub(super) fn ready(probe: ServerProbe, what: &str) {
    if !supervised() {
        return;
    }
    notify(&[NotifyState::Ready, NotifyState::Status(what)]);
    if let Some(timeout) = sd_notify::watchdog_enabled() {
        tracing::info!(timeout_s = timeout.as_secs_f64(), "systemd watchdog on");
        tokio::spawn(watchdog(probe, timeout));
    }
}

/// Tells the service manager that the server is reloading (its tokens, on SIGHUP):
/// `RELOADING=1` with the monotonic time, as `Type=notify-reload` units require.
pub(super) fn reloading() {
    if !supervised() {
        return;
    }
    match NotifyState::monotonic_usec_now() {
        Ok(now) => notify(&[NotifyState::Reloading, now]),
        Err(e) => tracing::warn!(error = %e, "could not read the monotonic clock"),
    }
}

/// Tells the service manager that a reload is done, with `what` as the status line.
pub(super) fn reloaded(what: &str) {
    if supervised() {
        notify(&[NotifyState::Ready, NotifyState::Status(what)]);
    }
}

/// Tells the service manager that the server is shutting down.
pub(super) fn stopping() {
    if supervised() {
        notify(&[NotifyState::Stopping, NotifyState::Status("shutting down")]);
    }
}

/// How often the watchdog looks at the server: a quarter of the timeout, so that a
/// healthy server pings at least three times per timeout (`sd_watchdog_enabled(3)`
/// asks for every half) even when a look comes late.
fn watchdog_period(timeout: Duration) -> Duration {
    (timeout / 4).max(Duration::from_millis(10))
}

/// What one look at the server sends: a ping and the load while it is healthy; only
/// the reason while it is not, so that systemd restarts it once the timeout passes
/// without a ping (a stall shorter than the timeout costs nothing).
fn watchdog_message(health: Result<(), String>, summary: &str) -> (bool, String) {
    match health {
        Ok(()) => (true, summary.to_string()),
        Err(why) => (false, format!("unhealthy: {why}")),
    }
}

async fn watchdog(probe: ServerProbe, timeout: Duration) {
    let mut every = tokio::time::interval(watchdog_period(timeout));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut was_healthy = true;
    loop {
        every.tick().await;
        let health = probe.health();
        if let (true, Err(why)) = (was_healthy, &health) {
            tracing::error!(%why, "not pinging systemd's watchdog");
        }
        was_healthy = health.is_ok();
        match watchdog_message(health, &probe.summary()) {
            (true, status) => notify(&[NotifyState::Watchdog, NotifyState::Status(&status)]),
            (false, status) => notify(&[NotifyState::Status(&status)]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watchdog_pings_only_a_healthy_server() {
        let (ping, status) = watchdog_message(Ok(()), "2 avatars");
        assert!(ping);
        assert_eq!(status, "2 avatars");
        let (ping, status) = watchdog_message(
            Err("tick stalled: the last tick completed 3.0 s ago".into()),
            "2 avatars",
        );
        assert!(!ping);
        assert_eq!(
            status,
            "unhealthy: tick stalled: the last tick completed 3.0 s ago"
        );
    }

    #[test]
    fn a_bakes_progress_extends_the_start_by_the_grace_and_says_how_far_it_got() {
        let (usec, status) = bake_message(12, 48);
        assert_eq!(u64::from(usec), 300_000_000);
        assert_eq!(status, "baking the default database: 12/48 examples");
    }

    #[test]
    fn the_watchdog_looks_several_times_per_timeout() {
        assert_eq!(
            watchdog_period(Duration::from_secs(10)),
            Duration::from_millis(2500)
        );
        // a nonsensically short timeout does not spin
        assert_eq!(
            watchdog_period(Duration::from_micros(1)),
            Duration::from_millis(10)
        );
    }
}
