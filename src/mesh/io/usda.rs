//! USD text layers (`.usda`) of a recorded take, for pipelines built on USD (Omniverse,
//! Unreal's USD stage, Houdini Solaris): the garment as a mesh
//! whose points are sampled once per frame, and the body as a UsdSkel skinned mesh whose
//! skeleton is animated by a key per frame.
//!
//! Conventions of the stage: `upAxis = "Y"`, `metersPerUnit = 1`, time code `k` is
//! sample `k` of the take and `timeCodesPerSecond` (and `framesPerSecond`) the take's
//! rate, so a DCC at that frame rate shows frame `k` of the garment and the body
//! together. Meshes are right-handed with counter-clockwise front faces (USD's default
//! `orientation`). The skeleton's joints are named by their paths from the root
//! (`pelvis/spine1/…`); `bindTransforms` are the joints' rest transforms in the stage's
//! frame (translations only: the canonical rest pose has no rotations),
//! `restTransforms` the same relative to each parent, and the animation's
//! `translations` and `rotations` the joints' local transforms per key (UsdSkel's
//! linear blend skinning then poses the mesh exactly as clothcast's skinning
//! transforms do).

use std::io::{self, Read, Seek, Write};

use super::pc2::Pc2Reader;

/// The garment's samples, read one at a time (a long take's need not fit in memory):
/// sample `k` is written at time code `k`.
pub trait UsdSamples {
    /// Number of samples.
    fn count(&self) -> usize;
    /// Sample `k` into `out`: x, y, z per point, metres, the stage's frame.
    fn read(&mut self, k: usize, out: &mut Vec<f32>) -> io::Result<()>;
}

impl UsdSamples for &[Vec<f32>] {
    fn count(&self) -> usize {
        self.len()
    }

    fn read(&mut self, k: usize, out: &mut Vec<f32>) -> io::Result<()> {
        let s = self
            .get(k)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("no sample {k}")))?;
        out.clear();
        out.extend_from_slice(s);
        Ok(())
    }
}

impl<R: Read + Seek> UsdSamples for Pc2Reader<R> {
    fn count(&self) -> usize {
        self.samples()
    }

    fn read(&mut self, k: usize, out: &mut Vec<f32>) -> io::Result<()> {
        Pc2Reader::read(self, k, out).map_err(io::Error::other)
    }
}

/// A skinned body: rest mesh and four joint influences per vertex.
pub struct UsdSkinnedMesh<'a> {
    /// Rest vertex positions, metres (the bind pose).
    pub positions: &'a [[f32; 3]],
    /// Counter-clockwise triangles.
    pub triangles: &'a [[u32; 3]],
    /// Per vertex: four joint indices into [`UsdSkeleton::names`].
    pub joints: &'a [[u8; 4]],
    /// Per vertex: the four joints' weights (summing to 1).
    pub weights: &'a [[f32; 4]],
}

/// A skeleton: joint names, parents (each before its children) and rest positions.
pub struct UsdSkeleton<'a> {
    /// One name per joint (letters, digits and `_` only: they become path elements).
    pub names: &'a [&'a str],
    /// Parent of each joint, −1 for a root; a parent comes before its children.
    pub parents: &'a [i32],
    /// Rest joint positions in the stage's frame, metres.
    pub rest: &'a [[f32; 3]],
}

/// One key of the skeleton's animation: at time code `time`, the root joint's
/// translation from its rest position and every joint's rotation relative to its
/// parent (x, y, z, w; the root's relative to the stage).
pub struct UsdJointKey {
    /// Time code (the take's sample index).
    pub time: u32,
    /// The root's displacement from its rest position, metres.
    pub translation: [f32; 3],
    /// Local rotation of each joint, unit quaternions x, y, z, w.
    pub rotations: Vec<[f32; 4]>,
}

/// What one take's layer holds.
pub struct UsdTake<'a> {
    /// Frames (time codes) per second.
    pub fps: f32,
    /// The layer's `doc` string (what was recorded).
    pub doc: &'a str,
    /// The garment's triangles.
    pub garment_triangles: &'a [[u32; 3]],
    /// The animated body, when recorded.
    pub body: Option<(UsdSkinnedMesh<'a>, UsdSkeleton<'a>, &'a [UsdJointKey])>,
}

