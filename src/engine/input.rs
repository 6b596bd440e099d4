//! Publishers' input into poses: pose messages of every profile read and validated
//! (unusable joints held, named), calibration against a performer's rest pose, and
//! position sources (Kinect) retargeted and One Euro filtered. Everything here runs
//! on the connection that received the input, before the pose reaches the engine.

use glam::{Quat, Vec3};

use crate::mocap::{
    FilterConfig, Floor, KinectJoints, KinectKind, Landmarks, LegEstimate, MEDIAPIPE_PROFILE,
    Placement, PoseFilter, PositionRetargeter, VmcPerformer, foot_contact, stand_on_floor,
};
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
    /// Position sources whose sensor reports no floor: the observed pelvis height that
    /// maps to the avatar's rest pelvis height (its first frame's).
    pub base: Option<f32>,
    /// Position sources: the performer's leg length.
    pub leg: LegEstimate,
    /// Position sources: the One Euro filter of the stream.
    pub filter: Option<PoseFilter>,
    /// Calibration: the raw pose the performer held when calibrated (their rest pose
    /// and facing); outputs are taken relative to it.
    pub rest: Option<Pose>,
    /// MediaPipe: the floor (the camera's tilt) its bridge last reported.
    pub camera: Option<Floor>,
    /// The poses come from joint positions (Kinect, MediaPipe, MVN: [`apply_joints`]).
    pub from_positions: bool,
}

