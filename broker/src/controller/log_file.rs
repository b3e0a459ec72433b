//! The controller's Raft log on disk: one append-only file of frames
//! `[len u32 LE][crc32c u32 LE][payload]` (ARCHITECTURE.md, "Cluster control plane").
//!
//! Durability rule: `append` returns only after the frames are written and `fdatasync`ed, so
//! an entry the controller acknowledges (to openraft, which then votes or answers with it)
//! survives kill -9. Recovery (`open`) reads frames from the start and stops at the first
//! one that is cut short, longer than `FRAME_BYTES_MAX` or fails its CRC. If nothing valid
//! follows it, it is a torn tail, what a crash during an append leaves (frames never
//! acknowledged): it is truncated and the truncation synced before the file is used. If a
//! whole valid frame follows it (where its length says it ends), the damage is inside the
//! log, in frames that may have been acknowledged: `open` refuses with `InvalidData` and
//! changes nothing, because cutting there could silently drop entries this node voted with.
//! (A damaged length field inside the log cannot be told from a torn tail this way; it is
//! truncated like one, and `Recovered::truncated_bytes` reports the loss.) A failed write or
//! sync poisons the file: after an fsync error the kernel may have dropped the dirty pages,
//! so nothing written later could be trusted; the controller must restart and recover.
//! Frame `i` of the file is the `i`-th payload; which Raft index it holds is the caller's
//! business (the payload says).
//!
//! Runs on: the controller thread only (plain blocking `std::fs`; never a shard).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Frame header: payload length and the payload's CRC32C.
const HEADER_BYTES: usize = 8;
/// The largest payload a frame may carry (a metadata entry is far smaller: 10,000 partition
/// records are about 2 MB of JSON). A longer length is a corrupt header.
pub const FRAME_BYTES_MAX: usize = 64 << 20;

/// What `open` found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Every whole, valid frame's payload, in file order.
    pub payloads: Vec<Vec<u8>>,
    /// Bytes cut from the end (a torn or corrupt tail), 0 for a clean file.
    pub truncated_bytes: u64,
}

/// An open log file: where each frame starts, and the end of the last one.
#[derive(Debug)]
pub struct LogFile {
    path: PathBuf,
    file: File,
    /// Start offset of each frame.
    starts: Vec<u64>,
    end: u64,
    /// A write or sync failed: every later change is refused.
    failed: bool,
}

