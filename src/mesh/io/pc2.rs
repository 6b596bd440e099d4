//! PC2 point caches: the vertex-animation format of 3ds Max's Point Cache 2 modifier,
//! which Blender's Mesh Cache modifier, Maya, Houdini and Cinema 4D read. A cache holds
//! a fixed number of points and one sample of all of them per time step:
//!
//! ```text
//! "POINTCACHE2\0"  i32 version = 1  i32 points  f32 start frame  f32 sampling  i32 samples
//! samples × points × (f32 x, f32 y, f32 z)        all little-endian
//! ```
//!
//! `sampling` is the number of scene frames between samples (1: a sample per frame).
//! The coordinates are whatever frame the writer was given; the point order is the
//! mesh's vertex order, so a cache drives only a mesh with the same vertices.

use std::io::{Read, Seek, SeekFrom, Write};

/// The 12 bytes every PC2 file starts with.
pub const PC2_MAGIC: &[u8; 12] = b"POINTCACHE2\0";
/// Bytes before the first sample.
pub const PC2_HEADER_BYTES: u64 = 32;
/// Offset of the sample count in the header.
const SAMPLES_AT: u64 = 28;

/// Why a PC2 file could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Pc2Error {
    /// The file could not be read or written.
    #[error("point cache: {0}")]
    Io(#[from] std::io::Error),
    /// The file does not start with `POINTCACHE2\0` and version 1.
    #[error("not a PC2 version 1 point cache")]
    NotPc2,
    /// The header's counts are negative, or the file is shorter than they say.
    #[error("point cache header says {points} points × {samples} samples but {what}")]
    BadSize {
        /// Points per sample in the header.
        points: i64,
        /// Samples in the header.
        samples: i64,
        /// What does not fit.
        what: String,
    },
    /// A sample does not have three coordinates for each of the cache's points.
    #[error("a sample of {got} coordinates for a cache of {points} points (3 each)")]
    WrongSample {
        /// Coordinates given.
        got: usize,
        /// Points of the cache.
        points: usize,
    },
}

/// Appends samples to a PC2 file, keeping its header's sample count current after every
/// sample, so a cache cut short (a killed process, a full disk) still reads as the
/// samples written before it.
pub struct Pc2Writer<W: Write + Seek> {
    out: W,
    points: usize,
    samples: u32,
    bytes: Vec<u8>,
}

impl<W: Write + Seek> Pc2Writer<W> {
    /// Starts a cache of `points` points whose first sample is at scene frame `start`,
    /// `sampling` frames apart; writes the header (0 samples) at the start of `out`.
    pub fn new(mut out: W, points: usize, start: f32, sampling: f32) -> Result<Self, Pc2Error> {
        let count = i32::try_from(points).map_err(|_| Pc2Error::BadSize {
            points: points as i64,
            samples: 0,
            what: "a PC2 count is a 32-bit integer".into(),
        })?;
        out.seek(SeekFrom::Start(0))?;
        out.write_all(PC2_MAGIC)?;
        out.write_all(&1i32.to_le_bytes())?;
        out.write_all(&count.to_le_bytes())?;
        out.write_all(&start.to_le_bytes())?;
        out.write_all(&sampling.to_le_bytes())?;
        out.write_all(&0i32.to_le_bytes())?;
        Ok(Self {
            out,
            points,
            samples: 0,
            bytes: Vec::with_capacity(12 * points),
        })
    }

    /// Appends one sample: `xyz` holds x, y, z of every point in order.
    pub fn push(&mut self, xyz: &[f32]) -> Result<(), Pc2Error> {
        if xyz.len() != 3 * self.points {
            return Err(Pc2Error::WrongSample {
                got: xyz.len(),
                points: self.points,
            });
        }
        let next = i32::try_from(self.samples + 1).map_err(|_| Pc2Error::BadSize {
            points: self.points as i64,
            samples: i64::from(self.samples) + 1,
            what: "a PC2 count is a 32-bit integer".into(),
        })?;
        self.bytes.clear();
        self.bytes.extend(xyz.iter().flat_map(|x| x.to_le_bytes()));
        let at = PC2_HEADER_BYTES + u64::from(self.samples) * 12 * self.points as u64;
        self.out.seek(SeekFrom::Start(at))?;
        self.out.write_all(&self.bytes)?;
        self.out.seek(SeekFrom::Start(SAMPLES_AT))?;
        self.out.write_all(&next.to_le_bytes())?;
        self.samples += 1;
        Ok(())
    }

    /// Samples written so far.
    pub fn samples(&self) -> u32 {
        self.samples
    }

