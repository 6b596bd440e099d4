use glam::{Quat, Vec3};

use super::*;
use crate::mocap::{Bvh, Clip};
use crate::skeleton::{JointId, quat_exp};

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/fixtures/mocap/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("fixture")
}

#[test]
fn cmu_clips_retarget_onto_joint_positions_within_a_centimetre() {
    for clip in ["cmu_131_01.bvh", "cmu_131_03.bvh"] {
        let bvh = Bvh::parse(&fixture(clip)).expect("parse");
        let profile = Profile::detect(&bvh.joint_names()).expect("detect");
        assert_eq!(profile.name, "cmu");
        let src = SourceSkeleton::from_bvh(&bvh, None);
        let rt = Retargeter::new(&profile, &src).expect("retarget");
        let fitted = rt.fitted_skeleton().clone();
        let map = *rt.mapping();
        let mut worst = 0.0f32;
        for f in (0..bvh.frame_count()).step_by(7) {
            let world = bvh.world(Some(f));
            let g: Vec<Quat> = world.iter().map(|w| w.0).collect();
            let pose = rt.pose(&g, world[0].1, &fitted);
            let pos = fitted.joint_positions(&pose);
            for c in JointId::all() {
                let s = map[c.index()].expect("cmu maps all 22 joints");
                let want = world[s].1 * profile.scale;
                let e = (pos[c.index()] - want).length();
                worst = worst.max(e);
            }
        }
        assert!(worst < 0.01, "{clip}: worst joint distance {worst} m");
    }
}

#[test]
fn cmu_rest_maps_to_a_t_pose_on_the_default_body() {
    // all channels zero = CMU rest (arms down, legs apart): the corrections turn the
    // canonical skeleton's bones onto those directions, so the retargeted pose of the
    // rest frame has the arms down and the legs apart
    let bvh = Bvh::parse(&fixture("cmu_131_01.bvh")).expect("parse");
    let src = SourceSkeleton::from_bvh(&bvh, None);
    let rt = Retargeter::new(&Profile::builtin("cmu").expect("cmu"), &src).expect("rt");
    let g = src.rest_rotations.clone();
    let skel = Skeleton::default();
    let pose = rt.pose(&g, src.rest_positions[0], &skel);
    let p = skel.joint_positions(&pose);
    let arm = (p[JointId::LEFT_ELBOW.index()] - p[JointId::LEFT_SHOULDER.index()]).normalize();
    assert!(arm.y < -0.9, "CMU rest has the arms down: {arm}");
    let spine = (p[JointId::NECK.index()] - p[JointId::PELVIS.index()]).normalize();
    assert!(spine.y > 0.98, "upright: {spine}");
    // pelvis faces +Z
    assert!((pose.rotations[0] * Vec3::Z).z > 0.98);
}