/// A float as USD text: up to `decimals` decimals, trailing zeros dropped (10 µm for
/// points: the recording's lattice is 1 mm).
fn num(x: f32, decimals: usize) -> String {
    let s = format!("{x:.decimals$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        &s
    };
    if s == "-0" { "0".into() } else { s.into() }
}

/// `[(x, y, z), …]` of a flat xyz slice.
fn points(w: &mut impl Write, xyz: &[f32]) -> io::Result<()> {
    w.write_all(b"[")?;
    for (i, p) in xyz.chunks_exact(3).enumerate() {
        if i > 0 {
            w.write_all(b", ")?;
        }
        write!(w, "({}, {}, {})", num(p[0], 5), num(p[1], 5), num(p[2], 5))?;
    }
    w.write_all(b"]")
}

/// The axis-aligned bounds of a flat xyz slice as a USD `extent`.
fn extent(xyz: &[f32]) -> [[f32; 3]; 2] {
    let mut e = [[f32::INFINITY; 3], [f32::NEG_INFINITY; 3]];
    for p in xyz.chunks_exact(3) {
        for k in 0..3 {
            e[0][k] = e[0][k].min(p[k]);
            e[1][k] = e[1][k].max(p[k]);
        }
    }
    if e[0][0] > e[1][0] {
        return [[0.0; 3]; 2];
    }
    e
}

fn write_extent(w: &mut impl Write, e: [[f32; 3]; 2]) -> io::Result<()> {
    write!(
        w,
        "[({}, {}, {}), ({}, {}, {})]",
        num(e[0][0], 5),
        num(e[0][1], 5),
        num(e[0][2], 5),
        num(e[1][0], 5),
        num(e[1][1], 5),
        num(e[1][2], 5)
    )
}

/// `faceVertexCounts` and `faceVertexIndices` of a triangle mesh.
fn topology(w: &mut impl Write, triangles: &[[u32; 3]], indent: &str) -> io::Result<()> {
    write!(w, "{indent}int[] faceVertexCounts = [")?;
    for i in 0..triangles.len() {
        w.write_all(if i > 0 { b", 3" } else { b"3" })?;
    }
    write!(w, "]\n{indent}int[] faceVertexIndices = [")?;
    for (i, t) in triangles.iter().enumerate() {
        if i > 0 {
            w.write_all(b", ")?;
        }
        write!(w, "{}, {}, {}", t[0], t[1], t[2])?;
    }
    writeln!(w, "]")
}

/// A translation as a row-major `matrix4d` (USD's row-vector convention: the
/// translation is the last row).
fn translation_matrix(t: [f32; 3]) -> String {
    format!(
        "( (1, 0, 0, 0), (0, 1, 0, 0), (0, 0, 1, 0), ({}, {}, {}, 1) )",
        num(t[0], 6),
        num(t[1], 6),
        num(t[2], 6)
    )
}

/// Each joint's path from its root (`pelvis/spine1/spine2`).
fn joint_paths(s: &UsdSkeleton) -> Vec<String> {
    let mut paths: Vec<String> = Vec::with_capacity(s.names.len());
    for (j, name) in s.names.iter().enumerate() {
        let p = s.parents[j];
        let path = match usize::try_from(p).ok().filter(|&p| p < j) {
            Some(p) => format!("{}/{name}", paths[p]),
            None => (*name).to_string(),
        };
        paths.push(path);
    }
    paths
}

fn token_array(w: &mut impl Write, items: &[String]) -> io::Result<()> {
    w.write_all(b"[")?;
    for (i, t) in items.iter().enumerate() {
        if i > 0 {
            w.write_all(b", ")?;
        }
        write!(w, "\"{t}\"")?;
    }
    w.write_all(b"]")
}

/// A UsdSkel skinning primvar: four values a vertex (`elementSize = 4`), vertex
/// interpolation.
fn skin_primvar(w: &mut impl Write, declaration: &str, values: &[String]) -> io::Result<()> {
    write!(w, "            {declaration} = [{}] (", values.join(", "))?;
    writeln!(
        w,
        "\n                elementSize = 4\n                interpolation = \"vertex\"\n            )"
    )
}

