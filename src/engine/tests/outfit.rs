//! Outfits: several garments on one avatar, layered, streamed in one message.

use super::*;
use crate::codec::GarmentSetup;
use crate::protocol::{FrameMessage, GarmentLayer};

fn pants() -> Arc<Database> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/db/v1/small-pants.ccdb");
    Arc::new(Database::read(&path).expect("pants database"))
}

/// An engine streaming the small T-shirt (default) and pants, with `outfit` as what
/// avatars wear, and its synthesizers.
fn shirt_and_pants(outfit: &[&str]) -> (Engine, Vec<Arc<Database>>) {
    let cfg = EngineConfig {
        outfit: outfit.iter().map(|s| s.to_string()).collect(),
        ..EngineConfig::default()
    };
    let engine = Engine::with_garments(vec![db(), pants()], cfg).expect("engine");
    let dbs = engine.databases();
    (engine, dbs)
}

/// One synthesizer per database, as the engine makes them with `config`.
fn synthesizers<'a>(dbs: &'a [Arc<Database>], config: &EngineConfig) -> Vec<Synthesizer<'a>> {
    dbs.iter().map(|d| Engine::synthesizer(d, config)).collect()
}

/// The engine's (shirt, pants) garment names.
fn garment_names(engine: &Engine) -> (String, String) {
    let names = engine.garment_names();
    (names[0].clone(), names[1].clone())
}

fn frame_of(bytes: &Bytes) -> FrameMessage {
    match ServerMessage::from_msgpack(bytes).expect("frame message") {
        ServerMessage::Frame(f) => f,
        other => panic!("expected a frame, got {other:?}"),
    }
}

/// Each asset's codec setup, by hash, from the engine's `asset` messages.
fn setups(engine: &Engine) -> std::collections::HashMap<String, Arc<GarmentSetup>> {
    engine
        .assets()
        .iter()
        .map(|a| match ServerMessage::from_msgpack(a).expect("asset") {
            ServerMessage::Asset(a) => (
                a.hash,
                Arc::new(GarmentSetup::from_bytes(&a.setup).expect("setup")),
            ),
            other => panic!("expected an asset, got {other:?}"),
        })
        .collect()
}

/// Decodes every garment of `f`, inner to outer, with a decoder per asset.
fn decode_layers(
    engine: &Engine,
    decoders: &mut std::collections::HashMap<String, (Decoder, Vec<f32>)>,
    f: &FrameMessage,
) -> Vec<Vec<f32>> {
    let setups = setups(engine);
    let head = GarmentLayer {
        asset: f.asset.clone(),
        garment: f.garment.clone(),
    };
    std::iter::once(&head)
        .chain(&f.layers)
        .map(|l| {
            let (d, out) = decoders.entry(l.asset.clone()).or_insert_with(|| {
                let setup = Arc::clone(&setups[&l.asset]);
                let n = setup.vertex_count();
                (Decoder::new(setup), vec![0.0; 3 * n])
            });
            d.decode(&l.garment, out).expect("decodes");
            out.clone()
        })
        .collect()
}

/// Shirt vertices (after decoding) less than `gap` outside the decoded pants, over
/// their surface.
fn shirt_inside_pants(pants_db: &Database, pants: &[f32], shirt: &[f32], gap: f32) -> usize {
    let v = |x: &[f32]| {
        x.chunks_exact(3)
            .map(|p| Vec3::new(p[0], p[1], p[2]))
            .collect::<Vec<_>>()
    };
    let mesh = crate::mesh::TriMesh::new(v(pants), pants_db.garment.triangles.clone());
    let q = crate::mesh::MeshQuery::build(&mesh).expect("query");
    v(shirt)
        .iter()
        .filter(|&&p| {
            q.closest_within(p, 0.03).is_some_and(|h| {
                h.feature == crate::mesh::Feature::Face && h.signed_distance(p) < gap
            })
        })
        .count()
}

