use glam::{Mat4, Quat, Vec3};

use super::*;
use crate::body::{SkinningMethod, glb_skeleton};
use crate::mesh::{GlbMaterial, GlbMesh, GlbScene, read_gltf_skinned, write_glb};
use crate::skeleton::{JointId, Pose, quat_exp};

/// A mesh written beside the body: bind-pose positions and triangles, all on one bone.
struct Extra {
    name: &'static str,
    positions: Vec<Vec3>,
    triangles: Vec<[u32; 3]>,
    bone: JointId,
}

/// Writes `body` posed at `bind` (its bind pose) as a Mixamo-named glTF, with the
/// body's mesh cut to `keep` triangles and `extra` meshes (bind-pose positions,
/// triangles, one bone each) beside it, and reads it back.
fn mixamo_gltf(
    body: &Body,
    bind: &Pose,
    keep: &dyn Fn(&[u32; 3]) -> bool,
    extra: &[Extra],
) -> crate::mesh::LoadedSkinnedMesh {
    let mixamo = Profile::builtin("mixamo").expect("mixamo");
    let names: Vec<String> = JointId::all()
        .map(|j| {
            format!(
                "mixamorig:{}",
                mixamo.joints[j.index()].clone().expect("mapped")
            )
        })
        .collect();
    let frames = body.skeleton.world_frames(bind);
    let posed = body.posed_positions(bind, SkinningMethod::Lbs);
    let triangles: Vec<[u32; 3]> = body
        .mesh
        .triangles
        .iter()
        .copied()
        .filter(|t| keep(t))
        .collect();
    let normals =
        crate::mesh::TriMesh::new(posed.clone(), body.mesh.triangles.clone()).vertex_normals();
    let mut sk = glb_skeleton(&body.skeleton);
    sk.names = names.iter().map(|s| s.as_str()).collect();
    sk.rest_rotation = JointId::all()
        .map(|j| bind.rotation(j))
        .collect::<Vec<Quat>>();
    sk.inverse_bind = frames
        .iter()
        .map(|f| f.to_mat4().inverse())
        .collect::<Vec<Mat4>>();
    let material = GlbMaterial {
        name: "m".into(),
        base_color: [1.0; 4],
        roughness: 1.0,
        double_sided: false,
    };
    let influences: Vec<Vec<[u16; 4]>> = extra
        .iter()
        .map(|x| vec![[x.bone.index() as u16, 0, 0, 0]; x.positions.len()])
        .collect();
    let most = extra.iter().map(|x| x.positions.len()).max().unwrap_or(0);
    let (ones, ups) = (vec![[1.0, 0.0, 0.0, 0.0]; most], vec![Vec3::Y; most]);
    let mut meshes = vec![GlbMesh {
        name: "avatar",
        positions: &posed,
        normals: &normals,
        triangles: &triangles,
        skin: Some((&body.skin.joints, &body.skin.weights)),
        material: material.clone(),
    }];
    for (x, j) in extra.iter().zip(&influences) {
        let n = x.positions.len();
        meshes.push(GlbMesh {
            name: x.name,
            positions: &x.positions,
            normals: &ups[..n],
            triangles: &x.triangles,
            skin: Some((j, &ones[..n])),
            material: material.clone(),
        });
    }
    let scene = GlbScene {
        skeleton: Some(sk),
        meshes,
        animation: None,
    };
    let path = std::env::temp_dir().join(format!(
        "clothcast-import-{}-{}.glb",
        std::process::id(),
        extra.len()
    ));
    write_glb(std::fs::File::create(&path).expect("create"), &scene).expect("write");
    let loaded = read_gltf_skinned(&path).expect("read");
    let _ = std::fs::remove_file(&path);
    loaded
}

