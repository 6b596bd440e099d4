//! SOR rig, database and runtime tests on a small real bake.

use std::sync::OnceLock;

use glam::{DVec3, Vec3};

use super::*;
use crate::bake::{BakeConfig, Baker, Rng, Shard};
use crate::body::{Body, BodyOptions, BodyShape, SkinningMethod};
use crate::garment::{Garment, GarmentConfig};
use crate::mesh::TriMesh;
use crate::sim::{SimParams, Simulator};
use crate::skeleton::{DOF_COUNT, JointId, Pose, quat_exp};

struct Fixture {
    body: Body,
    garment: Garment,
    db: Database,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let body = Body::generate(
            &BodyShape::default(),
            &BodyOptions {
                target_vertices: 2000,
            },
        )
        .expect("body");
        let mut cfg = GarmentConfig::builtin("tshirt").expect("cfg");
        cfg.target_vertices = 900;
        let garment = Garment::generate(&body, &cfg).expect("garment");
        let baker = Baker::new(
            &body,
            &garment,
            BakeConfig {
                examples: 4,
                limit_samples: 60,
                ..BakeConfig::default()
            },
        )
        .expect("baker");
        let db = baker
            .bake_kmeans(&[walk(&body)], None, Shard::ALL, &|_, _| {})
            .expect("bake");
        Fixture { body, garment, db }
    })
}

/// The fixture's clip: the built-in walk, every 20th frame, named `walk.bvh`.
fn walk(body: &Body) -> crate::mocap::Clip {
    crate::mocap::Clip::from_bvh_text(crate::bake::DEFAULT_CLIP, None, &body.skeleton)
        .expect("clip")
        .named("walk.bvh")
        .every(20)
}

#[test]
fn optimised_remote_bones_fit_the_sensitivities_better() {
    let f = fixture();
    let mut sim = Simulator::new(&f.body, &f.garment, &SimParams::default()).expect("sim");
    let mut pose = Pose::rest();
    pose.set_rotation(JointId::LEFT_SHOULDER, quat_exp(Vec3::new(0.0, 0.0, -0.6)));
    pose.set_rotation(JointId::SPINE2, quat_exp(Vec3::new(0.15, 0.2, 0.0)));
    let eq = sim.drape(&pose).expect("drape");
    let sens = sim.sensitivity(&eq).expect("sensitivity");
    let body_pos = f.body.posed_positions(&pose, SkinningMethod::Lbs);
    let body_nrm = TriMesh::new(body_pos.clone(), f.body.mesh.triangles.clone()).vertex_normals();
    let input = GarmentRigInput {
        skin: &f.garment.skin,
        region_weights: &f.garment.region_weights,
        regions: f.garment.regions.len(),
    };
    let (ex, report) = fit_example(
        &f.body.skeleton,
        &pose,
        &eq.positions_f32(),
        &sens.values,
        &input,
        PosedBody {
            positions: &body_pos,
            normals: &body_nrm,
        },
        &RigParams::default(),
    )
    .expect("rig");
    let n = f.garment.vertex_count();
    // ρ with the optimised remote bone and α never exceeds ρ with α = 0 …
    assert!(
        report
            .rho_optimised
            .iter()
            .zip(&report.rho_naive)
            .all(|(o, n)| *o <= *n * (1.0 + 1e-9))
    );
    // … and is strictly smaller (by more than 1 %) on a large share of the vertices
    let better = report
        .rho_optimised
        .iter()
        .zip(&report.rho_naive)
        .filter(|(o, n)| **o < 0.99 * **n)
        .count();
    eprintln!(
        "ρ improved by > 1 % on {better} of {n} vertices; total {:.3e} → {:.3e}",
        report.rho_naive.iter().sum::<f64>(),
        report.rho_optimised.iter().sum::<f64>()
    );
    assert!(better * 2 > n, "only {better} of {n} vertices improved");
    // translation weights reduce the prediction residual on held-out perturbations:
    // random joint-angle directions (not the 66 unit ones they were fitted on)
    let d = PoseDerivatives::new(&f.body.skeleton, &pose);
    let mut rng = Rng::new(5);
    let (mut with, mut without) = (0.0f64, 0.0f64);
    for _ in 0..20 {
        let dir: Vec<f32> = (0..DOF_COUNT).map(|_| rng.normal()).collect();
        for v in 0..n {
            let y = ex.positions[v];
            let (joints, weights) = (f.garment.skin.joints[v], f.garment.skin.weights[v]);
            let (mut truth, mut rot, mut tr) = (Vec3::ZERO, Vec3::ZERO, Vec3::ZERO);
            for m in 0..DOF_COUNT {
                truth += sens.values[m][v].as_vec3() * dir[m];
                let mut a = Vec3::ZERO;
                let mut t = Vec3::ZERO;
                for k in 0..4 {
                    if weights[k] > 0.0 {
                        a += d.point_velocity(joints[k] as usize, m, y) * weights[k];
                        t += d.joint_velocity(joints[k] as usize, m) * weights[k];
                    }
                }
                let al = ex.alpha[v];
                rot += (a * (1.0 - al) + d.point_velocity(ex.remote_bone[v] as usize, m, y) * al)
                    * dir[m];
                tr += t * dir[m];
            }
            without += (truth - rot).length_squared() as f64;
            with += (truth - rot - tau_matrix(&ex.translation[v]) * tr).length_squared() as f64;
        }
    }
    eprintln!("held-out residual without τ {without:.4e}, with τ {with:.4e}");
    assert!(
        with < 0.95 * without,
        "translation weights did not help: {with} vs {without}"
    );
    let _ = DVec3::ZERO;
}

