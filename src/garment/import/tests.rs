use std::sync::OnceLock;

use glam::Vec3;

use super::*;
use crate::garment::{GarmentConfig, GarmentSpec};
use crate::mesh::{Topology, write_obj};

fn body() -> &'static Body {
    static B: OnceLock<Body> = OnceLock::new();
    B.get_or_init(|| Body::default_body().expect("body"))
}

/// The procedural T-shirt, as an artist would start from (`clothcast assets`).
fn tshirt() -> &'static Garment {
    static G: OnceLock<Garment> = OnceLock::new();
    G.get_or_init(|| {
        let cfg = GarmentConfig::builtin("tshirt").expect("cfg");
        Garment::generate(body(), &cfg).expect("tshirt")
    })
}

fn regions() -> RegionTable {
    tshirt().regions.clone()
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("clothcast-import-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    dir
}

/// An OBJ in centimetres, its vertices split along a seam as exporters split them at
/// texture seams, with a stray vertex no face uses: imported with `scale = 0.01` it is
/// the same garment, bound the same way.
#[test]
fn a_garment_in_centimetres_with_split_seams_imports_as_the_same_garment() {
    let g = tshirt();
    let mut mesh = g.mesh.clone();
    // split: triangles touching vertex 0 except the first get a copy of it
    let copy = mesh.positions.len() as u32;
    mesh.positions.push(mesh.positions[0]);
    let mut seen = false;
    for t in &mut mesh.triangles {
        if let Some(c) = t.iter_mut().find(|v| **v == 0) {
            if seen {
                *c = copy;
            }
            seen = true;
        }
    }
    mesh.positions.push(Vec3::new(9.0, 9.0, 9.0));
    for p in &mut mesh.positions {
        *p *= 100.0;
    }
    let dir = temp_dir("cm");
    let mut obj = Vec::new();
    write_obj(&mut obj, &mesh, "a shirt in cm").expect("write");
    std::fs::write(dir.join("shirt.obj"), obj).expect("obj");
    let toml =
        "name = \"my_shirt\"\nmesh = \"shirt.obj\"\nscale = 0.01\nregions_like = \"tshirt\"\n";
    let GarmentSpec::Mesh(cfg) = GarmentSpec::from_toml(toml).expect("parses") else {
        panic!("a file with `mesh` is a mesh garment");
    };
    let imported = Garment::import(&cfg, &dir, body()).expect("imports");
    assert_eq!(imported.name, "my_shirt");
    assert_eq!(imported.vertex_count(), g.vertex_count());
    Topology::build(&imported.mesh).expect("manifold again");
    let moved = imported
        .mesh
        .positions
        .iter()
        .zip(&g.mesh.positions)
        .map(|(a, b)| (*a - *b).length())
        .fold(0.0f32, f32::max);
    assert!(moved < 1e-5, "moved {moved} m");
    assert_eq!(imported.binding, g.binding);
    assert_eq!(imported.region_weights, g.region_weights);
    assert_eq!(
        imported.metric, imported.mesh.positions,
        "unstressed as modelled"
    );
    // the same shirt as a skinned GLB (as `clothcast assets` writes it), its sleeves
    // cut for arms 55° down, with one region of every bone
    let normals = g.mesh.vertex_normals();
    let scene = crate::mesh::GlbScene {
        skeleton: Some(crate::body::glb_skeleton(&body().skeleton)),
        meshes: vec![g.glb_mesh(&normals, [1.0; 4])],
        animation: None,
    };
    let file = std::fs::File::create(dir.join("shirt.glb")).expect("create");
    crate::mesh::write_glb(file, &scene).expect("glb");
    let bones: Vec<String> = crate::skeleton::JointId::all()
        .map(|j| format!("\"{}\"", j.name()))
        .collect();
    let toml = format!(
        "name = \"glb_shirt\"\nmesh = \"shirt.glb\"\npattern_arm_angle = 55\n[[regions]]\nname = \"all\"\nbones = [{}]\n",
        bones.join(", ")
    );
    let GarmentSpec::Mesh(cfg) = GarmentSpec::from_toml(&toml).expect("parses") else {
        panic!("a mesh garment");
    };
    let from_glb = Garment::import(&cfg, &dir, body()).expect("imports the glb");
    assert_eq!(from_glb.vertex_count(), g.vertex_count());
    assert_eq!(from_glb.regions.len(), 1);
    assert!(
        from_glb
            .region_weights
            .iter()
            .all(|w| (*w - 1.0).abs() < 1e-5)
    );
    // the pattern's arm angle gives the procedural shirt's unstressed shape
    let metric_gap = from_glb
        .metric
        .iter()
        .zip(&g.metric)
        .map(|(a, b)| (*a - *b).length())
        .fold(0.0f32, f32::max);
    assert!(metric_gap < 1e-4, "metric differs by {metric_gap} m");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A few vertices slightly inside the body (a garment modelled loosely) are moved out
/// to the rest clearance; a garment that sinks deep into the body is refused, naming
/// the vertex and how deep it lies.
#[test]
fn shallow_penetrations_are_pushed_out_and_deep_ones_refused() {
    let g = tshirt();
    let query = MeshQuery::build(&body().mesh).expect("query");
    let depth_of = |p: Vec3| -query.closest(p).signed_distance(p);
    // 5 mm inside at every 50th vertex
    let mut mesh = g.mesh.clone();
    let sunk: Vec<usize> = (0..mesh.vertex_count()).step_by(50).collect();
    for &v in &sunk {
        let hit = query.closest(mesh.positions[v]);
        mesh.positions[v] = hit.point - hit.normal * 0.005;
    }
    assert!(sunk.iter().all(|&v| depth_of(mesh.positions[v]) > 0.004));
    let imported = Garment::from_mesh("loose", mesh.clone(), body(), regions(), 0.0)
        .expect("shallow penetrations are fixed");
    let worst = sunk
        .iter()
        .map(|&v| depth_of(imported.mesh.positions[v]))
        .fold(f32::MIN, f32::max);
    assert!(
        worst <= -0.9 * REST_CLEARANCE,
        "a sunk vertex is {worst} m deep after the import"
    );
    // 5 cm inside at one vertex
    let v = sunk[3];
    let hit = query.closest(mesh.positions[v]);
    mesh.positions[v] = hit.point - hit.normal * 0.05;
    match Garment::from_mesh("sunk", mesh, body(), regions(), 0.0) {
        Err(GarmentError::InsideBody {
            vertex,
            depth,
            limit,
        }) => {
            assert_eq!(vertex, v);
            assert!((depth - 0.05).abs() < 0.01, "{depth}");
            assert_eq!(limit, MAX_IMPORT_DEPTH);
        }
        other => panic!("expected InsideBody, got {other:?}"),
    }
}

/// What a user's file can get wrong is refused by name: the format, a missing file,
/// non-finite or degenerate geometry, a non-manifold mesh, too many vertices, far from
/// the body (wrong units), and the configuration itself.
#[test]
fn bad_garment_meshes_and_configs_are_refused_by_name() {
    let dir = temp_dir("bad");
    std::fs::write(dir.join("shirt.stl"), "solid x\nendsolid x\n").expect("stl");
    assert!(matches!(
        read_garment_mesh(&dir.join("shirt.stl")),
        Err(GarmentError::Format(p)) if p.ends_with("shirt.stl")
    ));
    let missing = read_garment_mesh(&dir.join("nowhere.obj")).expect_err("missing");
    assert!(missing.to_string().contains("nowhere.obj"), "{missing}");
    std::fs::write(dir.join("garbage.glb"), b"not a glb").expect("glb");
    assert!(matches!(
        read_garment_mesh(&dir.join("garbage.glb")),
        Err(GarmentError::MeshFile(_))
    ));
    let tri = |positions: Vec<Vec3>, triangles: Vec<[u32; 3]>| {
        Garment::from_mesh(
            "x",
            TriMesh::new(positions, triangles),
            body(),
            regions(),
            0.0,
        )
    };
    let chest = body()
        .skeleton
        .rest_position(crate::skeleton::JointId::SPINE3)
        + Vec3::new(0.0, 0.0, 0.2);
    let quad = vec![
        chest,
        chest + Vec3::X * 0.05,
        chest + Vec3::Y * 0.05,
        chest + Vec3::new(0.05, 0.05, 0.0),
    ];
    let mut nan = quad.clone();
    nan[1].x = f32::NAN;
    assert!(matches!(
        tri(nan, vec![[0, 1, 2]]),
        Err(GarmentError::Mesh(crate::mesh::MeshError::NonFinite(1)))
    ));
    // three corners on a line
    let line = vec![chest, chest + Vec3::X * 0.05, chest + Vec3::X * 0.1];
    assert!(matches!(
        tri(line, vec![[0, 1, 2]]),
        Err(GarmentError::Mesh(crate::mesh::MeshError::Degenerate(0)))
    ));
    // one edge shared by three triangles
    let mut fan = quad.clone();
    fan.push(chest + Vec3::new(0.02, 0.02, 0.05));
    assert!(matches!(
        tri(fan, vec![[0, 1, 2], [1, 3, 2], [1, 2, 4]]),
        Err(GarmentError::Mesh(_))
    ));
    // the avatar exported along with the shirt: its closed surface is refused
    let shirt = &tshirt().mesh;
    let avatar = &body().mesh;
    let off = shirt.vertex_count() as u32;
    let both = TriMesh::new(
        shirt
            .positions
            .iter()
            .chain(&avatar.positions)
            .copied()
            .collect(),
        shirt
            .triangles
            .iter()
            .copied()
            .chain(avatar.triangles.iter().map(|t| t.map(|v| v + off)))
            .collect(),
    );
    match Garment::from_mesh("both", both, body(), regions(), 0.0) {
        Err(GarmentError::ClosedPart { vertex, vertices }) => {
            assert_eq!((vertex, vertices), (off as usize, avatar.vertex_count()));
        }
        other => panic!("expected ClosedPart, got {other:?}"),
    }
    // a sheet in metres, read as if it were centimetres: 100 times too large
    let far: Vec<Vec3> = quad.iter().map(|p| *p * 100.0).collect();
    assert!(matches!(
        tri(far, vec![[0, 1, 2], [1, 3, 2]]),
        Err(GarmentError::FarFromBody { .. })
    ));
    // a grid of 317 × 317 vertices (100 489), no matter where
    let n = 317u32;
    let grid: Vec<Vec3> = (0..n * n)
        .map(|i| chest + Vec3::new((i % n) as f32, (i / n) as f32, 0.0) * 1e-3)
        .collect();
    let cells: Vec<[u32; 3]> = (0..n - 1)
        .flat_map(|y| (0..n - 1).map(move |x| (x, y)))
        .flat_map(|(x, y)| {
            let a = y * n + x;
            [[a, a + 1, a + n], [a + 1, a + n + 1, a + n]]
        })
        .collect();
    assert!(matches!(
        tri(grid, cells),
        Err(GarmentError::TooManyVertices {
            count: 100_489,
            limit: MAX_IMPORT_VERTICES
        })
    ));
    // configurations
    let parse = |t: &str| GarmentSpec::from_toml(t).map(|_| ());
    for (text, says) in [
        ("name = \"x\"\nmesh = \"a.obj\"\n", "no regions"),
        (
            "name = \"x\"\nmesh = \"a.obj\"\nregions_like = \"tshirt\"\n[[regions]]\nname = \"all\"\nbones = []\n",
            "not both",
        ),
        (
            "name = \"x\"\nmesh = \"a.obj\"\nregions_like = \"cape\"\n",
            "no built-in garment \"cape\"",
        ),
        (
            "name = \"x\"\nmesh = \"a.obj\"\nscale = 0\nregions_like = \"tshirt\"\n",
            "scale = 0",
        ),
        (
            "name = \"x\"\nmesh = \"a.obj\"\nease = 0.02\nregions_like = \"tshirt\"\n",
            "unknown field `ease`",
        ),
        (
            "name = \"x\"\nmesh = \"\"\nregions_like = \"tshirt\"\n",
            "`mesh` is empty",
        ),
        ("name = \"x\"\nmesh = 3\n", "invalid type"),
    ] {
        let err = parse(text).expect_err(text).to_string();
        assert!(err.contains(says), "{text}: {err}");
    }
    // a procedural garment's file is still one
    assert!(matches!(
        GarmentSpec::from_toml(crate::garment::BUILTIN_GARMENTS[0].1),
        Ok(GarmentSpec::Pattern(_))
    ));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A dense garment (an artist's 12 000-vertex T-shirt) imported with
/// `target_vertices = 3000` is remeshed to about that many vertices with triangles at
/// least as well shaped as the procedural shirt's, every vertex on the modelled
/// surface and the hems and openings where they were; a mesh already under the target
/// is kept as it is, and an absurd target is refused by name.
#[test]
fn a_dense_garment_is_remeshed_to_its_target_on_its_own_surface() {
    let mut cfg = GarmentConfig::builtin("tshirt").expect("cfg");
    cfg.target_vertices = 12_000;
    let dense = Garment::generate(body(), &cfg).expect("dense shirt").mesh;
    assert!(dense.vertex_count() > 10_000, "{}", dense.vertex_count());
    let dir = temp_dir("dense");
    let mut obj = Vec::new();
    write_obj(&mut obj, &dense, "a dense shirt").expect("write");
    std::fs::write(dir.join("dense.obj"), obj).expect("obj");
    let toml = "name = \"dense\"\nmesh = \"dense.obj\"\ntarget_vertices = 3000\nregions_like = \"tshirt\"\n";
    let GarmentSpec::Mesh(mc) = GarmentSpec::from_toml(toml).expect("parses") else {
        panic!("a mesh garment");
    };
    let g = Garment::import(&mc, &dir, body()).expect("imports");
    let n = g.vertex_count();
    assert!((2700..=3300).contains(&n), "{n} vertices");
    let topo = Topology::build(&g.mesh).expect("manifold");
    let dense_topo = Topology::build(&dense).expect("manifold");
    assert_eq!(
        topo.boundary_loops(&g.mesh).len(),
        dense_topo.boundary_loops(&dense).len(),
        "the neck, waist and sleeve openings"
    );
    // on the modelled surface (the import's push-out moves nothing here: the shirt
    // keeps its clearance), boundary vertices on the modelled boundary
    use crate::mesh::Field;
    let surface = crate::mesh::MeshSurface::new(&dense).expect("surface");
    let hems = crate::mesh::MeshBoundary::new(&dense).expect("boundary");
    let on_boundary = topo.boundary_vertices(n);
    for (v, p) in g.mesh.positions.iter().enumerate() {
        let off = surface.value(*p).abs();
        assert!(off < 5e-4, "vertex {v} is {off} m off the surface");
        if on_boundary[v] {
            let off = hems.value(*p);
            assert!(off < 5e-4, "boundary vertex {v} is {off} m off the hem");
        }
    }
    // triangle shape 2√3·|cross| / Σ edge² (1 equilateral): mean and worst
    let quality = |m: &TriMesh| -> (f32, f32) {
        let q: Vec<f32> = m
            .triangles
            .iter()
            .map(|t| {
                let [a, b, c] = t.map(|v| m.positions[v as usize]);
                let s =
                    (b - a).length_squared() + (c - b).length_squared() + (a - c).length_squared();
                2.0 * 3f32.sqrt() * (b - a).cross(c - a).length() / s
            })
            .collect();
        (
            q.iter().sum::<f32>() / q.len() as f32,
            q.iter().copied().fold(1.0f32, f32::min),
        )
    };
    let ((mean, worst), (pmean, pworst)) = (quality(&g.mesh), quality(&tshirt().mesh));
    let (_, dworst) = quality(&dense);
    assert!(
        mean >= pmean - 0.01 && worst >= pworst.min(0.2) && worst > 2.0 * dworst,
        "quality mean {mean}, worst {worst} (procedural {pmean}, {pworst}; dense worst {dworst})"
    );
    // under the target: as modelled
    let small = Garment::from_mesh("small", tshirt().mesh.clone(), body(), regions(), 0.0)
        .expect("imports");
    let kept = remeshed(&tshirt().mesh, 5000).expect("kept");
    assert_eq!(kept.positions, small.mesh.positions);
    let bad =
        "name = \"d\"\nmesh = \"dense.obj\"\ntarget_vertices = 10\nregions_like = \"tshirt\"\n";
    let e = GarmentSpec::from_toml(bad).expect_err("too few");
    assert!(e.to_string().contains("target_vertices"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
