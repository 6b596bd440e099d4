//! Skeleton profiles: how a source skeleton's joints map onto the canonical skeleton,
//! read from `configs/skeletons/*.toml` (the built-in ones are compiled in).
//!
//! A profile names, for each canonical joint, the source joint that drives it; joints a
//! source lacks are held at rest, or share a mapped neighbour's rotation along a
//! declared chain. Source names match exactly, or after normalisation (case, any
//! `prefix:` such as `mixamorig:`, and non-alphanumeric characters ignored).

use std::collections::BTreeMap;

use glam::Vec3;

use crate::skeleton::{JOINT_COUNT, JointId};

/// Built-in profiles: (name, TOML text).
pub const BUILTIN_PROFILES: [(&str, &str); 5] = [
    ("cmu", include_str!("../../configs/skeletons/cmu.toml")),
    (
        "mixamo",
        include_str!("../../configs/skeletons/mixamo.toml"),
    ),
    ("unity", include_str!("../../configs/skeletons/unity.toml")),
    ("vroid", include_str!("../../configs/skeletons/vroid.toml")),
    ("smpl", include_str!("../../configs/skeletons/smpl.toml")),
];

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileFile {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default = "one")]
    scale: f32,
    #[serde(default)]
    rest_frame: Option<usize>,
    joints: BTreeMap<String, String>,
    #[serde(default)]
    share: Vec<ShareFile>,
    #[serde(default)]
    correction: BTreeMap<String, [f32; 3]>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ShareFile {
    chain: Vec<String>,
}

fn one() -> f32 {
    1.0
}

/// A parsed, checked profile.
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    /// Profile name (`"cmu"`).
    pub name: String,
    /// One line saying what sources it is for.
    pub description: String,
    /// Source length unit → metres.
    pub scale: f32,
    /// Frame of a BVH file to take as the rest pose instead of all-zero channels.
    pub rest_frame: Option<usize>,
    /// Source joint name for each canonical joint (`None`: the source lacks it).
    pub joints: [Option<String>; JOINT_COUNT],
    /// Chains of canonical joints (parent first) over which the rotation of the first
    /// mapped joint is spread when the others are missing.
    pub share: Vec<Vec<JointId>>,
    /// Extra rest-pose correction per canonical joint: rotation vector, radians,
    /// applied after the automatic correction.
    pub correction: [Vec3; JOINT_COUNT],
}

/// Why a profile was refused or could not be chosen.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum ProfileError {
    /// The TOML text is malformed or has unknown keys.
    #[error("profile TOML: {0}")]
    Toml(String),
    /// A key names no canonical joint.
    #[error("profile {profile:?}: {name:?} is not a canonical joint name")]
    UnknownJoint {
        /// Profile name.
        profile: String,
        /// The offending key.
        name: String,
    },
    /// The scale is not a positive finite number.
    #[error("profile {0:?}: scale must be a positive number")]
    Scale(String),
    /// The pelvis is not mapped (every profile needs a root).
    #[error("profile {0:?} does not map the pelvis")]
    NoPelvis(String),
    /// No built-in profile has that name.
    #[error("no profile named {0:?} (built in: cmu, mixamo, unity, vroid, smpl)")]
    NotFound(String),
    /// No profile matches the source's joint names well enough.
    #[error(
        "no skeleton profile matches these joint names (best: {best} with {matched}/{mapped} joints); write a profile, see README"
    )]
    NoMatch {
        /// Best candidate.
        best: String,
        /// Its joints found in the source.
        matched: usize,
        /// Its mapped joints.
        mapped: usize,
    },
}

