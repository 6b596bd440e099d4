//! Conversions between the database's stored garment and body and the live
//! [`crate::garment::Garment`] and [`crate::body::Body`] they were built from.

use glam::Vec3;

use super::db::{BodyData, GarmentData};

impl GarmentData {
    /// The database's copy of a garment.
    pub fn from_garment(g: &crate::garment::Garment) -> Self {
        GarmentData {
            name: g.name.clone(),
            triangles: g.mesh.triangles.clone(),
            rest: g.mesh.positions.clone(),
            metric: g.metric.clone(),
            skin: g.skin.clone(),
            region_names: g.regions.names.clone(),
            region_weights: g.region_weights.clone(),
            bone_regions: g.regions.bone_region.to_vec(),
        }
    }

    /// A [`crate::garment::Garment`] from the stored data (for simulating it again:
    /// evaluation, further bakes). The body binding is not stored; it is left empty.
    pub fn to_garment(&self) -> crate::garment::Garment {
        crate::garment::Garment {
            name: self.name.clone(),
            mesh: crate::mesh::TriMesh::new(self.rest.clone(), self.triangles.clone()),
            metric: self.metric.clone(),
            binding: Vec::new(),
            skin: self.skin.clone(),
            regions: crate::garment::RegionTable {
                names: self.region_names.clone(),
                bone_region: std::array::from_fn(|b| {
                    self.bone_regions.get(b).copied().unwrap_or(0)
                }),
            },
            region_weights: self.region_weights.clone(),
        }
    }
}

impl BodyData {
    /// The database's copy of a body.
    pub fn from_body(b: &crate::body::Body) -> Self {
        BodyData {
            skeleton: *b.skeleton.rest_positions(),
            positions: b.mesh.positions.clone(),
            triangles: b.mesh.triangles.clone(),
            skin: b.skin.clone(),
        }
    }

    /// A [`crate::body::Body`] from the stored data (no procedural field: garments for
    /// it come from the database).
    pub fn to_body(&self) -> crate::body::Body {
        let (lo, hi) = crate::mesh::TriMesh::new(self.positions.clone(), self.triangles.clone())
            .bounds()
            .unwrap_or((Vec3::ZERO, Vec3::Y));
        crate::body::Body {
            shape: crate::body::BodyShape {
                height: hi.y - lo.y,
                ..Default::default()
            },
            skeleton: crate::skeleton::Skeleton::from_rest_positions(self.skeleton),
            mesh: crate::mesh::TriMesh::new(self.positions.clone(), self.triangles.clone()),
            skin: self.skin.clone(),
            field: None,
        }
    }
}
