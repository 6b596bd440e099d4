//! The example database file (`.ccdb`): everything the runtime needs — garment
//! topology, skin and regions, the body, and the SOR examples — in little-endian arrays
//! that are copied straight out of the file (no per-vertex parsing).
//!
//! Layout (format version 1):
//!
//! | bytes | content |
//! |---|---|
//! | 0–7 | magic `CCSORDB\0` |
//! | 8–11 | format version (u32) |
//! | 12–15 | section count S (u32) |
//! | 16–23 | file length (u64) |
//! | 24–31 | xxh3-64 of the section table |
//! | 32–… | S section records: id u32, reserved u32, offset u64, length u64, xxh3-64 u64 |
//! | … | sections, each starting on an 8-byte boundary |
//!
//! Section 1 is UTF-8 JSON metadata (counts, names, content hashes, bake settings);
//! the others are raw arrays whose lengths follow from the counts. Every section has a
//! checksum; a file that is truncated, corrupt, of another format version, or built for
//! another garment or body is refused with a named [`DbError`].

use std::path::Path;

use glam::{Quat, Vec3};
use xxhash_rust::xxh3::xxh3_64;

use crate::body::SkinWeights;
use crate::skeleton::{DOF_COUNT, JOINT_COUNT, Pose};

use super::rig::Example;

/// File magic.
pub const DB_MAGIC: [u8; 8] = *b"CCSORDB\0";
/// Current format version.
pub const DB_VERSION: u32 = 1;
const HEADER_LEN: usize = 32;
const RECORD_LEN: usize = 32;
/// Largest counts accepted (far above any real garment; keeps hostile files from
/// demanding absurd allocations).
pub(super) const MAX_VERTICES: usize = 2_000_000;
/// Most examples a database may hold (a bake is refused more; a file with more is
/// refused as corrupt).
pub const MAX_EXAMPLES: usize = 100_000;

/// Section identifiers.
mod id {
    pub(super) const META: u32 = 1;
    pub(super) const GARMENT_TRIANGLES: u32 = 2;
    pub(super) const GARMENT_REST: u32 = 3;
    pub(super) const GARMENT_JOINTS: u32 = 4;
    pub(super) const GARMENT_WEIGHTS: u32 = 5;
    pub(super) const REGION_WEIGHTS: u32 = 6;
    pub(super) const BODY_SKELETON: u32 = 7;
    pub(super) const BODY_POSITIONS: u32 = 8;
    pub(super) const BODY_TRIANGLES: u32 = 9;
    pub(super) const BODY_JOINTS: u32 = 10;
    pub(super) const BODY_WEIGHTS: u32 = 11;
    pub(super) const EX_POSES: u32 = 12;
    pub(super) const EX_DISTANCE: u32 = 13;
    pub(super) const EX_POSITIONS: u32 = 14;
    pub(super) const EX_REMOTE: u32 = 15;
    pub(super) const EX_ALPHA: u32 = 16;
    pub(super) const EX_TRANSLATION: u32 = 17;
    pub(super) const EX_BODY_VERTEX: u32 = 18;
    pub(super) const EX_CLEARANCE: u32 = 19;
    pub(super) const GARMENT_METRIC: u32 = 20;
    pub(super) const ALL: [u32; 20] = [
        META,
        GARMENT_TRIANGLES,
        GARMENT_REST,
        GARMENT_METRIC,
        GARMENT_JOINTS,
        GARMENT_WEIGHTS,
        REGION_WEIGHTS,
        BODY_SKELETON,
        BODY_POSITIONS,
        BODY_TRIANGLES,
        BODY_JOINTS,
        BODY_WEIGHTS,
        EX_POSES,
        EX_DISTANCE,
        EX_POSITIONS,
        EX_REMOTE,
        EX_ALPHA,
        EX_TRANSLATION,
        EX_BODY_VERTEX,
        EX_CLEARANCE,
    ];
}

