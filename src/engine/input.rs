//! Publishers' input into poses: pose messages of every profile read and validated
//! (unusable joints held, named), calibration against a performer's rest pose, and
//! position sources (Kinect) retargeted and One Euro filtered. Everything here runs
//! on the connection that received the input, before the pose reaches the engine.

use glam::{Quat, Vec3};

use crate::mocap::{FilterConfig, KinectJoints, KinectKind, PoseFilter, PositionRetargeter};
use crate::protocol::PoseMessage;
use crate::skeleton::{JOINT_COUNT, JointId, Pose};

use super::EngineError;

/// Reads a pose message of the `canonical` profile (local rotations of the canonical
/// joints, pelvis displacement) on top of `previous` (joints not listed keep theirs).
/// A joint whose rotation is unusable (NaN, infinite, not unit within 1 %) and a
/// non-finite or absurd root (beyond 10 km) are held at their previous values and
/// named in the second result; unknown joints, profiles and a bad timestamp refuse
/// the whole message.
pub fn pose_from_message(
    msg: &PoseMessage,
    previous: &Pose,
) -> Result<(Pose, Vec<String>), EngineError> {
    if !crate::protocol::valid_avatar_id(&msg.avatar) {
        return Err(EngineError::BadAvatarId);
    }
    if msg.profile != "canonical" {
        return Err(EngineError::UnknownProfile(msg.profile.clone()));
    }
    if !msg.timestamp.is_finite() {
        return Err(EngineError::BadValue("timestamp".into()));
    }
    let mut pose = *previous;
    let mut held = Vec::new();
    if let Some(r) = msg.root {
        if r.iter().any(|x| !x.is_finite() || x.abs() > 1e4) {
            held.push("root".to_string());
        } else {
            pose.translation = Vec3::from(r);
        }
    }
    for j in &msg.joints {
        let id =
            JointId::from_name(&j.name).ok_or_else(|| EngineError::UnknownJoint(j.name.clone()))?;
        if let Some(q) = j.rotation {
            let q = Quat::from_array(q);
            if !q.is_finite() || (q.length() - 1.0).abs() > 0.01 {
                held.push(j.name.clone());
            } else {
                pose.set_rotation(id, q.normalize());
            }
        }
    }
    pose.validate()
        .map_err(|e| EngineError::BadValue(e.to_string()))?;
    Ok((pose, held))
}

/// A pose message applied to an avatar: the pose it gets, and the joints of the
/// message that could not be used and were held at their last values (a sensor that
/// lost a joint for a moment, a NaN from a solver). The publisher is told about them.
#[derive(Clone, Debug)]
pub struct Applied {
    /// The avatar's pose (calibrated and filtered).
    pub pose: Pose,
    /// Names of the joints (or `root`) held, in message order; empty when all were used.
    pub held: Vec<String>,
}

/// What the server remembers of one input avatar between its messages. Plain data
/// (`Copy`): a message is applied to a copy that replaces the state only when the whole
/// message was good, and that copy must not allocate at every pose.
#[derive(Clone, Copy, Debug, Default)]
pub struct InputState {
    /// The last accepted pose (joints a message leaves out keep their rotation).
    pub pose: Pose,
    /// Position sources: the observed pelvis position that maps to the avatar's rest
    /// pelvis (captured on the first frame).
    pub origin: Option<Vec3>,
    /// Position sources: the One Euro filter of the stream.
    pub filter: Option<PoseFilter>,
    /// Calibration: the raw pose the performer held when calibrated (their rest pose
    /// and facing); outputs are taken relative to it.
    pub rest: Option<Pose>,
}

impl InputState {
    /// Captures the current raw pose as the performer's rest pose and facing: from now
    /// on, holding it gives the avatar's T-pose at the rest position.
    pub fn calibrate(&mut self) {
        self.rest = Some(self.pose);
    }

