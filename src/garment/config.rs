//! Garment configuration files (`configs/garments/*.toml`) and the region table.

use serde::Deserialize;

use crate::skeleton::{JOINT_COUNT, JointId};

/// Built-in garment configurations: (name, TOML text).
pub const BUILTIN_GARMENTS: [(&str, &str); 2] = [
    ("tshirt", include_str!("../../configs/garments/tshirt.toml")),
    ("pants", include_str!("../../configs/garments/pants.toml")),
];

/// Largest number of regions (SOR uses N_G = 7).
pub const MAX_REGIONS: usize = 16;

/// Which procedural pattern a garment is cut from.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GarmentKind {
    /// A T-shirt: torso and sleeves.
    Tshirt,
    /// Pants: hips and legs.
    Pants,
}

/// Sleeve length of a T-shirt.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Sleeves {
    /// To the middle of the upper arm.
    #[default]
    Short,
    /// To the wrist.
    Long,
}

/// Leg length of pants.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Legs {
    /// To the ankle.
    #[default]
    Long,
    /// Above the knee.
    Shorts,
}

/// A garment configuration as read from TOML.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GarmentConfig {
    /// Garment name.
    pub name: String,
    /// Pattern.
    pub kind: GarmentKind,
    /// Sleeve length (T-shirts).
    #[serde(default)]
    pub sleeves: Sleeves,
    /// Leg length (pants).
    #[serde(default)]
    pub length: Legs,
    /// Looseness of the rest shape over the body, metres (0.005–0.08).
    pub ease: f32,
    /// Target vertex count (500–100 000).
    pub target_vertices: usize,
    /// Arm angle of the sewn pattern below the T-pose, degrees (0–80): sleeves are cut
    /// for relaxed arms. 0 for garments without sleeves.
    #[serde(default)]
    pub pattern_arm_angle: f32,
    /// Elastic waistband (pants): how much shorter, as a fraction, the unstressed
    /// circumference is at the top edge than the garment as cut, tapering to nothing
    /// `waistband_height` below it. A waist cut with ease alone has nothing to hang on
    /// and slides off the hips (no static equilibrium); 0 turns it off.
    #[serde(default)]
    pub waistband: f32,
    /// Height of the elastic waistband, metres.
    #[serde(default)]
    pub waistband_height: f32,
    /// Bone groups (SOR §5).
    pub regions: Vec<RegionConfig>,
}

/// One region as read from TOML.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegionConfig {
    /// Region name.
    pub name: String,
    /// Canonical joint names of its bones.
    pub bones: Vec<String>,
}