/// Why a database file was refused.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum DbError {
    /// The operating system refused a read or write.
    #[error("{path}: {message}")]
    Io {
        /// File involved.
        path: String,
        /// What the OS said.
        message: String,
    },
    /// Not a clothcast database.
    #[error("not a clothcast database (bad magic)")]
    BadMagic,
    /// Another format version.
    #[error("database format version {found}, this build reads version {supported}; re-bake it")]
    Version {
        /// Version in the file.
        found: u32,
        /// Version this build reads.
        supported: u32,
    },
    /// The file is shorter than its header says.
    #[error("database truncated: {what} needs {needed} bytes, the file has {len}")]
    Truncated {
        /// What was being read.
        what: String,
        /// Bytes needed.
        needed: u64,
        /// File length.
        len: u64,
    },
    /// A checksum does not match: the file is corrupt.
    #[error("database corrupt: checksum mismatch in {0}")]
    Checksum(String),
    /// The content is inconsistent (wrong lengths, indices out of range, NaN, …).
    #[error("database corrupt: {0}")]
    Corrupt(String),
    /// More examples than a database may hold ([`MAX_EXAMPLES`]): such a file could not
    /// be read back, so it is not written.
    #[error("a database holds at most {MAX_EXAMPLES} examples; this one has {0}")]
    TooManyExamples(usize),
    /// Databases to be merged were baked with different settings.
    #[error(
        "the databases were baked with different {what}: {differences}; bake every shard with the same build and settings"
    )]
    SettingsDiffer {
        /// Which settings (`simulator parameters`, `rigging parameters`).
        what: &'static str,
        /// The entries that differ, `name: first vs other`.
        differences: String,
    },
    /// The database was built for another garment, body or skeleton.
    #[error(
        "database was built for a different {what} (file {found:016x}, expected {expected:016x})"
    )]
    Mismatch {
        /// What differs.
        what: &'static str,
        /// Hash in the file.
        found: u64,
        /// Hash of what it is used with.
        expected: u64,
    },
}

/// The garment the database was built for.
#[derive(Clone, Debug, PartialEq)]
pub struct GarmentData {
    /// Garment name.
    pub name: String,
    /// Triangles.
    pub triangles: Vec<[u32; 3]>,
    /// T-pose shape, metres.
    pub rest: Vec<Vec3>,
    /// Unstressed (pattern) shape, metres.
    pub metric: Vec<Vec3>,
    /// Skin weights (nearby bones).
    pub skin: SkinWeights,
    /// Region names.
    pub region_names: Vec<String>,
    /// Region weights, `vertices × regions`.
    pub region_weights: Vec<f32>,
    /// Region index of each of the 22 bones.
    pub bone_regions: Vec<u8>,
}

/// The body the database was built for.
#[derive(Clone, Debug, PartialEq)]
pub struct BodyData {
    /// Rest joint positions, metres.
    pub skeleton: [Vec3; JOINT_COUNT],
    /// Rest vertex positions, metres.
    pub positions: Vec<Vec3>,
    /// Triangles.
    pub triangles: Vec<[u32; 3]>,
    /// Skin weights.
    pub skin: SkinWeights,
}

/// How the database was built (stored as JSON, reported by `clothcast inspect`).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct BakeInfo {
    /// Sampler name (`kmeans`, `mcmc`).
    pub sampler: String,
    /// Pose sources (clip names, "joint limits").
    pub sources: Vec<String>,
    /// Random seed.
    pub seed: u64,
    /// clothcast version that built it.
    pub built_by: String,
    /// Simulator parameters (JSON).
    pub sim: serde_json::Value,
    /// Rigging parameters (JSON).
    pub rig: serde_json::Value,
    /// Wall time of the bake, seconds.
    pub seconds: f64,
    /// Where each example's pose came from, one per example in order (`rest pose`,
    /// `CLIP, frame F`, `joint-limit sample I`, `MCMC search from …`; see
    /// [`crate::bake::Baker::candidate_origins`]). Empty in databases baked before it
    /// was recorded; read through [`BakeInfo::origin`], which checks the count.
    pub origins: Vec<String>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Meta {
    format: u32,
    garment: String,
    regions: Vec<String>,
    bone_regions: Vec<u8>,
    vertices: usize,
    triangles: usize,
    body_vertices: usize,
    body_triangles: usize,
    examples: usize,
    garment_hash: String,
    body_hash: String,
    bake: BakeInfo,
}

