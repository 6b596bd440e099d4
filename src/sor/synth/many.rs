//! Many avatars at once: one synthesis job per avatar, on rayon, each worker thread
//! with its own scratch kept between calls.

use glam::Vec3;
use rayon::prelude::*;

use super::{AvatarState, Scratch, SynthFrame, Synthesizer};
use crate::skeleton::Pose;

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}

/// One avatar's synthesis job for [`synthesize_all`].
pub struct AvatarJob<'a> {
    /// The avatar's damping state.
    pub state: &'a mut AvatarState,
    /// Its pose this frame.
    pub pose: Pose,
    /// Seconds since its previous frame.
    pub dt: f32,
    /// Output positions (canonical frame).
    pub out: &'a mut [Vec3],
    /// Filled with the frame's info.
    pub frame: Option<SynthFrame>,
}

/// Synthesises many avatars sharing one database, in parallel (rayon; one scratch per
/// worker thread, kept between calls). Results are identical to calling
/// [`Synthesizer::synthesize`] serially. A job whose synthesis panics (a bug) is left
/// with `frame: None` (its state and output unspecified); the other jobs complete.
pub fn synthesize_all(synth: &Synthesizer<'_>, jobs: &mut [AvatarJob<'_>]) {
    jobs.par_iter_mut()
        .for_each(|job| synthesize_job(synth, job));
}

/// One job of [`synthesize_all`], on the calling thread with its scratch (kept between
/// calls): for callers that run each avatar's synthesis inside their own parallel loop.
pub fn synthesize_job(synth: &Synthesizer<'_>, job: &mut AvatarJob<'_>) {
    job.frame = None;
    SCRATCH.with(|s| {
        // the scratch is plain reusable buffers: whatever a panic left in them is
        // overwritten by the next frame
        let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut s = s.borrow_mut();
            synth.synthesize(job.state, &mut s, &job.pose, job.dt, job.out)
        }));
        job.frame = done.ok();
    });
}
