use glam::{Mat4, Quat, Vec3};

use super::*;
use crate::body::{BodyOptions, SkinningMethod, glb_skeleton};
use crate::mesh::{GlbMaterial, GlbMesh, GlbScene, read_gltf_skinned, write_glb};
use crate::skeleton::{JointId, Pose, quat_exp};

/// Writes `body` as a Mixamo-named glTF whose bind pose is an A-pose (arms 45° down),
/// then imports it back.
#[test]
fn a_pose_mixamo_gltf_imports_back_to_the_t_pose_body() {
    let body = Body::generate(
        &BodyShape::default(),
        &BodyOptions {
            target_vertices: 2000,
        },
    )
    .expect("body");
    let mixamo = Profile::builtin("mixamo").expect("mixamo");
    let names: Vec<String> = JointId::all()
        .map(|j| {
            format!(
                "mixamorig:{}",
                mixamo.joints[j.index()].clone().expect("mapped")
            )
        })
        .collect();
    let mut a_pose = Pose::rest();
    a_pose.set_rotation(
        JointId::LEFT_SHOULDER,
        quat_exp(Vec3::new(0.0, 0.0, -45f32.to_radians())),
    );
    a_pose.set_rotation(
        JointId::RIGHT_SHOULDER,
        quat_exp(Vec3::new(0.0, 0.0, 45f32.to_radians())),
    );
    let frames = body.skeleton.world_frames(&a_pose);
    let posed = body.posed_positions(&a_pose, SkinningMethod::Lbs);
    let normals =
        crate::mesh::TriMesh::new(posed.clone(), body.mesh.triangles.clone()).vertex_normals();
    let mut sk = glb_skeleton(&body.skeleton);
    sk.names = names.iter().map(|s| s.as_str()).collect();
    sk.rest_rotation = JointId::all()
        .map(|j| a_pose.rotation(j))
        .collect::<Vec<Quat>>();
    sk.inverse_bind = frames
        .iter()
        .map(|f| f.to_mat4().inverse())
        .collect::<Vec<Mat4>>();
    let scene = GlbScene {
        skeleton: Some(sk),
        meshes: vec![GlbMesh {
            name: "avatar",
            positions: &posed,
            normals: &normals,
            triangles: &body.mesh.triangles,
            skin: Some((&body.skin.joints, &body.skin.weights)),
            material: GlbMaterial {
                name: "m".into(),
                base_color: [1.0; 4],
                roughness: 1.0,
                double_sided: false,
            },
        }],
        animation: None,
    };
    let path = std::env::temp_dir().join(format!("clothcast-import-{}.glb", std::process::id()));
    write_glb(std::fs::File::create(&path).expect("create"), &scene).expect("write");
    let loaded = read_gltf_skinned(&path).expect("read");
    let _ = std::fs::remove_file(&path);
    assert_eq!(loaded.skin.names.len(), 22);
    let imported = Body::import_humanoid(&loaded, None).expect("import");
    assert_eq!(imported.mesh.vertex_count(), body.mesh.vertex_count());
    // the same shape up to a placement offset (the import stands the body on y = 0)
    let offset = imported.skeleton.rest_position(JointId::PELVIS)
        - body.skeleton.rest_position(JointId::PELVIS);
    assert!(offset.length() < 0.02, "placement offset {offset}");
    let worst = imported
        .mesh
        .positions
        .iter()
        .zip(&body.mesh.positions)
        .map(|(a, b)| (*a - *b - offset).length())
        .fold(0.0f32, f32::max);
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
