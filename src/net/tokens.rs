//! Where the publisher and viewer tokens come from: the config's value
//! (`publisher_token`), a file the config names (`publisher_token_file`), the environment
//! (`CLOTHCAST_PUBLISHER_TOKEN`), or a systemd credential (`LoadCredential=publisher-token:…`,
//! read from `$CREDENTIALS_DIRECTORY/publisher-token`); the same four for viewers.
//!
//! A token may come from one source only: two sources for one role are refused by
//! name rather than one silently overriding the other (a stale token left in a config
//! would otherwise keep working, or stop working, unnoticed). Files are secrets read
//! once at start: at most [`MAX_TOKEN_BYTES`], UTF-8, surrounding whitespace (the
//! newline `echo` leaves) trimmed, and a file other users may read is warned about.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::ServerConfig;

/// Largest token (and token file) read, bytes: a token is a password, not a document.
pub const MAX_TOKEN_BYTES: usize = 4096;

/// The environment variable of each role's token.
pub const PUBLISHER_TOKEN_ENV: &str = "CLOTHCAST_PUBLISHER_TOKEN";
/// See [`PUBLISHER_TOKEN_ENV`].
pub const VIEWER_TOKEN_ENV: &str = "CLOTHCAST_VIEWER_TOKEN";
/// The systemd credential names (`LoadCredential=NAME:PATH`) of each role's token.
pub const PUBLISHER_CREDENTIAL: &str = "publisher-token";
/// See [`PUBLISHER_CREDENTIAL`].
pub const VIEWER_CREDENTIAL: &str = "viewer-token";

/// A token that could not be had.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// One role's token given by two sources.
    #[error("the {role} token is given twice, by {first} and by {second}: keep one")]
    Twice {
        /// `publisher` or `viewer`.
        role: &'static str,
        /// The first source, as [`TokenSource`] names it.
        first: String,
        /// The second.
        second: String,
    },
    /// A source that holds no usable token.
    #[error("the {role} token from {source_name}: {reason}")]
    Unusable {
        /// `publisher` or `viewer`.
        role: &'static str,
        /// The source.
        source_name: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// Where a token came from (for the start's log; never the token itself).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenSource {
    /// `publisher_token` / `viewer_token` in the config.
    Config,
    /// The file `publisher_token_file` / `viewer_token_file` names.
    File(PathBuf),
    /// The environment variable.
    Env(&'static str),
    /// `$CREDENTIALS_DIRECTORY/NAME`.
    Credential(PathBuf),
}

impl std::fmt::Display for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenSource::Config => write!(f, "the config"),
            TokenSource::File(p) => write!(f, "the file {}", p.display()),
            TokenSource::Env(v) => write!(f, "${v}"),
            TokenSource::Credential(p) => write!(f, "the systemd credential {}", p.display()),
        }
    }
}

/// What the process was started with that can hold tokens: its environment and
/// systemd's credentials folder. [`Self::from_process`] reads the real ones; tests
/// give their own.
pub struct TokenEnv<'a> {
    /// The environment variable of that name, if set (`Err` holds a value that is not
    /// UTF-8).
    pub var: &'a dyn Fn(&str) -> Option<Result<String, std::ffi::OsString>>,
    /// `$CREDENTIALS_DIRECTORY`, if set.
    pub credentials: Option<PathBuf>,
}

impl TokenEnv<'static> {
    /// The process's own environment.
    pub fn from_process() -> Self {
        fn var(name: &str) -> Option<Result<String, std::ffi::OsString>> {
            std::env::var_os(name).map(|v| v.into_string())
        }
        Self {
            var: &var,
            credentials: std::env::var_os("CREDENTIALS_DIRECTORY").map(PathBuf::from),
        }
    }
}

/// Fills `config.publisher_token` and `config.viewer_token` from whichever one source
/// gives each (see the module doc), clearing the `*_token_file` settings it read, and
/// says where each came from (`None`: no source, which [`super::check_server`] then
/// refuses unless `open = true`). Relative token files are taken as they are: the
/// caller resolves them against the config's folder first.
pub fn resolve_tokens(
    config: &mut ServerConfig,
    env: &TokenEnv<'_>,
) -> Result<[Option<TokenSource>; 2], TokenError> {
    let one = |role,
               token: &mut Option<String>,
               file: &mut Option<PathBuf>,
               var,
               credential|
     -> Result<Option<TokenSource>, TokenError> {
        let found = resolve(role, token.take(), file.take(), var, credential, env)?;
        Ok(found.map(|(t, source)| {
            *token = Some(t);
            source
        }))
    };
    Ok([
        one(
            "publisher",
            &mut config.publisher_token,
            &mut config.publisher_token_file,
            PUBLISHER_TOKEN_ENV,
            PUBLISHER_CREDENTIAL,
        )?,
        one(
            "viewer",
            &mut config.viewer_token,
            &mut config.viewer_token_file,
            VIEWER_TOKEN_ENV,
            VIEWER_CREDENTIAL,
        )?,
    ])
}