/// Normalises a joint name for matching: the part after the last `:` or `|`, lowercase,
/// letters and digits only.
pub fn normalize_name(name: &str) -> String {
    let tail = name.rsplit([':', '|']).next().unwrap_or(name);
    tail.chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

impl Profile {
    /// Parses and checks a profile file.
    pub fn from_toml(text: &str) -> Result<Profile, ProfileError> {
        let f: ProfileFile = toml::from_str(text).map_err(|e| ProfileError::Toml(e.to_string()))?;
        if !(f.scale.is_finite() && f.scale > 0.0) {
            return Err(ProfileError::Scale(f.name));
        }
        let joint = |n: &str| {
            JointId::from_name(n).ok_or_else(|| ProfileError::UnknownJoint {
                profile: f.name.clone(),
                name: n.to_string(),
            })
        };
        let mut joints: [Option<String>; JOINT_COUNT] = Default::default();
        for (k, v) in &f.joints {
            joints[joint(k)?.index()] = Some(v.clone());
        }
        if joints[0].is_none() {
            return Err(ProfileError::NoPelvis(f.name));
        }
        let share = f
            .share
            .iter()
            .map(|s| {
                s.chain
                    .iter()
                    .map(|n| joint(n))
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut correction = [Vec3::ZERO; JOINT_COUNT];
        for (k, v) in &f.correction {
            correction[joint(k)?.index()] = Vec3::from(*v) * std::f32::consts::PI / 180.0;
        }
        Ok(Profile {
            name: f.name,
            description: f.description,
            scale: f.scale,
            rest_frame: f.rest_frame,
            joints,
            share,
            correction,
        })
    }

    /// A built-in profile by name.
    pub fn builtin(name: &str) -> Result<Profile, ProfileError> {
        let (_, text) = BUILTIN_PROFILES
            .iter()
            .find(|(n, _)| *n == name)
            .ok_or_else(|| ProfileError::NotFound(name.to_string()))?;
        Profile::from_toml(text)
    }

    /// All built-in profiles.
    pub fn builtins() -> Vec<Profile> {
        BUILTIN_PROFILES
            .iter()
            .filter_map(|(_, t)| Profile::from_toml(t).ok())
            .collect()
    }

    /// Index of the source joint named `want` among `names`: exact match first, then
    /// normalised match.
    pub fn find(names: &[impl AsRef<str>], want: &str) -> Option<usize> {
        names.iter().position(|n| n.as_ref() == want).or_else(|| {
            let w = normalize_name(want);
            names.iter().position(|n| normalize_name(n.as_ref()) == w)
        })
    }

    /// For each canonical joint, the index of its source joint in `names` (if mapped
    /// and present).
    pub fn resolve(&self, names: &[impl AsRef<str>]) -> [Option<usize>; JOINT_COUNT] {
        std::array::from_fn(|c| self.joints[c].as_deref().and_then(|n| Self::find(names, n)))
    }

    /// How many of this profile's mapped joints occur in `names`, and how many it maps.
    pub fn match_count(&self, names: &[impl AsRef<str>]) -> (usize, usize) {
        let mapped = self.joints.iter().filter(|j| j.is_some()).count();
        let found = self.resolve(names).iter().filter(|j| j.is_some()).count();
        (found, mapped)
    }

    /// Picks the built-in profile that matches the most joint names (the pelvis must
    /// match, and at least 60 % of the profile's joints).
    pub fn detect(names: &[impl AsRef<str>]) -> Result<Profile, ProfileError> {
        let mut best: Option<(f32, usize, Profile)> = None;
        for p in Self::builtins() {
            let (found, mapped) = p.match_count(names);
            let pelvis = p.resolve(names)[0].is_some();
            let score = if pelvis {
                found as f32 / mapped.max(1) as f32
            } else {
                0.0
            };
            if best
                .as_ref()
                .is_none_or(|(s, f, _)| score > *s || (score == *s && found > *f))
            {
                best = Some((score, found, p));
            }
        }
        match best {
            Some((score, _, p)) if score >= 0.6 => Ok(p),
            Some((_, found, p)) => {
                let mapped = p.joints.iter().filter(|j| j.is_some()).count();
                Err(ProfileError::NoMatch {
                    best: p.name,
                    matched: found,
                    mapped,
                })
            }
            None => Err(ProfileError::NotFound("(none)".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse_and_detect_themselves() {
        for (name, _) in BUILTIN_PROFILES {
            let p = Profile::builtin(name).expect("parses");
            let names: Vec<String> = p.joints.iter().flatten().cloned().collect();
            assert_eq!(Profile::detect(&names).expect("detect").name, name);
        }
        let mixamo = [
            "mixamorig:Hips",
            "mixamorig:Spine",
            "mixamorig:LeftUpLeg",
            "mixamorig:RightUpLeg",
            "mixamorig:Spine1",
            "mixamorig:Spine2",
            "mixamorig:Neck",
            "mixamorig:Head",
            "mixamorig:LeftArm",
            "mixamorig:RightArm",
            "mixamorig:LeftForeArm",
            "mixamorig:RightForeArm",
            "mixamorig:LeftLeg",
            "mixamorig:RightLeg",
        ];
        assert_eq!(Profile::detect(&mixamo).expect("mixamo").name, "mixamo");
        // VRM lowerCamel humanoid names match the Unity profile after normalisation
        let vrm = [
            "hips",
            "spine",
            "chest",
            "neck",
            "head",
            "leftUpperArm",
            "rightUpperArm",
            "leftLowerArm",
            "rightLowerArm",
            "leftHand",
            "rightHand",
            "leftUpperLeg",
            "rightUpperLeg",
            "leftLowerLeg",
            "rightLowerLeg",
            "leftFoot",
            "rightFoot",
        ];
        assert_eq!(Profile::detect(&vrm).expect("vrm").name, "unity");
        assert!(matches!(
            Profile::detect(&["foo", "bar"]),
            Err(ProfileError::NoMatch { .. })
        ));
    }

    #[test]
    fn bad_profiles_are_refused() {
        assert!(matches!(
            Profile::from_toml("name = 'x'\n[joints]\nelbow = 'E'\npelvis = 'P'\n"),
            Err(ProfileError::UnknownJoint { .. })
        ));
        assert!(matches!(
            Profile::from_toml("name = 'x'\n[joints]\nneck = 'N'\n"),
            Err(ProfileError::NoPelvis(_))
        ));
        assert!(matches!(
            Profile::from_toml("name = 'x'\nscale = -1\n[joints]\npelvis = 'P'\n"),
            Err(ProfileError::Scale(_))
        ));
        assert!(matches!(
            Profile::from_toml("name = 'x'\nbogus = 1\n[joints]\npelvis = 'P'\n"),
            Err(ProfileError::Toml(_))
        ));
        assert_eq!(normalize_name("mixamorig:Left_Arm"), "leftarm");
    }
}