/// A minimal source with one spine joint, no neck, no collars, no toes: T-pose or A-pose.
fn minimal_bvh(arm_angle_deg: f32, frames: &[[f32; 6]]) -> String {
    let (s, c) = (
        arm_angle_deg.to_radians().sin(),
        arm_angle_deg.to_radians().cos(),
    );
    let arm = |side: f32, len: f32| format!("{:.4} {:.4} 0", side * len * c, -len * s);
    let mut t = String::from(
        "HIERARCHY\nROOT Hips\n{\n OFFSET 0 0 0\n CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation\n",
    );
    t += " JOINT Spine\n {\n  OFFSET 0 10 0\n  CHANNELS 3 Zrotation Xrotation Yrotation\n";
    t += "  JOINT Head\n  {\n   OFFSET 0 35 0\n   CHANNELS 3 Zrotation Xrotation Yrotation\n   End Site\n   {\n    OFFSET 0 20 0\n   }\n  }\n";
    for (side, name) in [(1.0, "Left"), (-1.0, "Right")] {
        t += &format!(
            "  JOINT {name}Arm\n  {{\n   OFFSET {} 30 0\n   CHANNELS 3 Zrotation Xrotation Yrotation\n",
            side * 18.0
        );
        t += &format!(
            "   JOINT {name}ForeArm\n   {{\n    OFFSET {}\n    CHANNELS 3 Zrotation Xrotation Yrotation\n",
            arm(side, 28.0)
        );
        t += &format!(
            "    JOINT {name}Hand\n    {{\n     OFFSET {}\n     CHANNELS 3 Zrotation Xrotation Yrotation\n     End Site\n     {{\n      OFFSET {}\n     }}\n    }}\n   }}\n  }}\n",
            arm(side, 25.0),
            arm(side, 18.0)
        );
    }
    t += " }\n";
    for (side, name) in [(1.0, "Left"), (-1.0, "Right")] {
        t += &format!(
            " JOINT {name}UpLeg\n {{\n  OFFSET {} -8 0\n  CHANNELS 3 Zrotation Xrotation Yrotation\n",
            side * 9.0
        );
        t += &format!(
            "  JOINT {name}Leg\n  {{\n   OFFSET 0 -42 0\n   CHANNELS 3 Zrotation Xrotation Yrotation\n"
        );
        t += "   JOINT LeftFootX\n   {\n    OFFSET 0 -40 0\n    CHANNELS 3 Zrotation Xrotation Yrotation\n    End Site\n    {\n     OFFSET 0 -5 14\n    }\n   }\n  }\n }\n";
        t = t.replace("JOINT LeftFootX", &format!("JOINT {name}Foot"));
    }
    t += "}\nMOTION\n";
    t += &format!("Frames: {}\nFrame Time: 0.033333\n", frames.len());
    let nch = 6 + 3 * 14;
    for fr in frames {
        let mut v = vec![0.0f32; nch];
        v[1] = 95.0;
        // spine: 3..6 → channel slots 6..9 (Z X Y); right arm: Zrotation slot
        v[6] = fr[0];
        v[7] = fr[1];
        v[8] = fr[2];
        // left arm joint is the 3rd joint (after Hips, Spine, Head): slots 12..15
        v[12] = fr[3];
        v[13] = fr[4];
        v[14] = fr[5];
        t += &v
            .iter()
            .map(|x| format!("{x:.3}"))
            .collect::<Vec<_>>()
            .join(" ");
        t += "\n";
    }
    t
}

