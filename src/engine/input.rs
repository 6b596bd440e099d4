//! Publishers' input into poses: pose messages of every profile read and validated
//! (unusable joints held, named), calibration against a performer's rest pose, and
//! position sources (Kinect) retargeted and One Euro filtered. Everything here runs
//! on the connection that received the input, before the pose reaches the engine.

use glam::{Quat, Vec3};

use crate::mocap::{
    FilterConfig, Floor, KinectJoints, KinectKind, LegEstimate, Placement, PoseFilter,
    PositionRetargeter, VmcPerformer, stand_on_floor,
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
/// `azure_kinect`) to an avatar's input state (Kinect profiles: seen by `sensor`, see
/// [`apply_joints`]); on error neither state changes. Kinect joints carry `position` in
/// the SDK's camera coordinates and units, and `confidence` in [0, 1] (below 0.25: not
/// tracked; below 0.5: inferred, a guess that poses the avatar but is not used to
/// measure the performer); a joint whose position is not finite is treated as not
/// tracked (held) and named in [`Applied::held`].
pub fn apply_pose_message(
    msg: &PoseMessage,
    sensor: &mut SensorState,
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
                    } else if j.confidence.is_none_or(|c| c >= 0.5) {
                        joints.set(kind, &j.name, world);
                    } else if j.confidence.is_some_and(|c| c >= 0.25) {
                        // a guess (v2 "inferred", Azure "low"): it poses, measures nothing
                        joints.set_inferred(kind, &j.name, world);
                    }
                }
            }
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
    };
    Ok(Applied { pose, held })
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
    let calibrated = state.calibrated(&raw);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mocap::{SensorView, body_frame_json, parse_body_frame};
    use crate::protocol::JointSample;
    use crate::skeleton::{Proportions, Skeleton};

    const TILTED: SensorView = SensorView {
        distance: 2.2,
        height: 1.3,
        tilt: 0.35,
    };

    /// A Kinect v2 body frame of `pose` as seen from `TILTED`, with its floor or with
    /// the all-zero plane of a sensor that has not found the floor yet.
    fn frame(skel: &Skeleton, pose: &Pose, floor: bool) -> serde_json::Value {
        let bodies = [("3".to_string(), skel.joint_positions(pose))];
        let mut f = body_frame_json(KinectKind::V2, &bodies, &TILTED, true);
        if !floor {
            f["floorClipPlane"] = serde_json::json!({"x": 0, "y": 0, "z": 0, "w": 0});
        }
        f
    }

    fn apply(
        skel: &Skeleton,
        sensor: &mut SensorState,
        state: &mut InputState,
        json: &serde_json::Value,
    ) -> Pose {
        let body = parse_body_frame(json, None).expect("reads").remove(0);
        let r = PositionRetargeter::new(skel);
        apply_joints(&body.joints, body.floor, sensor, state, &r, None, 0.0).expect("applies")
    }

    /// Height of the avatar's lower ankle above its rest height, and the angle (degrees)
    /// of its trunk (pelvis to neck) from the rest pose's.
    fn stance(skel: &Skeleton, pose: &Pose) -> (f32, f32) {
        let p = skel.joint_positions(pose);
        let ankle = p[JointId::LEFT_ANKLE.index()]
            .y
            .min(p[JointId::RIGHT_ANKLE.index()].y);
        let trunk = |p: &[Vec3; JOINT_COUNT]| p[JointId::NECK.index()] - p[JointId::PELVIS.index()];
        (
            ankle - skel.rest_position(JointId::LEFT_ANKLE).y,
            trunk(&p)
                .angle_between(trunk(skel.rest_positions()))
                .to_degrees(),
        )
    }

    /// `skel` crouching: both hips, knees and ankles turned about x by `legs` (radians),
    /// the spine bent forward by `spine`, the ankles at their rest height (feet on the
    /// floor).
    fn crouch(skel: &Skeleton, legs: [f32; 3], spine: f32) -> Pose {
        let mut p = Pose::rest();
        for joints in [
            [JointId::LEFT_HIP, JointId::LEFT_KNEE, JointId::LEFT_ANKLE],
            [
                JointId::RIGHT_HIP,
                JointId::RIGHT_KNEE,
                JointId::RIGHT_ANKLE,
            ],
        ] {
            for (j, a) in joints.into_iter().zip(legs) {
                p.set_rotation(j, Quat::from_rotation_x(a));
            }
        }
        p.set_rotation(JointId::SPINE1, Quat::from_rotation_x(spine));
        let ankle = skel.joint_positions(&p)[JointId::LEFT_ANKLE.index()].y;
        p.translation.y = skel.rest_position(JointId::LEFT_ANKLE).y - ankle;
        p
    }

    #[test]
    fn a_kinect_avatar_stands_upright_on_the_floor_once_the_sensor_reports_it() {
        let skel = Skeleton::from_proportions(&Proportions::default());
        let (mut sensor, mut state) = (SensorState::default(), InputState::default());
        // the performer steps in crouching a little, feet flat on the floor
        let low = crouch(&skel, [-0.6, 1.2, -0.6], 0.0);
        let pelvis = |p: &Pose| skel.joint_positions(p)[JointId::PELVIS.index()].y;
        let drop = pelvis(&Pose::rest()) - pelvis(&low);
        assert!(drop > 0.1, "the crouch is {drop} m");
        // before the floor: the first frame is the rest height, the tilt leans the avatar
        let first = apply(&skel, &mut sensor, &mut state, &frame(&skel, &low, false));
        let (_, lean) = stance(&skel, &first);
        assert!(lean > 15.0, "{lean}°");
        let standing = apply(
            &skel,
            &mut sensor,
            &mut state,
            &frame(&skel, &Pose::rest(), false),
        );
        let (above, _) = stance(&skel, &standing);
        assert!(
            above > 0.08,
            "standing up lifts the avatar {above} m off the floor"
        );
        // the floor arrives: upright, on the floor, and it stays when frames omit it
        for with_floor in [true, false] {
            let mut json = frame(&skel, &Pose::rest(), true);
            if !with_floor {
                json.as_object_mut().map(|o| o.remove("floorClipPlane"));
            }
            let pose = apply(&skel, &mut sensor, &mut state, &json);
            let (above, lean) = stance(&skel, &pose);
            assert!(above.abs() < 0.01 && lean < 1.0, "{above} m, {lean}°");
            assert!(state.leg.get().is_some() && sensor.floor.is_some());
        }
        // crouching lowers the avatar's pelvis as far as the performer's, feet on the floor
        let pose = apply(&skel, &mut sensor, &mut state, &frame(&skel, &low, true));
        let (above, _) = stance(&skel, &pose);
        let lower = pelvis(&Pose::rest()) - pelvis(&pose);
        assert!(
            (lower - drop).abs() < 0.02 && above.abs() < 0.02,
            "crouching lowers the avatar by {lower} m (the performer {drop} m), ankles {above} m off the floor"
        );
    }

    /// A Kinect v2 body frame's first body as a pose message of the `kinect_v2`
    /// profile (tracked joints: no confidence; inferred ones: 0.4), with its floor.
    fn message(json: &serde_json::Value) -> PoseMessage {
        let joints = json["bodies"][0]["joints"]
            .as_array()
            .expect("joints")
            .iter()
            .map(|j| JointSample {
                name: j["jointType"].as_str().expect("name").into(),
                rotation: None,
                position: Some(
                    ["cameraX", "cameraY", "cameraZ"]
                        .map(|k| j[k].as_f64().expect("number") as f32),
                ),
                confidence: (j["trackingState"] == 1).then_some(0.4),
            })
            .collect();
        let p = json["floorClipPlane"].clone();
        let plane = ["x", "y", "z", "w"].map(|k| p[k].as_f64().expect("number") as f32);
        PoseMessage {
            avatar: "kiosk".into(),
            profile: "kinect_v2".into(),
            timestamp: 0.0,
            root: None,
            joints,
            floor: Some(plane),
        }
    }

    #[test]
    fn a_pose_messages_unusable_floor_is_held_and_named() {
        let skel = Skeleton::from_proportions(&Proportions::default());
        let r = PositionRetargeter::new(&skel);
        let mut msg = message(&frame(&skel, &Pose::rest(), true));
        let plane = msg.floor.expect("a floor");
        let (mut sensor, mut state) = (SensorState::default(), InputState::default());
        let good = apply_pose_message(&msg, &mut sensor, &mut state, &r, None).expect("applies");
        assert!(good.held.is_empty());
        let (above, lean) = stance(&skel, &good.pose);
        assert!(above.abs() < 0.01 && lean < 1.0, "{above} m, {lean}°");
        msg.floor = Some([0.0, f32::NAN, 0.0, 1.0]);
        let held = apply_pose_message(&msg, &mut sensor, &mut state, &r, None).expect("applies");
        assert_eq!(held.held, ["floor"]);
        assert_eq!(sensor.floor, KinectKind::V2.floor(plane).expect("valid"));
    }

    /// VMC models smaller and larger than the avatar squat and step aside: the avatar's
    /// pelvis moves by the model's motion scaled by the legs, so its feet stay on the
    /// floor and its step is as long for its legs (unscaled, the small model's squat
    /// leaves the avatar's feet in the air and the large one's puts them through the
    /// floor).
    #[test]
    fn a_vmc_model_of_another_size_squats_and_steps_on_the_avatars_legs() {
        use crate::mocap::{foot_contact, vmc_packet};
        let skel = Skeleton::from_proportions(&Proportions::default());
        let r = PositionRetargeter::new(&skel);
        for height in [1.5, 2.0] {
            let model = Skeleton::from_proportions(&Proportions {
                height,
                ..Default::default()
            });
            let mut squat = crouch(&model, [-1.1, 1.9, -0.8], 0.3);
            squat.translation.x += 0.4;
            let mut performer = VmcPerformer::default();
            for (t, p) in [(0.0, Pose::rest()), (0.1, squat)] {
                let packet = vmc_packet(&p, &model, t).expect("sends");
                performer.feed(&packet).expect("reads");
            }
            let state = InputState::default();
            let unscaled = foot_contact(&state.calibrated(&performer.pose), &skel);
            assert!(
                unscaled.abs() > 0.03,
                "{height} m: unscaled feet {unscaled} m off the floor"
            );
            let pose = vmc_pose(&performer, &state, &r);
            let contact = foot_contact(&pose, &skel);
            assert!(
                contact.abs() < 0.01,
                "{height} m: feet {contact} m off the floor"
            );
            let scale = r.leg_length() / performer.leg_length().expect("legs sent");
            assert!(
                (pose.translation.x - 0.4 * scale).abs() < 1e-4,
                "{height} m"
            );
        }
    }

    /// A kiosk whose stage is the spot 2.2 m in front of its sensor: a first visitor
    /// who stands 0.5 m beside it and 0.3 m nearer the sensor appears that far from the
    /// world origin, with the floor reported and without (a sensor without its floor
    /// measures along its tilted axis, so less exactly); by default the first visitor is
    /// the origin.
    #[test]
    fn a_kiosks_stage_places_its_first_visitor_where_they_stand() {
        let skel = Skeleton::from_proportions(&Proportions::default());
        let mut aside = Pose::rest();
        aside.translation = Vec3::new(0.5, 0.0, 0.3);
        // the stage is measured to the world origin, the rest pelvis is a little off it
        let beside = aside.translation + skel.rest_position(JointId::PELVIS) * Vec3::Z;
        for floor in [true, false] {
            for (stage, want) in [(2.2, beside), (0.0, Vec3::ZERO)] {
                let mut sensor = SensorState::at_stage(stage);
                let mut state = InputState::default();
                let got = apply(&skel, &mut sensor, &mut state, &frame(&skel, &aside, floor));
                let (dx, dz) = (got.translation.x - want.x, got.translation.z - want.z);
                assert!(
                    dx.abs() < 0.001 && dz.abs() < if floor { 0.001 } else { 0.05 },
                    "floor {floor}, stage {stage} m: off by ({dx}, {dz}) m"
                );
            }
        }
    }

    /// `truth` (a pose of `skel`) sent as MVN sample `k` of `character`, read back
    /// and applied as the server's MVN loop applies it (no filter).
    fn through_mvn(
        skel: &Skeleton,
        truth: &Pose,
        character: u8,
        k: usize,
        sensor: &mut SensorState,
        state: &mut InputState,
    ) -> Pose {
        use crate::mocap::{Floor, MvnDatagram, mvn_datagram, parse_mvn};
        let d = mvn_datagram(truth, skel, character, k as u32, 0).expect("sendable");
        let Ok(MvnDatagram::Sample(sample)) = parse_mvn(&d) else {
            panic!("a sample")
        };
        let r = PositionRetargeter::new(skel);
        apply_joints(
            &sample.joints(),
            Some(Floor::LEVEL),
            sensor,
            state,
            &r,
            None,
            k as f64 / 60.0,
        )
        .expect("applies")
    }

    /// Two Xsens suits of a multi-person capture, streamed by MVN: each avatar stands
    /// where its performer stands around MVN's origin (not each at the origin, as a
    /// Kinect's first visitor would), on the floor, its limbs where the suit puts them;
    /// a crouch, bent forward, keeps the feet on the floor.
    #[test]
    fn xsens_suits_stand_where_they_stand_on_mvns_floor() {
        let skel = Skeleton::from_proportions(&Proportions::default());
        let mut lifted = Pose::rest();
        lifted.set_rotation(JointId::LEFT_SHOULDER, Quat::from_rotation_z(-1.1));
        lifted.set_rotation(JointId::RIGHT_ELBOW, Quat::from_rotation_y(0.9));
        lifted.set_rotation(JointId::PELVIS, Quat::from_rotation_y(0.6));
        let low = crouch(&skel, [-0.6, 1.2, -0.6], 0.3);
        for (character, at) in [
            (0u8, Vec3::new(1.2, 0.0, -0.5)),
            (1, Vec3::new(-0.8, 0.0, 2.0)),
        ] {
            let (mut sensor, mut state) = (SensorState::mvn(), InputState::default());
            for (k, truth) in [Pose::rest(), lifted, low].into_iter().enumerate() {
                let mut truth = truth;
                truth.translation += at;
                let got = through_mvn(&skel, &truth, character, k, &mut sensor, &mut state);
                let (want, have) = (skel.joint_positions(&truth), skel.joint_positions(&got));
                for j in [
                    JointId::PELVIS,
                    JointId::LEFT_WRIST,
                    JointId::RIGHT_WRIST,
                    JointId::LEFT_ANKLE,
                    JointId::RIGHT_KNEE,
                    JointId::HEAD,
                ] {
                    let e = (want[j.index()] - have[j.index()]).length();
                    assert!(
                        e < 0.02,
                        "suit {character}, pose {k}: {} off by {e} m",
                        j.name()
                    );
                }
                let (above, _) = stance(&skel, &got);
                assert!(
                    above.abs() < 0.005,
                    "suit {character}, pose {k}: feet {above} m off the floor"
                );
            }
        }
    }

    /// The walking clip streamed frame by frame through MVN datagrams and the server's
    /// MVN path: the avatar follows the walk, turns included, every joint within 1.5 cm
    /// of the clip's (0.9 cm measured: the pelvis's motion scaled by the legs as
    /// measured). MVN's lumbar point fixes the pelvis's pitch and the spine's bend,
    /// which the hip line and one point up the spine (all a Kinect has) leave open:
    /// without it the neck was 8 cm and the hands 6 cm off.
    #[test]
    fn a_walk_streamed_from_mvn_follows_the_walk() {
        let skel = Skeleton::from_proportions(&Proportions::default());
        let clip = crate::mocap::Clip::from_bvh_text(crate::bake::DEFAULT_CLIP, None, &skel)
            .expect("clip");
        let (mut sensor, mut state) = (SensorState::mvn(), InputState::default());
        let mut worst = 0.0f32;
        for (k, truth) in clip.poses.iter().enumerate() {
            let got = through_mvn(&skel, truth, 0, k, &mut sensor, &mut state);
            let (want, have) = (skel.joint_positions(truth), skel.joint_positions(&got));
            let pelvis = JointId::PELVIS.index();
            // the pelvis's motion is scaled by the legs as measured (within 0.5 %)
            let off = (want[pelvis] - have[pelvis]).length();
            assert!(off < 0.015, "frame {k}: pelvis {off} m from the clip's");
            for j in [
                JointId::LEFT_WRIST,
                JointId::RIGHT_WRIST,
                JointId::LEFT_FOOT,
                JointId::RIGHT_FOOT,
                JointId::HEAD,
                JointId::SPINE2,
                JointId::SPINE3,
                JointId::NECK,
                JointId::LEFT_SHOULDER,
                JointId::LEFT_ELBOW,
                JointId::LEFT_HIP,
            ] {
                worst = worst.max((want[j.index()] - have[j.index()]).length());
            }
        }
        assert!(worst < 0.015, "a joint {worst} m from the clip's");
    }

    /// A kiosk that sees its customer from the knees up: the sensor only infers their
    /// ankles and feet, 12 cm higher than they are, frame after frame (more frames than
    /// the leg estimate's window). The leg length measured while the legs were in view
    /// stays, from body frames and from pose messages alike; the same frames with those
    /// joints tracked do move it.
    #[test]
    fn legs_the_sensor_only_infers_do_not_measure_the_performer() {
        let skel = Skeleton::from_proportions(&Proportions::default());
        let r = PositionRetargeter::new(&skel);
        let seen = frame(&skel, &Pose::rest(), true);
        let cut_off = |state: u64| {
            let mut f = seen.clone();
            for j in f["bodies"][0]["joints"].as_array_mut().expect("joints") {
                let name = j["jointType"].as_str().expect("name");
                if name.starts_with("Ankle") || name.starts_with("Foot") {
                    let y = j["cameraY"].as_f64().expect("number");
                    j["cameraY"] = (y + 0.12).into();
                    j["trackingState"] = state.into();
                }
            }
            f
        };
        for by_message in [false, true] {
            let (mut sensor, mut state) = (SensorState::default(), InputState::default());
            let mut feed = |f: &serde_json::Value, n: usize| {
                for _ in 0..n {
                    if by_message {
                        apply_pose_message(&message(f), &mut sensor, &mut state, &r, None)
                            .expect("applies");
                    } else {
                        apply(&skel, &mut sensor, &mut state, f);
                    }
                }
                state.leg.get()
            };
            let measured = feed(&seen, 3).expect("legs measured");
            assert!(
                (measured / r.leg_length() - 1.0).abs() < 0.01,
                "{measured} m"
            );
            assert_eq!(
                feed(&cut_off(1), 40),
                Some(measured),
                "by message: {by_message}"
            );
            let tracked = feed(&cut_off(2), 40).expect("legs measured");
            assert!(
                tracked < 0.95 * measured,
                "{tracked} m against {measured} m"
            );
        }
    }

    #[test]
    fn performers_side_by_side_stay_side_by_side_and_each_on_the_floor() {
        let skel = Skeleton::from_proportions(&Proportions::default());
        let child = Skeleton::from_proportions(&Proportions {
            height: 1.3,
            shoulder_width: 0.3,
            hip_width: 0.26,
        });
        let r = PositionRetargeter::new(&skel);
        // an adult 0.5 m to the left of the sensor's axis and a child 0.7 m to the right
        // and 0.4 m nearer, in one body frame
        let mut left = Pose::rest();
        left.translation = Vec3::new(0.5, 0.0, 0.0);
        let mut right = Pose::rest();
        right.translation = Vec3::new(-0.7, 0.0, 0.4);
        for floor in [true, false] {
            let bodies = [
                ("1".to_string(), skel.joint_positions(&left)),
                ("2".to_string(), child.joint_positions(&right)),
            ];
            let json = body_frame_json(KinectKind::V2, &bodies, &TILTED, floor);
            let mut sensor = SensorState::default();
            let mut poses = Vec::new();
            for body in parse_body_frame(&json, None).expect("reads") {
                let mut state = InputState::default();
                // a few frames, so that each performer's legs are measured
                let mut pose = Pose::rest();
                for _ in 0..3 {
                    pose = apply_joints(
                        &body.joints,
                        body.floor,
                        &mut sensor,
                        &mut state,
                        &r,
                        None,
                        0.0,
                    )
                    .expect("applies");
                }
                poses.push(pose);
            }
            // the child's place is scaled by the legs (the first performer is the origin)
            let apart = poses[1].translation - poses[0].translation;
            let legs = 1.75 / 1.3;
            let want = Vec3::new(-1.2, 0.0, 0.4) * legs;
            // (without the floor the sensor's tilt, a turn about x, foreshortens depth)
            assert!(
                (apart.x - want.x).abs() < 0.03 && (!floor || (apart.z - want.z).abs() < 0.03),
                "floor {floor}: {apart} apart, want {want}"
            );
            if floor {
                for p in &poses {
                    let (above, lean) = stance(&skel, p);
                    assert!(above.abs() < 0.01 && lean < 1.0, "{above} m, {lean}°");
                }
            }
        }
    }

    /// A deep squat by a performer whose legs are as long as the avatar's but whose
    /// shins are 6 cm shorter (and thighs 6 cm longer): the same joint angles on the
    /// avatar's longer shins would put its feet through the floor; they stand on it, and
    /// the squat stays deep.
    #[test]
    fn a_short_shinned_performers_squat_keeps_the_avatars_feet_on_the_floor() {
        use crate::mocap::foot_contact;
        let skel = Skeleton::from_proportions(&Proportions::default());
        let mut rest = *skel.rest_positions();
        for knee in [JointId::LEFT_KNEE, JointId::RIGHT_KNEE] {
            rest[knee.index()].y -= 0.06;
        }
        let performer = Skeleton::from_rest_positions(rest);
        let squat = crouch(&performer, [-1.3, 2.1, -0.8], 0.4);
        let (mut sensor, mut state) = (SensorState::default(), InputState::default());
        let mut pose = Pose::rest();
        // standing first (the legs are measured), then the squat
        for p in [Pose::rest(), Pose::rest(), squat, squat, squat] {
            let bodies = [("1".to_string(), performer.joint_positions(&p))];
            let json = body_frame_json(KinectKind::V2, &bodies, &TILTED, true);
            pose = apply(&skel, &mut sensor, &mut state, &json);
        }
        let contact = foot_contact(&pose, &skel);
        assert!(contact > -0.001, "a foot {contact} m below the floor");
        let standing = skel.rest_position(JointId::PELVIS).y;
        let pelvis = skel.joint_positions(&pose)[JointId::PELVIS.index()].y;
        assert!(
            standing - pelvis > 0.3,
            "the pelvis {} m below standing",
            standing - pelvis
        );
    }
}
