//! MediaPipe Pose (BlazePose GHUM 3D) world landmarks → observed joints: the camera
//! source of a webcam "magic mirror", where a browser or a Python script runs
//! MediaPipe's pose landmarker on the camera's picture and sends each person's 33
//! world landmarks as a pose message of the `mediapipe` profile. Numbers in,
//! [`KinectJoints`] out; no sockets.
//!
//! World landmarks are metres in the camera's axes (x to the right of the picture, y
//! down it, z away from the camera) with the origin between the hips, each with a
//! visibility in [0, 1]; `left_…` is the performer's own left in an unmirrored
//! picture. They turn into clothcast's world as (x, −y, −z): a rotation, so a
//! performer facing the camera faces +Z with their left at +X. The axes are the
//! camera's: a webcam pitched down leans the performer back, unless the bridge states
//! the floor ([`Landmarks::floor`]). The landmarks carry no position in the room (the
//! hips are always at the origin) and no floor height: the server keeps the avatar on
//! the spot, its lowest foot on the floor.
//!
//! The Kinect path's points are derived from them: the pelvis between the hips, the
//! chest (and the base of the neck) between the shoulders, the mid-spine halfway
//! between those, the head between the ears, the feet along the soles (heel to toe
//! tip, from the ankle); limbs are the landmarks of the same names (the face's and the fingers' landmarks are not used).
//! The position retargeter swings each bone onto them (twist held, the upper arms' and
//! thighs' read from the elbows' and knees' bend), and the ears turn the head.

use glam::Vec3;

use super::kinect::{Floor, KinectJoints, Src};

/// The profile name of MediaPipe pose messages.
pub const MEDIAPIPE_PROFILE: &str = "mediapipe";

/// Landmarks of a MediaPipe pose.
pub const MEDIAPIPE_LANDMARKS: usize = 33;

/// The landmarks' names in MediaPipe's order (its `PoseLandmark` enum, in lower case:
/// landmark `i` of a result is named `MEDIAPIPE_NAMES[i]`).
pub const MEDIAPIPE_NAMES: [&str; MEDIAPIPE_LANDMARKS] = [
    "nose",
    "left_eye_inner",
    "left_eye",
    "left_eye_outer",
    "right_eye_inner",
    "right_eye",
    "right_eye_outer",
    "left_ear",
    "right_ear",
    "mouth_left",
    "mouth_right",
    "left_shoulder",
    "right_shoulder",
    "left_elbow",
    "right_elbow",
    "left_wrist",
    "right_wrist",
    "left_pinky",
    "right_pinky",
    "left_index",
    "right_index",
    "left_thumb",
    "right_thumb",
    "left_hip",
    "right_hip",
    "left_knee",
    "right_knee",
    "left_ankle",
    "right_ankle",
    "left_heel",
    "right_heel",
    "left_foot_index",
    "right_foot_index",
];

// indices of the landmarks used
const L_EAR: usize = 7;
const R_EAR: usize = 8;
const L_SHOULDER: usize = 11;
const R_SHOULDER: usize = 12;
const L_ELBOW: usize = 13;
const R_ELBOW: usize = 14;
const L_WRIST: usize = 15;
const R_WRIST: usize = 16;
const L_HIP: usize = 23;
const R_HIP: usize = 24;
const L_KNEE: usize = 25;
const R_KNEE: usize = 26;
const L_ANKLE: usize = 27;
const R_ANKLE: usize = 28;
const L_HEEL: usize = 29;
const R_HEEL: usize = 30;
const L_TOE: usize = 31;
const R_TOE: usize = 32;

/// Source joints that are one landmark each.
const DIRECT: [(Src, usize); 14] = [
    (Src::EarL, L_EAR),
    (Src::EarR, R_EAR),
    (Src::ShoulderL, L_SHOULDER),
    (Src::ShoulderR, R_SHOULDER),
    (Src::ElbowL, L_ELBOW),
    (Src::ElbowR, R_ELBOW),
    (Src::WristL, L_WRIST),
    (Src::WristR, R_WRIST),
    (Src::HipL, L_HIP),
    (Src::HipR, R_HIP),
    (Src::KneeL, L_KNEE),
    (Src::KneeR, R_KNEE),
    (Src::AnkleL, L_ANKLE),
    (Src::AnkleR, R_ANKLE),
];