/// Why a garment could not be made.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum GarmentError {
    /// The TOML text is malformed or has unknown keys.
    #[error("garment config: {0}")]
    Toml(String),
    /// No built-in garment of that name.
    #[error("no built-in garment {0:?} (built in: tshirt, pants)")]
    NotFound(String),
    /// The regions are not a partition of the 22 bones.
    #[error("garment regions: {0}")]
    Regions(String),
    /// A parameter is outside its range.
    #[error("garment parameter {name} = {value} is outside {range}")]
    Parameter {
        /// Parameter name.
        name: &'static str,
        /// Value given.
        value: f32,
        /// Allowed range.
        range: &'static str,
    },
    /// Procedural garments need the procedural body's implicit surface.
    #[error("procedural garments need the procedural body; import a garment mesh for other bodies")]
    NoBodyField,
    /// The generated or imported mesh is unusable.
    #[error("garment mesh: {0}")]
    Mesh(#[from] crate::mesh::MeshError),
    /// A garment mesh file could not be read (the reader's error, as text).
    #[error("garment mesh file: {0}")]
    MeshFile(String),
    /// A garment mesh file of a format that is not read.
    #[error("{0}: garment meshes are read from OBJ (.obj), glTF (.gltf) or GLB (.glb) files")]
    Format(String),
    /// An imported garment mesh has more vertices than a garment may.
    #[error(
        "garment mesh has {count} vertices (limit {limit}): decimate it first (runtime cost grows with the vertex count)"
    )]
    TooManyVertices {
        /// Vertices used by its triangles.
        count: usize,
        /// The limit.
        limit: usize,
    },
    /// A part of an imported garment mesh is a closed surface: nothing can be worn
    /// through it (typically the avatar exported along with the garment).
    #[error(
        "part of the garment mesh ({vertices} vertices, from vertex {vertex}) is a closed surface, without openings: was the avatar exported with the garment? Export the garment alone"
    )]
    ClosedPart {
        /// The part's lowest vertex index (of the mesh as imported, unused vertices dropped).
        vertex: usize,
        /// Its vertex count.
        vertices: usize,
    },
    /// An imported garment mesh lies deep inside the body somewhere.
    #[error(
        "garment vertex {vertex} is {depth:.3} m inside the body (at most {limit} m is pushed out): fit the garment to the body's rest pose first"
    )]
    InsideBody {
        /// Vertex index (of the mesh as imported, unused vertices dropped).
        vertex: usize,
        /// Its depth, metres.
        depth: f32,
        /// The deepest a vertex may lie and be pushed out, metres.
        limit: f32,
    },
    /// The garment does not cover the body it should (imported mesh far from the body).
    #[error(
        "garment vertex {vertex} is {distance:.3} m from the body (limit {limit} m): is the garment in the body's rest pose and units?"
    )]
    FarFromBody {
        /// Vertex index.
        vertex: usize,
        /// Its distance to the nearest body vertex, metres.
        distance: f32,
        /// The limit, metres.
        limit: f32,
    },
}

impl From<crate::mesh::MeshIoError> for GarmentError {
    fn from(e: crate::mesh::MeshIoError) -> Self {
        GarmentError::MeshFile(e.to_string())
    }
}

/// `Ok` when `lo ≤ value ≤ hi` (not NaN), else the parameter error naming `range`.
fn in_range(
    name: &'static str,
    value: f32,
    lo: f32,
    hi: f32,
    range: &'static str,
) -> Result<(), GarmentError> {
    if (lo..=hi).contains(&value) {
        Ok(())
    } else {
        Err(GarmentError::Parameter { name, value, range })
    }
}

impl GarmentConfig {
    /// Parses a configuration and checks its parameters and regions.
    pub fn from_toml(text: &str) -> Result<GarmentConfig, GarmentError> {
        let c: GarmentConfig =
            toml::from_str(text).map_err(|e| GarmentError::Toml(e.to_string()))?;
        c.check()?;
        Ok(c)
    }

    /// Its parameters within their ranges and its regions well formed: what
    /// [`GarmentConfig::from_toml`] checks, and [`super::Garment::generate`] again (a
    /// configuration changed after parsing, as by `--garment-vertices`).
    pub fn check(&self) -> Result<(), GarmentError> {
        in_range("ease", self.ease, 0.005, 0.08, "0.005–0.08 m")?;
        in_range(
            "pattern_arm_angle",
            self.pattern_arm_angle,
            0.0,
            80.0,
            "0–80°",
        )?;
        in_range("waistband", self.waistband, 0.0, 0.6, "0–0.6")?;
        in_range(
            "waistband_height",
            self.waistband_height,
            0.0,
            0.3,
            "0–0.3 m",
        )?;
        in_range(
            "target_vertices",
            self.target_vertices as f32,
            500.0,
            100_000.0,
            "500–100000",
        )?;
        RegionTable::from_config(&self.regions)?;
        Ok(())
    }

    /// A built-in configuration by name.
    pub fn builtin(name: &str) -> Result<GarmentConfig, GarmentError> {
        let (_, text) = BUILTIN_GARMENTS
            .iter()
            .find(|(n, _)| *n == name)
            .ok_or_else(|| GarmentError::NotFound(name.to_string()))?;
        Self::from_toml(text)
    }
}