/// A loaded (or freshly baked) example database.
#[derive(Clone, Debug, PartialEq)]
pub struct Database {
    /// The garment.
    pub garment: GarmentData,
    /// The body.
    pub body: BodyData,
    /// The examples.
    pub examples: Vec<Example>,
    /// How it was built.
    pub bake: BakeInfo,
}

pub(super) fn bytes_of<T: bytemuck::Pod>(v: &[T]) -> &[u8] {
    bytemuck::cast_slice(v)
}

/// Content hash of a garment's topology, shapes, skin and regions.
pub fn garment_hash(g: &GarmentData) -> u64 {
    let mut h = cloth_bytes(g);
    h.extend_from_slice(bytes_of(&g.region_weights));
    xxh3_64(&h)
}

/// Content hash of the garment as the cloth simulator reads it: topology, rest shape,
/// rest metric and skin, without the regions (which only the runtime's weights use).
pub fn cloth_hash(g: &GarmentData) -> u64 {
    xxh3_64(&cloth_bytes(g))
}

/// The bytes [`cloth_hash`] hashes, which [`garment_hash`] hashes followed by the
/// region weights.
fn cloth_bytes(g: &GarmentData) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(bytes_of(&g.triangles));
    h.extend_from_slice(bytes_of(&g.rest));
    h.extend_from_slice(bytes_of(&g.metric));
    h.extend_from_slice(bytes_of(&g.skin.joints));
    h.extend_from_slice(bytes_of(&g.skin.weights));
    h
}

/// Content hash of a body's skeleton, mesh and skin.
pub fn body_hash(b: &BodyData) -> u64 {
    let mut h = Vec::new();
    h.extend_from_slice(bytes_of(&b.skeleton));
    h.extend_from_slice(bytes_of(&b.positions));
    h.extend_from_slice(bytes_of(&b.triangles));
    h.extend_from_slice(bytes_of(&b.skin.joints));
    h.extend_from_slice(bytes_of(&b.skin.weights));
    xxh3_64(&h)
}

impl BakeInfo {
    /// Where example `i`'s pose came from, as the bake recorded it: `None` when the
    /// record has no origin for it (baked before origins were recorded, or an empty
    /// entry; a file whose origins are not one per example is refused when read). The
    /// text comes from the file:
    /// control characters are replaced by `?`, so it is safe to print.
    pub fn origin(&self, i: usize) -> Option<std::borrow::Cow<'_, str>> {
        let o = self.origins.get(i).filter(|o| !o.is_empty())?;
        Some(if o.chars().any(char::is_control) {
            std::borrow::Cow::Owned(
                o.chars()
                    .map(|c| if c.is_control() { '?' } else { c })
                    .collect(),
            )
        } else {
            std::borrow::Cow::Borrowed(o.as_str())
        })
    }

    /// The simulator parameters the database was baked with, as this build reads them:
    /// a setting the record lacks (baked before it existed) takes this build's default,
    /// and a record this build cannot read at all gives the defaults.
    pub fn sim_params(&self) -> crate::sim::SimParams {
        serde_json::from_value(self.sim.clone()).unwrap_or_default()
    }
}

