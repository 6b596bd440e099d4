//! The simulated ground truth of an evaluation, and its file: simulating it is nearly
//! all of an evaluation's time (minutes), comparing a synthesis with it takes seconds,
//! so `eval --truth-file` keeps it and a sweep of runtime parameters reuses it.
//!
//! File layout (little-endian), version [`TRUTH_VERSION`]:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `CCTRUTH\0` |
//! | 8 | 4 | version |
//! | 12 | 4 | garment vertex count n |
//! | 16 | 4 | frame count F |
//! | 20 | 4 | reserved, 0 |
//! | 24 | 8 | key ([`truth_key`]: what the truth was simulated for) |
//! | 32 | 8 | xxh3-64 of the bytes after the header |
//! | 40 | 12 n | the rest drape (what LBS skins), n × 3 f32 |
//! | 40 + 12 n | F × (4 + 12 n) | per frame: status u32 (0 no equilibrium, 1 converged, 2 reached with loosened tolerance), then n × 3 f32 positions (zeros for status 0) |

use std::path::Path;

use glam::Vec3;
use xxhash_rust::xxh3::xxh3_64;

use crate::sim::SimParams;
use crate::skeleton::Pose;
use crate::sor::{Database, body_hash, cloth_hash};

use super::Truth;

/// Magic of a ground-truth file.
pub const TRUTH_MAGIC: [u8; 8] = *b"CCTRUTH\0";
/// Version of the ground-truth file format (and of how the truth is simulated: bump it
/// when that changes, so older files are simulated afresh).
pub const TRUTH_VERSION: u32 = 1;
/// Header bytes.
const HEADER: usize = 40;
/// Largest file read, bytes (a 12 500-vertex garment over 20 000 frames).
const MAX_FILE_BYTES: u64 = 4 << 30;

/// One frame's ground truth.
#[derive(Clone, Debug, PartialEq)]
pub struct TruthFrame {
    /// Whether the simulator reached its tolerance (else a loosened one).
    pub converged: bool,
    /// The equilibrium garment, canonical frame, metres.
    pub positions: Vec<Vec3>,
}

/// The ground truth of an evaluation: per evaluated frame, the equilibrium garment, or
/// `None` where the simulator found none (the frame is skipped).
#[derive(Clone, Debug, PartialEq)]
pub struct GroundTruth {
    /// What it was simulated for ([`truth_key`]).
    pub key: u64,
    /// Garment vertex count.
    pub vertices: usize,
    /// The garment draped at the rest pose (canonical frame, metres): where the truth
    /// starts, and what LBS skins.
    pub rest: Vec<Vec3>,
    /// Per evaluated frame, in order.
    pub frames: Vec<Option<TruthFrame>>,
}

/// Why a ground-truth file could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TruthFileError {
    /// Reading or writing failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// Writing failed.
    #[error("writing the ground-truth file: {0}")]
    Write(String),
    /// The file does not start with the magic.
    #[error("{0} is not a clothcast ground-truth file (no CCTRUTH magic)")]
    NotTruthFile(String),
    /// Another format version.
    #[error("ground-truth file version {found}, this build reads version {TRUTH_VERSION}")]
    Version {
        /// The file's version.
        found: u32,
    },
    /// The length does not match the header's counts.
    #[error(
        "ground-truth file is {found} bytes, its header says {expected} (truncated or extended)"
    )]
    Length {
        /// Bytes the header implies.
        expected: u64,
        /// Bytes present.
        found: u64,
    },
    /// The checksum of the frames does not match.
    #[error("ground-truth file checksum mismatch (corrupt)")]
    Checksum,
    /// A status or position is invalid.
    #[error("ground-truth file frame {frame}: {what}")]
    Corrupt {
        /// Frame index within the file.
        frame: usize,
        /// What is wrong.
        what: &'static str,
    },
    /// Made for another database, clip, frame list, truth or simulator.
    #[error(
        "ground-truth file was simulated for another database, clip, frame list, truth or simulator setting"
    )]
    Stale,
}