/// How far an imported body's vertices are from `body`'s at rest, metres, once the
/// placement offset (the import stands the body on y = 0) is taken out; and that
/// offset (of the pelvis).
fn t_pose_error(imported: &Body, body: &Body) -> (f32, Vec3) {
    let offset = imported.skeleton.rest_position(JointId::PELVIS)
        - body.skeleton.rest_position(JointId::PELVIS);
    let worst = imported
        .mesh
        .positions
        .iter()
        .zip(&body.mesh.positions)
        .map(|(a, b)| (*a - *b - offset).length())
        .fold(0.0f32, f32::max);
    (worst, offset)
}

/// Writes `body` as a Mixamo-named glTF whose bind pose is an A-pose (arms 45° down),
/// then imports it back.
#[test]
fn a_pose_mixamo_gltf_imports_back_to_the_t_pose_body() {
    let body = crate::body::small_test_body();
    let mut a_pose = Pose::rest();
    a_pose.set_rotation(
        JointId::LEFT_SHOULDER,
        quat_exp(Vec3::new(0.0, 0.0, -45f32.to_radians())),
    );
    a_pose.set_rotation(
        JointId::RIGHT_SHOULDER,
        quat_exp(Vec3::new(0.0, 0.0, 45f32.to_radians())),
    );
    let loaded = mixamo_gltf(body, &a_pose, &|_| true, &[]);
    assert_eq!(loaded.skin.names.len(), 22);
    let (imported, report) = Body::import_humanoid(&loaded, None).expect("import");
    assert!(report.unchanged(), "{report:?}");
    assert_eq!(imported.mesh.vertex_count(), body.mesh.vertex_count());
    // the same shape up to a placement offset (the import stands the body on y = 0)
    let (worst, offset) = t_pose_error(&imported, body);
    assert!(offset.length() < 0.02, "placement offset {offset}");
    assert!(worst < 0.002, "T-pose recovered within {worst} m");
    for j in JointId::all() {
        assert!(
            (imported.skeleton.rest_position(j) - body.skeleton.rest_position(j) - offset).length()
                < 0.002,
            "{j}"
        );
    }
    assert!(imported.mesh.bounds().expect("bounds").0.y.abs() < 1e-5);
    imported
        .skin
        .validate(imported.mesh.vertex_count())
        .expect("skin");
}

/// An avatar as VR avatars come: the skin open at the top of the head (where a scalp
/// mesh would join), a hair card and an eye as meshes of their own. The import caps
/// the opening and drops the card and the eye, and the body is closed.
#[test]
fn an_open_avatar_with_hair_and_eyes_imports_as_a_closed_body() {
    let body = crate::body::small_test_body();
    let top = body.mesh.bounds().expect("bounds").1.y;
    let p = &body.mesh.positions;
    let open = |t: &[u32; 3]| t.iter().all(|&v| p[v as usize].y < top - 0.03);
    let head = body.skeleton.rest_position(JointId::HEAD);
    let card = vec![
        head + Vec3::new(-0.08, 0.05, -0.12),
        head + Vec3::new(0.08, 0.05, -0.12),
        head + Vec3::new(0.08, -0.15, -0.14),
        head + Vec3::new(-0.08, -0.15, -0.14),
    ];
    let e = head + Vec3::new(0.03, 0.03, 0.06);
    let s = 0.008;
    let eye = vec![
        e + Vec3::new(s, s, s),
        e + Vec3::new(s, -s, -s),
        e + Vec3::new(-s, s, -s),
        e + Vec3::new(-s, -s, s),
    ];
    let loaded = mixamo_gltf(
        body,
        &Pose::rest(),
        &open,
        &[
            Extra {
                name: "Hair",
                positions: card,
                triangles: vec![[0, 1, 2], [0, 2, 3]],
                bone: JointId::HEAD,
            },
            Extra {
                name: "Eye",
                positions: eye,
                triangles: vec![[0, 1, 2], [0, 3, 1], [0, 2, 3], [1, 3, 2]],
                bone: JointId::HEAD,
            },
        ],
    );
    assert!(
        !crate::mesh::Topology::build(&loaded.mesh)
            .expect("manifold parts")
            .is_closed()
    );
    let (imported, report) = Body::import_humanoid(&loaded, None).expect("import");
    assert_eq!(report.kept.len(), 1, "{report:?}");
    assert_eq!(report.capped, 1, "{report:?}");
    assert_eq!(report.dropped.len(), 2, "{report:?}");
    assert!(
        report
            .dropped
            .iter()
            .all(|d| d.1 == "too small to be part of the body"),
        "{report:?}"
    );
    let topo = crate::mesh::Topology::build(&imported.mesh).expect("manifold");
    assert!(topo.is_closed());
    assert_eq!(topo.component_count(&imported.mesh), 1);
    let (v0, v1) = (body.mesh.signed_volume(), imported.mesh.signed_volume());
    assert!(((v1 - v0) / v0).abs() < 0.01, "volume {v0} → {v1}");
    imported
        .skin
        .validate(imported.mesh.vertex_count())
        .expect("skin");
}