impl InputState {
    /// Captures the current raw pose as the performer's rest pose and facing: from now
    /// on, holding it gives the avatar's T-pose at the rest position. For a position
    /// source the upper arms' and thighs' turn about themselves is left out: held from
    /// the last bend while the limbs are straight (as in a T-pose), it says nothing of
    /// the performer, and the elbows' and knees' bend sets it afresh afterwards
    /// ([`crate::mocap::without_hinge_twist`]).
    pub fn calibrate(&mut self) {
        self.rest = Some(if self.from_positions {
            crate::mocap::without_hinge_twist(&self.pose)
        } else {
            self.pose
        });
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
/// `azure_kinect`, `mediapipe`) to an avatar's input state (Kinect profiles: seen by
/// `sensor`, see [`apply_joints`]); on error neither state changes. Kinect joints carry
/// `position` in the SDK's camera coordinates and units, MediaPipe landmarks (named as
/// in [`MEDIAPIPE_NAMES`](crate::mocap::MEDIAPIPE_NAMES)) their world landmark in
/// metres, and both `confidence` in [0, 1] (below 0.25: not tracked; below 0.5:
/// inferred, a guess that poses the avatar but is not used to measure the performer;
/// MediaPipe's visibility serves); a joint whose position is not finite is treated as
/// not tracked (held) and named in [`Applied::held`].
///
/// A MediaPipe avatar stays on the spot (world landmarks are centred on the hips) with
/// its lowest foot on the floor (a webcam tells no height, so a jump is not seen); the
/// message's `floor`, when given, is the floor's normal in the camera's axes
/// ([`Landmarks::floor`]), which levels a tilted camera's landmarks (the last one
/// stays; absent: a level camera); `sensor`'s floor and stage are not used.
pub fn apply_pose_message(
    msg: &PoseMessage,
    sensor: &mut SensorState,
    state: &mut InputState,
    retargeter: &PositionRetargeter,
    filter: Option<&FilterConfig>,
) -> Result<Applied, EngineError> {
    let mut held = Vec::new();
    let kind = KinectKind::from_profile(&msg.profile);
    if kind.is_none() && msg.profile != MEDIAPIPE_PROFILE {
        let (raw, h) = pose_from_message(msg, &state.pose)?;
        let pose = state.calibrated(&raw);
        check(&pose)?;
        state.pose = raw;
        return Ok(Applied { pose, held: h });
    }
    if !crate::protocol::valid_avatar_id(&msg.avatar) {
        return Err(EngineError::BadAvatarId);
    }
    if !msg.timestamp.is_finite() {
        return Err(EngineError::BadValue("timestamp".into()));
    }
    let pose = match kind {
        Some(kind) => {
            let mut joints = KinectJoints::default();
            read_positions(
                msg,
                |n| kind.knows(n).then_some(n),
                |p| kind.to_world(p),
                |n, w, inferred| {
                    match inferred {
                        false => joints.set(kind, n, w),
                        true => joints.set_inferred(kind, n, w),
                    };
                },
                &mut held,
            )?;
            // an unusable floor is held (the last one stays), like an unusable joint
            let floor = match msg.floor.map(|p| kind.floor(p)) {
                Some(Ok(f)) => f,
                Some(Err(_)) => {
                    held.push("floor".into());
                    None
                }
                None => None,
            };
            apply_joints(
                &joints,
                floor,
                sensor,
                state,
                retargeter,
                filter,
                msg.timestamp,
            )?
        }
        None => {
            let mut marks = Landmarks::default();
            read_positions(
                msg,
                Landmarks::index,
                Landmarks::to_world,
                |i, w, inferred| {
                    marks.set(i, w, inferred);
                },
                &mut held,
            )?;
            // on the spot (the hips are the world landmarks' origin), with the lowest
            // foot on the floor, as the performer's is
            let mut on_the_spot = SensorState {
                origin: Some(Vec3::ZERO),
                ..SensorState::default()
            };
            // a tilted camera's floor levels the landmarks; the last one stays
            let camera = match msg.floor.map(Landmarks::floor) {
                Some(Ok(f)) => f.or(state.camera),
                Some(Err(_)) => {
                    held.push("floor".into());
                    state.camera
                }
                None => state.camera,
            };
            let mut pose = apply_joints(
                &marks.joints(),
                Some(camera.unwrap_or(Floor::LEVEL)),
                &mut on_the_spot,
                state,
                retargeter,
                filter,
                msg.timestamp,
            )?;
            pose.translation.y -= foot_contact(&pose, retargeter.skeleton());
            state.camera = camera;
            pose
        }
    };
    Ok(Applied { pose, held })
}

/// Reads the positions of a message's joints for a position source: each name must be
/// one `lookup` knows (its key: the name, an index); a position is turned into the
/// world frame by `to_world` and given to `put` (key, world position, only inferred)
/// unless it is not finite or beyond 100 m (held, named in `held`) or its confidence
/// is below 0.25 (not tracked).
fn read_positions<'m, K>(
    msg: &'m PoseMessage,
    lookup: impl Fn(&'m str) -> Option<K>,
    to_world: impl Fn([f32; 3]) -> Vec3,
    mut put: impl FnMut(K, Vec3, bool),
    held: &mut Vec<String>,
) -> Result<(), EngineError> {
    for j in &msg.joints {
        let Some(p) = j.position else { continue };
        let key = lookup(&j.name).ok_or_else(|| EngineError::UnknownJoint(j.name.clone()))?;
        let world = to_world(p);
        // NaN, infinite or beyond 100 m: lost for this frame, held
        if !world.is_finite() || world.length() >= 100.0 {
            held.push(j.name.clone());
        } else if j.confidence.is_none_or(|c| c >= 0.5) {
            put(key, world, false);
        } else if j.confidence.is_some_and(|c| c >= 0.25) {
            // a guess (v2 "inferred", Azure "low"): it poses, measures nothing
            put(key, world, true);
        }
    }
    Ok(())
}

/// What the server keeps of one sensor (a Kinect bridge's connection) between its
/// frames, shared by the bodies it reports. Plain data (`Copy`), replaced only when a
/// frame was applied.
#[derive(Clone, Copy, Debug, Default)]
pub struct SensorState {
    /// The floor the sensor last reported (kept while later frames state none).
    pub floor: Option<Floor>,
    /// The observed position that maps to the world origin across the floor: the first
    /// pelvis the sensor reported (taken again, in the levelled frame, when it first
    /// reports the floor). Shared, so that performers standing side by side stand side
    /// by side in the world.
    pub origin: Option<Vec3>,
    /// Metres in front of the sensor of the spot that maps to the world origin across
    /// the floor, if the server places performers so; then `origin` is that spot.
    pub stage: Option<f32>,
}

impl SensorState {
    /// A sensor whose performers are placed relative to the spot `distance` metres in
    /// front of it (levelled across its floor once it reports one); 0: relative to the
    /// first pelvis it reports.
    pub fn at_stage(distance: f32) -> Self {
        Self {
            stage: (distance > 0.0 && distance.is_finite()).then_some(distance),
            ..Self::default()
        }
    }

    /// An Xsens MVN character's: MVN stands its performers on its floor (positions
    /// levelled, the floor at y = 0: pass [`Floor::LEVEL`](crate::mocap::Floor::LEVEL)
    /// with every sample) around an origin of its own, which is the world origin across
    /// the floor, so the suits of a multi-person capture stand where they stand
    /// relative to each other.
    pub fn mvn() -> Self {
        Self {
            floor: Some(crate::mocap::Floor::LEVEL),
            origin: Some(Vec3::ZERO),
            stage: None,
        }
    }
}

/// Applies observed Kinect joints (a body of a bridge's body frame) seen at time `t`
/// (seconds) by `sensor`, with the floor it reported with them if any, to an input
/// state, One-Euro-filtered with `filter` when given. Once a floor is known the joints
/// are levelled onto it (a tilted sensor's tilt taken out) and the avatar stands at the
/// performer's height above it, lifted where its feet would go through it; before, the avatar's first pelvis height is its rest
/// height. Across the floor, positions are taken from the sensor's origin. The
/// performer's leg length, measured as frames come, scales the pelvis's motion
/// ([`Placement`]). On error neither state changes.
pub fn apply_joints(
    joints: &KinectJoints,
    floor: Option<Floor>,
    sensor: &mut SensorState,
    state: &mut InputState,
    retargeter: &PositionRetargeter,
    filter: Option<&FilterConfig>,
    t: f64,
) -> Result<Pose, EngineError> {
    apply_joints_then(joints, floor, sensor, state, retargeter, filter, t, |_| {})
}

/// [`apply_joints`], with `refine` applied to the calibrated pose before it is filtered
/// (an Xsens suit's segment orientations: [`crate::mocap::orient_segments`]).
#[allow(
    clippy::too_many_arguments,
    reason = "apply_joints' arguments and the refinement"
)]
pub fn apply_joints_then(
    joints: &KinectJoints,
    floor: Option<Floor>,
    sensor: &mut SensorState,
    state: &mut InputState,
    retargeter: &PositionRetargeter,
    filter: Option<&FilterConfig>,
    t: f64,
    refine: impl FnOnce(&mut Pose),
) -> Result<Pose, EngineError> {
    if joints.count() < 3 {
        return Err(EngineError::BadValue("fewer than 3 tracked joints".into()));
    }
    let mut seen = *sensor;
    if let Some(f) = floor {
        // the first floor changes the frame positions are in: the origin is taken again
        if seen.floor.is_none() {
            seen.origin = None;
        }
        seen.floor = Some(f);
    }
    let levelled;
    let joints = match &seen.floor {
        Some(f) => {
            levelled = joints.levelled(f);
            &levelled
        }
        None => joints,
    };
    let mut leg = state.leg;
    leg.push(joints.leg_length());
    let pelvis = joints.pelvis();
    // the sensor looks along -z of the world frame (levelled: across the floor)
    let stage = seen.stage.map(|d| Vec3::new(0.0, 0.0, -d));
    let (Some(across), Some(base)) = (
        seen.origin.or(stage).or(pelvis),
        state.base.or(pelvis.map(|p| p.y)),
    ) else {
        return Err(EngineError::BadValue(
            "the first frame has no pelvis".into(),
        ));
    };
    seen.origin = Some(across);
    let placement = Placement {
        origin: Vec3::new(across.x, base, across.z),
        on_floor: seen.floor.is_some(),
        leg: leg.get(),
    };
    let mut raw = retargeter.retarget(joints, &state.pose, &placement);
    raw.validate()
        .map_err(|e| EngineError::BadValue(e.to_string()))?;
    // the retargeter continues from the unfiltered pose; the avatar gets the filtered one
    let mut f = state.filter.or_else(|| filter.map(PoseFilter::new));
    let mut calibrated = state.calibrated(&raw);
    refine(&mut calibrated);
    let mut pose = match f.as_mut() {
        Some(f) => f.apply(&calibrated, t, &[1.0; JOINT_COUNT]),
        None => calibrated,
    };
    if seen.floor.is_some() {
        // the performer's feet are on the floor; the avatar's, with its own proportions
        // and the same joint angles, may reach below it in a crouch
        stand_on_floor(&mut pose, retargeter.skeleton());
    }
    pose.validate()
        .map_err(|e| EngineError::BadValue(e.to_string()))?;
    *sensor = seen;
    state.base = Some(base);
    state.leg = leg;
    state.pose = raw;
    state.filter = f;
    state.from_positions = true;
    Ok(pose)
}

