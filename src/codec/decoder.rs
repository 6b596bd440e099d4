//! The decoder: validates and decodes frames in place.

use std::sync::Arc;

use super::CodecError;
use super::coder::{
    Frames, Lattice, Models, Skeleton, checksum, decode_bones, predict_in, split_mode, write_out,
};
use super::format::{
    BASE_PREVIOUS, FRAME_HEADER_LEN, FrameHeader, FrameKind, LATTICE_LIMIT, MODE_SKIP, PATCH_SIZE,
    SPATIAL_MEAN, SPATIAL_NONE, SPATIAL_PARALLELOGRAM,
};
use super::motion::{BoneTransform, dequantize_bone};
use super::range::{RangeDecoder, coord_context};
use super::setup::GarmentSetup;

/// Decodes one garment stream in place.
///
/// Contract: any byte string may be passed. Everything is validated — header, sizes
/// against the setup, every decoded value against the lattice, the payload length
/// exactly, and the reconstruction against the frame's checksum — before the state
/// or the caller's buffer changes, so a refused frame loses nothing. Memory is
/// allocated only in [`Decoder::new`]; an untrusted stream cannot make the decoder
/// allocate, loop longer than its byte length allows, or panic.
pub struct Decoder {
    setup: Arc<GarmentSetup>,
    stream_id: Option<u32>,
    frame: Option<u32>,
    f: Frames,
}

impl Decoder {
    /// A decoder for streams coded with `setup`; it accepts a keyframe first.
    pub fn new(setup: Arc<GarmentSetup>) -> Self {
        let n = setup.vertex_count();
        let nb = setup.bones as usize;
        Self {
            stream_id: None,
            frame: None,
            f: Frames::new(n, nb),
            setup,
        }
    }

    /// Number of the last decoded frame (the only reference a delta may name).
    pub fn last_frame(&self) -> Option<u32> {
        self.frame
    }

    /// The bones of the last decoded frame as the stream carries them (the encoder's
    /// quantisation of its input): each rotation a quaternion (x, y, z, w) to 2^-14,
    /// w ≥ 0, not renormalised; each translation in metres, to the lattice step. Before
    /// the first frame, all zeros (no bone is known).
    pub fn bones(&self, out: &mut [BoneTransform]) -> Result<(), CodecError> {
        if out.len() != self.f.bones.len() {
            return Err(CodecError::Mismatch {
                what: "bones",
                expected: self.f.bones.len() as u64,
                found: out.len() as u64,
            });
        }
        for (o, q) in out.iter_mut().zip(&self.f.bones) {
            *o = dequantize_bone(q, self.setup.step);
        }
        Ok(())
    }

    /// Forgets the stream (the next frame must be a keyframe).
    pub fn reset(&mut self) {
        self.frame = None;
        self.stream_id = None;
    }

    /// Decodes `bytes` and writes the positions (metres, 3 floats per vertex) into `out`.
    /// A delta whose reference is not the last decoded frame is refused with
    /// [`CodecError::MissingReference`]: ask the sender for a keyframe.
    pub fn decode(&mut self, bytes: &[u8], out: &mut [f32]) -> Result<FrameHeader, CodecError> {
        let h = FrameHeader::parse(bytes)?;
        let s = Arc::clone(&self.setup);
        if h.setup_id != s.id() {
            return Err(CodecError::WrongSetup {
                expected: s.id(),
                found: h.setup_id,
            });
        }
        if h.vertices as usize != s.vertex_count() || h.bones != s.bones {
            return Err(CodecError::Mismatch {
                what: "vertex/bone count of frame",
                expected: s.vertex_count() as u64,
                found: u64::from(h.vertices),
            });
        }
        if out.len() != 3 * s.vertex_count() {
            return Err(CodecError::Mismatch {
                what: "output floats",
                expected: 3 * s.vertex_count() as u64,
                found: out.len() as u64,
            });
        }
        if h.kind == FrameKind::Delta
            && (self.frame != Some(h.reference) || self.stream_id != Some(h.stream_id))
        {
            return Err(CodecError::MissingReference {
                needed: h.reference,
                have: self.frame,
            });
        }
        let mut dec = RangeDecoder::new(&bytes[FRAME_HEADER_LEN..])?;
        let mut m = Models::new();
        let mut prev = [0i32; 3];
        // a keyframe is predicted as a delta is, from the setup's rest shape (zeros
        // without one) at identity bones; its bones from their parents alone
        let key = h.kind == FrameKind::Key;
        decode_bones(
            &mut dec,
            &mut m,
            &mut self.f.bones_new,
            (!key).then_some(&self.f.bones[..]),
            Skeleton::of(&s),
        )?;
        self.f.start(key);
        let mut last_mode = MODE_SKIP;
        for patch in s.order.chunks(PATCH_SIZE) {
            let mode = m.decode_mode(&mut dec, last_mode)?;
            if mode == MODE_SKIP {
                let (reference, q_new) = self.f.patch_base(&s, patch, BASE_PREVIOUS);
                for &v in patch {
                    q_new[v as usize] = reference[v as usize];
                }
            } else {
                let (b, sp) = split_mode(mode);
                let (base, q_new) = self.f.patch_base(&s, patch, b);
                let run = Run {
                    setup: &s,
                    vertices: patch,
                };
                let (d, m, prev) = (&mut dec, &mut m, &mut prev);
                match sp {
                    SPATIAL_NONE => run.go::<SPATIAL_NONE>(d, m, base, q_new, prev),
                    SPATIAL_MEAN => run.go::<SPATIAL_MEAN>(d, m, base, q_new, prev),
                    _ => run.go::<SPATIAL_PARALLELOGRAM>(d, m, base, q_new, prev),
                }?;
            }
            last_mode = mode;
        }
        dec.finish()?;
        let sum = checksum(&self.f.q_new);
        if sum != h.checksum {
            return Err(CodecError::ChecksumMismatch {
                expected: h.checksum,
                found: sum,
            });
        }
        write_out(&self.f.q_new, s.step, out)?;
        self.f.commit();
        self.frame = Some(h.frame);
        self.stream_id = Some(h.stream_id);
        Ok(h)
    }
}

/// A run of vertices (in traversal order) decoded with one prediction mode.
struct Run<'a> {
    setup: &'a GarmentSetup,
    vertices: &'a [u32],
}

impl Run<'_> {
    /// Decodes the run's residuals with spatial predictor `SP` from `base` into `q_new`; `prev` is the previous vertex's residual (the
    /// contexts' state, carried from run to run). Instantiated per mode, as the
    /// encoder's trials are, so that nothing is decided per vertex but which references
    /// exist.
    #[inline(always)]
    fn go<const SP: u32>(
        &self,
        dec: &mut RangeDecoder<'_>,
        m: &mut Models,
        base: &[[i32; 3]],
        q_new: &mut Lattice,
        prev: &mut [i32; 3],
    ) -> Result<(), CodecError> {
        let limit = i64::from(LATTICE_LIMIT);
        for &v in self.vertices {
            let v = v as usize;
            let (p, hint) = predict_in::<SP>(v, &self.setup.predictor[v], base, q_new);
            let mut cur = [0i32; 3];
            for k in 0..3 {
                let e = dec.int(&mut m.coords[k], coord_context(prev, &cur, k, hint[k]))?;
                cur[k] = e;
                let x = p[k] + i64::from(e);
                if x.abs() >= limit {
                    return Err(CodecError::Corrupt {
                        what: "position outside the lattice",
                    });
                }
                q_new[v][k] = x as i32;
            }
            *prev = cur;
        }
        Ok(())
    }
}