/// What [`super::start`] requires of the tokens it is handed: no token file left
/// unread, and each token usable as [`resolve_tokens`] would leave it (a library user
/// that fills `publisher_token` directly gets the same refusals).
pub(super) fn check_resolved(config: &ServerConfig) -> Result<(), TokenError> {
    for (role, token, file) in [
        (
            "publisher",
            &config.publisher_token,
            &config.publisher_token_file,
        ),
        ("viewer", &config.viewer_token, &config.viewer_token_file),
    ] {
        if let Some(p) = file {
            return Err(TokenError::Unusable {
                role,
                source_name: TokenSource::File(p.clone()).to_string(),
                reason: "was not read (resolve_tokens reads token files)".into(),
            });
        }
        let fault = token.as_deref().and_then(|t| match usable(t) {
            Err(reason) => Some(reason),
            Ok(u) if u.len() != t.len() => Some("has surrounding whitespace"),
            Ok(_) => None,
        });
        if let Some(reason) = fault {
            return Err(TokenError::Unusable {
                role,
                source_name: TokenSource::Config.to_string(),
                reason: reason.into(),
            });
        }
    }
    Ok(())
}

fn resolve(
    role: &'static str,
    value: Option<String>,
    file: Option<PathBuf>,
    var: &'static str,
    credential: &'static str,
    env: &TokenEnv<'_>,
) -> Result<Option<(String, TokenSource)>, TokenError> {
    let unusable = |source: &TokenSource, reason: String| TokenError::Unusable {
        role,
        source_name: source.to_string(),
        reason,
    };
    let mut found: Vec<(Result<String, String>, TokenSource)> = Vec::new();
    if let Some(v) = value {
        found.push((Ok(v), TokenSource::Config));
    }
    if let Some(p) = file {
        found.push((read_secret(&p), TokenSource::File(p)));
    }
    if let Some(v) = (env.var)(var) {
        let v = v.map_err(|_| "is not UTF-8".to_string());
        found.push((v, TokenSource::Env(var)));
    }
    if let Some(dir) = &env.credentials {
        let p = dir.join(credential);
        // a credential the unit does not load is simply absent
        if p.exists() {
            found.push((read_secret(&p), TokenSource::Credential(p)));
        }
    }
    let mut found = found.into_iter();
    let Some((token, source)) = found.next() else {
        return Ok(None);
    };
    if let Some((_, second)) = found.next() {
        return Err(TokenError::Twice {
            role,
            first: source.to_string(),
            second: second.to_string(),
        });
    }
    let token = token.map_err(|reason| unusable(&source, reason))?;
    let token = usable(&token).map_err(|reason| unusable(&source, reason.into()))?;
    Ok(Some((token.to_string(), source)))
}

/// The token in `raw`, surrounding whitespace trimmed: refused when empty (an empty
/// token would admit anyone who sends an empty one), too long, or holding control
/// characters (two lines in a file are a mistake, not a token).
fn usable(raw: &str) -> Result<&str, &'static str> {
    let t = raw.trim();
    if t.is_empty() {
        return Err("is empty");
    }
    if t.len() > MAX_TOKEN_BYTES {
        return Err("is longer than 4096 bytes");
    }
    if t.chars().any(char::is_control) {
        return Err("holds control characters (a line break inside it?)");
    }
    Ok(t)
}

