//! A triangle mesh as the surface [`remesh()`](super::remesh()) projects onto: what lets
//! an imported garment (a mesh, not an implicit field) be remeshed to a vertex count.

use glam::Vec3;

use super::closest::MeshQuery;
use super::isosurface::Field;
use super::topology::Topology;
use super::trimesh::{MeshError, TriMesh};

/// The surface of a triangle mesh as a [`Field`]: the value at a point is its signed
/// distance (metres, negative behind the faces' orientation), the gradient the
/// outward pseudo-normal of the closest feature, and projection the closest point on
/// the mesh (exact, no Newton steps).
pub struct MeshSurface {
    query: MeshQuery,
}

impl MeshSurface {
    /// Builds the closest-point tree of `mesh`.
    pub fn new(mesh: &TriMesh) -> Result<Self, MeshError> {
        Ok(Self {
            query: MeshQuery::build(mesh)?,
        })
    }
}

impl Field for MeshSurface {
    fn value(&self, p: Vec3) -> f32 {
        // the nearest surface's side, as the gradient and projection see it (a garment
        // is open, so the union of closed parts that the body's signed distance reads
        // has no meaning here)
        self.query.closest(p).signed_distance(p)
    }

    fn gradient(&self, p: Vec3) -> Vec3 {
        self.query.closest(p).normal
    }

    fn project(&self, p: Vec3) -> Vec3 {
        self.query.closest(p).point
    }
}

/// The boundary of an open triangle mesh (its edges with one triangle) as a [`Field`]
/// whose projection is the closest point on those edges: the `clip` of
/// [`remesh()`](super::remesh()), which keeps a remeshed garment's hems and openings
/// where they were. The value is the distance to the boundary (unsigned, metres); the
/// search visits every boundary edge (hems are a few hundred edges).
pub struct MeshBoundary {
    edges: Vec<[Vec3; 2]>,
}

impl MeshBoundary {
    /// The boundary edges of `mesh` (none for a closed mesh: then projection leaves a
    /// point where it is).
    pub fn new(mesh: &TriMesh) -> Result<Self, MeshError> {
        let topo = Topology::build(mesh)?;
        let edges = topo
            .edges
            .iter()
            .enumerate()
            .filter(|(e, _)| topo.is_boundary_edge(*e))
            .map(|(_, &[a, b])| [mesh.positions[a as usize], mesh.positions[b as usize]])
            .collect();
        Ok(Self { edges })
    }

    /// Number of boundary edges.
    pub fn len(&self) -> usize {
        self.edges.len()
    }

    /// Whether the mesh is closed.
    pub fn is_empty(&self) -> bool {
        self.edges.is_empty()
    }

    fn closest(&self, p: Vec3) -> Option<Vec3> {
        self.edges
            .iter()
            .map(|&[a, b]| {
                let ab = b - a;
                let t =
                    ((p - a).dot(ab) / ab.length_squared().max(f32::MIN_POSITIVE)).clamp(0.0, 1.0);
                let q = a + ab * t;
                (q, (q - p).length_squared())
            })
            .min_by(|x, y| x.1.total_cmp(&y.1))
            .map(|(q, _)| q)
    }
}

impl Field for MeshBoundary {
    fn value(&self, p: Vec3) -> f32 {
        self.closest(p).map_or(f32::INFINITY, |q| (q - p).length())
    }

    fn project(&self, p: Vec3) -> Vec3 {
        self.closest(p).unwrap_or(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A unit square of two triangles in z = 0, facing +z.
    fn square() -> TriMesh {
        TriMesh::new(
            vec![
                Vec3::new(0.0, 0.0, 0.0),
                Vec3::new(1.0, 0.0, 0.0),
                Vec3::new(1.0, 1.0, 0.0),
                Vec3::new(0.0, 1.0, 0.0),
            ],
            vec![[0, 1, 2], [0, 2, 3]],
        )
    }

    #[test]
    fn points_project_onto_the_faces_and_the_boundary() {
        let m = square();
        let s = MeshSurface::new(&m).expect("surface");
        let p = Vec3::new(0.3, 0.6, 0.25);
        assert!((s.project(p) - Vec3::new(0.3, 0.6, 0.0)).length() < 1e-6);
        assert!((s.value(p) - 0.25).abs() < 1e-6);
        assert!((s.value(Vec3::new(0.3, 0.6, -0.1)) + 0.1).abs() < 1e-6);
        assert!((s.gradient(p) - Vec3::Z).length() < 1e-6);
        let b = MeshBoundary::new(&m).expect("boundary");
        assert_eq!(b.len(), 4);
        // nearest the side x = 1, then a corner
        assert!((b.project(Vec3::new(0.9, 0.4, 0.2)) - Vec3::new(1.0, 0.4, 0.0)).length() < 1e-6);
        assert!((b.project(Vec3::new(1.5, -0.5, 0.0)) - Vec3::new(1.0, 0.0, 0.0)).length() < 1e-6);
        assert!((b.value(Vec3::new(0.5, 0.5, 0.0)) - 0.5).abs() < 1e-6);
    }
}