#[test]
fn synthesis_reproduces_each_example_at_its_own_pose() {
    let f = fixture();
    let synth = Synthesizer::new(
        &f.db,
        SynthParams {
            resolve_penetration: false,
            ..SynthParams::default()
        },
    );
    let mut out = vec![Vec3::ZERO; f.db.vertex_count()];
    for ex in &f.db.examples {
        let mut state = AvatarState::new();
        let mut scratch = Scratch::default();
        synth.synthesize(&mut state, &mut scratch, &ex.pose, 1.0 / 30.0, &mut out);
        let worst = out
            .iter()
            .zip(&ex.positions)
            .map(|(a, b)| (*a - *b).length())
            .fold(0.0f32, f32::max);
        assert!(worst < 1e-4, "example reproduced within {worst} m");
    }
}

#[test]
fn serial_and_parallel_synthesis_agree_and_damping_converges() {
    let f = fixture();
    let synth = Synthesizer::new(&f.db, SynthParams::default());
    let n = f.db.vertex_count();
    let mut rng = Rng::new(9);
    let poses: Vec<Pose> = (0..8)
        .map(|_| crate::skeleton::sample_pose(|| rng.uniform(), 0.3))
        .collect();
    // serial
    let mut serial = vec![vec![Vec3::ZERO; n]; poses.len()];
    let mut states: Vec<AvatarState> = (0..poses.len()).map(|_| AvatarState::new()).collect();
    let mut scratch = Scratch::default();
    for ((p, o), s) in poses.iter().zip(serial.iter_mut()).zip(states.iter_mut()) {
        synth.synthesize(s, &mut scratch, p, 1.0 / 30.0, o);
    }
    // parallel
    let mut parallel = vec![vec![Vec3::ZERO; n]; poses.len()];
    let mut pstates: Vec<AvatarState> = (0..poses.len()).map(|_| AvatarState::new()).collect();
    fn jobs_of<'a>(
        states: &'a mut [AvatarState],
        outs: &'a mut [Vec<Vec3>],
        poses: &[Pose],
    ) -> Vec<AvatarJob<'a>> {
        states
            .iter_mut()
            .zip(outs.iter_mut())
            .zip(poses)
            .map(|((s, o), p)| AvatarJob {
                state: s,
                pose: *p,
                dt: 1.0 / 30.0,
                out: o,
                frame: None,
            })
            .collect()
    }
    let mut jobs = jobs_of(&mut pstates, &mut parallel, &poses);
    synthesize_all(&synth, &mut jobs);
    drop(jobs);
    assert_eq!(serial, parallel, "rayon and serial synthesis differ");
    // a job that panics (here an output buffer of the wrong size: a bug) is left
    // without a frame; the others complete as serial synthesis does
    let mut outs = [
        vec![Vec3::ZERO; n],
        vec![Vec3::ZERO; n - 1],
        vec![Vec3::ZERO; n],
    ];
    let mut fresh: Vec<AvatarState> = (0..3).map(|_| AvatarState::new()).collect();
    let mut jobs = jobs_of(&mut fresh, &mut outs, &poses);
    synthesize_all(&synth, &mut jobs);
    let done: Vec<bool> = jobs.iter().map(|j| j.frame.is_some()).collect();
    drop(jobs);
    assert_eq!(done, [true, false, true]);
    assert_eq!((&outs[0], &outs[2]), (&serial[0], &serial[2]));
    // damping: a pose held still converges to the undamped result
    let mut still = AvatarState::new();
    let mut out = vec![Vec3::ZERO; n];
    synth.synthesize(&mut still, &mut scratch, &poses[0], 1.0 / 30.0, &mut out);
    for _ in 0..60 {
        synth.synthesize(&mut still, &mut scratch, &poses[1], 1.0 / 30.0, &mut out);
    }
    let mut fresh = AvatarState::new();
    let mut undamped = vec![Vec3::ZERO; n];
    synth.synthesize(
        &mut fresh,
        &mut scratch,
        &poses[1],
        1.0 / 30.0,
        &mut undamped,
    );
    let diff = out
        .iter()
        .zip(&undamped)
        .map(|(a, b)| (*a - *b).length())
        .fold(0.0f32, f32::max);
    assert!(
        diff < 1e-4,
        "damped result {diff} m away from the undamped one after 2 s"
    );
    // and right after a pose change the damped result lies between the two
    let mut jump = AvatarState::new();
    synth.synthesize(&mut jump, &mut scratch, &poses[0], 1.0 / 30.0, &mut out);
    let mut first = vec![Vec3::ZERO; n];
    synth.synthesize(&mut jump, &mut scratch, &poses[1], 1.0 / 30.0, &mut first);
    let d_first = first
        .iter()
        .zip(&undamped)
        .map(|(a, b)| (*a - *b).length())
        .fold(0.0f32, f32::max);
    assert!(d_first > diff, "damping had no effect");
}

