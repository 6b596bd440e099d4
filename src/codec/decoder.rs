//! The decoder: validates and decodes frames in place.

use std::sync::Arc;

use super::CodecError;
use super::coder::{
    Frames, Lattice, Models, checksum, decode_bones, predict, split_mode, write_out,
};
use super::format::{
    BASE_SKINNED, FRAME_HEADER_LEN, FrameHeader, FrameKind, LATTICE_LIMIT, MODE_SKIP, PATCH_SIZE,
    SPATIAL_PARALLELOGRAM,
};
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
        let limit = i64::from(LATTICE_LIMIT);
        let mut prev = [0i32; 3];
        let mut vertex = |dec: &mut RangeDecoder<'_>,
                          m: &mut Models,
                          q_new: &mut Lattice,
                          base: Option<&[[i32; 3]]>,
                          sp: u32,
                          v: usize|
         -> Result<(), CodecError> {
            let (p, hint) = predict(v, &s.predictor[v], base, q_new, sp);
            let mut cur = [0i32; 3];
            for k in 0..3 {
                let e = dec.int(&mut m.coords[k], coord_context(&prev, &cur, k, hint[k]))?;
                cur[k] = e;
                let x = p[k] + i64::from(e);
                if x.abs() >= limit {
                    return Err(CodecError::Corrupt {
                        what: "position outside the lattice",
                    });
                }
                q_new[v][k] = x as i32;
            }
            prev = cur;
            Ok(())
        };
        match h.kind {
            FrameKind::Key => {
                decode_bones(&mut dec, &mut m, &mut self.f.bones_new, None)?;
                for &v in &s.order {
                    vertex(
                        &mut dec,
                        &mut m,
                        &mut self.f.q_new,
                        None,
                        SPATIAL_PARALLELOGRAM,
                        v as usize,
                    )?;
                }
            }
            FrameKind::Delta => {
                decode_bones(&mut dec, &mut m, &mut self.f.bones_new, Some(&self.f.bones))?;
                self.f.start_delta();
                let mut last_mode = MODE_SKIP;
                for patch in s.order.chunks(PATCH_SIZE) {
                    let mode = m.decode_mode(&mut dec, last_mode)?;
                    if mode == MODE_SKIP {
                        for &v in patch {
                            self.f.q_new[v as usize] = self.f.q[v as usize];
                        }
                    } else {
                        let (b, sp) = split_mode(mode);
                        if b == BASE_SKINNED {
                            self.f.compensate(&s, patch);
                        }
                        let base = if b == BASE_SKINNED {
                            &self.f.mc
                        } else {
                            &self.f.q
                        };
                        for &v in patch {
                            vertex(
                                &mut dec,
                                &mut m,
                                &mut self.f.q_new,
                                Some(base),
                                sp,
                                v as usize,
                            )?;
                        }
                    }
                    last_mode = mode;
                }
            }
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