/// A VMC performer's pose for the avatar `retargeter` was made for: calibrated
/// ([`InputState::calibrated`]), the pelvis's motion scaled by the avatar's leg length
/// over the sender's model's ([`VmcPerformer::leg_length`],
/// [`PositionRetargeter::root_scale`]; unscaled while unknown), as BVH and Kinect root
/// motion is, and lifted where the same joint angles on the avatar's own proportions
/// would put a foot through the floor ([`stand_on_floor`]: the floor is where the
/// model's feet were at the pelvis's first position, which VMC translation is taken
/// from).
pub fn vmc_pose(
    performer: &VmcPerformer,
    state: &InputState,
    retargeter: &PositionRetargeter,
) -> Pose {
    let mut pose = state.calibrated(&performer.pose);
    pose.translation *= retargeter.root_scale(performer.leg_length());
    stand_on_floor(&mut pose, retargeter.skeleton());
    pose
}

/// Refuses a pose with non-finite values or non-unit rotations.
fn check(pose: &Pose) -> Result<(), EngineError> {
    let mut p = *pose;
    p.validate()
        .map_err(|e| EngineError::BadValue(e.to_string()))
}

/// The poses the server makes of a performer who moves as `poses` (a clip on the
/// retargeter's skeleton, `frame_time` seconds apart) in front of a Kinect sensor of
/// `kind`: one pose per clip frame, the latest the server holds at that frame's time.
/// The sensor captures at its own rate ([`KinectKind::frame_rate`], 30 Hz), each capture
/// seeing the clip's frame nearest its time; each captured pose's joint
/// positions are written as a bridge's body frame from a sensor 1 m above the floor and
/// 2 m in front (floor plane included), read back, and applied as a connection applies a
/// Kinect body ([`apply_joints`]: position retargeting, floor, filtered with `filter`
/// when given). Between captures the pose is held, as the server's latest-pose-wins
/// input holds it. What a kiosk shows of such a performer (`clothcast render --kinect`);
/// sensor noise is not imitated. A `frame_time` that is not a positive finite number
/// is refused.
pub fn through_kinect(
    poses: &[Pose],
    frame_time: f32,
    kind: KinectKind,
    retargeter: &PositionRetargeter,
    filter: Option<&FilterConfig>,
) -> Result<Vec<Pose>, EngineError> {
    if !(frame_time.is_finite() && frame_time > 0.0) {
        return Err(EngineError::BadValue(format!(
            "frame time {frame_time} s: must be a positive number of seconds"
        )));
    }
    let view = crate::mocap::SensorView {
        distance: 2.0,
        height: 1.0,
        tilt: 0.0,
    };
    let skeleton = retargeter.skeleton();
    let (mut sensor, mut state) = (SensorState::default(), InputState::default());
    let (frame_time, period) = (f64::from(frame_time), 1.0 / f64::from(kind.frame_rate()));
    let mut capture = |f: usize, t: f64| -> Result<Pose, EngineError> {
        let bodies = [("1".to_string(), skeleton.world_frames(&poses[f]))];
        let frame = crate::mocap::body_frame_json(kind, &bodies, &view, true);
        let body = crate::mocap::parse_body_frame(&frame, Some(kind))
            .map_err(|e| EngineError::BadValue(format!("frame {f}: {e}")))?
            .into_iter()
            .next()
            .ok_or_else(|| EngineError::BadValue(format!("frame {f}: no body")))?;
        apply_joints(
            &body.joints,
            body.floor,
            &mut sensor,
            &mut state,
            retargeter,
            filter,
            t,
        )
    };
    let mut seen = Vec::with_capacity(poses.len());
    let (mut held, mut next) = (Pose::rest(), 0u64);
    for f in 0..poses.len() {
        // capture k, at k·period, sees the clip frame nearest its time and arrives with
        // it (a BVH's rounded frame time, 0.008333 s for 120 Hz, does not shift every
        // 4th frame's capture onto the next); of a gap over a second (a clip of a frame
        // a minute) the last second's captures are enough for the filter to settle
        let due = ((f as f64 + 0.5) * frame_time / period).ceil() as u64;
        next = next.max(due.saturating_sub(kind.frame_rate() as u64));
        while next < due {
            let at = next as f64 * period;
            let shown = ((at / frame_time).round() as usize).min(f);
            held = capture(shown, at)?;
            next += 1;
        }
        seen.push(held);
    }
    Ok(seen)
}

#[cfg(test)]
mod tests;
