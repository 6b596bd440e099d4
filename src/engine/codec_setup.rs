//! The codec setup of a garment the engine streams: its topology, skin and traversal,
//! and the canonical skeleton its frames' bones are predicted along.

use crate::codec::{CodecConfig, CodecError, GarmentSetup};
use crate::skeleton::{JOINT_COUNT, JointId, Skeleton};

/// The codec setup of a garment skinned to the canonical `skeleton` (default lattice),
/// its traversal chosen from the garment's shape at rest (`rest`, metres, one per
/// vertex, at the bind pose in the frame the engine codes: [`GarmentSetup::with_rest`],
/// which also predicts every keyframe from it), or breadth-first from the topology alone
/// without it ([`GarmentSetup::new`]; `bench codec`'s baseline). The setup carries the
/// skeleton's hierarchy and rest joints ([`GarmentSetup::with_skeleton`]), so that
/// frames code each bone's transform from its parent's.
pub fn codec_setup(
    triangles: &[[u32; 3]],
    skin: &crate::body::SkinWeights,
    rest: Option<&[glam::Vec3]>,
    skeleton: &Skeleton,
) -> Result<GarmentSetup, CodecError> {
    let joints: Vec<[u8; 4]> = skin
        .joints
        .iter()
        .map(|j| j.map(|b| b.min(255) as u8))
        .collect();
    let (bones, config) = (JOINT_COUNT as u32, CodecConfig::default());
    let setup = match rest {
        Some(rest) => {
            let rest: Vec<[f32; 3]> = rest.iter().map(|p| p.to_array()).collect();
            GarmentSetup::with_rest(triangles, &joints, &skin.weights, bones, &config, &rest)
        }
        None => GarmentSetup::new(triangles, &joints, &skin.weights, bones, &config),
    }?;
    let parents: Vec<Option<usize>> = JointId::all()
        .map(|j| j.parent().map(JointId::index))
        .collect();
    let pivots: Vec<[f32; 3]> = skeleton
        .rest_positions()
        .iter()
        .map(|p| p.to_array())
        .collect();
    setup.with_skeleton(&parents, &pivots)
}