#[test]
fn an_outfit_streams_every_garment_in_one_frame_with_the_outer_outside_the_inner() {
    let (mut engine, dbs) = shirt_and_pants(&[]);
    // SOR as written (per-example distances, k = 6): on these 4-example fixtures the
    // default's softer blend (pooled, k = 3) leaves the single-pass layering 2–7 shirt
    // vertices up to 9 mm inside the pants where the shirt alone has 30–40 (noted in
    // the README's outfit section); this test holds the layering to what it did
    let config = EngineConfig {
        synth: crate::sor::SynthParams {
            distance: crate::sor::Distance::PerExample,
            k: 6.0,
            ..crate::sor::SynthParams::default()
        },
        ..EngineConfig::default()
    };
    let synths = synthesizers(&dbs, &config);
    let (shirt_name, pants_name) = garment_names(&engine);
    engine.set_pose("solo", arm(0.4), 0.0, 0.0).expect("pose");
    engine
        .set_pose("dressed", arm(0.4), 0.0, 0.0)
        .expect("pose");
    engine
        .wear("dressed", &[&pants_name, &shirt_name])
        .expect("an outfit");
    assert_eq!(
        engine.outfit_of("dressed"),
        Some(vec![pants_name.clone(), shirt_name.clone()])
    );
    assert_eq!(engine.outfit_of("solo"), Some(vec![shirt_name.clone()]));
    let skeleton = dbs[0].body.to_body().skeleton;
    let clip = crate::mocap::Clip::from_bvh_text(crate::bake::DEFAULT_CLIP, None, &skeleton)
        .expect("clip");
    let mut decoders = std::collections::HashMap::new();
    let (mut t, mut checked) = (0.0, 0);
    for (k, pose) in clip.poses.iter().step_by(30).take(20).enumerate() {
        for id in ["solo", "dressed"] {
            engine.set_pose(id, *pose, t, t).expect("pose");
        }
        let out = engine.tick(&synths, t).expect("tick");
        let get = |id: &str| out.frames.iter().find(|f| f.avatar == id).expect("a frame");
        // one garment: a frame as before outfits, no layers
        let solo = frame_of(
            get("solo")
                .key
                .as_ref()
                .or(get("solo").delta.as_ref())
                .expect("bytes"),
        );
        assert!(solo.layers.is_empty());
        // the outfit: the pants first, the shirt over them, one frame number
        let f = get("dressed");
        let bytes = if k == 0 {
            assert!(f.delta.is_none(), "an outfit starts with a keyframe alone");
            f.key.as_ref().expect("key")
        } else {
            f.delta.as_ref().expect("delta")
        };
        let m = frame_of(bytes);
        assert_eq!(m.layers.len(), 1);
        assert_eq!(m.seq, f.frame);
        let hashes: Vec<&str> = m.assets().collect();
        assert_ne!(hashes[0], hashes[1]);
        let decoded = decode_layers(&engine, &mut decoders, &m);
        let (pants, shirt) = (&decoded[0], &decoded[1]);
        assert_eq!(pants.len(), 3 * dbs[1].vertex_count());
        assert_eq!(shirt.len(), 3 * dbs[0].vertex_count());
        // decoded (each within the codec's millimetre), the shirt stays outside the pants
        let inside = shirt_inside_pants(&dbs[1], pants, shirt, 0.0);
        // the same shirt without the outfit cuts through them
        let mut solo_dec = vec![0.0; shirt.len()];
        let mut d = Decoder::new(Arc::clone(engine.setup()));
        let (_, kb) = garment_of(&{
            let mut e2 = Engine::with_garments(vec![Arc::clone(&dbs[0])], EngineConfig::default())
                .expect("engine");
            e2.set_pose("x", *pose, 0.0, 0.0).expect("pose");
            let o = e2
                .tick(std::slice::from_ref(&synths[0]), 0.0)
                .expect("tick");
            o.frames[0].key.clone().expect("key")
        });
        d.decode(&kb, &mut solo_dec).expect("decodes");
        let bare = shirt_inside_pants(&dbs[1], pants, &solo_dec, 0.0);
        assert!(
            inside * 10 <= bare.max(5),
            "pose {k}: {inside} shirt vertices inside the pants ({bare} without layering)"
        );
        checked += bare;
        t += 1.0 / 30.0;
    }
    assert!(
        checked > 100,
        "the shirt alone was inside the pants at only {checked} vertices"
    );
}

/// Shirt vertices (after decoding) outside the decoded pants, over their surface: where
/// the shirt shows through them.
fn shirt_outside_pants(pants_db: &Database, pants: &[f32], shirt: &[f32]) -> usize {
    let over = shirt_inside_pants(pants_db, pants, shirt, f32::INFINITY);
    over - shirt_inside_pants(pants_db, pants, shirt, 0.0)
}

#[test]
fn pants_worn_over_a_shirt_tuck_it_in_and_keep_their_own_shape() {
    let (mut engine, dbs) = shirt_and_pants(&[]);
    let config = EngineConfig::default();
    let synths = synthesizers(&dbs, &config);
    let (shirt_name, pants_name) = garment_names(&engine);
    for id in ["tucked", "shirt", "pants"] {
        engine.set_pose(id, arm(0.4), 0.0, 0.0).expect("pose");
    }
    engine
        .wear("tucked", &[&shirt_name, &pants_name])
        .expect("the shirt under the pants");
    engine
        .wear("pants", &[&pants_name])
        .expect("the pants alone");
    let skeleton = dbs[0].body.to_body().skeleton;
    let clip = crate::mocap::Clip::from_bvh_text(crate::bake::DEFAULT_CLIP, None, &skeleton)
        .expect("clip");
    // a decoder per avatar and asset
    let mut decoders: std::collections::HashMap<&'static str, std::collections::HashMap<_, _>> =
        std::collections::HashMap::new();
    let (mut t, mut tucked_out, mut shirt_out) = (0.0, 0, 0);
    for pose in clip.poses.iter().step_by(30).take(12) {
        for id in ["tucked", "shirt", "pants"] {
            engine.set_pose(id, *pose, t, t).expect("pose");
        }
        let out = engine.tick(&synths, t).expect("tick");
        let mut decoded = |id: &'static str| {
            let f = out.frames.iter().find(|f| f.avatar == id).expect("a frame");
            let bytes = f.delta.as_ref().or(f.key.as_ref()).expect("bytes");
            decode_layers(&engine, decoders.entry(id).or_default(), &frame_of(bytes))
        };
        let (outfit, shirt, pants) = (decoded("tucked"), decoded("shirt"), decoded("pants"));
        // the shirt first, the pants over it
        assert_eq!(outfit[0].len(), 3 * dbs[0].vertex_count());
        assert_eq!(outfit[1].len(), 3 * dbs[1].vertex_count());
        // the pants as they are alone (each coded within the codec's millimetre)
        let apart = outfit[1]
            .iter()
            .zip(&pants[0])
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(apart <= 0.0021, "the pants moved {apart} m over the shirt");
        tucked_out += shirt_outside_pants(&dbs[1], &outfit[1], &outfit[0]);
        shirt_out += shirt_outside_pants(&dbs[1], &outfit[1], &shirt[0]);
        t += 1.0 / 30.0;
    }
    // measured: 1 016 untucked, 17 tucked (the shirt bellying over the waistband)
    assert!(
        shirt_out > 200,
        "the shirt alone was out through the pants at only {shirt_out} vertices"
    );
    assert!(
        tucked_out * 40 <= shirt_out,
        "{tucked_out} tucked shirt vertices out through the pants ({shirt_out} untucked)"
    );
}