/// What a ground truth depends on: the database's body and the garment as the
/// simulator reads it (its triangles, rest shape, rest metric and skin; not its regions
/// nor the examples, so a database re-baked with other regions or examples for the same
/// garment reuses the truth), the evaluated poses (after the arm guard, in the
/// canonical frame), how each frame is reached, the simulator's parameters and
/// revision ([`crate::sim::REVISION`]) and [`TRUTH_VERSION`].
pub fn truth_key(db: &Database, canonical: &[Pose], truth: Truth, params: &SimParams) -> u64 {
    let mut h: Vec<u8> = Vec::with_capacity(64 + canonical.len() * 360);
    h.extend_from_slice(&TRUTH_VERSION.to_le_bytes());
    h.extend_from_slice(&crate::sim::REVISION.to_le_bytes());
    h.extend_from_slice(&cloth_hash(&db.garment).to_le_bytes());
    h.extend_from_slice(&body_hash(&db.body).to_le_bytes());
    match truth {
        Truth::Carried => h.push(0),
        Truth::Fresh { start_arm_angle } => {
            h.push(1);
            h.extend_from_slice(&start_arm_angle.to_le_bytes());
        }
    }
    // the parameters' serialised form covers every field, present and future
    h.extend_from_slice(serde_json::to_string(params).unwrap_or_default().as_bytes());
    for p in canonical {
        for c in p.translation.to_array() {
            h.extend_from_slice(&c.to_le_bytes());
        }
        for q in &p.rotations {
            for c in q.to_array() {
                h.extend_from_slice(&c.to_le_bytes());
            }
        }
    }
    xxh3_64(&h)
}

impl GroundTruth {
    /// The file's bytes (layout in the module doc).
    pub fn to_bytes(&self) -> Vec<u8> {
        let n = self.vertices;
        let mut body = Vec::with_capacity((self.frames.len() + 1) * (4 + 12 * n));
        push_positions(&mut body, &self.rest);
        for f in &self.frames {
            let status: u32 = match f {
                None => 0,
                Some(t) if t.converged => 1,
                Some(_) => 2,
            };
            body.extend_from_slice(&status.to_le_bytes());
            match f {
                Some(t) => push_positions(&mut body, &t.positions),
                None => body.resize(body.len() + 12 * n, 0),
            }
        }
        let mut out = Vec::with_capacity(HEADER + body.len());
        out.extend_from_slice(&TRUTH_MAGIC);
        out.extend_from_slice(&TRUTH_VERSION.to_le_bytes());
        out.extend_from_slice(&(n as u32).to_le_bytes());
        out.extend_from_slice(&(self.frames.len() as u32).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&self.key.to_le_bytes());
        out.extend_from_slice(&xxh3_64(&body).to_le_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// Parses a file's bytes. Checks the magic, version, length, checksum and every
    /// value (finite positions, known statuses); `key`, when given, must match.
    pub fn from_bytes(bytes: &[u8], name: &str, key: Option<u64>) -> Result<Self, TruthFileError> {
        if bytes.len() < 8 || bytes[..8] != TRUTH_MAGIC {
            return Err(TruthFileError::NotTruthFile(name.to_string()));
        }
        if bytes.len() < HEADER {
            return Err(TruthFileError::Length {
                expected: HEADER as u64,
                found: bytes.len() as u64,
            });
        }
        let u32_at =
            |o: usize| u32::from_le_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]);
        let u64_at = |o: usize| u64::from(u32_at(o)) | (u64::from(u32_at(o + 4)) << 32);
        let version = u32_at(8);
        if version != TRUTH_VERSION {
            return Err(TruthFileError::Version { found: version });
        }
        let (n, frames) = (u32_at(12) as usize, u32_at(16) as usize);
        // counts of up to 2^32 each: the product can pass u64, which saturates (and then
        // cannot match any real length) instead of wrapping onto a short one
        let expected = (frames as u64)
            .saturating_mul(4 + 12 * n as u64)
            .saturating_add(HEADER as u64 + 12 * n as u64);
        if expected != bytes.len() as u64 || u32_at(20) != 0 {
            return Err(TruthFileError::Length {
                expected,
                found: bytes.len() as u64,
            });
        }
        let body = &bytes[HEADER..];
        if xxh3_64(body) != u64_at(32) {
            return Err(TruthFileError::Checksum);
        }
        let file_key = u64_at(24);
        if key.is_some_and(|k| k != file_key) {
            return Err(TruthFileError::Stale);
        }
        let (rest, records) = body.split_at(12 * n);
        let rest = read_positions(rest);
        if !rest.iter().all(|p| p.is_finite()) {
            return Err(TruthFileError::Corrupt {
                frame: 0,
                what: "non-finite rest position",
            });
        }
        let mut out = Vec::with_capacity(frames);
        for (i, rec) in records.chunks_exact(4 + 12 * n).enumerate() {
            let status = u32::from_le_bytes([rec[0], rec[1], rec[2], rec[3]]);
            let positions = read_positions(&rec[4..]);
            out.push(match status {
                0 => None,
                1 | 2 => {
                    if !positions.iter().all(|p| p.is_finite()) {
                        return Err(TruthFileError::Corrupt {
                            frame: i,
                            what: "non-finite position",
                        });
                    }
                    Some(TruthFrame {
                        converged: status == 1,
                        positions,
                    })
                }
                _ => {
                    return Err(TruthFileError::Corrupt {
                        frame: i,
                        what: "unknown status",
                    });
                }
            });
        }
        Ok(Self {
            key: file_key,
            vertices: n,
            rest,
            frames: out,
        })
    }

