//! Cutting a mesh along the zero set of a field (marching triangles): the part where the
//! field is negative is kept, triangles that straddle the cut are split, and only the
//! largest connected piece is returned. Garments are cut out of closed offset surfaces
//! this way (neck, waist, sleeve and leg openings).

use std::collections::HashMap;

use glam::Vec3;

use super::isosurface::Field;
use super::topology::Topology;
use super::trimesh::{TriMesh, union_root};

/// Keeps the part of `mesh` where `clip < 0`, splitting straddling triangles on the
/// zero set, and returns its largest connected component (orientation preserved).
pub fn clip_mesh(mesh: &TriMesh, clip: &dyn Field) -> TriMesh {
    let eps = 1e-6;
    let vals: Vec<f32> = mesh
        .positions
        .iter()
        .map(|&p| {
            let v = clip.value(p);
            if v.abs() < eps { eps } else { v }
        })
        .collect();
    let mut positions: Vec<Vec3> = Vec::new();
    let mut kept_index = vec![u32::MAX; mesh.positions.len()];
    let mut edge_point: HashMap<(u32, u32), u32> = HashMap::new();
    let mut triangles = Vec::new();
    let mut keep_vertex = |v: u32, positions: &mut Vec<Vec3>| -> u32 {
        if kept_index[v as usize] == u32::MAX {
            kept_index[v as usize] = positions.len() as u32;
            positions.push(mesh.positions[v as usize]);
        }
        kept_index[v as usize]
    };
    let mut cut_point = |a: u32, b: u32, positions: &mut Vec<Vec3>| -> u32 {
        *edge_point.entry((a.min(b), a.max(b))).or_insert_with(|| {
            let (fa, fb) = (vals[a as usize], vals[b as usize]);
            let t = fa / (fa - fb);
            let mut p = mesh.positions[a as usize].lerp(mesh.positions[b as usize], t);
            // refine onto the zero set along the edge (the field is not linear)
            let (mut lo, mut hi) = (0.0f32, 1.0f32);
            if fa > 0.0 {
                std::mem::swap(&mut lo, &mut hi);
            }
            for _ in 0..20 {
                let m = 0.5 * (lo + hi);
                let q = mesh.positions[a as usize].lerp(mesh.positions[b as usize], m);
                if clip.value(q) < 0.0 {
                    lo = m
                } else {
                    hi = m
                }
                p = q;
            }
            positions.push(p);
            (positions.len() - 1) as u32
        })
    };
    for tri in &mesh.triangles {
        let inside = tri.map(|v| vals[v as usize] < 0.0);
        let n = inside.iter().filter(|&&x| x).count();
        match n {
            3 => triangles.push(tri.map(|v| keep_vertex(v, &mut positions))),
            0 => {}
            _ => {
                // rotate so corner 0 is the odd one out
                let k = (0..3).find(|&k| (n == 1) == inside[k]).unwrap_or(0);
                let (a, b, c) = (tri[k], tri[(k + 1) % 3], tri[(k + 2) % 3]);
                let ab = cut_point(a, b, &mut positions);
                let ca = cut_point(c, a, &mut positions);
                if n == 1 {
                    let va = keep_vertex(a, &mut positions);
                    triangles.push([va, ab, ca]);
                } else {
                    let vb = keep_vertex(b, &mut positions);
                    let vc = keep_vertex(c, &mut positions);
                    triangles.push([ab, vb, vc]);
                    triangles.push([ab, vc, ca]);
                }
            }
        }
    }
    largest_component(&TriMesh::new(positions, triangles))
}

/// The disjoint-set forest of `mesh`'s vertices joined through its triangles (see
/// [`union_root`]): two vertices have one root when triangles connect them, whatever
/// the mesh's manifoldness.
pub(crate) fn vertex_forest(mesh: &TriMesh) -> Vec<u32> {
    let mut parent: Vec<u32> = (0..mesh.positions.len() as u32).collect();
    for tri in &mesh.triangles {
        let r0 = union_root(&mut parent, tri[0]);
        for &v in &tri[1..] {
            let r = union_root(&mut parent, v);
            if r != r0 {
                parent[r as usize] = r0;
            }
        }
    }
    parent
}

/// The largest connected component of a mesh (by triangle count), reindexed.
pub fn largest_component(mesh: &TriMesh) -> TriMesh {
    let nv = mesh.positions.len();
    let mut parent = vertex_forest(mesh);
    let mut count: HashMap<u32, usize> = HashMap::new();
    for tri in &mesh.triangles {
        *count.entry(union_root(&mut parent, tri[0])).or_default() += 1;
    }
    let Some((&best, _)) = count
        .iter()
        .max_by_key(|(r, c)| (**c, std::cmp::Reverse(**r)))
    else {
        return TriMesh::default();
    };
    let mut remap = vec![u32::MAX; nv];
    let mut positions = Vec::new();
    let mut triangles = Vec::new();
    for tri in &mesh.triangles {
        if union_root(&mut parent, tri[0]) != best {
            continue;
        }
        triangles.push(tri.map(|v| {
            if remap[v as usize] == u32::MAX {
                remap[v as usize] = positions.len() as u32;
                positions.push(mesh.positions[v as usize]);
            }
            remap[v as usize]
        }));
    }
    TriMesh::new(positions, triangles)
}

/// True when every triangle of `mesh` has all corners in a single component and the
/// mesh is an oriented manifold (convenience for tests and asset checks).
pub fn is_single_manifold(mesh: &TriMesh) -> bool {
    Topology::build(mesh)
        .map(|t| t.component_count(mesh) == 1)
        .unwrap_or(false)
}