/// `body` written with its head as a mesh of its own (the triangles above mid-neck,
/// their vertices copied and raised by `gap` metres, all on the head bone), and
/// imported.
fn with_a_head_of_its_own(body: &Body, gap: f32) -> (Body, CloseReport) {
    let cut = 0.5
        * (body.skeleton.rest_position(JointId::NECK).y
            + body.skeleton.rest_position(JointId::HEAD).y);
    cut_apart(body, cut, gap)
}

/// `body` written as two meshes, the triangles below height `cut` and the rest (their
/// vertices copied and raised by `gap` metres, all on the head bone), and imported.
fn cut_apart(body: &Body, cut: f32, gap: f32) -> (Body, CloseReport) {
    let p = &body.mesh.positions;
    let below = |t: &[u32; 3]| t.iter().all(|&v| p[v as usize].y < cut);
    let mut index = std::collections::HashMap::new();
    let mut positions = Vec::new();
    let mut triangles = Vec::new();
    for t in body.mesh.triangles.iter().filter(|t| !below(t)) {
        triangles.push(t.map(|v| {
            *index.entry(v).or_insert_with(|| {
                positions.push(p[v as usize] + Vec3::Y * gap);
                (positions.len() - 1) as u32
            })
        }));
    }
    let loaded = mixamo_gltf(
        body,
        &Pose::rest(),
        &below,
        &[Extra {
            name: "Head",
            positions,
            triangles,
            bone: JointId::HEAD,
        }],
    );
    Body::import_humanoid(&loaded, None).expect("import")
}

/// A head modelled as a mesh of its own, open at the neck as the body is there: with
/// the seams 0.1 mm apart (an exporter's rounding) they are stitched into one closed
/// body; 5 mm apart, each opening is capped and both parts are kept.
#[test]
fn a_head_of_its_own_is_stitched_to_the_body_or_kept_beside_it() {
    let body = crate::body::small_test_body();
    let v0 = body.mesh.signed_volume();
    let (stitched, report) = with_a_head_of_its_own(body, 1e-4);
    assert_eq!(report.kept.len(), 1, "{report:?}");
    assert_eq!(report.capped, 0, "{report:?}");
    assert!(report.stitched > 10, "{report:?}");
    assert!(report.dropped.is_empty(), "{report:?}");
    let topo = crate::mesh::Topology::build(&stitched.mesh).expect("manifold");
    assert!(topo.is_closed());
    assert_eq!(topo.component_count(&stitched.mesh), 1);
    assert_eq!(stitched.mesh.vertex_count(), body.mesh.vertex_count());
    assert!(((stitched.mesh.signed_volume() - v0) / v0).abs() < 1e-3);

    let (apart, report) = with_a_head_of_its_own(body, 0.005);
    assert_eq!(report.kept.len(), 2, "{report:?}");
    assert_eq!(report.capped, 2, "{report:?}");
    assert_eq!(report.fanned, 0, "the necks are triangulated: {report:?}");
    assert_eq!(report.stitched, 0, "{report:?}");
    let topo = crate::mesh::Topology::build(&apart.mesh).expect("manifold");
    assert!(topo.is_closed());
    assert_eq!(topo.component_count(&apart.mesh), 2);
    assert!(((apart.mesh.signed_volume() - v0) / v0).abs() < 0.01);
}

