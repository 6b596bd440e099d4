//! The browser viewer's files (clients/web), built into the binary.

use axum::response::IntoResponse;

/// The browser viewer (clients/web), built into the binary so `serve` and `demo` need
/// no files at run time.
const WEB_FILES: [(&str, &str, &str); 10] = [
    (
        "index.html",
        "text/html; charset=utf-8",
        include_str!("../../clients/web/index.html"),
    ),
    (
        "viewer.js",
        "text/javascript",
        include_str!("../../clients/web/viewer.js"),
    ),
    (
        "clothcast.js",
        "text/javascript",
        include_str!("../../clients/web/clothcast.js"),
    ),
    (
        "worker-client.js",
        "text/javascript",
        include_str!("../../clients/web/worker-client.js"),
    ),
    (
        "decode-worker.js",
        "text/javascript",
        include_str!("../../clients/web/decode-worker.js"),
    ),
    (
        "decode-relay.js",
        "text/javascript",
        include_str!("../../clients/web/decode-relay.js"),
    ),
    (
        "codec.js",
        "text/javascript",
        include_str!("../../clients/web/codec.js"),
    ),
    (
        "msgpack.js",
        "text/javascript",
        include_str!("../../clients/web/msgpack.js"),
    ),
    // the page links the icon; browsers also ask for /favicon.ico regardless
    (
        "favicon.svg",
        "image/svg+xml",
        include_str!("../../clients/web/favicon.svg"),
    ),
    (
        "favicon.ico",
        "image/svg+xml",
        include_str!("../../clients/web/favicon.svg"),
    ),
];

/// A file of the web client built into this binary (what `/` serves), by name:
/// its MIME type and contents.
fn web_entry(file: &str) -> Option<(&'static str, &'static str)> {
    WEB_FILES
        .iter()
        .find(|(name, _, _)| *name == file)
        .map(|&(_, mime, body)| (mime, body))
}

/// The contents of a built-in web client file, by name.
pub(crate) fn web_file(file: &str) -> Option<&'static str> {
    web_entry(file).map(|(_, body)| body)
}

pub(super) fn web(file: &str) -> axum::response::Response {
    match web_entry(file) {
        Some((mime, body)) => ([(axum::http::header::CONTENT_TYPE, mime)], body).into_response(),
        None => (axum::http::StatusCode::NOT_FOUND, "not found\n").into_response(),
    }
}
