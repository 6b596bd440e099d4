use super::*;
use crate::skeleton::{JointId, quat_exp};
use crate::sor::local::NO_BONE;
use crate::sor::{BoneMotion, tau_matrix};

/// The small golden database of `tests/fixtures`.
fn small_db() -> Database {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/db/v1/small.ccdb");
    Database::read(&path).expect("golden database")
}

/// Whether this CPU runs the AVX2 + FMA code. The tests of it have nothing to compare
/// elsewhere and say so on stderr (the SSE2 code is tested everywhere).
#[cfg(target_arch = "x86_64")]
fn cpu_is_wide() -> bool {
    let wide =
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma");
    if !wide {
        eprintln!("skipped: this CPU lacks AVX2 + FMA, so the AVX2 synthesis does not run here");
    }
    wide
}

/// SOR Eq. 1–2 evaluated the way the paper writes them: every example skinned to
/// the input pose with its own bone motions, then blended.
fn per_example(
    synth: &Synthesizer<'_>,
    v: usize,
    examples: &[(usize, f32)],
    input: &[Rigid; JOINT_COUNT],
) -> Vec3A {
    let db = synth.database();
    let (joints, weights) = (db.garment.skin.joints[v], db.garment.skin.weights[v]);
    let mut out = Vec3A::ZERO;
    for &(j, w) in examples {
        let ex = &db.examples[j];
        let m = BoneMotion::new(&synth.skeleton().world_frames(&ex.pose), input);
        let (yj, alpha) = (Vec3A::from(ex.positions[v]), ex.alpha[v]);
        let mut y = Vec3A::ZERO;
        let mut tbar = Vec3A::ZERO;
        for q in 0..4 {
            if weights[q] > 0.0 {
                let b = joints[q] as usize;
                y += m.apply(b, yj) * (weights[q] * (1.0 - alpha));
                tbar += m.translation(b) * weights[q];
            }
        }
        y += m.apply(ex.remote_bone[v] as usize, yj) * alpha;
        let tau = tau_matrix(&ex.translation[v]);
        y += m.rot[joints[0] as usize] * Vec3A::from(tau * Vec3::from(tbar));
        out += y * w;
    }
    out
}

#[test]
fn bone_local_blend_equals_per_example_skinning() {
    let db = small_db();
    let synth = Synthesizer::new(&db, SynthParams::default());
    let mut pose = db.examples[1].pose;
    pose.set_rotation(JointId::LEFT_SHOULDER, quat_exp(Vec3::new(0.3, -0.2, -0.7)));
    pose.set_rotation(JointId::SPINE2, quat_exp(Vec3::new(0.1, 0.25, 0.05)));
    let input = synth.skeleton().world_frames(&pose);
    let rot: [Mat3A; JOINT_COUNT + 1] = std::array::from_fn(|b| {
        input
            .get(b)
            .map_or(Mat3A::ZERO, |f| Mat3A::from_quat(f.rot))
    });
    let pos: [Vec3A; JOINT_COUNT + 1] =
        std::array::from_fn(|b| input.get(b).map_or(Vec3A::ZERO, |f| Vec3A::from(f.trans)));
    let ne = db.examples.len();
    // weights that differ per example, and every example's α/remote bone in play
    let examples: Vec<(usize, f32)> = (0..ne).map(|j| (j, (j + 1) as f32)).collect();
    let total: f32 = examples.iter().map(|e| e.1).sum();
    let examples: Vec<(usize, f32)> = examples.iter().map(|&(j, w)| (j, w / total)).collect();
    let slots: Vec<(u32, f32)> = examples.iter().map(|&(j, w)| (j as u32, w)).collect();
    #[cfg(target_arch = "x86_64")]
    let wide = cpu_is_wide();
    let (mut worst, mut worst_wide, mut moved) = (0f32, 0f32, 0f32);
    for (i, &v) in synth.order.iter().enumerate() {
        let v = v as usize;
        let skin = (db.garment.skin.joints[v], db.garment.skin.weights[v]);
        let sums = synth.sums(i, &slots, (&rot, &pos));
        let fast = blend_sums(&sums, skin, (&rot, &pos));
        let slow = per_example(&synth, v, &examples, &input);
        worst = worst.max((fast - slow).length());
        #[cfg(target_arch = "x86_64")]
        if wide {
            // SAFETY: the CPU has AVX2 and FMA (checked above)
            let sums = unsafe { super::wide::sums(&synth.local, i, &slots, (&rot, &pos)) };
            let fast = blend_sums(&sums, skin, (&rot, &pos));
            worst_wide = worst_wide.max((fast - slow).length());
        }
        moved = moved.max((slow - Vec3A::from(db.examples[0].positions[v])).length());
    }
    assert!(
        moved > 0.05,
        "the test pose should move the garment ({moved} m)"
    );
    assert!(worst < 1e-5, "reordered blend differs by {worst} m");
    assert!(worst_wide < 1e-5, "AVX2 blend differs by {worst_wide} m");
    // both kinds of remote bone are exercised: folded into a skin bone, and apart
    let (mut folded, mut apart) = (0, 0);
    for (j, ex) in db.examples.iter().enumerate() {
        for (i, &v) in synth.order.iter().enumerate() {
            if ex.alpha[v as usize] > 0.0 {
                if synth.local.get(j, i).remote_bone == NO_BONE {
                    folded += 1;
                } else {
                    apart += 1;
                }
            }
        }
    }
    assert!(folded > 0 && apart > 0, "folded {folded}, apart {apart}");
}

