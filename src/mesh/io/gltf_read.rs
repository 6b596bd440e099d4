//! glTF 2.0 reading (JSON + external buffers, or GLB) through the `gltf` crate: merged
//! triangle meshes in world space, and skinned meshes with their joint hierarchy.
//!
//! Every accessor is bounds-checked against its buffer before it is read, sparse
//! accessors and data URIs are refused by name, and sizes are capped, so a hostile file
//! gives an error instead of a panic or an oversized allocation.

use std::path::Path;

use glam::{Mat4, Vec3, Vec4};

use super::{MAX_ELEMENTS, MeshIoError};
use crate::mesh::TriMesh;

/// Largest file accepted, bytes.
const MAX_FILE_BYTES: u64 = 1 << 30;

/// A skin's joint hierarchy as found in a file.
#[derive(Clone, Debug)]
pub struct LoadedSkin {
    /// Joint node names (empty string when unnamed).
    pub names: Vec<String>,
    /// Parent of each joint within this list (`None` when the parent is not a joint).
    pub parents: Vec<Option<usize>>,
    /// World transform of each joint in the file's rest (node) pose.
    pub rest_world: Vec<Mat4>,
}

/// A skinned mesh: rest-pose world positions, influences indexing [`LoadedSkin`]'s joints.
#[derive(Clone, Debug)]
pub struct LoadedSkinnedMesh {
    /// Rest-pose geometry (the skin applied with the nodes' rest transforms), metres.
    pub mesh: TriMesh,
    /// Joint indices per vertex (into `skin.names`).
    pub joints: Vec<[u16; 4]>,
    /// Weights per vertex, summing to 1.
    pub weights: Vec<[f32; 4]>,
    /// The skin.
    pub skin: LoadedSkin,
}

struct Loaded {
    doc: gltf::Document,
    buffers: Vec<Vec<u8>>,
}

fn gerr(m: impl Into<String>) -> MeshIoError {
    MeshIoError::Gltf(m.into())
}

fn load(path: &Path) -> Result<Loaded, MeshIoError> {
    let name = path.display().to_string();
    let io = |e| MeshIoError::Io {
        path: name.clone(),
        source: e,
    };
    let len = std::fs::metadata(path).map_err(io)?.len();
    if len > MAX_FILE_BYTES {
        return Err(MeshIoError::TooLarge {
            path: name,
            what: "file size",
            limit: MAX_FILE_BYTES as usize,
        });
    }
    let bytes = std::fs::read(path).map_err(io)?;
    let gltf = gltf::Gltf::from_slice(&bytes).map_err(|e| gerr(format!("{name}: {e}")))?;
    let base = path.parent().unwrap_or(Path::new("."));
    let mut buffers = Vec::new();
    for b in gltf.document.buffers() {
        let data = match b.source() {
            gltf::buffer::Source::Bin => gltf
                .blob
                .clone()
                .ok_or_else(|| gerr("buffer refers to a missing GLB BIN chunk"))?,
            gltf::buffer::Source::Uri(uri) => {
                if uri.starts_with("data:") {
                    return Err(gerr(
                        "embedded data: URIs are not supported; convert the file to .glb",
                    ));
                }
                if uri.contains("..") || uri.starts_with('/') || uri.contains("://") {
                    return Err(gerr(format!(
                        "buffer URI {uri:?} must be a relative path next to the file"
                    )));
                }
                let p = base.join(uri);
                std::fs::read(&p).map_err(|e| MeshIoError::Io {
                    path: p.display().to_string(),
                    source: e,
                })?
            }
        };
        if data.len() < b.length() {
            return Err(gerr(format!(
                "buffer {} holds {} bytes, declares {}",
                b.index(),
                data.len(),
                b.length()
            )));
        }
        buffers.push(data);
    }
    Ok(Loaded {
        doc: gltf.document,
        buffers,
    })
}