impl Database {
    /// Serialises to the file format.
    pub fn to_bytes(&self) -> Vec<u8> {
        let meta = Meta {
            format: DB_VERSION,
            garment: self.garment.name.clone(),
            regions: self.garment.region_names.clone(),
            bone_regions: self.garment.bone_regions.clone(),
            vertices: self.garment.rest.len(),
            triangles: self.garment.triangles.len(),
            body_vertices: self.body.positions.len(),
            body_triangles: self.body.triangles.len(),
            examples: self.examples.len(),
            garment_hash: format!("{:016x}", garment_hash(&self.garment)),
            body_hash: format!("{:016x}", body_hash(&self.body)),
            bake: self.bake.clone(),
        };
        let meta = serde_json::to_vec_pretty(&meta).unwrap_or_default();
        let ex = &self.examples;
        let poses: Vec<f32> = ex
            .iter()
            .flat_map(|e| {
                let mut v = e.pose.translation.to_array().to_vec();
                v.extend(e.pose.rotations.iter().flat_map(|q| q.to_array()));
                v
            })
            .collect();
        let cat = |f: &dyn Fn(&Example) -> Vec<u8>| -> Vec<u8> { ex.iter().flat_map(f).collect() };
        let sections: Vec<(u32, Vec<u8>)> = vec![
            (id::META, meta),
            (
                id::GARMENT_TRIANGLES,
                bytes_of(&self.garment.triangles).to_vec(),
            ),
            (id::GARMENT_REST, bytes_of(&self.garment.rest).to_vec()),
            (id::GARMENT_METRIC, bytes_of(&self.garment.metric).to_vec()),
            (
                id::GARMENT_JOINTS,
                bytes_of(&self.garment.skin.joints).to_vec(),
            ),
            (
                id::GARMENT_WEIGHTS,
                bytes_of(&self.garment.skin.weights).to_vec(),
            ),
            (
                id::REGION_WEIGHTS,
                bytes_of(&self.garment.region_weights).to_vec(),
            ),
            (id::BODY_SKELETON, bytes_of(&self.body.skeleton).to_vec()),
            (id::BODY_POSITIONS, bytes_of(&self.body.positions).to_vec()),
            (id::BODY_TRIANGLES, bytes_of(&self.body.triangles).to_vec()),
            (id::BODY_JOINTS, bytes_of(&self.body.skin.joints).to_vec()),
            (id::BODY_WEIGHTS, bytes_of(&self.body.skin.weights).to_vec()),
            (id::EX_POSES, bytes_of(&poses).to_vec()),
            (
                id::EX_DISTANCE,
                cat(&|e| bytes_of(&e.distance_weights).to_vec()),
            ),
            (id::EX_POSITIONS, cat(&|e| bytes_of(&e.positions).to_vec())),
            (id::EX_REMOTE, cat(&|e| e.remote_bone.clone())),
            (id::EX_ALPHA, cat(&|e| bytes_of(&e.alpha).to_vec())),
            (
                id::EX_TRANSLATION,
                cat(&|e| bytes_of(&e.translation).to_vec()),
            ),
            (
                id::EX_BODY_VERTEX,
                cat(&|e| bytes_of(&e.body_vertex).to_vec()),
            ),
            (id::EX_CLEARANCE, cat(&|e| bytes_of(&e.clearance).to_vec())),
        ];
        let table_start = HEADER_LEN;
        let mut offset = table_start + RECORD_LEN * sections.len();
        let mut table = Vec::with_capacity(RECORD_LEN * sections.len());
        for (sid, data) in &sections {
            offset = offset.next_multiple_of(8);
            table.extend_from_slice(&sid.to_le_bytes());
            table.extend_from_slice(&0u32.to_le_bytes());
            table.extend_from_slice(&(offset as u64).to_le_bytes());
            table.extend_from_slice(&(data.len() as u64).to_le_bytes());
            table.extend_from_slice(&xxh3_64(data).to_le_bytes());
            offset += data.len();
        }
        let total = offset.next_multiple_of(8);
        let mut out = Vec::with_capacity(total);
        out.extend_from_slice(&DB_MAGIC);
        out.extend_from_slice(&DB_VERSION.to_le_bytes());
        out.extend_from_slice(&(sections.len() as u32).to_le_bytes());
        out.extend_from_slice(&(total as u64).to_le_bytes());
        out.extend_from_slice(&xxh3_64(&table).to_le_bytes());
        out.extend_from_slice(&table);
        for (_, data) in &sections {
            while !out.len().is_multiple_of(8) {
                out.push(0);
            }
            out.extend_from_slice(data);
        }
        while out.len() < total {
            out.push(0);
        }
        out
    }

