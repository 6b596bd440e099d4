//! A retargeted motion clip: canonical poses at a fixed frame rate.

use super::bvh::{Bvh, BvhError};
use super::profile::{Profile, ProfileError};
use super::retarget::{RetargetError, Retargeter, SourceSkeleton};
use crate::skeleton::{JointId, Pose, Skeleton};

/// Canonical poses sampled at a fixed rate.
#[derive(Clone, Debug)]
pub struct Clip {
    /// One pose per frame.
    pub poses: Vec<Pose>,
    /// Seconds per frame.
    pub frame_time: f32,
    /// Name of the profile used to read it.
    pub profile: String,
    /// What to call the clip where a bake records where its examples came from (a file
    /// name, say); empty unless set with [`Clip::named`].
    pub name: String,
}

/// Why a clip could not be loaded.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum ClipError {
    /// The BVH text is malformed.
    #[error(transparent)]
    Bvh(#[from] BvhError),
    /// No usable profile.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// The profile does not fit the file.
    #[error(transparent)]
    Retarget(#[from] RetargetError),
}

/// A pose's contact height on `target`: the smallest height of an ankle or foot joint
/// above its own rest height, metres (standing flat, on the toes or on the heels, one
/// of them is at rest height; negative: a foot is through the floor y = 0).
pub fn foot_contact(pose: &Pose, target: &Skeleton) -> f32 {
    let at = target.joint_positions(pose);
    [
        JointId::LEFT_ANKLE,
        JointId::RIGHT_ANKLE,
        JointId::LEFT_FOOT,
        JointId::RIGHT_FOOT,
    ]
    .map(|j| at[j.index()].y - target.rest_position(j).y)
    .into_iter()
    .fold(f32::INFINITY, f32::min)
}

/// Lifts `pose` by just enough that no foot of `target` is below the floor y = 0
/// ([`foot_contact`] at least 0); a pose on or above the floor is left as it is.
pub fn stand_on_floor(pose: &mut Pose, target: &Skeleton) {
    let h = foot_contact(pose, target);
    if h < 0.0 {
        pose.translation.y -= h;
    }
}

/// Raises or lowers every pose alike so that the clip stands on the floor (y = 0): the
/// clip is moved so that the median frame's [`foot_contact`] height is zero. A capture's
/// floor need not be the file's y = 0, nor its skeleton's lowest rest point. The
/// median, not the lowest: the body's leg proportions differ from the performer's, so
/// a crouch reaches a few centimetres lower than standing does, and grounding on it
/// would lift every standing frame; and a clip is on the ground most of the time, even
/// a hop. Then each frame whose feet would still go through the floor (that crouch:
/// the same joint angles on the body's shorter shins put its feet 6 cm below the
/// performer's floor in CMU 131_01) is lifted by just enough to stand on it, as the
/// body with its own proportions would stand; no frame is lowered, so a hop stays a hop.
fn ground(poses: &mut [Pose], target: &Skeleton) {
    let contacts: Vec<f32> = poses.iter().map(|p| foot_contact(p, target)).collect();
    let mut heights: Vec<f32> = contacts.iter().copied().filter(|h| h.is_finite()).collect();
    if heights.is_empty() {
        return;
    }
    let mid = heights.len() / 2;
    let (_, &mut median, _) = heights.select_nth_unstable_by(mid, f32::total_cmp);
    for (p, h) in poses.iter_mut().zip(contacts) {
        // lowered by the median, then lifted by whatever is still below the floor
        p.translation.y -= median + (h - median).min(0.0);
    }
}

impl Clip {
    /// Parses BVH text and retargets every frame onto `target` (a profile is detected
    /// from the joint names when `profile` is `None`), standing the clip on the floor
    /// (its median frame's lowest foot contact at y = 0, no foot below it).
    pub fn from_bvh_text(
        text: &str,
        profile: Option<&Profile>,
        target: &Skeleton,
    ) -> Result<Clip, ClipError> {
        let bvh = Bvh::parse(text)?;
        Self::from_bvh(&bvh, profile, target)
    }

    /// Retargets a parsed BVH file onto `target`.
    pub fn from_bvh(
        bvh: &Bvh,
        profile: Option<&Profile>,
        target: &Skeleton,
    ) -> Result<Clip, ClipError> {
        let detected;
        let profile = match profile {
            Some(p) => p,
            None => {
                detected = Profile::detect(&bvh.joint_names())?;
                &detected
            }
        };
        let src = SourceSkeleton::from_bvh(bvh, profile.rest_frame);
        let rt = Retargeter::new(profile, &src)?;
        let root = rt.mapping()[0].unwrap_or(0);
        let mut poses: Vec<Pose> = (0..bvh.frame_count())
            .map(|f| {
                let world = bvh.world(Some(f));
                let g: Vec<_> = world.iter().map(|w| w.0).collect();
                rt.pose(&g, world[root].1, target)
            })
            .collect();
        ground(&mut poses, target);
        Ok(Clip {
            poses,
            frame_time: bvh.frame_time,
            profile: profile.name.clone(),
            name: String::new(),
        })
    }

    /// The clip called `name` (see [`Clip::name`]).
    pub fn named(self, name: impl Into<String>) -> Clip {
        Clip {
            name: name.into(),
            ..self
        }
    }

    /// Duration in seconds.
    pub fn duration(&self) -> f32 {
        self.poses.len() as f32 * self.frame_time
    }

    /// Every `step`-th pose, as a new clip (e.g. 120 fps → 30 fps with `step = 4`).
    pub fn every(&self, step: usize) -> Clip {
        let step = step.max(1);
        Clip {
            poses: self.poses.iter().step_by(step).copied().collect(),
            frame_time: self.frame_time * step as f32,
            profile: self.profile.clone(),
            name: self.name.clone(),
        }
    }
}
