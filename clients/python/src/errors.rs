//! The module's exceptions: `clothcast.CodecError` (a `ValueError` whose `code` names
//! the problem with the codes of the JavaScript and C# decoders: `truncated`,
//! `missing-reference`, …) and `clothcast.ClientError` (a `ConnectionError`: the server
//! refused the viewer for good, e.g. a wrong token).

use clothcast::codec::CodecError as Codec;
use pyo3::exceptions::{PyConnectionError, PyValueError};
use pyo3::prelude::*;

pyo3::create_exception!(
    clothcast,
    CodecError,
    PyValueError,
    "A garment setup or frame refused by the decoder; `code` names the problem \
     (`empty`, `truncated`, `trailing-bytes`, `bad-magic`, `unsupported-version`, \
     `bad-kind`, `too-large`, `mismatch`, `invalid`, `corrupt`, `wrong-setup`, \
     `missing-reference`, `checksum`), as in the JavaScript and C# decoders."
);

pyo3::create_exception!(
    clothcast,
    ClientError,
    PyConnectionError,
    "The server refused the viewer in a way that retrying cannot change (a wrong \
     token, an unsupported protocol version, a bad subscription)."
);

/// The code of a codec error, as the JavaScript decoder names it.
pub(crate) fn code(e: &Codec) -> &'static str {
    match e {
        Codec::Empty => "empty",
        Codec::Truncated { .. } => "truncated",
        Codec::TrailingBytes { .. } => "trailing-bytes",
        Codec::BadMagic => "bad-magic",
        Codec::UnsupportedVersion { .. } => "unsupported-version",
        Codec::BadKind(_) => "bad-kind",
        Codec::TooLarge { .. } => "too-large",
        Codec::Mismatch { .. } => "mismatch",
        Codec::Invalid { .. } => "invalid",
        Codec::Corrupt { .. } => "corrupt",
        Codec::WrongSetup { .. } => "wrong-setup",
        Codec::MissingReference { .. } => "missing-reference",
        Codec::ChecksumMismatch { .. } => "checksum",
        _ => "invalid",
    }
}

/// `e` as a `clothcast.CodecError` with its `code`.
pub(crate) fn codec(py: Python<'_>, e: &Codec) -> PyErr {
    let err = CodecError::new_err(format!("{}: {e}", code(e)));
    if let Err(set) = err.value(py).setattr("code", code(e)) {
        return set;
    }
    err
}