/// The database records where each example's pose came from: the rest pose first, then
/// clip frames and joint-limit samples whose candidate poses (arms guarded, canonical)
/// are the examples' poses; `CLIP, frame F` names the clip's own frame F.
#[test]
fn a_bake_records_where_each_example_pose_came_from() {
    let f = fixture();
    let origins = &f.db.bake.origins;
    assert_eq!(origins.len(), f.db.examples.len());
    assert_eq!(f.db.bake.origin(0).as_deref(), Some("rest pose"));
    let cfg = BakeConfig {
        examples: 4,
        limit_samples: 60,
        ..BakeConfig::default()
    };
    let baker = Baker::new(&f.body, &f.garment, cfg.clone()).expect("baker");
    let clip = walk(&f.body);
    let clips = [clip.clone()];
    let candidates = baker.candidates(&clips);
    let named = baker.candidate_origins(&clips);
    assert_eq!(candidates.len(), named.len());
    // what `bake` counts to say that K-means has fewer candidates than examples asked
    assert_eq!(cfg.candidate_count(&clips), candidates.len());
    assert_eq!(cfg.candidate_count(&[]), 60);
    assert_eq!(named[0], "walk.bvh, frame 0");
    assert_eq!(named[1], format!("walk.bvh, frame {}", cfg.clip_step));
    assert_eq!(named[named.len() - 1], "joint-limit sample 60");
    let guard = crate::body::SelfContactGuard::new(&f.body, crate::bake::GUARD_CLEARANCE);
    let (mut from_clip, mut from_limits) = (0, 0);
    for (i, ex) in f.db.examples.iter().enumerate().skip(1) {
        let origin = &origins[i];
        let k = named
            .iter()
            .position(|n| n == origin)
            .unwrap_or_else(|| panic!("example {i}: {origin:?} is no candidate"));
        assert_eq!(candidates[k], ex.pose, "example {i} ({origin})");
        if let Some(frame) = origin.strip_prefix("walk.bvh, frame ") {
            // the frame number is the clip's own
            let frame: usize = frame.parse().expect("frame number");
            let sk = &f.body.skeleton;
            let clip_pose = crate::skeleton::canonicalize(&clip.poses[frame], sk).0;
            let pose = crate::skeleton::canonicalize(&guard.apply(&clip_pose), sk).0;
            assert_eq!(pose, ex.pose, "example {i} ({origin})");
            from_clip += 1;
        } else {
            assert!(origin.starts_with("joint-limit sample "), "{origin}");
            from_limits += 1;
        }
    }
    assert_eq!(from_clip + from_limits, f.db.examples.len() - 1);
}