/// Checks that an accessor is dense, not too large, and lies inside its buffer.
fn check_accessor(a: &gltf::Accessor<'_>, buffers: &[Vec<u8>]) -> Result<(), MeshIoError> {
    if a.sparse().is_some() {
        return Err(gerr(format!(
            "accessor {} is sparse (not supported)",
            a.index()
        )));
    }
    let count = a.count();
    if count == 0 || count > 4 * MAX_ELEMENTS {
        return Err(gerr(format!("accessor {} has count {count}", a.index())));
    }
    let view = a
        .view()
        .ok_or_else(|| gerr(format!("accessor {} has no buffer view", a.index())))?;
    let elem = a.size();
    let stride = view.stride().unwrap_or(elem);
    let need = a
        .offset()
        .checked_add(
            stride
                .checked_mul(count - 1)
                .ok_or_else(|| gerr("accessor size overflows"))?,
        )
        .and_then(|x| x.checked_add(elem))
        .ok_or_else(|| gerr("accessor size overflows"))?;
    if need > view.length() {
        return Err(gerr(format!(
            "accessor {} reads {need} bytes from a view of {}",
            a.index(),
            view.length()
        )));
    }
    let end = view
        .offset()
        .checked_add(view.length())
        .ok_or_else(|| gerr("view size overflows"))?;
    let buf = buffers
        .get(view.buffer().index())
        .ok_or_else(|| gerr("view refers to a missing buffer"))?;
    if end > buf.len() {
        return Err(gerr(format!(
            "buffer view {} ends at byte {end}, buffer has {}",
            view.index(),
            buf.len()
        )));
    }
    Ok(())
}

fn node_world_transforms(doc: &gltf::Document) -> Result<Vec<Mat4>, MeshIoError> {
    let n = doc.nodes().count();
    let mut parent = vec![None; n];
    for node in doc.nodes() {
        for c in node.children() {
            parent[c.index()] = Some(node.index());
        }
    }
    let local: Vec<Mat4> = doc
        .nodes()
        .map(|nd| Mat4::from_cols_array_2d(&nd.transform().matrix()))
        .collect();
    let mut world = vec![None; n];
    fn resolve(
        i: usize,
        parent: &[Option<usize>],
        local: &[Mat4],
        world: &mut [Option<Mat4>],
        depth: usize,
    ) -> Result<Mat4, MeshIoError> {
        if depth > 1024 {
            return Err(gerr("node hierarchy deeper than 1024 (or cyclic)"));
        }
        if let Some(m) = world[i] {
            return Ok(m);
        }
        let m = match parent[i] {
            Some(p) => resolve(p, parent, local, world, depth + 1)? * local[i],
            None => local[i],
        };
        world[i] = Some(m);
        Ok(m)
    }
    (0..n)
        .map(|i| resolve(i, &parent, &local, &mut world, 0))
        .collect()
}

struct Prim {
    positions: Vec<Vec3>,
    triangles: Vec<[u32; 3]>,
    joints: Option<Vec<[u16; 4]>>,
    weights: Option<Vec<[f32; 4]>>,
}

fn read_primitive(
    p: &gltf::Primitive<'_>,
    buffers: &[Vec<u8>],
) -> Result<Option<Prim>, MeshIoError> {
    if p.mode() != gltf::mesh::Mode::Triangles {
        return Ok(None);
    }
    let pos_acc = p
        .get(&gltf::Semantic::Positions)
        .ok_or_else(|| gerr("primitive without POSITION"))?;
    check_accessor(&pos_acc, buffers)?;
    let reader = p.reader(|b| buffers.get(b.index()).map(|d| &d[..]));
    let positions: Vec<Vec3> = reader
        .read_positions()
        .ok_or_else(|| gerr("unreadable POSITION"))?
        .map(Vec3::from)
        .collect();
    if positions.iter().any(|p| !p.is_finite()) {
        return Err(gerr("POSITION has non-finite values"));
    }
    let n = positions.len();
    let indices: Vec<u32> = match p.indices() {
        Some(acc) => {
            check_accessor(&acc, buffers)?;
            reader
                .read_indices()
                .ok_or_else(|| gerr("unreadable indices"))?
                .into_u32()
                .collect()
        }
        None => (0..n as u32).collect(),
    };
    if !indices.len().is_multiple_of(3) {
        return Err(gerr(format!(
            "{} indices is not a multiple of 3",
            indices.len()
        )));
    }
    if let Some(bad) = indices.iter().find(|&&i| i as usize >= n) {
        return Err(gerr(format!("index {bad} out of range for {n} vertices")));
    }
    let triangles = indices
        .chunks_exact(3)
        .map(|c| [c[0], c[1], c[2]])
        .collect();
    let (mut joints, mut weights) = (None, None);
    if let (Some(ja), Some(wa)) = (
        p.get(&gltf::Semantic::Joints(0)),
        p.get(&gltf::Semantic::Weights(0)),
    ) {
        check_accessor(&ja, buffers)?;
        check_accessor(&wa, buffers)?;
        let j: Vec<[u16; 4]> = reader
            .read_joints(0)
            .ok_or_else(|| gerr("unreadable JOINTS_0"))?
            .into_u16()
            .collect();
        let w: Vec<[f32; 4]> = reader
            .read_weights(0)
            .ok_or_else(|| gerr("unreadable WEIGHTS_0"))?
            .into_f32()
            .collect();
        if j.len() != n || w.len() != n {
            return Err(gerr("JOINTS_0/WEIGHTS_0 count differs from POSITION"));
        }
        joints = Some(j);
        weights = Some(w);
    }
    Ok(Some(Prim {
        positions,
        triangles,
        joints,
        weights,
    }))
}

