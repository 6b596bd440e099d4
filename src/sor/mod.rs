//! Sensitivity-Optimized Rigging (SOR, Xu et al. 2014; DESIGN §3): the per-example rig
//! ([`fit_example`], SOR §4), the example database file ([`Database`]), and the runtime
//! ([`Synthesizer`], SOR §5), and garments worn over one another ([`Layering`]).

mod db;
mod file;
mod layer;
mod local;
mod motion;
mod part;
mod rig;
mod stored;
mod synth;

pub use db::{
    BakeInfo, BodyData, DB_MAGIC, DB_VERSION, Database, DbError, GarmentData, MAX_EXAMPLES,
    body_hash, cloth_hash, garment_hash,
};
pub(crate) use file::{is_stream, write_whole, write_with};
pub use layer::{GivesWay, LayerError, LayerParams, LayerScratch, LayerState, Layering};
pub use motion::{BoneMotion, PoseDerivatives};
pub use part::{decode_example, encode_example};
pub use rig::{Example, GarmentRigInput, PosedBody, RigParams, RigReport, fit_example, tau_matrix};
pub use synth::{
    AvatarJob, AvatarState, Distance, LeftOut, Scratch, SynthFrame, SynthParams, Synthesizer,
    leave_one_out, left_out, synthesize_all, synthesize_job,
};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod write_tests;