/// `skin_example` is SOR Eq. 1 of one example: the per-example skinning above at
/// another pose, and the example itself at its own pose (in any world placement).
#[test]
fn skinning_one_example_moves_it_by_its_own_rig() {
    let db = small_db();
    let synth = Synthesizer::new(&db, SynthParams::default());
    let n = db.vertex_count();
    let mut out = vec![Vec3::ZERO; n];
    let mut pose = db.examples[2].pose;
    pose.set_rotation(JointId::RIGHT_ELBOW, quat_exp(Vec3::new(0.0, 0.6, 0.2)));
    let input = synth.skeleton().world_frames(&pose);
    for j in [0, 3] {
        synth.skin_example(j, &pose, &mut out);
        let worst = (0..n)
            .map(|v| (Vec3A::from(out[v]) - per_example(&synth, v, &[(j, 1.0)], &input)).length())
            .fold(0.0, f32::max);
        assert!(worst < 1e-5, "example {j}: {worst} m from Eq. 1");
    }
    for (j, ex) in db.examples.iter().enumerate() {
        let mut placed = ex.pose;
        placed.translation += Vec3::new(0.4, 0.0, -1.2);
        synth.skin_example(j, &placed, &mut out);
        let worst = out
            .iter()
            .zip(&ex.positions)
            .map(|(a, b)| (*a - *b).length())
            .fold(0.0, f32::max);
        assert!(worst < 1e-4, "example {j} at its own pose moved {worst} m");
    }
}

/// The AVX2 + FMA vertex loop and the SSE2 one synthesise the same garment (up to
/// rounding) for poses between the examples.
#[test]
fn wide_and_narrow_vertex_loops_agree() {
    let db = small_db();
    let narrow = Synthesizer::new(
        &db,
        SynthParams {
            wide: false,
            ..SynthParams::default()
        },
    );
    let wide = Synthesizer::new(&db, SynthParams::default());
    let n = db.vertex_count();
    let (mut a, mut b) = (vec![Vec3::ZERO; n], vec![Vec3::ZERO; n]);
    for j in 0..db.examples.len() - 1 {
        let pose = db.examples[j].pose.slerp(&db.examples[j + 1].pose, 0.4);
        let mut scratch = Scratch::default();
        narrow.synthesize(&mut AvatarState::new(), &mut scratch, &pose, 0.0, &mut a);
        wide.synthesize(&mut AvatarState::new(), &mut scratch, &pose, 0.0, &mut b);
        let worst = a
            .iter()
            .zip(&b)
            .map(|(a, b)| (*a - *b).length())
            .fold(0.0, f32::max);
        assert!(worst < 1e-5, "pose {j}: the loops differ by {worst} m");
    }
}

/// The AVX2 body posing equals LBS with normals ([`LbsMatrices::apply_with_normal`])
/// up to rounding, on every body vertex.
#[cfg(target_arch = "x86_64")]
#[test]
fn wide_body_posing_is_lbs() {
    if !cpu_is_wide() {
        return;
    }
    let db = small_db();
    let synth = Synthesizer::new(&db, SynthParams::default());
    let mut pose = db.examples[2].pose;
    pose.set_rotation(JointId::LEFT_SHOULDER, quat_exp(Vec3::new(0.3, -0.2, -0.7)));
    let t = synth.skeleton().skinning_transforms(&pose);
    let bones = t.map(|r| {
        let m = Mat3A::from_quat(r.rot);
        super::wide::BoneLanes(
            [m.x_axis, m.y_axis, m.z_axis, Vec3A::from(r.trans)].map(|c| c.extend(0.0)),
        )
    });
    let n = db.body.positions.len();
    let all: Vec<u32> = (0..n as u32).collect();
    let mut out = vec![[Vec3A::ZERO; 2]; n];
    // SAFETY: the CPU has AVX2 and FMA (checked above)
    unsafe {
        super::wide::pose_body(
            &bones,
            (&db.body.positions, &synth.body_normals, &db.body.skin),
            &all,
            &mut out,
        );
    }
    let lbs = LbsMatrices::new(&t);
    let skin = &db.body.skin;
    let (mut dp, mut dn, mut moved) = (0f32, 0f32, 0f32);
    for b in 0..n {
        let (p, q) = lbs.apply_with_normal(
            db.body.positions[b],
            synth.body_normals[b],
            &skin.joints[b],
            &skin.weights[b],
        );
        dp = dp.max((Vec3A::from(p) - out[b][0]).length());
        dn = dn.max((Vec3A::from(q) - out[b][1]).length());
        moved = moved.max((p - db.body.positions[b]).length());
    }
    assert!(moved > 0.1, "the pose should move the body ({moved} m)");
    assert!(
        dp < 1e-5 && dn < 1e-5,
        "positions {dp} m, normals {dn} apart"
    );
}

