//! Fuzzes the example database reader (`.ccdb`, read by `serve`, `eval`, `inspect`,
//! `merge`): arbitrary bytes are refused with an error or read, never a panic or an
//! allocation the file's size does not justify. Run (nightly + cargo-fuzz):
//! `scripts/fuzz.sh 300 db` (seeded with `tests/fixtures/db/v1`).
#![no_main]

use clothcast::sor::Database;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = Database::from_bytes(data);
});