/// A garment imported from a mesh file, as read from TOML: a file with a `mesh` entry
/// (see [`GarmentSpec`]). The mesh is the garment on the body in its rest pose
/// (T-pose, +Y up, facing +Z), in file units that `scale` turns into metres.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeshGarmentConfig {
    /// Garment name.
    pub name: String,
    /// The mesh file (OBJ, glTF or GLB), relative to the TOML file's folder.
    pub mesh: std::path::PathBuf,
    /// File units to metres (0.01 for centimetres); 1e-4–100.
    #[serde(default = "unit_scale")]
    pub scale: f32,
    /// Arm angle below the T-pose the garment's sleeves were cut for, degrees (0–80;
    /// 0: the mesh as modelled is unstressed), as for procedural garments.
    #[serde(default)]
    pub pattern_arm_angle: f32,
    /// Remesh to about this many vertices (500–100000) when the mesh has more:
    /// near-equilateral triangles on the modelled surface, hems and openings kept
    /// where they were. Absent: the mesh as modelled (its vertex count is then the
    /// runtime's).
    #[serde(default)]
    pub target_vertices: Option<usize>,
    /// Take the regions of this built-in garment (`tshirt`, `pants`) …
    #[serde(default)]
    pub regions_like: Option<String>,
    /// … or these bone groups (SOR §5); exactly one of the two.
    #[serde(default)]
    pub regions: Vec<RegionConfig>,
}

fn unit_scale() -> f32 {
    1.0
}

impl MeshGarmentConfig {
    /// Parses a configuration and checks its parameters and regions.
    pub fn from_toml(text: &str) -> Result<MeshGarmentConfig, GarmentError> {
        let c: MeshGarmentConfig =
            toml::from_str(text).map_err(|e| GarmentError::Toml(e.to_string()))?;
        in_range("scale", c.scale, 1e-4, 100.0, "1e-4–100")?;
        in_range("pattern_arm_angle", c.pattern_arm_angle, 0.0, 80.0, "0–80°")?;
        if let Some(t) = c.target_vertices {
            in_range(
                "target_vertices",
                t.min(1 << 24) as f32,
                500.0,
                100_000.0,
                "500–100000",
            )?;
        }
        if c.mesh.as_os_str().is_empty() {
            return Err(GarmentError::Toml("`mesh` is empty".into()));
        }
        c.region_table()?;
        Ok(c)
    }

    /// The region table: the named built-in garment's or the listed one.
    pub fn region_table(&self) -> Result<RegionTable, GarmentError> {
        match (&self.regions_like, self.regions.is_empty()) {
            (Some(name), true) => RegionTable::from_config(&GarmentConfig::builtin(name)?.regions),
            (None, false) => RegionTable::from_config(&self.regions),
            (Some(_), false) => Err(GarmentError::Regions(
                "give either `regions_like` or `[[regions]]`, not both".into(),
            )),
            (None, true) => Err(GarmentError::Regions(
                "no regions: give `regions_like = \"tshirt\"` (or \"pants\") or `[[regions]]` tables".into(),
            )),
        }
    }
}

/// What a garment TOML file describes: a procedural garment ([`GarmentConfig`]), or,
/// when it has a `mesh` entry, a garment imported from a mesh file
/// ([`MeshGarmentConfig`]).
#[derive(Clone, Debug)]
pub enum GarmentSpec {
    /// Cut from a pattern around the procedural body.
    Pattern(GarmentConfig),
    /// Read from a mesh file.
    Mesh(MeshGarmentConfig),
}

impl GarmentSpec {
    /// Parses either kind of garment TOML (see [`GarmentSpec`]).
    pub fn from_toml(text: &str) -> Result<GarmentSpec, GarmentError> {
        let table: toml::Table =
            toml::from_str(text).map_err(|e| GarmentError::Toml(e.to_string()))?;
        if table.contains_key("mesh") {
            MeshGarmentConfig::from_toml(text).map(GarmentSpec::Mesh)
        } else {
            GarmentConfig::from_toml(text).map(GarmentSpec::Pattern)
        }
    }
}

