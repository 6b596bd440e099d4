//! The process's open-file limit against what the server's connection limits need.
//!
//! Every connection holds a file descriptor: up to [`ServerConfig::max_connections`]
//! WebSocket connections and as many more plain HTTP ones (before their upgrade, or
//! idle between requests), besides the listeners and the process's own few. A shell's
//! soft limit is commonly 1 024 (`ulimit -n`), below the 2 112 the default limits need;
//! past it the accept loop fails (and retries every 50 ms) where the server would have
//! answered 503 at its own limit. So `serve` raises the soft limit to what is needed, as
//! far as the hard limit allows (systemd's unit sets `LimitNOFILE=65536`; Docker's
//! default hard limit is ~1 M), and warns when that is not enough.
//!
//! [`ServerConfig::max_connections`]: super::ServerConfig::max_connections

use super::ServerConfig;

/// Descriptors kept for the process besides connections: listeners (HTTP, VMC, MVN),
/// the runtime's epoll and wakers, stdio, files read at start.
pub const RESERVED_FILES: u64 = 64;

/// Open files the connection limits of `config` can take: two per place of
/// `max_connections` (WebSocket and plain HTTP) and [`RESERVED_FILES`].
pub fn files_needed(config: &ServerConfig) -> u64 {
    (config.max_connections as u64)
        .saturating_mul(2)
        .saturating_add(RESERVED_FILES)
}

/// What [`raise_open_files`] found and did. Limits are counts of descriptors; `None`
/// is unlimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenFiles {
    /// The soft limit was already at least what is needed.
    Enough {
        /// The soft limit.
        limit: Option<u64>,
    },
    /// The soft limit was raised to what is needed.
    Raised {
        /// The soft limit before.
        from: u64,
        /// The soft limit now.
        to: u64,
    },
    /// The hard limit (or the system) does not allow what is needed: the soft limit is
    /// now the most it could be.
    Short {
        /// The soft limit now.
        limit: u64,
        /// What the connection limits need.
        needed: u64,
    },
}

/// Raises this process's soft limit of open files (`RLIMIT_NOFILE`) to `needed`, as
/// far as its hard limit allows; never lowers it. (Elsewhere than Unix: nothing to
/// raise, `Enough` with no limit.)
#[cfg(not(unix))]
pub fn raise_open_files(_needed: u64) -> OpenFiles {
    OpenFiles::Enough { limit: None }
}

/// Raises this process's soft limit of open files (`RLIMIT_NOFILE`) to `needed`, as
/// far as its hard limit allows; never lowers it.
#[cfg(unix)]
pub fn raise_open_files(needed: u64) -> OpenFiles {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let Rlimit { current, maximum } = getrlimit(Resource::Nofile);
    let Some(soft) = current else {
        return OpenFiles::Enough { limit: None };
    };
    if soft >= needed {
        return OpenFiles::Enough { limit: Some(soft) };
    }
    let target = maximum.map_or(needed, |hard| needed.min(hard));
    let set = |to: u64| {
        setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(to),
                maximum,
            },
        )
    };
    // the kernel may cap it lower than the hard limit says (fs.nr_open)
    let now = if target > soft && set(target).is_ok() {
        target
    } else {
        soft
    };
    if now >= needed {
        OpenFiles::Raised {
            from: soft,
            to: now,
        }
    } else {
        OpenFiles::Short { limit: now, needed }
    }
}

/// [`raise_open_files`] for `config`'s limits, logged: an `info` line when the limit
/// was raised, a warning when it is short of what `max_connections` needs.
pub fn raise_open_files_for(config: &ServerConfig) -> OpenFiles {
    let needed = files_needed(config);
    let found = raise_open_files(needed);
    match found {
        OpenFiles::Enough { .. } => {}
        OpenFiles::Raised { from, to } => tracing::info!(
            from,
            to,
            "open-file limit raised to what max_connections = {} needs",
            config.max_connections
        ),
        OpenFiles::Short { limit, needed } => tracing::warn!(
            limit,
            needed,
            "open-file limit below what max_connections = {} needs: past it connections fail when accepted instead of being answered 503; raise the hard limit (ulimit -Hn, LimitNOFILE= under systemd, docker run --ulimit nofile=) or lower max_connections",
            config.max_connections
        ),
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_limits_need_two_files_a_place_and_the_reserve() {
        assert_eq!(files_needed(&ServerConfig::default()), 2 * 1024 + 64);
        let huge = ServerConfig {
            max_connections: usize::MAX,
            ..ServerConfig::default()
        };
        assert_eq!(files_needed(&huge), u64::MAX);
    }

    /// In this test process: a need within the soft limit changes nothing; the limit is
    /// never lowered.
    #[cfg(unix)]
    #[test]
    fn a_need_already_met_changes_nothing() {
        use rustix::process::{Resource, getrlimit};
        let before = getrlimit(Resource::Nofile);
        assert!(matches!(raise_open_files(16), OpenFiles::Enough { .. }));
        assert_eq!(getrlimit(Resource::Nofile), before);
    }
}
