//! Garment stream codec: drift-free compressed deltas of deformed garment meshes.
//!
//! Positions are quantised onto an integer lattice in avatar-local coordinates
//! ([`CodecConfig::step`], default 1 mm: max error 0.87 mm), and everything after that is
//! integer arithmetic, so an encoder's reconstruction and every decoder's (Rust or the
//! JavaScript twin) are bit-identical forever. A delta frame predicts each patch of 64
//! vertices either from the reference frame's positions or from those positions moved
//! by the skin-weighted blend of each bone's motion between the two frames (skinning
//! motion compensation; the bones travel in the frame, a few dozen bytes), then
//! predicts the remaining offset from already-decoded neighbours along a fixed
//! traversal (parallelogram, mean or copy), and codes the residual with an adaptive
//! binary range coder; patches that did not move cost a fraction of a bit. Keyframes
//! are coded the same way from the setup's rest shape at identity bones (so their
//! skinned base is the rest shape posed by the frame's bones), or from zeros where the
//! setup has no rest shape (intra prediction alone).
//!
//! Pure: no I/O, no dependency on the rest of the crate. The byte layout and all
//! constants are in [`format`](mod@format).

mod coder;
mod decoder;
mod encoder;
pub mod format;
mod motion;
mod range;
mod setup;
#[cfg(test)]
mod tests;
mod traversal;
mod trial;

pub use decoder::Decoder;
pub use encoder::{Effort, Encoder};
pub use format::{FrameHeader, FrameKind, max_frame_bytes};
pub use motion::BoneTransform;
pub use setup::{CodecConfig, GarmentSetup};

/// Why a setup or frame was refused. Every variant names the problem; none leaves a
/// decoder or encoder changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// Zero bytes.
    #[error("empty input")]
    Empty,
    /// The input ends early.
    #[error("truncated {what}")]
    Truncated {
        /// What was being read.
        what: &'static str,
    },
    /// Bytes left after a complete frame or setup.
    #[error("{extra} unexpected trailing bytes")]
    TrailingBytes {
        /// How many.
        extra: usize,
    },
    /// Not a clothcast garment frame or setup.
    #[error("bad magic (not a clothcast garment stream)")]
    BadMagic,
    /// Another format version.
    #[error("format version {found} is not supported (this build reads version {supported})")]
    UnsupportedVersion {
        /// Version in the input.
        found: u8,
        /// Version this build reads.
        supported: u8,
    },
    /// Unknown frame kind byte.
    #[error("unknown frame kind {0}")]
    BadKind(u8),
    /// A declared size beyond the format's limits.
    #[error("{what} too large: {count}")]
    TooLarge {
        /// What was declared.
        what: &'static str,
        /// The declared value.
        count: u64,
    },
    /// Counts that do not agree.
    #[error("{what}: expected {expected}, found {found}")]
    Mismatch {
        /// What was compared.
        what: &'static str,
        /// Expected value.
        expected: u64,
        /// Value found.
        found: u64,
    },
    /// A value that breaks an invariant (encoder input or setup).
    #[error("invalid {what}")]
    Invalid {
        /// What is invalid.
        what: &'static str,
    },
    /// Decoded data that no encoder produces.
    #[error("corrupt frame: {what}")]
    Corrupt {
        /// What was wrong.
        what: &'static str,
    },
    /// The frame was coded with another setup.
    #[error("frame belongs to setup {found:08x}, decoder has setup {expected:08x}")]
    WrongSetup {
        /// The decoder's setup id.
        expected: u32,
        /// The frame's setup id.
        found: u32,
    },
    /// A delta whose reference this decoder does not hold: request a keyframe.
    #[error(
        "delta needs reference frame {needed} but the decoder holds {have:?}; a keyframe is needed"
    )]
    MissingReference {
        /// The frame's reference.
        needed: u32,
        /// The decoder's last frame.
        have: Option<u32>,
    },
    /// The reconstruction does not match the encoder's.
    #[error("checksum mismatch (expected {expected:08x}, decoded {found:08x})")]
    ChecksumMismatch {
        /// From the frame header.
        expected: u32,
        /// Of the decoded positions.
        found: u32,
    },
}