/// A body cut apart along its triangles at the shoulder joints' height, through both
/// T-posed arms: each opening runs round the neck and the arms and zigzags by an edge
/// length, so that seen along its mean normal it crosses itself. Such openings get a
/// fan, and the report says so (the import's line asks the user to look there:
/// `cli::common`'s test).
#[test]
fn an_opening_that_crosses_itself_is_fanned_and_reported() {
    let body = crate::body::small_test_body();
    let cut = body.skeleton.rest_position(JointId::LEFT_SHOULDER).y;
    let (apart, report) = cut_apart(body, cut, 0.002);
    assert_eq!(report.kept.len(), 2, "{report:?}");
    assert_eq!(report.fanned, 2, "{report:?}");
    assert!(
        crate::mesh::Topology::build(&apart.mesh)
            .expect("manifold")
            .is_closed()
    );
}

/// VRM 0.x avatars face −Z (glTF's back), in their bind pose as in every other: the
/// import turns such an avatar round to face +Z like every canonical pose.
#[test]
fn an_avatar_facing_back_imports_facing_forward() {
    let body = crate::body::small_test_body();
    let mut back = Pose::rest();
    back.set_rotation(JointId::PELVIS, Quat::from_rotation_y(std::f32::consts::PI));
    let loaded = mixamo_gltf(body, &back, &|_| true, &[]);
    // the file's avatar faces −Z: its nose (the front of the head) is at −z
    let nose = |ps: &[Vec3]| {
        ps.iter()
            .copied()
            .filter(|p| p.y > 1.55)
            .fold(0.0f32, |m, p| if p.z.abs() > m.abs() { p.z } else { m })
    };
    assert!(nose(&body.mesh.positions) > 0.0);
    assert!(nose(&loaded.mesh.positions) < 0.0);
    let (imported, _) = Body::import_humanoid(&loaded, None).expect("import");
    let (worst, offset) = t_pose_error(&imported, body);
    assert!(
        worst < 0.002,
        "T-pose facing +Z recovered within {worst} m (offset {offset})"
    );
}

/// The same avatar baked facing −Z: vertices and joints turned round, every joint's
/// rotation the identity (how VRM 0.x files store it).
#[test]
fn an_avatar_baked_facing_back_imports_facing_forward() {
    let body = crate::body::small_test_body();
    let turn = Quat::from_rotation_y(std::f32::consts::PI);
    let mut baked = body.clone();
    baked.skeleton = crate::skeleton::Skeleton::from_rest_positions(
        body.skeleton.rest_positions().map(|p| turn * p),
    );
    for p in &mut baked.mesh.positions {
        *p = turn * *p;
    }
    let loaded = mixamo_gltf(&baked, &Pose::rest(), &|_| true, &[]);
    let (imported, _) = Body::import_humanoid(&loaded, None).expect("import");
    let (worst, offset) = t_pose_error(&imported, body);
    let left = imported.skeleton.rest_position(JointId::LEFT_WRIST).x;
    assert!(
        worst < 0.002,
        "T-pose facing +Z recovered within {worst} m (offset {offset}, left wrist x {left})"
    );
}

/// `body` written with a ball of `radius` metres about `centre` beside it, a closed
/// mesh of its own on `bone`, and imported.
fn with_a_ball(body: &Body, centre: Vec3, radius: f32, bone: JointId) -> (Body, CloseReport) {
    let ball = crate::mesh::test_shapes::sphere(centre, radius, 3);
    let loaded = mixamo_gltf(
        body,
        &Pose::rest(),
        &|_| true,
        &[Extra {
            name: "Ball",
            positions: ball.positions,
            triangles: ball.triangles,
            bone,
        }],
    );
    Body::import_humanoid(&loaded, None).expect("import")
}

