//! Writing database files: whole under a name of the writer's own, and never one no
//! reader would take (see `file.rs` and [`Database::write`]).

use super::*;

/// A database of more examples than a reader takes is not written (the examples here
/// are empty: only their count matters), and nothing is left where it would have gone.
#[test]
fn a_database_of_too_many_examples_is_not_written() {
    let golden =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/db/v1/small.ccdb");
    let mut db = Database::read(&golden).expect("golden database reads");
    let mut empty = db.examples[0].clone();
    empty.positions = Vec::new();
    empty.remote_bone = Vec::new();
    empty.alpha = Vec::new();
    empty.translation = Vec::new();
    empty.body_vertex = Vec::new();
    empty.clearance = Vec::new();
    empty.distance_weights = Vec::new();
    db.examples = vec![empty; crate::sor::MAX_EXAMPLES + 1];
    let path = std::env::temp_dir().join(format!("clothcast-too-many-{}.ccdb", std::process::id()));
    let e = db.write(&path).expect_err("too many examples");
    assert!(matches!(e, DbError::TooManyExamples(n) if n == crate::sor::MAX_EXAMPLES + 1));
    assert_eq!(
        e.to_string(),
        "a database holds at most 100000 examples; this one has 100001"
    );
    assert!(!path.exists());
}

/// Writers of one database file at once (two `serve`s baking the default cache, or
/// threads) each write a whole file under a name of their own and rename it: whichever
/// rename lands last, the file reads, and no temporary file is left behind.
#[test]
fn concurrent_writers_of_one_database_leave_a_whole_file() {
    let golden =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/db/v1/small.ccdb");
    let db = std::sync::Arc::new(Database::read(&golden).expect("golden database reads"));
    let dir = std::env::temp_dir().join(format!("clothcast-writers-{}", std::process::id()));
    let path = dir.join("cache.ccdb");
    let writers: Vec<_> = (0..4)
        .map(|_| {
            let (db, path) = (std::sync::Arc::clone(&db), path.clone());
            std::thread::spawn(move || {
                (0..5)
                    .map(|_| db.write(&path).map_err(|e| e.to_string()))
                    .collect::<Result<Vec<_>, _>>()
            })
        })
        .collect();
    for w in writers {
        w.join().expect("writer").expect("every write succeeds");
    }
    let back = Database::read(&path).expect("the file reads");
    assert_eq!(back.examples.len(), db.examples.len());
    let names: Vec<_> = std::fs::read_dir(&dir)
        .expect("dir")
        .filter_map(|e| e.ok().map(|e| e.file_name()))
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("cache.ccdb")]);
    let _ = std::fs::remove_dir_all(&dir);
}
