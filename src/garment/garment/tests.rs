use std::sync::OnceLock;

use super::*;
use crate::body::BodyOptions;
use crate::garment::{GarmentConfig, Legs, Sleeves};

fn body() -> &'static Body {
    static B: OnceLock<Body> = OnceLock::new();
    B.get_or_init(|| Body::default_body().expect("body"))
}

fn check_garment(g: &Garment, loops: usize) {
    let topo = Topology::build(&g.mesh).expect("oriented manifold with boundary");
    assert_eq!(topo.component_count(&g.mesh), 1);
    assert_eq!(topo.boundary_loops(&g.mesh).len(), loops);
    assert_eq!(
        topo.euler_characteristic(&g.mesh),
        2 - loops as i64,
        "a sphere with {loops} holes"
    );
    g.skin.validate(g.vertex_count()).expect("skin");
    for v in 0..g.vertex_count() {
        let s: f32 = g.region_weights_of(v).iter().sum();
        assert!((s - 1.0).abs() < 1e-4);
    }
    // the rest shape lies outside the body, with clearance
    let q = MeshQuery::build(&body().mesh).expect("query");
    let worst = g
        .mesh
        .positions
        .iter()
        .map(|p| q.signed_distance(*p))
        .fold(f32::MAX, f32::min);
    assert!(
        worst > REST_CLEARANCE - 1e-4,
        "closest garment vertex {worst} m from the body"
    );
    // looser than the body: most vertices are more than a centimetre out
    let loose = g
        .mesh
        .positions
        .iter()
        .filter(|p| q.signed_distance(**p) > 0.01)
        .count();
    assert!(
        loose * 10 > g.vertex_count() * 8,
        "only {loose} loose vertices"
    );
}

#[test]
fn default_tshirt_is_a_bound_shirt_with_four_openings() {
    let cfg = GarmentConfig::builtin("tshirt").expect("cfg");
    let g = Garment::generate(body(), &cfg).expect("tshirt");
    let n = g.vertex_count();
    assert!((2850..=3150).contains(&n), "~3k vertices, got {n}");
    check_garment(&g, 4);
    // it covers the torso: from below the hips to the shoulders, and the sleeves end
    // between shoulder and elbow
    let (lo, hi) = g.mesh.bounds().expect("bounds");
    let sk = &body().skeleton;
    assert!(lo.y < sk.rest_position(crate::skeleton::JointId::LEFT_HIP).y);
    assert!(hi.y > sk.rest_position(crate::skeleton::JointId::LEFT_SHOULDER).y);
    assert!(hi.x > sk.rest_position(crate::skeleton::JointId::LEFT_SHOULDER).x + 0.05);
    assert!(hi.x < sk.rest_position(crate::skeleton::JointId::LEFT_ELBOW).x);
    // sleeve vertices are bound to the upper arm, hem vertices to the hips
    let sleeve = (0..n)
        .max_by(|&a, &b| g.mesh.positions[a].x.total_cmp(&g.mesh.positions[b].x))
        .expect("sleeve");
    assert!(
        g.skin
            .weight_of(sleeve, crate::skeleton::JointId::LEFT_SHOULDER.index())
            > 0.5
    );
}

#[test]
fn long_sleeves_pants_and_shorts() {
    let mut cfg = GarmentConfig::builtin("tshirt").expect("cfg");
    cfg.sleeves = Sleeves::Long;
    cfg.target_vertices = 2000;
    let g = Garment::generate(body(), &cfg).expect("long sleeves");
    check_garment(&g, 4);
    let wrist = body()
        .skeleton
        .rest_position(crate::skeleton::JointId::LEFT_WRIST)
        .x;
    assert!(g.mesh.bounds().expect("b").1.x > wrist - 0.05);
    let mut pants = GarmentConfig::builtin("pants").expect("cfg");
    pants.target_vertices = 2000;
    let p = Garment::generate(body(), &pants).expect("pants");
    check_garment(&p, 3);
    assert!(
        p.mesh.bounds().expect("b").0.y < 0.15,
        "long pants reach the ankles"
    );
    pants.length = Legs::Shorts;
    let s = Garment::generate(body(), &pants).expect("shorts");
    check_garment(&s, 3);
    assert!(
        s.mesh.bounds().expect("b").0.y
            > body()
                .skeleton
                .rest_position(crate::skeleton::JointId::LEFT_KNEE)
                .y
    );
}

#[test]
fn twelve_thousand_vertex_tshirt_for_benchmarks() {
    let mut cfg = GarmentConfig::builtin("tshirt").expect("cfg");
    cfg.target_vertices = 12_500;
    let g = Garment::generate(body(), &cfg).expect("12k tshirt");
    assert!(g.vertex_count() >= 12_000, "{}", g.vertex_count());
    let topo = Topology::build(&g.mesh).expect("manifold");
    assert_eq!(topo.boundary_loops(&g.mesh).len(), 4);
}

#[test]
fn imported_obj_garment_binds_like_the_generated_one() {
    let cfg = GarmentConfig::builtin("tshirt").expect("cfg");
    let g = Garment::generate(body(), &cfg).expect("tshirt");
    let mut obj = Vec::new();
    crate::mesh::write_obj(&mut obj, &g.mesh, "test").expect("write");
    let mesh = crate::mesh::read_obj(&obj[..], "shirt.obj").expect("read");
    let imported = Garment::bind("imported", mesh, body(), g.regions.clone()).expect("bind");
    let same = imported
        .binding
        .iter()
        .zip(&g.binding)
        .filter(|(a, b)| a == b)
        .count();
    assert!(
        same * 100 >= g.vertex_count() * 99,
        "{same} of {} bindings agree",
        g.vertex_count()
    );
    // a mesh far from the body is refused by name
    let mut far = g.mesh.clone();
    for p in &mut far.positions {
        p.x += 5.0;
    }
    assert!(matches!(
        Garment::bind("far", far, body(), g.regions.clone()),
        Err(GarmentError::FarFromBody { .. })
    ));
    // procedural garments need the procedural body
    let mut imported_body = body().clone();
    imported_body.field = None;
    assert!(matches!(
        Garment::generate(&imported_body, &cfg),
        Err(GarmentError::NoBodyField)
    ));
    let _ = BodyOptions::default();
}