/// A partition of the 22 bones into named regions (SOR §5).
///
/// Invariant: every bone belongs to exactly one region; 1 ≤ regions ≤ [`MAX_REGIONS`].
#[derive(Clone, Debug, PartialEq)]
pub struct RegionTable {
    /// Region names.
    pub names: Vec<String>,
    /// Region index of each bone.
    pub bone_region: [u8; JOINT_COUNT],
}

impl RegionTable {
    /// Builds and checks the table.
    pub fn from_config(regions: &[RegionConfig]) -> Result<RegionTable, GarmentError> {
        if regions.is_empty() || regions.len() > MAX_REGIONS {
            return Err(GarmentError::Regions(format!(
                "{} regions (need 1–{MAX_REGIONS})",
                regions.len()
            )));
        }
        let mut bone_region = [u8::MAX; JOINT_COUNT];
        for (g, r) in regions.iter().enumerate() {
            for b in &r.bones {
                let j = JointId::from_name(b).ok_or_else(|| {
                    GarmentError::Regions(format!(
                        "region {:?}: {b:?} is not a canonical joint",
                        r.name
                    ))
                })?;
                if bone_region[j.index()] != u8::MAX {
                    return Err(GarmentError::Regions(format!(
                        "bone {b:?} is in more than one region"
                    )));
                }
                bone_region[j.index()] = g as u8;
            }
        }
        if let Some(b) = bone_region.iter().position(|&g| g == u8::MAX) {
            return Err(GarmentError::Regions(format!(
                "bone {:?} is in no region",
                JointId(b as u8).name()
            )));
        }
        Ok(RegionTable {
            names: regions.iter().map(|r| r.name.clone()).collect(),
            bone_region,
        })
    }

    /// Number of regions N_G.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True when there are no regions (never, for a checked table).
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse_with_seven_regions() {
        for (name, _) in BUILTIN_GARMENTS {
            let c = GarmentConfig::builtin(name).expect("parse");
            let t = RegionTable::from_config(&c.regions).expect("regions");
            assert_eq!(t.len(), 7);
        }
    }

    #[test]
    fn bad_regions_are_refused() {
        let r = |name: &str, bones: &[&str]| RegionConfig {
            name: name.into(),
            bones: bones.iter().map(|s| s.to_string()).collect(),
        };
        let all: Vec<&str> = JointId::all().map(|j| j.name()).collect();
        assert!(RegionTable::from_config(&[r("all", &all)]).is_ok());
        assert!(
            matches!(RegionTable::from_config(&[r("some", &all[..20])]), Err(GarmentError::Regions(m)) if m.contains("in no region"))
        );
        assert!(
            matches!(RegionTable::from_config(&[r("a", &all), r("b", &["neck"])]), Err(GarmentError::Regions(m)) if m.contains("more than one"))
        );
        assert!(matches!(
            RegionTable::from_config(&[r("a", &["elbow"])]),
            Err(GarmentError::Regions(_))
        ));
        let text =
            include_str!("../../configs/garments/tshirt.toml").replace("ease = 0.02", "ease = 0.5");
        assert!(matches!(
            GarmentConfig::from_toml(&text),
            Err(GarmentError::Parameter { name: "ease", .. })
        ));
    }

    /// A configuration changed after parsing (as by `--garment-vertices`) is checked
    /// again: `Garment::generate` calls `check`.
    #[test]
    fn a_configuration_changed_after_parsing_is_checked_again() {
        let mut c = GarmentConfig::builtin("tshirt").expect("built in");
        c.check().expect("the built-in T-shirt");
        for n in [3, 1_000_000_000] {
            c.target_vertices = n;
            assert!(matches!(
                c.check(),
                Err(GarmentError::Parameter {
                    name: "target_vertices",
                    ..
                })
            ));
        }
    }
}