/// SOR's greedy sampler (SOR §6, Alg. 1): each example it adds is a pose where the
/// garment synthesised from the examples before it is at least as far out of
/// equilibrium (‖F‖) as at the candidate its search started from, and once added, the
/// synthesis there is close to equilibrium. Its origins name that start.
#[test]
fn the_mcmc_sampler_adds_poses_of_large_residual() {
    let f = fixture();
    let cfg = BakeConfig {
        examples: 3,
        sampler: crate::bake::Sampler::Mcmc,
        limit_samples: 30,
        mcmc_samples: 20,
        ..BakeConfig::default()
    };
    let baker = Baker::new(&f.body, &f.garment, cfg.clone()).expect("baker");
    let clip = walk(&f.body);
    let clips = [clip];
    let db = baker.bake_mcmc(&clips, &|_, _| {}).expect("bake");
    assert_eq!(db.examples.len(), 3);
    assert_eq!(db.bake.sampler, "mcmc");
    assert_eq!(db.bake.origin(0).as_deref(), Some("rest pose"));
    let candidates = baker.candidates(&clips);
    let named = baker.candidate_origins(&clips);
    let mut sim = Simulator::new(&f.body, &f.garment, &cfg.sim).expect("sim");
    // ‖F‖ of the garment the first `n` examples synthesise at `pose`
    let mut residual = |n: usize, pose: &Pose| {
        let mut some = db.clone();
        some.examples.truncate(n);
        some.bake.origins.truncate(n);
        let synth = Synthesizer::new(&some, SynthParams::default());
        let mut out = vec![Vec3::ZERO; some.vertex_count()];
        synth.synthesize(
            &mut AvatarState::new(),
            &mut Scratch::default(),
            pose,
            0.0,
            &mut out,
        );
        let y: Vec<DVec3> = out.iter().map(|v| v.as_dvec3()).collect();
        sim.residual(pose, &y).expect("residual")
    };
    for j in 1..db.examples.len() {
        let origin = db.bake.origin(j).expect("origin").into_owned();
        let start = origin
            .strip_prefix("MCMC search from ")
            .and_then(|o| named.iter().position(|n| n == o))
            .unwrap_or_else(|| panic!("example {j}: {origin:?} names no candidate"));
        let pose = db.examples[j].pose;
        let at_start = residual(j, &candidates[start]);
        let chosen = residual(j, &pose);
        let added = residual(j + 1, &pose);
        assert!(
            chosen >= at_start * (1.0 - 1e-9) && added < 0.05 * chosen,
            "example {j} ({origin}): ‖F‖ {at_start:.4} N at the start, {chosen:.4} N at the \
             chosen pose, {added:.4} N there once it is an example"
        );
    }
}

/// With no candidate poses at all (no clip, no joint-limit samples) the greedy sampler
/// still searches, from the rest pose, instead of indexing an empty pool.
#[test]
fn the_mcmc_sampler_searches_from_rest_without_candidates() {
    let f = fixture();
    let cfg = BakeConfig {
        examples: 2,
        sampler: crate::bake::Sampler::Mcmc,
        limit_samples: 0,
        mcmc_samples: 4,
        ..BakeConfig::default()
    };
    let baker = Baker::new(&f.body, &f.garment, cfg).expect("baker");
    assert!(baker.candidates(&[]).is_empty());
    let db = baker.bake_mcmc(&[], &|_, _| {}).expect("bake");
    assert_eq!(db.examples.len(), 2);
    assert_eq!(
        db.bake.origin(1).as_deref(),
        Some("MCMC search from the rest pose")
    );
}

