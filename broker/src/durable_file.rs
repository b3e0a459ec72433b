//! Files replaced whole or not at all across kill -9, with plain blocking `std::fs` (for code
//! off the shards: the controller's Raft vote and committed id, its log's front rewrite, and
//! `strata recover-metadata`). Written as Kafka writes `quorum-state`: to a temporary file,
//! fsynced, renamed over the old one, and the directory fsynced, so a crash leaves the old
//! contents or the new, never a mix; `write` returns only once all of that is done (openraft's
//! `save_vote` must be durable when it returns). Shard code uses `shard::io`'s equivalent.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

/// Replaces `path`'s contents with `bytes`, durably (see the module comment).
pub fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let temporary = path.with_extension("tmp");
    {
        let mut file = File::create(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    std::fs::rename(&temporary, path)?;
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => File::open(dir)?.sync_all(),
        _ => Ok(()),
    }
}

/// The contents of `path`, or `None` when it was never written. A temporary file left by a
/// crash before its rename is ignored (and removed): its write never completed.
pub fn read(path: &Path) -> io::Result<Option<Vec<u8>>> {
    let _ = std::fs::remove_file(path.with_extension("tmp"));
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("strata-state-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    #[test]
    fn a_write_replaces_the_contents_and_a_missing_file_reads_as_none() {
        let path = temp_dir("replace").join("raft-state.json");
        assert_eq!(read(&path).expect("read"), None);
        write(&path, b"{\"vote\":1}").expect("write");
        write(&path, b"{\"vote\":2}").expect("write");
        assert_eq!(read(&path).expect("read").as_deref(), Some(&b"{\"vote\":2}"[..]));
    }

    #[test]
    fn a_crash_before_the_rename_leaves_the_old_contents() {
        let path = temp_dir("crash").join("raft-state.json");
        write(&path, b"old").expect("write");
        // What a crash between the temporary file's write and the rename leaves behind.
        std::fs::write(path.with_extension("tmp"), b"half-writ").expect("leftover");
        assert_eq!(read(&path).expect("read").as_deref(), Some(&b"old"[..]));
        assert!(!path.with_extension("tmp").exists(), "the leftover is removed");
    }
}
