//! Triangle meshes: the mesh type, adjacency and manifold checks, closest-point queries,
//! implicit surfaces and their polygonisation and remeshing, and OBJ / glTF reading and
//! writing.
//!
//! Entry points: [`TriMesh`], [`Topology::build`], [`MeshQuery::build`],
//! [`polygonize`], [`remesh()`], [`clip_mesh`].

mod clip;
mod closest;
mod io;
mod isosurface;
mod nearest;
mod raster;
mod remesh;
mod surface;
mod topology;
mod trimesh;

pub(crate) use clip::vertex_forest;
pub use clip::{clip_mesh, is_single_manifold, largest_component};
pub use closest::{Feature, Hit, MeshQuery, closest_on_triangle, closest_on_triangle_f64};
pub use io::{
    GlbAnimation, GlbMaterial, GlbMesh, GlbScene, GlbSkeleton, LoadedSkin, LoadedSkinnedMesh,
    MAX_ELEMENTS, MeshIoError, PC2_HEADER_BYTES, PC2_MAGIC, Pc2, Pc2Error, Pc2Reader, Pc2Writer,
    SkinSlices, UsdJointKey, UsdSamples, UsdSkeleton, UsdSkinnedMesh, UsdTake, read_gltf_mesh,
    read_gltf_skinned, read_obj, read_pc2, write_glb, write_obj, write_usda,
};
pub use isosurface::{Field, polygonize, sd_ellipsoid, sd_round_box, sd_round_cone, smooth_min};
pub use nearest::NearestVertex;
pub use raster::{Camera, DrawItem, Image, render};
pub use remesh::{RemeshOptions, remesh};
pub use surface::{MeshBoundary, MeshSurface};
pub use topology::{NO_FACE, Topology};
#[cfg(test)]
pub(crate) use trimesh::test_shapes;
pub use trimesh::{MeshError, TriMesh, VertexId, weld};
pub(crate) use trimesh::{remap_triangles, union_root};