/// The 8-wide distances equal the scalar ones (Θ, then SOR Eq. 9) up to rounding,
/// over several groups of eight examples and a partial last group.
#[cfg(target_arch = "x86_64")]
#[test]
fn wide_distances_are_the_scalar_ones() {
    if !cpu_is_wide() {
        return;
    }
    let mut db = small_db();
    // 19 examples: the fixture's four, turned a little further each time, so that
    // rotations beyond 90° from the input (the shorter-arc flip, the steep arctangent
    // branch) occur
    let base = db.examples.clone();
    db.examples = (0..19)
        .map(|i| {
            let mut e = base[i % base.len()].clone();
            let turn = quat_exp(Vec3::new(0.4 * i as f32, -0.3, 0.2 * i as f32));
            e.pose.set_rotation(JointId::LEFT_SHOULDER, turn);
            e.pose.set_rotation(JointId::RIGHT_KNEE, turn.conjugate());
            e
        })
        .collect();
    let ex8 = super::wide::Examples8::new(&db, &distance_weights(&db, Distance::PerExample, 0.0));
    let g = db.region_count();
    let mut pose = base[1].pose;
    pose.set_rotation(JointId::SPINE2, quat_exp(Vec3::new(0.1, 0.25, 0.05)));
    let mut wide = vec![0.0; g * db.examples.len()];
    // SAFETY: the CPU has AVX2 and FMA (checked above)
    unsafe { ex8.distances(&pose, &mut wide) };
    let mut th = [0.0; DOF_COUNT];
    for (j, ex) in db.examples.iter().enumerate() {
        theta_into(&ex.pose, &pose, &mut th);
        for r in 0..g {
            let u = &ex.distance_weights[r * DOF_COUNT..(r + 1) * DOF_COUNT];
            let d: f64 = u.iter().zip(&th).map(|(u, t)| f64::from(u * t * t)).sum();
            let w = wide[r * db.examples.len() + j];
            assert!(d > 0.0, "example {j} region {r}: zero distance");
            assert!(
                (w - d).abs() <= 1e-5 * d,
                "example {j} region {r}: {w} vs {d}"
            );
        }
    }
}

/// Pooled distance weights are the examples' mean U, the same for every example;
/// per-example ones are each example's own; pooled with an own share s, the mix
/// (1 − s) mean + s own. All synthesise each example at its own pose (the distance is
/// zero there whichever U).
#[test]
fn pooled_distance_weights_are_the_examples_mean() {
    let db = small_db();
    let (ne, len) = (db.examples.len(), db.region_count() * DOF_COUNT);
    let own = distance_weights(&db, Distance::PerExample, 0.25);
    let pooled = distance_weights(&db, Distance::Pooled, 0.0);
    let mixed = distance_weights(&db, Distance::Pooled, 0.25);
    assert_eq!(own, distance_weights(&db, Distance::PerExample, 0.0));
    assert_eq!(own, distance_weights(&db, Distance::Pooled, 1.0));
    assert_eq!((own.len(), pooled.len()), (ne * len, ne * len));
    for (j, e) in db.examples.iter().enumerate() {
        assert_eq!(&own[j * len..(j + 1) * len], &e.distance_weights[..]);
    }
    let mut differ = 0;
    for i in 0..len {
        let mean = db
            .examples
            .iter()
            .map(|e| f64::from(e.distance_weights[i]))
            .sum::<f64>()
            / ne as f64;
        for j in 0..ne {
            let p = f64::from(pooled[j * len + i]);
            assert!(
                (p - mean).abs() <= 1e-6 * mean.abs().max(1e-12),
                "{p} vs {mean}"
            );
            differ += usize::from(own[j * len + i] != pooled[j * len + i]);
            let m = f64::from(mixed[j * len + i]);
            let want = 0.75 * mean + 0.25 * f64::from(own[j * len + i]);
            assert!(
                (m - want).abs() <= 1e-6 * want.abs().max(1e-12),
                "{m} vs {want}"
            );
        }
    }
    assert!(differ > 0, "the fixture's examples should have different U");
    for (distance, own_share) in [
        (Distance::PerExample, 0.0),
        (Distance::Pooled, 0.0),
        (Distance::Pooled, 0.25),
    ] {
        let params = SynthParams {
            distance,
            own_share,
            resolve_penetration: false,
            ..SynthParams::default()
        };
        let synth = Synthesizer::new(&db, params);
        let mut out = vec![Vec3::ZERO; db.vertex_count()];
        for e in &db.examples {
            synth.synthesize(
                &mut AvatarState::new(),
                &mut Scratch::default(),
                &e.pose,
                0.0,
                &mut out,
            );
            let worst = out
                .iter()
                .zip(&e.positions)
                .map(|(a, b)| (*a - *b).length())
                .fold(0.0, f32::max);
            assert!(worst < 1e-4, "{distance:?}: {worst} m from the example");
        }
    }
}