/// A secret file's text: at most [`MAX_TOKEN_BYTES`] (+ a line break) read, UTF-8; a
/// warning is logged when users other than the owner and group may read it.
fn read_secret(path: &Path) -> Result<String, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("cannot be read: {e}"))?;
    #[cfg(unix)]
    if let Ok(meta) = file.metadata() {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o004 != 0 {
            tracing::warn!(path = %path.display(), "token file is readable by every user of this machine: chmod o-r it");
        }
    }
    let mut bytes = Vec::new();
    let limit = MAX_TOKEN_BYTES as u64 + 2;
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot be read: {e}"))?;
    if bytes.len() as u64 > limit {
        return Err("is longer than 4096 bytes".into());
    }
    String::from_utf8(bytes).map_err(|_| "is not UTF-8".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A scratch folder, removed when the test passes (kept when it fails).
    struct Scratch(PathBuf);

    impl Drop for Scratch {
        fn drop(&mut self) {
            if !std::thread::panicking() {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    impl std::ops::Deref for Scratch {
        type Target = PathBuf;
        fn deref(&self) -> &PathBuf {
            &self.0
        }
    }

    fn dir(name: &str) -> Scratch {
        let d =
            std::env::temp_dir().join(format!("clothcast-tokens-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("temp dir");
        Scratch(d)
    }

    fn run(
        config: &mut ServerConfig,
        vars: &[(&str, &str)],
        credentials: Option<PathBuf>,
    ) -> Result<[Option<TokenSource>; 2], TokenError> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let var = move |k: &str| vars.get(k).cloned().map(Ok);
        resolve_tokens(
            config,
            &TokenEnv {
                var: &var,
                credentials,
            },
        )
    }

    #[test]
    fn each_source_gives_a_token_trimmed_and_says_which_it_was() {
        let d = dir("sources");
        let file = d.join("viewer.token");
        std::fs::write(&file, "  view-secret\n").expect("write");
        let mut c = ServerConfig {
            publisher_token: Some("pub-secret".into()),
            viewer_token_file: Some(file.clone()),
            ..ServerConfig::default()
        };
        let s = run(&mut c, &[], None).expect("tokens");
        assert_eq!(c.publisher_token.as_deref(), Some("pub-secret"));
        assert_eq!(c.viewer_token.as_deref(), Some("view-secret"));
        assert_eq!(c.viewer_token_file, None);
        assert_eq!(
            s,
            [Some(TokenSource::Config), Some(TokenSource::File(file))]
        );

        // the environment and systemd credentials; a credential the unit does not
        // load is absent, not an error
        let creds = dir("creds");
        std::fs::write(creds.join(PUBLISHER_CREDENTIAL), "from-systemd\r\n").expect("write");
        let mut c = ServerConfig::default();
        let s = run(
            &mut c,
            &[(VIEWER_TOKEN_ENV, "from-env")],
            Some(creds.clone()),
        )
        .expect("tokens");
        assert_eq!(c.publisher_token.as_deref(), Some("from-systemd"));
        assert_eq!(c.viewer_token.as_deref(), Some("from-env"));
        assert_eq!(
            s,
            [
                Some(TokenSource::Credential(creds.join(PUBLISHER_CREDENTIAL))),
                Some(TokenSource::Env(VIEWER_TOKEN_ENV))
            ]
        );

        // nothing anywhere: no token, and the config stays without one
        let mut c = ServerConfig::default();
        assert_eq!(
            run(&mut c, &[], Some(d.to_path_buf())).expect("none"),
            [None, None]
        );
        assert_eq!((c.publisher_token, c.viewer_token), (None, None));
    }

    #[test]
    fn two_sources_for_one_role_are_refused_naming_both() {
        let creds = dir("twice");
        std::fs::write(creds.join(VIEWER_CREDENTIAL), "a").expect("write");
        let mut c = ServerConfig {
            viewer_token: Some("b".into()),
            ..ServerConfig::default()
        };
        let e = run(&mut c, &[], Some(creds.to_path_buf()))
            .expect_err("twice")
            .to_string();
        assert!(
            e.contains("viewer token is given twice, by the config and by the systemd credential"),
            "{e}"
        );
        let mut c = ServerConfig {
            publisher_token: Some("b".into()),
            ..ServerConfig::default()
        };
        let e = run(&mut c, &[(PUBLISHER_TOKEN_ENV, "c")], None)
            .expect_err("twice")
            .to_string();
        assert!(
            e.contains("by the config and by $CLOTHCAST_PUBLISHER_TOKEN"),
            "{e}"
        );
    }

    #[test]
    fn unusable_tokens_are_refused_naming_their_source_and_fault() {
        let d = dir("bad");
        let cases: [(&str, &[u8], &str); 5] = [
            ("empty", b" \n", "is empty"),
            ("two-lines", b"one\ntwo\n", "control characters"),
            ("latin1", b"caf\xe9", "not UTF-8"),
            (
                "huge",
                &[b'x'; MAX_TOKEN_BYTES + 10],
                "longer than 4096 bytes",
            ),
            ("just-fits", &[b'x'; MAX_TOKEN_BYTES], ""),
        ];
        for (name, bytes, fault) in cases {
            let p = d.join(name);
            std::fs::write(&p, bytes).expect("write");
            let mut c = ServerConfig {
                publisher_token_file: Some(p.clone()),
                ..ServerConfig::default()
            };
            match run(&mut c, &[], None) {
                Ok(_) if fault.is_empty() => {
                    assert_eq!(c.publisher_token.map(|t| t.len()), Some(MAX_TOKEN_BYTES))
                }
                Ok(_) => panic!("{name} accepted"),
                Err(e) => {
                    let e = e.to_string();
                    assert!(!fault.is_empty(), "{name}: {e}");
                    assert!(
                        e.contains(&p.display().to_string()) && e.contains(fault),
                        "{e}"
                    );
                }
            }
        }
        // a missing file, an empty config value, an empty variable
        let mut c = ServerConfig {
            viewer_token_file: Some(d.join("missing")),
            ..ServerConfig::default()
        };
        let e = run(&mut c, &[], None).expect_err("missing").to_string();
        assert!(e.contains("missing: cannot be read"), "{e}");
        let mut c = ServerConfig {
            viewer_token: Some(String::new()),
            ..ServerConfig::default()
        };
        let e = run(&mut c, &[], None).expect_err("empty").to_string();
        assert!(e.contains("viewer token from the config: is empty"), "{e}");
        let mut c = ServerConfig::default();
        let e = run(&mut c, &[(PUBLISHER_TOKEN_ENV, "")], None)
            .expect_err("empty")
            .to_string();
        assert!(e.contains("$CLOTHCAST_PUBLISHER_TOKEN: is empty"), "{e}");
    }
}
