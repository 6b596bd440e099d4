//! Writing files whole: under a temporary name of the writer's own, then renamed, so
//! that a reader (or a crash) never sees half a file and two writers of one path never
//! write into the same temporary file.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::db::DbError;

/// A name beside `path` that no other writer uses (process id and a per-process
/// counter).
fn temporary_beside(path: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".partial.{}.{n}", std::process::id()));
    path.with_file_name(name)
}

/// Whether `path` names something that is written into rather than replaced: it
/// exists (links followed) and is neither a regular file nor a folder — a device
/// (`/dev/null`), a pipe (`/dev/stdout` under a shell pipe, a FIFO) or a socket. A
/// rename onto it would replace the node itself (as root, `/dev/full` became a file).
pub(crate) fn is_stream(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir())
}

/// Writes `path` whole by `write` (creating its folder): into a temporary name of
/// this writer's own, then renamed onto `path`, the temporary file removed when
/// anything fails. Concurrent writers of one path each write a whole file, and the
/// last rename wins. A device, pipe or socket ([`is_stream`]) is written into instead.
pub(crate) fn write_with(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let run = |file: File| {
        let mut w = BufWriter::new(file);
        write(&mut w)?;
        w.flush()
    };
    if is_stream(path) {
        return run(std::fs::OpenOptions::new().write(true).open(path)?);
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = temporary_beside(path);
    let written = File::create(&tmp)
        .and_then(run)
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// [`write_with`] of `bytes`, failures as [`DbError::Io`] naming `path`.
pub(crate) fn write_whole(path: &Path, bytes: &[u8]) -> Result<(), DbError> {
    write_with(path, |w| w.write_all(bytes)).map_err(|e| DbError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    })
}