    /// `raw` relative to the calibration: each joint's rotation is taken relative to its
    /// calibrated one (local rotations: raw · rest⁻¹), and the pelvis displacement to the
    /// calibrated position (turned by the calibrated facing).
    pub fn calibrated(&self, raw: &Pose) -> Pose {
        let Some(rest) = &self.rest else { return *raw };
        let mut out = *raw;
        for j in 0..JOINT_COUNT {
            out.rotations[j] = (raw.rotations[j] * rest.rotations[j].inverse()).normalize();
        }
        let facing = Quat::from_rotation_y(crate::skeleton::heading_of(rest.rotations[0]));
        out.translation = facing.inverse() * (raw.translation - rest.translation);
        out
    }
}

/// Applies a pose message of any supported profile (`canonical`, `kinect_v2`,
/// `azure_kinect`) to an avatar's input state; on error the state is unchanged.
/// Kinect joints carry `position` in the SDK's camera coordinates and units, and
/// `confidence` in [0, 1] (below 0.25: not tracked); a joint whose position is not
/// finite is treated as not tracked (held) and named in [`Applied::held`].
pub fn apply_pose_message(
    msg: &PoseMessage,
    state: &mut InputState,
    retargeter: &PositionRetargeter,
    filter: Option<&FilterConfig>,
) -> Result<Applied, EngineError> {
    let mut held = Vec::new();
    let pose = match KinectKind::from_profile(&msg.profile) {
        None => {
            let (raw, h) = pose_from_message(msg, &state.pose)?;
            held = h;
            let pose = state.calibrated(&raw);
            check(&pose)?;
            state.pose = raw;
            pose
        }
        Some(kind) => {
            if !crate::protocol::valid_avatar_id(&msg.avatar) {
                return Err(EngineError::BadAvatarId);
            }
            if !msg.timestamp.is_finite() {
                return Err(EngineError::BadValue("timestamp".into()));
            }
            let mut joints = KinectJoints::default();
            for j in &msg.joints {
                if let Some(p) = j.position {
                    if !kind.knows(&j.name) {
                        return Err(EngineError::UnknownJoint(j.name.clone()));
                    }
                    let world = kind.to_world(p);
                    // NaN, infinite or beyond 100 m: lost for this frame, held
                    if !world.is_finite() || world.length() >= 100.0 {
                        held.push(j.name.clone());
                    } else if j.confidence.is_none_or(|c| c >= 0.25) {
                        joints.set(kind, &j.name, world);
                    }
                }
            }
            apply_joints(&joints, state, retargeter, filter, msg.timestamp)?
        }
    };
    Ok(Applied { pose, held })
}

/// Applies observed Kinect joints (a body of a bridge's body frame) seen at time `t`
/// (seconds) to an input state, One-Euro-filtered with `filter` when given.
pub fn apply_joints(
    joints: &KinectJoints,
    state: &mut InputState,
    retargeter: &PositionRetargeter,
    filter: Option<&FilterConfig>,
    t: f64,
) -> Result<Pose, EngineError> {
    if joints.count() < 3 {
        return Err(EngineError::BadValue("fewer than 3 tracked joints".into()));
    }
    let origin = match (state.origin, joints.pelvis()) {
        (Some(o), _) => o,
        (None, Some(p)) => p,
        (None, None) => {
            return Err(EngineError::BadValue(
                "the first frame has no pelvis".into(),
            ));
        }
    };
    let mut raw = retargeter.retarget(joints, &state.pose, origin);
    raw.validate()
        .map_err(|e| EngineError::BadValue(e.to_string()))?;
    // the retargeter continues from the unfiltered pose; the avatar gets the filtered one
    let mut f = state.filter.or_else(|| filter.map(PoseFilter::new));
    let calibrated = state.calibrated(&raw);
    let mut pose = match f.as_mut() {
        Some(f) => f.apply(&calibrated, t, &[1.0; JOINT_COUNT]),
        None => calibrated,
    };
    pose.validate()
        .map_err(|e| EngineError::BadValue(e.to_string()))?;
    state.origin = Some(origin);
    state.pose = raw;
    state.filter = f;
    Ok(pose)
}

/// Refuses a pose with non-finite values or non-unit rotations.
fn check(pose: &Pose) -> Result<(), EngineError> {
    let mut p = *pose;
    p.validate()
        .map_err(|e| EngineError::BadValue(e.to_string()))
}