fn append(
    mesh: &mut TriMesh,
    positions: impl IntoIterator<Item = Vec3>,
    triangles: &[[u32; 3]],
) -> Result<(), MeshIoError> {
    let off = mesh.positions.len() as u32;
    mesh.positions.extend(positions);
    mesh.triangles
        .extend(triangles.iter().map(|t| t.map(|v| v + off)));
    if mesh.positions.len() > MAX_ELEMENTS || mesh.triangles.len() > MAX_ELEMENTS {
        return Err(MeshIoError::TooLarge {
            path: String::new(),
            what: "mesh size",
            limit: MAX_ELEMENTS,
        });
    }
    Ok(())
}

/// Reads every triangle primitive of the default scene (or all meshes when there is no
/// scene), in world space, merged into one mesh. Skinned meshes are placed by their skin
/// in the nodes' rest pose. Vertices that share a position are welded (files split
/// vertices at texture seams).
pub fn read_gltf_mesh(path: &Path) -> Result<TriMesh, MeshIoError> {
    let l = load(path)?;
    let world = node_world_transforms(&l.doc)?;
    let mut mesh = TriMesh::default();
    for node in l.doc.nodes() {
        let Some(m) = node.mesh() else { continue };
        for p in m.primitives() {
            let Some(prim) = read_primitive(&p, &l.buffers)? else {
                continue;
            };
            let placed: Vec<Vec3> = match (node.skin(), &prim.joints, &prim.weights) {
                (Some(skin), Some(j), Some(w)) => {
                    skin_rest(&skin, &world, &l.buffers, &prim.positions, j, w)?
                }
                _ => prim
                    .positions
                    .iter()
                    .map(|&p| world[node.index()].transform_point3(p))
                    .collect(),
            };
            append(&mut mesh, placed, &prim.triangles)?;
        }
    }
    if mesh.triangles.is_empty() {
        return Err(MeshIoError::NoTriangles(path.display().to_string()));
    }
    Ok(crate::mesh::weld(&mesh, 1e-6).0)
}

fn skin_matrices(
    skin: &gltf::Skin<'_>,
    world: &[Mat4],
    buffers: &[Vec<u8>],
) -> Result<Vec<Mat4>, MeshIoError> {
    let joints: Vec<usize> = skin.joints().map(|j| j.index()).collect();
    let ibm: Vec<Mat4> = match skin.inverse_bind_matrices() {
        Some(acc) => {
            check_accessor(&acc, buffers)?;
            let r = skin.reader(|b| buffers.get(b.index()).map(|d| &d[..]));
            r.read_inverse_bind_matrices()
                .ok_or_else(|| gerr("unreadable inverseBindMatrices"))?
                .map(|m| Mat4::from_cols_array_2d(&m))
                .collect()
        }
        None => vec![Mat4::IDENTITY; joints.len()],
    };
    if ibm.len() != joints.len() {
        return Err(gerr("inverseBindMatrices count differs from joints"));
    }
    Ok(joints
        .iter()
        .zip(&ibm)
        .map(|(&j, ib)| world[j] * *ib)
        .collect())
}