#[test]
fn skeleton_with_missing_joints_retargets_and_a_pose_matches_t_pose() {
    let profile = Profile::from_toml(
        "name = 'mini'\nscale = 0.01\n[joints]\npelvis = 'Hips'\nspine1 = 'Spine'\nhead = 'Head'\nleft_shoulder = 'LeftArm'\nright_shoulder = 'RightArm'\nleft_elbow = 'LeftForeArm'\nright_elbow = 'RightForeArm'\nleft_wrist = 'LeftHand'\nright_wrist = 'RightHand'\nleft_hip = 'LeftUpLeg'\nright_hip = 'RightUpLeg'\nleft_knee = 'LeftLeg'\nright_knee = 'RightLeg'\nleft_ankle = 'LeftFoot'\nright_ankle = 'RightFoot'\n[[share]]\nchain = ['spine1', 'spine2', 'spine3']\n",
    )
    .expect("profile");
    // the left arm raised 30° in the source's own frame (Zrotation of LeftArm), spine bent 30° forward
    let frames = [
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        [0.0, 30.0, 0.0, 30.0, 0.0, 0.0],
    ];
    let skel = Skeleton::default();
    let t_clip = Clip::from_bvh_text(&minimal_bvh(0.0, &frames), Some(&profile), &skel)
        .expect("T-pose source");
    let a_clip = Clip::from_bvh_text(&minimal_bvh(45.0, &frames), Some(&profile), &skel)
        .expect("A-pose source");
    // T-pose source at rest → canonical rest (within the small differences of bone
    // direction between the two skeletons' proportions)
    for j in JointId::all() {
        let angle = crate::skeleton::quat_log(t_clip.poses[0].rotation(j))
            .length()
            .to_degrees();
        assert!(angle < 6.0, "{j}: {angle}°");
    }
    // A-pose source at rest → arms 45° down
    let p = skel.joint_positions(&a_clip.poses[0]);
    let arm = (p[JointId::LEFT_ELBOW.index()] - p[JointId::LEFT_SHOULDER.index()]).normalize();
    assert!((arm.y + 45f32.to_radians().sin()).abs() < 0.02, "{arm}");
    // the same source motion gives the same world-space rotation change of the arm
    // bone whichever rest the source had (retargeting preserves world deltas)
    let delta = |clip: &Clip| {
        let w0 = skel.world_frames(&clip.poses[0])[JointId::LEFT_SHOULDER.index()].rot;
        let w1 = skel.world_frames(&clip.poses[1])[JointId::LEFT_SHOULDER.index()].rot;
        w1 * w0.conjugate()
    };
    let (dt, da) = (delta(&t_clip), delta(&a_clip));
    assert!(
        dt.abs_diff_eq(da, 1e-3) || dt.abs_diff_eq(-da, 1e-3),
        "{dt} vs {da}"
    );
    let expect =
        Quat::from_rotation_x(30f32.to_radians()) * Quat::from_rotation_z(30f32.to_radians());
    assert!(
        dt.abs_diff_eq(expect, 1e-3) || dt.abs_diff_eq(-expect, 1e-3),
        "{dt} vs {expect}"
    );
    for clip in [&t_clip, &a_clip] {
        // the spine bend is shared over the three canonical spine joints
        let s = clip.poses[1].rotation(JointId::SPINE1);
        let s2 = clip.poses[1].rotation(JointId::SPINE2);
        assert!(s.abs_diff_eq(s2, 1e-4), "spine shared: {s} vs {s2}");
        assert!(crate::skeleton::quat_log(s).length() > 5f32.to_radians());
        // the unmapped neck and collars are held at rest
        assert!(
            clip.poses[1]
                .rotation(JointId::NECK)
                .abs_diff_eq(Quat::IDENTITY, 1e-4)
        );
    }
    let _ = quat_exp(Vec3::ZERO);
}

/// Per frame of `clip` on `skel`: the lowest height of an ankle or foot joint above
/// its rest height (0: standing on the floor), and the horizontal speed (m/s) of every
/// foot joint within 1 cm of the floor on its way to the next frame.
fn contact_and_slide(clip: &Clip, skel: &Skeleton) -> (Vec<f32>, Vec<f32>) {
    let feet = [
        JointId::LEFT_ANKLE,
        JointId::RIGHT_ANKLE,
        JointId::LEFT_FOOT,
        JointId::RIGHT_FOOT,
    ];
    let at: Vec<_> = clip.poses.iter().map(|p| skel.joint_positions(p)).collect();
    let height = |f: usize, j: JointId| at[f][j.index()].y - skel.rest_position(j).y;
    let contact = (0..at.len())
        .map(|f| {
            feet.iter()
                .map(|&j| height(f, j))
                .fold(f32::INFINITY, f32::min)
        })
        .collect();
    let mut slide = Vec::new();
    for f in 1..at.len() {
        for j in feet {
            if height(f - 1, j) < 0.01 {
                let d = at[f][j.index()] - at[f - 1][j.index()];
                slide.push(d.x.hypot(d.z) / clip.frame_time);
            }
        }
    }
    (contact, slide)
}