/// Writes the take as one USD text layer, the garment's points from `samples`. Fails
/// only if `w` or `samples` does.
pub fn write_usda(
    w: &mut impl Write,
    take: &UsdTake,
    samples: &mut dyn UsdSamples,
) -> io::Result<()> {
    let last = samples.count().saturating_sub(1);
    let mut s = Vec::new();
    let doc = take.doc.replace(['"', '\\', '\n'], " ");
    writeln!(w, "#usda 1.0")?;
    writeln!(w, "(")?;
    writeln!(w, "    defaultPrim = \"take\"")?;
    writeln!(w, "    doc = \"{doc}\"")?;
    writeln!(w, "    metersPerUnit = 1")?;
    writeln!(w, "    upAxis = \"Y\"")?;
    writeln!(w, "    startTimeCode = 0")?;
    writeln!(w, "    endTimeCode = {last}")?;
    writeln!(w, "    timeCodesPerSecond = {}", num(take.fps, 6))?;
    writeln!(w, "    framesPerSecond = {}", num(take.fps, 6))?;
    writeln!(w, ")\n")?;
    writeln!(w, "def Xform \"take\" (\n    kind = \"component\"\n)\n{{")?;
    // the garment: points sampled per frame
    writeln!(w, "    def Mesh \"garment\"\n    {{")?;
    writeln!(w, "        uniform token subdivisionScheme = \"none\"")?;
    topology(w, take.garment_triangles, "        ")?;
    writeln!(w, "        float3[] extent.timeSamples = {{")?;
    for k in 0..samples.count() {
        samples.read(k, &mut s)?;
        write!(w, "            {k}: ")?;
        write_extent(w, extent(&s))?;
        writeln!(w, ",")?;
    }
    writeln!(w, "        }}")?;
    writeln!(w, "        point3f[] points.timeSamples = {{")?;
    for k in 0..samples.count() {
        samples.read(k, &mut s)?;
        write!(w, "            {k}: ")?;
        points(w, &s)?;
        writeln!(w, ",")?;
    }
    writeln!(w, "        }}")?;
    writeln!(w, "    }}")?;
    if let Some((mesh, skel, keys)) = &take.body {
        write_body(w, mesh, skel, keys)?;
    }
    writeln!(w, "}}")
}

