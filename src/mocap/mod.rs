//! Motion capture input: BVH files, skeleton profiles, and retargeting onto the
//! canonical skeleton. Bytes in, [`crate::skeleton::Pose`] out; no sockets.
//!
//! Entry points: [`Bvh::parse`], [`Profile::detect`], [`Retargeter::new`],
//! [`Clip::from_bvh_text`].

mod bvh;
mod clip;
mod filter;
mod hinge_fit;
mod kinect;
mod mediapipe;
mod mvn;
mod profile;
mod retarget;
mod vmc;

pub use bvh::{Bvh, BvhError, BvhJoint, BvhWriter, Channel, MAX_FRAMES, MAX_JOINTS};
pub use clip::{Clip, ClipError, foot_contact, stand_on_floor};
pub use filter::{FilterConfig, PoseFilter};
pub use hinge_fit::{
    HINGE_FIT_CONSISTENT, HINGE_FIT_MIN_BEND, HINGE_FIT_MIN_FRAMES, HINGE_FIT_SUGGEST, HingeFit,
    hinge_fit,
};
pub use kinect::{
    FOREARM_TWIST_SHARE, Floor, HAND_TURN, KinectBody, KinectError, KinectJoints, KinectKind,
    LegEstimate, PLAUSIBLE_LEG, Placement, PositionRetargeter, SensorView, body_frame_json,
    body_json, parse_body_frame, without_hinge_twist,
};
pub use mediapipe::{Landmarks, MEDIAPIPE_LANDMARKS, MEDIAPIPE_NAMES, MEDIAPIPE_PROFILE};
pub use mvn::{
    MVN_PORT, MVN_REORDER_SAMPLES, MVN_SEGMENTS, MvnDatagram, MvnError, MvnSample, MvnStream,
    mvn_datagram, orient_segments, parse_mvn,
};
pub use profile::{BUILTIN_PROFILES, Profile, ProfileError, normalize_name};
pub use retarget::{RetargetError, Retargeter, SourceSkeleton};
pub use vmc::{MAX_BUNDLE_DEPTH, REORDER_WINDOW, VmcError, VmcPerformer, vmc_packet};