    /// Parses and checks a database file's bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Database, DbError> {
        Reader::new(bytes)?.read()
    }

    /// Writes the database to `path` atomically (a temporary name of this writer's own,
    /// then rename: two processes or threads writing the same cache at once each write
    /// whole files, and the last rename wins). Refuses more than [`MAX_EXAMPLES`]
    /// examples, which no reader would take.
    pub fn write(&self, path: &Path) -> Result<(), DbError> {
        if self.examples.len() > MAX_EXAMPLES {
            return Err(DbError::TooManyExamples(self.examples.len()));
        }
        super::file::write_whole(path, &self.to_bytes())
    }

    /// Reads and checks a database file.
    pub fn read(path: &Path) -> Result<Database, DbError> {
        let bytes = std::fs::read(path).map_err(|e| DbError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        Self::from_bytes(&bytes)
    }

    /// Number of garment vertices.
    pub fn vertex_count(&self) -> usize {
        self.garment.rest.len()
    }

    /// Number of regions N_G.
    pub fn region_count(&self) -> usize {
        self.garment.region_names.len()
    }

    /// Refuses a database built for another garment or body.
    pub fn check_built_for(&self, garment: &GarmentData, body: &BodyData) -> Result<(), DbError> {
        let (gf, ge) = (garment_hash(&self.garment), garment_hash(garment));
        if gf != ge {
            return Err(DbError::Mismatch {
                what: "garment",
                found: gf,
                expected: ge,
            });
        }
        let (bf, be) = (body_hash(&self.body), body_hash(body));
        if bf != be {
            return Err(DbError::Mismatch {
                what: "body",
                found: bf,
                expected: be,
            });
        }
        Ok(())
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    table: Vec<(u32, u64, u64, u64)>,
}

pub(super) fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

pub(super) fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Result<Self, DbError> {
        if !cfg!(target_endian = "little") {
            return Err(DbError::Corrupt(
                "big-endian hosts cannot read clothcast databases".into(),
            ));
        }
        let len = bytes.len() as u64;
        if bytes.len() < 8 || bytes[..8] != DB_MAGIC {
            if bytes.len() < 8 && DB_MAGIC.starts_with(bytes) && !bytes.is_empty() {
                return Err(DbError::Truncated {
                    what: "header".into(),
                    needed: HEADER_LEN as u64,
                    len,
                });
            }
            return Err(DbError::BadMagic);
        }
        if bytes.len() < HEADER_LEN {
            return Err(DbError::Truncated {
                what: "header".into(),
                needed: HEADER_LEN as u64,
                len,
            });
        }
        let version = le_u32(bytes, 8);
        if version != DB_VERSION {
            return Err(DbError::Version {
                found: version,
                supported: DB_VERSION,
            });
        }
        let count = le_u32(bytes, 12) as usize;
        if count > 64 {
            return Err(DbError::Corrupt(format!("{count} sections")));
        }
        let declared = le_u64(bytes, 16);
        if declared != len {
            return Err(if declared > len {
                DbError::Truncated {
                    what: "file".into(),
                    needed: declared,
                    len,
                }
            } else {
                DbError::Corrupt(format!("file is {len} bytes, header says {declared}"))
            });
        }
        let table_end = HEADER_LEN + count * RECORD_LEN;
        if bytes.len() < table_end {
            return Err(DbError::Truncated {
                what: "section table".into(),
                needed: table_end as u64,
                len,
            });
        }
        let table_bytes = &bytes[HEADER_LEN..table_end];
        if xxh3_64(table_bytes) != le_u64(bytes, 24) {
            return Err(DbError::Checksum("section table".into()));
        }
        let mut table = Vec::with_capacity(count);
        for k in 0..count {
            let at = HEADER_LEN + k * RECORD_LEN;
            let (sid, off, slen, sum) = (
                le_u32(bytes, at),
                le_u64(bytes, at + 8),
                le_u64(bytes, at + 16),
                le_u64(bytes, at + 24),
            );
            let end = off
                .checked_add(slen)
                .ok_or_else(|| DbError::Corrupt(format!("section {sid} size overflows")))?;
            if end > len {
                return Err(DbError::Truncated {
                    what: format!("section {sid}"),
                    needed: end,
                    len,
                });
            }
            if off % 8 != 0 || (off as usize) < table_end {
                return Err(DbError::Corrupt(format!(
                    "section {sid} misplaced at {off}"
                )));
            }
            table.push((sid, off, slen, sum));
        }
        for sid in id::ALL {
            if !table.iter().any(|t| t.0 == sid) {
                return Err(DbError::Corrupt(format!("section {sid} missing")));
            }
        }
        Ok(Reader { bytes, table })
    }

    fn section(&self, sid: u32) -> Result<&'a [u8], DbError> {
        let (_, off, len, sum) = self
            .table
            .iter()
            .find(|t| t.0 == sid)
            .copied()
            .ok_or_else(|| DbError::Corrupt(format!("section {sid} missing")))?;
        let data = &self.bytes[off as usize..(off + len) as usize];
        if xxh3_64(data) != sum {
            return Err(DbError::Checksum(format!("section {sid}")));
        }
        Ok(data)
    }

    /// An array section of exactly `count` elements of `T`.
    fn array<T: bytemuck::Pod>(&self, sid: u32, count: usize) -> Result<Vec<T>, DbError> {
        let data = self.section(sid)?;
        let need = count
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| DbError::Corrupt("size overflow".into()))?;
        if data.len() != need {
            return Err(DbError::Corrupt(format!(
                "section {sid} has {} bytes, expected {need}",
                data.len()
            )));
        }
        Ok(bytemuck::pod_collect_to_vec(data))
    }

    fn read(&self) -> Result<Database, DbError> {
        let meta: Meta = serde_json::from_slice(self.section(id::META)?)
            .map_err(|e| DbError::Corrupt(format!("metadata: {e}")))?;
        let (n, t, bn, bt, ne, g) = (
            meta.vertices,
            meta.triangles,
            meta.body_vertices,
            meta.body_triangles,
            meta.examples,
            meta.regions.len(),
        );
        if n == 0
            || n > MAX_VERTICES
            || bn == 0
            || bn > MAX_VERTICES
            || t > 4 * MAX_VERTICES
            || bt > 4 * MAX_VERTICES
            || ne > MAX_EXAMPLES
            || g == 0
            || g > 64
        {
            return Err(DbError::Corrupt(format!(
                "implausible counts: {n} vertices, {ne} examples, {g} regions"
            )));
        }
        // origins are optional (absent before they were recorded), but one per example
        if !meta.bake.origins.is_empty() && meta.bake.origins.len() != ne {
            return Err(DbError::Corrupt(format!(
                "{} example origins for {ne} examples",
                meta.bake.origins.len()
            )));
        }
        let garment = GarmentData {
            name: meta.garment.clone(),
            triangles: self.array::<[u32; 3]>(id::GARMENT_TRIANGLES, t)?,
            rest: self.array::<Vec3>(id::GARMENT_REST, n)?,
            metric: self.array::<Vec3>(id::GARMENT_METRIC, n)?,
            skin: SkinWeights {
                joints: self.array(id::GARMENT_JOINTS, n)?,
                weights: self.array(id::GARMENT_WEIGHTS, n)?,
            },
            region_names: meta.regions.clone(),
            region_weights: self.array(id::REGION_WEIGHTS, n * g)?,
            bone_regions: meta.bone_regions.clone(),
        };
        if garment.bone_regions.len() != JOINT_COUNT
            || garment.bone_regions.iter().any(|&r| r as usize >= g)
        {
            return Err(DbError::Corrupt("bone region table".into()));
        }
        let skel: Vec<Vec3> = self.array(id::BODY_SKELETON, JOINT_COUNT)?;
        let body = BodyData {
            skeleton: std::array::from_fn(|i| skel[i]),
            positions: self.array(id::BODY_POSITIONS, bn)?,
            triangles: self.array(id::BODY_TRIANGLES, bt)?,
            skin: SkinWeights {
                joints: self.array(id::BODY_JOINTS, bn)?,
                weights: self.array(id::BODY_WEIGHTS, bn)?,
            },
        };
        let poses: Vec<f32> = self.array(id::EX_POSES, ne * (3 + 4 * JOINT_COUNT))?;
        let dist: Vec<f32> = self.array(id::EX_DISTANCE, ne * g * DOF_COUNT)?;
        let pos: Vec<Vec3> = self.array(id::EX_POSITIONS, ne * n)?;
        let remote: Vec<u8> = self.array(id::EX_REMOTE, ne * n)?;
        let alpha: Vec<f32> = self.array(id::EX_ALPHA, ne * n)?;
        let tau: Vec<[f32; 9]> = self.array(id::EX_TRANSLATION, ne * n)?;
        let bvert: Vec<u32> = self.array(id::EX_BODY_VERTEX, ne * n)?;
        let clear: Vec<f32> = self.array(id::EX_CLEARANCE, ne * n)?;
        let mut examples = Vec::with_capacity(ne);
        for j in 0..ne {
            let p = &poses[j * (3 + 4 * JOINT_COUNT)..(j + 1) * (3 + 4 * JOINT_COUNT)];
            let pose = Pose {
                translation: Vec3::new(p[0], p[1], p[2]),
                rotations: std::array::from_fn(|k| Quat::from_slice(&p[3 + 4 * k..7 + 4 * k])),
            };
            pose.clone()
                .validate()
                .map_err(|e| DbError::Corrupt(format!("example {j} pose: {e}")))?;
            let r = j * n..(j + 1) * n;
            examples.push(Example {
                pose,
                positions: pos[r.clone()].to_vec(),
                remote_bone: remote[r.clone()].to_vec(),
                alpha: alpha[r.clone()].to_vec(),
                translation: tau[r.clone()].to_vec(),
                body_vertex: bvert[r.clone()].to_vec(),
                clearance: clear[r.clone()].to_vec(),
                distance_weights: dist[j * g * DOF_COUNT..(j + 1) * g * DOF_COUNT].to_vec(),
            });
        }
        let db = Database {
            garment,
            body,
            examples,
            bake: meta.bake,
        };
        validate(&db)?;
        let (gh, bh) = (
            format!("{:016x}", garment_hash(&db.garment)),
            format!("{:016x}", body_hash(&db.body)),
        );
        if gh != meta.garment_hash || bh != meta.body_hash {
            return Err(DbError::Corrupt(
                "content hashes do not match the metadata".into(),
            ));
        }
        Ok(db)
    }
}