#[test]
fn retargeted_cmu_clips_stand_on_the_floor_and_planted_feet_barely_slide() {
    let skel = Skeleton::default();
    for (name, standing) in [("cmu_131_01.bvh", 0..240), ("cmu_131_03.bvh", 0..120)] {
        let clip = Clip::from_bvh_text(&fixture(name), None, &skel).expect("clip");
        let (contact, mut slide) = contact_and_slide(&clip, &skel);
        // the performer stands still for the first seconds: on the floor, not above
        // it (the legs-apart CMU rest made it 11-14 cm) nor in it
        for f in standing {
            assert!(
                contact[f].abs() < 0.02,
                "{name} frame {f}: feet {} m off the floor",
                contact[f]
            );
        }
        // a foot on the floor stays where it is (up to the differences between the
        // performer's leg proportions and the body's): root motion scaled by the
        // legs-apart rest height made it slide 25 % faster
        slide.sort_by(f32::total_cmp);
        let median = slide[slide.len() / 2];
        assert!(
            median < 0.12,
            "{name}: planted feet slide at {median} m/s (median)"
        );
    }
}

#[test]
fn cmu_legs_are_measured_straight_not_as_they_stand_apart_at_rest() {
    let bvh = Bvh::parse(&fixture("cmu_131_01.bvh")).expect("parse");
    let src = SourceSkeleton::from_bvh(&bvh, None);
    let rt = Retargeter::new(&Profile::builtin("cmu").expect("cmu"), &src).expect("rt");
    // pelvis to hip 1.64, thigh 7.29, shin 6.93, ankle above the toe tip 0.41 (file
    // units, 0.056444 m each); the rest pose's legs-apart extent is only 15.41
    let want = (1.64 + 7.29 + 6.93 + 0.41) * 0.056444;
    assert!(
        (rt.source_pelvis_height - want).abs() < 0.005,
        "{} m against {want} m",
        rt.source_pelvis_height
    );
}

/// The body's shins are shorter than CMU 131's performer's, so the same joint angles in
/// 131_01's crouch put its feet up to 6 cm through the floor (and 131_03's walk 2 cm);
/// such frames are lifted onto the floor, and the crouch is still a crouch.
#[test]
fn no_foot_goes_through_the_floor_and_a_crouch_stays_deep() {
    let skel = Skeleton::default();
    for (name, least_drop) in [("cmu_131_01.bvh", 0.35), ("cmu_131_03.bvh", 0.1)] {
        let clip = Clip::from_bvh_text(&fixture(name), None, &skel).expect("clip");
        let (contact, _) = contact_and_slide(&clip, &skel);
        for (f, c) in contact.iter().enumerate() {
            assert!(
                *c > -0.001,
                "{name} frame {f}: a foot {c} m below the floor"
            );
        }
        let pelvis: Vec<f32> = clip
            .poses
            .iter()
            .map(|p| skel.joint_positions(p)[JointId::PELVIS.index()].y)
            .collect();
        let lowest = pelvis.iter().copied().fold(f32::INFINITY, f32::min);
        assert!(
            pelvis[0] - lowest > least_drop,
            "{name}: the pelvis drops only {} m below standing",
            pelvis[0] - lowest
        );
    }
}

/// CMU's hanging arms are turned about themselves in the file's rest pose; the profile's
/// `[correction]` turns them back (see `mocap::hinge_fit`, whose test holds the
/// correction to the clips), so the clips' elbows stay inside the elbow's limit. Without
/// it they bend sideways by up to 28°, where the limit allows 5°.
#[test]
fn cmu_elbows_stay_inside_their_limits() {
    use crate::skeleton::{joint_limit, quat_log};
    let skel = Skeleton::default();
    for name in ["cmu_131_01.bvh", "cmu_131_03.bvh"] {
        let clip = Clip::from_bvh_text(&fixture(name), None, &skel).expect("clip");
        for j in [JointId::LEFT_ELBOW, JointId::RIGHT_ELBOW] {
            let outside = clip
                .poses
                .iter()
                .filter(|p| !joint_limit(j).contains(quat_log(p.rotation(j)), 2f32.to_radians()))
                .count();
            assert_eq!(
                outside, 0,
                "{name} {j:?}: {outside} frames outside the elbow's limit"
            );
        }
    }
}