#[test]
fn database_round_trips_and_refuses_bad_files() {
    let f = fixture();
    let bytes = f.db.to_bytes();
    let back = Database::from_bytes(&bytes).expect("read back");
    assert!(back == f.db, "database differs after a round trip");
    // every truncated prefix is refused with a named error
    for cut in [0, 4, 8, 20, 31, 40, 200, bytes.len() / 2, bytes.len() - 1] {
        let e = Database::from_bytes(&bytes[..cut]).expect_err("truncated");
        assert!(
            matches!(
                e,
                DbError::Truncated { .. } | DbError::BadMagic | DbError::Corrupt(_)
            ),
            "{cut}: {e:?}"
        );
    }
    // a flipped byte in an array is caught by its checksum
    let mut bad = bytes.clone();
    let at = bad.len() - 100;
    bad[at] ^= 0x40;
    assert!(matches!(
        Database::from_bytes(&bad),
        Err(DbError::Checksum(_))
    ));
    // another format version, another magic
    let mut v2 = bytes.clone();
    v2[8] = 2;
    assert_eq!(
        Database::from_bytes(&v2).err(),
        Some(DbError::Version {
            found: 2,
            supported: DB_VERSION
        })
    );
    let mut magic = bytes.clone();
    magic[0] = b'X';
    assert_eq!(Database::from_bytes(&magic).err(), Some(DbError::BadMagic));
    // origins are one per example or none; what a file holds is printable
    let mut counted = f.db.clone();
    counted.bake.origins.pop();
    assert!(matches!(
        Database::from_bytes(&counted.to_bytes()),
        Err(DbError::Corrupt(m)) if m.contains("3 example origins for 4 examples")
    ));
    let mut none = f.db.clone();
    none.bake.origins.clear();
    let none = Database::from_bytes(&none.to_bytes()).expect("no origins");
    assert_eq!(none.bake.origin(1), None);
    let mut escaping = f.db.clone();
    escaping.bake.origins[1] = "walk\u{1b}[2J.bvh, frame 3\n".into();
    let escaping = Database::from_bytes(&escaping.to_bytes()).expect("read");
    assert_eq!(
        escaping.bake.origin(1).as_deref(),
        Some("walk?[2J.bvh, frame 3?")
    );
    // built for another garment / body
    let mut other = GarmentData::from_garment(&f.garment);
    other.rest[0].x += 0.001;
    assert!(matches!(
        f.db.check_built_for(&other, &BodyData::from_body(&f.body)),
        Err(DbError::Mismatch {
            what: "garment",
            ..
        })
    ));
    f.db.check_built_for(
        &GarmentData::from_garment(&f.garment),
        &BodyData::from_body(&f.body),
    )
    .expect("same garment");
    // part files (resumable bakes) round-trip and refuse corruption
    let part = encode_example(&f.db.examples[1]);
    assert_eq!(decode_example(&part).expect("part"), f.db.examples[1]);
    let mut broken = part.clone();
    broken[100] ^= 1;
    assert!(decode_example(&broken).is_err());
}

/// The frozen v1 database (`tests/fixtures/db/v1/small.ccdb`: this file's fixture bake,
/// 4 examples of a 900-vertex T-shirt on a 2000-vertex body) still reads, and
/// synthesis reproduces its examples. Rewritten only with CLOTHCAST_WRITE_GOLDEN=1 (and
/// never for the same format version once committed).
#[test]
fn golden_v1_database_reads_and_synthesizes() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/db/v1/small.ccdb");
    if std::env::var_os("CLOTHCAST_WRITE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
        fixture().db.write(&path).expect("write golden");
    }
    let db = Database::read(&path).expect("golden database reads");
    assert_eq!(db.examples.len(), 4);
    // baked before example origins were recorded: none, and none claimed
    assert_eq!(db.bake.origin(0), None);
    assert_eq!(db.region_count(), 7);
    let synth = Synthesizer::new(
        &db,
        SynthParams {
            resolve_penetration: false,
            ..SynthParams::default()
        },
    );
    let mut out = vec![Vec3::ZERO; db.vertex_count()];
    for ex in &db.examples {
        synth.synthesize(
            &mut AvatarState::new(),
            &mut Scratch::default(),
            &ex.pose,
            1.0 / 30.0,
            &mut out,
        );
        let worst = out
            .iter()
            .zip(&ex.positions)
            .map(|(a, b)| (*a - *b).length())
            .fold(0.0f32, f32::max);
        assert!(worst < 1e-4, "golden example reproduced within {worst} m");
    }
    // the same bytes with the version bumped are refused by name
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[8] = DB_VERSION as u8 + 1;
    assert!(matches!(
        Database::from_bytes(&bytes),
        Err(DbError::Version { .. })
    ));
}