fn skin_rest(
    skin: &gltf::Skin<'_>,
    world: &[Mat4],
    buffers: &[Vec<u8>],
    pos: &[Vec3],
    j: &[[u16; 4]],
    w: &[[f32; 4]],
) -> Result<Vec<Vec3>, MeshIoError> {
    let mats = skin_matrices(skin, world, buffers)?;
    let mut out = Vec::with_capacity(pos.len());
    for ((p, jj), ww) in pos.iter().zip(j).zip(w) {
        let mut acc = Vec4::ZERO;
        let mut total = 0.0;
        for k in 0..4 {
            if ww[k] <= 0.0 {
                continue;
            }
            let m = mats
                .get(jj[k] as usize)
                .ok_or_else(|| gerr(format!("joint index {} out of range", jj[k])))?;
            acc += ww[k] * (*m * p.extend(1.0));
            total += ww[k];
        }
        if total <= 0.0 || !total.is_finite() {
            return Err(gerr("vertex with no positive skin weight"));
        }
        out.push(acc.truncate() / total);
    }
    Ok(out)
}

/// Reads the first skinned mesh's skin and every primitive that uses it: rest-pose
/// geometry, influences, and the joint hierarchy with rest world transforms.
pub fn read_gltf_skinned(path: &Path) -> Result<LoadedSkinnedMesh, MeshIoError> {
    let l = load(path)?;
    let world = node_world_transforms(&l.doc)?;
    let skin = l
        .doc
        .skins()
        .next()
        .ok_or_else(|| gerr(format!("{}: no skin", path.display())))?;
    let joint_nodes: Vec<usize> = skin.joints().map(|j| j.index()).collect();
    if joint_nodes.len() > u16::MAX as usize {
        return Err(gerr("too many joints"));
    }
    let mut parent_node = vec![None; l.doc.nodes().count()];
    for node in l.doc.nodes() {
        for c in node.children() {
            parent_node[c.index()] = Some(node.index());
        }
    }
    let names: Vec<String> = skin
        .joints()
        .map(|j| j.name().unwrap_or("").to_string())
        .collect();
    let parents = joint_nodes
        .iter()
        .map(|&n| {
            let mut p = parent_node[n];
            let mut guard = 0;
            while let Some(pn) = p {
                if let Some(k) = joint_nodes.iter().position(|&x| x == pn) {
                    return Some(k);
                }
                p = parent_node[pn];
                guard += 1;
                if guard > 1024 {
                    break;
                }
            }
            None
        })
        .collect();
    let rest_world = joint_nodes.iter().map(|&n| world[n]).collect();
    let mut mesh = TriMesh::default();
    let (mut joints, mut weights) = (Vec::new(), Vec::new());
    for node in l.doc.nodes() {
        let (Some(m), Some(s)) = (node.mesh(), node.skin()) else {
            continue;
        };
        if s.index() != skin.index() {
            continue;
        }
        for p in m.primitives() {
            let Some(prim) = read_primitive(&p, &l.buffers)? else {
                continue;
            };
            let (Some(j), Some(w)) = (&prim.joints, &prim.weights) else {
                continue;
            };
            let placed = skin_rest(&skin, &world, &l.buffers, &prim.positions, j, w)?;
            append(&mut mesh, placed, &prim.triangles)?;
            joints.extend_from_slice(j);
            weights.extend(w.iter().map(|w| {
                let s: f32 = w.iter().map(|x| x.max(0.0)).sum();
                if s > 0.0 {
                    w.map(|x| x.max(0.0) / s)
                } else {
                    [1.0, 0.0, 0.0, 0.0]
                }
            }));
        }
    }
    if mesh.triangles.is_empty() {
        return Err(MeshIoError::NoTriangles(path.display().to_string()));
    }
    let (welded, remap) = crate::mesh::weld(&mesh, 1e-6);
    let mut wj = vec![[0u16; 4]; welded.positions.len()];
    let mut ww = vec![[0f32; 4]; welded.positions.len()];
    for (old, &new) in remap.iter().enumerate() {
        wj[new as usize] = joints[old];
        ww[new as usize] = weights[old];
    }
    Ok(LoadedSkinnedMesh {
        mesh: welded,
        joints: wj,
        weights: ww,
        skin: LoadedSkin {
            names,
            parents,
            rest_world,
        },
    })
}
