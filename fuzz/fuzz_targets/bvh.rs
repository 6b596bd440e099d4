//! Fuzzes what a BVH file given to `play`, `eval` or `bake` goes through: the parser,
//! profile detection and retargeting onto the default skeleton. Nothing may panic, and
//! every pose of a clip that parses must be a valid pose (finite, unit rotations).
//! Run (nightly + cargo-fuzz): `scripts/fuzz.sh 300 bvh`.
#![no_main]

use clothcast::mocap::{Clip, Profile};
use clothcast::skeleton::Skeleton;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let target = Skeleton::default();
    let cmu = Profile::builtin("cmu").expect("built-in profile");
    for profile in [None, Some(&cmu)] {
        if let Ok(clip) = Clip::from_bvh_text(text, profile, &target) {
            assert!(clip.frame_time.is_finite() && clip.frame_time > 0.0, "frame time {}", clip.frame_time);
            for pose in &clip.poses {
                let mut checked = *pose;
                assert!(checked.validate().is_ok(), "a retargeted pose is valid: {pose:?}");
            }
        }
    }
});