#[test]
fn outfits_that_cannot_be_worn_are_refused_by_name_and_change_nothing() {
    let (mut engine, _) = shirt_and_pants(&[]);
    let names = engine.garment_names();
    engine.set_pose("a", arm(0.3), 0.0, 0.0).expect("pose");
    let says = |r: Result<(), EngineError>, what: &str| {
        let e = r.expect_err(what);
        assert!(e.to_string().contains(what), "{e}");
    };
    says(
        engine.wear("a", &[names[1].as_str(), "ballgown"]),
        "unknown garment \"ballgown\"",
    );
    says(engine.wear("a", &[&names[1], &names[1]]), "twice");
    says(engine.wear("a", &[] as &[&str]), "1 to 4 garments");
    says(
        engine.wear("a", &["a", "b", "c", "d", "e"]),
        "1 to 4 garments, this one 5",
    );
    assert_eq!(engine.outfit_of("a"), Some(vec![names[0].clone()]));
    // garments of different bodies cannot be layered (each alone still can be worn)
    let mut other = (*pants()).clone();
    other.garment.name = "big-pants".into();
    other.body.positions[0].y += 0.01;
    let mut engine = Engine::with_garments(vec![db(), Arc::new(other)], EngineConfig::default())
        .expect("engine");
    engine.set_pose("a", arm(0.3), 0.0, 0.0).expect("pose");
    says(
        engine.wear("a", &["big-pants", &names[0]]),
        "different bodies",
    );
    engine.wear("a", &["big-pants"]).expect("alone");
    // a configured outfit is checked at start
    let cfg = EngineConfig {
        outfit: vec![names[1].clone(), "ballgown".into()],
        ..EngineConfig::default()
    };
    assert!(matches!(
        Engine::with_garments(vec![db(), pants()], cfg),
        Err(EngineError::UnknownGarment(..))
    ));
}

#[test]
fn a_configured_outfit_dresses_new_avatars_and_keyframes_cover_every_layer() {
    let (mut engine, dbs) = shirt_and_pants(&["pants", "tshirt"]);
    let synths: Vec<Synthesizer<'_>> = dbs.iter().map(|d| default_synth(d)).collect();
    engine
        .set_pose("kiosk-1", arm(0.2), 0.0, 0.0)
        .expect("pose");
    assert_eq!(
        engine.outfit_of("kiosk-1"),
        Some(vec!["pants".to_string(), "tshirt".to_string()])
    );
    let mut t = 0.0;
    for i in 0..3 {
        engine
            .set_pose("kiosk-1", arm(0.2 + 0.1 * i as f32), t, t)
            .expect("pose");
        engine.tick(&synths, t).expect("tick");
        t += 1.0 / 30.0;
    }
    // a viewer that asks for a keyframe gets both layers' keyframes, decodable alone
    engine.request_keyframe("kiosk-1");
    engine.set_pose("kiosk-1", arm(0.6), t, t).expect("pose");
    let out = engine.tick(&synths, t).expect("tick");
    let f = &out.frames[0];
    let (key, delta) = (
        frame_of(f.key.as_ref().expect("key")),
        frame_of(f.delta.as_ref().expect("delta")),
    );
    assert_eq!((key.seq, key.layers.len()), (delta.seq, 1));
    let mut fresh = std::collections::HashMap::new();
    let from_key = decode_layers(&engine, &mut fresh, &key);
    assert_eq!(from_key.len(), 2);
    // and wearing the same outfit again restarts nothing
    engine
        .wear("kiosk-1", &["pants", "tshirt"])
        .expect("same outfit");
    t += 1.0 / 30.0;
    engine.set_pose("kiosk-1", arm(0.6), t, t).expect("pose");
    let out = engine.tick(&synths, t).expect("tick");
    assert!(out.frames[0].delta.is_some() && out.frames[0].key.is_none());
}