impl LogFile {
    /// Opens (creating if missing) the log at `path`, recovering it as described above.
    pub fn open(path: &Path) -> io::Result<(LogFile, Recovered)> {
        let mut file =
            OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
        let length = file.metadata()?.len();
        let mut bytes = Vec::with_capacity(usize::try_from(length).unwrap_or(0));
        file.seek(SeekFrom::Start(0))?;
        file.read_to_end(&mut bytes)?;
        let (payloads, starts, end) = scan(&bytes);
        if let Some(next) = damaged_inside(&bytes, end) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: the frame at byte {end} is damaged but a valid frame follows at byte \
                     {next}: the log is corrupt inside, not torn at its end; refusing to cut it",
                    path.display()
                ),
            ));
        }
        let truncated_bytes = length - end;
        if truncated_bytes > 0 {
            file.set_len(end)?;
            file.sync_all()?;
        }
        if length == 0 {
            // A new file: its directory entry must survive a crash too.
            sync_parent(path)?;
        }
        let log = LogFile { path: path.to_path_buf(), file, starts, end, failed: false };
        Ok((log, Recovered { payloads, truncated_bytes }))
    }

    /// Frames in the file.
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// Appends one frame per payload and syncs them: durable when this returns `Ok`. A payload
    /// over `FRAME_BYTES_MAX` is refused before anything is written.
    pub fn append(&mut self, payloads: &[Vec<u8>]) -> io::Result<()> {
        self.usable()?;
        if let Some(big) = payloads.iter().find(|p| p.len() > FRAME_BYTES_MAX) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a {} byte log entry is over the {FRAME_BYTES_MAX} byte frame limit",
                    big.len()
                ),
            ));
        }
        let mut out = Vec::with_capacity(payloads.iter().map(|p| p.len() + HEADER_BYTES).sum());
        let mut starts = Vec::with_capacity(payloads.len());
        for payload in payloads {
            starts.push(self.end + out.len() as u64);
            // The length fits: checked against FRAME_BYTES_MAX above.
            out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
            out.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
            out.extend_from_slice(payload);
        }
        self.file.seek(SeekFrom::Start(self.end))?;
        if let Err(error) = self.file.write_all(&out).and_then(|()| self.file.sync_data()) {
            self.failed = true;
            return Err(error);
        }
        self.end += out.len() as u64;
        self.starts.extend(starts);
        Ok(())
    }

    /// Keeps the first `keep` frames and removes the rest (Raft's log truncation after a
    /// conflicting leader), synced before it returns.
    pub fn truncate(&mut self, keep: usize) -> io::Result<()> {
        self.usable()?;
        if keep >= self.starts.len() {
            return Ok(());
        }
        let end = self.starts[keep];
        if let Err(error) = self.file.set_len(end).and_then(|()| self.file.sync_all()) {
            self.failed = true;
            return Err(error);
        }
        self.starts.truncate(keep);
        self.end = end;
        Ok(())
    }

    /// Rewrites the file without its first `drop` frames (after a snapshot covers them): the
    /// rest is written to a temporary file, synced, renamed over the log and the directory
    /// synced, so a crash leaves either the old file or the new one.
    pub fn drop_front(&mut self, drop: usize) -> io::Result<()> {
        self.usable()?;
        if drop == 0 {
            return Ok(());
        }
        let from = self.starts.get(drop).copied().unwrap_or(self.end);
        let mut rest = vec![0; usize::try_from(self.end - from).unwrap_or(0)];
        self.file.seek(SeekFrom::Start(from))?;
        self.file.read_exact(&mut rest)?;
        crate::durable_file::write(&self.path, &rest)?;
        self.file = OpenOptions::new().read(true).write(true).open(&self.path)?;
        self.starts = self.starts.iter().skip(drop).map(|start| start - from).collect();
        self.end -= from;
        Ok(())
    }
}

impl LogFile {
    fn usable(&self) -> io::Result<()> {
        if self.failed {
            return Err(io::Error::other(format!(
                "{}: an earlier write or sync failed; restart to recover the log",
                self.path.display()
            )));
        }
        Ok(())
    }
}

/// Where a whole valid frame follows the damaged frame at `at` (at the end its length field
/// gives), if one does: then the damage is inside the log, not a torn tail.
fn damaged_inside(bytes: &[u8], at: u64) -> Option<u64> {
    let at = usize::try_from(at).ok()?;
    let header = bytes.get(at..at + HEADER_BYTES)?;
    let length = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
    if length > FRAME_BYTES_MAX {
        return None;
    }
    let next = at + HEADER_BYTES + length;
    let (frames, _, _) = scan(bytes.get(next..)?);
    (!frames.is_empty()).then_some(next as u64)
}

/// The valid frames at the start of `bytes`: payloads, frame starts, and where they end.
fn scan(bytes: &[u8]) -> (Vec<Vec<u8>>, Vec<u64>, u64) {
    let mut payloads = Vec::new();
    let mut starts = Vec::new();
    let mut at = 0usize;
    while let Some(header) = bytes.get(at..at + HEADER_BYTES) {
        let length = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
        if length > FRAME_BYTES_MAX {
            break;
        }
        let Some(payload) = bytes.get(at + HEADER_BYTES..at + HEADER_BYTES + length) else { break };
        if crc32c::crc32c(payload) != crc {
            break;
        }
        starts.push(at as u64);
        payloads.push(payload.to_vec());
        at += HEADER_BYTES + length;
    }
    (payloads, starts, at as u64)
}

