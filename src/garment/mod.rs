//! Garments: procedural T-shirts and pants fitted to the body, user garments imported
//! and bound to it, and their region tables (SOR §4–5).
//!
//! Entry points: [`Garment::generate`] (from a [`GarmentConfig`]), [`Garment::import`]
//! (a mesh file named by a [`MeshGarmentConfig`]), [`Garment::bind`].

mod config;
#[allow(
    clippy::module_inception,
    reason = "the Garment type lives in the garment module"
)]
mod garment;
mod import;
mod pattern;

pub use config::{
    BUILTIN_GARMENTS, GarmentConfig, GarmentError, GarmentKind, GarmentSpec, Legs, MAX_REGIONS,
    MeshGarmentConfig, RegionConfig, RegionTable, Sleeves,
};
pub use garment::{Garment, REST_CLEARANCE};
pub use import::{MAX_IMPORT_DEPTH, MAX_IMPORT_VERTICES, read_garment_mesh};
