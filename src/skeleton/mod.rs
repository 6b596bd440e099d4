//! The canonical skeleton (DESIGN §2): the 22 SMPL body joints, poses, forward
//! kinematics, the joint-angle vector Θ (SOR §3), the canonical frame and joint limits.
//!
//! Entry points: [`Skeleton::from_proportions`], [`Skeleton::world_frames`],
//! [`theta()`], [`canonicalize`], [`sample_pose`].

mod canonical;
mod joint;
mod limits;
mod pose;
mod rotation;
#[allow(
    clippy::module_inception,
    reason = "the skeleton type lives in the skeleton module"
)]
mod skeleton;
mod theta;

pub use canonical::{RootFrame, canonicalize, heading_of};
pub use joint::{DOF_COUNT, JOINT_COUNT, JointId};
pub use limits::{JointLimit, clamp_pose, joint_limit, joint_limits, sample_pose};
pub use pose::{Pose, PoseError};
pub(crate) use rotation::ATAN_COEFFS;
pub use rotation::{Rigid, quat_exp, quat_log, rotation_between, swing_twist};
pub use skeleton::{Proportions, Skeleton};
pub use theta::{apply_theta, theta, theta_into};