fn sync_parent(path: &Path) -> io::Result<()> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => File::open(dir)?.sync_all(),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_log(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("strata-log-file-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir.join("raft.log")
    }

    fn entries(n: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| format!("{{\"entry\":{i},\"pad\":\"{}\"}}", "x".repeat(i * 7)).into_bytes())
            .collect()
    }

    #[test]
    fn appended_frames_are_read_back_in_order_after_reopening() {
        let path = temp_log("reopen");
        let (mut log, recovered) = LogFile::open(&path).expect("open");
        assert_eq!(recovered, Recovered::default());
        log.append(&entries(3)).expect("append");
        log.append(&entries(5)[3..]).expect("append");
        drop(log);
        let (log, recovered) = LogFile::open(&path).expect("reopen");
        assert_eq!(recovered.payloads, entries(5));
        assert_eq!((log.len(), recovered.truncated_bytes), (5, 0));
    }

    #[test]
    fn a_tail_torn_at_any_byte_is_truncated_to_the_last_whole_frame() {
        let path = temp_log("torn");
        let (mut log, _) = LogFile::open(&path).expect("open");
        log.append(&entries(4)).expect("append");
        let whole = std::fs::read(&path).expect("read");
        let last_start = log.starts[3] as usize;
        drop(log);
        for cut in last_start..whole.len() {
            std::fs::write(&path, &whole[..cut]).expect("write");
            let (mut log, recovered) = LogFile::open(&path).expect("recover");
            assert_eq!(recovered.payloads, entries(3), "cut at {cut}");
            assert_eq!(recovered.truncated_bytes, (cut - last_start) as u64);
            assert_eq!(std::fs::metadata(&path).expect("stat").len(), last_start as u64);
            // The log goes on from the truncation point.
            log.append(&entries(4)[3..]).expect("append after recovery");
            drop(log);
            assert_eq!(LogFile::open(&path).expect("reopen").1.payloads, entries(4));
        }
    }

    #[test]
    fn a_damaged_frame_inside_the_log_is_refused_and_a_damaged_last_frame_is_cut() {
        let path = temp_log("flip");
        let (mut log, _) = LogFile::open(&path).expect("open");
        log.append(&entries(5)).expect("append");
        let whole = std::fs::read(&path).expect("read");
        let starts = log.starts.clone();
        drop(log);
        for (frame, start) in starts.iter().enumerate() {
            // A flipped CRC byte or payload byte: the frame's length still finds the next one.
            for at in [*start as usize + 5, *start as usize + HEADER_BYTES] {
                let mut damaged = whole.clone();
                damaged[at] ^= 0x40;
                std::fs::write(&path, &damaged).expect("write");
                if frame + 1 < starts.len() {
                    let error = LogFile::open(&path).expect_err("corrupt inside");
                    assert_eq!(
                        error.kind(),
                        io::ErrorKind::InvalidData,
                        "frame {frame}, byte {at}"
                    );
                    assert_eq!(std::fs::read(&path).expect("read"), damaged, "left as it was");
                } else {
                    let (_, recovered) = LogFile::open(&path).expect("torn tail");
                    assert_eq!(recovered.payloads, entries(frame), "frame {frame}, byte {at}");
                }
            }
        }
    }

    #[test]
    fn an_absurd_length_is_a_corrupt_header_not_an_allocation() {
        let path = temp_log("length");
        let mut bytes = (u32::MAX).to_le_bytes().to_vec();
        bytes.extend_from_slice(&[0; 12]);
        std::fs::write(&path, &bytes).expect("write");
        let (log, recovered) = LogFile::open(&path).expect("recover");
        assert_eq!((log.len(), recovered.truncated_bytes), (0, 16));
    }

    #[test]
    fn truncate_and_drop_front_keep_the_frames_asked_for_across_reopening() {
        let path = temp_log("edit");
        let (mut log, _) = LogFile::open(&path).expect("open");
        log.append(&entries(6)).expect("append");
        log.truncate(4).expect("truncate");
        log.drop_front(1).expect("drop front");
        assert_eq!(log.len(), 3);
        log.append(&entries(7)[6..]).expect("append");
        drop(log);
        let (_, recovered) = LogFile::open(&path).expect("reopen");
        let mut expected = entries(4)[1..].to_vec();
        expected.push(entries(7)[6].clone());
        assert_eq!(recovered.payloads, expected);
    }

    #[test]
    fn an_oversized_entry_is_refused_before_anything_is_written() {
        let path = temp_log("oversized");
        let (mut log, _) = LogFile::open(&path).expect("open");
        let error = log.append(&[vec![0; FRAME_BYTES_MAX + 1]]).expect_err("refused");
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
        assert_eq!((log.len(), std::fs::metadata(&path).expect("stat").len()), (0, 0));
    }
}
