//! Outfits over real sockets: `clothcast wear` dresses a played avatar in pants with a
//! shirt over them, and a viewer decodes both garments of each frame.

use std::fs::File;
use std::io::BufReader;
use std::process::Command;
use std::sync::Arc;

use clothcast::client::Viewer;
use clothcast::mesh::{Feature, MeshQuery, TriMesh, read_obj, read_pc2};
use clothcast::net::start_with_garments;
use clothcast::protocol::ClientMessage;
use clothcast::sor::Database;
use glam::Vec3;

use super::clients::{finish, play_to};
use super::server::{config, connect_publisher, connect_viewer, db, expect_error, until};

fn pants() -> Arc<Database> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/db/v1/small-pants.ccdb");
    Arc::new(Database::read(&path).expect("pants database"))
}

fn points(x: &[f32]) -> Vec<Vec3> {
    x.chunks_exact(3)
        .map(|p| Vec3::new(p[0], p[1], p[2]))
        .collect()
}

/// Vertices of `outer` inside `inner`'s surface (over its faces, within 3 cm).
fn inside(inner_db: &Database, inner: &[f32], outer: &[f32]) -> usize {
    let q = MeshQuery::build(&TriMesh::new(
        points(inner),
        inner_db.garment.triangles.clone(),
    ))
    .expect("query");
    points(outer)
        .iter()
        .filter(|&&p| {
            q.closest_within(p, 0.03)
                .is_some_and(|h| h.feature == Feature::Face && h.signed_distance(p) < 0.0)
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clothcast_wear_dresses_an_avatar_in_an_outfit_that_viewers_decode_layer_by_layer() {
    let (shirt_db, pants_db) = (db(), pants());
    let server = start_with_garments(vec![Arc::clone(&shirt_db), Arc::clone(&pants_db)], config())
        .await
        .expect("server starts");
    let url = format!("ws://{}/ws", server.addr);
    let play = play_to(
        &url,
        &["--avatars", "2", "--prefix", "walker", "--seconds", "8"],
    );
    let mut viewer = connect_viewer(&url).await;
    let mut view = Viewer::default();
    until(&mut viewer, &mut view, |v, _| {
        v.avatars.get("walker-0").is_some_and(|a| a.frames >= 5)
    })
    .await;
    assert!(
        view.avatars["walker-0"].layers.is_empty(),
        "one garment before"
    );
    let wear = Command::new(env!("CARGO_BIN_EXE_clothcast"))
        .args([
            "wear", "walker-0", "pants", "tshirt", "--url", &url, "--token", "pub",
        ])
        .output()
        .expect("clothcast wear runs");
    assert!(
        wear.status.success(),
        "{}",
        String::from_utf8_lossy(&wear.stderr)
    );
    assert!(
        String::from_utf8_lossy(&wear.stdout).contains("walker-0 wears pants under tshirt"),
        "{}",
        String::from_utf8_lossy(&wear.stdout)
    );
    // the avatar's frames now carry the pants and the shirt over them
    let names = |v: &Viewer, id: &str| -> Vec<String> {
        v.avatars[id]
            .assets()
            .map(|a| v.garments[a].clone())
            .collect()
    };
    until(&mut viewer, &mut view, |v, _| {
        v.avatars
            .get("walker-0")
            .is_some_and(|a| a.layers.len() == 1 && a.frames >= 5)
    })
    .await;
    assert_eq!(names(&view, "walker-0"), ["pants", "tshirt"]);
    assert_eq!(names(&view, "walker-1"), ["tshirt"]);
    // a recording holds the outfit as one mesh: the pants' vertices, then the shirt's
    let dir = std::env::temp_dir().join(format!("clothcast-outfit-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let record = Command::new(env!("CARGO_BIN_EXE_clothcast"))
        .args([
            "watch",
            "--url",
            &url,
            "--token",
            "view",
            "--seconds",
            "2",
            "--avatar",
            "walker-0",
        ])
        .arg("--record")
        .arg(&dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("clothcast watch runs");
    // frame after frame, while it walks, the decoded shirt is outside the decoded pants
    let (mut frames, mut worst) = (0, 0);
    let before = view.avatars["walker-0"].positions.clone();
    while frames < 30 {
        until(&mut viewer, &mut view, |_, id| id == Some("walker-0")).await;
        let a = &view.avatars["walker-0"];
        let (p, s) = (&a.positions, &a.layers[0].positions);
        assert_eq!(
            (p.len(), s.len()),
            (3 * pants_db.vertex_count(), 3 * shirt_db.vertex_count())
        );
        worst = worst.max(inside(&pants_db, p, s));
        frames += 1;
    }
    assert!(
        worst <= 3,
        "up to {worst} shirt vertices inside the pants in a frame"
    );
    let moved = super::server::max_moved(&before, &view.avatars["walker-0"].positions);
    assert!(moved > 0.02, "the pants do not move ({moved} m)");
    let (status, out, err) = finish(record).await;
    assert!(status.success(), "watch --record: {err}");
    assert!(
        out.contains("pants+tshirt"),
        "watch names the outfit: {out}"
    );
    let n = pants_db.vertex_count() + shirt_db.vertex_count();
    let cache = read_pc2(BufReader::new(
        File::open(dir.join("walker-0.garment.pc2")).expect("the cache is there"),
    ))
    .expect("the cache reads");
    assert_eq!(cache.points, n);
    assert!(cache.samples.len() >= 40, "{} samples", cache.samples.len());
    let obj = read_obj(
        BufReader::new(File::open(dir.join("walker-0.garment.obj")).expect("the mesh is there")),
        "walker-0.garment.obj",
    )
    .expect("the mesh reads");
    assert_eq!(obj.positions.len(), n);
    assert_eq!(
        obj.triangles.len(),
        pants_db.garment.triangles.len() + shirt_db.garment.triangles.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
    // outfits that cannot be worn are refused by name; the avatar keeps its own
    let mut publisher = connect_publisher(&url).await;
    for (outfit, code, says) in [
        (vec!["pants", "ballgown"], "unknown_garment", "ballgown"),
        (vec!["pants", "pants"], "bad_outfit", "twice"),
        (vec!["a", "b", "c", "d", "e"], "bad_outfit", "1 to 4"),
    ] {
        publisher
            .send(&ClientMessage::wear("walker-0", &outfit))
            .await
            .expect("wear");
        let message = expect_error(&mut publisher, code).await;
        assert!(message.contains(says), "{outfit:?}: {message}");
    }
    let both = serde_json::json!({"type": "wear", "avatar": "walker-0", "garment": "pants", "garments": ["tshirt"]});
    publisher
        .send_raw(tokio_tungstenite::tungstenite::Message::text(
            both.to_string(),
        ))
        .await
        .expect("wear");
    assert!(
        expect_error(&mut publisher, "bad_outfit")
            .await
            .contains("not both")
    );
    until(&mut viewer, &mut view, |v, id| {
        id == Some("walker-0") && v.avatars["walker-0"].layers.len() == 1
    })
    .await;
    let (status, _, err) = finish(play).await;
    assert!(status.success(), "play: {err}");
    server.shutdown().await;
}