/// Range checks of everything an index or a weight could break at runtime.
fn validate(db: &Database) -> Result<(), DbError> {
    let n = db.garment.rest.len() as u32;
    let bn = db.body.positions.len() as u32;
    let bad = |m: String| Err(DbError::Corrupt(m));
    if db.garment.triangles.iter().flatten().any(|&v| v >= n) {
        return bad("garment triangle index out of range".into());
    }
    if db.body.triangles.iter().flatten().any(|&v| v >= bn) {
        return bad("body triangle index out of range".into());
    }
    let finite = |v: &[Vec3]| v.iter().all(|p| p.is_finite());
    if !finite(&db.garment.rest)
        || !finite(&db.garment.metric)
        || !finite(&db.body.positions)
        || !finite(&db.body.skeleton)
    {
        return bad("non-finite positions".into());
    }
    if db.garment.skin.validate(n as usize).is_err() || db.body.skin.validate(bn as usize).is_err()
    {
        return bad("invalid skin weights".into());
    }
    if db
        .garment
        .region_weights
        .iter()
        .any(|w| !w.is_finite() || *w < 0.0)
    {
        return bad("invalid region weights".into());
    }
    for (j, e) in db.examples.iter().enumerate() {
        if !finite(&e.positions)
            || e.alpha.iter().any(|a| !(0.0..=1.0).contains(a))
            || e.clearance.iter().any(|c| !c.is_finite())
        {
            return bad(format!("example {j}: non-finite shape or α outside 0–1"));
        }
        if e.remote_bone.iter().any(|&b| b as usize >= JOINT_COUNT)
            || e.body_vertex.iter().any(|&v| v >= bn)
        {
            return bad(format!(
                "example {j}: bone or body vertex index out of range"
            ));
        }
        if e.translation.iter().flatten().any(|x| !x.is_finite())
            || e.distance_weights
                .iter()
                .any(|x| !x.is_finite() || *x < 0.0)
        {
            return bad(format!("example {j}: non-finite weights"));
        }
    }
    Ok(())
}
