//! Garments imported from mesh files (OBJ, glTF, GLB): a garment modelled in another
//! tool on the body in its rest pose, bound to the body as the procedural ones are
//! (SOR §4–5). The mesh is taken as it is, or remeshed to the configuration's
//! `target_vertices` (projected onto the modelled surface, its boundary kept); the
//! vertex count is the runtime's, and is capped.

use std::path::Path;

use glam::Vec3;

use super::config::{GarmentError, MeshGarmentConfig, RegionTable};
use super::garment::{Garment, REST_CLEARANCE, push_out};
use crate::body::Body;
use crate::mesh::{
    Hit, MeshBoundary, MeshIoError, MeshQuery, MeshSurface, RemeshOptions, Topology, TriMesh,
    read_gltf_mesh, read_obj, remesh, weld,
};

/// Most vertices an imported garment may have (a procedural one has ~3 000; synthesis,
/// coding and baking cost grow with the count).
pub const MAX_IMPORT_VERTICES: usize = 100_000;

/// Deepest an imported garment vertex may lie inside the body and still be pushed out
/// to the rest clearance, metres; deeper, the garment is refused as not fitted.
pub const MAX_IMPORT_DEPTH: f32 = 0.02;

/// Vertices closer than this are welded into one (files split vertices at texture
/// seams and between parts), metres.
const WELD: f32 = 1e-6;

/// Reads a garment mesh file, chosen by extension: `.obj`, `.gltf` or `.glb` (every
/// triangle primitive of the default scene, placed in its nodes' rest pose). Positions
/// are in the file's units.
pub fn read_garment_mesh(path: &Path) -> Result<TriMesh, GarmentError> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("obj") => {
            let file = std::fs::File::open(path).map_err(|source| MeshIoError::Io {
                path: path.display().to_string(),
                source,
            })?;
            Ok(read_obj(
                std::io::BufReader::new(file),
                &path.display().to_string(),
            )?)
        }
        Some("gltf" | "glb") => Ok(read_gltf_mesh(path)?),
        _ => Err(GarmentError::Format(path.display().to_string())),
    }
}

impl Garment {
    /// Imports the garment a [`MeshGarmentConfig`] names: its mesh file (relative to
    /// `dir`, the configuration's folder) read, scaled to metres and bound to `body`
    /// (see [`Garment::from_mesh`]).
    pub fn import(
        cfg: &MeshGarmentConfig,
        dir: &Path,
        body: &Body,
    ) -> Result<Garment, GarmentError> {
        let regions = cfg.region_table()?;
        let mut mesh = read_garment_mesh(&dir.join(&cfg.mesh))?;
        for p in &mut mesh.positions {
            *p *= cfg.scale;
        }
        if let Some(target) = cfg.target_vertices {
            mesh = remeshed(&mesh, target)?;
        }
        Self::from_mesh(&cfg.name, mesh, body, regions, cfg.pattern_arm_angle)
    }

    /// A garment from any mesh on `body` in its rest pose (metres): coincident vertices
    /// welded, triangles that collapse dropped and vertices no triangle uses dropped;
    /// refused when it has more than [`MAX_IMPORT_VERTICES`] vertices, is not an
    /// oriented 2-manifold (with boundary), has a closed part (no opening to wear it
    /// through), a degenerate triangle or a vertex more than [`MAX_IMPORT_DEPTH`]
    /// inside the body. Vertices inside or closer than
    /// [`REST_CLEARANCE`] to the body are moved out to it, then the mesh is bound
    /// ([`Garment::bind`]). Its unstressed shape is the mesh as placed, or skinned to
    /// arms `arm_angle_deg` degrees below the T-pose when that is not 0.
    pub fn from_mesh(
        name: &str,
        mesh: TriMesh,
        body: &Body,
        regions: RegionTable,
        arm_angle_deg: f32,
    ) -> Result<Garment, GarmentError> {
        let mut mesh = checked(&mesh, MAX_IMPORT_VERTICES)?;
        let query = MeshQuery::build(&body.mesh)?;
        let hits: Vec<Hit> = mesh
            .positions
            .iter()
            .map(|p| query.closest_signed(*p))
            .collect();
        // depth inside the body (negative: outside) per vertex
        let depth: Vec<f32> = hits
            .iter()
            .zip(&mesh.positions)
            .map(|(h, p)| -h.signed_distance(*p))
            .collect();
        let deepest = depth
            .iter()
            .copied()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(&b.1));
        if let Some((vertex, depth)) = deepest.filter(|d| d.1 > MAX_IMPORT_DEPTH) {
            return Err(GarmentError::InsideBody {
                vertex,
                depth,
                limit: MAX_IMPORT_DEPTH,
            });
        }
        let moved = depth.iter().filter(|d| **d > -REST_CLEARANCE).count();
        if moved > 0 {
            // what an artist fitting the garment wants to know
            tracing::info!(
                garment = name,
                moved,
                inside = depth.iter().filter(|d| **d > 0.0).count(),
                deepest_mm = 1e3 * deepest.map_or(0.0, |d| d.1.max(0.0)),
                "vertices inside the body or closer than the rest clearance moved out to it"
            );
        }
        push_out(&mut mesh.positions, &hits, REST_CLEARANCE)?;
        let mut g = Self::bind(name, mesh, body, regions)?;
        g.metric = g.pattern_metric(body, arm_angle_deg);
        Ok(g)
    }
}