    /// Flushes and returns the output.
    pub fn finish(mut self) -> Result<W, Pc2Error> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// A whole point cache in memory.
#[derive(Clone, Debug, PartialEq)]
pub struct Pc2 {
    /// Points per sample.
    pub points: usize,
    /// Scene frame of the first sample.
    pub start: f32,
    /// Scene frames between samples.
    pub sampling: f32,
    /// `samples[s]` holds x, y, z of every point of sample `s`.
    pub samples: Vec<Vec<f32>>,
}

/// A PC2 header's counts and timing, checked: points, samples, start, sampling.
struct Header {
    points: usize,
    samples: usize,
    start: f32,
    sampling: f32,
}

/// Reads and checks a PC2 header; `body` is the number of bytes after it, which must
/// be exactly the samples the header announces.
fn header(head: &[u8; PC2_HEADER_BYTES as usize], body: u64) -> Result<Header, Pc2Error> {
    let word = |i: usize| [head[i], head[i + 1], head[i + 2], head[i + 3]];
    if &head[..12] != PC2_MAGIC || i32::from_le_bytes(word(12)) != 1 {
        return Err(Pc2Error::NotPc2);
    }
    let points = i64::from(i32::from_le_bytes(word(16)));
    let samples = i64::from(i32::from_le_bytes(word(28)));
    let (start, sampling) = (f32::from_le_bytes(word(20)), f32::from_le_bytes(word(24)));
    let bad = |what: String| Pc2Error::BadSize {
        points,
        samples,
        what,
    };
    if points < 0 || samples < 0 {
        return Err(bad("a count is negative".into()));
    }
    if points == 0 && samples > 0 {
        return Err(bad("samples of no points".into()));
    }
    let per_sample = 12 * points as u64;
    if per_sample.checked_mul(samples as u64) != Some(body) {
        return Err(bad(format!("{body} bytes of samples follow")));
    }
    Ok(Header {
        points: points as usize,
        samples: samples as usize,
        start,
        sampling,
    })
}

/// Reads a PC2 file. Untrusted input: the header's counts are checked against the bytes
/// that follow before anything is allocated for them, and trailing bytes are refused.
pub fn read_pc2(mut r: impl Read) -> Result<Pc2, Pc2Error> {
    let mut head = [0u8; PC2_HEADER_BYTES as usize];
    r.read_exact(&mut head).map_err(|_| Pc2Error::NotPc2)?;
    let mut rest = Vec::new();
    r.read_to_end(&mut rest)?;
    let h = header(&head, rest.len() as u64)?;
    let samples = rest
        .chunks_exact((12 * h.points).max(1))
        .map(|s| {
            s.chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect()
        })
        .collect();
    Ok(Pc2 {
        points: h.points,
        start: h.start,
        sampling: h.sampling,
        samples,
    })
}

/// Reads a PC2 file a sample at a time (a long take's cache need not fit in memory).
/// The header is checked against the file's length when opened, as [`read_pc2`] does.
pub struct Pc2Reader<R: Read + Seek> {
    input: R,
    points: usize,
    samples: usize,
    bytes: Vec<u8>,
}

impl<R: Read + Seek> Pc2Reader<R> {
    /// Opens a cache: reads and checks its header.
    pub fn new(mut input: R) -> Result<Self, Pc2Error> {
        let mut head = [0u8; PC2_HEADER_BYTES as usize];
        input.seek(SeekFrom::Start(0))?;
        input.read_exact(&mut head).map_err(|_| Pc2Error::NotPc2)?;
        let end = input.seek(SeekFrom::End(0))?;
        let h = header(&head, end - PC2_HEADER_BYTES)?;
        Ok(Self {
            input,
            points: h.points,
            samples: h.samples,
            bytes: Vec::new(),
        })
    }

    /// Points per sample.
    pub fn points(&self) -> usize {
        self.points
    }

    /// Samples in the cache.
    pub fn samples(&self) -> usize {
        self.samples
    }

