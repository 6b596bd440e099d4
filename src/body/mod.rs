//! The skinned body: the procedural parametric default body, its skin weights, and
//! linear-blend and dual-quaternion skinning.
//!
//! Entry points: [`Body::generate`] (from a [`BodyShape`]), [`Body::posed_positions`],
//! [`lbs_into`], [`dqs_into`].

#[allow(
    clippy::module_inception,
    reason = "the Body type lives in the body module"
)]
mod body;
mod export;
mod guard;
mod import;
mod primitives;
mod shape;
mod skin;

pub use body::{Body, BodyOptions};
pub use export::{ExportAnimation, ExportMesh, glb_skeleton, skin_material};
pub use guard::SelfContactGuard;
pub use import::{CloseReport, ImportError, MIN_VOLUME_SHARE, SEAM_TOLERANCE};
pub(crate) use primitives::BodyField;
pub use shape::{BodyError, BodyShape};
pub(crate) use skin::normalize_fast;
pub use skin::{
    LbsMatrices, MAX_INFLUENCES, SkinError, SkinWeights, SkinningMethod, dqs_into, lbs_into,
    skin_into,
};

/// The default body at 2 000 vertices, generated once per test binary: what tests of
/// imports and guards build on.
#[cfg(test)]
pub(crate) fn small_test_body() -> &'static Body {
    static B: std::sync::OnceLock<Body> = std::sync::OnceLock::new();
    B.get_or_init(|| {
        Body::generate(
            &BodyShape::default(),
            &BodyOptions {
                target_vertices: 2000,
            },
        )
        .expect("body")
    })
}
