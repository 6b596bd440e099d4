//! Nearest-vertex lookup (a k-d tree from `kiddo`), used to bind garment vertices to
//! their nearest body vertex (SOR §4).

use glam::Vec3;
use kiddo::ImmutableKdTree;
use kiddo::dist::SquaredEuclidean;

use super::trimesh::{MeshError, VertexId};

/// Nearest-point index over a fixed set of points (metres).
pub struct NearestVertex {
    tree: ImmutableKdTree<f32, 3>,
}

impl NearestVertex {
    /// Builds the index. Fails on an empty or non-finite point set.
    pub fn build(points: &[Vec3]) -> Result<Self, MeshError> {
        if points.is_empty() {
            return Err(MeshError::Empty);
        }
        if let Some(i) = points.iter().position(|p| !p.is_finite()) {
            return Err(MeshError::NonFinite(i));
        }
        let pts: Vec<[f32; 3]> = points.iter().map(|p| p.to_array()).collect();
        let tree = ImmutableKdTree::new_from_slice(&pts)
            .map_err(|e| MeshError::TooLarge(e.to_string()))?;
        Ok(Self { tree })
    }

    /// Index of the point nearest to `p`, and its distance (metres).
    pub fn nearest(&self, p: Vec3) -> (VertexId, f32) {
        let hit = self
            .tree
            .query(&p.to_array())
            .nearest_one::<SquaredEuclidean<f32>>()
            .execute();
        (VertexId(hit.item), hit.distance.max(0.0).sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_nearest_point() {
        let pts: Vec<Vec3> = (0..1000)
            .map(|i| Vec3::new((i % 10) as f32, ((i / 10) % 10) as f32, (i / 100) as f32) * 0.1)
            .collect();
        let idx = NearestVertex::build(&pts).expect("build");
        for (i, p) in pts.iter().enumerate().step_by(37) {
            let (v, d) = idx.nearest(*p + Vec3::splat(0.02));
            assert_eq!(v.index(), i);
            assert!((d - 0.02 * 3f32.sqrt()).abs() < 1e-4);
        }
        assert!(NearestVertex::build(&[]).is_err());
    }
}