    /// Sample `k` into `out` (resized to 3 floats per point).
    pub fn read(&mut self, k: usize, out: &mut Vec<f32>) -> Result<(), Pc2Error> {
        if k >= self.samples {
            return Err(Pc2Error::BadSize {
                points: self.points as i64,
                samples: self.samples as i64,
                what: format!("sample {k} was asked for"),
            });
        }
        let per_sample = 12 * self.points;
        self.input.seek(SeekFrom::Start(
            PC2_HEADER_BYTES + (k as u64) * per_sample as u64,
        ))?;
        self.bytes.resize(per_sample, 0);
        self.input.read_exact(&mut self.bytes)?;
        out.clear();
        out.extend(
            self.bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::io::Cursor;

    #[test]
    fn the_reader_reads_a_sample_at_a_time_what_read_pc2_reads() {
        let mut w = Pc2Writer::new(Cursor::new(Vec::new()), 2, 0.0, 1.0).unwrap();
        for k in 0..5 {
            let k = k as f32;
            w.push(&[k, 1.0, 2.0, 3.0, 4.0, -k]).unwrap();
        }
        let bytes = w.finish().unwrap().into_inner();
        let whole = read_pc2(Cursor::new(bytes.clone())).unwrap();
        let mut r = Pc2Reader::new(Cursor::new(bytes.clone())).unwrap();
        assert_eq!((r.points(), r.samples()), (2, 5));
        let mut s = Vec::new();
        for k in [4, 0, 2] {
            r.read(k, &mut s).unwrap();
            assert_eq!(s, whole.samples[k]);
        }
        assert!(r.read(5, &mut s).is_err());
        // a file cut short is refused when opened
        assert!(Pc2Reader::new(Cursor::new(bytes[..bytes.len() - 1].to_vec())).is_err());
    }

    #[test]
    fn the_header_is_the_one_blender_reads() {
        let mut w = Pc2Writer::new(Cursor::new(Vec::new()), 2, 1.0, 1.0).unwrap();
        w.push(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let bytes = w.finish().unwrap().into_inner();
        assert_eq!(&bytes[..12], b"POINTCACHE2\0");
        assert_eq!(bytes[12..16], 1i32.to_le_bytes()); // version
        assert_eq!(bytes[16..20], 2i32.to_le_bytes()); // points
        assert_eq!(bytes[20..24], 1f32.to_le_bytes()); // start frame
        assert_eq!(bytes[24..28], 1f32.to_le_bytes()); // sampling
        assert_eq!(bytes[28..32], 1i32.to_le_bytes()); // samples
        assert_eq!(bytes.len(), 32 + 24);
        assert_eq!(bytes[32..36], 1f32.to_le_bytes());
        assert_eq!(bytes[52..56], 6f32.to_le_bytes());
    }

    #[test]
    fn a_sample_of_the_wrong_length_is_refused_and_nothing_is_written() {
        let mut w = Pc2Writer::new(Cursor::new(Vec::new()), 2, 0.0, 1.0).unwrap();
        let e = w.push(&[1.0; 5]).unwrap_err();
        assert!(
            matches!(e, Pc2Error::WrongSample { got: 5, points: 2 }),
            "{e}"
        );
        assert_eq!(w.samples(), 0);
        let c = read_pc2(Cursor::new(w.finish().unwrap().into_inner())).unwrap();
        assert!(c.samples.is_empty());
    }

    #[test]
    fn hostile_caches_are_refused_by_name() {
        let mut w = Pc2Writer::new(Cursor::new(Vec::new()), 3, 0.0, 1.0).unwrap();
        w.push(&[0.5; 9]).unwrap();
        let good = w.finish().unwrap().into_inner();
        assert!(matches!(read_pc2(&good[..10]), Err(Pc2Error::NotPc2)));
        assert!(matches!(read_pc2(&[][..]), Err(Pc2Error::NotPc2)));
        let mut magic = good.clone();
        magic[0] = b'Q';
        assert!(matches!(read_pc2(&magic[..]), Err(Pc2Error::NotPc2)));
        // every cut inside the samples, and a byte too many
        for n in 32..good.len() {
            assert!(
                matches!(read_pc2(&good[..n]), Err(Pc2Error::BadSize { .. })),
                "{n}"
            );
        }
        let mut extra = good.clone();
        extra.push(0);
        assert!(matches!(
            read_pc2(&extra[..]),
            Err(Pc2Error::BadSize { .. })
        ));
        // a header claiming two billion points allocates nothing
        let mut huge = good.clone();
        huge[16..20].copy_from_slice(&i32::MAX.to_le_bytes());
        huge[28..32].copy_from_slice(&i32::MAX.to_le_bytes());
        assert!(matches!(read_pc2(&huge[..]), Err(Pc2Error::BadSize { .. })));
        huge[16..20].copy_from_slice(&(-1i32).to_le_bytes());
        assert!(matches!(read_pc2(&huge[..]), Err(Pc2Error::BadSize { .. })));
        huge[16..20].copy_from_slice(&0i32.to_le_bytes());
        assert!(matches!(
            read_pc2(&huge[..32]),
            Err(Pc2Error::BadSize { .. })
        ));
    }

    proptest! {
        /// Every sample written reads back bit for bit, with the header's count current
        /// after each one.
        #[test]
        fn samples_round_trip(points in 1usize..20, samples in 0usize..8, seed in any::<u32>()) {
            let mut w = Pc2Writer::new(Cursor::new(Vec::new()), points, 3.0, 0.5).unwrap();
            let data: Vec<Vec<f32>> = (0..samples)
                .map(|s| (0..3 * points).map(|i| (seed as f32).mul_add(1e-3, (s * 31 + i) as f32)).collect())
                .collect();
            for (k, s) in data.iter().enumerate() {
                w.push(s).unwrap();
                prop_assert_eq!(w.samples() as usize, k + 1);
            }
            let c = read_pc2(Cursor::new(w.finish().unwrap().into_inner())).unwrap();
            prop_assert_eq!(c, Pc2 { points, start: 3.0, sampling: 0.5, samples: data });
        }
    }
}
