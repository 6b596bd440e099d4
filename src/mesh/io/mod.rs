//! Mesh files: OBJ read/write, glTF 2.0 binary (.glb) write with skins and animation,
//! glTF/GLB read (meshes and skinned humanoids) through the `gltf` crate, PC2 point
//! caches (vertex animation) read and write, USD text layers of a recorded take write.

mod glb;
mod gltf_read;
mod obj;
mod pc2;
mod usda;

pub use glb::{GlbAnimation, GlbMaterial, GlbMesh, GlbScene, GlbSkeleton, SkinSlices, write_glb};
pub use gltf_read::{LoadedSkin, LoadedSkinnedMesh, read_gltf_mesh, read_gltf_skinned};
pub use obj::{read_obj, write_obj};
pub use pc2::{PC2_HEADER_BYTES, PC2_MAGIC, Pc2, Pc2Error, Pc2Reader, Pc2Writer, read_pc2};
pub use usda::{UsdJointKey, UsdSamples, UsdSkeleton, UsdSkinnedMesh, UsdTake, write_usda};

/// Why a mesh file could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MeshIoError {
    /// The operating system refused a read or write.
    #[error("{path}: {source}")]
    Io {
        /// File involved.
        path: String,
        /// Underlying error.
        source: std::io::Error,
    },
    /// An OBJ file is malformed.
    #[error("OBJ line {line}: {message}")]
    Obj {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A glTF file is malformed or uses something this reader does not support.
    #[error("glTF: {0}")]
    Gltf(String),
    /// The file holds no usable triangles.
    #[error("{0}: no triangles found")]
    NoTriangles(String),
    /// The file is larger than this reader accepts.
    #[error("{path}: {what} exceeds the limit of {limit}")]
    TooLarge {
        /// File involved.
        path: String,
        /// What was counted.
        what: &'static str,
        /// The limit.
        limit: usize,
    },
}

/// Largest number of vertices or triangles accepted from a mesh file (a garment or body
/// is far below; the limit keeps a hostile file from exhausting memory).
pub const MAX_ELEMENTS: usize = 4_000_000;
