use std::sync::OnceLock;

use glam::Vec3;

use super::*;
use crate::skeleton::{JointId, quat_exp};

fn default_body() -> &'static Body {
    static B: OnceLock<Body> = OnceLock::new();
    B.get_or_init(|| Body::default_body().expect("default body"))
}

fn small(shape: BodyShape) -> Body {
    Body::generate(
        &shape,
        &BodyOptions {
            target_vertices: 1500,
        },
    )
    .expect("body")
}

#[test]
fn default_body_is_a_closed_oriented_genus0_manifold() {
    let body = default_body();
    let n = body.mesh.vertex_count();
    assert!((5700..=6300).contains(&n), "about 6k vertices, got {n}");
    body.mesh
        .validate(1e-10)
        .expect("valid, no degenerate triangles");
    let topo = Topology::build(&body.mesh).expect("oriented manifold");
    assert!(topo.is_closed());
    assert_eq!(topo.component_count(&body.mesh), 1);
    assert_eq!(topo.euler_characteristic(&body.mesh), 2);
    assert!(
        body.mesh.signed_volume() > 0.0,
        "outward normals give positive volume"
    );
    // outward: normals at the extremities point away from the body's centre line
    let (lo, hi) = body.mesh.bounds().expect("bounds");
    let normals = body.mesh.vertex_normals();
    for (p, n) in body.mesh.positions.iter().zip(&normals) {
        if p.y > hi.y - 0.01 {
            assert!(n.y > 0.5, "top of the head faces up");
        }
        if p.x > hi.x - 0.005 {
            assert!(n.x > 0.3, "left fingertips face +X");
        }
    }
    assert!(lo.y.abs() < 1e-4, "soles on the ground");
}

#[test]
fn skin_weights_are_valid_and_smooth() {
    let body = default_body();
    body.skin
        .validate(body.mesh.vertex_count())
        .expect("valid skin");
    assert!(
        body.skin
            .joints
            .iter()
            .enumerate()
            .all(|(v, _)| body.skin.influence_count(v) <= 4)
    );
    let topo = Topology::build(&body.mesh).expect("manifold");
    let mut worst = 0.0f32;
    for &[a, b] in &topo.edges {
        for bone in 0..22 {
            let d = (body.skin.weight_of(a as usize, bone) - body.skin.weight_of(b as usize, bone))
                .abs();
            worst = worst.max(d);
        }
    }
    assert!(worst < 0.35, "largest weight jump across an edge {worst}");
    // every bone drives some part of the body
    for bone in 0..22 {
        assert!(
            (0..body.mesh.vertex_count()).any(|v| body.skin.weight_of(v, bone) > 0.5),
            "bone {bone} dominates nowhere"
        );
    }
    // hands follow the wrists, feet the ankles
    let (_, hi) = body.mesh.bounds().expect("bounds");
    let tip = body
        .mesh
        .positions
        .iter()
        .position(|p| p.x > hi.x - 0.003)
        .expect("fingertip");
    assert!(body.skin.weight_of(tip, JointId::LEFT_WRIST.index()) > 0.95);
}

#[test]
fn rest_pose_skinning_is_identity_and_lbs_matches_dqs_on_rigid_parts() {
    let body = default_body();
    for method in [SkinningMethod::Lbs, SkinningMethod::Dqs] {
        let posed = body.posed_positions(&Pose::rest(), method);
        for (a, b) in posed.iter().zip(&body.mesh.positions) {
            assert!((*a - *b).length() < 1e-5);
        }
    }
    let mut pose = Pose::rest();
    pose.set_rotation(JointId::LEFT_ELBOW, quat_exp(Vec3::new(0.2, -1.3, 0.1)));
    pose.set_rotation(JointId::SPINE2, quat_exp(Vec3::new(0.3, 0.4, -0.1)));
    pose.set_rotation(JointId::RIGHT_HIP, quat_exp(Vec3::new(-0.8, 0.2, -0.3)));
    pose.translation = Vec3::new(0.3, -0.1, 0.5);
    let lbs = body.posed_positions(&pose, SkinningMethod::Lbs);
    let dqs = body.posed_positions(&pose, SkinningMethod::Dqs);
    let mut single = 0;
    for v in 0..lbs.len() {
        if body.skin.influence_count(v) == 1 {
            single += 1;
            assert!((lbs[v] - dqs[v]).length() < 1e-4);
        }
    }
    assert!(
        single > 500,
        "many vertices are driven by one bone ({single})"
    );
}

#[test]
fn height_parameter_is_measured_height() {
    for height in [1.5f32, 1.68, 2.0] {
        let body = small(BodyShape {
            height,
            ..Default::default()
        });
        let (lo, hi) = body.mesh.bounds().expect("bounds");
        assert!(
            ((hi.y - lo.y) - height).abs() < 0.01,
            "asked {height}, measured {}",
            hi.y - lo.y
        );
    }
}

#[test]
fn shape_parameters_change_the_body_continuously() {
    let base = small(BodyShape::default());
    let width_at = |b: &Body, y0: f32, y1: f32| {
        let xs = b
            .mesh
            .positions
            .iter()
            .filter(|p| p.y > y0 && p.y < y1)
            .map(|p| p.x);
        xs.clone().fold(f32::MIN, f32::max) - xs.fold(f32::MAX, f32::min)
    };
    // hips: breadth across the buttocks band
    let hips = |b: &Body| width_at(b, 0.86, 0.92);
    let wide = small(BodyShape {
        hip_width: 0.42,
        ..Default::default()
    });
    let wider = small(BodyShape {
        hip_width: 0.43,
        ..Default::default()
    });
    assert!(
        hips(&wide) > hips(&base) + 0.03,
        "{} vs {}",
        hips(&wide),
        hips(&base)
    );
    assert!(
        (hips(&wider) - hips(&wide)).abs() < 0.02,
        "1 cm of parameter moves the hips by little"
    );
    // weight: mass from volume at the density of the body
    for weight in [50.0f32, 110.0] {
        let b = small(BodyShape {
            weight,
            ..Default::default()
        });
        let mass = b.mesh.signed_volume() as f32 * 1010.0;
        assert!(
            (mass - weight).abs() / weight < 0.08,
            "weight {weight} gives {mass} kg"
        );
    }
    // shoulders: the arms start farther out
    let sh = small(BodyShape {
        shoulder_width: 0.48,
        ..Default::default()
    });
    assert!(
        sh.skeleton.rest_position(JointId::LEFT_SHOULDER).x
            > base.skeleton.rest_position(JointId::LEFT_SHOULDER).x + 0.025
    );
}

#[test]
fn out_of_range_shapes_are_refused() {
    let bad = BodyShape {
        height: 2.5,
        ..Default::default()
    };
    assert!(matches!(
        Body::generate(&bad, &BodyOptions::default()),
        Err(BodyError::OutOfRange { name: "height", .. })
    ));
    let nan = BodyShape {
        weight: f32::NAN,
        ..Default::default()
    };
    assert!(matches!(
        Body::generate(&nan, &BodyOptions::default()),
        Err(BodyError::OutOfRange { name: "weight", .. })
    ));
    assert!(matches!(
        Body::generate(
            &BodyShape::default(),
            &BodyOptions {
                target_vertices: 10
            }
        ),
        Err(BodyError::Resolution(10))
    ));
}
