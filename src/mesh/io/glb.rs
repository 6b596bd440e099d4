//! glTF 2.0 binary (.glb) writer: triangle meshes, an optional skeleton with a skin
//! (joints, inverse bind matrices, `JOINTS_0`/`WEIGHTS_0`), and an optional animation
//! (per-joint rotations and root translation), laid out as the glTF 2.0 specification
//! requires (4-byte aligned views, POSITION min/max, animation input min/max).

use std::io::Write;

use glam::{Mat4, Quat, Vec3};
use serde_json::{Value, json};

/// A joint hierarchy to export. Joint `i`'s parent precedes it.
pub struct GlbSkeleton<'a> {
    /// Joint names.
    pub names: Vec<&'a str>,
    /// Parent of each joint (`None` for roots).
    pub parents: Vec<Option<usize>>,
    /// Rest translation of each joint relative to its parent (roots: world), metres.
    pub rest_translation: Vec<Vec3>,
    /// Rest rotation of each joint relative to its parent.
    pub rest_rotation: Vec<Quat>,
    /// Inverse bind matrix of each joint (world → joint at bind time).
    pub inverse_bind: Vec<Mat4>,
}

/// Surface appearance of a mesh.
#[derive(Clone, Debug)]
pub struct GlbMaterial {
    /// Material name.
    pub name: String,
    /// Linear RGBA base colour.
    pub base_color: [f32; 4],
    /// Perceptual roughness 0–1.
    pub roughness: f32,
    /// Render both faces (garments, whose inside shows).
    pub double_sided: bool,
}

/// Per-vertex skin influences: joint indices and weights (glTF `JOINTS_0`, `WEIGHTS_0`).
pub type SkinSlices<'a> = (&'a [[u16; 4]], &'a [[f32; 4]]);

/// One mesh to export.
pub struct GlbMesh<'a> {
    /// Mesh name.
    pub name: &'a str,
    /// Positions (bind pose for skinned meshes), metres.
    pub positions: &'a [Vec3],
    /// Unit normals, one per position.
    pub normals: &'a [Vec3],
    /// Counter-clockwise triangles.
    pub triangles: &'a [[u32; 3]],
    /// Skin influences (joint index into the skeleton, weight), one row per position.
    pub skin: Option<SkinSlices<'a>>,
    /// Appearance.
    pub material: GlbMaterial,
}

/// A joint animation: for every key time, every joint's local rotation and the root
/// joints' local translations.
pub struct GlbAnimation<'a> {
    /// Animation name.
    pub name: &'a str,
    /// Key times, seconds, strictly increasing.
    pub times: &'a [f32],
    /// `rotations[frame][joint]`, unit quaternions.
    pub rotations: &'a [Vec<Quat>],
    /// `root_translation[frame]`: local translation of joint 0.
    pub root_translation: &'a [Vec3],
}

/// Everything that goes into one .glb file.
pub struct GlbScene<'a> {
    /// Skeleton shared by all skinned meshes.
    pub skeleton: Option<GlbSkeleton<'a>>,
    /// Meshes.
    pub meshes: Vec<GlbMesh<'a>>,
    /// Optional animation of the skeleton.
    pub animation: Option<GlbAnimation<'a>>,
}

const ARRAY_BUFFER: u32 = 34962;
const ELEMENT_ARRAY_BUFFER: u32 = 34963;
const FLOAT: u32 = 5126;
const UNSIGNED_SHORT: u32 = 5123;
const UNSIGNED_INT: u32 = 5125;

#[derive(Default)]
struct Builder {
    bin: Vec<u8>,
    views: Vec<Value>,
    accessors: Vec<Value>,
}

impl Builder {
    fn view(&mut self, bytes: &[u8], target: Option<u32>) -> usize {
        while !self.bin.len().is_multiple_of(4) {
            self.bin.push(0);
        }
        let mut v = json!({ "buffer": 0, "byteOffset": self.bin.len(), "byteLength": bytes.len() });
        if let Some(t) = target {
            v["target"] = json!(t);
        }
        self.bin.extend_from_slice(bytes);
        self.views.push(v);
        self.views.len() - 1
    }