/// The feet: ankle, heel and toe tip landmarks.
const FEET: [(Src, usize, usize, usize); 2] = [
    (Src::FootL, L_ANKLE, L_HEEL, L_TOE),
    (Src::FootR, R_ANKLE, R_HEEL, R_TOE),
];

/// Source joints midway between two landmarks.
const BETWEEN: [(Src, usize, usize); 4] = [
    (Src::Pelvis, L_HIP, R_HIP),
    (Src::Chest, L_SHOULDER, R_SHOULDER),
    (Src::Neck, L_SHOULDER, R_SHOULDER),
    (Src::Head, L_EAR, R_EAR),
];

/// One pose's usable landmarks, in clothcast's world frame (metres, the origin between
/// the hips), each tracked or only inferred (a guess: it poses the avatar but measures
/// nothing, as Kinect's inferred joints).
#[derive(Clone, Debug)]
pub struct Landmarks {
    at: [Option<(Vec3, bool)>; MEDIAPIPE_LANDMARKS],
}

impl Default for Landmarks {
    fn default() -> Self {
        Self {
            at: [None; MEDIAPIPE_LANDMARKS],
        }
    }
}

impl Landmarks {
    /// The index of a landmark name ([`MEDIAPIPE_NAMES`]).
    pub fn index(name: &str) -> Option<usize> {
        MEDIAPIPE_NAMES.iter().position(|&n| n == name)
    }

    /// A world landmark (MediaPipe's camera axes, metres) in clothcast's world frame.
    pub fn to_world(p: [f32; 3]) -> Vec3 {
        Vec3::new(p[0], -p[1], -p[2])
    }

    /// The floor a bridge reports for a tilted camera, `[a, b, c, d]` in MediaPipe's
    /// camera axes: `(a, b, c)` the floor's unit normal (a level camera's is
    /// `[0, -1, 0]`; one pitched down by θ: `[0, -cos θ, -sin θ]`), `d` not used (the
    /// landmarks are centred on the hips). It levels the landmarks, as a Kinect's floor
    /// does. `Ok(None)` for the all-zero plane; `Err` names what is wrong with any
    /// other unusable one (not finite, normal not unit, tilted more than 75°).
    pub fn floor(plane: [f32; 4]) -> Result<Option<Floor>, String> {
        if plane == [0.0; 4] {
            return Ok(None);
        }
        Floor::new(Self::to_world([plane[0], plane[1], plane[2]]), 0.0).map(Some)
    }

    /// Sets landmark `i` (world frame, metres), tracked or only `inferred`; refused
    /// (false) unless `i` names a landmark and the position is finite and within 100 m
    /// of the origin.
    pub fn set(&mut self, i: usize, world: Vec3, inferred: bool) -> bool {
        let ok = i < MEDIAPIPE_LANDMARKS && world.is_finite() && world.length() < 100.0;
        if ok {
            self.at[i] = Some((world, inferred));
        }
        ok
    }

    /// Number of landmarks set.
    pub fn count(&self) -> usize {
        self.at.iter().flatten().count()
    }

    /// The Kinect path's observed joints (see the module's introduction); a derived
    /// joint is inferred when one of its landmarks is, and absent when one is missing.
    pub fn joints(&self) -> KinectJoints {
        let mut j = KinectJoints::default();
        for (s, i) in DIRECT {
            if let Some((p, inferred)) = self.at[i] {
                j.put_source(s, p, inferred);
            }
        }
        for (s, a, b) in BETWEEN {
            if let (Some((pa, ia)), Some((pb, ib))) = (self.at[a], self.at[b]) {
                j.put_source(s, (pa + pb) / 2.0, ia || ib);
            }
        }
        // the foot points along the sole: the ankle→toe-tip line runs 30° steeper
        // than the canonical ankle→foot bone (the toe tip is on the floor, the foot
        // joint at the ankle's height), the sole only 15°
        for (s, ankle, heel, toe) in FEET {
            if let (Some((a, ia)), Some((h, ih)), Some((t, it))) =
                (self.at[ankle], self.at[heel], self.at[toe])
            {
                j.put_source(s, a + (t - h), ia || ih || it);
            }
        }
        if let (Some(p), Some(c)) = (j.source(Src::Pelvis), j.source(Src::Chest)) {
            j.put_source(Src::SpineMid, (p.0 + c.0) / 2.0, p.1 || c.1);
        }
        j
    }
}

#[cfg(test)]
mod tests;