/// A face modelled as a closed mesh of its own and laid over the front of the head
/// (most of it inside the head) is kept beside the body, and the two are read as one
/// body, their union: a point in front of the face, nearer the head's skin than the
/// face's surface, is inside the face; a point deep in the head, just behind the
/// face's inner surface, is inside the head. Both for the exact signed distance and
/// for the simulator's smooth one. Reading the nearest surface of the whole mesh
/// alone, as before, had both outside.
#[test]
fn a_face_laid_over_the_head_is_read_with_the_head_as_one_body() {
    let body = crate::body::small_test_body();
    let head = body.skeleton.rest_position(JointId::HEAD);
    let normals = body.mesh.vertex_normals();
    // the skin at the front of the face
    let (front, n) = body
        .mesh
        .positions
        .iter()
        .zip(&normals)
        .filter(|(p, _)| (p.y - (head.y + 0.05)).abs() < 0.03 && p.x.abs() < 0.03)
        .max_by(|a, b| a.0.z.total_cmp(&b.0.z))
        .map(|(p, n)| (*p, *n))
        .expect("a face");
    // big enough to be kept (2 % of the body's volume): a face with its skull
    let radius = 0.08;
    // standing 3 cm proud of the skin
    let centre = front - n * (radius - 0.03);
    let (imported, report) = with_a_ball(body, centre, radius, JointId::HEAD);
    assert_eq!(report.kept.len(), 2, "{report:?}");
    assert!(report.dropped.is_empty(), "{report:?}");
    let q = crate::mesh::MeshQuery::build(&imported.mesh).expect("query");
    assert_eq!(q.part_count(), 2);
    let params = crate::sim::SimParams::default();
    let collider = crate::sim::Collider::new(&imported, &Pose::rest(), &params).expect("collider");
    // in front of the skin by 1 cm, inside the face by 2 cm
    let before = front + n * 0.01;
    // inside the head by 1–3 cm, just outside the face's inner surface (by 2–8 mm)
    let behind = body
        .mesh
        .positions
        .iter()
        .zip(&normals)
        .flat_map(|(v, n)| [0.01, 0.02, 0.03].map(|t| *v - *n * t))
        .find(|p| {
            let out_of_face = p.distance(centre) - radius;
            (0.002..0.008).contains(&out_of_face) && p.y > head.y - 0.05
        })
        .expect("a point behind the face");
    for (p, depth) in [(before, 0.02), (behind, 0.01)] {
        assert!(
            q.closest(p).signed_distance(p) > 0.0,
            "{p}: the case is not the one meant"
        );
        let d = q.signed_distance(p);
        assert!(d < -0.8 * depth, "{p}: {d}");
        let smooth = collider
            .distance(p.as_dvec3(), f64::INFINITY)
            .expect("near the body");
        assert!(smooth.d < -0.8 * depth as f64, "{p}: {}", smooth.d);
        // the part's own blend, with its exact gradient
        let eps = 1e-6;
        for a in 0..3 {
            let mut dp = glam::DVec3::ZERO;
            dp[a] = eps;
            let at = |x: glam::DVec3| collider.distance(x, f64::INFINITY).expect("near").d;
            let fd = (at(p.as_dvec3() + dp) - at(p.as_dvec3() - dp)) / (2.0 * eps);
            assert!(
                (fd - smooth.grad[a]).abs() < 1e-5,
                "{p}: ∂{a} {fd} against {}",
                smooth.grad[a]
            );
        }
    }
}