/// Edges shorter than this share of the target edge are collapsed when an imported
/// garment is remeshed, however thin the triangles around them (see
/// [`RemeshOptions::sliver_edge`]): exporters and dense polygonisations leave slivers
/// at hems.
const SLIVER_EDGE: f32 = 0.25;

/// `mesh` (metres) tidied as [`Garment::from_mesh`] tidies it and, when it has more
/// than `target` vertices, remeshed to about `target`: shortest edges collapsed, edges
/// flipped and vertices relaxed ([`remesh()`]) with every vertex projected back onto
/// the mesh as modelled and its boundary vertices onto its boundary (hems, neck and
/// sleeve openings stay where they were). Refused as `from_mesh` refuses (non-finite
/// positions, not an oriented manifold, a closed part), before any remeshing.
pub(super) fn remeshed(mesh: &TriMesh, target: usize) -> Result<TriMesh, GarmentError> {
    // a mesh to be remeshed may be denser than the runtime's limit
    let mesh = checked(mesh, 4 * MAX_IMPORT_VERTICES)?;
    if mesh.vertex_count() <= target {
        return Ok(mesh);
    }
    let surface = MeshSurface::new(&mesh)?;
    let boundary = MeshBoundary::new(&mesh)?;
    Ok(remesh(
        &mesh,
        &surface,
        Some(&boundary),
        RemeshOptions {
            sliver_edge: SLIVER_EDGE,
            ..RemeshOptions::with_target(target)
        },
    )?)
}

/// `mesh` tidied ([`tidy`]) and checked: refused for a non-finite coordinate, more
/// than `limit` vertices, a degenerate triangle, not being an oriented 2-manifold (with
/// boundary) or a closed part ([`closed_part`]).
fn checked(mesh: &TriMesh, limit: usize) -> Result<TriMesh, GarmentError> {
    if let Some(i) = mesh.positions.iter().position(|p| !p.is_finite()) {
        return Err(crate::mesh::MeshError::NonFinite(i).into());
    }
    let mesh = tidy(mesh);
    if mesh.vertex_count() > limit {
        return Err(GarmentError::TooManyVertices {
            count: mesh.vertex_count(),
            limit,
        });
    }
    mesh.validate(0.0)?;
    closed_part(&mesh)?;
    Ok(mesh)
}

/// Refuses a mesh with a connected part that has no boundary (see
/// [`GarmentError::ClosedPart`]); also refuses a mesh that is not an oriented manifold.
fn closed_part(mesh: &TriMesh) -> Result<(), GarmentError> {
    let topo = Topology::build(mesh)?;
    let (label, parts) = topo.components(mesh);
    let mut open = vec![false; parts];
    let mut size = vec![0usize; parts];
    let mut first = vec![usize::MAX; parts];
    let boundary = topo.boundary_vertices(mesh.vertex_count());
    for (v, &c) in label.iter().enumerate() {
        if let Some(c) = (c != u32::MAX).then_some(c as usize) {
            open[c] |= boundary[v];
            size[c] += 1;
            first[c] = first[c].min(v);
        }
    }
    match (0..parts).find(|&c| !open[c]) {
        Some(c) => Err(GarmentError::ClosedPart {
            vertex: first[c],
            vertices: size[c],
        }),
        None => Ok(()),
    }
}

/// `mesh` welded (without the triangles that collapses) and without vertices no
/// triangle uses, the others kept in their order.
fn tidy(mesh: &TriMesh) -> TriMesh {
    // (welding drops the triangles it collapses)
    let (welded, _) = weld(mesh, WELD);
    let mut used = vec![false; welded.positions.len()];
    for &v in welded.triangles.iter().flatten() {
        used[v as usize] = true;
    }
    let mut new_index = vec![u32::MAX; welded.positions.len()];
    let mut positions: Vec<Vec3> = Vec::new();
    for (v, _) in used.iter().enumerate().filter(|u| *u.1) {
        new_index[v] = positions.len() as u32;
        positions.push(welded.positions[v]);
    }
    let triangles = welded
        .triangles
        .iter()
        .map(|t| t.map(|v| new_index[v as usize]))
        .collect();
    TriMesh::new(positions, triangles)
}

#[cfg(test)]
mod tests;