mod allocations {
    //! Counts heap allocations made by the current thread while enabled.
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;
    use std::sync::atomic::{AtomicUsize, Ordering};

    pub(super) static COUNT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        pub(super) static ON: Cell<bool> = const { Cell::new(false) };
    }

    struct Counting;

    fn note() {
        if ON.try_with(Cell::get).unwrap_or(false) {
            COUNT.fetch_add(1, Ordering::Relaxed);
        }
    }

    // SAFETY: forwards to the system allocator unchanged.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            note();
            // SAFETY: same contract as the caller's.
            unsafe { System.alloc(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: same contract as the caller's.
            unsafe { System.dealloc(ptr, layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            note();
            // SAFETY: same contract as the caller's.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }

    #[global_allocator]
    static ALLOCATOR: Counting = Counting;
}

#[test]
fn synthesis_does_not_allocate_in_steady_state() {
    use std::sync::atomic::Ordering;
    let f = fixture();
    let synth = Synthesizer::new(&f.db, SynthParams::default());
    let (mut state, mut scratch) = (AvatarState::new(), Scratch::default());
    let mut out = vec![Vec3::ZERO; f.db.vertex_count()];
    let poses: Vec<Pose> = (0..24)
        .map(|i| {
            let mut p = Pose::rest();
            let a = i as f32 * 0.1;
            p.set_rotation(
                JointId::LEFT_SHOULDER,
                quat_exp(Vec3::new(0.0, 0.3 * a.sin(), -0.6 - 0.3 * a.cos())),
            );
            p.set_rotation(
                JointId::SPINE2,
                quat_exp(Vec3::new(0.1 * a.sin(), 0.2 * a.cos(), 0.0)),
            );
            p
        })
        .collect();
    for p in &poses[..4] {
        synth.synthesize(&mut state, &mut scratch, p, 1.0 / 30.0, &mut out);
    }
    // the counter sees this thread's allocations …
    allocations::COUNT.store(0, Ordering::Relaxed);
    allocations::ON.with(|c| c.set(true));
    drop(std::hint::black_box(Vec::<u64>::with_capacity(8)));
    allocations::ON.with(|c| c.set(false));
    assert_eq!(allocations::COUNT.load(Ordering::Relaxed), 1);
    // … and synthesis makes none
    allocations::COUNT.store(0, Ordering::Relaxed);
    allocations::ON.with(|c| c.set(true));
    for p in &poses[4..] {
        synth.synthesize(&mut state, &mut scratch, p, 1.0 / 30.0, &mut out);
    }
    allocations::ON.with(|c| c.set(false));
    assert_eq!(
        allocations::COUNT.load(Ordering::Relaxed),
        0,
        "synthesis allocated in steady state"
    );
}

/// Shards of one bake merge back into the whole; shards baked with other simulator
/// settings (another build's defaults, say) are refused, naming the setting.
#[test]
fn shards_merge_and_differing_settings_are_refused() {
    let f = fixture();
    let mut first = f.db.clone();
    let mut second = f.db.clone();
    first.examples.truncate(2);
    first.bake.origins.truncate(2);
    second.examples.drain(..2);
    second.bake.origins.drain(..2);
    let merged = crate::bake::merge(vec![first.clone(), second.clone()]).expect("merge");
    assert_eq!(merged.examples, f.db.examples);
    assert_eq!(merged.bake.origins, f.db.bake.origins);
    // a shard baked before origins were recorded: its examples' origins read as unknown
    let mut older = second.clone();
    older.bake.origins.clear();
    let mixed = crate::bake::merge(vec![first.clone(), older]).expect("merge");
    assert_eq!(mixed.bake.origins.len(), mixed.examples.len());
    assert_eq!(mixed.bake.origin(1), f.db.bake.origin(1));
    assert_eq!(mixed.bake.origin(2), None);
    // a repeated shard adds nothing
    let again = crate::bake::merge(vec![merged, second.clone()]).expect("merge again");
    assert_eq!(again.examples.len(), f.db.examples.len());
    // an older build's simulator, without the compression ratio
    if let Some(m) = second.bake.sim.as_object_mut() {
        m.remove("compression_ratio");
    }
    let err = crate::bake::merge(vec![first, second]).expect_err("settings differ");
    assert!(matches!(
        err,
        DbError::SettingsDiffer {
            what: "simulator parameters",
            ..
        }
    ));
    let text = err.to_string();
    let expected = format!(
        "compression_ratio: {} vs absent",
        SimParams::default().compression_ratio
    );
    assert!(text.contains(&expected), "{text}");
    assert!(crate::bake::merge(Vec::new()).is_err());
}

/// An interrupted bake resumes from its finished examples (a part file is used as it
/// is), and a bake with other settings never takes up parts it did not build (its
/// simulator settings are checked the same way as the rigging settings used here).
#[test]
fn resumed_bakes_reuse_their_own_parts_only() {
    let f = fixture();
    let dir = std::env::temp_dir().join(format!("clothcast-parts-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let clip = crate::mocap::Clip::from_bvh_text(crate::bake::DEFAULT_CLIP, None, &f.body.skeleton)
        .expect("clip");
    let clips = [clip.every(40)];
    let cfg = BakeConfig {
        examples: 2,
        limit_samples: 20,
        ..BakeConfig::default()
    };
    let bake = |cfg: &BakeConfig| {
        Baker::new(&f.body, &f.garment, cfg.clone())
            .expect("baker")
            .bake_kmeans(&clips, Some(&dir), Shard::ALL, &|_, _| {})
            .expect("bake")
    };
    let first = bake(&cfg);
    // mark example 1's part, as an interrupted run would have left it
    let part = crate::bake::part_path(&dir, 1);
    let mut marked = decode_example(&std::fs::read(&part).expect("part")).expect("decode");
    marked.positions[0].x += 0.25;
    std::fs::write(&part, encode_example(&marked)).expect("write part");
    let resumed = bake(&cfg);
    assert_eq!(resumed.examples[1].positions[0], marked.positions[0]);
    assert_eq!(resumed.examples[0], first.examples[0]);
    // other rigging settings (the same poses: the K-means weights come from the
    // simulator): the part is rebuilt, not mixed in
    let other = BakeConfig {
        rig: RigParams {
            translation_ridge: 2.0 * cfg.rig.translation_ridge,
        },
        ..cfg
    };
    let rebuilt = bake(&other);
    assert_eq!(rebuilt.examples[1].pose, marked.pose);
    let moved = (rebuilt.examples[1].positions[0] - first.examples[1].positions[0]).length();
    assert!(
        moved < 1e-6,
        "the marked part was reused ({moved} m from the simulated one)"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Leave-one-out names the example its neighbours cannot predict: a 30 cm flap put
/// into the garment of the example they predict best makes it the worst predicted, by
/// about the flap; a database of one example has nothing to predict it from.
#[test]
fn leaving_one_out_finds_an_example_unlike_its_neighbours() {
    let f = fixture();
    let params = SynthParams::default();
    let clean = leave_one_out(&f.db, &params);
    assert_eq!(clean.len(), f.db.examples.len());
    for (j, r) in clean.iter().enumerate() {
        assert_eq!(r.example, j);
        assert!(
            r.mean > 0.0 && r.mean < 0.1 && r.max >= r.mean,
            "example {j}: mean {} m, max {} m",
            r.mean,
            r.max
        );
    }
    let by_max = |rows: &[LeftOut], best: bool| {
        let pick = rows.iter().min_by(|a, b| {
            let o = a.max.total_cmp(&b.max);
            if best { o } else { o.reverse() }
        });
        pick.map(|r| r.example).expect("rows")
    };
    let j = by_max(&clean, true);
    // the vertices within 12 cm of the garment's first vertex pulled 30 cm forwards
    let mut flapped = f.db.clone();
    let ex = &mut flapped.examples[j];
    let centre = ex.positions[0];
    for p in &mut ex.positions {
        if (*p - centre).length() < 0.12 {
            p.z += 0.3;
        }
    }
    let rows = leave_one_out(&flapped, &params);
    assert_eq!(by_max(&rows, false), j, "{rows:?} (clean {clean:?})");
    assert!(
        rows[j].max > clean[j].max + 0.2,
        "flapped example predicted within {} m (clean {} m)",
        rows[j].max,
        clean[j].max
    );
    let mut one = f.db.clone();
    one.examples.truncate(1);
    assert!(leave_one_out(&one, &params).is_empty());
}