/// A shoulder pad modelled as a closed mesh of its own (a ball standing 25 mm proud of
/// the skin on top of the left shoulder, where the shirt lies a few millimetres off it)
/// is part of the body the cloth lies on: a T-shirt draped on the bare body, imported
/// onto the padded one and draped, ends outside the pad as well as the skin. Reading
/// the nearest surface alone, the shirt's vertices in the pad but nearer the skin than
/// the pad's surface looked outside, and the drape stalled with the shirt caught in it.
#[test]
fn a_shirt_drapes_over_a_pad_modelled_on_the_shoulder() {
    use crate::garment::{Garment, GarmentConfig, RegionTable};
    use crate::sim::{SimParams, Simulator};
    let body = crate::body::small_test_body();
    let normals = body.mesh.vertex_normals();
    let (l, r) = (
        body.skeleton.rest_position(JointId::LEFT_SHOULDER),
        body.skeleton.rest_position(JointId::NECK),
    );
    let top = l.lerp(r, 0.3);
    let (front, n) = body
        .mesh
        .positions
        .iter()
        .zip(&normals)
        .filter(|(p, _)| {
            (p.x - top.x).abs() < 0.03 && (p.z - top.z).abs() < 0.04 && p.y < r.y + 0.08
        })
        .max_by(|a, b| a.0.y.total_cmp(&b.0.y))
        .map(|(p, n)| (*p, *n))
        .expect("a shoulder");
    let radius = 0.08;
    let centre = front - n * (radius - 0.025);
    let (padded, report) = with_a_ball(body, centre, radius, JointId::LEFT_COLLAR);
    assert_eq!(report.kept.len(), 2, "{report:?}");
    let cfg = GarmentConfig::builtin("tshirt").expect("tshirt");
    let params = SimParams::default();
    // the shirt as it lies on the bare body
    let mut shirt = Garment::generate(body, &cfg).expect("shirt on the bare body");
    let rest = Simulator::new(body, &shirt, &params)
        .expect("sim")
        .drape_rest()
        .expect("drape on the bare body");
    shirt.mesh.positions = rest.positions.iter().map(|p| p.as_vec3()).collect();
    let q = crate::mesh::MeshQuery::build(&padded.mesh).expect("query");
    // it passes through the pad, nearer the skin than the pad's surface in places
    let in_pad = shirt
        .mesh
        .positions
        .iter()
        .filter(|p| q.signed_distance(**p) < 0.0 && q.closest(**p).signed_distance(**p) > 0.0)
        .count();
    assert!(in_pad > 10, "{in_pad} vertices in the pad");
    let regions = RegionTable::from_config(&cfg.regions).expect("regions");
    let fitted = Garment::from_mesh("tshirt", shirt.mesh.clone(), &padded, regions, 0.0)
        .expect("the shirt fits over the pad");
    let mut sim = Simulator::new(&padded, &fitted, &params).expect("sim");
    let eq = sim.drape_rest().expect("drape converges");
    let deepest = eq
        .positions
        .iter()
        .map(|p| sim.collider().signed_distance(*p))
        .fold(f64::MAX, f64::min);
    assert!(deepest > -0.002, "a vertex is {deepest} m inside the body");
    if let Some(out) = std::env::var_os("CLOTHCAST_TEST_PNG") {
        use crate::mesh::{Camera, DrawItem, Image, render};
        let draped: Vec<Vec3> = eq.positions.iter().map(|p| p.as_vec3()).collect();
        // the whole body from the front, the pad from above its side
        let (lo, hi) = padded.mesh.bounds().expect("bounds");
        let near = (centre - Vec3::splat(0.15), centre + Vec3::splat(0.15));
        let views = [((lo, hi), Vec3::Z), (near, Vec3::new(1.0, 0.8, 0.6))].map(|((lo, hi), d)| {
            render(
                &[
                    DrawItem {
                        mesh: &padded.mesh,
                        positions: None,
                        color: [0.8, 0.6, 0.5],
                    },
                    DrawItem {
                        mesh: &fitted.mesh,
                        positions: Some(&draped),
                        color: [0.2, 0.4, 0.8],
                    },
                ],
                &Camera::framing(lo, hi, d, 0.6),
                300,
                500,
            )
        });
        let img = Image::hstack(&views);
        let file = std::fs::File::create(out).expect("png file");
        let mut enc = png::Encoder::new(file, img.width, img.height);
        enc.set_color(png::ColorType::Rgb);
        let mut w = enc.write_header().expect("png header");
        w.write_image_data(&img.rgb).expect("png data");
    }
}