    fn accessor(
        &mut self,
        bytes: &[u8],
        target: Option<u32>,
        component: u32,
        count: usize,
        ty: &str,
        minmax: Option<(Vec<f32>, Vec<f32>)>,
    ) -> usize {
        let view = self.view(bytes, target);
        let mut a =
            json!({ "bufferView": view, "componentType": component, "count": count, "type": ty });
        if let Some((lo, hi)) = minmax {
            a["min"] = json!(lo);
            a["max"] = json!(hi);
        }
        self.accessors.push(a);
        self.accessors.len() - 1
    }
}

fn f32_bytes(data: impl IntoIterator<Item = f32>) -> Vec<u8> {
    data.into_iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Writes a scene as a .glb file. Nodes: the skeleton's joints first (in order), then one
/// node per mesh; skinned meshes reference skin 0 and are root nodes, as the spec asks.
pub fn write_glb(mut w: impl Write, scene: &GlbScene<'_>) -> std::io::Result<()> {
    let mut b = Builder::default();
    let mut nodes: Vec<Value> = Vec::new();
    let mut roots: Vec<usize> = Vec::new();
    let mut skins = Vec::new();
    if let Some(sk) = &scene.skeleton {
        for i in 0..sk.names.len() {
            let t = sk.rest_translation[i];
            let r = sk.rest_rotation[i];
            let mut n = json!({ "name": sk.names[i], "translation": [t.x, t.y, t.z] });
            if r != Quat::IDENTITY {
                n["rotation"] = json!([r.x, r.y, r.z, r.w]);
            }
            let children: Vec<usize> = (0..sk.names.len())
                .filter(|&c| sk.parents[c] == Some(i))
                .collect();
            if !children.is_empty() {
                n["children"] = json!(children);
            }
            if sk.parents[i].is_none() {
                roots.push(i);
            }
            nodes.push(n);
        }
        let ibm = f32_bytes(sk.inverse_bind.iter().flat_map(|m| m.to_cols_array()));
        let acc = b.accessor(&ibm, None, FLOAT, sk.inverse_bind.len(), "MAT4", None);
        let root = roots.first().copied().unwrap_or(0);
        skins.push(json!({ "inverseBindMatrices": acc, "joints": (0..sk.names.len()).collect::<Vec<_>>(), "skeleton": root }));
    }
    let mut meshes = Vec::new();
    let mut materials = Vec::new();
    for m in &scene.meshes {
        let (lo, hi) = m.positions.iter().fold(
            (Vec3::splat(f32::MAX), Vec3::splat(f32::MIN)),
            |(l, h), p| (l.min(*p), h.max(*p)),
        );
        let pos = b.accessor(
            &f32_bytes(m.positions.iter().flat_map(|p| p.to_array())),
            Some(ARRAY_BUFFER),
            FLOAT,
            m.positions.len(),
            "VEC3",
            Some((lo.to_array().to_vec(), hi.to_array().to_vec())),
        );
        let nrm = b.accessor(
            &f32_bytes(m.normals.iter().flat_map(|p| p.to_array())),
            Some(ARRAY_BUFFER),
            FLOAT,
            m.normals.len(),
            "VEC3",
            None,
        );
        let mut attributes = json!({ "POSITION": pos, "NORMAL": nrm });
        if let Some((joints, weights)) = m.skin {
            let jb: Vec<u8> = joints
                .iter()
                .flat_map(|j| j.iter().flat_map(|x| x.to_le_bytes()))
                .collect();
            attributes["JOINTS_0"] = json!(b.accessor(
                &jb,
                Some(ARRAY_BUFFER),
                UNSIGNED_SHORT,
                joints.len(),
                "VEC4",
                None
            ));
            let wb = f32_bytes(weights.iter().flat_map(|w| *w));
            attributes["WEIGHTS_0"] =
                json!(b.accessor(&wb, Some(ARRAY_BUFFER), FLOAT, weights.len(), "VEC4", None));
        }
        let ib: Vec<u8> = m
            .triangles
            .iter()
            .flat_map(|t| t.iter().flat_map(|x| x.to_le_bytes()))
            .collect();
        let idx = b.accessor(
            &ib,
            Some(ELEMENT_ARRAY_BUFFER),
            UNSIGNED_INT,
            m.triangles.len() * 3,
            "SCALAR",
            None,
        );
        materials.push(json!({
            "name": m.material.name,
            "pbrMetallicRoughness": {
                "baseColorFactor": m.material.base_color,
                "metallicFactor": 0.0,
                "roughnessFactor": m.material.roughness,
            },
            "doubleSided": m.material.double_sided,
        }));
        meshes.push(json!({
            "name": m.name,
            "primitives": [{ "attributes": attributes, "indices": idx, "material": materials.len() - 1, "mode": 4 }],
        }));
        let mut node = json!({ "name": m.name, "mesh": meshes.len() - 1 });
        if m.skin.is_some() && !skins.is_empty() {
            node["skin"] = json!(0);
        }
        roots.push(nodes.len());
        nodes.push(node);
    }
    let mut root = json!({
        "asset": { "version": "2.0", "generator": concat!("clothcast ", env!("CARGO_PKG_VERSION")) },
        "scene": 0,
        "scenes": [{ "nodes": roots }],
        "nodes": nodes,
        "meshes": meshes,
        "materials": materials,
    });
    if !skins.is_empty() {
        root["skins"] = json!(skins);
    }
    if let (Some(anim), Some(sk)) = (&scene.animation, &scene.skeleton) {
        let t0 = anim.times.first().copied().unwrap_or(0.0);
        let t1 = anim.times.last().copied().unwrap_or(0.0);
        let input = b.accessor(
            &f32_bytes(anim.times.iter().copied()),
            None,
            FLOAT,
            anim.times.len(),
            "SCALAR",
            Some((vec![t0], vec![t1])),
        );
        let mut samplers = Vec::new();
        let mut channels = Vec::new();
        for j in 0..sk.names.len() {
            let data = f32_bytes(anim.rotations.iter().flat_map(|f| {
                let q = f[j].normalize();
                [q.x, q.y, q.z, q.w]
            }));
            let out = b.accessor(&data, None, FLOAT, anim.rotations.len(), "VEC4", None);
            samplers.push(json!({ "input": input, "output": out, "interpolation": "LINEAR" }));
            channels.push(json!({ "sampler": samplers.len() - 1, "target": { "node": j, "path": "rotation" } }));
        }
        let data = f32_bytes(anim.root_translation.iter().flat_map(|t| t.to_array()));
        let out = b.accessor(
            &data,
            None,
            FLOAT,
            anim.root_translation.len(),
            "VEC3",
            None,
        );
        samplers.push(json!({ "input": input, "output": out, "interpolation": "LINEAR" }));
        channels.push(json!({ "sampler": samplers.len() - 1, "target": { "node": 0, "path": "translation" } }));
        root["animations"] =
            json!([{ "name": anim.name, "samplers": samplers, "channels": channels }]);
    }
    while !b.bin.len().is_multiple_of(4) {
        b.bin.push(0);
    }
    root["buffers"] = json!([{ "byteLength": b.bin.len() }]);
    root["bufferViews"] = json!(b.views);
    root["accessors"] = json!(b.accessors);
    let mut js = serde_json::to_vec(&root).map_err(std::io::Error::other)?;
    while !js.len().is_multiple_of(4) {
        js.push(b' ');
    }
    let total = 12 + 8 + js.len() + 8 + b.bin.len();
    let total = u32::try_from(total).map_err(|_| std::io::Error::other("glb larger than 4 GiB"))?;
    w.write_all(b"glTF")?;
    w.write_all(&2u32.to_le_bytes())?;
    w.write_all(&total.to_le_bytes())?;
    w.write_all(&(js.len() as u32).to_le_bytes())?;
    w.write_all(b"JSON")?;
    w.write_all(&js)?;
    w.write_all(&(b.bin.len() as u32).to_le_bytes())?;
    w.write_all(b"BIN\0")?;
    w.write_all(&b.bin)?;
    Ok(())
}