    /// Reads a file (see [`GroundTruth::from_bytes`]).
    pub fn read(path: &Path, key: Option<u64>) -> Result<Self, TruthFileError> {
        let name = path.display().to_string();
        let io = |source| TruthFileError::Io {
            path: name.clone(),
            source,
        };
        let len = std::fs::metadata(path).map_err(io)?.len();
        if len > MAX_FILE_BYTES {
            return Err(TruthFileError::Length {
                expected: MAX_FILE_BYTES,
                found: len,
            });
        }
        let bytes = std::fs::read(path).map_err(io)?;
        Self::from_bytes(&bytes, &name, key)
    }

    /// Writes the file whole (under a temporary name, then renamed, so an interrupted
    /// write never leaves half a file under the name).
    pub fn write(&self, path: &Path) -> Result<(), TruthFileError> {
        crate::sor::write_whole(path, &self.to_bytes())
            .map_err(|e| TruthFileError::Write(e.to_string()))
    }
}

fn push_positions(out: &mut Vec<u8>, ps: &[Vec3]) {
    for p in ps {
        for c in p.to_array() {
            out.extend_from_slice(&c.to_le_bytes());
        }
    }
}

fn read_positions(bytes: &[u8]) -> Vec<Vec3> {
    bytes
        .chunks_exact(12)
        .map(|c| {
            let f = |o: usize| f32::from_le_bytes([c[o], c[o + 1], c[o + 2], c[o + 3]]);
            Vec3::new(f(0), f(4), f(8))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> GroundTruth {
        GroundTruth {
            key: 0x1234_5678_9abc_def0,
            vertices: 3,
            rest: vec![Vec3::new(0.0, 1.0, 0.1), Vec3::NEG_X, Vec3::Y],
            frames: vec![
                Some(TruthFrame {
                    converged: true,
                    positions: vec![Vec3::new(0.1, 1.2, -0.3), Vec3::ZERO, Vec3::ONE],
                }),
                None,
                Some(TruthFrame {
                    converged: false,
                    positions: vec![Vec3::X, Vec3::Y, Vec3::Z],
                }),
            ],
        }
    }

    #[test]
    fn a_truth_round_trips_and_a_wrong_key_is_stale() {
        let t = sample();
        let bytes = t.to_bytes();
        assert_eq!(
            GroundTruth::from_bytes(&bytes, "t", Some(t.key)).expect("reads"),
            t
        );
        assert_eq!(
            GroundTruth::from_bytes(&bytes, "t", None).expect("reads"),
            t
        );
        assert!(matches!(
            GroundTruth::from_bytes(&bytes, "t", Some(t.key ^ 1)),
            Err(TruthFileError::Stale)
        ));
    }

    /// The key follows what the simulator reads (the garment's rest shape, the body,
    /// the poses), not the regions or examples a database was baked with.
    #[test]
    fn the_key_follows_the_simulated_cloth_not_the_bake() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/db/v1/small.ccdb");
        let db = Database::read(&path).expect("fixture database");
        let poses = [Pose::rest()];
        let params = SimParams::default();
        let key = |d: &Database| truth_key(d, &poses, Truth::Carried, &params);
        let k0 = key(&db);
        let mut rebaked = db.clone();
        rebaked
            .garment
            .region_weights
            .iter_mut()
            .for_each(|w| *w = 0.5);
        rebaked.examples.truncate(1);
        assert_eq!(key(&rebaked), k0);
        let mut moved = db.clone();
        moved.garment.rest[0].x += 1e-3;
        assert_ne!(key(&moved), k0);
        let mut body = db.clone();
        body.body.positions[0].y += 1e-3;
        assert_ne!(key(&body), k0);
        assert_ne!(truth_key(&db, &[], Truth::Carried, &params), k0);
        assert_ne!(
            truth_key(
                &db,
                &poses,
                Truth::Fresh {
                    start_arm_angle: 0.5
                },
                &params
            ),
            k0
        );
    }

    #[test]
    fn damaged_files_are_refused_by_name() {
        let bytes = sample().to_bytes();
        let read = |b: &[u8]| GroundTruth::from_bytes(b, "t", None);
        assert!(matches!(read(b""), Err(TruthFileError::NotTruthFile(_))));
        assert!(matches!(
            read(b"CCDB\0\0\0\0xxxx"),
            Err(TruthFileError::NotTruthFile(_))
        ));
        for cut in [9, HEADER - 1, HEADER, bytes.len() - 1] {
            assert!(
                matches!(read(&bytes[..cut]), Err(TruthFileError::Length { .. })),
                "cut at {cut}"
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(read(&longer), Err(TruthFileError::Length { .. })));
        let mut v = bytes.clone();
        v[8] = 9;
        assert!(matches!(
            read(&v),
            Err(TruthFileError::Version { found: 9 })
        ));
        let mut flipped = bytes.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 0x40;
        assert!(matches!(read(&flipped), Err(TruthFileError::Checksum)));
        // a bad status or a NaN under a valid checksum
        let with_body = |edit: &dyn Fn(&mut Vec<u8>)| {
            let mut b = bytes.clone();
            edit(&mut b);
            let sum = xxh3_64(&b[HEADER..]).to_le_bytes();
            b[32..40].copy_from_slice(&sum);
            b
        };
        let first = HEADER + 36; // the first frame's status, after 3 rest vertices
        let status = with_body(&|b| b[first] = 7);
        assert!(matches!(
            read(&status),
            Err(TruthFileError::Corrupt {
                frame: 0,
                what: "unknown status"
            })
        ));
        let nan = with_body(&|b| b[first + 4..first + 8].copy_from_slice(&f32::NAN.to_le_bytes()));
        assert!(matches!(
            read(&nan),
            Err(TruthFileError::Corrupt {
                frame: 0,
                what: "non-finite position"
            })
        ));
        let nan_rest =
            with_body(&|b| b[HEADER..HEADER + 4].copy_from_slice(&f32::NAN.to_le_bytes()));
        assert!(matches!(
            read(&nan_rest),
            Err(TruthFileError::Corrupt {
                what: "non-finite rest position",
                ..
            })
        ));
        // a header claiming a huge count is refused by its length, before allocating
        let mut huge = bytes[..HEADER].to_vec();
        huge[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        huge[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(read(&huge), Err(TruthFileError::Length { .. })));
    }
}
