//! A retargeted motion clip: canonical poses at a fixed frame rate.

use super::bvh::{Bvh, BvhError};
use super::profile::{Profile, ProfileError};
use super::retarget::{RetargetError, Retargeter, SourceSkeleton};
use crate::skeleton::{Pose, Skeleton};

/// Canonical poses sampled at a fixed rate.
#[derive(Clone, Debug)]
pub struct Clip {
    /// One pose per frame.
    pub poses: Vec<Pose>,
    /// Seconds per frame.
    pub frame_time: f32,
    /// Name of the profile used to read it.
    pub profile: String,
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

impl Clip {
    /// Parses BVH text and retargets every frame onto `target` (a profile is detected
    /// from the joint names when `profile` is `None`).
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
                let names: Vec<&str> = bvh.joints.iter().map(|j| j.name.as_str()).collect();
                detected = Profile::detect(&names)?;
                &detected
            }
        };
        let src = SourceSkeleton::from_bvh(bvh, profile.rest_frame);
        let rt = Retargeter::new(profile, &src)?;
        let root = rt.mapping()[0].unwrap_or(0);
        let poses = (0..bvh.frame_count())
            .map(|f| {
                let world = bvh.world(Some(f));
                let g: Vec<_> = world.iter().map(|w| w.0).collect();
                rt.pose(&g, world[root].1, target)
            })
            .collect();
        Ok(Clip {
            poses,
            frame_time: bvh.frame_time,
            profile: profile.name.clone(),
        })
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
        }
    }
}