/// The body: a SkelRoot holding the skeleton, its animation and the skinned mesh.
fn write_body(
    w: &mut impl Write,
    mesh: &UsdSkinnedMesh,
    skel: &UsdSkeleton,
    keys: &[UsdJointKey],
) -> io::Result<()> {
    let paths = joint_paths(skel);
    let n = skel.names.len();
    writeln!(w, "\n    def SkelRoot \"body\"\n    {{")?;
    writeln!(
        w,
        "        def Skeleton \"skeleton\" (\n            prepend apiSchemas = [\"SkelBindingAPI\"]\n        )\n        {{"
    )?;
    write!(w, "            uniform token[] joints = ")?;
    token_array(w, &paths)?;
    write!(w, "\n            uniform matrix4d[] bindTransforms = [")?;
    for (j, r) in skel.rest.iter().enumerate() {
        if j > 0 {
            w.write_all(b", ")?;
        }
        w.write_all(translation_matrix(*r).as_bytes())?;
    }
    write!(w, "]\n            uniform matrix4d[] restTransforms = [")?;
    let local = |j: usize| -> [f32; 3] {
        let r = skel.rest[j];
        match usize::try_from(skel.parents[j]).ok().filter(|&p| p < j) {
            Some(p) => {
                let q = skel.rest[p];
                [r[0] - q[0], r[1] - q[1], r[2] - q[2]]
            }
            None => r,
        }
    };
    for j in 0..n {
        if j > 0 {
            w.write_all(b", ")?;
        }
        w.write_all(translation_matrix(local(j)).as_bytes())?;
    }
    writeln!(w, "]")?;
    writeln!(
        w,
        "            rel skel:animationSource = </take/body/skeleton/animation>\n"
    )?;
    writeln!(
        w,
        "            def SkelAnimation \"animation\"\n            {{"
    )?;
    write!(w, "                uniform token[] joints = ")?;
    token_array(w, &paths)?;
    writeln!(w)?;
    write!(w, "                half3[] scales = [")?;
    for j in 0..n {
        w.write_all(if j > 0 { b", (1, 1, 1)" } else { b"(1, 1, 1)" })?;
    }
    writeln!(w, "]")?;
    writeln!(w, "                float3[] translations.timeSamples = {{")?;
    for k in keys {
        write!(w, "                    {}: [", k.time)?;
        for j in 0..n {
            let mut t = local(j);
            if skel.parents[j] < 0 {
                t = [
                    t[0] + k.translation[0],
                    t[1] + k.translation[1],
                    t[2] + k.translation[2],
                ];
            }
            if j > 0 {
                w.write_all(b", ")?;
            }
            write!(w, "({}, {}, {})", num(t[0], 6), num(t[1], 6), num(t[2], 6))?;
        }
        writeln!(w, "],")?;
    }
    writeln!(w, "                }}")?;
    // USD writes a quaternion real part first: (w, x, y, z)
    writeln!(w, "                quatf[] rotations.timeSamples = {{")?;
    for k in keys {
        write!(w, "                    {}: [", k.time)?;
        for j in 0..n {
            let q = k.rotations.get(j).copied().unwrap_or([0.0, 0.0, 0.0, 1.0]);
            if j > 0 {
                w.write_all(b", ")?;
            }
            write!(
                w,
                "({}, {}, {}, {})",
                num(q[3], 7),
                num(q[0], 7),
                num(q[1], 7),
                num(q[2], 7)
            )?;
        }
        writeln!(w, "],")?;
    }
    writeln!(w, "                }}")?;
    writeln!(w, "            }}")?;
    writeln!(w, "        }}\n")?;
    // the skinned mesh, at the bind pose
    writeln!(
        w,
        "        def Mesh \"mesh\" (\n            prepend apiSchemas = [\"SkelBindingAPI\"]\n        )\n        {{"
    )?;
    writeln!(w, "            uniform token subdivisionScheme = \"none\"")?;
    topology(w, mesh.triangles, "            ")?;
    let flat: Vec<f32> = mesh.positions.iter().flatten().copied().collect();
    write!(w, "            float3[] extent = ")?;
    write_extent(w, extent(&flat))?;
    write!(w, "\n            point3f[] points = ")?;
    points(w, &flat)?;
    writeln!(w)?;
    let indices: Vec<String> = mesh.joints.iter().flatten().map(u8::to_string).collect();
    skin_primvar(w, "int[] primvars:skel:jointIndices", &indices)?;
    let weights: Vec<String> = mesh.weights.iter().flatten().map(|&x| num(x, 6)).collect();
    skin_primvar(w, "float[] primvars:skel:jointWeights", &weights)?;
    writeln!(
        w,
        "            matrix4d primvars:skel:geomBindTransform = ( (1, 0, 0, 0), (0, 1, 0, 0), (0, 0, 1, 0), (0, 0, 0, 1) )"
    )?;
    writeln!(w, "            rel skel:skeleton = </take/body/skeleton>")?;
    writeln!(w, "        }}")?;
    writeln!(w, "    }}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_short_and_exact_enough() {
        assert_eq!(num(0.123_000_01, 5), "0.123");
        assert_eq!(num(-0.000_001, 5), "0");
        assert_eq!(num(1.0, 5), "1");
        assert_eq!(num(-2.5, 5), "-2.5");
        assert_eq!(num(0.123_456_7, 5), "0.12346");
    }

    #[test]
    fn joints_are_named_by_their_paths() {
        let s = UsdSkeleton {
            names: &["pelvis", "spine", "head", "left_hip"],
            parents: &[-1, 0, 1, 0],
            rest: &[[0.0; 3]; 4],
        };
        assert_eq!(
            joint_paths(&s),
            [
                "pelvis",
                "pelvis/spine",
                "pelvis/spine/head",
                "pelvis/left_hip"
            ]
        );
    }

    #[test]
    fn a_take_is_one_layer_with_its_time_range() {
        let tri = [[0u32, 1, 2]];
        let samples = vec![vec![0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0]; 3];
        let mut out = Vec::new();
        write_usda(
            &mut out,
            &UsdTake {
                fps: 30.0,
                doc: "a \"quoted\" doc",
                garment_triangles: &tri,
                body: None,
            },
            &mut &samples[..],
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("#usda 1.0\n"));
        assert!(text.contains("endTimeCode = 2\n"));
        assert!(text.contains("timeCodesPerSecond = 30\n"));
        assert!(text.contains("doc = \"a  quoted  doc\""));
        assert!(text.contains("2: [(0, 0, 0), (1, 0, 0), (0, 1, 0)],"));
        assert_eq!(text.matches('{').count(), text.matches('}').count());
    }
}
