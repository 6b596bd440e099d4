//! The default database: the default body wearing the default T-shirt, baked from the
//! built-in walking clip and joint-limit samples with cloth self-contact, cached on disk and rebuilt only when
//! its inputs change (the cache key hashes all of them).

use std::path::PathBuf;

use xxhash_rust::xxh3::xxh3_64;

use crate::body::{Body, BodyOptions, BodyShape};
use crate::garment::{BUILTIN_GARMENTS, Garment, GarmentConfig};
use crate::mocap::{BUILTIN_PROFILES, Clip};
use crate::sim::SimParams;
use crate::sor::{DB_VERSION, Database};

use super::pipeline::{BakeConfig, BakeError, Baker, Progress, Shard};

/// The built-in clip the default database is baked from: CMU 131_01 (start, walk,
/// stop). The data used in this project was obtained from mocap.cs.cmu.edu. The
/// database was created with funding from NSF EIA-0196217. (CMU 131_03 stays held out
/// for evaluation.)
pub const DEFAULT_CLIP: &str = include_str!("../../tests/fixtures/mocap/cmu_131_01.bvh");

/// The name [`DEFAULT_CLIP`] goes by in a database's record of where its examples came
/// from ([`crate::mocap::Clip::named`]).
pub const DEFAULT_CLIP_NAME: &str = "built-in CMU 131_01";

/// Bumped whenever the default recipe changes in a way the key does not see (2: the
/// arm guard's torso became continuous; 3: the guard pushes an arm out of the torso
/// radially, forwards in front of the chest, instead of only sideways; each moved the
/// example poses; changes to the simulator's results are seen through
/// [`crate::sim::REVISION`]).
const RECIPE: u32 = 3;

/// Number of examples of the default database: bakes in six to eight minutes on two
/// cores (each example is a continuation, 66 sensitivities and a rig fit).
pub const DEFAULT_EXAMPLES: usize = 48;

fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("CLOTHCAST_CACHE") {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(d).join("clothcast");
    }
    match std::env::var_os("HOME") {
        Some(h) => PathBuf::from(h).join(".cache").join("clothcast"),
        None => std::env::temp_dir().join("clothcast-cache"),
    }
}

/// The default recipe: [`DEFAULT_EXAMPLES`] K-means examples, simulated with cloth
/// self-contact. (SOR §7 leaves it out; with it the garment SOR streams crosses itself
/// a quarter as often, 24 edges per frame on CMU 131_03 against 107, at about the same
/// error, and no longer bunches a sleeve through the torso; the bake takes ~1.2× as
/// long.)
fn default_config() -> BakeConfig {
    BakeConfig {
        examples: DEFAULT_EXAMPLES,
        sim: SimParams::default().with_self_contact(),
        ..BakeConfig::default()
    }
}

/// Where the default database lives (`$CLOTHCAST_CACHE`, else the XDG cache folder),
/// named by a hash of everything that goes into it: the format, the recipe, the
/// simulator's revision, the body,
/// the garment, the clip, the skeleton profile that reads the clip and the bake settings.
pub fn default_database_path() -> PathBuf {
    let cfg = default_config();
    let garment_text = BUILTIN_GARMENTS
        .iter()
        .find(|(n, _)| *n == "tshirt")
        .map(|(_, t)| *t)
        .unwrap_or("");
    // the clip is read with the profile its joint names select (CMU's), whose rest-pose
    // corrections move every example pose taken from it
    let clip_profile_text = BUILTIN_PROFILES
        .iter()
        .find(|(n, _)| *n == "cmu")
        .map(|(_, t)| *t)
        .unwrap_or("");
    let key = format!(
        "{DB_VERSION}/{RECIPE}/{}/{}/{}/{garment_text}/{:016x}/{:016x}/{}",
        crate::sim::REVISION,
        serde_json::to_string(&BodyShape::default()).unwrap_or_default(),
        serde_json::to_string(&BodyOptions::default()).unwrap_or_default(),
        xxh3_64(DEFAULT_CLIP.as_bytes()),
        xxh3_64(clip_profile_text.as_bytes()),
        serde_json::to_string(&cfg).unwrap_or_default(),
    );
    cache_dir().join(format!(
        "default-tshirt-{:016x}.ccdb",
        xxh3_64(key.as_bytes())
    ))
}

/// The default database: read from the cache when present and intact, otherwise baked
/// (resumably: finished examples survive an interruption) and cached.
pub fn default_database(progress: Progress<'_>) -> Result<(Database, PathBuf), BakeError> {
    let path = default_database_path();
    match Database::read(&path) {
        Ok(db) => return Ok((db, path)),
        // say why a cached file is not used before spending minutes rebuilding it
        Err(e) if path.exists() => {
            tracing::warn!(path = %path.display(), error = %e, "cached default database refused; baking it again");
        }
        Err(_) => {}
    }
    let body = Body::default_body().map_err(|e| BakeError::Config(e.to_string()))?;
    let garment = Garment::generate(
        &body,
        &GarmentConfig::builtin("tshirt").map_err(|e| BakeError::Config(e.to_string()))?,
    )
    .map_err(|e| BakeError::Config(e.to_string()))?;
    let clip = Clip::from_bvh_text(DEFAULT_CLIP, None, &body.skeleton)
        .map_err(|e| BakeError::Config(e.to_string()))?
        .named(DEFAULT_CLIP_NAME);
    let baker = Baker::new(&body, &garment, default_config())?;
    let parts = path.with_extension("parts");
    let db = baker.bake_kmeans(&[clip], Some(&parts), Shard::ALL, progress)?;
    db.write(&path)?;
    let _ = std::fs::remove_dir_all(&parts);
    Ok((db, path))
}
